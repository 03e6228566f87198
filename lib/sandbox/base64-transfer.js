// The base64 transport of the command-managed client: a byte stream goes to a remote file
// as base64 text on the stdin of `execute` calls, and a remote file comes back as base64
// on their stdout. The wire protocol is upstream's (one `base64 -d` process for up to
// 96 MiB of text when the runner can report progress for it, else one `base64 -d >>` per
// 3 MiB slice; reads are `dd … | base64` per 3 MiB), but the bytes are taken from the
// source and encoded one 3 MiB slice at a time, so nothing but the slices in flight (and,
// on the single-stream path, the stdin text itself) is ever held in memory.
import { randomUUID } from "node:crypto";
import path from "node:path";
import { gzipSync } from "node:zlib";
import { codes } from "../native.js";
import { sandboxError, shellQuote } from "./shell.js";

/** Most base64 text handed to one `execute` as stdin (upstream's single-stream bound). */
export const SINGLE_STREAM_MAX_BASE64_BYTES = 96 * 1024 * 1024;
/** Decoded bytes per chunked write and per `dd` read: 3 MiB (4 MiB of base64 text). */
export const SLICE_BYTES = 3 * 1024 * 1024;
/** `dd | base64` reads of one file running at once (each holds one slice). */
const READ_AHEAD = 3;

/** The length of the base64 text of `bytes` bytes. */
export function base64Length(bytes) {
  return Math.ceil(bytes / 3) * 4;
}

/** A Buffer view of any byte container (no copy). */
export function asBuffer(bytes) {
  if (Buffer.isBuffer(bytes)) return bytes;
  if (bytes instanceof ArrayBuffer) return Buffer.from(bytes);
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** The slices of one in-memory buffer (views, no copy). */
export function* slicesOfBuffer(buffer, size = SLICE_BYTES) {
  for (let offset = 0; offset < buffer.length; offset += size) yield buffer.subarray(offset, offset + size);
}

/**
 * Re-cuts an (async) iterable of byte chunks into slices of exactly `size` bytes (the last
 * may be shorter). A slice is a fresh Buffer only when chunks straddle it; whole slices of
 * a large chunk are views.
 */
export async function* reslice(source, size = SLICE_BYTES) {
  let pending = null;
  let filled = 0;
  for await (const raw of source) {
    let chunk = asBuffer(raw);
    while (chunk.length > 0) {
      if (filled === 0 && chunk.length >= size) {
        yield chunk.subarray(0, size);
        chunk = chunk.subarray(size);
        continue;
      }
      pending ??= Buffer.allocUnsafe(size);
      const take = Math.min(size - filled, chunk.length);
      chunk.copy(pending, filled, 0, take);
      filled += take;
      chunk = chunk.subarray(take);
      if (filled === size) {
        const out = pending;
        pending = null;
        filled = 0;
        yield out;
      }
    }
  }
  if (filled > 0) yield pending.subarray(0, filled);
}

/**
 * Below this many bytes of base64 text per second through the runner, uploads go gzip'd
 * before their base64 encoding (about 100 Mbit/s of text; gzip at level 1 sustains several
 * times that here, and a runner on this host measures well above it even under load).
 */
export const COMPRESS_BELOW_BYTES_PER_SECOND = 12e6;
/** The status a write exits with when the sandbox has no `gzip` (the slice is then sent as is). */
const NO_GZIP = 97;

/**
 * A runner's measured link (base64 text per second of its uploads), shared by its clients
 * in this process: `observe(bytes, ms)` after a write; `slow()` once a measurement says the
 * link is slower than gzip; `noGzip` once the sandbox showed it has none.
 */
const links = new WeakMap();
export function runnerLink(runner) {
  let link = links.get(runner);
  if (!link) {
    link = {
      bytesPerSecond: null,
      noGzip: false,
      // What a call costs without data (starting the command, the round trip): the
      // quickest call seen with no stdin; it is not the link's time.
      idleMs: null,
      observeIdle(ms) {
        link.idleMs = Math.min(link.idleMs ?? ms, ms);
      },
      // The rate of the data over the time it took beyond an idle call; the link's figure
      // is the median of the last three (one call slowed or sped by a busy host moves it
      // no further than its neighbours allow).
      samples: [],
      observe(bytes, ms) {
        const moving = ms - (link.idleMs ?? 0);
        if (bytes < 1024 * 1024 || !(moving > 0)) return;
        link.samples = [...link.samples.slice(-2), bytes / (moving / 1000)];
        link.bytesPerSecond = [...link.samples].sort((a, b) => a - b)[Math.floor(link.samples.length / 2)];
      },
      slow() {
        return !link.noGzip && link.bytesPerSecond != null && link.bytesPerSecond < COMPRESS_BELOW_BYTES_PER_SECOND;
      },
      // A figure measured earlier (a previous run's, kept in its delta manifest), taken
      // until this process measures its own.
      remember(bytesPerSecond) {
        if (link.samples.length === 0 && Number.isFinite(bytesPerSecond) && bytesPerSecond > 0)
          link.bytesPerSecond = bytesPerSecond;
      },
    };
    links.set(runner, link);
  }
  return link;
}

/** The staged sibling a write goes to before its rename: `<path>.paperclip-upload.<uuid>`. */
export function uploadStagingPath(remotePath) {
  return `${remotePath}.paperclip-upload.${randomUUID()}`;
}

/**
 * Writes `total` bytes from `slices` (an async iterable of slices of at most
 * {@link SLICE_BYTES}, every one but the last exactly that size) to `remotePath` through
 * `runShell(script, { stdin, transferBytes, what })` (`transferBytes`: the whole transfer's
 * size, for the call's deadline; `what`: the call, for its timeout's message), via a staged
 * sibling renamed into place. `singleStream`
 * selects one `base64 -d` process for the whole text; otherwise one call per slice.
 * `onProgress(done, total)` as upstream: `(0, total)` and `(total, total)` around a single
 * stream, `(end, total)` after every slice and `(total, total)` after the rename.
 * `removeStaged(path)` is called (best effort) whatever happens.
 */
export async function writeBase64(
  runShell,
  { remotePath, slices, total, singleStream, onProgress, removeStaged, link },
) {
  const staged = uploadStagingPath(remotePath);
  const dir = path.posix.dirname(remotePath);
  /** Runs one timed write of `text` (the link learns from it). */
  const timed = async (script, text) => {
    const started = performance.now();
    const result = await runShell(script, { stdin: text, transferBytes: total, what: `an upload to ${remotePath}` });
    link?.observe(text.length, performance.now() - started);
    return result;
  };
  try {
    if (singleStream) {
      // Concatenated base64 of 3-byte-aligned slices is the base64 of the whole; gzip'd
      // (on a link measured slow), the members are joined first, then encoded.
      const gzip = link?.slow() === true;
      const parts = [];
      for await (const slice of slices) parts.push(gzip ? gzipSync(slice, { level: 1 }) : slice.toString("base64"));
      const body = gzip ? Buffer.concat(parts).toString("base64") : parts.join("");
      await onProgress?.(0, total);
      await timed(
        `cleanup() { rm -f ${shellQuote(staged)}; }; trap cleanup EXIT INT TERM; ` +
          `mkdir -p ${shellQuote(dir)} && base64 -d ${gzip ? "| gzip -dc " : ""}> ${shellQuote(staged)} && ` +
          `mv -f ${shellQuote(staged)} ${shellQuote(remotePath)}`,
        body,
      );
      await onProgress?.(total, total);
      return;
    }
    const idleStarted = performance.now();
    await runShell(`mkdir -p ${shellQuote(dir)} && rm -f ${shellQuote(staged)} && : > ${shellQuote(staged)}`);
    link?.observeIdle(performance.now() - idleStarted);
    let done = 0;
    for await (const slice of slices) {
      // Each slice its own gzip member once the link measured slow (members concatenate).
      if (link?.slow()) {
        const written = await timed(
          `if ! command -v gzip >/dev/null 2>&1; then exit ${NO_GZIP}; fi; base64 -d | gzip -dc >> ${shellQuote(staged)}`,
          gzipSync(slice, { level: 1 }).toString("base64"),
        ).then(
          () => true,
          (error) => {
            if (error?.exitCode !== NO_GZIP && !String(error?.message).includes(`exit code ${NO_GZIP}`)) throw error;
            link.noGzip = true;
            return false;
          },
        );
        if (!written) await timed(`base64 -d >> ${shellQuote(staged)}`, slice.toString("base64"));
      } else {
        await timed(`base64 -d >> ${shellQuote(staged)}`, slice.toString("base64"));
      }
      done += slice.length;
      await onProgress?.(done, total);
    }
    if (done !== total) throw new Error(`upload source for ${remotePath} produced ${done} bytes, expected ${total}`);
    await runShell(`mv -f ${shellQuote(staged)} ${shellQuote(remotePath)}`);
    await onProgress?.(total, total);
  } finally {
    await removeStaged(staged);
  }
}

/**
 * Reads the remote file in 3 MiB `dd | base64` calls (up to three at once, yielded in
 * order) and yields each decoded slice; the
 * size is probed first (`wc -c`), a missing file is an `ENOENT` error (only when its parent
 * is a searchable directory, so a transport failure is never masked), and a length other
 * than the probed size (or a slice of another length than its place in the file gives)
 * fails as `Remote file read was truncated …`. Progress as upstream.
 * Each `dd` read runs under the transfer's deadline (`runShell`'s `transferBytes`, as for
 * {@link writeBase64}).
 */
export async function* readBase64(runShell, remotePath, onProgress) {
  const quoted = shellQuote(remotePath);
  let probe;
  try {
    probe = await runShell(`wc -c < ${quoted}`);
  } catch (error) {
    const parent = shellQuote(path.posix.dirname(remotePath));
    const missing = await runShell(
      `if [ -d ${parent} ] && [ -x ${parent} ] && [ ! -e ${quoted} ]; then printf 'missing'; fi`,
    ).catch(() => null);
    if (missing?.stdout === "missing") {
      throw Object.assign(new Error(`No such file: ${remotePath}`), { code: "ENOENT", path: remotePath });
    }
    throw error;
  }
  const total = Number.parseInt(probe.stdout.trim(), 10);
  if (!Number.isFinite(total) || total < 0)
    throw sandboxError(codes.SANDBOX_TRANSFER_FAILED, `Could not determine remote file size for ${remotePath}`);
  if (total === 0) {
    await onProgress?.(0, 0);
    return;
  }
  // The slices are independent reads (`dd skip=<i>`): up to READ_AHEAD run at once, taken
  // in order, so the sandbox's `dd | base64` overlaps the host's decoding and extraction.
  const slices = Math.ceil(total / SLICE_BYTES);
  const inFlight = [];
  let next = 0;
  const start = () => {
    while (next < slices && inFlight.length < READ_AHEAD) {
      const index = next;
      next += 1;
      const read = runShell(`dd if=${quoted} bs=${SLICE_BYTES} skip=${index} count=1 2>/dev/null | base64`, {
        transferBytes: total,
        what: `a read of ${remotePath}`,
      });
      read.catch(() => undefined); // awaited below, in order
      inFlight.push(read);
    }
  };
  let received = 0;
  let misfit = false;
  try {
    start();
    while (inFlight.length > 0 && received < total) {
      const result = await inFlight.shift();
      const slice = Buffer.from(result.stdout.replace(/\s+/g, ""), "base64");
      if (slice.length === 0) break;
      // Each read is a whole slice but the last: one longer or shorter (output cut or
      // padded on its way) stops the read before its bytes reach the caller.
      misfit = slice.length !== Math.min(SLICE_BYTES, total - received);
      received += slice.length;
      if (misfit) break;
      start();
      await onProgress?.(received, total);
      yield slice;
    }
  } finally {
    // Reads still running (an early stop or a failure) are left to finish on their own.
    await Promise.allSettled(inFlight);
  }
  if (misfit || received !== total) {
    throw sandboxError(
      codes.SANDBOX_TRANSFER_FAILED,
      `Remote file read was truncated for ${remotePath}: ${received}/${total} bytes`,
    );
  }
  await onProgress?.(received, total);
}
