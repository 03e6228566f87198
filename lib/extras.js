// Our additions that have no upstream twin (exported from the package root only).
import { checkOptionNames, invalidArgument } from "./arguments.js";
import { native } from "./native.js";
import { statCaches } from "./snapshot-cache.js";

/**
 * For a snapshot captured with `incremental: true` or `previous`, how many file hashes the
 * capture reused from the previous snapshot instead of reading the file (0 otherwise).
 */
export function snapshotReusedHashCount(snapshot) {
  return statCaches.get(snapshot)?.reusedHashes ?? 0;
}

const MIB = 1024 * 1024;
/** The fixed part of an archive transfer deadline: 60 s. */
export const ARCHIVE_TRANSFER_BASE_MS = 60_000;
/** The size-scaled part of an archive transfer deadline: 1 s per MiB. */
export const ARCHIVE_TRANSFER_MS_PER_MIB = 1_000;
/** The cap of an archive transfer deadline: 30 minutes. */
export const ARCHIVE_TRANSFER_MAX_MS = 30 * 60_000;
/** Up to this deadline (5 minutes) a transfer keeps the provider's own timeout. */
export const ARCHIVE_TRANSFER_SMALL_MS = 5 * 60_000;

/**
 * The deadline for transferring an archive of `archiveBytes` bytes: one second per MiB plus
 * 60 s, capped at 30 minutes; when that figure is no greater than five minutes and the
 * provider has a timeout, the provider's timeout is kept.
 */
export function archiveTransferTimeoutMs(input) {
  checkOptionNames(input ?? {}, ["archiveBytes", "providerTimeoutMs"], "archiveTransferTimeoutMs");
  const { archiveBytes, providerTimeoutMs } = input ?? {};
  if (typeof archiveBytes !== "number" || !Number.isFinite(archiveBytes) || archiveBytes < 0) {
    throw invalidArgument(`archiveBytes must be a finite number >= 0, got ${String(archiveBytes)}`, RangeError);
  }
  if (providerTimeoutMs != null && (typeof providerTimeoutMs !== "number" || !(providerTimeoutMs > 0))) {
    throw invalidArgument(`providerTimeoutMs must be a number > 0, got ${String(providerTimeoutMs)}`, RangeError);
  }
  const scaled = Math.ceil(ARCHIVE_TRANSFER_BASE_MS + (archiveBytes / MIB) * ARCHIVE_TRANSFER_MS_PER_MIB);
  const figure = Math.min(scaled, ARCHIVE_TRANSFER_MAX_MS);
  return figure <= ARCHIVE_TRANSFER_SMALL_MS && providerTimeoutMs != null ? providerTimeoutMs : figure;
}

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
