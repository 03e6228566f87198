import type { GitWorkspaceSnapshot } from "./git-workspace-sync.js";
import type { RuntimeProgressSink, RuntimeStatusSink } from "./runtime-progress.js";
import type {
  PreparedSandboxManagedRuntime,
  RuntimeSpanRunner,
  SandboxAdditionalSource,
  SandboxManagedRuntimeAsset,
  WorkspaceDurableSeedPaths,
  WorkspaceInboundMode,
} from "./sandbox-managed-runtime.js";
import type { DirectorySnapshot } from "./workspace-restore-merge.js";
import type { ExtractLimits } from "./tar-stream.js";
/** One host → sandbox (or sandbox → host) file mapping of a sync operation. */
export interface SandboxSyncFileMapping {
  sourcePath: string;
  targetPath: string;
  kind: "file" | "directory";
  /** POSIX mode applied (`chmod`) to a placed file. */
  mode?: number;
  /** Exclude patterns for a directory mapping (GNU tar `--exclude` semantics). */
  exclude?: string[];
  /** Archive what symlinks point at instead of the links (directory mappings). */
  followSymlinks?: boolean;
  access?: "rw" | "ro";
  writablePath?: string;
}
/** A command the sandbox runs after an operation's files are placed. */
export interface SandboxPostUploadCommand {
  command: string;
  cwd?: string;
  timeoutMs?: number;
}
/** One sync operation: files placed, then its post-upload commands run in order. */
export interface SandboxSyncOperation {
  operationId: string;
  files: SandboxSyncFileMapping[];
  postUploadCommands?: SandboxPostUploadCommand[];
}
/** Per-operation counts of a sync. */
export interface SandboxSyncResult {
  operations: {
    operationId: string;
    filesTransferred: number;
    bytesTransferred: number;
  }[];
}
/** Transfer progress: `(bytes so far, total or null)`. */
export interface SandboxTransferProgressOptions {
  onProgress?: (transferredBytes: number, totalBytes: number | null) => void | Promise<void>;
}
/** What `execute` resolves with. */
export interface CommandResult {
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  stdout: string;
  stderr: string;
  pid: number | null;
  startedAt: string | null;
}
/** A persistent bidirectional channel to one command in the sandbox. */
export interface CommandManagedDuplexChannel {
  write(data: Uint8Array): void;
  onData(listener: (chunk: Uint8Array) => void): void;
  onExit(listener: (exit: { exitCode: number | null; transportClosed?: boolean }) => void): void;
  stop(): void;
  close(): Promise<void>;
}
/** What runs commands in the sandbox (upstream's `CommandManagedRuntimeRunner`). */
export interface CommandManagedRuntimeRunner {
  /** Native runners: the provider allows concurrent sync operations. */
  allowConcurrentSyncOperations?: boolean;
  /** `execute({ stdin })` reports useful progress for one long stdin (enables the single-stream upload). */
  supportsSingleStreamStdinProgress?: boolean;
  /**
   * Our addition: uploads may go through `openDuplexChannel` (one channel per file, raw
   * bytes, acknowledged 4 MiB blocks, the sandbox needs `dd iflag=fullblock`). Off unless
   * `true`, since a provider may grant the channel for other uses only.
   */
  supportsDuplexFileTransfer?: boolean;
  execute(input: {
    command: string;
    args?: string[];
    cwd?: string;
    env?: Record<string, string>;
    stdin?: string;
    timeoutMs?: number;
    onLog?: (stream: "stdout" | "stderr", chunk: string) => Promise<void>;
    onSpawn?: (meta: { pid: number; startedAt: string }) => Promise<void>;
    useSession?: boolean;
    bypassSession?: boolean;
  }): Promise<CommandResult>;
  syncIn?(operations: SandboxSyncOperation[]): Promise<SandboxSyncResult>;
  syncOut?(operations: SandboxSyncOperation[]): Promise<SandboxSyncResult>;
  openDuplexChannel?(input: { command: readonly string[] }): Promise<CommandManagedDuplexChannel>;
}
/** The client `createCommandManagedRuntimeClient` returns. */
export interface CommandManagedRuntimeClient {
  makeDir(remotePath: string): Promise<void>;
  writeFile(remotePath: string, bytes: ArrayBuffer, options?: SandboxTransferProgressOptions): Promise<void>;
  readFile(remotePath: string, options?: SandboxTransferProgressOptions): Promise<Buffer>;
  listFiles(remotePath: string): Promise<string[]>;
  remove(remotePath: string): Promise<void>;
  run(command: string, options: { timeoutMs: number }): Promise<void>;
  allowConcurrentSyncOperations?: boolean;
  syncIn?(operations: SandboxSyncOperation[]): Promise<SandboxSyncResult>;
  syncOut?(operations: SandboxSyncOperation[]): Promise<SandboxSyncResult>;
  /**
   * Our addition: uploads an (async) iterable of byte chunks yielding exactly
   * `options.totalBytes` bytes, slice by slice (a different count fails the upload and
   * leaves no remote file).
   */
  writeStream(
    remotePath: string,
    source: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
    options: SandboxTransferProgressOptions & { totalBytes: number },
  ): Promise<void>;
  /** Our addition: a remote file's bytes as 3 MiB slices (same probe, errors and progress as `readFile`), or 4 MiB blocks through the duplex channel when the runner opted in (a missing file is then a plain failure, not `ENOENT`). */
  readStream(remotePath: string, options?: SandboxTransferProgressOptions): AsyncIterable<Buffer>;
}
/**
 * Throws unless every post-upload command `cwd` that is given is an absolute POSIX path
 * without a `..` segment, equal to or below one of its operation's `targetPath`s
 * (`post-upload command cwd is not a confined absolute POSIX path: <cwd>` /
 * `post-upload command cwd escapes the operation's target root: <cwd>`).
 */
export declare function assertPostUploadCommandsConfined(operations: readonly SandboxSyncOperation[]): void;
/**
 * A sandbox client over `input.runner`, upstream's protocol: scripts run as
 * `[sh|bash, "-c", script]` in `commandCwd` under `timeoutMs` and fail with
 * `<script> failed with exit code <n>` plus the stderr/stdout tails; `writeFile` stages to
 * `<path>.paperclip-upload.<uuid>` through one `base64 -d` process (≤ 96 MiB of base64,
 * runner with `supportsSingleStreamStdinProgress`) or 3 MiB chunks and renames it into
 * place; `readFile` probes `wc -c` and reads 3 MiB `dd | base64` slices (a missing file is
 * `ENOENT`); `syncIn` always exists (native when the runner has both `syncIn` and
 * `syncOut`, else the fallback), `syncOut` only natively.
 *
 * Differences: bytes are encoded and decoded one 3 MiB slice at a time (never a whole
 * archive at once); the fallback `syncIn` packs directory mappings with the in-process
 * streaming pack straight into the upload (no host `tar`, no host temp file) and streams
 * file mappings from disk; `writeStream`/`readStream` and `supportsDuplexFileTransfer` are
 * our additions.
 */
export declare function createCommandManagedRuntimeClient(input: {
  runner: CommandManagedRuntimeRunner;
  commandCwd: string;
  timeoutMs: number;
  shellCommand?: "bash" | "sh" | null;
}): CommandManagedRuntimeClient;
/** Where and how the command-managed runtime runs. */
export interface CommandManagedRuntimeSpec {
  providerKey?: string | null;
  shellCommand?: "bash" | "sh" | null;
  leaseId?: string | null;
  remoteCwd: string;
  timeoutMs?: number | null;
}
/**
 * Upstream's `prepareCommandManagedRuntime`: our client over `runner` (commands from `/`,
 * `spec.timeoutMs` or 300 000 ms), an optional `installCommand` (skipped when `command -v
 * <detectCommand>` succeeds; a failure only warns), then {@link prepareSandboxManagedRuntime}
 * with `.paperclip-runtime` added to the workspace excludes.
 */
export declare function prepareCommandManagedRuntime(input: {
  runner: CommandManagedRuntimeRunner;
  spec: CommandManagedRuntimeSpec;
  adapterKey: string;
  workspaceLocalDir: string;
  workspaceRemoteDir?: string;
  syncWorkspace?: boolean;
  workspaceInboundMode?: WorkspaceInboundMode;
  workspaceDurableSeed?: WorkspaceDurableSeedPaths;
  workspaceBaseline?: DirectorySnapshot;
  workspaceGitSnapshot?: GitWorkspaceSnapshot | null;
  workspaceExclude?: string[];
  preserveAbsentOnRestore?: string[];
  assets?: SandboxManagedRuntimeAsset[];
  additionalSources?: SandboxAdditionalSource[];
  installCommand?: string | null;
  detectCommand?: string | null;
  onProgress?: RuntimeProgressSink;
  onRuntimeProgress?: RuntimeStatusSink;
  runtimeSpan?: RuntimeSpanRunner;
  /**
   * Our addition: aborting stops the prepare (and the later `restoreWorkspace()`) between
   * steps and inside every pack and extraction, rejecting with an `AbortError`; a remote
   * command already running ends under its own timeout.
   */
  signal?: AbortSignal;
  /**
   * Our addition: bounds for the archive `restoreWorkspace()` extracts from the sandbox and
   * the host free-space floor (see `ExtractLimits`); a breach rejects before anything past
   * the bound is written and leaves the workspace unchanged.
   */
  limits?: ExtractLimits;
}): Promise<PreparedSandboxManagedRuntime>;
