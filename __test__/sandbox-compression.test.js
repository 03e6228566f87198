// Compression on the sandbox lane's base64 transport: on a runner whose uploads measure
// slower than gzip sustains, the workspace archive goes gzip'd before its base64 encoding
// (each 3 MiB slice its own gzip member, `base64 -d | gzip -dc >>` in the sandbox) and the
// restore archive is gzip'd in the sandbox before it is read; on a fast runner every command
// is upstream's. Either way the sandbox tree and the restored workspace are the same.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { prepareCommandManagedRuntime } from "../lib/command-managed-runtime.js";
import { spawnRunner } from "./helpers/sandbox-runner.js";

let work;
beforeAll(() => {
  work = mkdtempSync(path.join(os.tmpdir(), "pc-sandbox-compress-"));
});
afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

/** A runner that takes `msPerMiB` per MiB of stdin, as a slow link would. */
function slowRunner(msPerMiB) {
  const inner = spawnRunner();
  const execute = inner.runner.execute;
  inner.runner.execute = async (input) => {
    const mib = (input.stdin?.length ?? 0) / (1024 * 1024);
    if (mib > 0) await new Promise((resolve) => setTimeout(resolve, mib * msPerMiB));
    return execute(input);
  };
  return inner;
}

/** ~10 MiB of compressible text in a few files, one of which the "agent" edits. */
function workspace(name) {
  const dir = path.join(work, name);
  mkdirSync(path.join(dir, "src"), { recursive: true });
  for (let i = 0; i < 5; i += 1) {
    const lines = Array.from({ length: 60_000 }, (_, k) => `export const value${i}_${k} = compute(${k}, "${name}");`);
    writeFileSync(path.join(dir, "src", `module${i}.ts`), `${lines.join("\n")}\n`);
  }
  return dir;
}

const tree = (dir) =>
  execFileSync(
    "sh",
    ["-c", "find . -path ./.paperclip-runtime -prune -o -type f -print0 | sort -z | xargs -0 sha256sum"],
    { cwd: dir, encoding: "utf8" },
  );

async function cycle(runner, name) {
  const local = workspace(name);
  const remote = path.join(work, `${name}-remote`);
  mkdirSync(remote);
  const prepared = await prepareCommandManagedRuntime({
    runner,
    spec: { remoteCwd: remote, timeoutMs: 120_000 },
    adapterKey: "test",
    workspaceLocalDir: local,
  });
  expect(tree(remote)).toBe(tree(local));
  writeFileSync(
    path.join(remote, "src", "module1.ts"),
    `// edited by the agent\n${readFileSync(path.join(remote, "src", "module1.ts"), "utf8")}`,
  );
  await prepared.restoreWorkspace();
  expect(tree(local)).toBe(tree(remote));
  return local;
}

describe("sandbox lane: gzip before base64 on a slow link", () => {
  it("a slow runner's later slices and the restore archive go gzip'd, with the same trees", async () => {
    const { runner, calls } = slowRunner(800); // 1.25 MiB/s of base64 text
    await cycle(runner, "slow");
    const scripts = calls.map((c) => c.script);
    expect(scripts.some((s) => s.includes("base64 -d | gzip -dc >>"))).toBe(true);
    // The restore's archive: gzip'd by the pull's command, or inside the listing that brings it.
    expect(
      scripts.some(
        (s) => s.includes("gzip -1 -n -f -c") || (s.includes("pcdelta-note pull") && s.includes("Z='gzip -1'")),
      ),
    ).toBe(true);
    // The first slice measured the link: it went as upstream sends it.
    expect(scripts.find((s) => s.includes("base64 -d"))).toMatch(/^base64 -d >> /);
  }, 120_000);

  it("a fast runner's transfers go as upstream sends them, never gzip'd", async () => {
    const { runner, calls } = spawnRunner();
    await cycle(runner, "fast");
    // Only the delta's listings (a few KiB) are gzip'd in the sandbox.
    const compressed = calls.filter((c) => /gzip -/.test(c.script) && !c.script.includes("pcdelta"));
    expect(compressed.map((c) => c.script.slice(0, 200))).toEqual([]);
  }, 120_000);
});
