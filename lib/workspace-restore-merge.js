// Drop-in for `@paperclipai/adapter-utils/workspace-restore-merge`.
// The walk and the hashing are native and parallel; this module builds upstream's shapes
// (a `Map` in walk order) and keeps the pure helpers (serialize/parse/digest) in JS. The
// merge captures and applies natively; the lock (which awaits JS callbacks) is in JS
// (`./merge-lock.js`), with upstream's on-disk protocol.
import { createHash } from "node:crypto";
import path from "node:path";
import { WORKSPACE_RESTORE_LOCK_TIMEOUT_CODE, withDirectoryMergeLock } from "./merge-lock.js";
import { native, runCancellable, toJsError } from "./native.js";
import { mergeIntoTarget } from "./restore-merge.js";
import { statCaches } from "./snapshot-cache.js";
import { entriesFromTransfer } from "./snapshot-transfer.js";
import { captureWatchedSnapshot, watchedSnapshotsEnabled } from "./snapshot-watch.js";

export async function captureDirectorySnapshot(rootDir, options = {}) {
  const exclude = [...new Set(options.exclude ?? [])];
  const previous = options.previous ? (statCaches.get(options.previous)?.cache ?? null) : null;
  const keep = options.incremental === true || options.previous !== undefined;
  // `watch: true` or PAPERCLIP_NATIVE_WATCH_SNAPSHOTS=1: repeat captures of an absolute root
  // come from a process-wide watcher (the same result, re-reading only what changed).
  if (
    !keep &&
    typeof rootDir === "string" &&
    path.isAbsolute(rootDir) &&
    (options.watch === true || watchedSnapshotsEnabled())
  ) {
    return captureWatchedSnapshot(path.normalize(rootDir), exclude, options.signal);
  }
  const transfer = await runCancellable(options.signal, (cancelId) =>
    native.snapshotCapture(path.normalize(rootDir), exclude, previous, keep, cancelId),
  );
  const snapshot = { exclude, entries: entriesFromTransfer(transfer) };
  if (transfer.cache) statCaches.set(snapshot, { cache: transfer.cache, reusedHashes: transfer.reusedHashes });
  return snapshot;
}

function compareKeys([left], [right]) {
  return left.localeCompare(right);
}

export function serializeDirectorySnapshot(snapshot) {
  return {
    version: 1,
    exclude: [...snapshot.exclude],
    entries: [...snapshot.entries.entries()].sort(compareKeys),
  };
}

function isSafeRelativePath(value) {
  if (!value || path.posix.isAbsolute(value) || path.win32.isAbsolute(value)) return false;
  return value.split(/[\\/]/).every((segment) => segment !== "..");
}

function isPlainObject(value) {
  return Boolean(value) && typeof value === "object" && !Array.isArray(value);
}

function parseEntry(value) {
  if (!isPlainObject(value)) return null;
  if (value.kind === "dir") return { kind: "dir" };
  if (value.kind === "symlink" && typeof value.target === "string") return { kind: "symlink", target: value.target };
  if (
    value.kind === "file" &&
    Number.isInteger(value.mode) &&
    value.mode >= 0 &&
    typeof value.hash === "string" &&
    /^[0-9a-f]{64}$/.test(value.hash)
  ) {
    return { kind: "file", mode: value.mode, hash: value.hash };
  }
  return null;
}

export function parseDirectorySnapshot(value) {
  if (!isPlainObject(value) || value.version !== 1) return null;
  if (!Array.isArray(value.exclude) || !value.exclude.every((e) => typeof e === "string")) return null;
  if (!Array.isArray(value.entries)) return null;
  const entries = new Map();
  for (const raw of value.entries) {
    if (!Array.isArray(raw) || raw.length !== 2) return null;
    const [relative, rawEntry] = raw;
    if (typeof relative !== "string" || !isSafeRelativePath(relative)) return null;
    const entry = parseEntry(rawEntry);
    if (!entry || entries.has(relative)) return null;
    entries.set(relative, entry);
  }
  return { exclude: [...new Set(value.exclude)], entries };
}

export function directorySnapshotSha256(snapshot) {
  return createHash("sha256")
    .update(JSON.stringify(serializeDirectorySnapshot(snapshot)))
    .digest("hex");
}

function entriesMatch(left, right) {
  if (!left || !right || left.kind !== right.kind) return false;
  if (left.kind === "dir") return true;
  if (left.kind === "symlink") return left.target === right.target;
  return left.mode === right.mode && left.hash === right.hash;
}

/** Reads one entry as a snapshot would record it, `null` when absent or not recordable. */
async function readSnapshotEntry(rootDir, relative) {
  try {
    const raw = await native.snapshotReadEntry(path.normalize(rootDir), relative);
    if (!raw) return null;
    if (raw.kind === "dir") return { kind: "dir" };
    if (raw.kind === "symlink") return { kind: "symlink", target: raw.target };
    return { kind: "file", mode: raw.mode, hash: raw.hash };
  } catch (error) {
    throw toJsError(error);
  }
}

export async function directoryEntryMatchesBaseline(rootDir, relative, baselineEntry) {
  return entriesMatch(await readSnapshotEntry(rootDir, relative), baselineEntry);
}

export { WORKSPACE_RESTORE_LOCK_TIMEOUT_CODE, withDirectoryMergeLock };

/**
 * Three-way merge of a remote result into the host workspace (upstream's semantics; see
 * the .d.ts and ./restore-merge.js).
 */
export async function mergeDirectoryWithBaseline(input) {
  await mergeIntoTarget(input);
}

export function classifyWorkspaceRestoreFailure(error) {
  const code = error && typeof error === "object" ? error.code : undefined;
  if (code === "EACCES" || code === "EPERM") return "restore_permission_denied";
  if (code === WORKSPACE_RESTORE_LOCK_TIMEOUT_CODE) return "restore_lock_timeout";
  return "restore_failed";
}

export function describeWorkspaceRestoreFailure(code) {
  switch (code) {
    case "restore_permission_denied":
      return "the restore could not write to the workspace (permission denied)";
    case "restore_lock_timeout":
      return "the restore timed out waiting for the workspace merge lock";
    case "restore_failed":
      return "the restore failed";
    default:
      return undefined;
  }
}
