// Seeded generator of directory trees for differential tests: nested and empty dirs, files
// from 0 B to a few MB with various modes, symlinks (relative, absolute, dangling, to
// dirs), a socket and a FIFO, and names that stress collation and escaping.
import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";

/** The names the generator gives entries (now and then followed by a number below 100). */
export const NAME_POOL = [
  "a",
  "A.txt",
  "a.txt",
  "b",
  "B",
  "é",
  "e\u0301",
  "É",
  "ß",
  "Straße",
  "ö",
  "z",
  "å",
  "ä",
  "😀",
  "中文",
  "-dash",
  ".hidden",
  "_under",
  "~tilde",
  "#hash",
  "with space",
  " lead",
  "trail ",
  "a-b",
  "a.b",
  "a_b",
  "a~b",
  "10",
  "9",
  "x1",
  "x10",
  "x2",
  "node_modules",
  "build",
  "dist",
  ".git",
  "src",
  "._apple",
  "secret[1].txt",
  "star*name",
  "q?mark",
  "back\\slash",
  "caret^",
  "dollar$",
  "{brace}",
];
const MODES = [0o644, 0o755, 0o600, 0o444];

/**
 * Writes a random tree under `root` and returns a list of what it wrote. Sockets are
 * returned as servers the caller must close.
 */
export async function writeRandomTree(
  rng,
  root,
  { maxDepth = 3, maxEntries = 8, maxFileBytes = 64 * 1024, special = true } = {},
) {
  mkdirSync(root, { recursive: true });
  const dirs = [];
  const servers = [];
  const fill = (dir, depth) => {
    const count = rng.int(maxEntries + 1);
    const used = new Set();
    for (let i = 0; i < count; i += 1) {
      let name = rng.pick(NAME_POOL);
      if (rng.chance(0.3)) name += String(rng.int(100));
      if (used.has(name)) continue;
      used.add(name);
      const full = path.join(dir, name);
      const roll = rng.next();
      if (roll < 0.25 && depth < maxDepth) {
        mkdirSync(full);
        dirs.push(full);
        fill(full, depth + 1);
      } else if (roll < 0.35) {
        const target = rng.pick(["../a", "a.txt", "/etc/hostname", "dangling/nowhere", ".", "..", "é"]);
        symlinkSync(target, full);
      } else {
        const size = rng.chance(0.05) ? rng.int(maxFileBytes * 40) : rng.chance(0.2) ? 0 : rng.int(maxFileBytes);
        const bytes = Buffer.alloc(size);
        for (let k = 0; k < size; k += 4096) bytes[k] = rng.int(256);
        writeFileSync(full, bytes);
        chmodSync(full, rng.pick(MODES));
      }
    }
  };
  fill(root, 0);
  if (special) {
    execFileSync("mkfifo", [path.join(root, "fifo")]);
    const server = net.createServer();
    await new Promise((resolve) => server.listen(path.join(root, "sock"), resolve));
    servers.push(server);
  }
  return { dirs, close: () => Promise.all(servers.map((s) => new Promise((r) => s.close(r)))) };
}

/** A random exclude list of every upstream pattern shape, built from names in the pool. */
export function randomExcludes(rng) {
  const list = [];
  for (let i = rng.int(4); i > 0; i -= 1) {
    const name = rng.pick(NAME_POOL);
    list.push(rng.pick([name, `${name}/*`, `*/${name}`, `*/${name}/*`, `a/${name}`, "*/*", ""]));
  }
  return list;
}
