// The restore half of a workspace's lifecycle, written once for both lanes: the SSH lane's
// (../ssh-workspace.js) and the sandbox lane's (../sandbox/restore.js) restores with a
// baseline are this function with their own steps plugged in. What holds for every lane
// lives here:
// - the host as the run left it: the caller's baseline with what earlier restores of the run
//   wrote (./remote-start.js `advancedBaseline`);
// - what the remote started from, which the merge judges the agent's work against
//   (./remote-start.js `describeRemoteStart`): nothing the agent did not change is touched;
// - the workspace guard, given the top-level names the prepare gave the remote as its
//   witnesses, applied to every command the lane's remote runs (./remote.js `guardRemote`);
// - the staging directory the tree is pulled into: one of our owner-tagged staging names
//   inside the workspace (no walk lists it; the next operation on the workspace removes it
//   if this process is killed), on the workspace's own file system;
// - the merge under the lock (./remote-start.js `mergeAgentWork`), and the clean-up,
//   whatever the restore reached.
import { promises as fs } from "node:fs";
import path from "node:path";
import { native } from "../native.js";
import { advancedBaseline, describeRemoteStart, givenTopLevel, mergeAgentWork } from "./remote-start.js";
import { guardRemote } from "./remote.js";

/**
 * Restores a workspace from its remote against the run's baseline. `lane`:
 * - `remote`: the lane's remote (./remote.js); `guard`: the workspace the prepare staged
 *   (`{ dir, staged }`, ./workspace-guard.js), or `null`;
 * - `localDir`, the host workspace; `runBaseline`, the caller's baseline (what this restore
 *   writes is recorded on it for the run's next restore); `sink`, the progress sink;
 * - `remoteStart()`: resolves ./remote-start.js `describeRemoteStart`'s input but `mask`;
 *   `mask()`: resolves the permission bits the remote's extraction cleared (a rejection is
 *   `null`);
 * - `startWalk()`: the walk of the host tree a delta compares with the remote's listing,
 *   started before anything else, or `null`; settled before this call returns;
 * - `stageInside` (default true) and `stagingFallback()`: where the tree is pulled when the
 *   workspace has no room for a staging directory (or `stageInside` is false);
 * - the steps, each given the restore's context (`{ baseline, start, guard, remote }`) and
 *   its state (`{ walk, stagingDir, plan }`): `before` (before the workspace's own steps),
 *   `bring` (history and tree into `state.stagingDir`; sets `state.plan` to the delta's plan
 *   when one was pulled), `mergeBaseline` (a full pull's merge baseline; default the context's
 *   `baseline`), `beforeApply` and `afterApply` (resolve the merge's callbacks, or
 *   undefined), `record` (after the merge) and `finish` (once the workspace's own steps began,
 *   whatever they reached).
 */
export async function restoreRun(lane) {
  const state = { walk: lane.startWalk?.() ?? null, stagingDir: null, plan: null };
  let context;
  try {
    context = await openRestore(lane);
    if (lane.before) await lane.before(context, state);
  } catch (error) {
    await state.walk?.catch(() => undefined);
    throw error;
  }
  try {
    state.stagingDir = await restoreStaging(lane);
    await lane.bring(context, state);
    await mergeRestored(lane, context, state);
    if (lane.record) await lane.record(context, state);
  } finally {
    // A restore that did not use it (the full pull, a failure): nothing outlives the call.
    await state.walk?.catch(() => undefined);
    if (lane.finish) await lane.finish(context, state);
    if (state.stagingDir) await fs.rm(state.stagingDir, { recursive: true, force: true }).catch(() => undefined);
  }
}

/**
 * The restore's context: `baseline` (the host as the run left it), `start` (what the remote
 * started from), `guard` (with the top-level names the prepare gave the workspace as its
 * witnesses, when it staged it and the caller named none) and `remote` (the lane's, guarded).
 */
async function openRestore(lane) {
  const baseline = advancedBaseline(lane.runBaseline, lane.localDir);
  const mask = await Promise.resolve()
    .then(() => lane.mask())
    .catch(() => null);
  const start = await describeRemoteStart({ ...(await lane.remoteStart()), mask });
  const guard =
    lane.guard?.staged && !lane.guard.witnesses
      ? { ...lane.guard, witnesses: givenTopLevel(baseline, start) }
      : lane.guard;
  return { baseline, start, guard, remote: guardRemote(lane.remote, guard) };
}

/**
 * Where the tree is pulled before the merge: a directory inside the workspace with one of
 * our staging names (the temp dir is often a disk while the workspace is not, and writing
 * then removing every file of the tree there was most of a restore's time), else the lane's
 * fallback (the workspace missing or not writable). Removed by {@link restoreRun}.
 */
async function restoreStaging(lane) {
  if (lane.stageInside !== false) {
    const inside = path.join(lane.localDir, native.stagingName("restore"));
    const made = await fs.mkdir(inside, { mode: 0o700 }).then(
      () => true,
      () => false,
    );
    if (made) return inside;
  }
  return await lane.stagingFallback();
}

/** The merge of what was pulled, judged against what the remote started from, under the lock. */
async function mergeRestored(lane, context, state) {
  await mergeAgentWork(
    {
      baseline: state.plan?.baseline ?? lane.mergeBaseline?.(context, state) ?? context.baseline,
      sourceDir: state.stagingDir,
      targetDir: lane.localDir,
      beforeApply: lane.beforeApply?.(context, state),
      afterApply: lane.afterApply?.(context, state),
    },
    context.start,
    lane.sink,
    lane.runBaseline,
  );
}
