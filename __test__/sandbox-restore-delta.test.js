// Delta restores of the sandbox lane against upstream's full pull and merge (docs/sandbox.md,
// "Delta uploads"): two copies of one seeded workspace, ours prepared and restored through
// our `prepareCommandManagedRuntime`, the twin through upstream's; the same seeded changes
// made in both sandboxes (a file rewritten with the same size and mtime, a file replaced by
// a directory, a directory moved whole, deletions) and on both hosts while the run is on;
// after each restore the two workspaces are equal entry by entry (kinds, modes, contents,
// link targets). Then every fallback to the full pull, an abort
// mid-restore, the runner commands of a repeat run, and the listing's archive of what
// changed used in place of the pull only when it holds every member.
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import * as upstream from "@paperclipai/adapter-utils/command-managed-runtime";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { prepareCommandManagedRuntime } from "../lib/command-managed-runtime.js";
import { deltaMark, sandboxDeltaStats, unsentDirectories } from "../lib/sandbox/delta.js";
import { parseListing, planRestoreDelta } from "../lib/tree-delta.js";
import { copyTree, HOST_OPS, inventory, mutate, REMOTE_OPS, sameSizeSameMtime } from "./helpers/merge-triples.js";
import { createRandom, runSeed } from "./helpers/random.js";
import { pairRuleBreaks, recordRunEnd, recordRunStart, sandboxPullExcludes } from "./helpers/restore-rule.js";
import { spawnRunner } from "./helpers/sandbox-runner.js";
import { remoteState } from "./helpers/sshd.js";
import { writeRandomTree } from "./helpers/trees.js";

const seed = runSeed();
const work = mkdtempSync(path.join(os.tmpdir(), "pc-sandbox-restore-delta-"));
const savedHome = process.env.PAPERCLIP_HOME;
beforeAll(() => {
  process.env.PAPERCLIP_HOME = path.join(work, "home");
});
afterAll(() => {
  if (savedHome === undefined) delete process.env.PAPERCLIP_HOME;
  else process.env.PAPERCLIP_HOME = savedHome;
  rmSync(work, { recursive: true, force: true });
});
afterEach(() => {
  delete process.env.PAPERCLIP_NATIVE_SANDBOX_DELTA;
});
let counter = 0;
/** A new empty directory in the suite's scratch directory. */
const fresh = (label) => mkdtempSync(path.join(work, `${label}-`));
const restores = () => sandboxDeltaStats().restore;
const fallbacks = (reason) => restores().fallbacks[reason] ?? 0;

/**
 * A runner that spawns each command here; `hooks.edit(call, result)` may change what a call
 * returns and `hooks.before(call)` runs before it (both set and cleared by the test).
 */
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

/**
 * A restored workspace entry by entry: kinds, modes, contents, link targets (not mtimes: a
 * merge stamps what it writes with the time it writes it, on either side).
 */
function restoredState(dir) {
  return Object.fromEntries(
    Object.entries(remoteState(dir)).map(([key, value]) => [key, value.replace(/^(dir \d+|file \d+) \d+/, "$1")]),
  );
}

/**
 * The entries of the sandbox tree `remote` that are not the host's `local` (kind, mode,
 * time, contents): `{ entry: [sandbox's, host's] }`. Which entries an upload sends at all
 * is upstream's (its excludes): the comparison with upstream's own sandbox checks that.
 */
function notTheHosts(remote, local) {
  const [theirs, mine] = [remoteState(remote), remoteState(local)];
  return Object.fromEntries(
    Object.keys(theirs)
      .filter((key) => theirs[key] !== mine[key])
      .map((key) => [key, [theirs[key], mine[key]]]),
  );
}

/** The sandbox restore's `--exclude` values for a plain workspace prepared with `options`. */
const pullExcludes = (options = {}) => sandboxPullExcludes(options);

/** Where two restored workspaces differ: `{ entry: [ours, upstream's] }`. */
function differences(local, twin) {
  const [a, b] = [restoredState(local), restoredState(twin)];
  const out = {};
  for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) if (a[key] !== b[key]) out[key] = [a[key], b[key]];
  return out;
}

/** Ours and upstream's prepares of the two copies. */
async function prepareBoth(pair, options = {}) {
  const common = { adapterKey: "delta", ...options };
  const ours = await prepareCommandManagedRuntime({
    runner: pair.made.runner,
    spec: { remoteCwd: pair.remote, timeoutMs: 60_000 },
    workspaceLocalDir: pair.local,
    ...common,
  });
  const theirs = await upstream.prepareCommandManagedRuntime({
    runner: spawnRunner().runner,
    spec: { remoteCwd: pair.twinRemote, timeoutMs: 60_000 },
    workspaceLocalDir: pair.twin,
    ...common,
  });
  // What the run starts from, for the rule's check of the restore.
  recordRunStart(pair, pullExcludes(options));
  return { ours, theirs, pair };
}

/** Makes `to` (but its `.paperclip-runtime`) an exact copy of `from` (but its own). */
function mirror(from, to) {
  execFileSync("find", [
    to,
    "-mindepth",
    "1",
    "-maxdepth",
    "1",
    "!",
    "-name",
    ".paperclip-runtime",
    "-exec",
    "rm",
    "-rf",
    "{}",
    "+",
  ]);
  execFileSync("sh", ["-c", 'tar -C "$1" --exclude=./.paperclip-runtime -cf - . | tar -C "$2" -xpf -', "sh", from, to]);
}

/** A seeded workspace and its twin, each with its own sandbox directory. */
async function pairOf(rng, label) {
  const local = fresh(`${label}-local`);
  await writeRandomTree(rng, local, { maxDepth: 3, maxEntries: 7, special: false });
  execFileSync("chmod", ["-R", "u+rwX", local]);
  // Not a repository (a random `.git` would fail both prepares' git probe alike).
  rmSync(path.join(local, ".git"), { recursive: true, force: true });
  // Links that could point out of the tree once moved: our extraction refuses those, full
  // pull or delta (docs/sandbox.md), where upstream's writes them.
  const links = execFileSync("find", [local, "-type", "l", "-lname", "/*", "-o", "-type", "l", "-lname", "..*"], {
    encoding: "utf8",
  });
  for (const link of links.split("\n").filter(Boolean)) rmSync(link);
  const twin = path.join(work, `${label}-twin-${(counter += 1)}`);
  copyTree(local, twin);
  return {
    local,
    twin,
    remote: fresh(`${label}-remote`),
    twinRemote: fresh(`${label}-twin-remote`),
    made: hookedRunner(),
  };
}

/** The agent's seeded changes in our sandbox (not in the runtime's directory), copied to the twin's. */
function sandboxChanges(rng, pair, applied) {
  const aside = path.join(work, `runtime-aside-${(counter += 1)}`);
  renameSync(path.join(pair.remote, ".paperclip-runtime"), aside);
  execFileSync("chmod", ["-R", "u+rwX", pair.remote]);
  applied.push(
    ...mutate(rng, pair.remote, REMOTE_OPS, 1 + rng.int(4), {
      // Links out of the tree are refused by our extraction, full or delta (docs/sandbox.md).
      avoid: ["excluded", "addLink", "retargetLink"],
    }).map((n) => `sandbox-${n}`),
  );
  const files = inventory(pair.remote).files;
  if (files.length > 0 && sameSizeSameMtime(pair.remote, rng.pick(files))) applied.push("sandbox-same-size-and-mtime");
  renameSync(aside, path.join(pair.remote, ".paperclip-runtime"));
  mirror(pair.remote, pair.twinRemote);
}

/** Seeded host edits made while the run is on, copied to the twin. */
function hostChanges(rng, pair, applied) {
  applied.push(...mutate(rng, pair.local, HOST_OPS, 1 + rng.int(3), { avoid: ["dirToLink"] }).map((n) => `host-${n}`));
  const files = inventory(pair.local).files;
  if (files.length > 0 && sameSizeSameMtime(pair.local, rng.pick(files))) applied.push("host-same-size-and-mtime");
  rmSync(pair.twin, { recursive: true, force: true });
  copyTree(pair.local, pair.twin);
}

/** A restore's error message with its workspace's path as `<workspace>`, or null. */
function failure(error, workspace) {
  return error ? error.message.split(workspace).join("<workspace>") : null;
}

/** Restores both; resolves ours's outcome (an error or null) and upstream's. */
async function restoreBoth({ ours, theirs, pair }) {
  recordRunEnd(pair);
  const mine = await ours.restoreWorkspace().then(
    () => null,
    (error) => error,
  );
  const upstreams = await theirs.restoreWorkspace().then(
    () => null,
    (error) => error,
  );
  return { mine, upstreams };
}

describe(`sandbox delta restores (seed ${seed})`, () => {
  it("leave upstream's workspace after seeded changes in the sandbox, on the host, and on both", async () => {
    const rng = createRandom(seed);
    for (let workspace = 0; workspace < 3; workspace += 1) {
      const pair = await pairOf(rng, `w${workspace}`);
      for (let round = 0; round < 6; round += 1) {
        const side = ["sandbox", "host", "both"][round % 3];
        const prepared = await prepareBoth(pair);
        // The hosts' mtimes differ by the seconds between the two merges: not compared.
        expect(differences(pair.remote, pair.twinRemote)).toEqual({});
        // Each sandbox holds its host's tree, times included (what the last restore merged
        // given the host's time, not sent again).
        expect(notTheHosts(pair.twinRemote, pair.twin)).toEqual({});
        expect(notTheHosts(pair.remote, pair.local), `workspace ${workspace}, round ${round}`).toEqual({});
        const applied = [];
        if (side !== "host") sandboxChanges(rng, pair, applied);
        if (side !== "sandbox") hostChanges(rng, pair, applied);
        const before = restores().delta;
        const { mine, upstreams } = await restoreBoth(prepared);
        const context = `workspace ${workspace}, round ${round} (${applied.join(", ")})`;
        // A host edit the remote contradicts fails upstream's merge (its conflict); ours keeps
        // the host's version and goes on. Ours fails only where upstream's fails alike.
        if (mine) expect(failure(mine, pair.local), context).toBe(failure(upstreams, pair.twin));
        if (mine) {
          // Upstream's merge leaves what it applied before the failure, in its own order:
          // both sides start the next round from our tree.
          rmSync(pair.twin, { recursive: true, force: true });
          copyTree(pair.local, pair.twin);
          continue;
        }
        expect(restores().delta, context).toBe(before + 1);
        expect(pairRuleBreaks(pair, { upstreamFailed: Boolean(upstreams) }), context).toEqual({});
      }
    }
  });

  it("records what it merged: the next prepare gives those files the host's time and sends none of them", async () => {
    const pair = await pairOf(createRandom(seed ^ 0x70c4), "recorded");
    // The seeded tree may hold a file or a link named `src` (one of the name pool's): the
    // test's directory takes its place.
    const src = path.join(pair.local, "src");
    if (lstatSync(src, { throwIfNoEntry: false })?.isDirectory() === false) rmSync(src);
    mkdirSync(src, { recursive: true });
    writeFileSync(path.join(pair.local, "src", "edited.txt"), "before\n");
    rmSync(pair.twin, { recursive: true, force: true });
    copyTree(pair.local, pair.twin);
    const prepared = await prepareBoth(pair);
    writeFileSync(path.join(pair.remote, "src", "edited.txt"), "the agent's version\n");
    writeFileSync(path.join(pair.remote, "src", "added.txt"), "added by the agent\n");
    // Written by the agent an hour ago: the merge's copies get a time of their own.
    const anHourAgo = new Date(Date.now() - 3_600_000);
    for (const name of ["edited.txt", "added.txt"])
      utimesSync(path.join(pair.remote, "src", name), anHourAgo, anHourAgo);
    mirror(pair.remote, pair.twinRemote);
    const recorded = restores().recorded;
    // The host directories the restore changes: the one the merge writes into, and any it
    // removes an entry from (a nested `.git` of the seeded tree, which no prepare sends and
    // the restore deletes, as upstream's does).
    const directoryTimes = () =>
      new Map(["", ...inventory(pair.local).dirs].map((dir) => [dir, statSync(path.join(pair.local, dir)).mtimeMs]));
    const timesBefore = directoryTimes();
    expect(await restoreBoth(prepared)).toEqual({ mine: null, upstreams: null });
    const changedDirectories = [...directoryTimes()].filter(([dir, time]) => timesBefore.get(dir) !== time).length;
    expect(changedDirectories).toBeGreaterThanOrEqual(1);
    expect(pairRuleBreaks(pair)).toEqual({});
    expect(restores().recorded).toBe(recorded + 2);
    // The merge's copies have times of their own: the next prepare only gives them the host's.
    const { sent, touched } = sandboxDeltaStats();
    const calls = pair.made.calls.length;
    const next = await prepareBoth(pair);
    expect(sandboxDeltaStats().touched).toBe(touched + 2);
    // At most the directories the restore changed go (as entries), neither file with them.
    expect(sandboxDeltaStats().sent).toBeLessThanOrEqual(sent + changedDirectories);
    expect(pair.made.calls.length - calls).toBeLessThanOrEqual(2);
    expect(notTheHosts(pair.remote, pair.local)).toEqual({});
    expect(differences(pair.remote, pair.twinRemote)).toEqual({});
    // A file whose recorded bytes the host then changes goes again, as any other.
    writeFileSync(path.join(pair.local, "src", "added.txt"), "changed on the host\n");
    await restoreBoth(next);
    const again = sandboxDeltaStats().sent;
    await prepareBoth(pair);
    expect(sandboxDeltaStats().sent).toBeGreaterThan(again);
    expect(notTheHosts(pair.remote, pair.local)).toEqual({});
  });

  it("brings back a directory moved into place whole, its old children included", async () => {
    const pair = await pairOf(createRandom(seed ^ 0x5eed), "moved");
    mkdirSync(path.join(pair.local, "pkg", "deep", "deeper"), { recursive: true });
    writeFileSync(path.join(pair.local, "pkg", "deep", "deeper", "x.txt"), "x\n");
    writeFileSync(path.join(pair.local, "pkg", "deep", "y.txt"), "y\n");
    rmSync(pair.twin, { recursive: true, force: true });
    copyTree(pair.local, pair.twin);
    await prepareBoth(pair);
    // The next prepare lists after the files' ctimes (plus the listing's margin): they are
    // old to it, and a rename moves the directory's ctime alone.
    await new Promise((resolve) => setTimeout(resolve, 3_100));
    const prepared = await prepareBoth(pair);
    renameSync(path.join(pair.remote, "pkg"), path.join(pair.remote, "moved-pkg"));
    mirror(pair.remote, pair.twinRemote);
    const before = restores().delta;
    const { mine, upstreams } = await restoreBoth(prepared);
    expect([mine, upstreams]).toEqual([null, null]);
    expect(restores().delta).toBe(before + 1);
    expect(pairRuleBreaks(pair)).toEqual({});
    expect(remoteState(pair.local)["moved-pkg/deep/deeper/x.txt"]).toMatch(/^file /);
  });

  it("takes one runner command for a small repeat restore (the listing brings the changed files back), two when a new directory comes whole or the changes are large", async () => {
    const pair = await pairOf(createRandom(seed ^ 0xc0de), "commands");
    writeFileSync(path.join(pair.local, "kept.txt"), "kept\n");
    rmSync(pair.twin, { recursive: true, force: true });
    copyTree(pair.local, pair.twin);
    const kinds = (calls) => calls.map((call) => (call.script.includes("pcpull") ? "pull" : "listing"));
    const inline = restores().inline;
    /** One run whose agent does `agent` in the sandbox: the restore's commands, the workspaces equal. */
    const run = async (agent) => {
      const prepared = await prepareBoth(pair);
      agent();
      mirror(pair.remote, pair.twinRemote);
      const calls = pair.made.calls.length;
      expect(await restoreBoth(prepared)).toEqual({ mine: null, upstreams: null });
      expect(pairRuleBreaks(pair)).toEqual({});
      return kinds(pair.made.calls.slice(calls));
    };
    const edits = await run(() => {
      writeFileSync(path.join(pair.remote, "kept.txt"), "the agent's\n");
      writeFileSync(path.join(pair.remote, "added.txt"), "added\n");
    });
    expect(edits).toEqual(["listing"]);
    expect(restores().inline).toBe(inline + 1);
    // A directory the baseline does not hold comes whole, by the pull's own command.
    const made = await run(() => {
      writeFileSync(path.join(pair.remote, "kept.txt"), "the agent's, again\n");
      mkdirSync(path.join(pair.remote, "made"));
      writeFileSync(path.join(pair.remote, "made", "new.txt"), "new\n");
    });
    expect(made).toEqual(["listing", "pull"]);
    // More changed bytes than the listing carries (1 MiB of archive): the pull's own command.
    const large = await run(() => writeFileSync(path.join(pair.remote, "large.bin"), randomBytes(1536 * 1024)));
    expect(large).toEqual(["listing", "pull"]);
    expect(restores().inline).toBe(inline + 1);
  });

  it("lists what changed after the sandbox's own file time the prepare read: a repeat run's restore does not list the tree the run before wrote (by the remote's date less 2 s it does)", async () => {
    /** A first run (a full upload), 0.3 s, a second one whose agent edits `edited.txt`: the members its restore's listing named. */
    const listed = async (label, withoutClock) => {
      const pair = await pairOf(createRandom(seed ^ 0xc10c), label);
      writeFileSync(path.join(pair.local, "edited.txt"), "as sent\n");
      rmSync(pair.twin, { recursive: true, force: true });
      copyTree(pair.local, pair.twin);
      const answers = [];
      pair.made.hooks.edit = (call, result) => {
        let stdout = result.stdout;
        const answer = Buffer.from(stdout, "base64");
        const newline = answer.indexOf(10);
        const header = answer.subarray(0, newline).toString("utf8").split(" ");
        // A sandbox whose listings cannot read its file time (no runtime directory): `-`.
        if (withoutClock && header[0] === "pcdelta" && header.length === 7) {
          header[6] = "-";
          stdout = Buffer.concat([Buffer.from(header.join(" ")), answer.subarray(newline)]).toString("base64");
        }
        if (call.script.includes("-newerct")) answers.push(stdout);
        return { ...result, stdout };
      };
      expect(await restoreBoth(await prepareBoth(pair))).toEqual({ mine: null, upstreams: null });
      await new Promise((resolve) => setTimeout(resolve, 300));
      const prepared = await prepareBoth(pair);
      writeFileSync(path.join(pair.remote, "edited.txt"), "the agent's\n");
      mirror(pair.remote, pair.twinRemote);
      answers.length = 0;
      expect(await restoreBoth(prepared)).toEqual({ mine: null, upstreams: null });
      expect(pairRuleBreaks(pair)).toEqual({});
      expect(answers).toHaveLength(1);
      const { entries } = parseListing(Buffer.from(answers[0], "base64"), { dotted: true });
      // The sandbox's files (not the host's: what no transfer carries stays on the host alone).
      const files = inventory(pair.remote).files.filter((file) => !file.startsWith(".paperclip-runtime/"));
      return { members: [...entries.keys()].sort(), files: files.length };
    };
    const clocked = await listed("clocked", false);
    expect(clocked.members).toEqual(["edited.txt"]);
    // The tree the first run's upload wrote 0.3 s before: within the date's margin, all listed.
    const dated = await listed("dated", true);
    expect(dated.members).toContain("edited.txt");
    expect(dated.members.length).toBeGreaterThanOrEqual(dated.files);
  });

  it("pulls by its own command when the listing's archive lacks a member (a host file moved since the prepare)", async () => {
    const pair = await pairOf(createRandom(seed ^ 0x1a1e), "inline-short");
    writeFileSync(path.join(pair.local, "host-moved.txt"), "as sent\n");
    rmSync(pair.twin, { recursive: true, force: true });
    copyTree(pair.local, pair.twin);
    const prepared = await prepareBoth(pair);
    writeFileSync(path.join(pair.remote, "agent.txt"), "the agent's\n");
    mirror(pair.remote, pair.twinRemote);
    for (const host of [pair.local, pair.twin]) writeFileSync(path.join(host, "host-moved.txt"), "the host's edit\n");
    const calls = pair.made.calls.length;
    const { inline, delta } = restores();
    expect(await restoreBoth(prepared)).toEqual({ mine: null, upstreams: null });
    expect(pair.made.calls.slice(calls).map((call) => call.script.includes("pcpull"))).toEqual([false, true]);
    expect(restores()).toMatchObject({ inline, delta: delta + 1 });
    expect(pairRuleBreaks(pair)).toEqual({});
  });

  it("without the prepare's mark, merges only the plan's members of the listing's archive (which then holds what the prepare wrote too)", async () => {
    const pair = await pairOf(createRandom(seed ^ 0x3a4c), "inline-extra");
    // A small tree: all of it fits the listing's archive.
    rmSync(pair.local, { recursive: true, force: true });
    mkdirSync(path.join(pair.local, "src"), { recursive: true });
    for (const name of ["a.txt", "src/b.txt", "src/c.txt"]) writeFileSync(path.join(pair.local, name), `${name}\n`);
    rmSync(pair.twin, { recursive: true, force: true });
    copyTree(pair.local, pair.twin);
    expect(await restoreBoth(await prepareBoth(pair))).toEqual({ mine: null, upstreams: null });
    // A host edit the next prepare sends: written after its listing read the sandbox's time,
    // so the restore lists it.
    const written = "src/b.txt";
    for (const host of [pair.local, pair.twin]) writeFileSync(path.join(host, written), "sent by the delta\n");
    const prepared = await prepareBoth(pair);
    // The mark is the sandbox's (this host's: the runner runs here), named for the remote directory.
    const mark = execFileSync("sh", ["-c", `echo ${deltaMark(pair.remote)}`], { encoding: "utf8" }).trim();
    expect(statSync(mark).isFile()).toBe(true);
    rmSync(mark);
    writeFileSync(path.join(pair.remote, "agent.txt"), "the agent's\n");
    mirror(pair.remote, pair.twinRemote);
    // What the prepare wrote, changed on the host since: the archive's copy must not win.
    for (const host of [pair.local, pair.twin]) writeFileSync(path.join(host, written), "the host's edit\n");
    const calls = pair.made.calls.length;
    const { inline } = restores();
    expect(await restoreBoth(prepared)).toEqual({ mine: null, upstreams: null });
    expect(pairRuleBreaks(pair)).toEqual({});
    expect(readFileSync(path.join(pair.local, written), "utf8")).toBe("the host's edit\n");
    expect(pair.made.calls.length - calls).toBe(1);
    expect(restores().inline).toBe(inline + 1);
  });

  it("falls back to the full pull, counted: no manifest, a listing cut short, a failed pull, excludes it cannot apply, the setting off", async () => {
    const rng = createRandom(seed ^ 0xfa11);
    const pair = await pairOf(rng, "fallback");
    const round = async (reason, arrange, options, { steady = null } = {}) => {
      if (steady) for (const host of [pair.local, pair.twin]) writeFileSync(path.join(host, steady), "as sent\n");
      const prepared = await prepareBoth(pair, options);
      if (!steady) sandboxChanges(rng, pair, []);
      // Always something to pull.
      writeFileSync(path.join(pair.remote, `pulled-${(counter += 1)}.txt`), "the agent's\n");
      mirror(pair.remote, pair.twinRemote);
      arrange?.();
      const before = fallbacks(reason);
      const outcome = await restoreBoth(prepared);
      pair.made.hooks.edit = null;
      pair.made.hooks.before = null;
      expect(failure(outcome.mine, pair.local), reason).toBe(failure(outcome.upstreams, pair.twin));
      expect(fallbacks(reason), reason).toBe(before + 1);
      if (outcome.mine) {
        // A failed merge on both sides (see above): the next round starts from our tree.
        rmSync(pair.twin, { recursive: true, force: true });
        copyTree(pair.local, pair.twin);
      } else expect(pairRuleBreaks(pair), reason).toEqual({});
    };
    // The manifest gone (another host's cache, a cleared one).
    await round("no-manifest", () =>
      rmSync(path.join(process.env.PAPERCLIP_HOME, "instances"), { recursive: true, force: true }),
    );
    // The listing cut short or mangled on its way back (an output cap).
    for (const edit of [(stdout) => stdout.slice(0, Math.floor(stdout.length / 2)), () => "not base64 at all!"]) {
      await round("remote-cannot-answer", () => {
        pair.made.hooks.edit = (call, result) =>
          call.script.includes("-newerct") && !call.script.includes("pcpull")
            ? { ...result, stdout: edit(result.stdout) }
            : result;
      });
    }
    // The pull fails in the sandbox, or its archive comes back cut short (a host file moved
    // since the prepare, which the sandbox left alone, is among what it pulls: the listing's
    // archive lacks it, so the pull runs).
    for (const edit of [
      (result) => ({ ...result, exitCode: 1, stderr: "injected failure" }),
      (result) => ({ ...result, stdout: result.stdout.slice(0, 40) }),
    ]) {
      const steady = `steady-${(counter += 1)}.txt`;
      const arrange = () => {
        for (const host of [pair.local, pair.twin]) writeFileSync(path.join(host, steady), "the host's edit\n");
        pair.made.hooks.edit = (call, result) => (call.script.includes("pcpull") ? edit(result) : result);
      };
      await round("pull-failed", arrange, undefined, { steady });
    }
    // An exclude that is not a plain name (tar's match of it is not one a listing can apply).
    await round("excludes", null, { workspaceExclude: ["*.skip/x"] });
    process.env.PAPERCLIP_NATIVE_SANDBOX_DELTA = "off";
    await round("off");
  });

  it("leaves the host workspace as it was when aborted mid-restore, and the next run restores as upstream's", async () => {
    const rng = createRandom(seed ^ 0xab07);
    const pair = await pairOf(rng, "abort");
    const controller = new AbortController();
    const prepared = await prepareBoth(pair, { signal: controller.signal });
    sandboxChanges(rng, pair, []);
    writeFileSync(path.join(pair.remote, "the-agent-was-here.txt"), "something to pull\n");
    mirror(pair.remote, pair.twinRemote);
    const host = remoteState(pair.local);
    // Aborted as the listing runs (which brings what changed back): nothing reaches the workspace.
    pair.made.hooks.before = (call) => {
      if (call.script.includes("-newerct")) controller.abort();
    };
    await expect(prepared.ours.restoreWorkspace()).rejects.toMatchObject({ name: "AbortError" });
    pair.made.hooks.before = null;
    expect(remoteState(pair.local)).toEqual(host);
    // The twin never restored this run: both restore the next one.
    const next = await prepareBoth(pair);
    sandboxChanges(rng, pair, []);
    const outcome = await restoreBoth(next);
    expect(failure(outcome.mine, pair.local)).toBe(failure(outcome.upstreams, pair.twin));
    if (!outcome.mine) expect(pairRuleBreaks(pair)).toEqual({});
  });
});

describe("the restore plan", () => {
  it("pulls a directory the baseline does not hold whole, and its listed children not again", async () => {
    const listing = new Map([
      ["moved", { kind: "d", size: 0, mtime: "1", mtimeS: 1, ctime: "9", ino: "1", mode: 0o755, link: "" }],
      ["moved/a.txt", { kind: "f", size: 3, mtime: "1", mtimeS: 1, ctime: "1", ino: "2", mode: 0o644, link: "" }],
      ["kept.txt", { kind: "f", size: 5, mtime: "9", mtimeS: 9, ctime: "9", ino: "3", mode: 0o644, link: "" }],
    ]);
    const plan = await planRestoreDelta({
      manifest: { remoteDir: "/r", localDir: "/l", listedAt: 5, compressor: "cat", files: {} },
      local: "/l",
      remoteDir: "/r",
      baseline: {
        exclude: ["node_modules", "node_modules/*", "*/node_modules", "*/node_modules/*"],
        entries: new Map([
          ["kept.txt", { kind: "file" }],
          ["pkg", { kind: "dir" }],
        ]),
      },
      localWalk: Promise.resolve(JSON.stringify([])),
      remote: { list: async () => ({ header: ["pcdelta", "ok"], entries: listing, enumerated: new Set([""]) }) },
    });
    expect(plan).toMatchObject({ members: ["kept.txt"], trees: ["moved"], names: ["node_modules"] });
    // `pkg`, in the listed top level and not listed, is gone: the merge sees it deleted.
    expect([...plan.baseline.entries.keys()].sort()).toEqual(["kept.txt", "pkg"]);
  });

  it("takes a git workspace's directories the prepare never sent (no file below them, not in HEAD's tree) as gone unless listed, as the full pull does", async () => {
    const baseline = {
      exclude: [],
      entries: new Map([
        ["empty", { kind: "dir" }],
        ["empty/inner", { kind: "dir" }],
        ["src", { kind: "dir" }],
        ["src/deep", { kind: "dir" }],
        ["src/deep/a", { kind: "symlink", target: "y" }],
        ["link-dir", { kind: "dir" }],
        ["link-dir/l", { kind: "symlink", target: "x" }],
        ["refilled", { kind: "dir" }],
        // Held a file of HEAD the host deleted, or one of HEAD's files the baseline excludes:
        // the clone made both, the overlay's removal left the first.
        ["emptied", { kind: "dir" }],
        ["holds-excluded", { kind: "dir" }],
      ]),
    };
    const unsent = unsentDirectories(baseline, new Set(["src", "src/deep", "emptied", "holds-excluded"]));
    expect([...unsent].sort()).toEqual(["empty", "empty/inner", "refilled"]);
    // The agent made `refilled` again (listed, changed); nothing else moved since the prepare.
    const listing = new Map([
      ["refilled", { kind: "d", size: 0, mtime: "9", mtimeS: 9, ctime: "9", ino: "1", mode: 0o755, link: "" }],
    ]);
    const plan = (withUnsent) =>
      planRestoreDelta({
        manifest: { remoteDir: "/r", localDir: "/l", listedAt: 5, compressor: "cat", files: {} },
        local: "/l",
        remoteDir: "/r",
        baseline,
        localWalk: Promise.resolve(JSON.stringify([])),
        remote: { list: async () => ({ header: ["pcdelta", "ok"], entries: listing, enumerated: new Set() }) },
        ...(withUnsent ? { unsent } : {}),
      });
    // Gone (in the cut baseline, absent from the pull): the merge deletes them, as upstream's
    // does; `refilled`, listed as a directory again, is the baseline's and needs nothing.
    expect([...(await plan(true)).baseline.entries.keys()].sort()).toEqual(["empty", "empty/inner"]);
    // Without them, an unlisted directory counts as unchanged and stays.
    expect([...(await plan(false)).baseline.entries.keys()]).toEqual([]);
  });

  it("pulls no file the remote did not touch: not one whose remote mode a umask narrowed, not one whose host copy moved since it was sent (the lanes' merge keeps both as the host holds them)", async () => {
    const row = (mode, mtime = "1") => [3, mtime, "2", "3", "4", 3, "9", "9", "7", mode];
    const plan = await planRestoreDelta({
      manifest: {
        remoteDir: "/r",
        localDir: "/l",
        listedAt: 5,
        compressor: "cat",
        files: { "narrowed.txt": row(0o640), "kept.txt": row(0o664), "edited.txt": row(0o664, "0") },
      },
      local: "/l",
      remoteDir: "/r",
      baseline: {
        exclude: [],
        entries: new Map([
          ["narrowed.txt", { kind: "file", mode: 0o100664, hash: "x" }],
          ["kept.txt", { kind: "file", mode: 0o100664, hash: "y" }],
          ["edited.txt", { kind: "file", mode: 0o100664, hash: "z" }],
        ]),
      },
      localWalk: Promise.resolve(
        JSON.stringify(
          ["narrowed.txt", "kept.txt", "edited.txt"].map((member) => [member, "f", 3, 0o664, "1", "2", "3", "4", null]),
        ),
      ),
      remote: { list: async () => ({ header: ["pcdelta", "ok"], entries: new Map(), enumerated: new Set() }) },
    });
    expect(plan.fallback).toBeUndefined();
    expect(plan.members).toEqual([]);
    expect([...plan.baseline.entries.keys()]).toEqual([]);
  });

  it("leaves out what tar's excludes leave out: a plain name as any component, a plain path as any run of components, AppleDouble names", async () => {
    const file = (ino) => ({
      kind: "f",
      size: 1,
      mtime: "9",
      mtimeS: 9,
      ctime: "9",
      ino: String(ino),
      mode: 0o644,
      link: "",
    });
    const dir = (ino) => ({
      kind: "d",
      size: 0,
      mtime: "9",
      mtimeS: 9,
      ctime: "9",
      ino: String(ino),
      mode: 0o755,
      link: "",
    });
    const listing = new Map([
      ["a", dir(1)],
      ["a/node_modules", dir(2)],
      ["a/node_modules/x.js", file(3)],
      ["a/node_modulesx.js", file(4)],
      ["gen", dir(5)],
      ["gen/out", dir(6)],
      ["gen/out/y.js", file(7)],
      ["deep", dir(8)],
      ["deep/gen", dir(9)],
      ["deep/gen/out", file(10)],
      ["deep/gen/outer.js", file(11)],
      ["gen/output.js", file(12)],
      ["._top", file(13)],
      ["a/._meta", file(14)],
      ["a/kept._x", file(15)],
    ]);
    // The directories are the baseline's: only the changed entries are pulled, each by name.
    const entries = new Map(["a", "gen", "deep", "deep/gen"].map((member) => [member, { kind: "dir" }]));
    const plan = await planRestoreDelta({
      manifest: { remoteDir: "/r", localDir: "/l", listedAt: 5, compressor: "cat", files: {} },
      local: "/l",
      remoteDir: "/r",
      baseline: { exclude: ["node_modules", "*/node_modules", "gen/out", "gen/out/*"], entries },
      localWalk: Promise.resolve(JSON.stringify([])),
      remote: { list: async () => ({ header: ["pcdelta", "ok"], entries: listing, enumerated: new Set() }) },
    });
    expect(plan.names.sort()).toEqual(["gen/out", "node_modules"]);
    expect(plan.trees).toEqual([]);
    expect(plan.members.sort()).toEqual(["a/kept._x", "a/node_modulesx.js", "deep/gen/outer.js", "gen/output.js"]);
  });
});
