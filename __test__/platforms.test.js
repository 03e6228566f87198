// The shipped platforms are one list: package.json `napi.targets`, the per-platform
// packages under npm/, the builds of the release workflow, and the builds and test jobs of
// the pull-request workflow (README "Platforms").
import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const read = (rel) => readFileSync(path.join(repo, rel), "utf8");
const targets = [...JSON.parse(read("package.json")).napi.targets].sort();

/** napi-rs's platform name of a Rust target triple (`npm/<name>/`). */
function platformName(triple) {
  const [arch, , os, abi] = triple.split("-");
  const cpu = { x86_64: "x64", aarch64: "arm64" }[arch];
  if (os === "darwin") return `darwin-${cpu}`;
  if (os === "linux") return `linux-${cpu}-${abi}`;
  throw new Error(`no platform name for ${triple}`);
}

/** The `target:` values of the matrix `include` rows of one job in a workflow file. */
function matrixTargets(file, job) {
  const text = read(file);
  const start = text.indexOf(`\n  ${job}:\n`);
  expect(start, `${file} has a job ${job}`).toBeGreaterThanOrEqual(0);
  const rest = text.slice(start + job.length + 5);
  const end = rest.search(/\n {2}[a-z][\w-]*:\n/);
  const body = end < 0 ? rest : rest.slice(0, end);
  return [...body.matchAll(/\{[^}\n]*\btarget: ([\w-]+)/g)].map((m) => m[1]).sort();
}

describe("shipped platforms", () => {
  it("are Unix targets only (the core is built on POSIX directory handles)", () => {
    expect(targets.length).toBeGreaterThan(0);
    for (const triple of targets) expect(triple).toMatch(/-(linux-(gnu|musl)|apple-darwin)$/);
  });

  it("have one npm/<platform> package each, and no other", () => {
    const dirs = readdirSync(path.join(repo, "npm")).sort();
    expect(dirs).toEqual(targets.map(platformName).sort());
    for (const triple of targets) {
      const manifest = JSON.parse(read(`npm/${platformName(triple)}/package.json`));
      expect(manifest.os).toEqual([triple.includes("darwin") ? "darwin" : "linux"]);
      expect(manifest.cpu).toEqual([triple.startsWith("x86_64") ? "x64" : "arm64"]);
    }
  });

  it("are exactly what the release workflow builds", () => {
    expect(matrixTargets(".github/workflows/release.yml", "build")).toEqual(targets);
  });

  it("are exactly what the pull-request workflow builds and tests", () => {
    const ci = ".github/workflows/ci.yml";
    expect(matrixTargets(ci, "build")).toEqual(targets);
    const tested = [
      "x86_64-unknown-linux-gnu", // test-linux-x64-gnu: its own job, Node 20 and 24
      ...matrixTargets(ci, "test-native"),
      ...matrixTargets(ci, "test-musl"),
    ].sort();
    expect(tested).toEqual(targets);
    expect(read(ci)).toMatch(/\n {2}test-linux-x64-gnu:\n/);
  });
});
