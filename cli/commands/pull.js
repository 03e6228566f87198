// `paperclip-sync pull <dir>`: downloads a remote directory over SSH into a local directory.
import { mkdirSync } from "node:fs";
import path from "node:path";
import { syncDirectoryFromSsh } from "../../index.js";
import { UsageError } from "../args.js";
import { timed } from "../output.js";
import { interruptSignal, SSH_OPTIONS, SSH_OPTIONS_HELP, sshSpec } from "../ssh-options.js";

/** The command's help. */
export const help = `Usage: paperclip-sync pull <dir> --host HOST --user USER --key FILE (--known-hosts FILE | --no-host-key-check) --remote-dir DIR [--port N] [--exclude P]... [--preserve NAME]... [--json]

Downloads the remote directory into <dir> like syncDirectoryFromSsh: the remote's tar
streamed into the safe extractor; local entries named with --preserve are kept.

${SSH_OPTIONS_HELP}`;

/** The command's options (node:util.parseArgs). */
export const options = { ...SSH_OPTIONS, preserve: { type: "string", multiple: true } };

/** Runs the command on its parsed arguments. */
export async function run({ values: opts, positionals: [dir] }) {
  if (!dir) throw new UsageError("a local directory is required");
  const spec = sshSpec(opts);
  mkdirSync(dir, { recursive: true });
  const { ms } = await timed(() =>
    syncDirectoryFromSsh({
      spec,
      remoteDir: opts["remote-dir"],
      localDir: dir,
      exclude: opts.exclude,
      preserveLocalEntries: opts.preserve,
      onProgress: (line) => {
        process.stderr.write(line);
      },
      progressLabel: "workspace",
      signal: interruptSignal(),
    }),
  );
  if (opts.json)
    console.log(
      JSON.stringify({ dir: path.resolve(dir), remoteDir: opts["remote-dir"], host: spec.host, ms: Math.round(ms) }),
    );
}
