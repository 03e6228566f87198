// Drop-in for the exclude/escape, ignore-resolution and host-tar part of
// `@paperclipai/adapter-utils/sandbox-managed-runtime`. `createTarballFromDirectory` writes
// the archive in-process (no `tar` child process).
import { promises as fs } from "node:fs";
import path from "node:path";
import {
  readReferencedSourceGitIgnoredPaths,
  ReferencedSourceIgnoreScanLimitExceededError,
  WORKSPACE_GIT_SCAN_SATURATED_CODE,
} from "./git-workspace-sync.js";
import { abortError, native, runCancellable } from "./native.js";
import { checkSignal, packInput, requireString } from "./tar-common.js";

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

/** The symlink-free form of a path, or its resolved form when it cannot be resolved. */
async function physicalPath(input) {
  try {
    return await fs.realpath(input);
  } catch {
    return path.resolve(input);
  }
}

/** `localPath`'s POSIX offset under `toplevel` (`""` when equal), `null` when not below it. */
function offsetUnderToplevel(toplevel, localPath) {
  const relative = path.relative(path.resolve(toplevel), path.resolve(localPath));
  if (relative === "") return "";
  if (path.isAbsolute(relative) || relative === ".." || relative.startsWith(`..${path.sep}`)) return null;
  return relative.split(path.sep).join("/");
}

/**
 * Resolves a referenced project's git-ignored paths once, for every staging site (U§4.5):
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
      failureReason = error instanceof ReferencedSourceIgnoreScanLimitExceededError
        ? REFERENCED_SOURCE_IGNORE_FAILURE_REASONS.limitExceeded
        : REFERENCED_SOURCE_IGNORE_FAILURE_REASONS.scanFailed;
      const saturated = typeof error === "object" && error !== null && error.code === WORKSPACE_GIT_SCAN_SATURATED_CODE;
      if (attempt === SATURATED_RETRY_DELAYS_MS.length || !saturated) break;
      await delay(SATURATED_RETRY_DELAYS_MS[attempt], signal);
    }
  }
  if (failureReason !== null) return { kind: "failed", reason: failureReason };
  if (!scan) return { kind: "other" };
  const offset = offsetUnderToplevel(await physicalPath(scan.toplevel), await physicalPath(localPath));
  if (offset === null) return { kind: "failed", reason: REFERENCED_SOURCE_IGNORE_FAILURE_REASONS.toplevelNotDescendant };
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
