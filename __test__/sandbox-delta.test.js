// Delta uploads of the sandbox lane against upstream's full upload (docs/sandbox.md, "Delta
// uploads"): seeded trees, then rounds of seeded changes on the host side, in the sandbox
// (a file rewritten with the same size and mtime included), or both; after each of our
// prepares the sandbox tree equals what upstream's `prepareCommandManagedRuntime` (clear,
// then the whole archive) leaves in a fresh directory for the same local tree, entry by
// entry: kinds, modes, contents, link targets and the mtimes of files and directories. Then
// the top-level names upstream's clear spares, the setting (`auto` takes deltas on every
// link), and every fallback to the full upload.
import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import * as upstream from "@paperclipai/adapter-utils/command-managed-runtime";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { prepareCommandManagedRuntime } from "../lib/command-managed-runtime.js";
import { runnerLink } from "../lib/sandbox/base64-transfer.js";
import { sandboxDeltaStats } from "../lib/sandbox/delta.js";
import { HOST_OPS, inventory, mutate, REMOTE_OPS, sameSizeSameMtime } from "./helpers/merge-triples.js";
import { createRandom, runSeed } from "./helpers/random.js";
import { spawnRunner } from "./helpers/sandbox-runner.js";
import { remoteState } from "./helpers/sshd.js";
import { writeRandomTree } from "./helpers/trees.js";

const seed = runSeed();
const work = mkdtempSync(path.join(os.tmpdir(), "pc-sandbox-delta-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));
afterEach(() => {
  delete process.env.PAPERCLIP_NATIVE_SANDBOX_DELTA;
});
let counter = 0;
const fresh = (label) => {
  const dir = path.join(work, `${label}-${(counter += 1)}`);
  mkdirSync(dir, { recursive: true });
  return dir;
};

/** One prepare of `local` into `remoteDir` through a spawn runner (ours unless `impl` says). */
async function prepare(
  local,
  remoteDir,
  { impl = { prepareCommandManagedRuntime }, made = spawnRunner(), ...rest } = {},
) {
  await impl.prepareCommandManagedRuntime({
    runner: made.runner,
    spec: { remoteCwd: remoteDir, timeoutMs: 60_000 },
    adapterKey: "delta",
    workspaceLocalDir: local,
    ...rest,
  });
  return made;
}

/** What upstream's prepare leaves for `local` in a fresh sandbox directory. */
async function upstreamResult(local, options = {}) {
  const dir = fresh("upstream");
  await prepare(local, dir, { impl: upstream, ...options });
  return remoteState(dir);
}

const deltas = () => sandboxDeltaStats().delta;
const fallbacks = (reason) => sandboxDeltaStats().fallbacks[reason] ?? 0;

describe(`sandbox delta uploads (seed ${seed})`, () => {
  it("leave upstream's tree after seeded changes on the host, in the sandbox, and on both", async () => {
    process.env.PAPERCLIP_NATIVE_SANDBOX_DELTA = "on";
    const rng = createRandom(seed);
    for (let workspace = 0; workspace < 3; workspace += 1) {
      const local = fresh("local");
      await writeRandomTree(rng, local, { maxDepth: 3, maxEntries: 7, special: false });
      execFileSync("chmod", ["-R", "u+rwX", local]);
      // Not a repository (a random `.git` fails both prepares' git probe alike).
      rmSync(path.join(local, ".git"), { recursive: true, force: true });
      const remoteDir = fresh("ours");
      await prepare(local, remoteDir);
      writeFileSync(path.join(remoteDir, ".paperclip-runtime", "kept"), "runtime state");
      expect(remoteState(remoteDir)).toEqual(await upstreamResult(local));
      for (let round = 0; round < 6; round += 1) {
        const side = ["host", "sandbox", "both"][round % 3];
        const applied = [];
        if (side !== "sandbox") {
          applied.push(...mutate(rng, local, HOST_OPS, 1 + rng.int(4), { avoid: ["dirToLink"] }));
          const files = inventory(local).files;
          if (files.length > 0 && sameSizeSameMtime(local, rng.pick(files))) applied.push("host-same-size-and-mtime");
        }
        if (side !== "host") {
          // The agent's changes: anywhere but the runtime's own directory.
          const aside = path.join(work, `runtime-aside-${workspace}`);
          execFileSync("mv", [path.join(remoteDir, ".paperclip-runtime"), aside]);
          execFileSync("chmod", ["-R", "u+rwX", remoteDir]);
          applied.push(
            ...mutate(rng, remoteDir, REMOTE_OPS, 1 + rng.int(4), { avoid: ["excluded"], extra: [] }).map(
              (n) => `sandbox-${n}`,
            ),
          );
          const files = inventory(remoteDir).files;
          if (files.length > 0 && sameSizeSameMtime(remoteDir, rng.pick(files)))
            applied.push("sandbox-same-size-and-mtime");
          execFileSync("mv", [aside, path.join(remoteDir, ".paperclip-runtime")]);
        }
        const before = deltas();
        await prepare(local, remoteDir);
        const context = `workspace ${workspace}, round ${round} (${side}: ${applied.join(", ")})`;
        expect(deltas(), context).toBe(before + 1);
        expect(remoteState(remoteDir), context).toEqual(await upstreamResult(local));
        expect(readFileSync(path.join(remoteDir, ".paperclip-runtime", "kept"), "utf8"), context).toBe("runtime state");
      }
    }
  });

  it("sends only what changed, catches a sandbox file rewritten with the same size and mtime, and removes the sandbox's extras", async () => {
    process.env.PAPERCLIP_NATIVE_SANDBOX_DELTA = "on";
    const local = fresh("changed");
    mkdirSync(path.join(local, "src"));
    for (let i = 0; i < 40; i += 1) writeFileSync(path.join(local, "src", `f${i}.ts`), `export const f${i} = ${i};\n`);
    mkdirSync(path.join(local, "node_modules", "dep"), { recursive: true });
    writeFileSync(path.join(local, "node_modules", "dep", "index.js"), "heavy\n");
    const remoteDir = fresh("changed-remote");
    await prepare(local, remoteDir);
    sameSizeSameMtime(remoteDir, "src/f1.ts");
    writeFileSync(path.join(local, "src", "f2.ts"), "export const f2 = 'host';\n");
    writeFileSync(path.join(remoteDir, "made-by-agent.txt"), "agent\n");
    mkdirSync(path.join(remoteDir, "node_modules", "installed"), { recursive: true });
    const before = sandboxDeltaStats();
    const made = await prepare(local, remoteDir);
    const after = sandboxDeltaStats();
    expect(after.delta).toBe(before.delta + 1);
    // The two files and their directory; the agent's file and the sandbox's node_modules.
    expect(after.sent - before.sent).toBe(3);
    expect(after.removed - before.removed).toBe(2);
    expect(readFileSync(path.join(remoteDir, "src", "f1.ts"), "utf8")).toBe("export const f1 = 1;\n");
    expect(remoteState(remoteDir)).toEqual(await upstreamResult(local));
    // The upload carried the two files, not the tree: well under the full archive's size.
    const uploaded = made.calls.reduce((sum, call) => sum + (call.stdinLength ?? 0), 0);
    expect(uploaded).toBeGreaterThan(0);
    expect(uploaded).toBeLessThan(8 * 1024);
    // Nothing changed: nothing sent, nothing removed, the tree as it was.
    const again = sandboxDeltaStats();
    await prepare(local, remoteDir);
    expect(sandboxDeltaStats().sent).toBe(again.sent);
    expect(sandboxDeltaStats().removed).toBe(again.removed);
    expect(remoteState(remoteDir)).toEqual(await upstreamResult(local));
  });

  it("leaves the top-level names upstream's clear spares alone, as upstream does", async () => {
    process.env.PAPERCLIP_NATIVE_SANDBOX_DELTA = "on";
    const local = fresh("spared");
    writeFileSync(path.join(local, "a.txt"), "a\n");
    mkdirSync(path.join(local, "cache-dir"));
    writeFileSync(path.join(local, "cache-dir", "host.txt"), "host\n");
    const options = { preserveAbsentOnRestore: ["cache-dir", "keep me"] };
    const remoteDir = fresh("spared-remote");
    await prepare(local, remoteDir, options);
    writeFileSync(path.join(remoteDir, "cache-dir", "sandbox.txt"), "sandbox\n");
    writeFileSync(path.join(remoteDir, "keep me"), "sandbox\n");
    writeFileSync(path.join(remoteDir, ".paperclip-upload-123"), "in flight\n");
    writeFileSync(path.join(remoteDir, "other.txt"), "removed\n");
    const expected = path.join(work, "spared-expected");
    execFileSync("cp", ["-a", remoteDir, expected]);
    const before = deltas();
    await prepare(local, remoteDir, options);
    expect(deltas()).toBe(before + 1);
    // Upstream's prepare over the same sandbox tree.
    await prepare(local, expected, { impl: upstream, ...options });
    expect(remoteState(remoteDir)).toEqual(remoteState(expected));
    expect(readFileSync(path.join(remoteDir, "keep me"), "utf8")).toBe("sandbox\n");
    // A spared name that is a pattern: upstream's clear matches it as `find -name` does; the
    // full upload runs.
    const pattern = fallbacks("preserved-pattern");
    await prepare(local, remoteDir, { preserveAbsentOnRestore: ["*.keep"] });
    expect(fallbacks("preserved-pattern")).toBe(pattern + 1);
  });

  it("by default (`auto`) takes a delta on every link, in two runner commands for a small change", async () => {
    const local = fresh("auto");
    writeFileSync(path.join(local, "a.txt"), "a\n");
    const remoteDir = fresh("auto-remote");
    const measured = (bytesPerSecond) => {
      const made = spawnRunner();
      runnerLink(made.runner).observe(bytesPerSecond, 1000);
      return made;
    };
    // A runner measured fast (64 MiB/s): the full upload, then one listing for the manifest.
    let before = fallbacks("no-manifest");
    const first = await prepare(local, remoteDir, { made: measured(64 * 1024 * 1024) });
    expect(fallbacks("no-manifest")).toBe(before + 1);
    expect(first.calls.filter((call) => call.script.includes("pcdelta"))).toHaveLength(1);
    // The next prepare on a fast runner is a delta: the listing, then one command that takes
    // the archive on its stdin, extracts it and lists what it wrote.
    writeFileSync(path.join(local, "b.txt"), "b\n");
    before = deltas();
    const fast = await prepare(local, remoteDir, { made: measured(64 * 1024 * 1024) });
    expect(deltas()).toBe(before + 1);
    expect(fast.calls).toHaveLength(2);
    expect(fast.calls[1].stdinLength).toBeGreaterThan(0);
    expect(remoteState(remoteDir)).toEqual(await upstreamResult(local));
    // A slow runner's delta records its figure: the next runner (not measured yet) takes it,
    // so its restore's archive goes gzip'd as after a measured upload.
    writeFileSync(path.join(local, "c.txt"), "c\n");
    await prepare(local, remoteDir, { made: measured(2 * 1024 * 1024) });
    before = deltas();
    const next = await prepare(local, remoteDir);
    expect(deltas()).toBe(before + 1);
    expect(runnerLink(next.runner).slow()).toBe(true);
    expect(remoteState(remoteDir)).toEqual(await upstreamResult(local));
    // Off: always the full upload.
    process.env.PAPERCLIP_NATIVE_SANDBOX_DELTA = "0";
    before = fallbacks("off");
    const off = await prepare(local, remoteDir);
    expect(fallbacks("off")).toBe(before + 1);
    expect(off.calls.some((call) => call.script.includes("pcdelta"))).toBe(false);
  });

  it("falls back to upstream's full upload, counted, without a manifest, a sandbox directory, or a sandbox that can answer", async () => {
    process.env.PAPERCLIP_NATIVE_SANDBOX_DELTA = "on";
    const local = fresh("fallback");
    writeFileSync(path.join(local, "a.txt"), "a\n");
    mkdirSync(path.join(local, "d"));
    writeFileSync(path.join(local, "d", "b.txt"), "b\n");
    const remoteDir = fresh("fallback-remote");
    let before = fallbacks("no-manifest");
    await prepare(local, remoteDir);
    expect(fallbacks("no-manifest")).toBe(before + 1);
    // The directory went away: the full upload (upstream's clear creates it).
    rmSync(remoteDir, { recursive: true, force: true });
    before = fallbacks("remote-absent");
    await prepare(local, remoteDir);
    expect(fallbacks("remote-absent")).toBe(before + 1);
    expect(remoteState(remoteDir)).toEqual(await upstreamResult(local));
    // A runner that mangles or cuts what the sandbox printed (an output cap), and a sandbox
    // without GNU tar: the listing does not parse, the full upload runs.
    const mangling = (edit) => {
      const made = spawnRunner();
      const execute = made.runner.execute;
      made.runner.execute = async (input) => {
        const result = await execute(input);
        return input.args?.[1]?.includes("pcdelta") ? { ...result, stdout: edit(result.stdout) } : result;
      };
      return made;
    };
    for (const edit of [
      (stdout) => stdout.slice(0, Math.floor(stdout.length / 2)),
      () => "not base64 at all!",
      () => Buffer.from("pcdelta no-gnu-tar\n").toString("base64"),
    ]) {
      // A manifest to start from (the failed listing's full upload records none).
      await prepare(local, remoteDir);
      writeFileSync(path.join(remoteDir, "stray.txt"), "stray\n");
      before = fallbacks("remote-cannot-answer");
      await prepare(local, remoteDir, { made: mangling(edit) });
      expect(fallbacks("remote-cannot-answer")).toBe(before + 1);
      expect(remoteState(remoteDir)).toEqual(await upstreamResult(local));
    }
    // A one-command delta whose answer does not say the archive went in (its header comes
    // after the extraction): the full upload.
    await prepare(local, remoteDir);
    writeFileSync(path.join(local, "a.txt"), "a changed\n");
    const silent = spawnRunner();
    const execute = silent.runner.execute;
    silent.runner.execute = async (input) => {
      const result = await execute(input);
      return input.stdin != null && input.args?.[1]?.includes("| tar -xf -") ? { ...result, stdout: "" } : result;
    };
    before = fallbacks("delta-failed");
    await prepare(local, remoteDir, { made: silent });
    expect(fallbacks("delta-failed")).toBe(before + 1);
    expect(remoteState(remoteDir)).toEqual(await upstreamResult(local));
    // Another local directory synced to the same sandbox directory has no manifest there.
    const other = fresh("fallback-other");
    writeFileSync(path.join(other, "c.txt"), "c\n");
    before = fallbacks("no-manifest");
    await prepare(other, remoteDir);
    expect(fallbacks("no-manifest")).toBe(before + 1);
    expect(remoteState(remoteDir)).toEqual(await upstreamResult(other));
  });

  it("stops with an AbortError when aborted during a delta, and the next prepare still ends in upstream's tree", async () => {
    process.env.PAPERCLIP_NATIVE_SANDBOX_DELTA = "on";
    const local = fresh("abort");
    mkdirSync(path.join(local, "src"));
    for (let i = 0; i < 20; i += 1) writeFileSync(path.join(local, "src", `f${i}.ts`), `export const f${i} = ${i};\n`);
    const remoteDir = fresh("abort-remote");
    await prepare(local, remoteDir);
    writeFileSync(path.join(local, "src", "f3.ts"), "export const f3 = 'changed';\n");
    writeFileSync(path.join(remoteDir, "extra.txt"), "agent\n");
    // Aborted as the listing runs: the delta's upload never starts.
    const controller = new AbortController();
    const made = spawnRunner({ onCall: () => controller.abort() });
    await expect(prepare(local, remoteDir, { made, signal: controller.signal })).rejects.toMatchObject({
      name: "AbortError",
    });
    expect(made.calls.every((call) => call.stdinLength == null)).toBe(true);
    const before = deltas();
    await prepare(local, remoteDir);
    expect(deltas()).toBe(before + 1);
    expect(remoteState(remoteDir)).toEqual(await upstreamResult(local));
  });

  it("never trusts the manifest over the sandbox: one recorded for other files still ends in upstream's tree", async () => {
    process.env.PAPERCLIP_NATIVE_SANDBOX_DELTA = "on";
    const local = fresh("forged");
    writeFileSync(path.join(local, "a.txt"), "aaaa\n");
    const remoteDir = fresh("forged-remote");
    await prepare(local, remoteDir);
    // The sandbox directory replaced by another with the same names, sizes and mtimes (a
    // new sandbox at the same path): other inodes and ctimes, so everything goes again.
    const sent = statSync(path.join(remoteDir, "a.txt"));
    rmSync(remoteDir, { recursive: true, force: true });
    mkdirSync(remoteDir);
    writeFileSync(path.join(remoteDir, "a.txt"), "bbbb\n");
    chmodSync(path.join(remoteDir, "a.txt"), sent.mode & 0o7777);
    utimesSync(path.join(remoteDir, "a.txt"), sent.atime, sent.mtime);
    const before = deltas();
    await prepare(local, remoteDir);
    expect(deltas()).toBe(before + 1);
    expect(readFileSync(path.join(remoteDir, "a.txt"), "utf8")).toBe("aaaa\n");
    expect(remoteState(remoteDir)).toEqual(await upstreamResult(local));
  });
});
