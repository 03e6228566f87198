// `git -C <dir> …` on this host, as upstream's `runLocalGit` runs it: the process
// environment unless `env` is given, a deadline and an output allowance. Internal: shared by
// the git-workspace-sync drop-ins and the SSH workspace prepare/restore.
import { execFile } from "node:child_process";

/** Upstream's `GIT_SYNC_COMMIT_IDENTITY_ARGS`: the identity of commits Paperclip writes itself. */
export const GIT_SYNC_COMMIT_IDENTITY_ARGS = ["-c", "user.name=Paperclip", "-c", "user.email=noreply@paperclip.ing"];

/**
 * Runs `git -C localDir ...args`; resolves `{ stdout, stderr }`, rejects with the
 * `execFile` error carrying `stdout`, `stderr` and the exit `code`.
 */
export function runLocalGit(localDir, args, options = {}) {
  return new Promise((resolve, reject) => {
    execFile(
      "git",
      ["-C", localDir, ...args],
      {
        timeout: options.timeout ?? 15_000,
        maxBuffer: options.maxBuffer ?? 128 * 1024,
        env: options.env ?? process.env,
      },
      (error, stdout, stderr) => {
        if (error) reject(Object.assign(error, { stdout: stdout ?? "", stderr: stderr ?? "" }));
        else resolve({ stdout: stdout ?? "", stderr: stderr ?? "" });
      },
    );
  });
}
