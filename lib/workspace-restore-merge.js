// Drop-in for `@paperclipai/adapter-utils/workspace-restore-merge`.
// The walk and the hashing are native and parallel; this module builds upstream's shapes
// (a `Map` in walk order) and keeps the pure helpers (serialize/parse/digest) in JS. The
// merge captures and applies natively; the lock (which awaits JS callbacks) is in JS
// (`./merge-lock.js`), with upstream's on-disk protocol.
import { createHash } from "node:crypto";
import path from "node:path";
import { WORKSPACE_RESTORE_LOCK_TIMEOUT_CODE, withDirectoryMergeLock } from "./merge-lock.js";
import { codes, native, runCancellable, toJsError } from "./native.js";
import { statCaches } from "./snapshot-cache.js";
import { entriesFromTransfer } from "./snapshot-transfer.js";
import { captureWatchedSnapshot, watchedSnapshotsEnabled } from "./snapshot-watch.js";
import { reportForeignStaging } from "./staging.js";

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

/** The code of a merge refused by `conflictPolicy: "reject"` (upstream vNext's). */
const DIRECTORY_MERGE_CONFLICT_CODE = "DIRECTORY_MERGE_CONFLICT";
/** The code of a merge refused by `refuseEmptySource: true`. */
const EMPTY_SOURCE_CODE = codes.EMPTY_SOURCE;

const BASELINE_UNMATCHABLE = 0;
const BASELINE_DIR = 1;
const BASELINE_FILE = 2;
const BASELINE_SYMLINK = 3;
const HASH_PATTERN = /^[0-9a-f]{64}$/;

/** A string a file system name or link target can spell (no NUL, no lone surrogate). */
function isSpellable(value) {
  return typeof value === "string" && !value.includes("\u0000") && value.isWellFormed();
}

/**
 * The baseline entries in the native transfer form. Entries whose path no walk can
 * produce are left out (they can equal no source or host entry); entries upstream's
 * `entriesMatch` can never match are sent as "unmatchable".
 */
function baselineTransfer(entries) {
  const paths = [];
  const kinds = new Uint8Array(entries.size);
  const modes = new Uint32Array(entries.size);
  const hashes = [];
  const targets = [];
  for (const [relative, entry] of entries) {
    if (!isSpellable(relative)) continue;
    const i = paths.length;
    paths.push(relative);
    if (entry?.kind === "dir") {
      kinds[i] = BASELINE_DIR;
    } else if (
      entry?.kind === "file" &&
      Number.isInteger(entry.mode) &&
      entry.mode >= 0 &&
      entry.mode <= 0xffffffff &&
      typeof entry.hash === "string" &&
      HASH_PATTERN.test(entry.hash)
    ) {
      kinds[i] = BASELINE_FILE;
      modes[i] = entry.mode;
      hashes.push(entry.hash);
    } else if (entry?.kind === "symlink" && isSpellable(entry.target)) {
      kinds[i] = BASELINE_SYMLINK;
      targets.push(entry.target);
    } else {
      kinds[i] = BASELINE_UNMATCHABLE;
    }
  }
  return {
    paths: paths.join("\u0000"),
    kinds: kinds.subarray(0, paths.length),
    modes: modes.subarray(0, paths.length),
    hashes: hashes.join(""),
    targets: targets.join("\u0000"),
  };
}

function refusal(outcome) {
  const error = new Error(outcome.refusedMessage);
  if (outcome.refusedCode === DIRECTORY_MERGE_CONFLICT_CODE) error.name = "DirectoryMergeConflict";
  error.code = outcome.refusedCode;
  error.paths = outcome.paths;
  return error;
}

/**
 * The failure upstream would have reported: upstream applies entries one at a time in
 * `localeCompare` order and stops at the first that fails; ours applies them all and
 * reports the failure of the least path in that order.
 */
function firstFailure(outcome) {
  const compare = new Intl.Collator().compare;
  let first = 0;
  for (let i = 1; i < outcome.failedPaths.length; i += 1) {
    if (compare(outcome.failedPaths[i], outcome.failedPaths[first]) < 0) first = i;
  }
  return toJsError({ message: outcome.failedErrors[first] });
}

/**
 * Three-way merge of a remote result into the host workspace (upstream's semantics; see
 * the .d.ts). The source is captured outside the lock; inside it the hooks are awaited
 * and the native merge captures the host tree and applies the changes.
 */
export async function mergeDirectoryWithBaseline(input) {
  const { baseline } = input;
  const conflictPolicy = input.conflictPolicy ?? "overwrite";
  if (conflictPolicy !== "overwrite" && conflictPolicy !== "reject") {
    const error = new TypeError(
      `conflictPolicy must be "overwrite" or "reject", got ${JSON.stringify(conflictPolicy)}`,
    );
    error.code = "ERR_INVALID_ARG_VALUE";
    throw error;
  }
  const exclude = [...new Set(baseline.exclude ?? [])];
  const capturing = runCancellable(undefined, (cancelId) =>
    native.mergeCaptureSource(path.normalize(input.sourceDir), exclude, cancelId),
  );
  // Encoded while the source is captured off the JS thread, then decoded natively beside
  // the capture (not inside the lock).
  let transfer;
  try {
    transfer = baselineTransfer(baseline.entries);
  } catch (error) {
    await capturing.catch(() => undefined);
    throw error;
  }
  const decoding = runCancellable(undefined, () => native.mergeDecodeBaseline(transfer));
  decoding.catch(() => undefined); // awaited below, after the capture
  let source;
  try {
    source = await capturing;
  } catch (error) {
    await decoding.catch(() => undefined);
    throw error;
  }
  const decoded = await decoding;
  if (input.refuseEmptySource === true && source.entryCount === 0 && baseline.entries.size > 0) {
    const error = new Error("Refusing to merge an empty source directory over a non-empty baseline");
    error.code = EMPTY_SOURCE_CODE;
    throw error;
  }
  await withDirectoryMergeLock(input.targetDir, async (canonicalTargetDir) => {
    await input.beforeApply?.();
    const outcome = await runCancellable(undefined, () =>
      native.mergeApply(source, decoded, canonicalTargetDir, exclude, conflictPolicy === "reject"),
    );
    reportForeignStaging(canonicalTargetDir, outcome.foreignStaging);
    if (outcome.refusedCode) throw refusal(outcome);
    if (outcome.failedPaths.length > 0) throw firstFailure(outcome);
    await input.afterApply?.();
  });
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
