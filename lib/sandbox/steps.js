// Steps shared by the sandbox lane's prepare (prepare.js) and restore (restore.js): the heavy
// directories upstream never sends, temp directories, status and progress lines, the sum of
// a sync result, and the remote script that archives the sandbox workspace.
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { createRuntimeProgressReporter } from "../runtime-progress.js";
import { shellQuote } from "./shell.js";

export const HEAVY_DIRS = ["node_modules", "vendor", "dist", "build", "out", "coverage", ".next", ".turbo", ".cache"];
/** Each heavy directory name as upstream's four tar patterns. */
export const HEAVY_EXCLUDES = HEAVY_DIRS.flatMap((name) => [name, `${name}/*`, `*/${name}`, `*/${name}/*`]);

export async function withTempDir(prefix, fn) {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), prefix));
  try {
    return await fn(dir);
  } finally {
    await fs.rm(dir, { recursive: true, force: true }).catch(() => undefined);
  }
}

export async function emitStatus(sink, phase, message) {
  if (!sink) return;
  await Promise.resolve()
    .then(() => sink({ phase, message }))
    .catch(() => undefined);
}

/** A byte transfer's progress lines (and their mirror on the status sink). */
export function transferProgress(sink, phase, direction, label, status) {
  if (!sink && !status?.sink) return { options: undefined, finish: async () => {}, fail: async () => {} };
  const reporter = createRuntimeProgressReporter({
    sink: async (line) => {
      await sink?.(line);
      if (status?.sink) await emitStatus(status.sink, status.phase, line.replace(/^\[paperclip\]\s*/, "").trim());
    },
    phase,
    direction,
    target: "sandbox",
    label,
  });
  return {
    options: {
      onProgress: async (done, total) => {
        await reporter.report(done, total);
      },
    },
    finish: async (done, total) => {
      await reporter.complete(done, total);
    },
    /** The `failed at …` line (our addition: upstream prints nothing when a transfer fails). */
    fail: async (done, total) => {
      await reporter.fail(done, total);
    },
  };
}

/** The sum of a sync result's finite positive byte counts. */
export function syncedBytes(result) {
  return result.operations.reduce(
    (sum, { bytesTransferred }) =>
      Number.isFinite(bytesTransferred) && bytesTransferred > 0 ? sum + bytesTransferred : sum,
    0,
  );
}

/**
 * The remote script that archives the sandbox workspace (top-level names, no `.` entry);
 * with `gzip` (a link measured slower than gzip), the archive is then gzip'd in place.
 */
export function remoteArchiveCommand(remoteDir, archivePath, exclude, gzip = false) {
  const excludes = ["._*", ...exclude].map((entry) => `--exclude ${shellQuote(entry)}`).join(" ");
  return [
    `mkdir -p ${shellQuote(path.posix.dirname(archivePath))}`,
    `cd ${shellQuote(remoteDir)}`,
    "set -- *",
    `if [ "$#" -eq 1 ] && [ "$1" = "*" ] && [ ! -e "$1" ] && [ ! -L "$1" ]; then set --; fi`,
    `for entry in .[!.]* ..?*; do [ -e "$entry" ] || [ -L "$entry" ] || continue; set -- "$@" "$entry"; done`,
    `if [ "$#" -eq 0 ]; then dd if=/dev/zero of=${shellQuote(archivePath)} bs=1024 count=1; ` +
      `else tar -cf ${shellQuote(archivePath)} ${excludes} -- "$@"; fi`,
    ...(gzip
      ? [
          `if command -v gzip >/dev/null 2>&1; then gzip -1 -n -f -c ${shellQuote(archivePath)} > ${shellQuote(`${archivePath}.gz`)} && mv -f ${shellQuote(`${archivePath}.gz`)} ${shellQuote(archivePath)}; fi`,
        ]
      : []),
  ].join(" && ");
}
