// The remote a workspace's lifecycle runs against, as an interface both lanes implement:
// ../ssh-remote.js (an SSH host through the pooled libssh2 sessions) and ../sandbox/remote.js
// (a sandbox through its runner's calls). The lifecycle's steps (./restore.js) talk to a
// remote only through these methods, and the rules that hold on every remote are applied
// here, once: a restore's remote checks, first thing in every command, that the workspace
// the prepare staged is still there (./workspace-guard.js).
import { guarded, workspaceGuardLine } from "./workspace-guard.js";

/**
 * What a lane gives the lifecycle (every method rejects on a command that fails; a method
 * the lane's transport cannot do is absent):
 * - `run(script, options?)`: runs the shell `script` on the remote under the lane's deadline
 *   (options: `{ stdin }`, the SSH lane's; a sandbox runner's command takes none); resolves
 *   its stdout.
 * - `list(script, options)`: runs a listing script (../tree-delta.js `listingPipeline`'s
 *   output) and resolves it parsed (`parseListing(bytes, options)`).
 * - `download(script, localFile, options)`: the stdout of `script` written to `localFile`,
 *   streamed (options: `{ progress }`, a transfer's progress).
 * - `pull(tree, options)`: the remote tree, or a restore plan's members (`options.delta`),
 *   extracted into `tree.localDir` through the safe extractor; `options.first` is a shell
 *   line the remote command runs before its archive.
 * @typedef {object} Remote
 */

/** `first` then `script`, as one script (`script` alone when `first` is empty). */
function after(first, script) {
  return first ? (script ? `${first}\n${script}` : first) : script;
}

/**
 * `remote` as a restore of the workspace `guard` describes sees it (`guard`: `{ dir,
 * staged, witnesses }`, ./workspace-guard.js): every command it runs checks the workspace
 * first, and a command the check stopped rejects with the coded refusal
 * (`ERR_PAPERCLIP_NATIVE_REMOTE_WORKSPACE_GONE`) instead of its own failure. `remote` as it
 * is without a guard.
 */
export function guardRemote(remote, guard) {
  if (!guard) return remote;
  const line = workspaceGuardLine(guard);
  const wrapped = { ...remote, guard };
  if (remote.run) wrapped.run = (script, options) => guarded(guard, () => remote.run(after(line, script), options));
  if (remote.list) wrapped.list = (script, options) => guarded(guard, () => remote.list(after(line, script), options));
  if (remote.download)
    wrapped.download = (script, file, options) =>
      guarded(guard, () => remote.download(after(line, script), file, options));
  if (remote.pull)
    wrapped.pull = (tree, options = {}) =>
      guarded(guard, () => remote.pull(tree, { ...options, first: after(line, options.first ?? "") }));
  return wrapped;
}
