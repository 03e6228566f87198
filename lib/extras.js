// Our additions that have no upstream twin (exported from the package root only).
import { native } from "./native.js";
import { statCaches } from "./snapshot-cache.js";

/**
 * For a snapshot captured with `incremental: true` or `previous`, how many file hashes the
 * capture reused from the previous snapshot instead of reading the file (0 otherwise).
 */
export function snapshotReusedHashCount(snapshot) {
  return statCaches.get(snapshot)?.reusedHashes ?? 0;
}

// The archive transfer deadline lives with the sandbox lane that enforces it.
export {
  ARCHIVE_TRANSFER_BASE_MS,
  ARCHIVE_TRANSFER_MAX_MS,
  ARCHIVE_TRANSFER_MS_PER_MIB,
  ARCHIVE_TRANSFER_SMALL_MS,
  archiveTransferTimeoutMs,
} from "./sandbox/archive-deadline.js";

/**
 * The counters of this process's SSH session pool (docs/ssh.md, session reuse): sessions
 * `opened`, calls served by a pooled session (`reused`), sessions put back after a clean
 * call (`returned`), disconnected after an error, cancellation or timeout (`dropped`),
 * closed after a clean call without being kept (`closed`: reuse off, pool full), closed
 * idle (`expired`), closed idle because they stopped answering keepalives (`dead`), pooled
 * sessions the server had closed, replaced at checkout (`retried`), calls served by a
 * session opened ahead of them (`openedAhead`, counted in `opened`), the idle sessions held
 * now (`idle`), and commands run on a warm channel (`warmUsed`) or run without the warm
 * channel that was dropped (`warmDropped`).
 */
export function sshPoolStats() {
  return { ...native.sshPoolStats() };
}

/**
 * What the SSH lane's delta uploads and restores did in this process: uploads sent as
 * deltas, full uploads and why (`no-manifest`, `remote-absent`, `remote-cannot-answer`,
 * `off`), run directories started from the previous run's, and the same for restores.
 */
export { sshDeltaStats } from "./ssh-delta.js";

/**
 * What the sandbox lane's delta uploads did in this process: uploads sent as deltas, full
 * uploads and why (`no-manifest`, `remote-absent`, `remote-cannot-answer`, `walk-failed`,
 * `too-many-removals`, `preserved-pattern`, `client`, `off`), members sent, entries removed.
 */
export { sandboxDeltaStats } from "./sandbox/delta.js";

/** Closes every idle pooled SSH session now (they also close by themselves after 10 s idle). */
export function closeIdleSshSessions() {
  native.sshPoolClear();
}
