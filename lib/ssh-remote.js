// The SSH lane's remote (./lifecycle/remote.js): an SSH host reached through the pooled
// libssh2 sessions (ssh-common.js), each command one channel of the workspace's session,
// under the lane's deadline, its stdout read as bytes.
import { codes, native, runCancellable } from "./native.js";
import { runTransfer, shellQuote, transferTarget } from "./ssh-common.js";
import { parseListing } from "./tree-delta.js";

/** The deadline and the output bound of the lane's own commands (listings, delta scripts). */
const SCRIPT_TIMEOUT_MS = 120_000;
const SCRIPT_MAX_BUFFER = 256 * 1024 * 1024;

/**
 * Runs the shell `script` on `target` (an ssh-common.js `transferTarget`) on the pooled
 * session, under `signal`, with `stdin` when given; resolves its stdout as a Buffer. A
 * nonzero exit rejects with `ERR_PAPERCLIP_NATIVE_SSH_REMOTE_FAILED` and the command's
 * stderr as the message.
 */
export async function runRemoteScript(target, script, signal, stdin) {
  const result = await runCancellable(signal, (id) =>
    native.sshExec(target, `sh -c ${shellQuote(script)}`, stdin, SCRIPT_TIMEOUT_MS, SCRIPT_MAX_BUFFER, id),
  );
  if (result.exitStatus !== 0 || result.exitSignal) {
    throw Object.assign(new Error(result.stderr.toString("utf8").trim() || `exit ${result.exitStatus}`), {
      code: codes.SSH_REMOTE_FAILED,
    });
  }
  return result.stdout;
}

/**
 * The SSH host of `spec` as a lifecycle remote, over `connection` (the call's connect
 * budget, timeouts and `signal`, which every pull takes unless its `tree` says otherwise). `transfers.pullTree` is ssh.js's pull (passed in, so
 * this module does not import ssh.js back); a workspace's pull leaves FIFOs and devices
 * out, the host keeping its own.
 */
export function sshRemote(spec, connection, transfers) {
  const target = transferTarget(spec, connection);
  const { signal } = connection;
  return {
    run: (script, options = {}) => runRemoteScript(target, script, signal, options.stdin),
    list: async (script, options) => parseListing(await runRemoteScript(target, script, signal), options),
    download: (script, file, { progress = null } = {}) =>
      runTransfer(progress, signal, (id, onBytes) =>
        native.sshDownloadFile(target, `sh -c ${shellQuote(script)}`, file, id, onBytes),
      ),
    pull: (tree, options = {}) =>
      transfers.pullTree({ ...connection, spec, ...tree }, { ...options, untransferable: "skip" }),
  };
}
