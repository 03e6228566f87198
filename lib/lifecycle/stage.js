// The prepare half of a workspace's lifecycle that every delta shares: the SSH lane's tree
// (../ssh-delta.js), the sandbox lane's plain tree (../sandbox/delta.js) and its git
// workspace (../sandbox/git-delta.js) each stage by these steps, with their own listing,
// plan and transport plugged in. What holds for every delta lives here:
// - a delta that cannot run (no manifest, a remote that cannot answer, any doubt) becomes
//   upstream's full upload, counted with its reason, never a partial one;
// - before a full upload the manifest is dropped (a write of it in flight finished first):
//   until the upload's own record, nothing vouches for what the remote holds;
// - what a full upload's record fails at leaves no manifest rather than a wrong one;
// - the host walk started for the delta never outlives the call.
import { promises as fs } from "node:fs";
import { settled } from "../tree-delta.js";

/**
 * Stages by a delta or, failing one, by the full upload. `run`: one prepare's context (its
 * manifest's `file` at least). `kind`: the delta's steps:
 * - `ready(run)`: resolves `{ fallback }` (why the full upload runs) or what `apply` needs;
 *   a failure that ends the call (an abort, a deadline, a connection lost) rejects;
 * - `apply(run, ready, full)`: the delta; resolves the stage's result (`{ mode: "delta", … }`)
 *   or `full(reason)`'s, when it finds it cannot finish;
 * - `upload(run)`: upstream's full upload; resolves what `recordFull` records;
 * - `recordFull(run, uploaded)`: the manifest of what the full upload left;
 * - `countFull(reason)`: counts a full upload;
 * - `settle(run)`: waits for what the context started (the host walk).
 * `fallback`: a reason for the full upload known before the remote is asked, or `null`.
 * Resolves the delta's result or `{ mode: "full", reason }`.
 */
export async function stageDelta(kind, run, fallback = null) {
  const full = (reason) => fullUpload(kind, run, reason);
  try {
    if (fallback) return await full(fallback);
    const ready = await kind.ready(run);
    if (ready.fallback) return await full(ready.fallback);
    return await kind.apply(run, ready, full);
  } finally {
    await kind.settle(run);
  }
}

/** Upstream's full upload, counted with `reason`: the manifest dropped first, then the upload and its record. */
async function fullUpload(kind, run, reason) {
  kind.countFull(reason);
  await settled(run.file);
  await fs.rm(run.file, { force: true }).catch(() => undefined);
  const uploaded = await kind.upload(run);
  await Promise.resolve()
    .then(() => kind.recordFull(run, uploaded))
    .catch(() => undefined);
  return { mode: "full", reason };
}

/**
 * A delta's listing of the remote: `ask()`'s answer (a parsed listing, or the `Error` a
 * listing started earlier ended with) as `{ listing }`, or `{ fallback }` for the full
 * upload: the remote cannot answer (its command failed, its tools are not GNU's, its output
 * does not parse) or has no such directory (`remote-absent`). A failure that `ends(error)`
 * says ends the call rejects instead.
 */
export async function listingOrFallback(ask, ends) {
  let listing;
  try {
    listing = await ask();
    if (listing instanceof Error) throw listing;
  } catch (error) {
    if (ends(error)) throw error;
    return { fallback: "remote-cannot-answer" };
  }
  if (!listing.entries) return { fallback: listing.header[1] === "absent" ? "remote-absent" : "remote-cannot-answer" };
  return { listing };
}
