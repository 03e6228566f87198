// `paperclip-sync extract <archive> <dir>`: safely extracts a tar or tar.gz archive.
import { existsSync, mkdirSync, statSync } from "node:fs";
import path from "node:path";
import { extractTarballToDirectory } from "../../index.js";
import { UsageError } from "../args.js";
import { progressReporter } from "../output.js";

/** The command's help. */
export const help = `Usage: paperclip-sync extract <archive|-> <dir> [--json]

Extracts a tar or tar.gz archive (gzip detected) into <dir>, refusing members that would
land or point outside it (absolute names, '..', escaping links, devices) with
ERR_PAPERCLIP_NATIVE_UNSAFE_ARCHIVE_ENTRY, and truncated archives with
ERR_PAPERCLIP_NATIVE_BAD_ARCHIVE. '-' reads the archive from stdin.`;

/** The command's options (node:util.parseArgs). */
export const options = { json: { type: "boolean" } };

/** Runs the command on its parsed arguments; resolves the exit code. */
export async function run({ values: opts, positionals: [archive, dir] }) {
  if (!archive || !dir) throw new UsageError("an archive (or -) and a target directory are required");
  if (archive !== "-" && !existsSync(archive)) {
    const error = new Error(`no such archive: ${archive}`);
    error.code = "ENOENT";
    throw error;
  }
  mkdirSync(dir, { recursive: true });
  const totalBytes = archive === "-" ? undefined : statSync(archive).size;
  const summary = await extractTarballToDirectory({
    source: archive === "-" ? process.stdin : archive,
    localDir: dir,
    totalBytes,
    progress: progressReporter("archive", "Restoring", "from"),
  });
  if (opts.json) console.log(JSON.stringify({ dir: path.resolve(dir), ...summary }));
  return 0;
}
