// `paperclip-sync push <dir>`: uploads a directory to a remote directory over SSH.
import path from "node:path";
import { syncDirectoryToSsh } from "../../index.js";
import { requireDir, timed } from "../output.js";
import { interruptSignal, SSH_OPTIONS, SSH_OPTIONS_HELP, sshSpec } from "../ssh-options.js";

/** The command's help. */
export const help = `Usage: paperclip-sync push <dir> --host HOST --user USER --key FILE (--known-hosts FILE | --no-host-key-check) --remote-dir DIR [--port N] [--exclude P]... [--follow-symlinks] [--json]

Uploads <dir> into the remote directory like syncDirectoryToSsh: one in-process SSH session,
the archive streamed from the packer into the remote's tar, progress lines on stderr.

${SSH_OPTIONS_HELP}`;

/** The command's options (node:util.parseArgs). */
export const options = { ...SSH_OPTIONS, "follow-symlinks": { type: "boolean" } };

/** Runs the command on its parsed arguments. */
export async function run({ values: opts, positionals: [dir] }) {
  requireDir(dir);
  const spec = sshSpec(opts);
  const { ms } = await timed(() =>
    syncDirectoryToSsh({
      spec,
      localDir: dir,
      remoteDir: opts["remote-dir"],
      exclude: opts.exclude,
      followSymlinks: opts["follow-symlinks"],
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
