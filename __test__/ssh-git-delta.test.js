// Delta prepares of a git workspace over SSH against upstream's full import and upload (docs
// "SSH"): after each of our repeat prepares, the remote holds the same working tree (kinds,
// modes, contents, link targets, mtimes), HEAD, branch, status and branch ref as upstream's
// `prepareWorkspaceForSshExecution` leaves in a fresh directory for the same local
// repository, while the history sent is only the commits the remote lacked. Changes come
// from both sides: commits, edits, untracked and ignored files, deleted tracked files,
// branch switches and a detached HEAD on the host; edits, untracked files and commits of the
// agent on the remote. Then the fallbacks (a remote that lost its repository, a manifest
// naming a commit the remote lacks, a nested repository on the remote), the restore's
// history export (only the remote's new commits, none, or all when the remote rewrote its
// history), and a managed run's directory started from the previous run's. Run as an unprivileged user (scripts/test/full.sh).
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import * as upstream from "@paperclipai/adapter-utils/ssh";
import { beforeAll, describe, expect, it } from "vitest";
import { prepareRemoteManagedRuntime } from "../lib/remote-managed-runtime.js";
import { sshDeltaStats } from "../lib/ssh-delta.js";
import { prepareWorkspaceForSshExecution, restoreWorkspaceFromSshExecution } from "../lib/ssh.js";
import { repositoryState } from "./helpers/git-state.js";
import { createRandom, runSeed } from "./helpers/random.js";
import { git, setupGitEnv } from "./helpers/repos.js";
import { remoteState } from "./helpers/sshd.js";
import { sshdSuite } from "./helpers/sshd-suite.js";

const seed = runSeed();
const suite = sshdSuite("pc-ssh-git-delta-");
const places = suite.places;
let env;
beforeAll(() => {
  mkdirSync(path.join(suite.work, "git-home"));
  env = setupGitEnv(path.join(suite.work, "git-home"));
});

const history = () => sshDeltaStats().history.import;
const exports = () => sshDeltaStats().history.export;
const run = (dir, ...args) => git(dir, args, env).toString().trim();

/** The MB total of the last `Importing git history` line (the bundle's size). */
function bundleMegabytes(lines) {
  const line = lines.filter((l) => l.includes("Importing git history")).at(-1) ?? "";
  const match = /\/([\d.]+) MB\)/.exec(line);
  return match ? Number(match[1]) : 0;
}

/** Replaces `dir`'s history by one orphan commit on `branch`; every other commit is pruned. */
function rewriteHistory(dir, branch) {
  run(dir, "checkout", "-q", "--orphan", branch);
  run(dir, "commit", "-qm", branch);
  for (const name of run(dir, "for-each-ref", "--format=%(refname)").split("\n"))
    if (name !== `refs/heads/${branch}`) run(dir, "update-ref", "-d", name);
  run(dir, "reflog", "expire", "--expire=now", "--all");
  run(dir, "gc", "-q", "--prune=now");
}

/** Our `step` (prepare or restore) between `local` and `remoteDir`; its progress lines. */
async function ours(step, local, remoteDir) {
  const lines = [];
  await step({ spec: suite.server.spec, localDir: local, remoteDir, onProgress: (line) => lines.push(String(line)) });
  return lines;
}
const prepare = (local, remoteDir) => ours(prepareWorkspaceForSshExecution, local, remoteDir);

/**
 * What the comparison covers: the tree (without `.git` and `.paperclip-runtime`) and the
 * repository. Upstream removes `local`'s deleted tracked files after its upload, which
 * stamps their directories with the clock: those mtimes are left out.
 */
function remoteWorkspace(dir, local) {
  const repo = repositoryState(dir);
  const tree = remoteState(dir, [".paperclip-runtime", ".git"]);
  for (const rel of local ? run(local, "ls-files", "--deleted", "-z").split("\0") : []) {
    const parent = path.posix.dirname(rel);
    if (rel !== "" && tree[parent]) tree[parent] = tree[parent].replace(/ \d+$/, " (stamped by rm)");
  }
  const branch = repo.branch.startsWith("refs/heads/") ? repo.branch : null;
  return {
    tree,
    head: repo.head,
    branch: repo.branch,
    // The branch checked out (a repository used again keeps the branches of earlier imports,
    // as upstream's does).
    branchRef: branch ? run(dir, "rev-parse", branch) : null,
    shallow: repo.shallow,
    // The runtime's own files (as the suite plants them) are the remote's, not the workspace's.
    status: repo.status
      .split("\n")
      .filter((line) => !line.includes(" .paperclip-runtime/"))
      .join("\n"),
    remotes: repo.remotes,
  };
}

/** What upstream's prepare leaves for `local` in a fresh remote directory. */
async function upstreamResult(local) {
  const dir = places.remote("upstream");
  await upstream.prepareWorkspaceForSshExecution({ spec: suite.server.spec, localDir: local, remoteDir: dir });
  return remoteWorkspace(dir, local);
}

/** A repository with history (a 2 MB random file committed, then removed), ignored and untracked files. */
function writeRepo(name) {
  const local = places.local(name);
  run(local, "init", "-q");
  run(local, "remote", "add", "origin", "https://user:secret@example.com/org/repo.git");
  writeFileSync(path.join(local, ".gitignore"), "node_modules/\n*.log\n");
  writeFileSync(path.join(local, "big.bin"), randomBytes(2 * 1024 * 1024));
  run(local, "add", "-A");
  run(local, "commit", "-qm", "big");
  rmSync(path.join(local, "big.bin"));
  mkdirSync(path.join(local, "src", "deep"), { recursive: true });
  for (let i = 0; i < 12; i += 1) writeFileSync(path.join(local, "src", `m${i}.ts`), `export const m${i} = ${i};\n`);
  writeFileSync(path.join(local, "src", "deep", "d.ts"), "deep\n");
  mkdirSync(path.join(local, "lib"));
  for (let i = 0; i < 60; i += 1) writeFileSync(path.join(local, "lib", `l${i}.js`), `export default ${i};\n`);
  run(local, "add", "-A");
  run(local, "commit", "-qm", "sources");
  mkdirSync(path.join(local, "node_modules", "pkg"), { recursive: true });
  writeFileSync(path.join(local, "node_modules", "pkg", "index.js"), "module.exports = 1;\n");
  writeFileSync(path.join(local, "build.log"), "ignored\n");
  writeFileSync(path.join(local, "notes.txt"), "untracked\n");
  return local;
}

/** A random change to the host's repository; its name. */
function hostChange(rng, local, round) {
  const sources = readdirSync(path.join(local, "src")).filter((n) => n.endsWith(".ts"));
  const pick = () => path.join(local, "src", rng.pick(sources));
  switch (rng.int(7)) {
    case 0:
      writeFileSync(pick(), `committed ${round}\n`);
      run(local, "commit", "-qam", `round ${round}`);
      return "commit";
    case 1:
      writeFileSync(pick(), `uncommitted ${round}\n`);
      return "edit";
    case 2:
      writeFileSync(path.join(local, `new-${round}.txt`), "new\n");
      return "untracked";
    case 3:
      writeFileSync(path.join(local, "node_modules", "pkg", `f${round}.js`), "ignored\n");
      return "ignored";
    case 4: {
      const victim = pick();
      if (run(local, "ls-files", path.relative(local, victim)) === "") return "none";
      rmSync(victim, { force: true });
      return "delete-tracked";
    }
    case 5:
      run(local, "checkout", "-q", "-B", `feature-${round}`);
      writeFileSync(path.join(local, "src", `f${round}.ts`), "feature\n");
      run(local, "add", "-A", "src");
      run(local, "commit", "-qm", `feature ${round}`);
      return "branch";
    default:
      run(local, "checkout", "-q", "--detach");
      return "detach";
  }
}

/** A random change of the agent's on the remote; its name. */
function remoteChange(rng, remoteDir, round) {
  switch (rng.int(4)) {
    case 0:
      writeFileSync(path.join(remoteDir, "src", "m1.ts"), `agent ${round}\n`);
      return "remote-edit";
    case 1:
      writeFileSync(path.join(remoteDir, `agent-${round}.txt`), "agent\n");
      mkdirSync(path.join(remoteDir, "node_modules", "agent"), { recursive: true });
      writeFileSync(path.join(remoteDir, "node_modules", "agent", "x.js"), "agent\n");
      return "remote-untracked";
    case 2:
      writeFileSync(path.join(remoteDir, "src", "m2.ts"), `agent commit ${round}\n`);
      run(remoteDir, "add", "src/m2.ts");
      run(remoteDir, "commit", "--allow-empty", "-qm", `agent ${round}`);
      return "remote-commit";
    default:
      rmSync(path.join(remoteDir, "src", "deep"), { recursive: true, force: true });
      return "remote-delete";
  }
}

describe(`SSH git workspaces: history and tree deltas (seed ${seed})`, () => {
  it("send only the commits and files that changed and leave upstream's remote, through changes on both sides", async () => {
    const rng = createRandom(seed);
    const local = writeRepo("repo");
    const remoteDir = places.remote("ours");
    let before = history();
    const first = await prepare(local, remoteDir);
    expect(history().full).toBe(before.full + 1);
    expect(bundleMegabytes(first)).toBeGreaterThanOrEqual(2);
    mkdirSync(path.join(remoteDir, ".paperclip-runtime"), { recursive: true });
    writeFileSync(path.join(remoteDir, ".paperclip-runtime", "kept"), "runtime state");
    expect(remoteWorkspace(remoteDir, local)).toEqual(await upstreamResult(local));
    for (let round = 0; round < 8; round += 1) {
      const applied = [hostChange(rng, local, round)];
      if (rng.chance(0.5)) applied.push(hostChange(rng, local, round + 100));
      if (rng.chance(0.5)) applied.push(remoteChange(rng, remoteDir, round));
      const context = `round ${round}: ${applied.join(", ")}`;
      before = history();
      const { delta: deltas, sent } = sshDeltaStats();
      const lines = await prepare(local, remoteDir);
      expect(history().delta, context).toBe(before.delta + 1);
      expect(sshDeltaStats().delta, context).toBe(deltas + 1);
      // What changed, not the ~90 entries of the tree (the checkout of a repository whose
      // files the last upload replaced rewrites only what differs from HEAD).
      expect(sshDeltaStats().sent - sent, context).toBeLessThan(20);
      // The 2 MB of old history stayed where it was.
      expect(bundleMegabytes(lines), context).toBeLessThan(0.5);
      expect(remoteWorkspace(remoteDir, local), context).toEqual(await upstreamResult(local));
      expect(readFileSync(path.join(remoteDir, ".paperclip-runtime", "kept"), "utf8"), context).toBe("runtime state");
    }
  });

  it("falls back to the full import, counted, when the remote lost its repository, lacks a recorded commit, or holds a nested repository", async () => {
    const local = writeRepo("fallback");
    const remoteDir = places.remote("fallback");
    await prepare(local, remoteDir);
    // The repository went away on the remote (the tree stayed): the full import.
    rmSync(path.join(remoteDir, ".git"), { recursive: true, force: true });
    writeFileSync(path.join(local, "src", "m0.ts"), "changed\n");
    run(local, "commit", "-qam", "after");
    let before = history();
    const lines = await prepare(local, remoteDir);
    expect(history().fallback).toBe(before.fallback + 1);
    expect(bundleMegabytes(lines)).toBeGreaterThanOrEqual(2);
    // The refused delta shows no `failed` line: only the full import's lines.
    expect(lines.filter((line) => /fail/i.test(line))).toEqual([]);
    expect(remoteWorkspace(remoteDir, local)).toEqual(await upstreamResult(local));
    // The remote's history rewritten behind our back: the recorded head is gone there.
    rewriteHistory(remoteDir, "other");
    before = history();
    await prepare(local, remoteDir);
    expect(history().fallback).toBe(before.fallback + 1);
    expect(remoteWorkspace(remoteDir, local)).toEqual(await upstreamResult(local));
    // A nested repository the agent made (upstream's clean spares it): the full tree path.
    mkdirSync(path.join(remoteDir, "vendor", "lib"), { recursive: true });
    run(path.join(remoteDir, "vendor", "lib"), "init", "-q");
    writeFileSync(path.join(remoteDir, "vendor", "lib", "kept.txt"), "nested\n");
    /** Upstream's prepare over a copy of the remote as it is now (before ours). */
    const upstreamTwin = (name) => {
      const twin = places.remote(name);
      execFileSync("cp", ["-a", remoteDir, twin]);
      return async () => {
        await upstream.prepareWorkspaceForSshExecution({ spec: suite.server.spec, localDir: local, remoteDir: twin });
        return remoteWorkspace(twin, local);
      };
    };
    let twin = upstreamTwin("upstream-nested");
    const nested = sshDeltaStats().fallbacks["nested-git"] ?? 0;
    await prepare(local, remoteDir);
    expect(sshDeltaStats().fallbacks["nested-git"]).toBe(nested + 1);
    // Upstream over the same remote state keeps the nested repository as well.
    expect(remoteWorkspace(remoteDir, local)).toEqual(await twin());
    expect(existsSync(path.join(remoteDir, "vendor", "lib", "kept.txt"))).toBe(true);
    // A shallow remote repository (its boundary at the head's parent): the full import.
    rmSync(path.join(remoteDir, "vendor"), { recursive: true, force: true });
    writeFileSync(path.join(remoteDir, ".git", "shallow"), `${run(remoteDir, "rev-parse", "HEAD~1")}\n`);
    writeFileSync(path.join(local, "src", "m1.ts"), "after shallow\n");
    run(local, "commit", "-qam", "after shallow");
    twin = upstreamTwin("upstream-shallow");
    before = history();
    await prepare(local, remoteDir);
    expect(history().fallback).toBe(before.fallback + 1);
    expect(remoteWorkspace(remoteDir, local)).toEqual(await twin());
  });

  it("restores bring back only the remote's new commits, and leave what upstream's restore leaves", async () => {
    const local = writeRepo("restore");
    const remoteDir = places.remote("restore");
    await prepare(local, remoteDir);
    /** Ours into `local`, upstream's into copies of both sides made first; the bundle's MB. */
    const restoreBoth = async () => {
      const twinLocal = places.local("restore-twin");
      const twinRemote = places.remote("restore-twin");
      execFileSync("cp", ["-a", `${local}/.`, twinLocal]);
      execFileSync("cp", ["-a", remoteDir, twinRemote]);
      const lines = await ours(restoreWorkspaceFromSshExecution, local, remoteDir);
      await upstream.restoreWorkspaceFromSshExecution({
        spec: suite.server.spec,
        localDir: twinLocal,
        remoteDir: twinRemote,
      });
      const state = (dir) => ({ repo: repositoryState(dir), tree: remoteState(dir, [".git"]) });
      expect(state(local)).toEqual(state(twinLocal));
      const line = lines.filter((l) => l.includes("Exporting git history")).at(-1) ?? "";
      return Number(/([\d.]+) MB/.exec(line)?.[1] ?? "NaN");
    };
    // The agent committed twice: only those commits come back.
    for (let i = 0; i < 2; i += 1) {
      writeFileSync(path.join(remoteDir, "src", `agent${i}.ts`), `agent ${i}\n`);
      run(remoteDir, "add", "-A", "src");
      run(remoteDir, "commit", "-qm", `agent ${i}`);
    }
    let before = exports();
    expect(await restoreBoth()).toBeLessThan(0.5);
    expect(exports().delta).toBe(before.delta + 1);
    expect(run(local, "log", "-1", "--format=%s")).toBe("agent 1");
    // No new commit: an empty bundle, the same head.
    before = exports();
    expect(await restoreBoth()).toBe(0);
    expect(exports().delta).toBe(before.delta + 1);
    // The remote no longer holds the commit the prepare sent: it sends its whole history.
    rewriteHistory(remoteDir, "rewritten");
    await restoreBoth();
    expect(run(local, "log", "-1", "--format=%s")).toBe("rewritten");
  });

  it("starts a managed run's directory from the previous run's repository, its refs cut to a fresh import's", async () => {
    const local = writeRepo("managed");
    const spec = { ...suite.server.spec, remoteCwd: places.remote("managed-base") };
    const runtime = (runId) =>
      prepareRemoteManagedRuntime({ spec, runId, adapterKey: "test", workspaceLocalDir: local });
    const first = await runtime("run-1");
    // The agent's branch and commit in the first run's repository.
    run(first.workspaceRemoteDir, "branch", "agent-branch");
    writeFileSync(path.join(first.workspaceRemoteDir, "src", "m4.ts"), "agent edit\n");
    const pulls = sshDeltaStats().restore.delta;
    await first.restoreWorkspace();
    // Only what the run changed came back (the tree's delta restore), merged into the host.
    expect(sshDeltaStats().restore.delta).toBe(pulls + 1);
    expect(readFileSync(path.join(local, "src", "m4.ts"), "utf8")).toBe("agent edit\n");
    run(local, "checkout", "-q", "-B", "next");
    writeFileSync(path.join(local, "src", "m5.ts"), "next\n");
    run(local, "commit", "-qam", "next");
    const before = history();
    const { seeded, sent } = sshDeltaStats();
    const second = await runtime("run-2");
    expect(sshDeltaStats().seeded).toBe(seeded + 1);
    // The commit's file, the agent's reverted edit and their directory: not the whole tree.
    expect(sshDeltaStats().sent - sent).toBeLessThan(10);
    expect(history().delta).toBe(before.delta + 1);
    expect(existsSync(first.workspaceRemoteDir)).toBe(false);
    const fresh = places.remote("managed-upstream");
    await upstream.prepareWorkspaceForSshExecution({ spec: suite.server.spec, localDir: local, remoteDir: fresh });
    expect(remoteWorkspace(second.workspaceRemoteDir, local)).toEqual(remoteWorkspace(fresh, local));
    const refs = (dir) => run(dir, "for-each-ref", "--format=%(refname) %(objectname)");
    expect(refs(second.workspaceRemoteDir)).toBe(refs(fresh));
    await second.restoreWorkspace();
  });
});
