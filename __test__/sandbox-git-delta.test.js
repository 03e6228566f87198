// Git workspaces in the sandbox lane by delta (docs/sandbox.md, "Git workspaces"), against
// upstream's full path: two copies of one seeded git workspace (committed, then made dirty:
// modified, untracked, deleted and ignored files, modes, links), ours prepared and restored
// through our `prepareCommandManagedRuntime` into a sandbox directory it keeps, the twin
// through upstream's into a fresh directory every run. The same seeded changes are made in
// both sandboxes (edits, deletions, a file replaced by a directory, a same-size same-mtime
// rewrite, chmods, commits) and on both hosts (edits, deletions, new files, commits) between
// the runs. After each prepare the two sandboxes hold the same working tree (kinds, modes,
// contents, link targets) and the same repository (HEAD, branch, refs, origin, status, the
// history `git log` walks, an fsck without errors); after each restore the two hosts hold
// the same workspace and repository. Then what a repeat run sends and how many runner
// commands it takes, the large-payload path, every fallback to the full upload, and an
// abort mid-restore. Rerun a failure with DIFF_SEED=<seed>.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import * as upstream from "@paperclipai/adapter-utils/command-managed-runtime";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { prepareCommandManagedRuntime } from "../lib/command-managed-runtime.js";
import { sandboxDeltaStats } from "../lib/sandbox/delta.js";
import { contentState, PINNED_GIT_ENV, pinnedGit, repositoryState } from "./helpers/git-state.js";
import { copyTree, inventory, mutate, REMOTE_OPS, HOST_OPS, sameSizeSameMtime } from "./helpers/merge-triples.js";
import { createRandom, runSeed } from "./helpers/random.js";
import { pairRuleBreaks, recordRunEnd, recordRunStart, sandboxPullExcludes } from "./helpers/restore-rule.js";
import { spawnRunner } from "./helpers/sandbox-runner.js";
import { writeRandomTree } from "./helpers/trees.js";

const seed = runSeed();
const work = mkdtempSync(path.join(os.tmpdir(), "pc-sandbox-git-delta-"));
// Pinned commit dates for the merge and graft commits both restores write with the process
// environment (lib/git-integration.js): the same ids whatever second each restore runs in.
const PINNED = {
  PAPERCLIP_HOME: path.join(work, "home"),
  GIT_AUTHOR_DATE: PINNED_GIT_ENV.GIT_AUTHOR_DATE,
  GIT_COMMITTER_DATE: PINNED_GIT_ENV.GIT_COMMITTER_DATE,
};
const saved = Object.fromEntries(Object.keys(PINNED).map((key) => [key, process.env[key]]));
beforeAll(() => {
  Object.assign(process.env, PINNED);
});
afterAll(() => {
  for (const [key, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[key];
    else process.env[key] = value;
  }
  rmSync(work, { recursive: true, force: true });
});
afterEach(() => {
  delete process.env.PAPERCLIP_NATIVE_SANDBOX_DELTA;
});
let counter = 0;
const fresh = (label) => mkdtempSync(path.join(work, `${label}-`));
const gitStats = () => sandboxDeltaStats().git;
const gitFallbacks = (reason) => gitStats().fallbacks[reason] ?? 0;

const git = (dir, ...args) => pinnedGit(dir, args);
/**
 * Commits everything in `dir` (nothing when nothing changed), by content: the index is
 * emptied first, so git hashes every file instead of trusting its stat cache (a file
 * rewritten with the same size and mtime within the second the index last saw it is
 * racily clean to git, on either side alike: which side sees it would be timing).
 */
const commitAll = (dir, message) => {
  git(dir, "rm", "-r", "-q", "--cached", "--ignore-unmatch", ".");
  git(dir, "add", "-A");
  if (git(dir, "status", "--porcelain").trim() !== "") git(dir, "commit", "-q", "-m", message);
};

/** A seeded git workspace: a committed tree with an origin, then dirty (edits, deletions, untracked and ignored files). */
async function writeGitWorkspace(rng, root) {
  await writeRandomTree(rng, root, { maxDepth: 3, maxEntries: 7, special: false });
  // No `.git` entries of the generator's (a nested one is a repository of its own), and no
  // link that could point out of the tree (our restore refuses those; upstream's writes them).
  execFileSync("sh", ["-c", 'find "$1" -depth -name .git -exec rm -rf {} +', "sh", root]);
  const links = execFileSync("find", [root, "-type", "l", "(", "-lname", "/*", "-o", "-lname", "..*", ")"], {
    encoding: "utf8",
  });
  for (const link of links.split("\n").filter(Boolean)) rmSync(link);
  execFileSync("chmod", ["-R", "u+rwX", root]);
  mkdirSync(path.join(root, "code"), { recursive: true });
  for (let i = 0; i < 12; i += 1) writeFileSync(path.join(root, "code", `m${i}.js`), `export const v${i} = ${i};\n`);
  // A directory whose only file is deleted below (the clone makes it, the overlay's removal
  // leaves it empty), and a committed dependency the restore's excludes leave out.
  mkdirSync(path.join(root, "solo"), { recursive: true });
  writeFileSync(path.join(root, "solo", "only.js"), "export {};\n");
  mkdirSync(path.join(root, "pkg", "node_modules", "dep"), { recursive: true });
  writeFileSync(path.join(root, "pkg", "node_modules", "dep", "index.js"), "module.exports = 1;\n");
  writeFileSync(path.join(root, ".gitignore"), "*.log\nignored-dir/\n");
  git(root, "init", "-q");
  git(root, "remote", "add", "origin", "https://user:token@example.com/org/repo.git");
  commitAll(root, "initial");
  writeFileSync(path.join(root, "code", "m1.js"), "export const v1 = 'dirty';\n");
  rmSync(path.join(root, "code", "m2.js"));
  rmSync(path.join(root, "solo", "only.js"));
  writeFileSync(path.join(root, "untracked ü.txt"), "new\n");
  writeFileSync(path.join(root, "debug.log"), "ignored\n");
  mkdirSync(path.join(root, "ignored-dir"));
  writeFileSync(path.join(root, "ignored-dir", "x"), "ignored\n");
  // Empty directories: neither the clone nor the overlay takes them to the sandbox, so
  // upstream's restore deletes them here (the generator makes some only now and then).
  mkdirSync(path.join(root, "empty", "inner"), { recursive: true });
}

/** A seeded git workspace and its twin; ours keeps its sandbox directory, upstream's gets a fresh one each run. */
async function pairOf(rng, label) {
  const local = fresh(`${label}-local`);
  await writeGitWorkspace(rng, local);
  const twin = path.join(work, `${label}-twin-${(counter += 1)}`);
  copyTree(local, twin);
  const made = hookedRunner();
  return { local, twin, remote: fresh(`${label}-remote`), twinRemote: null, made };
}

/** A runner spawning each command here; `hooks.edit(call, result)` may change a result, `hooks.before(call)` runs first. */
function hookedRunner() {
  const made = spawnRunner();
  const hooks = { edit: null, before: null };
  const execute = made.runner.execute;
  made.runner.execute = async (input) => {
    const call = { script: input.args?.[1] ?? "" };
    hooks.before?.(call);
    const result = await execute(input);
    return hooks.edit ? hooks.edit(call, result) : result;
  };
  return { ...made, hooks };
}

/** Ours prepared into the kept sandbox, upstream's into a fresh one. */
async function prepareBoth(pair, options = {}) {
  const common = { adapterKey: "gitdelta", ...options };
  const ours = await prepareCommandManagedRuntime({
    runner: pair.made.runner,
    spec: { remoteCwd: pair.remote, timeoutMs: 60_000 },
    workspaceLocalDir: pair.local,
    ...common,
  });
  pair.twinRemote = fresh("twin-remote");
  const theirs = await upstream.prepareCommandManagedRuntime({
    runner: spawnRunner().runner,
    spec: { remoteCwd: pair.twinRemote, timeoutMs: 60_000 },
    workspaceLocalDir: pair.twin,
    ...common,
  });
  // What the run starts from, for the rule's check of the restore: the pull leaves out the
  // heavy directories, the repository, our runtime directory and what git ignores.
  const ignored = git(pair.local, "ls-files", "--others", "--ignored", "--exclude-standard", "--directory", "-z")
    .split("\0")
    .map((entry) => entry.replace(/\/+$/, ""))
    .filter(Boolean);
  const excludes = sandboxPullExcludes(options, ignored);
  recordRunStart(pair, excludes);
  return { ours, theirs, pair };
}

/** A working tree without its repository and our runtime directory: kinds, modes, contents, link targets. */
const workingTree = (dir) => contentState(dir, [".git", ".paperclip-runtime"]);

/**
 * What of a sandbox's repository upstream's fresh clone fixes: HEAD, branch, refs, origin,
 * status, the history `git log` walks, the shallow boundary as git reads it (HEAD among the
 * listed boundaries), an fsck without errors. The delta keeps older objects (and their
 * boundaries) until git's own gc prunes them: an fsck names them dangling.
 */
function sandboxRepository(dir) {
  const state = repositoryState(dir);
  const shallow = (state.shallow ?? "").split("\n").filter(Boolean);
  return {
    head: state.head,
    branch: state.branch,
    refs: state.refs,
    remotes: state.remotes,
    status: state.status,
    history: git(dir, "rev-list", "HEAD").trim(),
    headIsBoundary: shallow.includes(state.head),
    fsckErrors: git(dir, "fsck", "--no-dangling", "--no-progress").trim(),
  };
}

/** Where two trees or states differ: `{ key: [ours, upstream's] }`. */
function differences(a, b) {
  const out = {};
  for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) {
    if (JSON.stringify(a[key]) !== JSON.stringify(b[key])) out[key] = [a[key], b[key]];
  }
  return out;
}

/** The sandboxes hold the same working tree and repository. */
function expectSameSandboxes(pair, context) {
  expect(differences(workingTree(pair.remote), workingTree(pair.twinRemote)), context).toEqual({});
  expect(differences(sandboxRepository(pair.remote), sandboxRepository(pair.twinRemote)), context).toEqual({});
}

/** A host's repository: what `repositoryState` compares, fsck without dangling objects (an aborted restore leaves its fetched ones). */
function hostRepository(dir) {
  return { ...repositoryState(dir), fsck: git(dir, "fsck", "--no-dangling", "--no-progress").trim() };
}

/**
 * Our restore kept the rule (helpers/restore-rule.js: each host path ends as the agent made
 * it or as the host held it), with upstream's twin as the differential (where they differ,
 * ours kept the host's copy of a path upstream lost), unless upstream's restore failed (a
 * conflict ours keeps instead); both hold the same repository (history, refs, origin; the
 * status follows the working tree). Then the twin becomes a copy of ours: each round starts
 * both sides from one workspace.
 */
function expectSameHosts(pair, context, { upstreamFailed = false } = {}) {
  if (!upstreamFailed) {
    const withoutStatus = (dir) => ({ ...hostRepository(dir), status: undefined });
    expect(differences(withoutStatus(pair.local), withoutStatus(pair.twin)), context).toEqual({});
  }
  expect(pairRuleBreaks(pair, { upstreamFailed }), context).toEqual({});
}

/** Makes `to`'s working tree (not its `.git` or our runtime directory) an exact copy of `from`'s. */
function mirrorTree(from, to) {
  execFileSync("sh", [
    "-c",
    'find "$2" -mindepth 1 -maxdepth 1 ! -name .paperclip-runtime ! -name .git -exec rm -rf {} + && tar -C "$1" --exclude=./.paperclip-runtime --exclude=./.git -cf - . | tar -C "$2" -xpf -',
    "sh",
    from,
    to,
  ]);
}

/** The agent's seeded work in our sandbox (its repository and our runtime directory set aside), copied to the twin's; sometimes committed in both. */
function sandboxChanges(rng, pair, applied) {
  const aside = path.join(work, `aside-${(counter += 1)}`);
  mkdirSync(aside);
  for (const name of [".git", ".paperclip-runtime"]) renameSync(path.join(pair.remote, name), path.join(aside, name));
  execFileSync("chmod", ["-R", "u+rwX", pair.remote]);
  applied.push(
    ...mutate(rng, pair.remote, REMOTE_OPS, 1 + rng.int(4), {
      avoid: ["excluded", "addLink", "retargetLink"],
    }).map((n) => `sandbox-${n}`),
  );
  const files = inventory(pair.remote).files;
  if (files.length > 0 && sameSizeSameMtime(pair.remote, rng.pick(files))) applied.push("sandbox-same-size-and-mtime");
  for (const name of [".git", ".paperclip-runtime"]) renameSync(path.join(aside, name), path.join(pair.remote, name));
  mirrorTree(pair.remote, pair.twinRemote);
  if (rng.chance(0.4)) {
    for (const dir of [pair.remote, pair.twinRemote]) commitAll(dir, "agent");
    applied.push("sandbox-commit");
  }
}

/** Seeded host edits, sometimes committed, copied to the twin. */
function hostChanges(rng, pair, applied) {
  const aside = path.join(work, `aside-${(counter += 1)}`);
  renameSync(path.join(pair.local, ".git"), aside);
  applied.push(...mutate(rng, pair.local, HOST_OPS, 1 + rng.int(3), { avoid: ["dirToLink"] }).map((n) => `host-${n}`));
  renameSync(aside, path.join(pair.local, ".git"));
  if (rng.chance(0.4)) {
    commitAll(pair.local, "host");
    applied.push("host-commit");
  }
  rmSync(pair.twin, { recursive: true, force: true });
  copyTree(pair.local, pair.twin);
}

/** A restore's error message with its workspace's path as `<workspace>`, or null. */
function failure(error, workspace) {
  return error ? error.message.split(workspace).join("<workspace>") : null;
}

/** Restores both; resolves each side's error or null. */
async function restoreBoth({ ours, theirs, pair }) {
  recordRunEnd(pair);
  const settle = (promise) =>
    promise.then(
      () => null,
      (error) => error,
    );
  const mine = await settle(ours.restoreWorkspace());
  const upstreams = await settle(theirs.restoreWorkspace());
  return { mine, upstreams };
}

/** Waits until files written now are older than what a prepare vouches for (git-delta.js). */
const settleTimes = () => new Promise((resolve) => setTimeout(resolve, 2_200));

// Seeded rounds of whole prepares and restores on both sides: minutes on a loaded 2-core machine.
describe(`sandbox git deltas (seed ${seed})`, { timeout: 240_000 }, () => {
  it("leave upstream's sandbox and restored workspace after seeded changes in the sandbox, on the host, and on both", async () => {
    const rng = createRandom(seed);
    try {
      for (let workspace = 0; workspace < 3; workspace += 1) {
        const pair = await pairOf(rng, `w${workspace}`);
        for (let round = 0; round < 6; round += 1) {
          const side = ["sandbox", "host", "both"][round % 3];
          const context = `workspace ${workspace}, round ${round}`;
          const before = gitStats();
          let prepared;
          try {
            prepared = await prepareBoth(pair);
          } catch (error) {
            // A restore that replaced a directory of HEAD with a file fails the next
            // prepare's extraction (tar cannot write the file over the directory), in
            // upstream's too: its failure, then the next workspace.
            const theirs = await upstream
              .prepareCommandManagedRuntime({
                runner: spawnRunner().runner,
                spec: { remoteCwd: fresh("twin-remote"), timeoutMs: 60_000 },
                workspaceLocalDir: pair.twin,
                adapterKey: "gitdelta",
              })
              .then(
                () => null,
                (failed) => failed,
              );
            const cause = (failed) => failed?.message.match(/stderr: ([\s\S]*)$/)?.[1] ?? failed?.message;
            expect(cause(error), context).toBe(cause(theirs));
            break;
          }
          const after = gitStats();
          // A delta, but where the overlay changes an entry's kind (upstream's extraction
          // order decides that: the full upload runs).
          if (round > 0 && after.delta === before.delta) {
            const reasons = Object.keys(after.fallbacks).filter(
              (reason) => after.fallbacks[reason] !== (before.fallbacks[reason] ?? 0),
            );
            expect(reasons, context).toEqual(["overlay-kind"]);
          }
          expectSameSandboxes(pair, context);
          const applied = [];
          if (side !== "host") sandboxChanges(rng, pair, applied);
          if (side !== "sandbox") hostChanges(rng, pair, applied);
          const { mine, upstreams } = await restoreBoth(prepared);
          const restored = `${context} (${applied.join(", ")})`;
          // A host edit the sandbox contradicts fails upstream's merge (its conflict); ours keeps
          // the host's version and goes on. Ours fails only where upstream's fails alike.
          if (mine) expect(failure(mine, pair.local), restored).toBe(failure(upstreams, pair.twin));
          if (mine) {
            // Upstream's merge leaves what it applied before the failure: the next round
            // starts from our workspace on both sides.
            rmSync(pair.twin, { recursive: true, force: true });
            copyTree(pair.local, pair.twin);
            continue;
          }
          expectSameHosts(pair, restored, { upstreamFailed: Boolean(upstreams) });
        }
      }
    } catch (error) {
      error.message = `[DIFF_SEED=${seed}] ${error.message}`;
      throw error;
    }
  });

  it("sends nothing the sandbox holds: a repeat run is three runner commands, a host commit sends only its new objects", async () => {
    const pair = await pairOf(createRandom(seed ^ 0x4e7), "repeat");
    // The first run: the full upload, and a restore that gives the host files the modes the
    // checkout gave the sandbox's (upstream's merge applies them).
    let prepared = await prepareBoth(pair);
    expect(await restoreBoth(prepared)).toEqual({ mine: null, upstreams: null });
    await settleTimes();
    prepared = await prepareBoth(pair);
    writeFileSync(path.join(pair.remote, "code", "m3.js"), "export const v3 = 'the agent';\n");
    mirrorTree(pair.remote, pair.twinRemote);
    let calls = pair.made.calls.length;
    const pulled = sandboxDeltaStats().restore.pulled;
    expect(await restoreBoth(prepared)).toEqual({ mine: null, upstreams: null });
    expectSameHosts(pair, "first restore");
    // The listing, with the history's export and the one file the agent changed.
    expect(pair.made.calls.length - calls).toBe(1);
    expect(sandboxDeltaStats().restore.pulled - pulled).toBe(1);

    await settleTimes();
    const before = gitStats();
    calls = pair.made.calls.length;
    prepared = await prepareBoth(pair);
    expectSameSandboxes(pair, "repeat prepare");
    const after = gitStats();
    expect(after.delta).toBe(before.delta + 1);
    expect(pair.made.calls.length - calls).toBe(2);
    expect([after.objects, after.sent, after.checkedOut]).toEqual([before.objects, before.sent, before.checkedOut]);
    expect(await restoreBoth(prepared)).toEqual({ mine: null, upstreams: null });

    // A commit on the host: its commit, trees and blob go (as a pack), nothing else.
    writeFileSync(path.join(pair.local, "code", "m4.js"), "export const v4 = 'committed on the host';\n");
    git(pair.local, "add", "code/m4.js");
    git(pair.local, "commit", "-q", "-m", "host commit");
    rmSync(pair.twin, { recursive: true, force: true });
    copyTree(pair.local, pair.twin);
    const objects = gitStats().objects;
    prepared = await prepareBoth(pair);
    expectSameSandboxes(pair, "after a host commit");
    // The commit, the root tree, `src` and the blob.
    expect(gitStats().objects - objects).toBe(4);
    expect(await restoreBoth(prepared)).toEqual({ mine: null, upstreams: null });
    expectSameHosts(pair, "after a host commit");
  });

  it("follows the host's branch, a detached HEAD, an executable bit, a submodule's empty directory, as upstream's clone does", async () => {
    const pair = await pairOf(createRandom(seed ^ 0xb4a), "branches");
    const step = async (label, change) => {
      change?.();
      rmSync(pair.twin, { recursive: true, force: true });
      copyTree(pair.local, pair.twin);
      const deltas = gitStats().delta;
      const prepared = await prepareBoth(pair);
      if (change) expect(gitStats().delta, label).toBe(deltas + 1);
      expectSameSandboxes(pair, label);
      expect(await restoreBoth(prepared), label).toEqual({ mine: null, upstreams: null });
      expectSameHosts(pair, label);
    };
    await step("first");
    await step("a new branch", () => git(pair.local, "checkout", "-q", "-b", "feature/x"));
    await step("a commit on it with an executable file and a submodule link", () => {
      writeFileSync(path.join(pair.local, "code", "run.sh"), "#!/bin/sh\necho run\n");
      execFileSync("chmod", ["755", path.join(pair.local, "code", "run.sh")]);
      git(pair.local, "add", "code/run.sh");
      // A submodule that is not checked out: an empty directory, in the clone and here.
      git(pair.local, "update-index", "--add", "--cacheinfo", `160000,${"1".repeat(40)},code/vendored`);
      mkdirSync(path.join(pair.local, "code", "vendored"));
      git(pair.local, "commit", "-q", "-m", "feature");
    });
    await step("an executable bit taken away, uncommitted", () =>
      execFileSync("chmod", ["644", path.join(pair.local, "code", "run.sh")]),
    );
    await step("a detached HEAD", () => {
      git(pair.local, "commit", "-q", "-m", "not executable", "code/run.sh");
      git(pair.local, "checkout", "-q", "--detach", "HEAD");
    });
    await step("back on the first branch", () => git(pair.local, "checkout", "-q", "main"));
  });

  it("sends a payload larger than one command's stdin through the client's upload", async () => {
    const pair = await pairOf(createRandom(seed ^ 0xb16), "large");
    let prepared = await prepareBoth(pair);
    expect(await restoreBoth(prepared)).toEqual({ mine: null, upstreams: null });
    const big = Buffer.alloc(4 * 1024 * 1024 + 123);
    for (let i = 0; i < big.length; i += 7) big[i] = (i * 31) & 0xff;
    writeFileSync(path.join(pair.local, "big untracked.bin"), big);
    rmSync(pair.twin, { recursive: true, force: true });
    copyTree(pair.local, pair.twin);
    const deltas = gitStats().delta;
    const calls = pair.made.calls.length;
    prepared = await prepareBoth(pair);
    expect(gitStats().delta).toBe(deltas + 1);
    // More than the two commands of a small delta: the upload's own.
    expect(pair.made.calls.length - calls).toBeGreaterThan(2);
    expectSameSandboxes(pair, "large payload");
    expect(readFileSync(path.join(pair.remote, "big untracked.bin")).equals(big)).toBe(true);
    expect(await restoreBoth(prepared)).toEqual({ mine: null, upstreams: null });
    expectSameHosts(pair, "large payload");
  });

  it("falls back to the full upload, counted, and still leaves upstream's sandbox", async () => {
    const rng = createRandom(seed ^ 0xfa11);
    const pair = await pairOf(rng, "fallback");
    const round = async (reason, arrange, options) => {
      arrange?.();
      const before = gitFallbacks(reason);
      const prepared = await prepareBoth(pair, options);
      pair.made.hooks.edit = null;
      pair.made.hooks.before = null;
      expect(gitFallbacks(reason), reason).toBe(before + 1);
      expectSameSandboxes(pair, reason);
      expect(await restoreBoth(prepared), reason).toEqual({ mine: null, upstreams: null });
      expectSameHosts(pair, reason);
    };
    const hostCopy = () => {
      rmSync(pair.twin, { recursive: true, force: true });
      copyTree(pair.local, pair.twin);
    };
    await round("no-manifest");
    await round("no-manifest", () =>
      rmSync(path.join(process.env.PAPERCLIP_HOME, "instances"), { recursive: true, force: true }),
    );
    await round("remote-absent", () => rmSync(path.join(pair.remote, ".git"), { recursive: true, force: true }));
    // The history the manifest names is gone from the sandbox (a fresh repository there).
    await round("no-history", () => {
      rmSync(path.join(pair.remote, ".git"), { recursive: true, force: true });
      git(pair.remote, "init", "-q");
    });
    // The listing cut short or mangled on its way back.
    await round("remote-cannot-answer", () => {
      pair.made.hooks.edit = (call, result) =>
        call.script.includes("pcdelta-note has") ? { ...result, stdout: result.stdout.slice(0, 60) } : result;
    });
    // The command that applies the delta stops before its listing (a failed step there).
    await round("delta-failed", () => {
      pair.made.hooks.edit = (call, result) =>
        call.script.includes("read-tree") ? { ...result, stdout: Buffer.from("").toString("base64") } : result;
    });
    // Attributes: a checkout there may not be the blobs' bytes.
    await round("git-attributes", () => {
      writeFileSync(path.join(pair.local, ".gitattributes"), "*.txt text eol=crlf\n");
      git(pair.local, "add", ".gitattributes");
      git(pair.local, "commit", "-q", "-m", "attributes");
      hostCopy();
    });
    // The full upload recorded what it left: without the attributes, a delta again.
    git(pair.local, "rm", "-q", ".gitattributes");
    git(pair.local, "commit", "-q", "-m", "no attributes");
    hostCopy();
    const deltas = gitStats().delta;
    expect(await restoreBoth(await prepareBoth(pair))).toEqual({ mine: null, upstreams: null });
    expect(gitStats().delta).toBe(deltas + 1);
    expectSameHosts(pair, "after the attributes");
    await round("origin-changed", () => {
      git(pair.local, "remote", "set-url", "origin", "https://example.com/other/repo.git");
      hostCopy();
    });
    // An overlay that changes the kind of an entry of HEAD: upstream's extraction order decides.
    await round("overlay-kind", () => {
      rmSync(path.join(pair.local, "code", "m5.js"));
      mkdirSync(path.join(pair.local, "code", "m5.js"));
      writeFileSync(path.join(pair.local, "code", "m5.js", "inside.txt"), "a file where HEAD has one\n");
      hostCopy();
    });
    // A commit the manifest recorded that this host's gc has since pruned: no pack against it.
    {
      const prepared = await prepareBoth(pair);
      writeFileSync(path.join(pair.remote, "code", "m6.js"), "export const v6 = 'the agent commits';\n");
      mirrorTree(pair.remote, pair.twinRemote);
      for (const dir of [pair.remote, pair.twinRemote]) commitAll(dir, "agent");
      const before = git(pair.local, "rev-parse", "HEAD").trim();
      expect(await restoreBoth(prepared)).toEqual({ mine: null, upstreams: null });
      expect(git(pair.local, "rev-parse", "HEAD").trim()).not.toBe(before);
      git(pair.local, "reset", "-q", "--hard", before);
      git(pair.local, "reflog", "expire", "--expire=now", "--all");
      git(pair.local, "gc", "-q", "--prune=now");
      writeFileSync(path.join(pair.local, "code", "m7.js"), "export const v7 = 'the host commits';\n");
      commitAll(pair.local, "host");
    }
    await round("pack-failed", hostCopy);
    process.env.PAPERCLIP_NATIVE_SANDBOX_DELTA = "off";
    await round("off");
  });

  it("leaves the host workspace as it was when aborted mid-restore, and the next run restores as upstream's", async () => {
    const rng = createRandom(seed ^ 0xab07);
    const pair = await pairOf(rng, "abort");
    const controller = new AbortController();
    let prepared = await prepareBoth(pair, { signal: controller.signal });
    prepared = await (async () => {
      await restoreBoth(prepared);
      return prepareBoth(pair, { signal: controller.signal });
    })();
    sandboxChanges(rng, pair, []);
    writeFileSync(path.join(pair.remote, "the-agent-was-here.txt"), "something to pull\n");
    mirrorTree(pair.remote, pair.twinRemote);
    const host = contentState(pair.local);
    const head = git(pair.local, "rev-parse", "HEAD");
    // Aborted as the listing runs (which brings what changed back).
    pair.made.hooks.before = (call) => {
      if (call.script.includes("-newerct")) controller.abort();
    };
    await expect(prepared.ours.restoreWorkspace()).rejects.toMatchObject({ name: "AbortError" });
    pair.made.hooks.before = null;
    expect(contentState(pair.local)).toEqual(host);
    expect(git(pair.local, "rev-parse", "HEAD")).toBe(head);
    expect(git(pair.local, "for-each-ref", "refs/paperclip")).toBe("");
    // The twin never restored this run: both restore the next one.
    const next = await prepareBoth(pair);
    expectSameSandboxes(pair, "after the abort");
    sandboxChanges(rng, pair, []);
    const outcome = await restoreBoth(next);
    expect(failure(outcome.mine, pair.local)).toBe(failure(outcome.upstreams, pair.twin));
    if (!outcome.mine) expectSameHosts(pair, "after the abort");
  });
});
