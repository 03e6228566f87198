// The in-process ignore scan behind `readReferencedSourceGitIgnoredPaths` (internal): the two
// native steps that stand in for upstream's two git commands, each under upstream's deadline,
// at most four scans at a time in this process.
import { codes, createSlots, native, runBounded } from "./native.js";

/** Upstream's git timeouts for the two steps (milliseconds). */
export const UPSTREAM_DEADLINES = Object.freeze({ toplevel: 15_000, list: 60_000 });

/** The deadlines the in-process steps run under: upstream's (mutable for tests only). */
export const scanDeadlines = { ...UPSTREAM_DEADLINES };

/** The slots in-process scan steps run in: at most four at once, the rest wait in FIFO order. */
export const nativeScanSlots = createSlots(4);

/** `code` of a step that missed its deadline (upstream's git timeout has no code of its own). */
export const SCAN_TIMEOUT_CODE = codes.GIT_IGNORE_SCAN_TIMEOUT;
/** `code` of a listing that found the directory outside any work tree after the toplevel step. */
export const SCAN_FAILED_CODE = codes.GIT_IGNORE_SCAN_FAILED;

function step(name, signal, start) {
  const timeoutMs = scanDeadlines[name];
  const onTimeout = () =>
    Object.assign(new Error(`git ignore scan (${name}) timed out after ${timeoutMs} ms`), { code: SCAN_TIMEOUT_CODE });
  return runBounded({ slots: nativeScanSlots, signal, timeoutMs, onTimeout }, start);
}

/** `git -C ""` stays in the current directory; so does the in-process scan. */
function scanDir(localDir) {
  return localDir === "" ? "." : localDir;
}

/** `rev-parse --show-toplevel`, in-process: the trimmed toplevel, `null` outside a work tree. */
export async function scanToplevel(localDir, signal) {
  const toplevel = await step("toplevel", signal, () => native.ignoreScanToplevel(scanDir(localDir)));
  return toplevel === null ? null : toplevel.trim();
}

/**
 * `ls-files --others --ignored --exclude-standard --directory --full-name -z`, in-process:
 * the records in git's order, NUL-terminated, within upstream's raw-output allowance (a
 * larger listing fails, as upstream's `maxBuffer` overflow does).
 */
export async function scanIgnoredRecords(localDir, signal) {
  const env = { home: process.env.HOME, xdgConfigHome: process.env.XDG_CONFIG_HOME };
  const listing = await step("list", signal, (cancelId) => native.ignoreScanList(scanDir(localDir), env, cancelId));
  if (listing === null) {
    // Like git's `ls-files` once the directory left its repository: a failure, not "no repository".
    throw Object.assign(new Error("git ignore scan: the directory is no longer inside a git work tree"), {
      code: SCAN_FAILED_CODE,
    });
  }
  return listing.records;
}

/**
 * The physical forms of `paths` (`realpath`, or `path.resolve` when it fails), computed
 * natively beside the scan: a process's first `fs.promises.realpath` waits for libuv's
 * thread pool to start.
 */
export async function physicalPaths(paths) {
  return await native.ignoreScanPhysicalPaths(paths);
}
