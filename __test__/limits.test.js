// Bounds for untrusted archives: bombs by total size, by entry count and by one huge member
// (a header declaring 50 GiB followed by a stream that never ends), each refused at its
// bound with ERR_PAPERCLIP_NATIVE_ARCHIVE_LIMIT_EXCEEDED and the destination unchanged; the
// free-space floor (set above what the file system has free, by option and by environment
// variable); unknown option names of our own functions rejected; the restore paths' limits
// validated before they connect.
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statfsSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  archiveTransferTimeoutMs,
  createTarballStreamFromDirectory,
  extractTarballToDirectory,
  packDirectoryToFile,
} from "../index.js";
import { restoreWorkspaceFromSshExecution, syncDirectoryFromSsh } from "../lib/ssh.js";
import { RawArchive, treeState } from "./helpers/tar.js";

const LIMIT = "ERR_PAPERCLIP_NATIVE_ARCHIVE_LIMIT_EXCEEDED";
const SPACE = "ERR_PAPERCLIP_NATIVE_INSUFFICIENT_SPACE";
const INVALID = "ERR_PAPERCLIP_NATIVE_INVALID_ARGUMENT";
let work;
let counter = 0;

beforeAll(() => {
  work = mkdtempSync(path.join(os.tmpdir(), "pc-limits-"));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** A destination holding a file and a directory, and its state. */
function populated() {
  const dest = path.join(work, `dest-${(counter += 1)}`);
  mkdirSync(path.join(dest, "d"), { recursive: true });
  writeFileSync(path.join(dest, "keep.txt"), "keep\n");
  writeFileSync(path.join(dest, "d", "old.txt"), "old\n");
  return { dest, before: treeState(dest) };
}

async function refused(promise) {
  const error = await promise.then(
    () => null,
    (e) => e,
  );
  expect(error).not.toBeNull();
  return error;
}

/** A tar header (512 bytes) for a regular file `name` declaring `size` bytes (octal field). */
function hugeHeader(name, size) {
  const block = Buffer.alloc(512);
  block.write(name, 0);
  block.write("0000644\0", 100);
  block.write("0000000\0", 108);
  block.write("0000000\0", 116);
  // Base-256 (GNU): 0x80, then the size big-endian in the field's other 11 bytes.
  block[124] = 0x80;
  block.writeBigUInt64BE(BigInt(size), 128);
  block.write("00000000000\0", 136);
  block.write("0", 156);
  block.write("ustar\x0000", 257);
  block.fill(" ", 148, 156);
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(`${sum.toString(8).padStart(6, "0")}\0 `, 148);
  return block;
}

describe("archive bombs", () => {
  it("by total size: refused at the member that passes maxBytes, destination unchanged", async () => {
    const archive = new RawArchive();
    for (let i = 0; i < 20; i += 1) archive.file(`big/${i}.bin`, Buffer.alloc(1 << 20, i));
    const bytes = archive.finish();
    const { dest, before } = populated();
    const error = await refused(
      extractTarballToDirectory({ source: bytes, localDir: dest, limits: { maxBytes: 5 << 20 } }),
    );
    expect(error.code).toBe(LIMIT);
    expect(error.limit).toBe("maxBytes");
    expect(error.value).toBe(5 << 20);
    expect(error.message).toContain("big/5.bin");
    expect(treeState(dest)).toEqual(before);
    // Exactly at the bound it passes.
    const out = path.join(work, `exact-${(counter += 1)}`);
    await extractTarballToDirectory({ source: bytes, localDir: out, limits: { maxBytes: 20 << 20 } });
    expect(readdirSync(path.join(out, "big"))).toHaveLength(20);
  });

  it("by entry count: refused at entry maxEntries + 1, destination unchanged", async () => {
    const archive = new RawArchive();
    for (let i = 0; i < 2000; i += 1) archive.file(`many/${i}`);
    const bytes = archive.finish();
    const { dest, before } = populated();
    const error = await refused(
      extractTarballToDirectory({ source: [bytes], localDir: dest, limits: { maxEntries: 1000 } }),
    );
    expect(error.code).toBe(LIMIT);
    expect(error.limit).toBe("maxEntries");
    expect(error.value).toBe(1000);
    expect(error.message).toContain("entry 1001");
    expect(treeState(dest)).toEqual(before);
    const file = path.join(work, "many.tar");
    writeFileSync(file, bytes);
    const fromFile = await refused(
      extractTarballToDirectory({ source: file, localDir: dest, limits: { maxEntries: 1999 } }),
    );
    expect(fromFile.code).toBe(LIMIT);
    expect(treeState(dest)).toEqual(before);
    const out = path.join(work, `exact-${(counter += 1)}`);
    expect(
      (await extractTarballToDirectory({ source: file, localDir: out, limits: { maxEntries: 2000 } })).entries,
    ).toBe(2000);
  });

  it("by one huge member: a 50 GiB header on an endless stream is refused at the header", async () => {
    for (const [limits, code, limit] of [
      [{ maxFileBytes: 1 << 20 }, LIMIT, "maxFileBytes"],
      [{ maxBytes: 1 << 30 }, LIMIT, "maxBytes"],
      // More than the file system has free: the default floor refuses it.
      [{}, SPACE, undefined],
    ]) {
      const { dest, before } = populated();
      const { bavail, bsize } = statfsSync(dest);
      const size = limit === undefined ? bavail * bsize + 10 * 2 ** 30 : 50 * 2 ** 30;
      let yielded = 0;
      const source = (async function* () {
        yield hugeHeader("huge.bin", size);
        const zeros = Buffer.alloc(1 << 20);
        for (;;) {
          yielded += zeros.length;
          yield zeros;
        }
      })();
      const error = await refused(extractTarballToDirectory({ source, localDir: dest, limits }));
      expect(error.code).toBe(code);
      if (limit) expect(error.limit).toBe(limit);
      // Refused at its header: the stream was barely read (a few queued chunks), nothing written.
      expect(yielded).toBeLessThan(64 << 20);
      expect(treeState(dest)).toEqual(before);
    }
  });
});

describe("the free-space floor", () => {
  it("refuses before the destination's file system would drop below it, by option and by environment", async () => {
    const archive = new RawArchive().file("a.txt", "a").finish();
    const { dest, before } = populated();
    const { bavail, bsize } = statfsSync(dest);
    const above = bavail * bsize + 2 ** 30;
    const error = await refused(
      extractTarballToDirectory({ source: archive, localDir: dest, limits: { minFreeBytes: above } }),
    );
    expect(error.code).toBe(SPACE);
    expect(error.message).not.toContain(dest);
    expect(treeState(dest)).toEqual(before);
    process.env.PAPERCLIP_NATIVE_MIN_FREE_BYTES = String(above);
    try {
      expect((await refused(extractTarballToDirectory({ source: archive, localDir: dest }))).code).toBe(SPACE);
      expect(treeState(dest)).toEqual(before);
      // The option wins over the environment; 0 turns the check off.
      await extractTarballToDirectory({ source: archive, localDir: dest, limits: { minFreeBytes: 0 } });
      process.env.PAPERCLIP_NATIVE_MIN_FREE_BYTES = "lots";
      expect((await refused(extractTarballToDirectory({ source: archive, localDir: dest }))).code).toBe(INVALID);
    } finally {
      delete process.env.PAPERCLIP_NATIVE_MIN_FREE_BYTES;
    }
  });
});

describe("option names", () => {
  it("our own functions reject names they do not know; limits are validated", async () => {
    const dir = path.join(work, "src");
    mkdirSync(dir, { recursive: true });
    const archive = new RawArchive().file("a", "a").finish();
    const cases = [
      () => extractTarballToDirectory({ source: archive, localDir: dir, maxBytes: 1 }),
      () => extractTarballToDirectory({ source: archive, localDir: dir, limits: { maxbytes: 1 } }),
      () => extractTarballToDirectory({ source: archive, localDir: dir, limits: { maxEntries: -1 } }),
      () => extractTarballToDirectory({ source: archive, localDir: dir, limits: { maxFileBytes: 1.5 } }),
      () => extractTarballToDirectory({ source: archive, localDir: dir, limits: 5 }),
      () => createTarballStreamFromDirectory({ localDir: dir, chunksize: 1 }),
      () => packDirectoryToFile({ localDir: dir, archivePath: path.join(work, "x.tar"), limits: {} }),
      async () => archiveTransferTimeoutMs({ archiveBytes: 1, providerTimeout: 5 }),
    ];
    for (const call of cases) {
      const error = await refused(Promise.resolve().then(call));
      expect(error.code, String(call)).toBe(INVALID);
    }
    // Known names, absent limits: accepted.
    await extractTarballToDirectory({
      source: archive,
      localDir: path.join(work, "ok"),
      limits: { maxBytes: undefined },
    });
    expect(archiveTransferTimeoutMs({ archiveBytes: 0 })).toBe(60_000);
  });

  it("the restore paths validate limits before they connect", async () => {
    const spec = { host: "127.0.0.1", port: 1, username: "nobody", remoteCwd: "/nowhere" };
    const localDir = path.join(work, "restore");
    for (const call of [
      () => syncDirectoryFromSsh({ spec, remoteDir: "/nowhere", localDir, limits: { maxFiles: 1 } }),
      () => restoreWorkspaceFromSshExecution({ spec, localDir, limits: { maxBytes: "1" } }),
    ]) {
      expect((await refused(Promise.resolve().then(call))).code).toBe(INVALID);
    }
  });
});
