// The restore's check that the remote (a sandbox, an SSH host) still holds the workspace
// the prepare staged (docs/sandbox.md, "A workspace that vanished"): a shell line that every
// restore path puts first in its first command on the remote, and the coded refusal its
// answer becomes. Upstream's sandbox pull begins with `mkdir -p` of a directory inside the
// workspace, which recreates a vanished workspace empty, and its merge then takes the empty
// tree for an agent that deleted everything: the host workspace is emptied. Ours refuses
// instead, before anything reaches the host.
import { codes } from "../native.js";
import { shellQuote } from "../shell-quote.js";
import { RUNTIME_DIR } from "../tree-delta.js";

/** The exit status of a command the guard stopped (an answer no other step of ours gives). */
const GUARD_EXIT = 85;

/**
 * What the guard prints on stderr when it stops a command: `pcguard:<reason>`, written by
 * `printf` from two words so that the command's own text (which a failed command's message
 * repeats) never holds it.
 */
const GUARD_ANSWER = /\bpcguard:(missing|emptied|replaced)\b/;

/**
 * The guard of `guard = { dir, staged, witnesses }` as one shell line: it stops the command
 * with {@link GUARD_EXIT} when `dir` (the workspace the prepare staged into) is not a
 * directory, or, when `staged` (the prepare staged the workspace there, leaving its
 * `.paperclip-runtime` in it, which upstream's clear spares), when `dir` holds no entry at
 * all (a sandbox re-created with an empty directory in its place), or when it holds neither
 * `.paperclip-runtime` nor any of `witnesses` (top-level names the prepare gave it,
 * ./remote-start.js `givenTopLevel`): another tree in its place (a symlink to another
 * directory, a directory renamed over it). An empty string without a guard.
 */
export function workspaceGuardLine(guard) {
  if (!guard) return "";
  const dir = shellQuote(guard.dir);
  const stop = (reason) => `{ printf 'pcguard:%s\\n' ${reason} >&2; exit ${GUARD_EXIT}; }`;
  const missing = `if [ ! -d ${dir} ]; then ${stop("missing")}; fi`;
  if (!guard.staged) return missing;
  const present = (name) => `[ -e ${dir}/${shellQuote(name)} ] || [ -L ${dir}/${shellQuote(name)} ]`;
  const anyEntry = `for pc_entry in ${dir}/* ${dir}/.[!.]* ${dir}/..?*; do if [ -e "$pc_entry" ] || [ -L "$pc_entry" ]; then exit 0; fi; done; exit 1`;
  const emptied = `${missing}; if ! ( ${anyEntry} ); then ${stop("emptied")}; fi`;
  const witnesses = guard.witnesses ?? [];
  if (witnesses.length === 0) return emptied;
  const ours = [RUNTIME_DIR, ...witnesses].map(present).join(" || ");
  return `${emptied}; if ! { ${ours}; }; then ${stop("replaced")}; fi`;
}

/**
 * The refusal a failed command's error stands for when the guard stopped it (its answer in
 * the error's message, stderr or stdout): an `Error` with `code`
 * `ERR_PAPERCLIP_NATIVE_REMOTE_WORKSPACE_GONE`, `reason` (`missing` or `emptied`) and
 * `remoteDir`, the original error as its `cause`; `null` for any other error.
 */
export function workspaceGoneError(error, guard) {
  if (!guard || !error || error.code === codes.REMOTE_WORKSPACE_GONE) return null;
  const text = [error.message, error.stderr, error.stdout].filter((part) => typeof part === "string").join("\n");
  const answer = GUARD_ANSWER.exec(text);
  return answer ? goneError(guard.dir, answer[1], error) : null;
}

/**
 * The refusal itself: nothing was restored and the host workspace is as it was. `reason`:
 * `missing` (no directory), `emptied` (a directory with nothing in it, not even what the
 * prepare left there) or `replaced` (a directory holding none of what the prepare left or
 * gave there).
 */
export function goneError(remoteDir, reason, cause) {
  const what =
    reason === "missing"
      ? "is missing"
      : reason === "replaced"
        ? "is not the tree the prepare staged: it holds neither the .paperclip-runtime directory the prepare left in it nor any of the entries the prepare gave it (another directory or a symbolic link in its place)"
        : "holds nothing, not even the .paperclip-runtime directory the prepare left in it, so it is not the tree the prepare staged";
  const error = new Error(
    `The remote workspace ${remoteDir} ${what} (a recycled or re-created sandbox or host, an expired lease, a cleaned disk): ` +
      "nothing was restored and the host workspace is unchanged. The run's work is only where the remote kept it; " +
      "prepare again to stage the workspace anew.",
    cause ? { cause } : undefined,
  );
  error.code = codes.REMOTE_WORKSPACE_GONE;
  error.reason = reason;
  error.remoteDir = remoteDir;
  return error;
}

/**
 * Runs `step()` (a restore step whose first command carries the guard line) and turns a
 * failure the guard caused into its coded refusal; any other failure as it was.
 */
export async function guarded(guard, step) {
  try {
    return await step();
  } catch (error) {
    throw workspaceGoneError(error, guard) ?? error;
  }
}
