// `paperclip-sync diff <a.json> <b.json>`: what changed between two serialized snapshots.
import { UsageError } from "../args.js";
import { table } from "../output.js";
import { diffSnapshots, loadSnapshot } from "../snapshots.js";

/** The command's help. */
export const help = `Usage: paperclip-sync diff <a.json> <b.json> [--json]

Compares two serialized snapshots (as written by 'snapshot --out') and lists what was
added, removed and changed (content, mode, kind, link target).`;

/** The command's options (node:util.parseArgs). */
export const options = { json: { type: "boolean" } };

/** Runs the command on its parsed arguments. */
export async function run({ values: opts, positionals: [fileA, fileB] }) {
  if (!fileA || !fileB) throw new UsageError("two snapshot files are required");
  const rows = diffSnapshots(loadSnapshot(fileA), loadSnapshot(fileB));
  if (opts.json) return console.log(JSON.stringify({ changes: rows }));
  if (rows.length === 0) return console.log("no changes");
  console.log(table(rows, ["change", "path", "detail"]));
  const count = (c) => rows.filter((r) => r.change === c).length;
  console.log(
    `\n${count("added")} added, ${count("removed")} removed, ${count("modified")} modified, ${count("retyped")} retyped`,
  );
}
