// `git -C <dir> …` on this host, as upstream's `runLocalGit` runs it: the process
// environment unless `env` is given, a deadline and an output allowance; and `origin`'s
// credential-free URL, which both lanes carry to the remote. Internal: shared by the
// git-workspace-sync drop-ins and both lanes.
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

/** An scp-like remote (`user@host:path`), which `new URL` cannot parse. */
const SCP_LIKE_REMOTE = /^[^@:/\s]+@[^@:/\s]+:\S+$/;

/**
 * `origin`'s URL without credentials, as upstream's `sanitizeGitRemoteUrl` gives it:
 * http(s) loses user, password, query and fragment; ssh/git keeps the user (addressing)
 * but loses password, query and fragment; an scp-like remote stays as it is; anything
 * else (file paths, other schemes) is not carried.
 */
export function credentialFreeRemoteUrl(raw) {
  const value = raw.trim();
  if (value === "") return null;
  let url;
  try {
    url = new URL(value);
  } catch {
    return SCP_LIKE_REMOTE.test(value) ? value : null;
  }
  const web = url.protocol === "http:" || url.protocol === "https:";
  const git = url.protocol === "ssh:" || url.protocol === "git:" || url.protocol === "git+ssh:";
  if (!web && !git) return null;
  if (web) url.username = "";
  url.password = "";
  url.search = "";
  url.hash = "";
  return url.toString();
}

/** `origin`'s credential-free URL in the repository at `localDir`, or `null` (no origin, or not one worth carrying). Both lanes carry it to the remote. */
export async function originUrl(localDir) {
  try {
    const result = await runLocalGit(localDir, ["remote", "get-url", "origin"], {
      timeout: 10_000,
      maxBuffer: 16 * 1024,
    });
    return credentialFreeRemoteUrl(result.stdout);
  } catch {
    return null;
  }
}
