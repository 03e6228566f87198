// The streaming pack, packDirectoryToFile and the drop-in's cancellation: chunking,
// precomputed size, gzip round trip, backpressure, abort, early stop and progress lines.
import {
  closeSync,
  existsSync,
  ftruncateSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { setTimeout as sleep } from "node:timers/promises";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { gunzipSync } from "node:zlib";
import { afterAll, describe, expect, it } from "vitest";
import {
  createRuntimeProgressReporter,
  createTarballFromDirectory,
  createTarballStreamFromDirectory,
  extractTarballToDirectory,
  packDirectoryToFile,
} from "@paperclipai/adapter-utils-native";
import { createRandom, runSeed } from "./helpers/random.js";
import { writeRandomTree } from "./helpers/trees.js";
import { listMembers, removeEscapingSymlinks, treeState } from "./helpers/tar.js";
import { native, toJsError } from "../lib/native.js";

const SEED = runSeed();
const MIB = 1024 * 1024;
const work = mkdtempSync(path.join(os.tmpdir(), "pc-native-tarstream-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

async function collect(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

/** Bytes this process has read through read(2) and friends so far (Linux). */
function bytesReadByProcess() {
  const line = readFileSync("/proc/self/io", "utf8")
    .split("\n")
    .find((l) => l.startsWith("rchar:"));
  return Number(line.split(/\s+/)[1]);
}

/** A directory with one file of `size` bytes of non-repeating data. */
function bigFileTree(name, size) {
  const root = path.join(work, name);
  mkdirSync(root, { recursive: true });
  const fd = openSync(path.join(root, "big.bin"), "w");
  const block = Buffer.alloc(MIB);
  for (let done = 0; done < size; done += block.length) {
    block.writeUInt32LE(done / MIB, 0);
    writeSync(fd, block, 0, Math.min(block.length, size - done));
  }
  closeSync(fd);
  return root;
}

function progressLines() {
  const lines = [];
  const reporter = createRuntimeProgressReporter({
    sink: (line) => {
      lines.push(line);
    },
    phase: "Syncing",
    label: "workspace",
    direction: "to",
    target: "ssh",
    now: () => 0, // a frozen clock: only the first report and 10% steps emit
  });
  return { lines, reporter };
}

describe(`streaming pack (DIFF_SEED=${SEED})`, () => {
  it("yields chunks of exactly chunkSize bytes (the last shorter) that form the archive packDirectoryToFile writes", async () => {
    const rng = createRandom(SEED);
    const root = path.join(work, "chunks");
    await writeRandomTree(rng, root, { special: false, maxEntries: 12, maxFileBytes: 128 * 1024 });
    for (const chunkSize of [1, 511, 512, 4096, 65_537, MIB]) {
      if (chunkSize === 1) {
        // A chunk per byte: only the first few hundred, then stop early.
        const stream = await createTarballStreamFromDirectory({ localDir: root, chunkSize });
        let n = 0;
        for await (const chunk of stream) {
          expect(chunk.length).toBe(1);
          if (++n === 300) break;
        }
        continue;
      }
      const stream = await createTarballStreamFromDirectory({ localDir: root, chunkSize, precomputeSize: true });
      const chunks = await collect(stream);
      const archive = Buffer.concat(chunks);
      chunks.slice(0, -1).forEach((chunk) => expect(chunk.length).toBe(chunkSize));
      expect(chunks.at(-1).length).toBeGreaterThan(0);
      expect(chunks.at(-1).length).toBeLessThanOrEqual(chunkSize);
      expect(stream.totalBytes).toBe(archive.length);
      expect(stream.summary).toEqual({ entries: expect.any(Number), tarBytes: archive.length, bytes: archive.length });
      expect(stream.bytesRead).toBe(archive.length);
      const file = path.join(work, `chunks-${chunkSize}.tar`);
      const summary = await packDirectoryToFile({ localDir: root, archivePath: file });
      expect(readFileSync(file).equals(archive), `chunkSize ${chunkSize}`).toBe(true);
      expect(summary).toEqual({ entries: stream.summary.entries, tarBytes: archive.length, bytes: archive.length });
    }
  });

  it("with `only`, writes just the named members (descending to them) and knows that archive's exact size", async () => {
    const root = path.join(work, "only");
    mkdirSync(path.join(root, "a", "b"), { recursive: true });
    mkdirSync(path.join(root, "x", "y"), { recursive: true });
    writeFileSync(path.join(root, "a", "b", "c.txt"), "c".repeat(700));
    writeFileSync(path.join(root, "a", "d.txt"), "d");
    writeFileSync(path.join(root, "e.txt"), "e");
    writeFileSync(path.join(root, "x", "y", "z.txt"), "z");
    const only = ["a/b/c.txt", "x", "missing/name"];
    const stream = await createTarballStreamFromDirectory({
      localDir: root,
      only,
      precomputeSize: true,
      chunkSize: 512,
    });
    const archive = Buffer.concat(await collect(stream));
    expect(listMembers(archive)).toEqual(["a/b/c.txt", "x/"]);
    expect(stream.totalBytes).toBe(archive.length);
    expect(stream.summary.entries).toBe(2);
    // Nothing named: an empty archive (the end-of-archive blocks alone).
    const none = await createTarballStreamFromDirectory({ localDir: root, only: [], precomputeSize: true });
    const empty = Buffer.concat(await collect(none));
    expect(none.totalBytes).toBe(empty.length);
    expect(listMembers(empty)).toEqual([]);
    await expect(createTarballStreamFromDirectory({ localDir: root, only: "a" })).rejects.toMatchObject({
      code: "ERR_PAPERCLIP_NATIVE_INVALID_ARGUMENT",
    });
    // A pack into a file archives every member: a selection is refused there, not ignored.
    const refused = await native
      .tarPackFile({ root, exclude: [], followSymlinks: false, only: ["e.txt"] }, path.join(work, "only.tar"))
      .then(
        () => null,
        (error) => toJsError(error),
      );
    expect(refused).toMatchObject({ code: "ERR_PAPERCLIP_NATIVE_INVALID_ARGUMENT" });
    expect(existsSync(path.join(work, "only.tar"))).toBe(false);
  });

  it("round-trips gzip (true and levels 0-9) through gunzip, GNU tar and our extract", async () => {
    const rng = createRandom(SEED + 1);
    const root = path.join(work, "gzip");
    await writeRandomTree(rng, root, { special: false, maxEntries: 12 });
    removeEscapingSymlinks(root); // a safe extraction refuses them (tar-extract.test.js)
    const plain = Buffer.concat(await collect(await createTarballStreamFromDirectory({ localDir: root })));
    const expected = treeState(root);
    for (const gzip of [true, 0, 1, 9]) {
      const stream = await createTarballStreamFromDirectory({
        localDir: root,
        gzip,
        chunkSize: 4096,
        precomputeSize: true,
      });
      const compressed = Buffer.concat(await collect(stream));
      expect(compressed.subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));
      expect(gunzipSync(compressed).equals(plain), `gzip ${gzip}`).toBe(true);
      expect(stream.totalBytes).toBe(plain.length); // the uncompressed size
      expect(stream.summary).toMatchObject({ tarBytes: plain.length, bytes: compressed.length });
      expect(listMembers(gunzipSync(compressed))).toEqual(listMembers(plain));
      const dest = path.join(work, `gzip-out-${gzip}`);
      const result = await extractTarballToDirectory({ source: Readable.from([compressed]), localDir: dest });
      expect(result.bytesRead).toBe(compressed.length);
      const { ["._apple"]: _ignored, ...withoutAppleDouble } = expected;
      expect(treeState(dest)).toEqual(
        Object.fromEntries(
          Object.entries(withoutAppleDouble).filter(([rel]) => !rel.split("/").some((part) => part.startsWith("._"))),
        ),
      );
    }
    await expect(createTarballStreamFromDirectory({ localDir: root, gzip: 10 })).rejects.toMatchObject({
      code: "ERR_PAPERCLIP_NATIVE_INVALID_ARGUMENT",
    });
    await expect(createTarballStreamFromDirectory({ localDir: root, chunkSize: 0 })).rejects.toMatchObject({
      code: "ERR_PAPERCLIP_NATIVE_INVALID_ARGUMENT",
    });
  });

  it("applies backpressure: a consumer that stops reading stops the pack a few chunks ahead", async () => {
    const root = bigFileTree("backpressure", 96 * MIB);
    const chunkSize = 256 * 1024;
    const stream = await createTarballStreamFromDirectory({ localDir: root, chunkSize });
    const iterator = stream[Symbol.asyncIterator]();
    const before = bytesReadByProcess();
    await iterator.next();
    await sleep(400);
    const whileStalled = bytesReadByProcess() - before;
    await sleep(400);
    const stillStalled = bytesReadByProcess() - before;
    // One chunk taken, two queued, one being filled, plus the packer's 64 KiB buffers.
    expect(whileStalled).toBeLessThan(4 * MIB);
    expect(stillStalled - whileStalled).toBeLessThan(256 * 1024);
    let total = chunkSize;
    for (let step = await iterator.next(); !step.done; step = await iterator.next()) total += step.value.length;
    expect(bytesReadByProcess() - before).toBeGreaterThan(96 * MIB); // the probe does see the reads
    expect(total).toBe(stream.summary.tarBytes);
  });

  it("aborts mid-stream with an AbortError, reports the failure, and stops the pack", async () => {
    const root = bigFileTree("abort", 32 * MIB);
    const controller = new AbortController();
    const { lines, reporter } = progressLines();
    const stream = await createTarballStreamFromDirectory({
      localDir: root,
      chunkSize: MIB,
      signal: controller.signal,
      progress: reporter,
      precomputeSize: true,
    });
    let chunks = 0;
    const error = await (async () => {
      for await (const _chunk of stream) {
        if (++chunks === 3) controller.abort(new Error("stop"));
      }
    })().catch((e) => e);
    expect(error).toMatchObject({ name: "AbortError", code: "ABORT_ERR" });
    expect(error.cause?.message).toBe("stop");
    expect(chunks).toBe(3);
    expect(stream.summary).toBeNull();
    expect(lines.at(-1)).toMatch(/^\[paperclip\] Syncing workspace to ssh: failed at \d+% \(\d+\.\d\/32\.0 MB\)\n$/);
    const after = bytesReadByProcess();
    await sleep(200);
    expect(bytesReadByProcess() - after).toBeLessThan(MIB);
    // An already aborted signal rejects the call itself.
    await expect(
      createTarballStreamFromDirectory({ localDir: root, signal: AbortSignal.abort() }),
    ).rejects.toMatchObject({ name: "AbortError" });
  });

  it("aborts a size precomputation mid-walk with an AbortError", async () => {
    // 2 000 empty files, and 500 exclude patterns that match none of them but make the walk
    // test each name against each (some 100 µs a name): a walk of a few hundred ms.
    const root = path.join(work, "precompute-abort");
    for (let d = 0; d < 20; d += 1) {
      const dir = path.join(root, `d${String(d).padStart(2, "0")}`);
      mkdirSync(dir, { recursive: true });
      for (let f = 0; f < 100; f += 1) writeFileSync(path.join(dir, `f${f}`), "");
    }
    const exclude = Array.from({ length: 500 }, (_, i) => `*[!a-z]x${i}*y`);
    let start = performance.now();
    const full = await createTarballStreamFromDirectory({ localDir: root, exclude, precomputeSize: true });
    const fullMs = performance.now() - start;
    expect(full.totalBytes).toBe((20 + 2000) * 512 + 1024);
    full.cancel();
    expect(fullMs).toBeGreaterThan(50); // else the walk is too short for this test to tell

    // Aborted a fifth of the way into the walk (past the JS preparations).
    const delay = fullMs / 5;
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error("stop")), delay);
    start = performance.now();
    const error = await createTarballStreamFromDirectory({
      localDir: root,
      exclude,
      precomputeSize: true,
      signal: controller.signal,
    }).catch((e) => e);
    const abortedMs = performance.now() - start;
    expect(error).toMatchObject({ name: "AbortError", code: "ABORT_ERR" });
    expect(error.cause?.message).toBe("stop");
    // The walk stopped at the abort instead of running to its end.
    expect(abortedMs).toBeLessThan(fullMs * 0.6);

    // The native walk itself rejects once its token is aborted (here before it starts).
    const token = native.cancelTokenCreate();
    native.cancelTokenAbort(token);
    try {
      const pack = { root, exclude: [], followSymlinks: false };
      await expect(
        native.tarPrecomputeSize(pack, token).catch((e) => {
          throw toJsError(e);
        }),
      ).rejects.toMatchObject({ name: "AbortError", code: "ABORT_ERR" });
    } finally {
      native.cancelTokenRelease(token);
    }
    // packDirectoryToFile's precomputation (with a reporter) is cancelled the same way.
    const out = path.join(work, "precompute-abort.tar");
    const timed = new AbortController();
    setTimeout(() => timed.abort(), delay);
    start = performance.now();
    await expect(
      packDirectoryToFile({
        localDir: root,
        exclude,
        archivePath: out,
        signal: timed.signal,
        progress: progressLines().reporter,
      }),
    ).rejects.toMatchObject({ name: "AbortError", code: "ABORT_ERR" });
    expect(performance.now() - start).toBeLessThan(fullMs * 0.6);
    expect(existsSync(out)).toBe(false);
  });

  it("stops the pack when the consumer breaks early, and refuses a second iteration", async () => {
    const root = bigFileTree("break", 16 * MIB);
    const { lines, reporter } = progressLines();
    const stream = await createTarballStreamFromDirectory({ localDir: root, chunkSize: MIB, progress: reporter });
    for await (const _chunk of stream) break;
    expect(stream.summary).toBeNull();
    expect(lines.at(-1)).toMatch(/failed after 1\.0 MB\n$/);
    await expect(collect(stream)).rejects.toMatchObject({ code: "ERR_PAPERCLIP_NATIVE_INVALID_ARGUMENT" });
  });

  it("reports monotonic, throttled progress ending in one 100% line", async () => {
    const root = bigFileTree("progress", 20 * MIB);
    const { lines, reporter } = progressLines();
    const stream = await createTarballStreamFromDirectory({
      localDir: root,
      chunkSize: 256 * 1024,
      progress: reporter,
      precomputeSize: true,
    });
    await collect(stream);
    const percents = lines.map((line) => Number(/: (\d+)% \(/.exec(line)?.[1]));
    expect(percents.every(Number.isFinite)).toBe(true);
    expect(percents).toEqual([...percents].sort((a, b) => a - b));
    expect(percents.filter((p) => p === 100)).toHaveLength(1);
    expect(lines.at(-1)).toBe("[paperclip] Syncing workspace to ssh: 100% (20.0/20.0 MB)\n");
    expect(lines.length).toBeLessThanOrEqual(12);
  });

  it("works with stream.pipeline and Readable.from", async () => {
    const rng = createRandom(SEED + 2);
    const root = path.join(work, "pipeline");
    await writeRandomTree(rng, root, { special: false });
    const out = path.join(work, "pipeline.tar");
    const { createWriteStream } = await import("node:fs");
    await pipeline(Readable.from(await createTarballStreamFromDirectory({ localDir: root })), createWriteStream(out));
    const direct = path.join(work, "pipeline-direct.tar");
    await createTarballFromDirectory({ localDir: root, archivePath: direct });
    expect(readFileSync(out).equals(readFileSync(direct))).toBe(true);
  });
});

describe("packDirectoryToFile and createTarballFromDirectory cancellation", () => {
  it("leaves neither the archive nor a temporary file behind when aborted", async () => {
    const root = path.join(work, "abort-file");
    mkdirSync(root);
    const fd = openSync(path.join(root, "sparse.bin"), "w");
    ftruncateSync(fd, 1024 * MIB);
    closeSync(fd);
    const out = path.join(work, "abort-out");
    mkdirSync(out);
    // packDirectoryToFile: abort on the first progress report (surely mid-pack).
    const controller = new AbortController();
    const abortOnFirstReport = {
      report: async () => controller.abort(),
      complete: async () => {},
      fail: async () => {},
    };
    await expect(
      packDirectoryToFile({
        localDir: root,
        archivePath: path.join(out, "a.tar.gz"),
        gzip: 1,
        signal: controller.signal,
        progress: abortOnFirstReport,
      }),
    ).rejects.toMatchObject({ name: "AbortError", code: "ABORT_ERR" });
    expect(readdirSync(out)).toEqual([]);
    // The drop-in, aborted by a timer while it writes 1 GiB.
    const timed = new AbortController();
    setTimeout(() => timed.abort(), 5);
    await expect(
      createTarballFromDirectory({ localDir: root, archivePath: path.join(out, "b.tar"), signal: timed.signal }),
    ).rejects.toMatchObject({ name: "AbortError", code: "ABORT_ERR" });
    expect(readdirSync(out)).toEqual([]);
  });

  it("reports progress for packDirectoryToFile and keeps an existing archive on failure", async () => {
    const root = bigFileTree("file-progress", 8 * MIB);
    const { lines, reporter } = progressLines();
    const archivePath = path.join(work, "file-progress.tar");
    writeFileSync(archivePath, "previous");
    const summary = await packDirectoryToFile({ localDir: root, archivePath, progress: reporter });
    expect(summary.tarBytes).toBe(readFileSync(archivePath).length);
    expect(lines.at(-1)).toBe("[paperclip] Syncing workspace to ssh: 100% (8.0/8.0 MB)\n");
    writeFileSync(archivePath, "previous");
    const failing = await packDirectoryToFile({ localDir: path.join(work, "nope"), archivePath }).catch((e) => e);
    expect(failing).toMatchObject({ code: "ENOENT" });
    expect(readFileSync(archivePath, "utf8")).toBe("previous");
    expect(existsSync(`${archivePath}.tmp`)).toBe(false);
  });
});

describe("flat memory", () => {
  // What the pack holds, not when V8 collects: the consumed chunks are dead ArrayBuffers that
  // V8 frees at its own pace (it lets about 64 MB of them pile up, and on Node 24 and 26 the
  // allocator keeps that high-water mark resident), so the consumer runs a full collection
  // every 8 chunks and RSS is read after it. What stays is the pack's own buffering.
  it("streams a 2 GB tree to 1 MiB chunks with RSS growth under 64 MB, with a slow consumer", async () => {
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc");
    const root = path.join(work, "two-gb");
    mkdirSync(root);
    // Sparse-ish: 16 files of 128 MiB, mostly holes with a few written blocks each.
    for (let i = 0; i < 16; i += 1) {
      const fd = openSync(path.join(root, `f${String(i).padStart(2, "0")}.bin`), "w");
      ftruncateSync(fd, 128 * MIB);
      for (let k = 0; k < 8; k += 1) writeSync(fd, Buffer.alloc(4096, i + k + 1), 0, 4096, k * 16 * MIB);
      closeSync(fd);
    }
    try {
      const stream = await createTarballStreamFromDirectory({ localDir: root, chunkSize: MIB, precomputeSize: true });
      expect(stream.totalBytes).toBeGreaterThan(2 * 1024 * MIB);
      gc();
      const baseline = process.memoryUsage().rss;
      let peak = baseline;
      let total = 0;
      let n = 0;
      for await (const chunk of stream) {
        total += chunk.length;
        n += 1;
        if (n % 8 === 0) {
          await sleep(1); // a slow consumer: the pack waits for it
          gc();
          peak = Math.max(peak, process.memoryUsage().rss);
        }
      }
      expect(total).toBe(stream.totalBytes);
      const growth = (peak - baseline) / MIB;
      console.log(
        `flat memory: ${(total / MIB).toFixed(0)} MiB streamed in ${n} chunks, RSS growth ${growth.toFixed(1)} MB (Node ${process.versions.node})`,
      );
      expect(growth).toBeLessThan(64);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  }, 180_000);
});
