// Internal helpers shared by the tar modules: argument checks, the top-level entry list in
// upstream's order, and the bridge from native byte counts to a progress reporter.
import fs from "node:fs/promises";
import path from "node:path";
import { codes } from "./native.js";
import { isReservedName } from "./staging.js";

/** Our code for a rejected argument. */
export const INVALID_ARGUMENT = codes.INVALID_ARGUMENT;
/** Our code for a file name that is not UTF-8. */
const NON_UTF8_NAME = codes.NON_UTF8_NAME;
/** gzip level used for `gzip: true` (zlib's default). */
export const DEFAULT_GZIP_LEVEL = 6;

/** A `TypeError` (or `RangeError`) with our invalid-argument code. */
export function invalidArgument(message, ErrorClass = TypeError) {
  const error = new ErrorClass(message);
  error.code = INVALID_ARGUMENT;
  return error;
}

/**
 * Rejects, with our invalid-argument code, an option name of `input` that `known` does not
 * list (our own functions only; upstream's drop-ins keep accepting upstream's shapes).
 */
export function checkOptionNames(input, known, what) {
  if (input == null || typeof input !== "object") throw invalidArgument(`${what}: options must be an object`);
  for (const key of Object.keys(input)) {
    if (!known.includes(key)) throw invalidArgument(`${what}: unknown option '${key}' (known: ${known.join(", ")})`);
  }
}

/** The names `limits` accepts. */
const LIMIT_NAMES = ["maxBytes", "maxEntries", "maxFileBytes", "minFreeBytes"];
/** The environment variable that sets the default free-space floor, in bytes (0: off). */
export const MIN_FREE_BYTES_ENV = "PAPERCLIP_NATIVE_MIN_FREE_BYTES";

/**
 * The native form of an extraction's `limits` (`{ maxBytes, maxEntries, maxFileBytes,
 * minFreeBytes }`, each a non-negative safe integer or absent): unknown names and bad
 * values are rejected; `minFreeBytes` defaults to `PAPERCLIP_NATIVE_MIN_FREE_BYTES` when
 * that is set, else the native default (2 % of the file system, at most 1 GiB).
 */
export function archiveLimits(limits) {
  const out = {};
  if (limits != null) {
    if (typeof limits !== "object") throw invalidArgument("limits must be an object");
    for (const [key, value] of Object.entries(limits)) {
      if (!LIMIT_NAMES.includes(key)) {
        throw invalidArgument(`unknown limits option '${key}' (known: ${LIMIT_NAMES.join(", ")})`);
      }
      if (value === undefined) continue;
      if (!Number.isSafeInteger(value) || value < 0) {
        throw invalidArgument(`limits.${key} must be a non-negative integer, got ${String(value)}`, RangeError);
      }
      out[key] = value;
    }
  }
  const fromEnv = process.env[MIN_FREE_BYTES_ENV];
  if (out.minFreeBytes === undefined && fromEnv !== undefined && fromEnv !== "") {
    const value = Number(fromEnv);
    if (!/^\d+$/.test(fromEnv.trim()) || !Number.isSafeInteger(value)) {
      throw invalidArgument(`${MIN_FREE_BYTES_ENV} must be a non-negative integer (bytes), got '${fromEnv}'`, RangeError);
    }
    out.minFreeBytes = value;
  }
  return out;
}

/** Checks that `value` is a non-empty string; returns it. */
export function requireString(value, name) {
  if (typeof value !== "string" || value === "") throw invalidArgument(`${name} must be a non-empty string`);
  return value;
}

/** Checks an optional `AbortSignal`. */
export function checkSignal(signal) {
  if (signal != null && (typeof signal !== "object" || typeof signal.aborted !== "boolean" || typeof signal.addEventListener !== "function")) {
    throw invalidArgument("signal must be an AbortSignal");
  }
  return signal ?? undefined;
}

/** `gzip: false | true | 0-9` → a level or `undefined` (plain tar). */
export function gzipLevel(gzip) {
  if (gzip == null || gzip === false) return undefined;
  if (gzip === true) return DEFAULT_GZIP_LEVEL;
  if (Number.isInteger(gzip) && gzip >= 0 && gzip <= 9) return gzip;
  throw invalidArgument(`gzip must be a boolean or an integer level 0-9, got ${String(gzip)}`, RangeError);
}

/** Checks an optional progress reporter (an object with `report`, `complete`, `fail`). */
export function checkReporter(progress) {
  if (progress == null) return undefined;
  for (const method of ["report", "complete", "fail"]) {
    if (typeof progress[method] !== "function") {
      throw invalidArgument(`progress must be a RuntimeProgressReporter (no ${method}() method)`);
    }
  }
  return progress;
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * The entries of `dir` as upstream passes them to tar after `--`: every name, sorted with
 * `localeCompare` in the process's locale (so the member order is upstream's). A readdir
 * failure rejects with Node's error, as upstream's does; a name that is not UTF-8 (which
 * upstream cannot pass to tar intact either) with `ERR_PAPERCLIP_NATIVE_NON_UTF8_NAME`.
 */
export async function topLevelNames(dir) {
  const raw = await fs.readdir(dir, { encoding: "buffer" });
  const names = raw.map((bytes) => {
    try {
      return utf8.decode(bytes);
    } catch {
      const where = path.join(dir, bytes.toString("latin1"));
      const error = new Error(`file name is not valid UTF-8 bytes: '${where}'`);
      error.code = NON_UTF8_NAME;
      throw error;
    }
  });
  // Our own staging directories are never part of a tree.
  return names.filter((name) => !isReservedName(name)).sort((left, right) => left.localeCompare(right));
}

/** The native pack input for a directory and upstream-shaped options. */
export async function packInput(options) {
  const localDir = requireString(options.localDir, "localDir");
  const exclude = options.exclude ?? [];
  if (!Array.isArray(exclude) || !exclude.every((entry) => typeof entry === "string")) {
    throw invalidArgument("exclude must be an array of strings");
  }
  return {
    root: localDir,
    exclude: [...exclude],
    followSymlinks: options.followSymlinks === true,
    topLevel: await topLevelNames(localDir),
    gzip: gzipLevel(options.gzip),
  };
}

/**
 * Feeds running byte counts to a progress reporter without ever making the data path wait
 * for its sink: at most one `report()` runs at a time and, while it runs, only the latest
 * count is kept (so nothing queues up). Reporter failures are ignored, as upstream's
 * transports ignore them: progress is advisory and never fails a transfer. `totalBytes` is
 * a number, `null`, or a function returning the total known at the time of a report (a
 * total that becomes known during the transfer).
 */
export function progressBridge(reporter, totalBytes) {
  const total = typeof totalBytes === "function" ? totalBytes : () => totalBytes;
  let latest = 0;
  let reported = -1;
  let running = null;
  let closed = false;
  const drain = async () => {
    while (!closed && reported !== latest) {
      reported = latest;
      await quietly(() => reporter.report(reported, total()));
    }
    running = null;
  };
  const settle = async () => {
    closed = true;
    await running;
  };
  return {
    /** The latest running count (monotonic: a smaller count is ignored). */
    update(bytes) {
      if (closed || !(bytes > latest)) return;
      latest = bytes;
      running ??= drain();
    },
    /** The last count seen. */
    get latest() {
      return latest;
    },
    /** Waits for the report in flight, then emits the completion line. */
    async complete(doneBytes, total) {
      await settle();
      await quietly(() => reporter.complete(doneBytes, total));
    },
    /** Waits for the report in flight, then emits the failure line at `doneBytes` (default: the latest count). */
    async fail(doneBytes = latest) {
      await settle();
      await quietly(() => reporter.fail(doneBytes, total()));
    },
  };
}

/** Runs a reporter call, ignoring its failure (sync or async). */
async function quietly(call) {
  try {
    await call();
  } catch {
    // advisory only
  }
}
