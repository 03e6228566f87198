// Deterministic benchmark corpora (written once under .bench/, reused while complete):
//   a: ~100 000 files / ~450 MB shaped like a source tree with a dependency folder
//   b: 20 large files totalling 2 GB
//   c: 5 000 files
//   d: 20 large files totalling 2 GB of source-like text (compressible, gzip -1 ~1/3)
//   e: ~12 000 files / ~55 MB in corpus a's shape with corpus d's kind of text (a source tree)
import { existsSync, mkdirSync, openSync, closeSync, writeSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** Where the corpora live: `PC_BENCH_DIR` (e.g. a directory on /dev/shm for tmpfs figures), else .bench/. */
export const BENCH_DIR = process.env.PC_BENCH_DIR
  ? path.resolve(process.env.PC_BENCH_DIR)
  : path.join(path.dirname(fileURLToPath(import.meta.url)), "..", ".bench");

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

/**
 * A tree of `files` files averaging `avgBytes`, ~30% under node_modules, 8 files a dir;
 * each file a slice of a 1 MiB pool of random bytes, or of source-like text with `text`.
 */
function sourceTree(root, files, avgBytes, seed, { text = false } = {}) {
  const next = rng(seed);
  let pool = Buffer.alloc(1 << 20);
  if (text) pool = sourceText(1 << 20, next);
  else fillBuffer(pool, next);
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

/**
 * `length` bytes of text shaped like TypeScript: indented statements over a Zipf-ish
 * vocabulary of generated identifiers, string literals, numbers and comments. gzip -1 makes
 * about a third of it, as it does of real source.
 */
function sourceText(length, next) {
  const syllables = [
    "get",
    "set",
    "add",
    "on",
    "to",
    "is",
    "has",
    "make",
    "load",
    "save",
    "find",
    "read",
    "write",
    "parse",
    "node",
    "file",
    "path",
    "name",
    "item",
    "list",
    "map",
    "key",
    "value",
    "state",
    "user",
    "task",
    "run",
    "time",
    "size",
    "data",
    "error",
    "result",
    "config",
    "sync",
    "tar",
    "stream",
    "chunk",
    "buffer",
    "entry",
    "dir",
  ];
  const pick = (array) => array[Math.floor(next() * array.length)];
  const zipf = (array) => array[Math.floor(array.length * next() ** 3)];
  const ident = () => {
    const parts = 1 + Math.floor(next() * 3);
    let out = pick(syllables);
    for (let i = 1; i < parts; i += 1) {
      const word = pick(syllables);
      out += word[0].toUpperCase() + word.slice(1);
    }
    return out;
  };
  const ids = Array.from({ length: 3000 }, ident);
  const types = [
    "string",
    "number",
    "boolean",
    "Buffer",
    "Promise<void>",
    "string[]",
    "Record<string, unknown>",
    ...ids.slice(0, 40).map((id) => id[0].toUpperCase() + id.slice(1)),
  ];
  const id = () => zipf(ids);
  const num = () => String(Math.floor(next() * next() * 100_000));
  const str = () =>
    `"${Array.from({ length: 1 + Math.floor(next() * 4) }, () => pick(syllables)).join(pick([" ", "-", "/", "_"]))}"`;
  const expr = () => {
    switch (Math.floor(next() * 6)) {
      case 0:
        return num();
      case 1:
        return str();
      case 2:
        return `${id()}.${id()}(${id()}, ${id()})`;
      case 3:
        return `${id()} ${pick(["+", "-", "*", "===", "!==", "&&", "||", "??"])} ${id()}`;
      case 4:
        return `await ${id()}(${id()})`;
      default:
        return id();
    }
  };
  const lines = [];
  let size = 0;
  let depth = 0;
  while (size < length) {
    const indent = "  ".repeat(depth);
    let line;
    const r = next();
    if (depth === 0 && r < 0.15) line = `import { ${id()}, ${id()} } from ${str()};`;
    else if (depth === 0 || r < 0.08) {
      line = `${indent}export ${pick(["async function", "function"])} ${id()}(${id()}: ${pick(types)}, ${id()}: ${pick(types)}): ${pick(types)} {`;
      depth += 1;
    } else if (r < 0.18 && depth < 6) {
      line = `${indent}${pick(["if", "while", "for (const " + id() + " of"])} (${expr()}) {`;
      depth += 1;
    } else if (r < 0.32) {
      depth -= 1;
      line = `${"  ".repeat(depth)}}`;
    } else if (r < 0.4)
      line = `${indent}// ${Array.from({ length: 3 + Math.floor(next() * 8) }, () => pick(syllables)).join(" ")}`;
    else if (r < 0.48) line = `${indent}return ${expr()};`;
    else line = `${indent}${pick(["const ", "let ", ""])}${id()} = ${expr()};`;
    lines.push(line);
    size += line.length + 1;
  }
  return Buffer.from(lines.join("\n") + "\n").subarray(0, length);
}

function largeTextFiles(root, count, totalBytes, seed) {
  const next = rng(seed);
  mkdirSync(root, { recursive: true });
  const per = Math.floor(totalBytes / count);
  for (let i = 0; i < count; i += 1) {
    const chunk = sourceText(8 << 20, next);
    const fd = openSync(path.join(root, `large${i}.ts`), "w");
    for (let done = 0; done < per; done += chunk.length) writeSync(fd, chunk, 0, Math.min(chunk.length, per - done));
    closeSync(fd);
  }
}

const CORPORA = {
  a: {
    describe: "~100 000 files / ~450 MB source tree with node_modules",
    make: (dir) => sourceTree(dir, 100_000, 4500, 1),
  },
  b: { describe: "20 large files, 2 GB", make: (dir) => largeFiles(dir, 20, 2 * 1024 ** 3, 2) },
  c: { describe: "5 000 files", make: (dir) => sourceTree(dir, 5_000, 4500, 3) },
  d: { describe: "20 large source-like text files, 2 GB", make: (dir) => largeTextFiles(dir, 20, 2 * 1024 ** 3, 4) },
  e: {
    describe: "~12 000 files / ~55 MB source-like text tree with node_modules",
    make: (dir) => sourceTree(dir, 12_000, 4500, 5, { text: true }),
  },
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
