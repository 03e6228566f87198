// `paperclip-sync snapshot <dir>`: captures a directory snapshot and prints a summary.
import { writeFileSync } from "node:fs";
import path from "node:path";
import { captureDirectorySnapshot, directorySnapshotSha256, serializeDirectorySnapshot } from "../../index.js";
import { formatBytes, requireDir, table, timed } from "../output.js";
import { summarize } from "../snapshots.js";

/** The command's help. */
export const help = `Usage: paperclip-sync snapshot <dir> [--exclude PATTERN]... [--json] [--out FILE]

Captures <dir> like captureDirectorySnapshot and prints a summary.
  --exclude PATTERN  upstream exclude entry (X, X/*, */X, */X/*); repeatable
  --out FILE         also write the serialized snapshot (JSON) to FILE
  --json             print the summary as JSON`;

/** The command's options (node:util.parseArgs). */
export const options = {
  exclude: { type: "string", multiple: true },
  out: { type: "string" },
  json: { type: "boolean" },
};

/** Runs the command on its parsed arguments. */
export async function run({ values: opts, positionals: [dir] }) {
  requireDir(dir);
  const { value: snapshot, ms } = await timed(() => captureDirectorySnapshot(dir, { exclude: opts.exclude }));
  const digest = directorySnapshotSha256(snapshot);
  if (opts.out) writeFileSync(opts.out, `${JSON.stringify(serializeDirectorySnapshot(snapshot))}\n`);
  const summary = {
    dir: path.resolve(dir),
    ...summarize(snapshot, dir),
    ms: Math.round(ms),
    digest,
    out: opts.out ?? null,
  };
  if (opts.json) return console.log(JSON.stringify(summary));
  console.log(
    table(
      [
        { field: "directory", value: summary.dir },
        { field: "entries", value: summary.entries },
        { field: "files", value: summary.files },
        { field: "directories", value: summary.dirs },
        { field: "symlinks", value: summary.symlinks },
        { field: "bytes", value: formatBytes(summary.bytes) },
        { field: "time", value: `${summary.ms} ms` },
        { field: "digest (sha256)", value: digest },
        ...(opts.out ? [{ field: "written to", value: opts.out }] : []),
      ],
      ["field", "value"],
    ),
  );
}
