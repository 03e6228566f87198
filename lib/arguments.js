// The argument checks of our own functions (tar, SSH, sandbox, watched snapshots, extras),
// shared by every module that checks arguments: a rejected argument is a `TypeError` (or a
// `RangeError` for a value out of range) with code `ERR_PAPERCLIP_NATIVE_INVALID_ARGUMENT`
// and a message naming the argument. Upstream's drop-ins keep accepting upstream's shapes.
import { codes } from "./native.js";

/** Our code for a rejected argument. */
export const INVALID_ARGUMENT = codes.INVALID_ARGUMENT;

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

/** Checks that `value` is a non-empty string; returns it. */
export function requireString(value, name) {
  if (typeof value !== "string" || value === "") throw invalidArgument(`${name} must be a non-empty string`);
  return value;
}

/** Checks that `value` is a boolean; returns it. */
export function requireBoolean(value, name) {
  if (typeof value !== "boolean") throw invalidArgument(`${name} must be a boolean`);
  return value;
}

/** Checks that `value` is an array of strings; returns it. */
export function requireStringArray(value, name) {
  if (!Array.isArray(value) || !value.every((entry) => typeof entry === "string")) {
    throw invalidArgument(`${name} must be an array of strings`);
  }
  return value;
}

/** Checks an optional `AbortSignal`. */
export function checkSignal(signal) {
  if (
    signal != null &&
    (typeof signal !== "object" || typeof signal.aborted !== "boolean" || typeof signal.addEventListener !== "function")
  ) {
    throw invalidArgument("signal must be an AbortSignal");
  }
  return signal ?? undefined;
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

/** gzip level used for `gzip: true` (zlib's default). */
export const DEFAULT_GZIP_LEVEL = 6;

/** `gzip: false | true | 0-9` → a level or `undefined` (plain tar). */
export function gzipLevel(gzip) {
  if (gzip == null || gzip === false) return undefined;
  if (gzip === true) return DEFAULT_GZIP_LEVEL;
  if (Number.isInteger(gzip) && gzip >= 0 && gzip <= 9) return gzip;
  throw invalidArgument(`gzip must be a boolean or an integer level 0-9, got ${String(gzip)}`, RangeError);
}

/** The names `limits` accepts. */
const LIMIT_NAMES = ["maxBytes", "maxEntries", "maxFileBytes", "minFreeBytes"];
/** The environment variable that sets the default free-space floor, in bytes (0: off). */
export const MIN_FREE_BYTES_ENV = "PAPERCLIP_NATIVE_MIN_FREE_BYTES";

/** The objects `archiveLimits` returned: passed on, they are not checked again. */
const checkedLimits = new WeakSet();

/**
 * An extraction's `limits` checked, in the one shape they keep down to the core's
 * `ArchiveLimits` (`{ maxBytes, maxEntries, maxFileBytes, minFreeBytes }`, each a
 * non-negative safe integer or absent): unknown names and bad values are rejected;
 * `minFreeBytes` defaults to `PAPERCLIP_NATIVE_MIN_FREE_BYTES` when that is set, else to
 * the core's default (2 % of the destination's file system, at most 1 GiB). The variable
 * is read here, not natively, because `process.env` is the calling thread's own in a
 * worker thread. A result passed in again is returned as it is.
 */
export function archiveLimits(limits) {
  if (checkedLimits.has(limits)) return limits;
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
      throw invalidArgument(
        `${MIN_FREE_BYTES_ENV} must be a non-negative integer (bytes), got '${fromEnv}'`,
        RangeError,
      );
    }
    out.minFreeBytes = value;
  }
  checkedLimits.add(Object.freeze(out));
  return out;
}
