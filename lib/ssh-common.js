// What the SSH modules share: upstream's shell quoting, the native connection target of an
// upstream `SshConnectionConfig`, and upstream's transfer progress on top of the
// shared reporter. Internal: not part of the package's exports.
import { runCancellable } from "./native.js";
import { createRuntimeProgressReporter } from "./runtime-progress.js";
import { invalidArgument, progressBridge } from "./tar-common.js";

/** Default inactivity timeout of a transfer: no byte moved for 5 minutes fails it. */
const DEFAULT_TRANSFER_INACTIVITY_MS = 5 * 60_000;
/** The reported byte count stays at 99% of a total until the remote confirms success. */
const PROGRESS_CAP = 0.99;

/** POSIX single quotes, as upstream's `shellQuote`: `it's` → `'it'"'"'s'`. */
export function shellQuote(value) {
  return `'${value.replace(/'/g, `'"'"'`)}'`;
}

/**
 * True unless `PAPERCLIP_NATIVE_SSH_REUSE=0`: calls lease their session from the native
 * pool and leave it there for the next call to the same host as the same user (README
 * "SSH"). Read at every call.
 */
export function sshSessionReuse() {
  return process.env.PAPERCLIP_NATIVE_SSH_REUSE !== "0";
}

/** The native connection target for an upstream `SshConnectionConfig` and our connection options (timeouts). */
export function sshTarget(config, { connectTimeoutMs, inactivityTimeoutMs } = {}) {
  if (!config || typeof config !== "object") throw invalidArgument("config must be an SshConnectionConfig");
  if (typeof config.host !== "string" || config.host === "") throw invalidArgument("config.host must be a non-empty string");
  if (typeof config.username !== "string" || config.username === "") throw invalidArgument("config.username must be a non-empty string");
  const port = Number(config.port);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw invalidArgument(`config.port must be an integer 1-65535, got ${String(config.port)}`, RangeError);
  return {
    host: config.host,
    port,
    username: config.username,
    // Upstream passes a key or known-hosts value only when it is a non-empty string.
    privateKey: typeof config.privateKey === "string" && config.privateKey !== "" ? config.privateKey : undefined,
    knownHosts: typeof config.knownHosts === "string" && config.knownHosts !== "" ? config.knownHosts : undefined,
    strictHostKeyChecking: Boolean(config.strictHostKeyChecking),
    connectTimeoutMs: positive(connectTimeoutMs, "connectTimeoutMs"),
    inactivityTimeoutMs: positive(inactivityTimeoutMs, "inactivityTimeoutMs"),
    reuse: sshSessionReuse(),
  };
}

/** An optional non-negative number of milliseconds (0 or absent: the default). */
function positive(value, name) {
  if (value == null) return undefined;
  if (typeof value !== "number" || !(value >= 0)) throw invalidArgument(`${name} must be a non-negative number of milliseconds`, RangeError);
  return value;
}

/**
 * Upstream's transfer progress (its `createTransferProgress`) on top of the shared
 * reporter: byte counts capped at 99% of the total until `finish()`, a total that may arrive
 * while the transfer runs, the terminal line on success and the `failed at …` line on
 * failure. `null` without a sink.
 */
export function transferProgress({ onProgress, phase, direction, label, total }) {
  if (typeof onProgress !== "function") return null;
  const reporter = createRuntimeProgressReporter({ sink: onProgress, phase, direction, label, target: "ssh" });
  let known = null;
  const ready = Promise.resolve(total).then(
    (value) => { known = Number.isFinite(value) && value > 0 ? value : null; },
    () => { known = null; },
  );
  const bridge = progressBridge(reporter, () => known);
  let transferred = 0;
  return {
    /** The running byte count from the native transfer. */
    update(bytes) {
      transferred = Math.max(transferred, bytes);
      bridge.update(known != null ? Math.min(transferred, Math.floor(known * PROGRESS_CAP)) : transferred);
    },
    /** The terminal line: 100% of the total, or the final MB without one. */
    async finish(bytes) {
      if (bytes != null) transferred = bytes;
      await ready;
      await bridge.complete(known ?? transferred, known);
    },
    /** The `failed at NN% (x/y MB)` (or `failed after x MB`) line. */
    async fail() {
      await ready;
      await bridge.fail(transferred);
    },
  };
}

/** The native target of a transfer: [`sshTarget`] with the transfers' default inactivity timeout. */
export function transferTarget(config, { connectTimeoutMs, inactivityTimeoutMs } = {}) {
  return sshTarget(config, { connectTimeoutMs, inactivityTimeoutMs: inactivityTimeoutMs ?? DEFAULT_TRANSFER_INACTIVITY_MS });
}

/**
 * Runs one native transfer, `start(cancelId, onBytes)`, under `signal` with upstream's
 * transfer progress (`progress` from [`transferProgress`], or `null`): the running byte
 * count, then the terminal line, or the `failed at` line when it throws.
 */
export async function runTransfer(progress, signal, start) {
  try {
    const summary = await runCancellable(signal, (id) => start(id, progress ? (bytes) => progress.update(bytes) : undefined));
    await progress?.finish(summary.bytes);
    return summary;
  } catch (error) {
    await progress?.fail();
    throw error;
  }
}
