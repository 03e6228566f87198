// Loads the raw napi binding (internal) and adapts its errors and cancellation.
// The generated loader picks the prebuilt binary for this platform: a local `native/*.node`
// in a checkout, otherwise the per-platform package
// `@paperclipai/adapter-utils-native-<platform>`; its error names the platform it looked for.
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);

/** The raw binding. Internal: import the public modules instead. */
export const native = require("../native/binding.cjs");

const STRUCTURED_PREFIX = "\u0000paperclip-native:";

/**
 * Turns a native rejection into the JS error callers expect: Node-shaped for file-system
 * failures (`code`, `errno`, `syscall`, `path`), an `AbortError` for a cancelled call, and
 * an `Error` with our stable `code` otherwise.
 */
export function toJsError(error, signal) {
  const message = typeof error?.message === "string" ? error.message : "";
  if (!message.startsWith(STRUCTURED_PREFIX)) return error;
  const rest = message.slice(STRUCTURED_PREFIX.length);
  const split = rest.indexOf("\u0000");
  const code = rest.slice(0, split);
  const details = JSON.parse(rest.slice(split + 1));
  if (code === "ABORT_ERR") return abortError(signal);
  const out = new Error(details.message);
  if (details.errno !== undefined) out.errno = details.errno;
  out.code = code;
  if (details.syscall !== undefined) out.syscall = details.syscall;
  if (details.path !== undefined) out.path = details.path;
  return out;
}

/** The error an aborted call rejects with, like Node's own `AbortError`. */
export function abortError(signal) {
  const error = new Error("The operation was aborted", signal ? { cause: signal.reason } : undefined);
  error.name = "AbortError";
  error.code = "ABORT_ERR";
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
