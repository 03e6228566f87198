// Runs the type test: our public declarations checked against upstream's with tsc.
import { execFileSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

it("every drop-in export is assignable to its upstream declaration (tsc)", () => {
  const tsc = path.join(repo, "node_modules", "typescript", "bin", "tsc");
  let output = "";
  try {
    output = execFileSync(process.execPath, [tsc, "-p", path.join(repo, "__test__", "types")], { encoding: "utf8" });
  } catch (error) {
    output = `${error.stdout ?? ""}${error.stderr ?? ""}`;
    expect.fail(`tsc reported type errors:\n${output}`);
  }
  expect(output.trim()).toBe("");
});
