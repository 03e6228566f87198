// Drop-in for the exclude/escape, ignore-resolution, host-tar and mirror part of
// `@paperclipai/adapter-utils/sandbox-managed-runtime`. `createTarballFromDirectory` writes
// the archive in-process (no `tar` child process).
import { randomUUID } from "node:crypto";
// `promises` is looked up like upstream's, so tests that mock `fs.promises.chmod`/`rename`
// observe the same calls.
import { constants as fsConstants, promises as fs } from "node:fs";
import path from "node:path";
import { checkSignal, requireString } from "./arguments.js";
import {
  readReferencedSourceGitIgnoredPaths,
  ReferencedSourceIgnoreScanLimitExceededError,
  WORKSPACE_GIT_SCAN_SATURATED_CODE,
} from "./git-workspace-sync.js";
import { physicalPaths } from "./ignore-scan.js";
import { abortError, codes, native, runCancellable } from "./native.js";
import { packInput } from "./tar-common.js";
import { prepareSandbox } from "./sandbox/prepare.js";

export { assertSyncOperationsConfined } from "./sandbox/confinement.js";

export const REFERENCED_SOURCE_IGNORE_FAILURE_REASONS = {
  scanFailed: "git-ignore-scan-failed",
  limitExceeded: "git-ignore-scan-limit-exceeded",
  toplevelNotDescendant: "git-toplevel-not-descendant",
};

/** The waits before the second and the third attempt of a saturated scan (upstream's). */
const SATURATED_RETRY_DELAYS_MS = [1_000, 2_000];

export function escapeTarExcludeLiteral(entry) {
  return native.escapeTarExcludeLiteral(entry);
}

export function referencedSourceIgnoreExcludeEntries(resolution) {
  return resolution.kind === "git" ? resolution.ignoredPaths.map((entry) => native.escapeTarExcludeLiteral(entry)) : [];
}

export function mergeExcludes(...groups) {
  return native.mergeExcludeGroups(groups);
}

/** `ms` on the JS timers (so fake timers drive it), cut short by `signal`. */
function delay(ms, signal) {
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortError(signal));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** `localPath`'s POSIX offset under `toplevel` (`""` when equal), `null` when not below it. */
function offsetUnderToplevel(toplevel, localPath) {
  const relative = path.relative(path.resolve(toplevel), path.resolve(localPath));
  if (relative === "") return "";
  if (path.isAbsolute(relative) || relative === ".." || relative.startsWith(`..${path.sep}`)) return null;
  return relative.split(path.sep).join("/");
}

/**
 * Resolves a referenced project's git-ignored paths once, for every staging site:
 * `{ kind: "git", ignoredPaths }` relative to `localPath` (sorted), `{ kind: "other" }`
 * outside a git work tree, or `{ kind: "failed", reason }` with one of
 * {@link REFERENCED_SOURCE_IGNORE_FAILURE_REASONS} — never a message, path or pid.
 *
 * Fails closed: a read error, a timeout, a bound breach or a `localPath` that is not below
 * its own toplevel is a failure, never an empty list. Only a saturated host scan queue
 * (`code` `workspace_git_scan_saturated`) is retried, up to three attempts in all, after
 * 1 s and 2 s (JS timers). An entry equal to `localPath` itself (the whole project ignored)
 * is dropped, as upstream does.
 *
 * `options.signal` (our addition) rejects the resolution with an `AbortError`.
 */
export async function resolveReferencedSourceIgnore(localPath, options) {
  const signal = options?.signal;
  let scan = null;
  let failureReason = null;
  for (let attempt = 0; ; attempt += 1) {
    try {
      scan = await readReferencedSourceGitIgnoredPaths(localPath, { signal });
      failureReason = null;
      break;
    } catch (error) {
      if (signal?.aborted) throw abortError(signal);
      failureReason =
        error instanceof ReferencedSourceIgnoreScanLimitExceededError
          ? REFERENCED_SOURCE_IGNORE_FAILURE_REASONS.limitExceeded
          : REFERENCED_SOURCE_IGNORE_FAILURE_REASONS.scanFailed;
      const saturated = typeof error === "object" && error !== null && error.code === WORKSPACE_GIT_SCAN_SATURATED_CODE;
      if (attempt === SATURATED_RETRY_DELAYS_MS.length || !saturated) break;
      await delay(SATURATED_RETRY_DELAYS_MS[attempt], signal);
    }
  }
  if (failureReason !== null) return { kind: "failed", reason: failureReason };
  if (!scan) return { kind: "other" };
  // The symlink-free forms of both (resolved forms when they cannot be resolved).
  const [toplevel, local] = await physicalPaths([scan.toplevel, localPath]);
  const offset = offsetUnderToplevel(toplevel, local);
  if (offset === null)
    return { kind: "failed", reason: REFERENCED_SOURCE_IGNORE_FAILURE_REASONS.toplevelNotDescendant };
  if (offset === "") return { kind: "git", ignoredPaths: [...scan.ignoredPaths] };
  const prefix = `${offset}/`;
  const ignoredPaths = [];
  for (const entry of scan.ignoredPaths) {
    if (entry.startsWith(prefix) && entry.length > prefix.length) ignoredPaths.push(entry.slice(prefix.length));
  }
  return { kind: "git", ignoredPaths };
}

export async function createTarballFromDirectory(input) {
  const signal = checkSignal(input.signal);
  const archivePath = requireString(input.archivePath, "archivePath");
  const pack = await packInput({ ...input, gzip: undefined });
  await runCancellable(signal, (cancelId) => native.tarPackFile(pack, archivePath, cancelId, undefined));
}

/** A tree listing: relative path → kind (1 dir, 2 file, 3 symlink, 4 other). */
async function listTree(root, untrusted) {
  const listing = await runCancellable(undefined, () => native.listTree(path.normalize(root), untrusted));
  const out = new Map();
  if (listing.kinds.length === 0) return out;
  const paths = listing.paths.split("\u0000");
  for (let i = 0; i < paths.length; i += 1) out.set(paths[i], listing.kinds[i]);
  return out;
}

const LIST_DIR = 1;

function symlinkedAncestorError(targetPath) {
  const error = new Error(
    `${codes.SYMLINKED_ANCESTOR}: refusing to write through the symlinked directory '${targetPath}'`,
  );
  error.code = codes.SYMLINKED_ANCESTOR;
  error.path = targetPath;
  return error;
}

/**
 * Copies one source entry over the target as upstream does: a directory is created
 * (`mkdir -p`); anything else replaces what is at the target; a file is copied to a staged
 * sibling `<target>.paperclip-copy.<uuid>` (reflink first), given the source mode, then
 * renamed into place, and the staged sibling is removed whatever happens.
 */
async function mirrorEntry(sourceDir, targetDir, relative, hasChildren) {
  const sourcePath = path.join(sourceDir, relative);
  const targetPath = path.join(targetDir, relative);
  const stats = await fs.lstat(sourcePath);
  if (stats.isDirectory()) {
    // `mkdir -p` accepts a symlink to a directory and the children would then be written
    // through it, outside the target: refuse that one case (docs/merge.md, "Always on").
    if (hasChildren) {
      const existing = await fs.lstat(targetPath).catch(() => null);
      if (existing?.isSymbolicLink() && (await fs.stat(targetPath).catch(() => null))?.isDirectory()) {
        throw symlinkedAncestorError(targetPath);
      }
    }
    await fs.mkdir(targetPath, { recursive: true });
    return;
  }
  await fs.mkdir(path.dirname(targetPath), { recursive: true });
  await fs.rm(targetPath, { recursive: true, force: true }).catch(() => undefined);
  if (stats.isSymbolicLink()) {
    await fs.symlink(await fs.readlink(sourcePath), targetPath);
    return;
  }
  const stagedPath = `${targetPath}.paperclip-copy.${randomUUID()}`;
  try {
    await fs
      .copyFile(sourcePath, stagedPath, fsConstants.COPYFILE_FICLONE)
      .catch(() => fs.copyFile(sourcePath, stagedPath));
    await fs.chmod(stagedPath, stats.mode);
    await fs.rename(stagedPath, targetPath);
  } finally {
    await fs.rm(stagedPath, { recursive: true, force: true }).catch(() => undefined);
  }
}

/**
 * Makes `targetDir` a copy of `sourceDir` (upstream's semantics): target entries absent
 * from the source are removed, longest path first, unless they are, or lie below, a
 * `preserveAbsent` path; then every source entry is copied in `localeCompare` order. Both
 * trees are listed natively without following symlinks. A source holding a name this
 * library reserves is refused (`ERR_PAPERCLIP_NATIVE_UNSAFE_ARCHIVE_ENTRY`) before any change.
 */
export async function mirrorDirectory(sourceDir, targetDir, options = {}) {
  // The source is untrusted: a name we reserve in it (our staging directories and key, at
  // any depth) is refused with ERR_PAPERCLIP_NATIVE_UNSAFE_ARCHIVE_ENTRY before any change.
  const source = await listTree(sourceDir, true);
  await fs.mkdir(targetDir, { recursive: true });
  const preserveAbsent = [...new Set(options.preserveAbsent ?? [])];
  const preserved = (relative) =>
    preserveAbsent.some((candidate) => native.isRelativePathOrDescendant(relative, candidate));
  const target = await listTree(targetDir, false);
  const doomed = [...target.keys()].filter((relative) => !source.has(relative) && !preserved(relative));
  doomed.sort((left, right) => right.length - left.length);
  for (const relative of doomed) {
    await fs.rm(path.join(targetDir, relative), { recursive: true, force: true }).catch(() => undefined);
  }
  const parents = new Set();
  for (const relative of source.keys()) {
    const slash = relative.lastIndexOf("/");
    if (slash > 0) parents.add(relative.slice(0, slash));
  }
  const compare = new Intl.Collator().compare;
  for (const relative of [...source.keys()].sort(compare)) {
    await mirrorEntry(sourceDir, targetDir, relative, source.get(relative) === LIST_DIR && parents.has(relative));
  }
}

// The sandbox lane lives in ./sandbox/prepare.js; it is handed the drop-ins above rather
// than importing this module back.
const SOURCES = {
  createTarballFromDirectory,
  mergeExcludes,
  referencedSourceIgnoreExcludeEntries,
  resolveReferencedSourceIgnore,
};

/**
 * Stages a workspace, runtime assets and referenced projects into a sandbox through the
 * client's `syncIn`, as upstream does; see sandbox-managed-runtime.d.ts.
 */
export function prepareSandboxManagedRuntime(input) {
  return prepareSandbox(input, SOURCES);
}
