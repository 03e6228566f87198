// Deterministic benchmark corpora (written once under .bench/, reused while complete):
//   a: ~100 000 files / ~450 MB shaped like a source tree with a dependency folder
//   b: 20 large files totalling 2 GB
//   c: 5 000 files
import { existsSync, mkdirSync, openSync, closeSync, writeSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const BENCH_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", ".bench");

function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0;
    return s / 4294967296;
  };
}

function fillBuffer(buf, next) {
  for (let i = 0; i < buf.length; i += 4) buf.writeUInt32LE(Math.floor(next() * 4294967296), i);
}

/** A tree of `files` files averaging `avgBytes`, ~30% under node_modules, 8 files a dir. */
function sourceTree(root, files, avgBytes, seed) {
  const next = rng(seed);
  const pool = Buffer.alloc(1 << 20);
  fillBuffer(pool, next);
  let written = 0;
  let dirIndex = 0;
  while (written < files) {
    const inDeps = next() < 0.3;
    const depth = 1 + Math.floor(next() * 4);
    const parts = [inDeps ? "node_modules" : "src"];
    for (let d = 0; d < depth; d += 1) parts.push(`${inDeps ? "pkg" : "mod"}${Math.floor(next() * 40)}`);
    parts.push(`d${dirIndex++}`);
    const dir = path.join(root, ...parts);
    mkdirSync(dir, { recursive: true });
    for (let k = 0; k < 8 && written < files; k += 1, written += 1) {
      const size = Math.floor(next() * next() * avgBytes * 3);
      const offset = Math.floor(next() * (pool.length - size - 1));
      writeFileSync(path.join(dir, `file${k}.${inDeps ? "js" : "ts"}`), pool.subarray(offset, offset + size));
    }
  }
  writeFileSync(path.join(root, ".gitignore"), "node_modules/\n");
}

function largeFiles(root, count, totalBytes, seed) {
  const next = rng(seed);
  mkdirSync(root, { recursive: true });
  const chunk = Buffer.alloc(8 << 20);
  fillBuffer(chunk, next);
  const per = Math.floor(totalBytes / count);
  for (let i = 0; i < count; i += 1) {
    const fd = openSync(path.join(root, `large${i}.bin`), "w");
    for (let done = 0; done < per; done += chunk.length) {
      chunk.writeUInt32LE(i * 7919 + done, 0);
      writeSync(fd, chunk, 0, Math.min(chunk.length, per - done));
    }
    closeSync(fd);
  }
}

const CORPORA = {
  a: { describe: "~100 000 files / ~450 MB source tree with node_modules", make: (dir) => sourceTree(dir, 100_000, 4500, 1) },
  b: { describe: "20 large files, 2 GB", make: (dir) => largeFiles(dir, 20, 2 * 1024 ** 3, 2) },
  c: { describe: "5 000 files", make: (dir) => sourceTree(dir, 5_000, 4500, 3) },
};

/** The corpus directory, generated on first use. */
export function corpus(name) {
  const spec = CORPORA[name];
  if (!spec) throw new Error(`unknown corpus ${name}`);
  const dir = path.join(BENCH_DIR, `corpus-${name}`);
  const done = path.join(BENCH_DIR, `corpus-${name}.done`);
  if (!existsSync(done)) {
    rmSync(dir, { recursive: true, force: true });
    console.error(`generating corpus ${name}: ${spec.describe} …`);
    spec.make(dir);
    writeFileSync(done, "");
  }
  return { dir, describe: spec.describe };
}
