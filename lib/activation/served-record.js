// The per-process record of the activation's first native serve, read by `paperclip-sync
// doctor --pid`. A process can have the native binary mapped and serve nothing natively (the
// activation turned off, our package imported directly, nothing served yet), and only the
// process itself knows which: on its first composition it writes
// `<os.tmpdir()>/paperclip-native-activation-<uid>/<pid>.json`, holding its pid, its start time
// (see processStartTime, so a record left by an ended process whose pid was reused is not
// believed), when and what it first served. Nothing from the environment or the command
// line goes in. The directory is private (0700), the file too (0600), written to a temporary
// name and renamed into place; records of ended processes are pruned on each write. Linux
// only (doctor --pid reads /proc); never throws.
// Built-ins through process.getBuiltinModule, as in coverage.js (on the register path).
const fs = process.getBuiltinModule("node:fs");
const os = process.getBuiltinModule("node:os");
const path = process.getBuiltinModule("node:path");

/** The name of the records' directory of user `uid` (under that user's os.tmpdir()). */
export function servedRecordDirectory(tmpdir, uid) {
  return path.join(tmpdir, `paperclip-native-activation-${uid}`);
}

/**
 * The start time of process `pid` (`"self"` for this one): field 22 of the stat file of its
 * main thread, /proc/<pid>/task/<pid>/stat, in clock ticks after boot, as a string; null when
 * there is no such process (or no /proc). The same number as /proc/<pid>/stat on a kernel, but
 * under qemu-user a process's own /proc/<pid>/stat answers with the calling thread's start (the
 * staging owners in crates/core/src/staging.rs read the same file for the same reason).
 */
export function processStartTime(pid) {
  const id = pid === "self" ? process.pid : pid;
  let stat;
  try {
    stat = fs.readFileSync(`/proc/${id}/task/${id}/stat`, "utf8");
  } catch {
    return null;
  }
  // Field 2, the command name, is in parentheses and may hold spaces and parentheses itself;
  // the fields after it start with field 3.
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[22 - 3] ?? null;
}

/** The record in `file`, or null when it is missing or not one. */
function readRecordFile(file) {
  try {
    const record = JSON.parse(fs.readFileSync(file, "utf8"));
    return record && typeof record === "object" && typeof record.startTime === "string" ? record : null;
  } catch {
    return null;
  }
}

/** Whether `dir` is a directory (not a link) of user `uid` that nobody else can write to. */
function isPrivateDirectory(dir, uid) {
  const stat = fs.lstatSync(dir, { throwIfNoEntry: false });
  return Boolean(stat?.isDirectory() && stat.uid === uid && (stat.mode & 0o077) === 0);
}

/** Removes the records (and leftover temporary files) of processes that ended or are not their writers. */
function pruneServedRecords(dir) {
  for (const name of fs.readdirSync(dir)) {
    const match = /^(\d+)\.json(\..+\.tmp)?$/.exec(name);
    if (!match || Number(match[1]) === process.pid) continue;
    const file = path.join(dir, name);
    const startTime = processStartTime(match[1]);
    if (startTime !== null && (match[2] || readRecordFile(file)?.startTime === startTime)) continue;
    try {
      fs.unlinkSync(file);
    } catch {
      // Another process pruned it first.
    }
  }
}

/**
 * Writes this process's record of its first native serve: `mechanism` (`"node-hooks"`,
 * `"vitest-plugin"`) and `module`, the upstream module served. Returns whether it was written;
 * never throws (a directory it cannot use, a full disk or no /proc only leave no record).
 */
export function writeServedRecord({ mechanism, module }) {
  let temporary = null;
  try {
    const startTime = processStartTime("self");
    if (startTime === null || typeof process.getuid !== "function") return false;
    const uid = process.getuid();
    const dir = servedRecordDirectory(os.tmpdir(), uid);
    try {
      fs.mkdirSync(dir, { mode: 0o700 });
    } catch (error) {
      if (error.code !== "EEXIST") return false;
    }
    const stat = fs.lstatSync(dir);
    if (!stat.isDirectory() || stat.uid !== uid) return false;
    if ((stat.mode & 0o777) !== 0o700) fs.chmodSync(dir, 0o700);
    pruneServedRecords(dir);
    const file = path.join(dir, `${process.pid}.json`);
    temporary = `${file}.${Math.random().toString(36).slice(2)}.tmp`;
    const fd = fs.openSync(temporary, "wx", 0o600);
    try {
      fs.writeSync(
        fd,
        JSON.stringify({ pid: process.pid, startTime, at: new Date().toISOString(), mechanism, module }),
      );
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(temporary, file);
    return true;
  } catch {
    if (temporary) fs.rmSync(temporary, { force: true });
    return false;
  }
}

/**
 * What process `pid` of user `uid` recorded of its first native serve,
 * `{ pid, startTime, at, mechanism, module }`, looked for under each of `tmpdirs` (where that
 * process's os.tmpdir() may be); null when it recorded nothing, or the record is not that
 * process's (another process that had its pid before, told by the start time).
 */
export function readServedRecord(pid, { uid, tmpdirs }) {
  const startTime = processStartTime(pid);
  if (startTime === null) return null;
  for (const tmpdir of new Set(tmpdirs)) {
    const dir = servedRecordDirectory(tmpdir, uid);
    if (!isPrivateDirectory(dir, uid)) continue;
    const record = readRecordFile(path.join(dir, `${pid}.json`));
    if (record && record.pid === Number(pid) && record.startTime === startTime) return record;
  }
  return null;
}

/** What os.tmpdir() is in a process with environment `env` (POSIX: TMPDIR, TMP, TEMP, else /tmp). */
export function tmpdirOfEnvironment(env) {
  const dir = env.TMPDIR || env.TMP || env.TEMP || "/tmp";
  return dir.length > 1 && dir.endsWith("/") ? dir.slice(0, -1) : dir;
}
