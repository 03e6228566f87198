// A stand-in for the directory-merge lock of upstream's releases after 2026.916.1
// (v2026.1009.0), written from the protocol as ../shared/reference/upstream-next.md describes
// it, independently of lib/merge-lock.js (it is the other side the tests hold ours against):
//
// - `<root>/<sha256(realpath(target))>.lock.sqlite`, a permanent file opened with node:sqlite
//   (extensions off), required to be a plain file with one link, mode 0600; never deleted,
//   replaced or renamed;
// - acquire: `PRAGMA busy_timeout = 0`, then `BEGIN IMMEDIATE`, retried every 50 ms until the
//   budget is spent (a crash releases it: the OS drops the process's locks);
// - then, while a legacy `<hash>.lock/` directory exists, keep waiting (never removing one);
// - then write `<hash>.lock.owner.json` (`{ pid, createdAt }`, O_NOFOLLOW, 0600), run the
//   callback, unlink the sidecar, close the database.
// A timeout throws `ERR_WORKSPACE_RESTORE_LOCK_TIMEOUT`. (The newest stored version's
// first-come queue orders waiters among themselves only; the database stays the authority.)
import { createHash } from "node:crypto";
import { constants, promises as fs } from "node:fs";
import path from "node:path";
import { DatabaseSync } from "node:sqlite";

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function timeout(lockDir) {
  return Object.assign(new Error(`Timed out waiting for workspace restore lock at ${lockDir}`), {
    code: "ERR_WORKSPACE_RESTORE_LOCK_TIMEOUT",
  });
}

async function plainUnsharedFile(file) {
  const stats = await fs.lstat(file).catch(() => null);
  if (stats && (!stats.isFile() || stats.nlink !== 1)) throw new Error("lock database is not a plain, unshared file");
}

/**
 * The newer protocol's `withDirectoryMergeLock(target, fn, env, waitMs)` (env: PAPERCLIP_HOME
 * and PAPERCLIP_INSTANCE_ID set). `onDatabase`, a test's probe, is called once the database
 * lock is held, before the wait for a legacy directory.
 */
export async function withNewerDirectoryMergeLock(targetDir, fn, env, waitMs = 30_000, { onDatabase } = {}) {
  const canonical = await fs.realpath(targetDir);
  const root = path.join(env.PAPERCLIP_HOME, "instances", env.PAPERCLIP_INSTANCE_ID, "locks", "directory-merge");
  await fs.mkdir(root, { recursive: true, mode: 0o700 });
  const lockDir = path.join(root, `${createHash("sha256").update(canonical).digest("hex")}.lock`);
  const databaseFile = `${lockDir}.sqlite`;
  await plainUnsharedFile(databaseFile);
  const database = new DatabaseSync(databaseFile, { allowExtension: false });
  try {
    await fs.chmod(databaseFile, 0o600);
    database.exec("PRAGMA busy_timeout = 0;");
    const deadline = Date.now() + waitMs;
    for (;;) {
      try {
        database.exec("BEGIN IMMEDIATE;");
        break;
      } catch (error) {
        if ((error.errcode & 0xff) !== 5) throw error;
      }
      if (Date.now() >= deadline) throw timeout(lockDir);
      await sleep(50);
    }
    onDatabase?.();
    while (
      await fs.lstat(lockDir).then(
        () => true,
        () => false,
      )
    ) {
      if (Date.now() >= deadline) throw timeout(lockDir);
      await sleep(50);
    }
    const sidecar = `${lockDir}.owner.json`;
    const handle = await fs.open(
      sidecar,
      constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW,
      0o600,
    );
    await handle.writeFile(`${JSON.stringify({ pid: process.pid, createdAt: new Date().toISOString() })}\n`);
    await handle.close();
    try {
      return await fn(canonical);
    } finally {
      await fs.unlink(sidecar).catch(() => undefined);
    }
  } finally {
    database.close();
  }
}
