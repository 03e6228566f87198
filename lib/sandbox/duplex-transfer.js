// A remote file written through one duplex channel (a runner's `openDuplexChannel`): the
// channel runs a small shell script that copies exactly `total` bytes of its input into a
// staged sibling, one 4 MiB `dd` block at a time, printing one `.` per block it has stored, and
// renames the file into place. The host keeps at most `WINDOW` blocks unacknowledged, so
// the source is read only as fast as the sandbox stores it (backpressure), and the bytes
// travel raw (no base64). This path is ours alone (upstream has no duplex transfer), so its
// failures carry our codes: `ERR_PAPERCLIP_NATIVE_SANDBOX_TRANSFER_FAILED` when the remote
// command fails, the channel closes first or the byte count is not the announced one, and
// `ERR_PAPERCLIP_NATIVE_SANDBOX_TIMEOUT` when the channel goes silent or does not open.
import path from "node:path";
import { codes } from "../native.js";
import { reslice, uploadStagingPath } from "./base64-transfer.js";
import { withRunnerDeadline } from "./runner-deadline.js";
import { sandboxError as transferError, shellQuote } from "./shell.js";

/** The command's exit as a coded failure (`action`: `upload to <path>`, `read of <path>`). */
function exitFailure(action, exit) {
  return exit?.transportClosed
    ? transferError(codes.SANDBOX_TRANSFER_FAILED, `${action} failed: the channel closed before the command exited`, {
        exitCode: null,
      })
    : transferError(codes.SANDBOX_TRANSFER_FAILED, `${action} failed with exit code ${exit?.exitCode ?? "null"}`, {
        exitCode: exit?.exitCode ?? null,
      });
}

/** A channel from `runner.openDuplexChannel`, whose opening runs under `timeoutMs` (runner-deadline.js). */
function openChannel(runner, command, timeoutMs, what) {
  return withRunnerDeadline(runner.openDuplexChannel({ command }), timeoutMs, what);
}

/** Closes `channel`, waiting for that at most `timeoutMs` (a channel that never closes is let go). */
async function closeChannel(channel, timeoutMs) {
  await withRunnerDeadline(channel.close(), timeoutMs, "the close of a channel").catch(() => undefined);
}

/**
 * Watches `channel` for a transfer (`action`: `upload to <path>`, `read of <path>`): each
 * chunk of its output goes to `onData`, and `waitUntil(condition)` resolves once
 * `condition()` holds, checked on every chunk and at the exit; it rejects when the command
 * exits first (its coded failure) or when nothing arrives for `timeoutMs`
 * (`ERR_PAPERCLIP_NATIVE_SANDBOX_TIMEOUT`, "… without `silence`"). `exit()`: the exit, once
 * it came. `failure()`: the exit's coded failure.
 */
function channelWatch(channel, { action, timeoutMs, silence, onData }) {
  let exit = null;
  let wake = null;
  const notify = () => {
    const resume = wake;
    wake = null;
    resume?.();
  };
  channel.onData((chunk) => {
    onData(chunk);
    notify();
  });
  channel.onExit((info) => {
    exit = info ?? { exitCode: null };
    notify();
  });
  const failure = () => exitFailure(action, exit);
  const waitUntil = (condition) =>
    new Promise((resolve, reject) => {
      let timer = null;
      const settled = () => {
        if (condition()) {
          clearTimeout(timer);
          resolve();
          return true;
        }
        if (exit) {
          clearTimeout(timer);
          reject(failure());
          return true;
        }
        return false;
      };
      if (settled()) return;
      const arm = () => {
        clearTimeout(timer);
        if (timeoutMs > 0) {
          timer = setTimeout(() => {
            wake = null;
            reject(
              transferError(codes.SANDBOX_TIMEOUT, `${action} timed out after ${timeoutMs} ms without ${silence}`, {
                timeoutMs,
              }),
            );
          }, timeoutMs);
        }
      };
      const onWake = () => {
        if (settled()) return;
        arm();
        wake = onWake;
      };
      arm();
      wake = onWake;
    });
  return { waitUntil, failure, exit: () => exit };
}

/** Bytes per acknowledged (written) or requested (read) block. */
export const DUPLEX_BLOCK_BYTES = 4 * 1024 * 1024;
/** Blocks in flight before the host waits for an acknowledgement. */
const WINDOW = 4;

/** The script the channel runs: store `total` bytes at `staged`, then rename to `remotePath`. */
function duplexWriteScript(remotePath, staged, total) {
  const full = Math.floor(total / DUPLEX_BLOCK_BYTES);
  const rest = total % DUPLEX_BLOCK_BYTES;
  const q = shellQuote(staged);
  const block = (size) => `dd bs=${size} count=1 iflag=fullblock 2>/dev/null >> ${q} && printf .`;
  return (
    `cleanup() { rm -f ${q}; }; trap cleanup EXIT INT TERM; ` +
    `mkdir -p ${shellQuote(path.posix.dirname(remotePath))} && : > ${q} && ` +
    `n=${full}; while [ "$n" -gt 0 ]; do ${block(DUPLEX_BLOCK_BYTES)} || exit 1; n=$((n-1)); done && ` +
    (rest > 0 ? `${block(rest)} && ` : "") +
    `[ "$(wc -c < ${q})" -eq ${total} ] && mv -f ${q} ${shellQuote(remotePath)}`
  );
}

/**
 * Streams `source` (an async iterable of byte chunks yielding exactly `total` bytes) into
 * `remotePath` through a channel from `runner.openDuplexChannel`. Progress `(done, total)`
 * after every acknowledged block and `(total, total)` at the end. Fails (and stops the
 * channel) when the remote script exits non-zero, the transport closes, the source yields
 * a different byte count, or no acknowledgement arrives for `timeoutMs`.
 */
export async function writeThroughDuplexChannel(runner, { shell, remotePath, source, total, timeoutMs, onProgress }) {
  const staged = uploadStagingPath(remotePath);
  const channel = await openChannel(
    runner,
    [shell, "-c", duplexWriteScript(remotePath, staged, total)],
    timeoutMs,
    `the channel of an upload to ${remotePath}`,
  );
  let acked = 0;
  const watch = channelWatch(channel, {
    action: `upload to ${remotePath}`,
    timeoutMs,
    silence: "progress",
    onData: (chunk) => {
      for (const byte of chunk) if (byte === 0x2e) acked += 1;
    },
  });
  let sent = 0;
  let blocks = 0;
  try {
    for await (const block of reslice(source, DUPLEX_BLOCK_BYTES)) {
      await watch.waitUntil(() => blocks - acked < WINDOW);
      sent += block.length;
      if (sent > total)
        throw transferError(
          codes.SANDBOX_TRANSFER_FAILED,
          `upload source for ${remotePath} produced more than ${total} bytes`,
        );
      channel.write(block);
      blocks += 1;
      await onProgress?.(Math.min(acked * DUPLEX_BLOCK_BYTES, total), total);
    }
    if (sent !== total)
      throw transferError(
        codes.SANDBOX_TRANSFER_FAILED,
        `upload source for ${remotePath} produced ${sent} bytes, expected ${total}`,
      );
    await watch.waitUntil(() => watch.exit() !== null);
    if (watch.exit().exitCode !== 0) throw watch.failure();
    await onProgress?.(total, total);
  } catch (error) {
    channel.stop();
    throw error;
  } finally {
    await closeChannel(channel, timeoutMs);
  }
}

/** The script that serves `remotePath` block by block: its size first, then each block asked for. */
function duplexReadScript(remotePath) {
  const q = shellQuote(remotePath);
  return (
    `size=$(wc -c < ${q}) || exit 1; printf '%s\\n' "$size"; ` +
    `while IFS= read -r n; do [ "$n" = end ] && exit 0; ` +
    `dd if=${q} bs=${DUPLEX_BLOCK_BYTES} skip="$n" count=1 2>/dev/null || exit 1; done; exit 1`
  );
}

/**
 * The size line a read's script prints first ({@link duplexReadScript}), taken off `inbox`
 * (`{ pending, bytes }`: what arrived and is not taken yet; what follows the line stays).
 */
async function readSizeLine(inbox, watch, remotePath) {
  const unreadable = () =>
    transferError(codes.SANDBOX_TRANSFER_FAILED, `Could not determine remote file size for ${remotePath}`);
  await watch.waitUntil(() => inbox.bytes > 64 || inbox.pending.some((chunk) => chunk.includes(0x0a)));
  const bytes = Buffer.concat(inbox.pending);
  const newline = bytes.indexOf(0x0a);
  if (newline < 0) throw unreadable();
  const text = bytes.subarray(0, newline).toString("latin1").trim();
  if (!/^\d+$/.test(text)) throw unreadable();
  const rest = bytes.subarray(newline + 1);
  inbox.pending = rest.length > 0 ? [rest] : [];
  inbox.bytes = rest.length;
  return Number(text);
}

/** Exactly `n` bytes of what arrived in `inbox` (the caller waited for enough). */
function take(inbox, n) {
  const out = Buffer.allocUnsafe(n);
  let filled = 0;
  while (filled < n) {
    const head = inbox.pending[0];
    const part = Math.min(head.length, n - filled);
    head.copy(out, filled, 0, part);
    filled += part;
    if (part === head.length) inbox.pending.shift();
    else inbox.pending[0] = head.subarray(part);
  }
  inbox.bytes -= n;
  return out;
}

/**
 * Yields the bytes of `remotePath` through one duplex channel, in 4 MiB blocks the host
 * asks for (at most `WINDOW` outstanding, so a slow consumer slows the sandbox down instead
 * of filling memory). The size comes first; a file that yields a different byte count, a
 * non-zero exit, a closed transport or `timeoutMs` without data fails the read.
 * Progress `(done, total)` after every block.
 */
export async function* readThroughDuplexChannel(runner, { shell, remotePath, timeoutMs, onProgress }) {
  const channel = await openChannel(
    runner,
    [shell, "-c", duplexReadScript(remotePath)],
    timeoutMs,
    `the channel of a read of ${remotePath}`,
  );
  const inbox = { pending: [], bytes: 0 };
  const watch = channelWatch(channel, {
    action: `read of ${remotePath}`,
    timeoutMs,
    silence: "data",
    onData: (chunk) => {
      // A copy: the runner may reuse the chunk's memory.
      inbox.pending.push(Buffer.from(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)));
      inbox.bytes += chunk.byteLength;
    },
  });
  let finished = false;
  try {
    const total = await readSizeLine(inbox, watch, remotePath);
    const blocks = Math.ceil(total / DUPLEX_BLOCK_BYTES);
    let requested = 0;
    let received = 0;
    const request = () => {
      while (requested < blocks && requested - Math.floor(received / DUPLEX_BLOCK_BYTES) < WINDOW) {
        channel.write(Buffer.from(`${requested}\n`));
        requested += 1;
      }
    };
    request();
    while (received < total) {
      const want = Math.min(DUPLEX_BLOCK_BYTES, total - received);
      await watch.waitUntil(() => inbox.bytes >= want);
      const block = take(inbox, want);
      received += block.length;
      request();
      await onProgress?.(received, total);
      yield block;
    }
    channel.write(Buffer.from("end\n"));
    await watch.waitUntil(() => watch.exit() !== null);
    if (watch.exit().exitCode !== 0) throw watch.failure();
    if (inbox.bytes > 0)
      throw transferError(
        codes.SANDBOX_TRANSFER_FAILED,
        `Remote file read was truncated for ${remotePath}: more than ${total} bytes`,
      );
    if (total === 0) await onProgress?.(0, 0);
    finished = true;
  } finally {
    if (!finished) channel.stop();
    await closeChannel(channel, timeoutMs);
  }
}
