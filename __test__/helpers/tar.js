// Helpers for the tar suites: GNU tar as an oracle, tree states to compare extractions, and
// a raw archive writer for hostile archives that no well-behaved tar would produce.
import { execFileSync, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { lstatSync, readFileSync, readdirSync, readlinkSync, unlinkSync } from "node:fs";
import path from "node:path";

/** GNU tar in the UTF-8 C locale (character-wise fnmatch, as the core is tested against). */
export function gnuTar(args, { input, cwd } = {}) {
  const env = { ...process.env, LC_ALL: "C.UTF-8" };
  delete env.TAR_OPTIONS;
  delete env.POSIXLY_CORRECT;
  const out = spawnSync("tar", args, { input, cwd, env, maxBuffer: 1 << 30 });
  if (out.status !== 0) throw new Error(`tar ${args.join(" ")} failed (${out.status}): ${out.stderr}`);
  return out.stdout;
}

/** bsdtar (libarchive) in the UTF-8 C locale; `null` when it is not installed. */
export function bsdTar(args, { input } = {}) {
  const out = spawnSync("bsdtar", args, { input, env: { ...process.env, LC_ALL: "C.UTF-8" }, maxBuffer: 1 << 30 });
  if (out.error?.code === "ENOENT") return null;
  if (out.status !== 0) throw new Error(`bsdtar ${args.join(" ")} failed (${out.status}): ${out.stderr}`);
  return out.stdout;
}

/** True when `tar` is GNU tar. */
export function haveGnuTar() {
  try {
    return execFileSync("tar", ["--version"], { encoding: "utf8" }).includes("GNU tar");
  } catch {
    return false;
  }
}

/**
 * GNU tar's archive of `root` as upstream's command line makes it, with `--no-unquote` so a
 * name like `a\b` is taken as it is (upstream's tar unquotes it and fails).
 */
export function gnuCreate(root, names, exclude = [], { follow = false } = {}) {
  const args = [
    "-c",
    "--no-xattrs",
    "--no-unquote",
    ...(follow ? ["-h"] : []),
    "-f",
    "-",
    "-C",
    root,
    "--exclude",
    "._*",
  ];
  for (const entry of exclude) args.push("--exclude", entry);
  return gnuTar([...args, "--", ...names]);
}

/** The sorted member names of an archive (file path or Buffer), as GNU tar lists them. */
export function listMembers(archive) {
  const out =
    typeof archive === "string"
      ? gnuTar(["-t", "--quoting-style=literal", "-f", archive])
      : gnuTar(["-t", "--quoting-style=literal", "-f", "-"], { input: archive });
  return out
    .toString("utf8")
    .split("\n")
    .filter((line) => line !== "")
    .sort();
}

/** Extracts an archive (file path or Buffer) into `dest` with GNU tar. */
export function gnuExtract(archive, dest) {
  if (typeof archive === "string") gnuTar(["-x", "-f", archive, "-C", dest]);
  else gnuTar(["-x", "-f", "-", "-C", dest], { input: archive });
}

/**
 * Every node under `root` by relative path: kind, permission bits, size, content hash and
 * mtime for files, target for links (directory times are left out: writing into a
 * directory changes them).
 */
export function treeState(root) {
  const out = {};
  const visit = (dir, prefix) => {
    for (const name of readdirSync(dir).sort()) {
      const full = path.join(dir, name);
      const rel = prefix ? `${prefix}/${name}` : name;
      const stat = lstatSync(full);
      if (stat.isDirectory()) {
        out[rel] = { kind: "dir", mode: stat.mode & 0o7777 };
        visit(full, rel);
      } else if (stat.isSymbolicLink()) {
        out[rel] = { kind: "symlink", target: readlinkSync(full) };
      } else if (stat.isFile()) {
        const sha = createHash("sha256").update(readFileSync(full)).digest("hex");
        out[rel] = {
          kind: "file",
          mode: stat.mode & 0o7777,
          size: stat.size,
          sha,
          mtime: Math.floor(stat.mtimeMs / 1000),
        };
      } else {
        out[rel] = { kind: "other", mode: stat.mode };
      }
    }
  };
  visit(root, "");
  return out;
}

/**
 * Removes the symbolic links a safe extraction refuses: absolute targets, and targets that
 * climb above the root from where the link is (GNU tar extracts those; we do not).
 */
export function removeEscapingSymlinks(root) {
  const visit = (dir, depth) => {
    for (const name of readdirSync(dir)) {
      const full = path.join(dir, name);
      const stat = lstatSync(full);
      if (stat.isDirectory()) visit(full, depth + 1);
      else if (stat.isSymbolicLink()) {
        const target = readlinkSync(full);
        let level = depth;
        let escapes = path.isAbsolute(target);
        let afterName = false;
        for (const part of target.split("/")) {
          if (part === "..") {
            level -= 1;
            if (level < 0 || afterName) escapes = true;
          } else if (part !== "" && part !== ".") {
            level += 1;
            afterName = true;
          }
        }
        if (escapes) unlinkSync(full);
      }
    }
  };
  visit(root, 0);
}

// ---------------------------------------------------------------------------------------
// Raw archives

const BLOCK = 512;

function octal(value, width) {
  return `${value.toString(8).padStart(width - 1, "0")}\0`;
}

/** One ustar header block. */
function header({ name, type = "0", size = 0, mode = 0o644, link = "", mtime = 1_700_000_000 }) {
  const block = Buffer.alloc(BLOCK);
  const put = (offset, width, value) => {
    const bytes = Buffer.from(value, "utf8");
    if (bytes.length > width) throw new Error(`header field too long: ${value}`);
    bytes.copy(block, offset);
  };
  put(0, 100, name);
  put(100, 8, octal(mode, 8));
  put(108, 8, octal(0, 8));
  put(116, 8, octal(0, 8));
  put(124, 12, octal(size, 12));
  put(136, 12, octal(mtime, 12));
  block.fill(" ", 148, 156);
  put(156, 1, type);
  put(157, 100, link);
  put(257, 6, "ustar\0");
  put(263, 2, "00");
  let sum = 0;
  for (const byte of block) sum += byte;
  put(148, 8, `${sum.toString(8).padStart(6, "0")}\0 `);
  return block;
}

/** Builds an archive member by member, without any of the checks a real tar makes. */
export class RawArchive {
  #parts = [];

  file(name, data = "", mode = 0o644) {
    const bytes = Buffer.from(data);
    this.#parts.push(
      header({ name, size: bytes.length, mode }),
      bytes,
      Buffer.alloc((BLOCK - (bytes.length % BLOCK)) % BLOCK),
    );
    return this;
  }

  dir(name, mode = 0o755) {
    this.#parts.push(header({ name: name.endsWith("/") ? name : `${name}/`, type: "5", mode }));
    return this;
  }

  symlink(name, target) {
    this.#parts.push(header({ name, type: "2", link: target, mode: 0o777 }));
    return this;
  }

  hardLink(name, target) {
    this.#parts.push(header({ name, type: "1", link: target }));
    return this;
  }

  /** The archive with its two end blocks (or without, `{ end: false }`). */
  finish({ end = true } = {}) {
    return Buffer.concat([...this.#parts, ...(end ? [Buffer.alloc(2 * BLOCK)] : [])]);
  }
}
