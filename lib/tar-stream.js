// Our tar additions (root export only): a directory as a stream of bounded chunks, a pack
// into a file with gzip and progress, and a safe extraction from a file, a Buffer or a
// stream. The member set is `createTarballFromDirectory`'s; the work is native (see
// src/tar.rs) and never buffers more than a few chunks.
import fs from "node:fs/promises";
import {
  archiveLimits,
  checkOptionNames,
  checkReporter,
  checkSignal,
  invalidArgument,
  requireBoolean,
  requireString,
  requireStringArray,
} from "./arguments.js";
import { abortError, constants, native, runCancellable, toJsError } from "./native.js";
import { reportForeignStaging } from "./staging.js";
import { packInput, progressBridge } from "./tar-common.js";

/** Default chunk size of a tarball stream: 1 MiB. */
export const TARBALL_STREAM_DEFAULT_CHUNK_SIZE = 1024 * 1024;
const MAX_CHUNK_SIZE = constants.maxChunkSize;
/** Largest piece of a caller's chunk handed to the native extraction at once. */
const EXTRACT_PIECE = 1024 * 1024;
/** The option names of our functions (any other is rejected). */
const SOURCE_OPTIONS = ["localDir", "exclude", "followSymlinks", "gzip", "signal", "progress"];
const STREAM_OPTIONS = [...SOURCE_OPTIONS, "chunkSize", "precomputeSize", "only"];
const PACK_FILE_OPTIONS = [...SOURCE_OPTIONS, "archivePath", "precomputeSize"];
const EXTRACT_OPTIONS = [
  "source",
  "localDir",
  "preserveMtime",
  "signal",
  "progress",
  "totalBytes",
  "limits",
  "knownLinks",
  "skipUntransferable",
];

/**
 * A tar (or tar.gz) archive of a directory, produced as it is read. Iterate it once with
 * `for await`; see tar-stream.d.ts.
 */
class TarballStream {
  #native;
  #signal;
  #reporter;
  #iterated = false;
  #bytes = 0;
  #tarBytes = 0;
  #summary = null;

  constructor(nativeStream, totalBytes, signal, reporter) {
    this.#native = nativeStream;
    this.#signal = signal;
    this.#reporter = reporter;
    /** Exact size of the uncompressed tar stream when `precomputeSize` was set, else `null`. */
    this.totalBytes = totalBytes;
  }

  /** Bytes yielded so far (compressed bytes for gzip). */
  get bytesRead() {
    return this.#bytes;
  }

  /** Uncompressed tar bytes produced up to the last yielded chunk. */
  get tarBytes() {
    return this.#tarBytes;
  }

  /** `{ entries, tarBytes, bytes }` once the stream ended successfully, `null` before. */
  get summary() {
    return this.#summary;
  }

  /** Stops the pack; a pending or later read rejects with an `AbortError`. */
  cancel() {
    this.#native.cancel();
  }

  async *[Symbol.asyncIterator]() {
    if (this.#iterated) throw invalidArgument("a tarball stream can be iterated only once");
    this.#iterated = true;
    const signal = this.#signal;
    const bridge = this.#reporter ? progressBridge(this.#reporter, this.totalBytes) : null;
    const onAbort = () => this.#native.cancel();
    signal?.addEventListener("abort", onAbort, { once: true });
    let finished = false;
    try {
      if (signal?.aborted) throw abortError(signal);
      for (;;) {
        let chunk;
        try {
          chunk = await this.#native.read();
        } catch (error) {
          throw toJsError(error, signal);
        }
        if (chunk === null) break;
        this.#bytes += chunk.data.length;
        this.#tarBytes = chunk.tarBytes;
        bridge?.update(chunk.tarBytes);
        yield chunk.data;
      }
      const { entries, tarBytes } = this.#native.summary;
      this.#summary = { entries, tarBytes, bytes: this.#bytes };
      finished = true;
    } finally {
      signal?.removeEventListener("abort", onAbort);
      // An error, an abort or a consumer that stopped early (`break`): stop the thread.
      if (!finished) this.#native.cancel();
      if (bridge) await (finished ? bridge.complete(this.#tarBytes, this.#tarBytes) : bridge.fail());
    }
  }
}

/**
 * Packs `localDir` as a stream of `Buffer` chunks of `chunkSize` bytes (the last may be
 * shorter), with backpressure: the native pack runs at most a few chunks ahead of the
 * consumer. See tar-stream.d.ts.
 */
export async function createTarballStreamFromDirectory(input) {
  checkOptionNames(input, STREAM_OPTIONS, "createTarballStreamFromDirectory");
  const signal = checkSignal(input.signal);
  const reporter = checkReporter(input.progress);
  const chunkSize = input.chunkSize ?? TARBALL_STREAM_DEFAULT_CHUNK_SIZE;
  if (!Number.isInteger(chunkSize) || chunkSize < 1 || chunkSize > MAX_CHUNK_SIZE) {
    throw invalidArgument(
      `chunkSize must be an integer from 1 to ${MAX_CHUNK_SIZE}, got ${String(chunkSize)}`,
      RangeError,
    );
  }
  if (signal?.aborted) throw abortError(signal);
  const pack = await packInput(input);
  if (input.only !== undefined) pack.only = [...requireStringArray(input.only, "only")];
  const totalBytes = input.precomputeSize
    ? await runCancellable(signal, (cancelId) => native.tarPrecomputeSize(pack, cancelId))
    : null;
  if (signal?.aborted) throw abortError(signal);
  let stream;
  try {
    stream = native.tarPackStream(pack, chunkSize);
  } catch (error) {
    throw toJsError(error, signal);
  }
  return new TarballStream(stream, totalBytes, signal, reporter);
}

/**
 * Packs `localDir` into the file `archivePath` (temporary file + rename), optionally
 * gzip-compressed, with progress and cancellation. See tar-stream.d.ts.
 */
export async function packDirectoryToFile(input) {
  checkOptionNames(input, PACK_FILE_OPTIONS, "packDirectoryToFile");
  const signal = checkSignal(input.signal);
  const reporter = checkReporter(input.progress);
  const archivePath = requireString(input.archivePath, "archivePath");
  const pack = await packInput(input);
  const precompute = input.precomputeSize ?? reporter !== undefined;
  const totalBytes = precompute
    ? await runCancellable(signal, (cancelId) => native.tarPrecomputeSize(pack, cancelId))
    : null;
  const bridge = reporter ? progressBridge(reporter, totalBytes) : null;
  let summary;
  try {
    summary = await runCancellable(signal, (cancelId) =>
      native.tarPackFile(pack, archivePath, cancelId, bridge ? (bytes) => bridge.update(bytes) : undefined),
    );
  } catch (error) {
    await bridge?.fail();
    throw error;
  }
  await bridge?.complete(summary.tarBytes, summary.tarBytes);
  const { size } = await fs.stat(archivePath);
  return { entries: summary.entries, tarBytes: summary.tarBytes, bytes: size };
}

/** Splits a caller's chunk into Buffer views of at most `EXTRACT_PIECE` bytes (no copy). */
function* pieces(chunk) {
  let view;
  if (Buffer.isBuffer(chunk)) view = chunk;
  else if (chunk instanceof Uint8Array) view = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  else if (chunk instanceof ArrayBuffer) view = Buffer.from(chunk);
  else
    throw invalidArgument(
      `an archive stream must yield Buffers or Uint8Arrays, got ${chunk === null ? "null" : typeof chunk}`,
    );
  for (let offset = 0; offset < view.length; offset += EXTRACT_PIECE) {
    yield view.subarray(offset, offset + EXTRACT_PIECE);
  }
}

/** Resolves like `promise`, or rejects with an `AbortError` as soon as `signal` aborts. */
function unlessAborted(promise, signal) {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(abortError(signal));
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(abortError(signal));
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

/**
 * Lets go of a source we stop reading: a Node stream is destroyed (its iterator's
 * `return()` would wait for a pending read that may never come), anything else gets its
 * iterator's `return()`.
 */
function release(source, iterator) {
  if (typeof source.destroy === "function") {
    source.destroy();
    return;
  }
  Promise.resolve()
    .then(() => iterator.return?.())
    .catch(() => undefined);
}

/**
 * Feeds an (async) iterable of chunks into a native extract sink (`extract`: the native
 * extract input) and returns its result.
 */
async function extractFromChunks(source, extract, signal, bridge) {
  const iterator =
    typeof source[Symbol.asyncIterator] === "function" ? source[Symbol.asyncIterator]() : source[Symbol.iterator]();
  let sink;
  try {
    sink = native.tarExtractStream(extract);
  } catch (error) {
    throw toJsError(error, signal);
  }
  const onAbort = () => sink.abort();
  signal?.addEventListener("abort", onAbort, { once: true });
  let written = 0;
  let sourceDone = false;
  try {
    if (signal?.aborted) sink.abort();
    for (;;) {
      const step = await unlessAborted(Promise.resolve(iterator.next()), signal);
      if (step.done) {
        sourceDone = true;
        break;
      }
      for (const piece of pieces(step.value)) {
        await sink.write(piece);
        written += piece.length;
        bridge?.update(written);
      }
    }
    return await sink.finish();
  } catch (error) {
    // Stop the extraction (it ends at its next read) and wait for it, so nothing is
    // written after this call settled; then release the source (a Readable is destroyed).
    sink.abort();
    await sink.finish().catch(() => undefined);
    if (!sourceDone) release(source, iterator);
    throw signal?.aborted ? abortError(signal) : toJsError(error, signal);
  } finally {
    signal?.removeEventListener("abort", onAbort);
  }
}

/**
 * Extracts a tar or tar.gz archive (a file path, a Buffer, or an iterable / async iterable
 * of Buffers such as a Node `Readable`) into `localDir`, refusing every member that would
 * land or point outside it. See tar-stream.d.ts.
 */
export async function extractTarballToDirectory(input) {
  checkOptionNames(input, EXTRACT_OPTIONS, "extractTarballToDirectory");
  const limits = archiveLimits(input.limits);
  const signal = checkSignal(input.signal);
  const reporter = checkReporter(input.progress);
  const extract = {
    dest: requireString(input.localDir, "localDir"),
    preserveMtime: input.preserveMtime !== false,
    limits,
  };
  if (input.knownLinks !== undefined) extract.knownLinks = requireString(input.knownLinks, "knownLinks");
  if (input.skipUntransferable !== undefined)
    extract.skipUntransferable = requireBoolean(input.skipUntransferable, "skipUntransferable");
  const { source } = input;
  if (signal?.aborted) throw abortError(signal);
  let summary;
  let bridge = null;
  try {
    if (typeof source === "string") {
      const total = reporter
        ? await fs.stat(source).then(
            (s) => s.size,
            () => null,
          )
        : null;
      bridge = reporter ? progressBridge(reporter, total) : null;
      summary = await runCancellable(signal, (cancelId) =>
        native.tarExtractFile(extract, source, cancelId, bridge ? (bytes) => bridge.update(bytes) : undefined),
      );
    } else if (source instanceof Uint8Array || source instanceof ArrayBuffer) {
      bridge = reporter ? progressBridge(reporter, source.byteLength) : null;
      summary = await extractFromChunks([source], extract, signal, bridge);
    } else if (
      source != null &&
      (typeof source[Symbol.asyncIterator] === "function" || typeof source[Symbol.iterator] === "function")
    ) {
      const total = Number.isFinite(input.totalBytes) && input.totalBytes > 0 ? input.totalBytes : null;
      bridge = reporter ? progressBridge(reporter, total) : null;
      summary = await extractFromChunks(source, extract, signal, bridge);
    } else {
      throw invalidArgument("source must be a file path, a Buffer or Uint8Array, or an (async) iterable of them");
    }
  } catch (error) {
    await bridge?.fail();
    throw error;
  }
  await bridge?.complete(summary.bytesRead, summary.bytesRead);
  reportForeignStaging(extract.dest, summary.foreignStaging);
  return { entries: summary.entries, bytesRead: summary.bytesRead };
}
