// What a lane's prepare gave the remote, and the restore merge that judges the agent's work
// against it (docs/differences.md, "Nothing the agent did not change"). Both lanes, every
// transfer (full or delta, chunked, duplex or a provider's syncOut, SSH) end their restore
// here: the remote's end state is compared with what the remote started from, not with the
// host's baseline, and the host changes only where the agent changed something and the host
// still holds its baseline (crates/core/src/merge/judged.rs).
//
// What the remote started from is described once, from what the prepare sent:
// - `untransferred`: the `--exclude` values of the send and of the pull, matched as GNU tar
//   matches them (unanchored, glob, `._*` always): such a path never travels either way, so
//   the host's copy is never judged, never deleted, never replaced;
// - for a git workspace staged as a checkout (the sandbox lane), HEAD's tree (its blobs and
//   modes), the overlay of host files sent over it and the deleted paths removed after: a
//   checkout's file is judged against its blob, not against the host's bytes and mode.
import { randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { runLocalGit } from "../local-git.js";
import { native } from "../native.js";
import { mergeIntoTarget } from "../restore-merge.js";

/** What a restore reports when it keeps a host path, by reason (crates/core/src/merge/judged.rs). */
const KEPT_REASONS = {
  "host-changed": "changed on the host during the run",
  "never-sent": "never sent to the remote",
  "not-empty": "a directory the agent removed or replaced that holds host changes or paths never sent",
  "special-file": "a FIFO, socket or device",
  blocked: "below a path kept as the host holds it",
};

/** The most paths a kept report names (the rest are counted). */
const REPORTED_PATHS = 20;

/** The umask this process creates files under (read off a directory it makes in `dir`). */
export async function hostUmask(dir = os.tmpdir()) {
  const probe = path.join(dir, `paperclip-umask-${process.pid}-${randomBytes(6).toString("hex")}`);
  await fs.mkdir(probe);
  try {
    return ~(await fs.stat(probe)).mode & 0o777;
  } finally {
    await fs.rmdir(probe).catch(() => undefined);
  }
}

/**
 * Describes what a prepare gave the remote. `untransferred`: the send's and the pull's
 * `--exclude` values. `checkout` (a git workspace staged as HEAD's checkout under an overlay):
 * `{ localDir, head, overlay, removed }`: the host repository, the commit checked out, the
 * host paths sent over it (or `wholeTree: true`: every path the host holds, the SSH lane's
 * upload) and the paths removed after. `mask`: the permission bits the
 * remote's extraction may clear from the host's modes (its umask, tree-delta.js
 * `extractionMask`), `null` when unknown (a mode is then the agent's change only where it
 * differs in more than group, other or special bits narrowed). Resolves the native
 * description.
 */
export async function describeRemoteStart({ untransferred, checkout = null, mask = null }) {
  const input = { untransferred: [...new Set(untransferred)] };
  if (Number.isInteger(mask)) input.mask = mask;
  // HEAD's tree as the prepare checked it out; a commit this host no longer holds (reset away
  // and pruned since) leaves the checkout undescribed: its files are then judged against the
  // host's baseline, as every file of a plain workspace is.
  const tree = checkout
    ? await runLocalGit(checkout.localDir, ["ls-tree", "-r", "-z", "--full-tree", checkout.head], {
        timeout: 120_000,
        maxBuffer: 1024 * 1024 * 1024,
      }).then(
        ({ stdout }) => Buffer.from(stdout),
        () => null,
      )
    : null;
  if (tree) {
    input.tree = tree;
    if (checkout.wholeTree) input.wholeTree = true;
    else input.overlay = checkout.overlay;
    input.removed = checkout.removed;
    // The clone the prepare made here (the sandbox's own checkout takes this umask too).
    input.checkoutUmask = await hostUmask();
  }
  return await native.mergeDescribeStart(input);
}

/**
 * The top-level names the remote workspace was given (at most `max`, in code-unit order):
 * the restore's workspace guard looks for them where the prepare's runtime directory is gone
 * (./workspace-guard.js). `baseline`: the host baseline; `start`: the described start (a
 * checkout's own names, else the baseline's that travel).
 */
export function givenTopLevel(baseline, start, max = 16) {
  const checkout = start.checkoutTopLevel();
  if (checkout) return checkout.slice(0, max);
  const candidates = [...baseline.entries.keys()].filter((relative) => !relative.includes("/")).sort();
  const travels = start.transferable(candidates);
  return candidates.filter((_, i) => travels[i]).slice(0, max);
}

/** The progress line of a restore that kept host paths, `null` when it kept none. */
export function keptLine(kept) {
  if (kept.length === 0) return null;
  const named = kept
    .slice(0, REPORTED_PATHS)
    .map(({ path, reason }) => `${path} (${KEPT_REASONS[reason] ?? reason})`)
    .join(", ");
  const more = kept.length > REPORTED_PATHS ? ` and ${kept.length - REPORTED_PATHS} more` : "";
  return `Kept ${kept.length} host path${kept.length === 1 ? "" : "s"} as the host holds ${kept.length === 1 ? "it" : "them"}, not as the agent left ${kept.length === 1 ? "it" : "them"}: ${named}${more}`;
}

/**
 * What earlier restores of a run wrote on the host, per run baseline (the prepare's, or the
 * caller's `baselineSnapshot`, never changed itself) and workspace (its resolved path: a
 * caller may restore twins from one baseline object): path → entry as written, `null` where
 * a restore removed the path.
 */
const written = new WeakMap();

/** The record of what restores against `baseline` into `localDir` wrote (made when `make`). */
function writtenTo(baseline, localDir, make = false) {
  let byDir = written.get(baseline);
  if (!byDir && make) written.set(baseline, (byDir = new Map()));
  const key = path.resolve(localDir);
  let wrote = byDir?.get(key);
  if (!wrote && make) byDir.set(key, (wrote = new Map()));
  return wrote ?? null;
}

/**
 * `baseline` with what earlier restores against it into `localDir` wrote in place
 * ({@link mergeAgentWork}'s `run`): a later restore of the same run judges the host against
 * it, so what an earlier restore wrote does not read as a host edit made during the run.
 * `baseline` itself when none did.
 */
export function advancedBaseline(baseline, localDir) {
  const wrote = writtenTo(baseline, localDir);
  if (!wrote) return baseline;
  const entries = new Map(baseline.entries);
  for (const [relative, entry] of wrote) {
    if (entry) entries.set(relative, entry);
    else entries.delete(relative);
  }
  return { ...baseline, entries };
}

/**
 * What a project repository's restore wrote (its run baseline `from`, into `fromDir`),
 * carried to its workspace's run baseline `to` (into `toDir`), each path under `prefix`.
 */
export function carryWritten(from, fromDir, to, toDir, prefix) {
  const wrote = writtenTo(from, fromDir);
  if (!wrote) return;
  const into = writtenTo(to, toDir, true);
  for (const [relative, entry] of wrote) into.set(`${prefix}${relative}`, entry);
}

/**
 * A lane's restore merge: `input` as `mergeDirectoryWithBaseline`'s, judged against `start`
 * (from {@link describeRemoteStart}); what it kept goes to `sink` (a progress sink) as one line.
 * `run`: the run baseline whose restores this one follows ({@link advancedBaseline}), on which
 * what it wrote into `input.targetDir` is recorded. Resolves the kept paths (`{ path, reason }`).
 */
export async function mergeAgentWork(input, start, sink, run) {
  const { kept, advanced } = await mergeIntoTarget(input, start);
  if (run) {
    const wrote = writtenTo(run, input.targetDir, true);
    for (const [relative, entry] of advanced) wrote.set(relative, entry);
  }
  const line = keptLine(kept);
  if (line && typeof sink === "function") await sink(line);
  return kept;
}
