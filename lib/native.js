// Loads the raw napi binding (internal) and adapts its errors and cancellation.
// The generated loader picks the prebuilt binary for this platform: a local `native/*.node`
// in a checkout, otherwise the per-platform package
// `@paperclipai/adapter-utils-native-<platform>`; its error names the platform it looked for.
import { accessSync, constants as fsConstants, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { FALLBACK_ERROR_CODES } from "./error-codes.js";
import { FALLBACK_CONSTANTS } from "./shared-constants.js";
import { currentPlatform, PACKAGE_NAME, platformOfTarget, platformPackageName } from "./platforms.js";

const require = createRequire(import.meta.url);

let binding = null;
let loadError = null;
try {
  binding = require("../native/binding.cjs");
} catch (error) {
  loadError = error;
}

/**
 * Our stable error codes by the core crate's names (`codes.INVALID_ARGUMENT`, …): the
 * binding's table, or its frozen copy where no binary loads.
 */
export const codes = binding ? Object.freeze({ ...binding.errorCodes() }) : FALLBACK_ERROR_CODES;

/**
 * The constants shared with the core crate (`constants.appleDoubleExclude`,
 * `constants.gitArchiveExcludes`, the ignore scan's bounds, the structured error prefix):
 * the binding's values, or their frozen copy where no binary loads.
 */
export const constants = binding ? deepFreeze(binding.sharedConstants()) : FALLBACK_CONSTANTS;

function deepFreeze(object) {
  for (const value of Object.values(object)) if (typeof value === "object" && value !== null) Object.freeze(value);
  return Object.freeze(object);
}

/** The platform the loader looked for, e.g. `linux-x64-gnu` (for messages). */
export function nativePlatform() {
  return currentPlatform();
}

/**
 * Null when the native binary loaded; otherwise an `Error` (code
 * `ERR_PAPERCLIP_NATIVE_UNSUPPORTED_PLATFORM`) naming the platform, the package that carries
 * its binary and what to do. Importing the package never throws for a missing binary: a
 * native call does (see `native`).
 */
export const nativeLoadError = loadError ? unsupportedPlatformError() : null;

/** Our package's `version` and `napi.targets` (read only to explain a binary that did not load). */
function ownManifest() {
  try {
    return JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
  } catch {
    return { version: "", napi: { targets: [] } };
  }
}

/**
 * Why no binary loaded, in words an operator can act on: the platform has no published
 * binary; its platform package is not installed (and the usual causes); or it is installed
 * and does not load (the system's reason). Never the generated loader's generic advice.
 */
export function describeLoadFailure(platform, failure) {
  const { version, napi } = ownManifest();
  const published = (napi?.targets ?? []).flatMap((triple) => {
    try {
      return [platformOfTarget(triple)];
    } catch {
      return [];
    }
  });
  if (!published.includes(platform)) {
    return `${PACKAGE_NAME} has no prebuilt binary for ${platform} (published: ${published.join(", ")}); use @paperclipai/adapter-utils here (the activation leaves it in place)`;
  }
  const pkg = platformPackageName(platform);
  const spec = version ? `${pkg}@${version}` : pkg;
  const reasons = [];
  for (let error = failure; error && reasons.length < 8; error = error.cause) {
    const line = String(error.message ?? error).split("\n")[0];
    if (line && !/^Cannot find (module|native binding)/.test(line)) reasons.push(line);
  }
  // napi-rs's loader takes this variable's file in place of the installed package's.
  const override = process.env.NAPI_RS_NATIVE_LIBRARY_PATH;
  if (override) {
    let why = reasons[0];
    try {
      accessSync(override, fsConstants.R_OK);
    } catch (error) {
      why = `it cannot be read (${error.code})`; // the loader then says only "Cannot find module"
    }
    return (
      `${PACKAGE_NAME}: NAPI_RS_NATIVE_LIBRARY_PATH names a binary that does not load on ${platform}: ` +
      `${why ?? "unknown reason"}. Unset it to load the installed ${spec}`
    );
  }
  let installedAt = null;
  try {
    installedAt = path.dirname(require.resolve(`${pkg}/package.json`));
  } catch {
    installedAt = null;
  }
  if (!installedAt) {
    return (
      `${PACKAGE_NAME}: the native binary for ${platform} is not installed: the package ${spec} is missing. ` +
      "npm installs it as an optional dependency on this platform only; it is left out when dependencies were installed with " +
      "--no-optional or --omit=optional (or npm's `omit` config includes optional), from a lockfile made on another platform, " +
      `or copied from another machine. Install it: npm install ${spec}`
    );
  }
  return (
    `${PACKAGE_NAME}: ${spec} is installed (${installedAt}) but its binary does not load on ${platform}: ` +
    `${reasons[0] ?? "unknown reason"}. Reinstall it for this machine: npm install ${spec}`
  );
}

function unsupportedPlatformError() {
  const error = new Error(describeLoadFailure(currentPlatform(), loadError));
  error.code = codes.UNSUPPORTED_PLATFORM;
  return error;
}

/**
 * The raw binding. Internal: import the public modules instead. Where no binary loads, every
 * native function throws `ERR_PAPERCLIP_NATIVE_UNSUPPORTED_PLATFORM` when called (not at import).
 */
export const native =
  binding ??
  new Proxy(
    {},
    {
      get(_, property) {
        if (typeof property !== "string" || property === "then") return undefined;
        return () => {
          throw unsupportedPlatformError();
        };
      },
    },
  );

/** The prefix of a native rejection whose reason carries the error's details as JSON. */
const STRUCTURED_PREFIX = constants.structuredErrorPrefix;

/**
 * Turns a native rejection into the JS error callers expect: Node-shaped for file-system
 * failures (`code`, `errno`, `syscall`, `path`), an `AbortError` for a cancelled call, and
 * an `Error` with our stable `code` otherwise.
 */
export function toJsError(error, signal) {
  const message = typeof error?.message === "string" ? error.message : "";
  if (!message.startsWith(STRUCTURED_PREFIX)) return error;
  const details = JSON.parse(message.slice(STRUCTURED_PREFIX.length));
  const code = details.code ?? codes.INTERNAL;
  if (code === codes.ABORTED) return abortError(signal);
  const out = new Error(details.message ?? "");
  if (details.errno !== undefined) out.errno = details.errno;
  out.code = code;
  if (details.syscall !== undefined) out.syscall = details.syscall;
  if (details.path !== undefined) out.path = details.path;
  // A breached archive limit: its option name and value.
  if (details.limit !== undefined) Object.assign(out, { limit: details.limit, value: details.value });
  return out;
}

/** The error an aborted call rejects with, like Node's own `AbortError`. */
export function abortError(signal) {
  const error = new Error("The operation was aborted", signal ? { cause: signal.reason } : undefined);
  error.name = "AbortError";
  error.code = codes.ABORTED;
  return error;
}

/**
 * Runs `start(cancelId)` (a native async call) so that `signal` aborting it sets the
 * native cancellation flag; rejections are converted with {@link toJsError}.
 */
export async function runCancellable(signal, start) {
  if (signal?.aborted) throw abortError(signal);
  const id = signal ? native.cancelTokenCreate() : undefined;
  const onAbort = () => native.cancelTokenAbort(id);
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    return await start(id);
  } catch (error) {
    throw toJsError(error, signal);
  } finally {
    if (signal) {
      signal.removeEventListener("abort", onAbort);
      native.cancelTokenRelease(id);
    }
  }
}

/**
 * A FIFO of at most `max` concurrent holders (internal). `acquire(signal)` resolves to a
 * `release` function once a slot is free; aborting `signal` while queued rejects with an
 * `AbortError` and leaves the queue.
 */
export function createSlots(max) {
  let active = 0;
  const queue = [];
  const release = () => {
    const next = queue.shift();
    if (next) next.grant();
    else active -= 1;
  };
  const releaser = () => {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      release();
    };
  };
  return {
    /** Slots in use (for tests and diagnostics). */
    get active() {
      return active;
    },
    /** Callers waiting for a slot. */
    get queued() {
      return queue.length;
    },
    acquire(signal) {
      if (signal?.aborted) return Promise.reject(abortError(signal));
      if (active < max) {
        active += 1;
        return Promise.resolve(releaser());
      }
      return new Promise((resolve, reject) => {
        const waiter = {
          grant: () => {
            signal?.removeEventListener("abort", onAbort);
            resolve(releaser());
          },
        };
        const onAbort = () => {
          queue.splice(queue.indexOf(waiter), 1);
          reject(abortError(signal));
        };
        signal?.addEventListener("abort", onAbort, { once: true });
        queue.push(waiter);
      });
    },
  };
}

/**
 * Runs the native call `start(cancelId)` in one of `slots`, bounded by `timeoutMs` and
 * `signal` (internal). The call settles at the first of: the native result, the deadline
 * (rejects with `onTimeout()`), or an abort (rejects with an `AbortError`); on the last two
 * the native work is told to stop through its cancellation flag, and keeps its slot until
 * it has actually stopped, so the bound on concurrent native work holds. The deadline runs
 * from the moment the call gets its slot.
 */
export async function runBounded({ slots, signal, timeoutMs, onTimeout }, start) {
  const release = await slots.acquire(signal);
  const controller = new AbortController();
  let timer;
  let onAbort;
  const stopped = new Promise((_, reject) => {
    timer = setTimeout(() => {
      const error = onTimeout();
      controller.abort(error);
      reject(error);
    }, timeoutMs);
    onAbort = () => {
      const error = abortError(signal);
      controller.abort(error);
      reject(error);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
  const work = runCancellable(controller.signal, start);
  work.then(release, release);
  try {
    return await Promise.race([work, stopped]);
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
}
