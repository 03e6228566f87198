// `paperclip-sync merge`: merges a remote result back into a workspace against a baseline.
import path from "node:path";
import { captureDirectorySnapshot, mergeDirectoryWithBaseline } from "../../index.js";
import { UsageError } from "../args.js";
import { requireDir, table, timed } from "../output.js";
import { diffSnapshots, loadSnapshot } from "../snapshots.js";

/** The command's help. */
export const help = `Usage: paperclip-sync merge --baseline SNAPSHOT.json --source DIR --target DIR [--conflict-policy overwrite|reject] [--refuse-empty-source] [--json]

Three-way merge of a remote result (--source) into a workspace (--target) against the
baseline snapshot taken when the workspace was staged (as written by 'snapshot --out'),
under the workspace merge lock shared with upstream's TypeScript. Remote changes win;
local edits of files the remote deleted are kept.
  --conflict-policy reject  refuse (DIRECTORY_MERGE_CONFLICT, listing the paths) when the
                            workspace and the remote both changed a path
  --refuse-empty-source     refuse when the source is empty but the baseline is not`;

/** The command's options (node:util.parseArgs). */
export const options = {
  baseline: { type: "string" },
  source: { type: "string" },
  target: { type: "string" },
  "conflict-policy": { type: "string" },
  "refuse-empty-source": { type: "boolean" },
  json: { type: "boolean" },
};

/** Runs the command on its parsed arguments. */
export async function run({ values: opts }) {
  if (!opts.baseline || !opts.source || !opts.target)
    throw new UsageError("--baseline, --source and --target are required");
  const policy = opts["conflict-policy"] ?? "overwrite";
  if (policy !== "overwrite" && policy !== "reject") throw new UsageError("--conflict-policy is overwrite or reject");
  const baseline = loadSnapshot(opts.baseline);
  requireDir(opts.target);
  const before = await captureDirectorySnapshot(opts.target, { exclude: baseline.exclude });
  try {
    const { ms } = await timed(() =>
      mergeDirectoryWithBaseline({
        baseline,
        sourceDir: opts.source,
        targetDir: opts.target,
        conflictPolicy: policy,
        refuseEmptySource: opts["refuse-empty-source"],
      }),
    );
    const after = await captureDirectorySnapshot(opts.target, { exclude: baseline.exclude });
    const changes = diffSnapshots(before, after);
    if (opts.json)
      return console.log(JSON.stringify({ target: path.resolve(opts.target), ms: Math.round(ms), changes }));
    if (changes.length === 0) console.log("merged: the workspace already matched");
    else
      console.log(
        `${table(changes, ["change", "path", "detail"])}\n\nmerged in ${Math.round(ms)} ms: ${changes.length} paths changed in the workspace`,
      );
  } catch (error) {
    if (error?.code === "DIRECTORY_MERGE_CONFLICT" && Array.isArray(error.paths)) {
      error.message = `${error.message}: ${error.paths.join(", ")}`;
    }
    throw error;
  }
}
