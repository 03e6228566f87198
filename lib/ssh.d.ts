import type { RuntimeProgressSink } from "./runtime-progress.js";
import type { DirectorySnapshot } from "./workspace-restore-merge.js";
import type { ExtractLimits } from "./tar-stream.js";

/** Where and how to reach an SSH host (upstream's `SshConnectionConfig`). */
export interface SshConnectionConfig {
  host: string;
  port: number;
  username: string;
  remoteWorkspacePath: string;
  /** Private key (OpenSSH or PEM, unencrypted). `null`: the SSH agent, then `~/.ssh/id_{ed25519,ecdsa,rsa}`. */
  privateKey: string | null;
  /** `known_hosts` content. `null` with strict checking: `~/.ssh/known_hosts` and `/etc/ssh/ssh_known_hosts`. */
  knownHosts: string | null;
  /** Verify the host key against `knownHosts` (an unknown or changed key fails before any command runs); `false` checks nothing. */
  strictHostKeyChecking: boolean;
}
/** What a successful `runSshCommand` printed. */
export interface SshCommandResult {
  stdout: string;
  stderr: string;
}
/** A connection plus the remote working directory (upstream's `SshRemoteExecutionSpec`). */
export interface SshRemoteExecutionSpec extends SshConnectionConfig {
  remoteCwd: string;
}
/** Connection limits and cancellation (our additions to upstream's options). */
export interface SshCallOptions {
  /** Aborting rejects the call with an `AbortError` and closes its session. */
  signal?: AbortSignal;
  /**
   * Limit on reaching an authenticated session (the TCP connect, the SSH banner, the key
   * exchange and authentication, as OpenSSH's `ConnectTimeout`), in ms (default 10 000,
   * upstream's `ConnectTimeout=10`); past it, `ETIMEDOUT`. Every connection the call opens
   * honours it, and the call as a whole loses at most this much to connections that fail.
   */
  connectTimeoutMs?: number;
  /** Fail when no byte moved for this long, in ms (transfers: default 300 000; 0 or absent on a command: none). */
  inactivityTimeoutMs?: number;
}
/**
 * Runs `remoteCommand` on the host through one in-process SSH session (no `ssh` child
 * process). As upstream: the remote login profiles are sourced first, then
 * `exec [env K='v' …] sh -c '<remoteCommand>'`; `env` keys must match
 * `^[A-Za-z_][A-Za-z0-9_]*$` (else `Invalid SSH environment variable key: <key>`);
 * `stdin` is sent and closed; `timeoutMs` (default 15 000) bounds the whole call, connect
 * included; `maxBuffer` (default 128 KiB) bounds stdout and stderr each
 * (`ERR_CHILD_PROCESS_STDIO_MAXBUFFER`). A non-zero exit rejects with
 * `Error(stderr.trim() || stdout.trim() || "Process exited with code N")` carrying
 * `{ stdout, stderr, code: N, signal, killed }`; a timeout with `killed: true` and code
 * `ERR_PAPERCLIP_NATIVE_SSH_TIMEOUT`; a connection failure with a coded error
 * (`ERR_PAPERCLIP_NATIVE_SSH_HOST_KEY_UNKNOWN`, `…_HOST_KEY_CHANGED`, `…_AUTH_FAILED`,
 * `ECONNREFUSED`, …) whose message is also its `stderr`.
 */
export declare function runSshCommand(
  config: SshConnectionConfig,
  remoteCommand: string,
  options?: {
    env?: Record<string, string>;
    stdin?: string;
    timeoutMs?: number;
    maxBuffer?: number;
  } & SshCallOptions,
): Promise<SshCommandResult>;
/**
 * Uploads the contents of `localDir` into `remoteDir` (created): our packer streams the
 * archive (members `tar -C localDir --exclude ._* --exclude … [-h]` selects, GNU tar's
 * exclude semantics) into the remote `sh -c 'mkdir -p <dir> && tar -xf - -C <dir>'` on one
 * session. Resolves only when the whole archive reached the remote tar and it exited 0;
 * otherwise rejects with `ERR_PAPERCLIP_NATIVE_SSH_REMOTE_FAILED` (message: the remote
 * stderr, else `ssh exited with code N`), a connection error, a timeout, or an `AbortError`.
 * `onProgress` gets `Syncing[ <progressLabel>] to ssh` lines against the exact archive
 * size, below 100% until the remote confirmed, then `100%`; a failure writes
 * `failed at NN% (x/y MB)`.
 */
export declare function syncDirectoryToSsh(
  input: {
    spec: SshRemoteExecutionSpec;
    localDir: string;
    remoteDir: string;
    exclude?: string[];
    followSymlinks?: boolean;
    onProgress?: RuntimeProgressSink;
    progressLabel?: string;
  } & SshCallOptions,
): Promise<void>;
/**
 * Downloads the contents of `remoteDir` into `localDir`: the remote
 * `cd <dir> && tar --exclude ._* --exclude … -cf - .` is extracted safely (no member or
 * link may land outside the target) into a private staging directory inside `localDir`
 * (`.paperclip-ssh-sync-back-…`, so the entries move in by rename whatever file system the
 * temp dir is on); only after a complete, successful transfer is `localDir` cleared (except
 * `preserveLocalEntries`) and given the staged entries. On any failure `localDir` keeps its
 * entries (and is removed again if the call created it). `onProgress` gets
 * `Restoring[ <progressLabel>] from ssh` lines against the remote `du -sk` estimate (capped
 * at 99%), or MB lines without one, and a terminal line.
 */
export declare function syncDirectoryFromSsh(
  input: {
    spec: SshRemoteExecutionSpec;
    remoteDir: string;
    localDir: string;
    exclude?: string[];
    preserveLocalEntries?: string[];
    onProgress?: RuntimeProgressSink;
    progressLabel?: string;
    /** Ours: bounds for the downloaded archive and the free-space floor (see `ExtractLimits`). */
    limits?: ExtractLimits;
    /**
     * Ours: the tree whose symbolic links vouch for the download's links to absolute paths or
     * out of the tree (see `extractTarballToDirectory`'s `knownLinks`). Default: `localDir`.
     */
    knownLinks?: string;
  } & SshCallOptions,
): Promise<void>;
/**
 * Stages `localDir` on the SSH host in `remoteDir` (default `spec.remoteCwd`) before a run,
 * as upstream does. A git work tree with a commit: its HEAD goes over as a git bundle
 * (streamed on the same in-process channel code as the tar transfers; progress
 * `Importing git history to ssh` with an exact percentage), the remote repository is
 * created or updated and checked out at that commit (branch kept, credential-free `origin`
 * carried over), the working tree is pushed over it (excluding `.git` and
 * `.paperclip-runtime`) and locally deleted tracked files are removed remotely:
 * `{ gitBacked: true }`. Anything else: the remote directory is cleared (sparing
 * `.paperclip-runtime`) and the tree pushed: `{ gitBacked: false }`. No `ssh` or `tar`
 * process is started on this host (local `git` is).
 */
export declare function prepareWorkspaceForSshExecution(
  input: {
    spec: SshRemoteExecutionSpec;
    localDir: string;
    remoteDir?: string;
    onProgress?: RuntimeProgressSink;
  } & SshCallOptions,
): Promise<{
  gitBacked: boolean;
}>;
/**
 * Brings a run's work back from `remoteDir` (default `spec.remoteCwd`) into `localDir`, as
 * upstream does. With `baselineSnapshot`, the remote tree is staged privately and three-way
 * merged into `localDir` (`mergeDirectoryWithBaseline`, under its lock); with
 * `restoreGitHistory` too, the remote HEAD is exported first (progress `Exporting git
 * history from ssh`) and, inside the lock, the local head moves to contain it
 * (fast-forward, a graft for unrelated history, or a merge commit; a conflict fails).
 * Without a baseline, a git work tree is reset to the remote HEAD and then given the remote
 * tree (`.git` kept); anything else just the remote tree.
 */
export declare function restoreWorkspaceFromSshExecution(
  input: {
    spec: SshRemoteExecutionSpec;
    localDir: string;
    remoteDir?: string;
    baselineSnapshot?: DirectorySnapshot;
    restoreGitHistory?: boolean;
    onProgress?: RuntimeProgressSink;
    /** Ours: bounds for the downloaded workspace archive and the free-space floor (see `ExtractLimits`). */
    limits?: ExtractLimits;
  } & SshCallOptions,
): Promise<void>;
/**
 * Upstream's `ensureSshWorkspaceReady`: creates `config.remoteWorkspacePath` on the host and
 * resolves `{ remoteCwd }` as the remote `pwd` prints it, on a pooled in-process session
 * (upstream's starts a host `ssh`).
 */
export declare function ensureSshWorkspaceReady(config: SshConnectionConfig): Promise<{
  remoteCwd: string;
}>;
/**
 * Upstream's `createSshCommandManagedRuntimeRunner`: a runner whose `execute` runs each
 * command on the host (in `cwd`, default `defaultCwd` or `spec.remoteCwd`, with its `env`
 * and `stdin`) through {@link runSshCommand}, so on a pooled in-process session; output
 * bounded by `maxBufferBytes` (default 1 MiB); upstream's result shape, failures included.
 */
export declare function createSshCommandManagedRuntimeRunner(input: {
  spec: SshRemoteExecutionSpec;
  defaultCwd?: string | null;
  maxBufferBytes?: number | null;
}): import("./command-managed-runtime.js").CommandManagedRuntimeRunner;
