// The restore merge's driver, shared by upstream's `mergeDirectoryWithBaseline`
// (./workspace-restore-merge.js) and the lanes' restores (./lifecycle/remote-start.js): the source is
// captured natively outside the lock while the baseline is decoded beside it; inside the lock
// the hooks are awaited and the native merge captures the host tree and applies the changes.
// With a remote start (what the prepare gave the remote), the native merge changes only what
// the agent changed (crates/core/src/merge/judged.rs) and reports what it kept.
import path from "node:path";
import { withDirectoryMergeLock } from "./merge-lock.js";
import { codes, native, runCancellable, toJsError } from "./native.js";
import { reportForeignStaging } from "./staging.js";

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
 * Merges `input.sourceDir` into `input.targetDir` against `input.baseline` (upstream's
 * `mergeDirectoryWithBaseline` input, with our `conflictPolicy` and `refuseEmptySource`).
 * `start` (a native `MergeStart`, ./lifecycle/remote-start.js): a lane's restore, judged against what
 * the remote was given. Resolves `{ kept, advanced }`: the host paths the merge left as they
 * are although they looked changed, each `{ path, reason }`, and what the host holds where
 * the merge changed it, `[path, entry | null]` (a snapshot entry; `null`: removed); both
 * empty without a start.
 */
export async function mergeIntoTarget(input, start = null) {
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
    native.mergeCaptureSource(path.normalize(input.sourceDir), exclude, cancelId, start !== null),
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
  let kept = [];
  let advanced = [];
  await withDirectoryMergeLock(input.targetDir, async (canonicalTargetDir) => {
    await input.beforeApply?.();
    const outcome = await runCancellable(undefined, () =>
      native.mergeApply(source, decoded, canonicalTargetDir, exclude, conflictPolicy === "reject", start),
    );
    reportForeignStaging(canonicalTargetDir, outcome.foreignStaging);
    if (outcome.refusedCode) throw refusal(outcome);
    if (outcome.failedPaths.length > 0) throw firstFailure(outcome);
    kept = outcome.keptPaths.map((keptPath, i) => ({ path: keptPath, reason: outcome.keptReasons[i] }));
    advanced = outcome.advancedPaths.map((relative, i) => [relative, writtenEntry(outcome, i)]);
    await input.afterApply?.();
  });
  return { kept, advanced };
}

/** The `i`-th entry of a merge outcome's `advanced*` lists as a snapshot entry (`null`: removed). */
function writtenEntry(outcome, i) {
  switch (outcome.advancedKinds[i]) {
    case 1:
      return { kind: "dir" };
    case 2:
      return { kind: "file", mode: outcome.advancedModes[i], hash: outcome.advancedHashes[i] };
    case 3:
      return { kind: "symlink", target: outcome.advancedTargets[i] };
    default:
      return null;
  }
}
