// What the SSH modules share: upstream's shell quoting, the native connection target of an
// upstream `SshConnectionConfig`, and upstream's transfer progress on top of the
// shared reporter. Internal: not part of the package's exports.
import { native, runCancellable } from "./native.js";
import { createRuntimeProgressReporter } from "./runtime-progress.js";
import { invalidArgument } from "./arguments.js";
import { progressBridge } from "./tar-common.js";

/** Default inactivity timeout of a transfer: no byte moved for 5 minutes fails it. */
const DEFAULT_TRANSFER_INACTIVITY_MS = 5 * 60_000;
/** The reported byte count stays at 99% of a total until the remote confirms success. */
const PROGRESS_CAP = 0.99;

export { shellQuote } from "./shell-quote.js";

/**
 * True unless `PAPERCLIP_NATIVE_SSH_REUSE=0`: calls lease their session from the native
 * pool and leave it there for the next call to the same host as the same user (docs/ssh.md). Read at every call.
 */
export function sshSessionReuse() {
  return process.env.PAPERCLIP_NATIVE_SSH_REUSE !== "0";
}

/**
 * Where the connect budget of a public SSH call travels on the options it hands to the steps
 * it runs (a symbol: no upstream field can collide with it; an object spread keeps it).
 */
export const CONNECT_BUDGET = Symbol("paperclip-native.sshConnectBudget");

/**
 * Runs `fn(options)` with a connect budget on `options` (docs/ssh.md, "Connect deadline"): every
 * connection the call opens, at any step, shares it, so the call loses at most its connect
 * timeout to connections that fail, however many it opens. A call made by another (options
 * that carry a budget already) shares its caller's. Options that are not an object are
 * passed on as they are (the call rejects them).
 */
export async function withConnectBudget(options, fn) {
  if (!options || typeof options !== "object" || options[CONNECT_BUDGET] != null) return await fn(options);
  const ms = options.connectTimeoutMs;
  const id = native.sshConnectBudgetCreate(typeof ms === "number" && ms > 0 ? ms : undefined);
  try {
    return await fn({ ...options, [CONNECT_BUDGET]: id });
  } finally {
    native.sshConnectBudgetRelease(id);
  }
}

/**
 * The native connection target for an upstream `SshConnectionConfig` and our connection
 * options (timeouts; the call's connect budget, when it has one).
 */
export function sshTarget(config, options = {}) {
  const { connectTimeoutMs, inactivityTimeoutMs } = options;
  if (!config || typeof config !== "object") throw invalidArgument("config must be an SshConnectionConfig");
  if (typeof config.host !== "string" || config.host === "")
    throw invalidArgument("config.host must be a non-empty string");
  if (typeof config.username !== "string" || config.username === "")
    throw invalidArgument("config.username must be a non-empty string");
  const port = Number(config.port);
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    throw invalidArgument(`config.port must be an integer 1-65535, got ${String(config.port)}`, RangeError);
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
    connectBudget: options[CONNECT_BUDGET],
  };
}

/**
 * Starts opening the pooled session a lifecycle's first remote command will take (the
 * connection options as that command's, `transferTarget`, its connect budget included),
 * while the caller does its local work; nothing without session reuse. The login's failure
 * is that command's error.
 */
export function openSshSessionAhead(config, connection) {
  try {
    native.sshOpenAhead(transferTarget(config, connection));
  } catch {
    // A config the call rejects: the call reports it.
  }
}

/** An optional non-negative number of milliseconds (0 or absent: the default). */
function positive(value, name) {
  if (value == null) return undefined;
  if (typeof value !== "number" || !(value >= 0))
    throw invalidArgument(`${name} must be a non-negative number of milliseconds`, RangeError);
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
    (value) => {
      known = Number.isFinite(value) && value > 0 ? value : null;
    },
    () => {
      known = null;
    },
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

/** GNU tar's record: `tar -cf -` writes whole records of 20 blocks. */
const TAR_RECORD = 10_240;
/** The `./` member GNU tar writes first for `tar -cf - .` (our packer has no root member). */
const DOT_MEMBER = 512;
/** What Node reads from a child's stdout pipe at a time: the chunks upstream's counter sees. */
const PIPE_CHUNK = 65_536;

/**
 * Upstream's upload progress (its `createTransferProgress` over the host `tar -cf - .`
 * pipe) for our packer's stream, so the lines are upstream's for the same tree: the total
 * is upstream's estimate (the sizes of the regular files, `estimate`, a promise), every
 * count after the first is capped at 99% of it, and the counts are the positions GNU
 * tar's stream (a `./` member first, records of 10 240 bytes) reaches chunk by chunk as
 * Node reads it from the pipe (64 KiB at a time). As upstream's walk does in practice,
 * the estimate arrives after the first chunk, which is reported in MB. `finish` writes
 * `100% (total/total)`, or without a total the padded archive size; `fail` the
 * `failed at` line. `null` without a sink.
 */
export function uploadProgress({ onProgress, label, estimate }) {
  if (typeof onProgress !== "function") return null;
  const reporter = createRuntimeProgressReporter({
    sink: onProgress,
    phase: "Syncing",
    direction: "to",
    label,
    target: "ssh",
  });
  let total = null;
  let cap = null;
  const estimated = Promise.resolve(estimate).then(
    (value) => value,
    () => null,
  );
  let chain = Promise.resolve();
  let position = 0; // bytes of GNU tar's stream Node would have read so far
  /** Reports each pipe chunk between the two stream positions. */
  const feed = async (to) => {
    while (position < to) {
      const first = position === 0;
      position = Math.min(to, (Math.floor(position / PIPE_CHUNK) + 1) * PIPE_CHUNK);
      await reporter.report(cap == null ? position : Math.min(position, cap), total);
      if (first) {
        const value = await estimated;
        total = Number.isFinite(value) && value > 0 ? value : null;
        cap = total == null ? null : Math.floor(total * PROGRESS_CAP);
      }
    }
  };
  const advance = (to) => {
    chain = chain.then(() => feed(to)).catch(() => undefined);
  };
  return {
    /** The running count of our (uncompressed) tar stream. */
    update(tarBytes) {
      advance(Math.floor((tarBytes + DOT_MEMBER) / PIPE_CHUNK) * PIPE_CHUNK);
    },
    /** The terminal line once the remote confirmed; `tarBytes` is our stream's final size. */
    async finish(tarBytes) {
      advance(Math.ceil((tarBytes + DOT_MEMBER) / TAR_RECORD) * TAR_RECORD);
      await chain;
      if (total == null) total = await estimated.then((value) => (Number.isFinite(value) && value > 0 ? value : null));
      await reporter.complete(total ?? position, total).catch(() => undefined);
    },
    /**
     * The `failed at NN% (x/y MB)` (or `failed after x MB`) line. Upstream's Node has read
     * tar's first pipe chunk before its `ssh` can fail (tar writes it at once), so its line
     * has that chunk and the estimate even when the remote failed before reading a byte.
     */
    async fail() {
      if (position === 0) {
        const value = await estimated;
        const stream =
          Number.isFinite(value) && value > 0
            ? Math.ceil((value + 2 * DOT_MEMBER) / TAR_RECORD) * TAR_RECORD
            : TAR_RECORD;
        advance(Math.min(PIPE_CHUNK, stream));
      }
      await chain;
      await reporter.fail(position, total).catch(() => undefined);
    },
  };
}

/** The native target of a transfer: [`sshTarget`] with the transfers' default inactivity timeout. */
export function transferTarget(config, options = {}) {
  return sshTarget(config, {
    connectTimeoutMs: options.connectTimeoutMs,
    inactivityTimeoutMs: options.inactivityTimeoutMs ?? DEFAULT_TRANSFER_INACTIVITY_MS,
    [CONNECT_BUDGET]: options[CONNECT_BUDGET],
  });
}

/**
 * Runs one native transfer, `start(cancelId, onBytes)`, under `signal` with upstream's
 * transfer progress (`progress` from [`transferProgress`], or `null`): the running byte
 * count, then the terminal line, or the `failed at` line when it throws.
 */
export async function runTransfer(progress, signal, start) {
  try {
    const summary = await runCancellable(signal, (id) =>
      start(id, progress ? (bytes) => progress.update(bytes) : undefined),
    );
    await progress?.finish(summary.bytes);
    return summary;
  } catch (error) {
    await progress?.fail();
    throw error;
  }
}
