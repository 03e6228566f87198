// `paperclip-sync pack <dir>`: archives a directory as tar (optionally gzip), with progress.
import path from "node:path";
import { createTarballStreamFromDirectory, packDirectoryToFile } from "../../index.js";
import { UsageError } from "../args.js";
import { progressReporter, requireDir } from "../output.js";

/** The command's help. */
export const help = `Usage: paperclip-sync pack <dir> --out FILE|- [--gzip[=LEVEL]] [--exclude PATTERN]... [--follow-symlinks]

Archives <dir> in-process with the members 'tar -c --exclude ._* --exclude PATTERN … -C <dir>'
would archive (GNU tar --exclude semantics). --out - streams to stdout. Progress goes to
stderr: a bar on a terminal, upstream-format '[paperclip] …' lines otherwise.
  --gzip[=LEVEL]     compress (level 0-9, default 6)
  --follow-symlinks  archive what symlinks point at (loops are an error)
  --json             print a summary as JSON on stderr when done`;

/** The command's options (node:util.parseArgs); `--gzip` may be given without a level. */
export const options = {
  out: { type: "string" },
  gzip: { type: "string" },
  exclude: { type: "string", multiple: true },
  "follow-symlinks": { type: "boolean" },
  json: { type: "boolean" },
};

/** Options whose value may be left out. */
export const optionalValue = ["gzip"];

function parseGzip(value) {
  if (value === undefined) return undefined;
  if (value === true) return 6;
  const level = Number(value);
  if (!Number.isInteger(level) || level < 0 || level > 9) throw new UsageError("--gzip takes a level from 0 to 9");
  return level;
}

/** Runs the command on its parsed arguments; resolves the exit code. */
export async function run({ values: opts, positionals: [dir] }) {
  if (!opts.out) throw new UsageError("--out FILE (or --out - for stdout) is required");
  requireDir(dir);
  const gzip = parseGzip(opts.gzip);
  const progress = progressReporter("workspace");
  const common = { localDir: dir, exclude: opts.exclude, followSymlinks: opts["follow-symlinks"], gzip, progress };
  const start = process.hrtime.bigint();
  let summary;
  if (opts.out === "-") {
    const stream = await createTarballStreamFromDirectory({ ...common, precomputeSize: true });
    for await (const chunk of stream) {
      if (!process.stdout.write(chunk)) await new Promise((resolve) => process.stdout.once("drain", resolve));
    }
    summary = stream.summary;
  } else {
    summary = await packDirectoryToFile({ ...common, archivePath: opts.out, precomputeSize: true });
  }
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  if (opts.json)
    console.error(
      JSON.stringify({ dir: path.resolve(dir), out: opts.out, gzip: gzip ?? null, ...summary, ms: Math.round(ms) }),
    );
  return 0;
}
