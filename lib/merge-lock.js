// Internal: the directory-merge lock, with upstream's exact on-disk protocol (docs/merge.md) so a holder in this package and a holder in
// `@paperclipai/adapter-utils` exclude each other, in one process or across processes:
//
//   <instance root>/locks/directory-merge/            mode 0700, must be a plain directory
//   <instance root>/locks/directory-merge/<sha256(realpath(target))>.lock/owner.json
//                                                      {"pid":…,"createdAt":…}\n
//
// A lock directory is stale when its owner's pid is not alive (`kill(pid, 0)` throws,
// EPERM included, as upstream), when owner.json parses without a usable pid, or, when
// owner.json cannot be read or parsed, when the directory is older than 30 s (a live
// holder passes through that state between its mkdir and its write). Waiters poll every
// 50 ms for up to 30 s.
//
// Everything is asynchronous `fs.promises` calls (never a blocking call on the JS thread),
// looked up on the `promises` object at call time like upstream's, so tests that spy on
// `fs.promises.mkdir`, `Date.now` or `os.homedir` observe the same calls.
import { createHash } from "node:crypto";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";

/** The stable `code` of a lock-timeout error. */
export const WORKSPACE_RESTORE_LOCK_TIMEOUT_CODE = "ERR_WORKSPACE_RESTORE_LOCK_TIMEOUT";

/** How long a waiter waits, and how old an owner-less lock directory must be to be stale. */
const LOCK_WAIT_MS = 30_000;
const LOCK_STALE_MS = 30_000;
const LOCK_POLL_MS = 50;
const LOCK_ROOT_MODE = 0o700;
const DEFAULT_INSTANCE_ID = "default";
const INSTANCE_ID_PATTERN = /^[a-zA-Z0-9_-]+$/;

function expandHome(value) {
  if (value === "~") return os.homedir();
  if (value.startsWith("~/")) return path.resolve(os.homedir(), value.slice(2));
  return value;
}

/**
 * The Paperclip instance root from `env` only (never `process.env` unless that is what was
 * passed): `PAPERCLIP_HOME` (trimmed, `~` expanded; default `~/.paperclip`) +
 * `instances/<PAPERCLIP_INSTANCE_ID or "default">`. An instance id outside
 * `[a-zA-Z0-9_-]+` throws `Invalid PAPERCLIP_INSTANCE_ID '<id>'.`
 */
export function resolveInstanceRoot(env) {
  const home = env.PAPERCLIP_HOME?.trim();
  const homeDir = path.resolve(home ? expandHome(home) : path.resolve(os.homedir(), ".paperclip"));
  const instanceId = env.PAPERCLIP_INSTANCE_ID?.trim() || DEFAULT_INSTANCE_ID;
  if (!INSTANCE_ID_PATTERN.test(instanceId)) throw new Error(`Invalid PAPERCLIP_INSTANCE_ID '${instanceId}'.`);
  return path.resolve(homeDir, "instances", instanceId);
}

/**
 * The validated lock root `<instance root>/locks/directory-merge`: an existing root must
 * be a real directory (not a symlink); a missing one is created with mode 0700 and checked
 * again after creation (a racing writer could plant a symlink in between).
 */
async function resolveLockRoot(env) {
  const lockRoot = path.join(resolveInstanceRoot(env), "locks", "directory-merge");
  const isPlainDirectory = (stats) => stats.isDirectory() && !stats.isSymbolicLink();
  const notPlain = () => new Error(`Directory merge lock root at ${lockRoot} is not a plain directory.`);
  const existing = await fs.lstat(lockRoot).catch((error) => {
    if (error?.code === "ENOENT") return null;
    throw error;
  });
  if (existing) {
    if (!isPlainDirectory(existing)) throw notPlain();
    return lockRoot;
  }
  await fs.mkdir(lockRoot, { recursive: true, mode: LOCK_ROOT_MODE });
  if (!isPlainDirectory(await fs.lstat(lockRoot))) throw notPlain();
  return lockRoot;
}

/** The lock directory of a canonical target. */
export function lockDirectoryName(canonicalTargetDir) {
  return `${createHash("sha256").update(canonicalTargetDir).digest("hex")}.lock`;
}

function ownerIsAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    // ESRCH, and EPERM too (a process of another user counts as dead, as upstream).
    return false;
  }
}

async function isStale(lockDir) {
  try {
    const owner = JSON.parse(await fs.readFile(path.join(lockDir, "owner.json"), "utf8"));
    const pid = owner.pid;
    if (typeof pid !== "number" || !Number.isFinite(pid) || pid <= 0) return true;
    return !ownerIsAlive(pid);
  } catch {
    // No readable owner record: maybe a live holder between mkdir and writeFile. Only a
    // directory older than the stale threshold (or gone) counts as stale.
    const stats = await fs.stat(lockDir).catch(() => null);
    return !stats || Date.now() - stats.mtimeMs > LOCK_STALE_MS;
  }
}

async function removeLockDirectory(lockDir) {
  await fs.rm(lockDir, { recursive: true, force: true }).catch(() => undefined);
}

function timeoutError(lockDir) {
  const error = new Error(`Timed out waiting for workspace restore lock at ${lockDir}`);
  error.code = WORKSPACE_RESTORE_LOCK_TIMEOUT_CODE;
  return error;
}

/**
 * Takes the lock directory `lockDir`, waiting up to `waitMs`; resolves to its release
 * function. Unlike upstream, a failure to write owner.json removes the just-created lock
 * directory instead of leaving it to go stale after 30 s.
 */
async function acquire(lockDir, waitMs) {
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      await fs.mkdir(lockDir);
    } catch (error) {
      if (error?.code !== "EEXIST") throw error;
      if (await isStale(lockDir)) {
        await removeLockDirectory(lockDir);
        continue;
      }
      if (Date.now() >= deadline) throw timeoutError(lockDir);
      await new Promise((resolve) => setTimeout(resolve, LOCK_POLL_MS));
      continue;
    }
    const owner = `${JSON.stringify({ pid: process.pid, createdAt: new Date().toISOString() })}\n`;
    try {
      await fs.writeFile(path.join(lockDir, "owner.json"), owner, "utf8");
    } catch (error) {
      await removeLockDirectory(lockDir);
      throw error;
    }
    return () => removeLockDirectory(lockDir);
  }
}

/**
 * `withDirectoryMergeLock` with an adjustable wait (internal; the public function always
 * waits 30 s). Tests import this module directly to exercise the timeout quickly.
 */
export async function withDirectoryMergeLockWaiting(targetDir, fn, env, waitMs) {
  const canonicalTargetDir = await fs.realpath(targetDir);
  const lockRoot = await resolveLockRoot(env);
  const release = await acquire(path.join(lockRoot, lockDirectoryName(canonicalTargetDir)), waitMs);
  try {
    return await fn(canonicalTargetDir);
  } finally {
    await release();
  }
}

/**
 * Runs `fn(canonicalTargetDir)` while holding the directory-merge lock of `targetDir`
 * (upstream's protocol; see the module comment).
 */
export function withDirectoryMergeLock(targetDir, fn, env = process.env) {
  return withDirectoryMergeLockWaiting(targetDir, fn, env, LOCK_WAIT_MS);
}
