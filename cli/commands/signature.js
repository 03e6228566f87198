// `paperclip-sync signature <dir>`: the content signature of a referenced project.
import path from "node:path";
import { referencedSourceContentSignature } from "../../index.js";
import { requireDir } from "../output.js";

/** The command's help. */
export const help = `Usage: paperclip-sync signature <dir> [--ignored PATH]... [--json]

Prints referencedSourceContentSignature(<dir>) for a 'git' resolution with the given
ignored paths, or an 'other' resolution when none is given.`;

/** The command's options (node:util.parseArgs). */
export const options = { ignored: { type: "string", multiple: true }, json: { type: "boolean" } };

/** Runs the command on its parsed arguments. */
export async function run({ values: opts, positionals: [dir] }) {
  requireDir(dir);
  const resolution = opts.ignored.length > 0 ? { kind: "git", ignoredPaths: opts.ignored } : { kind: "other" };
  const signature = await referencedSourceContentSignature(dir, resolution);
  if (opts.json) return console.log(JSON.stringify({ dir: path.resolve(dir), signature }));
  console.log(signature);
}
