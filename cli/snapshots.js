// Snapshot files and summaries for the snapshot, diff, merge and demo commands.
import { readFileSync, statSync } from "node:fs";
import path from "node:path";
import { parseDirectorySnapshot } from "../index.js";
import { invalidArgument } from "../lib/arguments.js";
import { codes } from "../lib/native.js";
import { UsageError } from "./args.js";

/** Entry counts by kind and the files' total size (stat'ed after the capture). */
export function summarize(snapshot, root) {
  let files = 0;
  let dirs = 0;
  let symlinks = 0;
  let bytes = 0;
  for (const [rel, entry] of snapshot.entries) {
    if (entry.kind === "dir") dirs += 1;
    else if (entry.kind === "symlink") symlinks += 1;
    else {
      files += 1;
      try {
        bytes += statSync(path.join(root, rel)).size;
      } catch {
        // raced away since the capture; not counted
      }
    }
  }
  return { entries: snapshot.entries.size, files, dirs, symlinks, bytes };
}

/** Reads a serialized snapshot (as `snapshot --out` writes it). */
export function loadSnapshot(file) {
  if (!file) throw new UsageError("two snapshot files are required");
  let raw;
  try {
    raw = JSON.parse(readFileSync(file, "utf8"));
  } catch (error) {
    const wrapped = new Error(`cannot read snapshot ${file}: ${error.message}`);
    wrapped.code = error.code ?? codes.INVALID_ARGUMENT;
    throw wrapped;
  }
  const snapshot = parseDirectorySnapshot(raw);
  if (!snapshot) throw invalidArgument(`${file} is not a valid serialized snapshot`, Error);
  return snapshot;
}

/** What changed from `a` to `b`, one row per path, in `localeCompare` order. */
export function diffSnapshots(a, b) {
  const rows = [];
  const paths = new Set([...a.entries.keys(), ...b.entries.keys()]);
  for (const rel of [...paths].sort((x, y) => x.localeCompare(y))) {
    const before = a.entries.get(rel);
    const after = b.entries.get(rel);
    if (!before) rows.push({ change: "added", path: rel, detail: after.kind });
    else if (!after) rows.push({ change: "removed", path: rel, detail: before.kind });
    else if (before.kind !== after.kind)
      rows.push({ change: "retyped", path: rel, detail: `${before.kind} -> ${after.kind}` });
    else if (before.kind === "symlink" && before.target !== after.target)
      rows.push({ change: "modified", path: rel, detail: `target ${before.target} -> ${after.target}` });
    else if (before.kind === "file") {
      const what = [];
      if (before.hash !== after.hash) what.push("content");
      if (before.mode !== after.mode) what.push(`mode ${before.mode.toString(8)} -> ${after.mode.toString(8)}`);
      if (what.length) rows.push({ change: "modified", path: rel, detail: what.join(", ") });
    }
  }
  return rows;
}
