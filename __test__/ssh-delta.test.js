// Delta uploads of the SSH lane against upstream's full upload (docs "SSH"): seeded trees,
// then rounds of seeded changes on the host side, on the remote side (a remote file
// rewritten with the same size and mtime included), or both; after each of our prepares
// the remote tree equals what upstream's `prepareWorkspaceForSshExecution` (host ssh + tar,
// clear then full upload) leaves in a fresh directory for the same local tree, entry by
// entry: kinds, modes, contents, link targets and the mtimes of files and directories.
// Then every fallback to the full upload (no manifest, a missing remote directory, a
// remote that cannot answer, delta off) and the managed runtime's run directory started
// from the previous restored run's. Run as an unprivileged user (scripts/test/full.sh).
import { execFileSync } from "node:child_process";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import * as upstream from "@paperclipai/adapter-utils/ssh";
import { describe, expect, it } from "vitest";
import { resolveInstanceRoot } from "../lib/instance-root.js";
import { prepareRemoteManagedRuntime } from "../lib/remote-managed-runtime.js";
import { sshDeltaStats } from "../lib/ssh-delta.js";
import { prepareWorkspaceForSshExecution } from "../lib/ssh.js";
import { HOST_OPS, inventory, mutate, REMOTE_OPS, sameSizeSameMtime } from "./helpers/merge-triples.js";
import { createRandom, runSeed } from "./helpers/random.js";
import { remoteState } from "./helpers/sshd.js";
import { sshdSuite } from "./helpers/sshd-suite.js";
import { writeRandomTree } from "./helpers/trees.js";

const seed = runSeed();
const suite = sshdSuite("pc-ssh-delta-");
const places = suite.places;

/** What upstream's prepare leaves for `local` in a fresh remote directory. */
async function upstreamResult(local) {
  const dir = places.remote("upstream");
  await upstream.prepareWorkspaceForSshExecution({ spec: suite.server.spec, localDir: local, remoteDir: dir });
  return remoteState(dir);
}

const delta = () => sshDeltaStats().delta;
const fallbacks = (reason) => sshDeltaStats().fallbacks[reason] ?? 0;

describe(`SSH delta uploads (seed ${seed})`, () => {
  it("leaves upstream's tree after seeded changes on the host, on the remote, and on both", async () => {
    const rng = createRandom(seed);
    for (let workspace = 0; workspace < 3; workspace += 1) {
      const local = places.local("local");
      await writeRandomTree(rng, local, { maxDepth: 3, maxEntries: 7, special: false });
      // Writable and searchable by the owner, so the seeded edits below can reach every entry.
      execFileSync("chmod", ["-R", "u+rwX", local]);
      const remoteDir = places.remote("ours");
      await prepareWorkspaceForSshExecution({ spec: suite.server.spec, localDir: local, remoteDir });
      mkdirSync(path.join(remoteDir, ".paperclip-runtime"), { recursive: true });
      writeFileSync(path.join(remoteDir, ".paperclip-runtime", "kept"), "runtime state");
      expect(remoteState(remoteDir)).toEqual(await upstreamResult(local));
      for (let round = 0; round < 6; round += 1) {
        const side = ["host", "remote", "both"][round % 3];
        const applied = [];
        if (side !== "remote") {
          applied.push(...mutate(rng, local, HOST_OPS, 1 + rng.int(4), { avoid: ["dirToLink"] }));
          const files = inventory(local).files;
          if (files.length > 0 && sameSizeSameMtime(local, rng.pick(files))) applied.push("host-same-size-and-mtime");
        }
        if (side !== "host") {
          // The agent's changes: anywhere but the runtime's own directory.
          const aside = path.join(suite.work, `runtime-aside-${workspace}`);
          execFileSync("mv", [path.join(remoteDir, ".paperclip-runtime"), aside]);
          execFileSync("chmod", ["-R", "u+rwX", remoteDir]);
          applied.push(
            ...mutate(rng, remoteDir, REMOTE_OPS, 1 + rng.int(4), { avoid: ["excluded"], extra: [] }).map(
              (n) => `remote-${n}`,
            ),
          );
          const files = inventory(remoteDir).files.filter((f) => !f.startsWith(".paperclip-runtime/"));
          if (files.length > 0 && sameSizeSameMtime(remoteDir, rng.pick(files)))
            applied.push("remote-same-size-and-mtime");
          rmSync(path.join(remoteDir, ".paperclip-runtime"), { recursive: true, force: true });
          execFileSync("mv", [aside, path.join(remoteDir, ".paperclip-runtime")]);
        }
        const before = delta();
        await prepareWorkspaceForSshExecution({ spec: suite.server.spec, localDir: local, remoteDir });
        const context = `workspace ${workspace}, round ${round} (${side}: ${applied.join(", ")})`;
        expect(delta(), context).toBe(before + 1);
        expect(remoteState(remoteDir), context).toEqual(await upstreamResult(local));
        expect(readFileSync(path.join(remoteDir, ".paperclip-runtime", "kept"), "utf8"), context).toBe("runtime state");
      }
    }
  });

  it("catches a remote file rewritten with the same size and mtime (its ctime moved) and sends it again", async () => {
    const local = places.local("ctime");
    mkdirSync(path.join(local, "src"));
    writeFileSync(path.join(local, "src", "a.ts"), "export const a = 1;\n");
    writeFileSync(path.join(local, "src", "b.ts"), "export const b = 2;\n");
    const remoteDir = places.remote("ctime");
    await prepareWorkspaceForSshExecution({ spec: suite.server.spec, localDir: local, remoteDir });
    sameSizeSameMtime(remoteDir, "src/a.ts");
    expect(readFileSync(path.join(remoteDir, "src", "a.ts"), "utf8")).not.toBe("export const a = 1;\n");
    const before = delta();
    await prepareWorkspaceForSshExecution({ spec: suite.server.spec, localDir: local, remoteDir });
    expect(delta()).toBe(before + 1);
    expect(readFileSync(path.join(remoteDir, "src", "a.ts"), "utf8")).toBe("export const a = 1;\n");
  });

  it("falls back to upstream's full upload, counted, without a manifest, a remote directory or a remote that can answer", async () => {
    const local = places.local("fallback");
    writeFileSync(path.join(local, "a.txt"), "a\n");
    mkdirSync(path.join(local, "d"));
    writeFileSync(path.join(local, "d", "b.txt"), "b\n");
    const remoteDir = places.remote("fallback");
    // No manifest: the first upload.
    let before = fallbacks("no-manifest");
    await prepareWorkspaceForSshExecution({ spec: suite.server.spec, localDir: local, remoteDir });
    expect(fallbacks("no-manifest")).toBe(before + 1);
    // The remote directory went away: the full upload again (upstream's clear creates it).
    rmSync(remoteDir, { recursive: true, force: true });
    before = fallbacks("remote-absent");
    await prepareWorkspaceForSshExecution({ spec: suite.server.spec, localDir: local, remoteDir });
    expect(fallbacks("remote-absent")).toBe(before + 1);
    expect(remoteState(remoteDir)).toEqual(await upstreamResult(local));
    // A directory the remote `find` cannot read: its listing fails, so the full upload runs
    // (upstream's clear removes the directory).
    const locked = path.join(remoteDir, "locked");
    mkdirSync(locked);
    chmodSync(locked, 0o300);
    before = fallbacks("remote-cannot-answer");
    await prepareWorkspaceForSshExecution({ spec: suite.server.spec, localDir: local, remoteDir });
    expect(fallbacks("remote-cannot-answer")).toBe(before + 1);
    expect(existsSync(locked)).toBe(false);
    expect(remoteState(remoteDir)).toEqual(await upstreamResult(local));
    // Another local directory synced to the same remote directory has no manifest there.
    const other = places.local("fallback-other");
    writeFileSync(path.join(other, "c.txt"), "c\n");
    before = fallbacks("no-manifest");
    await prepareWorkspaceForSshExecution({ spec: suite.server.spec, localDir: other, remoteDir });
    expect(fallbacks("no-manifest")).toBe(before + 1);
    expect(remoteState(remoteDir)).toEqual(await upstreamResult(other));
    // Off: PAPERCLIP_NATIVE_SSH_DELTA=0 always sends everything.
    process.env.PAPERCLIP_NATIVE_SSH_DELTA = "0";
    try {
      before = fallbacks("off");
      await prepareWorkspaceForSshExecution({ spec: suite.server.spec, localDir: other, remoteDir });
      expect(fallbacks("off")).toBe(before + 1);
    } finally {
      delete process.env.PAPERCLIP_NATIVE_SSH_DELTA;
    }
  });

  it("writes the manifest after the prepare returns: this process reads it at once, another from the disk", async () => {
    const local = places.local("deferred");
    for (let i = 0; i < 4; i += 1) writeFileSync(path.join(local, `f${i}.txt`), `file ${i}\n`);
    const remoteDir = places.remote("deferred");
    const saved = process.env.PAPERCLIP_HOME;
    const home = path.join(suite.work, "home-deferred");
    process.env.PAPERCLIP_HOME = home;
    try {
      await prepareWorkspaceForSshExecution({ spec: suite.server.spec, localDir: local, remoteDir });
      // The next prepare of this process, at once: the manifest as it is being written.
      writeFileSync(path.join(local, "f0.txt"), "changed 0\n");
      let before = delta();
      await prepareWorkspaceForSshExecution({ spec: suite.server.spec, localDir: local, remoteDir });
      expect(delta()).toBe(before + 1);
      // On the disk once written (renamed into place whole): the second prepare's manifest,
      // which recorded f0 as it now is, for another process.
      const dir = path.join(resolveInstanceRoot(process.env), "cache", "ssh-delta");
      const recordedSize = () => {
        const names = existsSync(dir) ? readdirSync(dir).filter((n) => n.endsWith(".json")) : [];
        if (names.length !== 1) return names.length;
        return JSON.parse(readFileSync(path.join(dir, names[0]), "utf8")).files["f0.txt"]?.[0];
      };
      for (let i = 0; i < 200 && recordedSize() !== "changed 0\n".length; i += 1)
        await new Promise((r) => setTimeout(r, 25));
      expect(recordedSize()).toBe("changed 0\n".length);
      // Another process: nothing of this one's in memory.
      writeFileSync(path.join(local, "f1.txt"), "changed 1\n");
      const script = [
        `const { prepareWorkspaceForSshExecution } = await import(${JSON.stringify(new URL("../lib/ssh.js", import.meta.url).href)});`,
        `const { sshDeltaStats } = await import(${JSON.stringify(new URL("../lib/ssh-delta.js", import.meta.url).href)});`,
        "await prepareWorkspaceForSshExecution(JSON.parse(process.env.PREPARE_INPUT));",
        "console.log(JSON.stringify(sshDeltaStats()));",
      ].join("\n");
      const stats = JSON.parse(
        execFileSync(process.execPath, ["--input-type=module", "-e", script], {
          env: {
            ...process.env,
            PREPARE_INPUT: JSON.stringify({ spec: suite.server.spec, localDir: local, remoteDir }),
          },
          encoding: "utf8",
        }),
      );
      expect(stats).toMatchObject({ delta: 1, full: 0 });
      expect(remoteState(remoteDir)).toEqual(await upstreamResult(local));
    } finally {
      if (saved === undefined) delete process.env.PAPERCLIP_HOME;
      else process.env.PAPERCLIP_HOME = saved;
    }
  });

  it("compressed on the wire (gzip before the remote tar), the full upload and the delta leave upstream's tree", async () => {
    const rng = createRandom(seed ^ 0x77);
    const local = places.local("gzip");
    await writeRandomTree(rng, local, { maxDepth: 3, maxEntries: 7, special: false });
    execFileSync("chmod", ["-R", "u+rwX", local]);
    const remoteDir = places.remote("gzip");
    process.env.PAPERCLIP_NATIVE_SSH_COMPRESS = "gzip";
    try {
      await prepareWorkspaceForSshExecution({ spec: suite.server.spec, localDir: local, remoteDir });
      expect(remoteState(remoteDir)).toEqual(await upstreamResult(local));
      mutate(rng, local, HOST_OPS, 4, { avoid: ["dirToLink"] });
      const before = delta();
      await prepareWorkspaceForSshExecution({ spec: suite.server.spec, localDir: local, remoteDir });
      expect(delta()).toBe(before + 1);
      expect(remoteState(remoteDir)).toEqual(await upstreamResult(local));
    } finally {
      delete process.env.PAPERCLIP_NATIVE_SSH_COMPRESS;
    }
  });

  it("never trusts a manifest over the remote: a forged manifest still ends in upstream's tree", async () => {
    const local = places.local("forged");
    for (let i = 0; i < 5; i += 1) writeFileSync(path.join(local, `f${i}.txt`), `file ${i}\n`);
    const remoteDir = places.remote("forged");
    await prepareWorkspaceForSshExecution({ spec: suite.server.spec, localDir: local, remoteDir });
    // Every remote file replaced behind the manifest's back (new inodes, same sizes and mtimes).
    for (let i = 0; i < 5; i += 1) {
      const full = path.join(remoteDir, `f${i}.txt`);
      const st = statSync(full);
      rmSync(full);
      writeFileSync(full, `FILE ${i}\n`);
      utimesSync(full, st.atime, st.mtime);
    }
    await prepareWorkspaceForSshExecution({ spec: suite.server.spec, localDir: local, remoteDir });
    expect(remoteState(remoteDir)).toEqual(await upstreamResult(local));
  });

  it("starts a managed run's directory from the previous run's once that run was restored, and not before", async () => {
    const local = places.local("managed");
    mkdirSync(path.join(local, "src"));
    for (let i = 0; i < 20; i += 1)
      writeFileSync(path.join(local, "src", `m${i}.ts`), `export const m${i} = ${i};\n`.repeat(20));
    const spec = { ...suite.server.spec, remoteCwd: places.remote("managed-base") };
    const run = (runId) => prepareRemoteManagedRuntime({ spec, runId, adapterKey: "test", workspaceLocalDir: local });
    const first = await run("run-1");
    // Not restored yet: the next run gets a full upload of its own.
    const seededBefore = sshDeltaStats().seeded;
    const second = await run("run-2");
    expect(sshDeltaStats().seeded).toBe(seededBefore);
    expect(existsSync(first.workspaceRemoteDir)).toBe(true);
    await first.restoreWorkspace();
    await second.restoreWorkspace();
    // run-2 was restored: run-3 starts from its directory, moved into place.
    writeFileSync(path.join(local, "src", "m3.ts"), "changed\n");
    const third = await run("run-3");
    expect(sshDeltaStats().seeded).toBe(seededBefore + 1);
    expect(existsSync(second.workspaceRemoteDir)).toBe(false);
    expect(existsSync(first.workspaceRemoteDir)).toBe(true);
    const fresh = places.remote("managed-upstream");
    await upstream.prepareWorkspaceForSshExecution({ spec: suite.server.spec, localDir: local, remoteDir: fresh });
    const theirs = remoteState(fresh);
    const ours = remoteState(third.workspaceRemoteDir);
    expect(ours).toEqual(theirs);
    // The previous run's `.paperclip-runtime` did not come along: a new run directory's is
    // empty, as a prepare's clear leaves it (the restore's sign of a staged workspace).
    expect(readdirSync(path.join(third.workspaceRemoteDir, ".paperclip-runtime"))).toEqual([]);
    // run-3 is not restored: what marked run-2's manifest restored does not mark run-3's.
    const fourth = await run("run-4");
    expect(sshDeltaStats().seeded).toBe(seededBefore + 1);
    expect(existsSync(third.workspaceRemoteDir)).toBe(true);
    await third.restoreWorkspace();
    await fourth.restoreWorkspace();
  });
});

describe(`SSH delta restores (seed ${seed})`, () => {
  // The reference is the full pull and merge (delta off): how that compares with upstream's
  // restore is the subject of ssh-workspace.test.js (upstream's copy rewrites relative
  // link targets into its staging path, for one).
  it("bring back only what the run changed and merge it as the full pull does", async () => {
    const rng = createRandom(seed ^ 0x5a5a);
    const { restoreWorkspaceFromSshExecution } = await import("../lib/ssh.js");
    const { captureDirectorySnapshot } = await import("../lib/workspace-restore-merge.js");
    for (let round = 0; round < 4; round += 1) {
      const local = places.local("restore-local");
      await writeRandomTree(rng, local, { maxDepth: 3, maxEntries: 7, special: false });
      execFileSync("chmod", ["-R", "u+rwX", local]);
      // AppleDouble names (`._*`), which the pull never brings back: sent, or made by the run.
      const appleDouble = (root) => {
        const at = rng.pick(["", ...inventory(root).dirs]);
        writeFileSync(path.join(root, at, `._${rng.pick(["a", "notes.md", "x"])}`), "fork");
      };
      if (rng.chance(0.3)) appleDouble(local);
      const remoteDir = places.remote("restore-ours");
      await prepareWorkspaceForSshExecution({ spec: suite.server.spec, localDir: local, remoteDir });
      const baseline = await captureDirectorySnapshot(local, { exclude: [".paperclip-runtime"] });
      // The same start for upstream: a copy of the local tree and of the remote tree.
      const theirsLocal = places.local("restore-theirs");
      const theirsRemote = places.remote("restore-theirs");
      execFileSync("cp", ["-a", `${local}/.`, theirsLocal]);
      // The run: remote changes (the agent), and host changes made meanwhile.
      execFileSync("chmod", ["-R", "u+rwX", remoteDir]);
      const applied = mutate(rng, remoteDir, REMOTE_OPS, 1 + rng.int(5), { avoid: ["excluded"] });
      const files = inventory(remoteDir).files;
      if (files.length > 0 && sameSizeSameMtime(remoteDir, rng.pick(files))) applied.push("same-size-and-mtime");
      if (rng.chance(0.3)) {
        appleDouble(remoteDir);
        applied.push("apple-double");
      }
      if (rng.chance(0.5)) {
        const hostOps = mutate(rng, local, HOST_OPS, 1 + rng.int(2), { avoid: ["dirToLink", "dirToFile"] });
        rmSync(theirsLocal, { recursive: true, force: true });
        execFileSync("cp", ["-a", local, theirsLocal]);
        applied.push(...hostOps.map((n) => `host-${n}`));
      }
      execFileSync("cp", ["-a", `${remoteDir}/.`, theirsRemote]);
      // A run that removed every entry, .paperclip-runtime included, is the case the
      // vanished-workspace rule cannot tell from a re-created workspace (docs/sandbox.md):
      // refused before anything is pulled, the host unchanged (delta off, the same below).
      const emptied = readdirSync(remoteDir).length === 0;
      const hostBefore = remoteState(local);
      const before = sshDeltaStats().restore.delta;
      const ours = await restoreWorkspaceFromSshExecution({
        spec: suite.server.spec,
        localDir: local,
        remoteDir,
        baselineSnapshot: baseline,
      }).catch((e) => e);
      if (emptied) {
        expect(ours?.code, `round ${round}`).toBe("ERR_PAPERCLIP_NATIVE_REMOTE_WORKSPACE_GONE");
        expect(ours.reason).toBe("emptied");
        expect(remoteState(local), `round ${round}`).toEqual(hostBefore);
      } else {
        expect(sshDeltaStats().restore.delta, `round ${round}`).toBe(before + 1);
      }
      process.env.PAPERCLIP_NATIVE_SSH_DELTA = "0";
      let theirs;
      try {
        theirs = await restoreWorkspaceFromSshExecution({
          spec: suite.server.spec,
          localDir: theirsLocal,
          remoteDir: theirsRemote,
          baselineSnapshot: baseline,
        }).catch((e) => e);
      } finally {
        delete process.env.PAPERCLIP_NATIVE_SSH_DELTA;
      }
      const context = `round ${round}: ${applied.join(", ")}`;
      // The safe extraction refuses a link that is absolute or leaves the tree: the full pull
      // fails on any such link of the remote tree, the delta only on one the run changed
      // (an unchanged one is the baseline's own and is not pulled).
      if (theirs?.code === "ERR_PAPERCLIP_NATIVE_UNSAFE_ARCHIVE_ENTRY" && ours === undefined) continue;
      expect(ours?.code, context).toBe(theirs?.code);
      // Entries the merge applied carry the time it applied them: kinds, modes, contents
      // and link targets are compared.
      const timeless = (state) =>
        Object.fromEntries(Object.entries(state).map(([k, v]) => [k, v.replace(/^(file \d+|dir \d+) \d+/, "$1")]));
      expect(timeless(remoteState(local)), context).toEqual(timeless(remoteState(theirsLocal)));
    }
  });

  it("treat AppleDouble files (`._*`, which the pull never brings) as the full pull does", async () => {
    const { restoreWorkspaceFromSshExecution } = await import("../lib/ssh.js");
    const { captureDirectorySnapshot } = await import("../lib/workspace-restore-merge.js");
    const local = places.local("appledouble");
    mkdirSync(path.join(local, "d"));
    for (const [rel, text] of [
      ["a.txt", "a\n"],
      ["._a.txt", "resource fork\n"],
      ["d/._b", "resource fork\n"],
      ["d/b", "b\n"],
    ])
      writeFileSync(path.join(local, rel), text);
    const remoteDir = places.remote("appledouble");
    await prepareWorkspaceForSshExecution({ spec: suite.server.spec, localDir: local, remoteDir });
    const baseline = await captureDirectorySnapshot(local, { exclude: [".paperclip-runtime"] });
    writeFileSync(path.join(remoteDir, "a.txt"), "agent\n");
    // The upload left them out; the remote has them all the same (a checkout, the agent).
    writeFileSync(path.join(remoteDir, "._a.txt"), "resource fork\n");
    writeFileSync(path.join(remoteDir, "d", "._b"), "resource fork\n");
    const theirsLocal = places.local("appledouble-theirs");
    const theirsRemote = places.remote("appledouble-theirs");
    execFileSync("cp", ["-a", `${local}/.`, theirsLocal]);
    execFileSync("cp", ["-a", `${remoteDir}/.`, theirsRemote]);
    const before = sshDeltaStats().restore.delta;
    await restoreWorkspaceFromSshExecution({
      spec: suite.server.spec,
      localDir: local,
      remoteDir,
      baselineSnapshot: baseline,
    });
    expect(sshDeltaStats().restore.delta).toBe(before + 1);
    process.env.PAPERCLIP_NATIVE_SSH_DELTA = "0";
    try {
      await restoreWorkspaceFromSshExecution({
        spec: suite.server.spec,
        localDir: theirsLocal,
        remoteDir: theirsRemote,
        baselineSnapshot: baseline,
      });
    } finally {
      delete process.env.PAPERCLIP_NATIVE_SSH_DELTA;
    }
    expect(readdirSync(local).sort()).toEqual(readdirSync(theirsLocal).sort());
    expect(readdirSync(path.join(local, "d")).sort()).toEqual(readdirSync(path.join(theirsLocal, "d")).sort());
    expect(readFileSync(path.join(local, "a.txt"), "utf8")).toBe("agent\n");
  });
});
