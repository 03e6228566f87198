// Safe extraction: hostile archives are refused with coded errors from every kind of
// source, nothing lands outside the destination, and streams get backpressure and abort.
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import { gzipSync } from "node:zlib";
import { afterAll, describe, expect, it } from "vitest";
import { createRuntimeProgressReporter, extractTarballToDirectory } from "@paperclipai/adapter-utils-native";
import { RawArchive, treeState } from "./helpers/tar.js";

const work = mkdtempSync(path.join(os.tmpdir(), "pc-native-extract-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const UNSAFE = "ERR_PAPERCLIP_NATIVE_UNSAFE_ARCHIVE_ENTRY";
const BAD = "ERR_PAPERCLIP_NATIVE_BAD_ARCHIVE";

let caseNumber = 0;
/** A fresh case directory: `dest` to extract into, inside `box` so `../x` stays observable. */
function freshCase() {
  const box = path.join(work, `case-${caseNumber++}`);
  const dest = path.join(box, "dest");
  mkdirSync(dest, { recursive: true });
  return { box, dest };
}

/** Every way a caller can hand us the same archive. */
const SOURCES = {
  buffer: (archive) => archive,
  file: (archive) => {
    const file = path.join(work, `archive-${caseNumber++}.tar`);
    writeFileSync(file, archive);
    return file;
  },
  readable: (archive) => Readable.from(chunked(archive, 700)),
  gzipStream: (archive) => Readable.from(chunked(gzipSync(archive), 300)),
};

function chunked(buffer, size) {
  const out = [];
  for (let offset = 0; offset < buffer.length; offset += size) out.push(buffer.subarray(offset, offset + size));
  return out;
}

/** Names of everything under `dir`, recursively. */
function listing(dir) {
  const out = [];
  const visit = (d, prefix) => {
    for (const name of readdirSync(d).sort()) {
      const rel = prefix ? `${prefix}/${name}` : name;
      out.push(rel);
      if (lstatSync(path.join(d, name)).isDirectory()) visit(path.join(d, name), rel);
    }
  };
  visit(dir, "");
  return out;
}

describe("safe extraction refuses hostile archives", () => {
  const outsideName = `pc-native-escape-${process.pid}`;
  const hostile = {
    "a parent-directory member": {
      archive: () => new RawArchive().file("ok.txt", "fine").file("../escaped.txt", "evil").finish(),
      code: UNSAFE,
      outside: (box) => [path.join(box, "escaped.txt")],
    },
    "a nested parent-directory member": {
      archive: () => new RawArchive().dir("a").file("a/../../escaped.txt", "evil").finish(),
      code: UNSAFE,
      outside: (box) => [path.join(box, "escaped.txt")],
    },
    "an absolute member": {
      archive: () => new RawArchive().file(`/tmp/${outsideName}-abs`, "evil").finish(),
      code: UNSAFE,
      outside: () => [`/tmp/${outsideName}-abs`],
    },
    "a symlink to / followed by a file under it": {
      archive: () => new RawArchive().symlink("root", "/").file(`root/tmp/${outsideName}-link`, "evil").finish(),
      code: UNSAFE,
      outside: () => [`/tmp/${outsideName}-link`],
    },
    "a symlink climbing out followed by a file under it": {
      archive: () => new RawArchive().symlink("up", "..").file("up/escaped.txt", "evil").finish(),
      code: UNSAFE,
      outside: (box) => [path.join(box, "escaped.txt")],
    },
    "a hard link to /etc/passwd": {
      archive: () => new RawArchive().hardLink("passwd", "/etc/passwd").finish(),
      code: UNSAFE,
      outside: () => [],
    },
    "a hard link climbing out": {
      archive: () => new RawArchive().hardLink("sibling", "../outside.txt").finish(),
      code: UNSAFE,
      outside: () => [],
    },
    "a truncated archive": {
      archive: () => new RawArchive().file("big.bin", Buffer.alloc(5000, 1)).finish().subarray(0, 2048),
      code: BAD,
      outside: () => [],
    },
    "an archive without its end blocks": {
      archive: () => new RawArchive().file("x.txt", "x").finish({ end: false }),
      code: BAD,
      outside: () => [],
    },
    garbage: {
      archive: () => Buffer.from("this is not a tar archive at all, just some text".repeat(20)),
      code: BAD,
      outside: () => [],
    },
  };

  for (const [label, { archive, code, outside }] of Object.entries(hostile)) {
    for (const [kind, toSource] of Object.entries(SOURCES)) {
      it(`${label} (${kind})`, async () => {
        const { box, dest } = freshCase();
        writeFileSync(path.join(box, "outside.txt"), "outside");
        const error = await extractTarballToDirectory({ source: toSource(archive()), localDir: dest }).catch((e) => e);
        expect(error).toBeInstanceOf(Error);
        expect(error.code).toBe(code);
        if (code === UNSAFE) expect(error.message).toMatch(/^refusing archive member '/);
        for (const file of outside(box)) expect(existsSync(file), file).toBe(false);
        expect(readdirSync(box).sort()).toEqual(["dest", "outside.txt"]);
        expect(readFileSync(path.join(box, "outside.txt"), "utf8")).toBe("outside");
        expect(readFileSync("/etc/passwd", "utf8").length).toBeGreaterThan(0);
        expect(existsSync(path.join(dest, "passwd"))).toBe(false);
      });
    }
  }

  it("does not write through a symlink that is already in the destination", async () => {
    const { box, dest } = freshCase();
    mkdirSync(path.join(box, "target"));
    const { symlinkSync } = await import("node:fs");
    symlinkSync(path.join(box, "target"), path.join(dest, "link"));
    const error = await extractTarballToDirectory({
      source: new RawArchive().file("link/x.txt", "evil").finish(),
      localDir: dest,
    }).catch((e) => e);
    expect(error.code).toBe(UNSAFE);
    expect(readdirSync(path.join(box, "target"))).toEqual([]);
  });
});

describe("extraction from streams", () => {
  it("extracts the same tree from a Buffer, a file, a Readable, a gzip stream and a sync iterable, with progress", async () => {
    const archive = new RawArchive()
      .dir("d")
      .file("d/a.txt", "alpha")
      .file("b.bin", Buffer.alloc(300_000, 7), 0o600)
      .symlink("d/rel", "a.txt")
      .hardLink("d/hard", "b.bin")
      .finish();
    const trees = [];
    for (const [kind, toSource] of [
      ...Object.entries(SOURCES),
      ["iterable", (a) => chunked(a, 4096)],
      ["uint8", (a) => new Uint8Array(a)],
    ]) {
      const { dest } = freshCase();
      const lines = [];
      const progress = createRuntimeProgressReporter({
        sink: (line) => {
          lines.push(line);
        },
        phase: "Restoring",
        direction: "from",
        target: "sandbox",
        now: () => 0,
      });
      const result = await extractTarballToDirectory({ source: toSource(archive), localDir: dest, progress });
      expect(result.entries, kind).toBe(5);
      expect(readFileSync(path.join(dest, "d", "hard")).equals(Buffer.alloc(300_000, 7))).toBe(true);
      expect(lstatSync(path.join(dest, "b.bin")).mode & 0o777).toBe(0o600);
      expect(lstatSync(path.join(dest, "d", "hard")).ino).toBe(lstatSync(path.join(dest, "b.bin")).ino);
      expect(lines.at(-1), kind).toMatch(/^\[paperclip\] Restoring from environment: 100% \(\d+\.\d\/\d+\.\d MB\)\n$/);
      trees.push(listing(dest));
    }
    for (const tree of trees) expect(tree).toEqual(["b.bin", "d", "d/a.txt", "d/hard", "d/rel"]);
  });

  it("reads a stream with backpressure: a fast source waits for the extraction", async () => {
    const payload = Buffer.alloc(64 * 1024 * 1024, 3);
    const archive = new RawArchive().file("big.bin", payload).finish();
    const { dest } = freshCase();
    let pulled = 0;
    let maxAhead = 0;
    let extracted = 0;
    const source = (async function* () {
      for (const chunk of chunked(archive, 256 * 1024)) {
        pulled += chunk.length;
        yield chunk;
      }
    })();
    const watcher = setInterval(() => {
      try {
        // Members are written into the staging directory's tree inside dest, then moved in.
        const staging = readdirSync(dest).find((name) => name.startsWith(".paperclip-extract-"));
        const staged = staging
          ? lstatSync(path.join(dest, staging, "tree", "big.bin"), { throwIfNoEntry: false })
          : undefined;
        // Once moved in, the file is in dest (the staging directory goes a moment later).
        extracted = (staged ?? lstatSync(path.join(dest, "big.bin"))).size;
      } catch {
        extracted = 0;
      }
      maxAhead = Math.max(maxAhead, pulled - extracted);
    }, 1);
    try {
      await extractTarballToDirectory({ source, localDir: dest });
    } finally {
      clearInterval(watcher);
    }
    expect(readFileSync(path.join(dest, "big.bin")).equals(payload)).toBe(true);
    // A few queued 256 KiB chunks plus the extractor's buffers, never the whole 64 MiB.
    expect(maxAhead).toBeLessThan(16 * 1024 * 1024);
  });

  it("aborts a stalled stream with an AbortError and closes the source", async () => {
    const archive = new RawArchive().file("first.txt", "one").file("second.txt", "two").finish();
    const { dest } = freshCase();
    const stall = new AbortController();
    const source = (async function* () {
      yield archive.subarray(0, 1024);
      await sleep(60_000, undefined, { signal: stall.signal }).catch(() => undefined); // a source that stalls
      yield archive.subarray(1024);
    })();
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    const started = Date.now();
    const error = await extractTarballToDirectory({ source, localDir: dest, signal: controller.signal }).catch(
      (e) => e,
    );
    expect(error).toMatchObject({ name: "AbortError", code: "ABORT_ERR" });
    expect(Date.now() - started).toBeLessThan(5_000);
    // The first member was extracted (staged) before the stall: none of it reached dest.
    expect(readdirSync(dest)).toEqual([]);
    await expect(
      extractTarballToDirectory({ source: archive, localDir: dest, signal: AbortSignal.abort() }),
    ).rejects.toMatchObject({ name: "AbortError" });
    stall.abort(); // let the generator finish (its return() waits for the pending step)
    // A stalled Readable source is destroyed.
    const readable = new Readable({ read() {} });
    readable.push(archive.subarray(0, 512));
    const abortReadable = new AbortController();
    setTimeout(() => abortReadable.abort(), 50);
    await expect(
      extractTarballToDirectory({ source: readable, localDir: freshCase().dest, signal: abortReadable.signal }),
    ).rejects.toMatchObject({ name: "AbortError" });
    await sleep(10);
    expect(readable.destroyed).toBe(true);
  });

  it("surfaces the source's own error and stops the extraction", async () => {
    const { dest } = freshCase();
    const archive = new RawArchive().file("a.txt", "a").finish();
    const source = (async function* () {
      yield archive.subarray(0, 512);
      throw Object.assign(new Error("network dropped"), { code: "ECONNRESET" });
    })();
    await expect(extractTarballToDirectory({ source, localDir: dest })).rejects.toMatchObject({
      message: "network dropped",
      code: "ECONNRESET",
    });
  });

  it("refuses an unsafe entry mid-stream and destroys the Readable", async () => {
    const { box, dest } = freshCase();
    const archive = new RawArchive()
      .file("ok.txt", "fine")
      .file("../escaped.txt", "evil")
      .file("after.txt", Buffer.alloc(1 << 20))
      .finish();
    const readable = Readable.from(chunked(archive, 512));
    await expect(extractTarballToDirectory({ source: readable, localDir: dest })).rejects.toMatchObject({
      code: UNSAFE,
    });
    await sleep(10);
    expect(readable.destroyed).toBe(true);
    expect(existsSync(path.join(box, "escaped.txt"))).toBe(false);
    // Nothing of the refused archive stays, not even the member before the refused one.
    expect(readdirSync(dest)).toEqual([]);
  });

  it("leaves a populated directory exactly as it was when an extraction fails or is aborted", async () => {
    const { dest } = freshCase();
    mkdirSync(path.join(dest, "d"));
    writeFileSync(path.join(dest, "d", "old.txt"), "old");
    writeFileSync(path.join(dest, "keep.txt"), "keep");
    const before = treeState(dest);
    const members = () =>
      new RawArchive()
        .file("keep.txt", "overwritten")
        .dir("d/", 0o700)
        .file("d/new.txt", "new")
        .file("big.bin", Buffer.alloc(1 << 20, 1));
    const truncated = members().finish().subarray(0, 4096);
    await expect(extractTarballToDirectory({ source: truncated, localDir: dest })).rejects.toMatchObject({ code: BAD });
    expect(treeState(dest)).toEqual(before);
    await expect(
      extractTarballToDirectory({ source: members().symlink("evil", "/etc").finish(), localDir: dest }),
    ).rejects.toMatchObject({ code: UNSAFE });
    expect(treeState(dest)).toEqual(before);
    const controller = new AbortController();
    const source = (async function* () {
      yield* chunked(members().finish(), 64 * 1024).slice(0, 4);
      controller.abort();
      await sleep(50);
    })();
    await expect(
      extractTarballToDirectory({ source, localDir: dest, signal: controller.signal }),
    ).rejects.toMatchObject({ name: "AbortError" });
    expect(treeState(dest)).toEqual(before);
    // And the same archive, complete, is applied as a whole.
    await extractTarballToDirectory({ source: members().finish(), localDir: dest });
    expect(readFileSync(path.join(dest, "keep.txt"), "utf8")).toBe("overwritten");
    expect(readdirSync(path.join(dest, "d")).sort()).toEqual(["new.txt", "old.txt"]);
  });

  it("rejects bad arguments with coded errors", async () => {
    const { dest } = freshCase();
    await expect(extractTarballToDirectory({ source: 42, localDir: dest })).rejects.toMatchObject({
      code: "ERR_PAPERCLIP_NATIVE_INVALID_ARGUMENT",
    });
    await expect(extractTarballToDirectory({ source: ["text"], localDir: dest })).rejects.toMatchObject({
      code: "ERR_PAPERCLIP_NATIVE_INVALID_ARGUMENT",
    });
    await expect(extractTarballToDirectory({ source: Buffer.alloc(1024), localDir: "" })).rejects.toMatchObject({
      code: "ERR_PAPERCLIP_NATIVE_INVALID_ARGUMENT",
    });
    await expect(
      extractTarballToDirectory({ source: path.join(work, "missing.tar"), localDir: dest }),
    ).rejects.toMatchObject({ code: "ENOENT", syscall: "open" });
    // An empty archive (1024 zero bytes, what an empty directory packs to) extracts nothing.
    expect(await extractTarballToDirectory({ source: Buffer.alloc(1024), localDir: dest })).toEqual({
      entries: 0,
      bytesRead: 1024,
    });
  });
});
