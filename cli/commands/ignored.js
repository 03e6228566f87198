// `paperclip-sync ignored <dir>`: a project's Git-ignored paths, or why they cannot be resolved.
import path from "node:path";
import { resolveReferencedSourceIgnore } from "../../index.js";
import { PROGRAM } from "../args.js";
import { requireDir, timed } from "../output.js";

/** The command's help. */
export const help = `Usage: paperclip-sync ignored <dir> [--json] [-z]

Resolves <dir>'s Git-ignored paths in-process (read-only, hardened, bounded), relative to
<dir>, one per line (-z: NUL-terminated). Exit 0 with the list for a Git project, exit 0
with a note on stderr when <dir> is not in a Git work tree, exit 1 with the fixed reason
(git-ignore-scan-failed, git-ignore-scan-limit-exceeded, git-toplevel-not-descendant)
when the resolution failed closed.`;

/** The command's options (node:util.parseArgs). */
export const options = { json: { type: "boolean" }, z: { type: "boolean", short: "z" } };

/** Runs the command on its parsed arguments; resolves the exit code. */
export async function run({ values: opts, positionals: [dir] }) {
  requireDir(dir);
  const { value: resolution, ms } = await timed(() => resolveReferencedSourceIgnore(dir));
  if (opts.json) {
    console.log(JSON.stringify({ dir: path.resolve(dir), ...resolution, ms: Math.round(ms) }));
  } else if (resolution.kind === "git") {
    process.stdout.write(resolution.ignoredPaths.map((p) => p + (opts.z ? "\0" : "\n")).join(""));
  } else if (resolution.kind === "other") {
    console.error(
      `${PROGRAM}: ${dir} is not in a Git work tree (kind: other): nothing is ignored beyond the fixed excludes`,
    );
  }
  if (resolution.kind === "failed") {
    if (!opts.json) console.error(`${PROGRAM}: ${resolution.reason}`);
    return 1;
  }
  return 0;
}
