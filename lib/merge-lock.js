// Internal: the directory-merge lock. It keeps upstream 2026.916.1's exact on-disk protocol
// (docs/merge.md), so a holder in this package and a holder in `@paperclipai/adapter-utils`
// 2026.916.1 exclude each other, in one process or across processes:
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
// Newer upstream releases (v2026.1009.0) lock with SQLite instead: `BEGIN IMMEDIATE` on the
// permanent `<hash>.lock.sqlite` beside the directory (busy_timeout 0, retried every 50 ms),
// then they wait while a `<hash>.lock/` directory exists, then write `<hash>.lock.owner.json`.
// So that a process on either protocol excludes ours and ours excludes it, the lock also takes
// that SQLite lock, database first and directory second (the newer protocol's own order, so no
// wait can go round in a cycle), whenever `<hash>.lock.sqlite` exists: a newer process creates
// it before it locks and never removes it. Before it exists, the lock takes the directory
// alone, exactly as 2026.916.1, and looks again once it holds it: a database that appeared
// meanwhile makes it give the directory back and start again, database first (a newer process
// that created it then waits for our directory before entering, never the other way round).
//
// Everything is asynchronous `fs.promises` calls (never a blocking call on the JS thread,
// except node:sqlite's own immediate, non-waiting calls), looked up on the `promises` object at
// call time like upstream's, so tests that spy on `fs.promises.mkdir`, `Date.now` or
// `os.homedir` (read by instance-root.js) observe the same calls.
import { createHash } from "node:crypto";
import { constants as fsConstants, promises as fs } from "node:fs";
import path from "node:path";
import { resolveInstanceRoot } from "./instance-root.js";

/** The stable `code` of a lock-timeout error. */
export const WORKSPACE_RESTORE_LOCK_TIMEOUT_CODE = "ERR_WORKSPACE_RESTORE_LOCK_TIMEOUT";

/** How long a waiter waits, and how old an owner-less lock directory must be to be stale. */
const LOCK_WAIT_MS = 30_000;
const LOCK_STALE_MS = 30_000;
const LOCK_POLL_MS = 50;
const LOCK_ROOT_MODE = 0o700;

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

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Takes the lock directory `lockDir`, waiting until `deadline` (a `Date.now()` time); resolves
 * to its release function. Unlike upstream, a failure to write owner.json removes the
 * just-created lock directory instead of leaving it to go stale after 30 s.
 */
async function acquireDirectory(lockDir, deadline) {
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
      await sleep(LOCK_POLL_MS);
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

// The newer protocol's half: `<hash>.lock.sqlite`, locked with node:sqlite.

/** The lock database beside `lockDir` (the newer protocol's), and its diagnostic sidecar. */
const databaseOf = (lockDir) => `${lockDir}.sqlite`;
const sidecarOf = (lockDir) => `${lockDir}.owner.json`;
const LOCK_DATABASE_MODE = 0o600;
const SQLITE_BUSY = 5;

let sqliteModule;

/**
 * node:sqlite, loaded on first use (only once a newer-protocol process has used this instance
 * root), or null where this Node has none (`--no-experimental-sqlite`). Node 24.11 prints an
 * ExperimentalWarning when it loads (24.22 and 26 do not); that one warning is not this
 * process's owner's to see (a 2026.916.1 host never printed it), so it is dropped while the
 * module loads; every other warning passes.
 */
function loadSqlite() {
  if (sqliteModule !== undefined) return sqliteModule;
  const emitWarning = process.emitWarning;
  process.emitWarning = function filtered(warning, ...rest) {
    const type = typeof rest[0] === "string" ? rest[0] : rest[0]?.type;
    const message = typeof warning === "string" ? warning : warning?.message;
    if (type === "ExperimentalWarning" && String(message).startsWith("SQLite is an experimental feature"))
      return undefined;
    return emitWarning.call(this, warning, ...rest);
  };
  try {
    sqliteModule = process.getBuiltinModule("node:sqlite") ?? null;
  } catch {
    sqliteModule = null;
  } finally {
    process.emitWarning = emitWarning;
  }
  return sqliteModule;
}

/** Whether `file` exists (lstat: a link counts). */
async function exists(file) {
  return fs.lstat(file).then(
    () => true,
    (error) => {
      if (error?.code === "ENOENT") return false;
      throw error;
    },
  );
}

/** The newer protocol's refusal of a lock database that is not a plain file with one link. */
async function checkLockDatabase(file) {
  const stats = await fs.lstat(file).catch((error) => {
    if (error?.code === "ENOENT") return null;
    throw error;
  });
  if (stats && (!stats.isFile() || stats.isSymbolicLink() || stats.nlink !== 1)) {
    throw new Error("Directory merge lock database is not a plain, unshared file.");
  }
}

/**
 * Opens the lock database `file` as the newer protocol does: a plain file with one link
 * (checked before and after opening), extensions off, mode 0600, `busy_timeout = 0`. Only
 * SQLite opens it: closing a descriptor of our own on that inode would drop this process's
 * POSIX locks on it, another connection's included. The file is never deleted, replaced or
 * renamed: its inode is what every process locks.
 */
async function openLockDatabase(file) {
  const sqlite = loadSqlite();
  if (!sqlite) {
    const error = new Error(
      `No such built-in module: node:sqlite (this Node runs without it), which the directory-merge lock needs where a newer Paperclip has used ${file}`,
    );
    error.code = "ERR_UNKNOWN_BUILTIN_MODULE";
    throw error;
  }
  await checkLockDatabase(file);
  const database = new sqlite.DatabaseSync(file, { allowExtension: false });
  try {
    await checkLockDatabase(file);
    await fs.chmod(file, LOCK_DATABASE_MODE);
    database.exec("PRAGMA busy_timeout = 0;");
    return database;
  } catch (error) {
    database.close();
    throw error;
  }
}

/** Takes `BEGIN IMMEDIATE` on `lockDir`'s database, retrying every 50 ms until `deadline`. */
async function acquireDatabase(lockDir, deadline) {
  const database = await openLockDatabase(databaseOf(lockDir));
  try {
    for (;;) {
      try {
        database.exec("BEGIN IMMEDIATE;");
        return database;
      } catch (error) {
        if ((error?.errcode & 0xff) !== SQLITE_BUSY) throw error;
      }
      if (Date.now() >= deadline) throw timeoutError(lockDir);
      await sleep(LOCK_POLL_MS);
    }
  } catch (error) {
    database.close();
    throw error;
  }
}

/** Writes the newer protocol's diagnostic sidecar `<hash>.lock.owner.json` (no link followed, 0600). */
async function writeSidecar(lockDir) {
  const flags = fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_TRUNC | fsConstants.O_NOFOLLOW;
  const handle = await fs.open(sidecarOf(lockDir), flags, LOCK_DATABASE_MODE);
  try {
    await handle.writeFile(`${JSON.stringify({ pid: process.pid, createdAt: new Date().toISOString() })}\n`, "utf8");
  } finally {
    await handle.close();
  }
}

/**
 * Takes the lock of `lockDir` on both protocols, waiting up to `waitMs` in all; resolves to
 * its release function (see the module comment for the order and why it cannot deadlock).
 */
async function acquire(lockDir, waitMs) {
  // The first Date.now() of the acquisition sets the deadline (upstream's suite spies on it).
  const deadline = Date.now() + waitMs;
  for (;;) {
    if (await exists(databaseOf(lockDir))) {
      const database = await acquireDatabase(lockDir, deadline);
      let releaseDirectory = null;
      try {
        releaseDirectory = await acquireDirectory(lockDir, deadline);
        await writeSidecar(lockDir);
      } catch (error) {
        if (releaseDirectory) await releaseDirectory();
        database.close();
        throw error;
      }
      return async () => {
        // The directory first, so a newer process that gets the database next finds it gone.
        await releaseDirectory();
        await fs.unlink(sidecarOf(lockDir)).catch(() => undefined);
        database.close();
      };
    }
    const releaseDirectory = await acquireDirectory(lockDir, deadline);
    if (!(await exists(databaseOf(lockDir)))) return releaseDirectory;
    // A newer-protocol process created the database meanwhile: it may hold it already and be
    // waiting for our directory, so give the directory back and start again, database first.
    await releaseDirectory();
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
 * (upstream 2026.916.1's protocol, and the newer SQLite one where it is in use; see the
 * module comment).
 */
export function withDirectoryMergeLock(targetDir, fn, env = process.env) {
  return withDirectoryMergeLockWaiting(targetDir, fn, env, LOCK_WAIT_MS);
}
