// A remote file written through one duplex channel (a runner's `openDuplexChannel`): the
// channel runs a small shell script that copies exactly `total` bytes of its input into a
// staged sibling, one `dd` block at a time, printing one `.` per block it has stored, and
// renames the file into place. The host keeps at most `WINDOW` blocks unacknowledged, so
// the source is read only as fast as the sandbox stores it (backpressure), and the bytes
// travel raw (no base64).
import path from "node:path";
import { reslice, uploadStagingPath } from "./base64-transfer.js";
import { shellQuote } from "./shell.js";

/** Bytes per acknowledged block. */
export const DUPLEX_BLOCK_BYTES = 1024 * 1024;
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
  const channel = await runner.openDuplexChannel({ command: [shell, "-c", duplexWriteScript(remotePath, staged, total)] });
  let acked = 0;
  let exit = null;
  let wake = null;
  const notify = () => {
    const resume = wake;
    wake = null;
    resume?.();
  };
  channel.onData((chunk) => {
    for (const byte of chunk) if (byte === 0x2e) acked += 1;
    notify();
  });
  channel.onExit((info) => {
    exit = info ?? { exitCode: null };
    notify();
  });
  const failure = () => {
    if (exit.transportClosed) return new Error(`upload to ${remotePath} failed: the channel closed before the command exited`);
    return new Error(`upload to ${remotePath} failed with exit code ${exit.exitCode ?? "null"}`);
  };
  /**
   * Resolves once `condition()` holds; rejects when the command exits first, or when
   * nothing arrives from the channel for `timeoutMs` (an inactivity deadline).
   */
  const waitUntil = (condition) => new Promise((resolve, reject) => {
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
          reject(new Error(`upload to ${remotePath} timed out after ${timeoutMs} ms without progress`));
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
  let sent = 0;
  let blocks = 0;
  try {
    for await (const block of reslice(source, DUPLEX_BLOCK_BYTES)) {
      await waitUntil(() => blocks - acked < WINDOW);
      sent += block.length;
      if (sent > total) throw new Error(`upload source for ${remotePath} produced more than ${total} bytes`);
      channel.write(block);
      blocks += 1;
      await onProgress?.(Math.min(acked * DUPLEX_BLOCK_BYTES, total), total);
    }
    if (sent !== total) throw new Error(`upload source for ${remotePath} produced ${sent} bytes, expected ${total}`);
    await waitUntil(() => exit !== null);
    if (exit.exitCode !== 0) throw failure();
    await onProgress?.(total, total);
  } catch (error) {
    channel.stop();
    throw error;
  } finally {
    await channel.close().catch(() => undefined);
  }
}
