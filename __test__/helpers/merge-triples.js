// Seeded merge triples for differential tests: a baseline tree, a remote result derived
// from it, and host edits made since the baseline; plus a byte-exact tree description
// (kinds, full modes, content hashes, link targets) to compare merge results.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  chmodSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  unlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import { NAME_POOL } from "./trees.js";

/** Copies a tree exactly (modes, symlinks as links). */
export function copyTree(from, to) {
  mkdirSync(path.dirname(to), { recursive: true });
  execFileSync("cp", ["-a", from, to]);
}

/** Every entry below `root` as a sorted list of `[relative, description]`. */
export function describeTree(root) {
  const out = [];
  const walk = (relative) => {
    const dir = relative ? path.join(root, relative) : root;
    for (const name of readdirSync(dir).sort()) {
      const rel = relative ? `${relative}/${name}` : name;
      const full = path.join(root, rel);
      const st = lstatSync(full);
      if (st.isSymbolicLink()) out.push([rel, `link ${readlinkSync(full)}`]);
      else if (st.isDirectory()) {
        out.push([rel, `dir ${st.mode.toString(8)}`]);
        walk(rel);
      } else if (st.isFile()) {
        out.push([rel, `file ${st.mode.toString(8)} ${createHash("sha256").update(readFileSync(full)).digest("hex")}`]);
      } else out.push([rel, `other ${st.mode.toString(8)}`]);
    }
  };
  walk("");
  return out;
}

/** The entries below `root` by kind, for picking mutation victims (no symlink descent). */
export function inventory(root) {
  const files = [];
  const dirs = [];
  const links = [];
  const walk = (relative) => {
    const dir = relative ? path.join(root, relative) : root;
    for (const name of readdirSync(dir).sort()) {
      const rel = relative ? `${relative}/${name}` : name;
      const st = lstatSync(path.join(root, rel));
      if (st.isSymbolicLink()) links.push(rel);
      else if (st.isDirectory()) {
        dirs.push(rel);
        walk(rel);
      } else if (st.isFile()) files.push(rel);
    }
  };
  walk("");
  return { files, dirs, links };
}

function bytes(rng, tag) {
  const size = rng.chance(0.2) ? 0 : rng.int(rng.chance(0.1) ? 300_000 : 3_000);
  const out = Buffer.alloc(size + tag.length);
  out.write(tag);
  for (let k = tag.length; k < out.length; k += 97) out[k] = rng.int(256);
  return out;
}

/**
 * The prefixes of fresh names. A generated name is a pool name and, now and then, digits
 * (helpers/trees.js): a fresh name (a prefix and digits) meets one only when a prefix is a
 * pool name and digits, or a pool name is a prefix and digits (`z97` did, with "z").
 */
const FRESH_PREFIXES = ["new", "N", "é-new", "zz", "a.new", "a-new", "_n"];
const digitsAfter = (whole, start) => whole.startsWith(start) && /^\d*$/.test(whole.slice(start.length));
for (const prefix of FRESH_PREFIXES) {
  const met = NAME_POOL.find((name) => digitsAfter(prefix, name) || digitsAfter(name, prefix));
  if (met !== undefined) throw new Error(`fresh names with prefix ${prefix} can meet generated ones (${met})`);
}

let fresh = 0;
/** A name no entry has yet: a prefix and a counter (see FRESH_PREFIXES). */
function freshName(rng) {
  fresh += 1;
  return `${rng.pick(FRESH_PREFIXES)}${fresh}`;
}

function writeFile(rng, root, rel, tag) {
  mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
  writeFileSync(path.join(root, rel), bytes(rng, tag));
  chmodSync(path.join(root, rel), rng.pick([0o644, 0o755, 0o600]));
}

function under(rng, dirs) {
  return dirs.length > 0 && rng.chance(0.8) ? rng.pick(dirs) : "";
}

function join(parent, name) {
  return parent ? `${parent}/${name}` : name;
}

/** The remote-side mutations (a sandbox run's result), by name. */
export const REMOTE_OPS = {
  add(rng, root, inv) {
    writeFile(rng, root, join(under(rng, inv.dirs), freshName(rng)), "remote-add");
  },
  addNested(rng, root, inv) {
    writeFile(rng, root, join(join(under(rng, inv.dirs), freshName(rng)), freshName(rng)), "remote-nested");
  },
  modify(rng, root, inv) {
    if (inv.files.length === 0) return;
    const rel = rng.pick(inv.files);
    writeFileSync(path.join(root, rel), bytes(rng, "remote-modify"));
  },
  chmod(rng, root, inv) {
    if (inv.files.length === 0) return;
    const rel = rng.pick(inv.files);
    const mode = lstatSync(path.join(root, rel)).mode & 0o777;
    chmodSync(path.join(root, rel), mode === 0o755 ? 0o644 : 0o755);
  },
  deleteFile(rng, root, inv) {
    const pool = [...inv.files, ...inv.links];
    if (pool.length > 0) unlinkSync(path.join(root, rng.pick(pool)));
  },
  deleteDir(rng, root, inv) {
    if (inv.dirs.length > 0) rmSync(path.join(root, rng.pick(inv.dirs)), { recursive: true, force: true });
  },
  dirToFile(rng, root, inv) {
    if (inv.dirs.length === 0) return;
    const rel = rng.pick(inv.dirs);
    rmSync(path.join(root, rel), { recursive: true, force: true });
    writeFile(rng, root, rel, "remote-dir-to-file");
  },
  renameDir(rng, root, inv) {
    // A directory moved into place whole (its children keep their ctimes).
    if (inv.dirs.length === 0) return;
    const rel = rng.pick(inv.dirs);
    renameSync(path.join(root, rel), path.join(root, path.dirname(rel), freshName(rng)));
  },
  fileToDir(rng, root, inv) {
    if (inv.files.length === 0) return;
    const rel = rng.pick(inv.files);
    unlinkSync(path.join(root, rel));
    writeFile(rng, root, `${rel}/${freshName(rng)}`, "remote-file-to-dir");
  },
  retargetLink(rng, root, inv) {
    if (inv.links.length === 0) return;
    const rel = rng.pick(inv.links);
    unlinkSync(path.join(root, rel));
    symlinkSync(rng.pick(["elsewhere", "../moved", "/tmp/x"]), path.join(root, rel));
  },
  fileToLink(rng, root, inv) {
    if (inv.files.length === 0) return;
    const rel = rng.pick(inv.files);
    unlinkSync(path.join(root, rel));
    symlinkSync("link-from-file", path.join(root, rel));
  },
  linkToFile(rng, root, inv) {
    if (inv.links.length === 0) return;
    const rel = rng.pick(inv.links);
    unlinkSync(path.join(root, rel));
    writeFile(rng, root, rel, "remote-link-to-file");
  },
  addLink(rng, root, inv) {
    symlinkSync(
      rng.pick(["a.txt", "../up", "/etc/hostname"]),
      path.join(root, join(under(rng, inv.dirs), freshName(rng))),
    );
  },
  addDir(rng, root, inv) {
    mkdirSync(path.join(root, join(under(rng, inv.dirs), freshName(rng))));
  },
  excluded(rng, root, inv, exclude) {
    // A change under an excluded path: never applied.
    const literal = exclude.find((e) => e && !e.includes("*"));
    try {
      if (literal) writeFile(rng, root, `${literal}/${freshName(rng)}`, "remote-excluded");
    } catch {
      // The literal names a file here; nothing to add below it.
    }
  },
};

/** The host-side edits made since the baseline, by name. */
export const HOST_OPS = {
  edit(rng, root, inv) {
    if (inv.files.length === 0) return;
    const rel = rng.pick(inv.files);
    writeFileSync(path.join(root, rel), bytes(rng, "host-edit"));
  },
  addOnly(rng, root, inv) {
    writeFile(rng, root, join(under(rng, inv.dirs), freshName(rng)), "host-only");
  },
  delete(rng, root, inv) {
    if (inv.files.length > 0) unlinkSync(path.join(root, rng.pick(inv.files)));
  },
  chmod(rng, root, inv) {
    if (inv.files.length === 0) return;
    const rel = rng.pick(inv.files);
    chmodSync(path.join(root, rel), 0o700);
  },
  fileInDir(rng, root, inv) {
    // Keeps a remote-deleted directory alive, or is lost when the remote replaces it.
    if (inv.dirs.length > 0) writeFile(rng, root, `${rng.pick(inv.dirs)}/${freshName(rng)}`, "host-in-dir");
  },
  retargetLink(rng, root, inv) {
    if (inv.links.length === 0) return;
    const rel = rng.pick(inv.links);
    unlinkSync(path.join(root, rel));
    symlinkSync("host-retarget", path.join(root, rel));
  },
  dirToFile(rng, root, inv) {
    // A later remote write below this directory then fails (ENOTDIR) on both sides.
    if (inv.dirs.length === 0) return;
    const rel = rng.pick(inv.dirs);
    rmSync(path.join(root, rel), { recursive: true, force: true });
    writeFile(rng, root, rel, "host-dir-to-file");
  },
  dirToLink(rng, root, inv, outside) {
    // A symlinked directory in the host tree pointing outside the target.
    if (inv.dirs.length === 0) return;
    const rel = rng.pick(inv.dirs);
    rmSync(path.join(root, rel), { recursive: true, force: true });
    symlinkSync(outside, path.join(root, rel));
  },
};

/**
 * Applies `count` random operations of `ops` to `root` (plus `forced`, if given, first).
 * `extra` is passed to each operation. Returns the names applied.
 */
export function mutate(rng, root, ops, count, { forced, extra, avoid = [] } = {}) {
  const names = Object.keys(ops).filter((n) => !avoid.includes(n));
  const applied = [];
  const run = (name) => {
    ops[name](rng, root, inventory(root), extra);
    applied.push(name);
  };
  if (forced) run(forced);
  for (let i = 0; i < count; i += 1) run(rng.pick(names));
  return applied;
}

/**
 * Rewrites `rel` under `root` with other bytes of the same size and gives it back its mode
 * and mtime (only the ctime moves); false for an empty file (nothing to rewrite).
 */
export function sameSizeSameMtime(root, rel) {
  const full = path.join(root, rel);
  const before = statSync(full);
  if (before.size === 0) return false;
  chmodSync(full, 0o600);
  const bytes = readFileSync(full);
  bytes[0] ^= 0xff;
  writeFileSync(full, bytes);
  chmodSync(full, before.mode & 0o7777);
  utimesSync(full, before.atime, before.mtime);
  return true;
}
