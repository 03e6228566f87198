import type {
  SandboxSyncOperation,
  SandboxSyncResult,
  SandboxTransferProgressOptions,
} from "./command-managed-runtime.js";
import type { GitWorkspaceSnapshot } from "./git-workspace-sync.js";
import type { RuntimeProgressSink, RuntimeStatusSink } from "./runtime-progress.js";
import type { DirectorySnapshot } from "./workspace-restore-merge.js";
import type { ExtractLimits } from "./tar-stream.js";
/**
 * A referenced project's resolved Git-ignore set: `git` with the ignored paths relative to
 * the project directory, `other` for a directory that is not in a Git repository, `failed`
 * with one of {@link REFERENCED_SOURCE_IGNORE_FAILURE_REASONS} (never a raw diagnostic).
 */
export type ReferencedSourceIgnoreResolution =
  | {
      kind: "git";
      ignoredPaths: string[];
    }
  | {
      kind: "other";
    }
  | {
      kind: "failed";
      reason: string;
    };
/** The only reasons a failed ignore resolution may carry. */
export declare const REFERENCED_SOURCE_IGNORE_FAILURE_REASONS: {
  /** A Git read failed, timed out, was cancelled, or returned malformed output. */
  readonly scanFailed: "git-ignore-scan-failed";
  /** The ignored-entry count or total UTF-8 byte size breached its bound. */
  readonly limitExceeded: "git-ignore-scan-limit-exceeded";
  /** The project's `localPath` is not a descendant of its own Git top level. */
  readonly toplevelNotDescendant: "git-toplevel-not-descendant";
};
/**
 * Escapes a literal path for a tar `--exclude` value: every `\` is doubled, then `*`, `?`
 * and `[` get a `\` in front, so GNU tar and bsdtar match only the literal name.
 * `]`, `^`, `$`, `{` and `-` are left as they are (as upstream).
 */
export declare function escapeTarExcludeLiteral(entry: string): string;
/**
 * The tar `--exclude` entries a referenced project's ignore resolution contributes: its
 * ignored paths escaped with {@link escapeTarExcludeLiteral} for `git`, `[]` otherwise.
 */
export declare function referencedSourceIgnoreExcludeEntries(resolution: ReferencedSourceIgnoreResolution): string[];
/**
 * Concatenates the exclude groups in order, skipping absent ones, and removes duplicates
 * keeping the first occurrence (the order is the tar argv order).
 */
export declare function mergeExcludes(...groups: Array<string[] | undefined>): string[];
/** Options of {@link resolveReferencedSourceIgnore} (our addition). */
export interface ResolveReferencedSourceIgnoreOptions {
  /** Aborting rejects the resolution with an `AbortError` (instead of a `failed` result). */
  signal?: AbortSignal;
}
/**
 * Resolves a referenced project's git-ignored paths once, for every staging site:
 * `{ kind: "git", ignoredPaths }` relative to `localPath` (sorted with `localeCompare`),
 * `{ kind: "other" }` outside a git work tree, or `{ kind: "failed", reason }` with one of
 * {@link REFERENCED_SOURCE_IGNORE_FAILURE_REASONS} — never a message, path or pid.
 *
 * Fails closed: a read error, a timeout, a bound breach or a `localPath` that is not below
 * its own toplevel is a failure, never an empty list. Only a saturated host scan queue
 * (`code` `workspace_git_scan_saturated`) is retried: three attempts in all, after 1 s and
 * 2 s on the JS timers. An entry equal to `localPath` itself (the whole project ignored) is
 * dropped, as upstream does.
 */
export declare function resolveReferencedSourceIgnore(
  localPath: string,
  options?: ResolveReferencedSourceIgnoreOptions,
): Promise<ReferencedSourceIgnoreResolution>;
/**
 * Archives the entries of `localDir` into the file `archivePath`, in-process, with exactly
 * the members upstream's `tar -c --no-xattrs [-h] -C localDir --exclude ._* --exclude <each>
 * -- <entries sorted with localeCompare>` archives: no `./` self-entry, names `entry/...`,
 * `exclude` values with GNU tar's `--exclude` semantics (unanchored, globs, `\` escapes), no
 * xattrs, no compression. An empty directory gives 1024 zero bytes.
 *
 * The archive is written to a temporary file beside `archivePath` and renamed into place,
 * so `archivePath` is either untouched or complete. Where upstream's archive would differ:
 * hard links are stored as separate files, there is no padding to 10 240-byte records, and a
 * top-level name with a backslash is archived (GNU tar unquotes it and fails).
 *
 * Errors: a `readdir` failure of `localDir` as upstream (Node's `ENOENT`, …); file-system
 * failures with Node's codes; `ERR_PAPERCLIP_NATIVE_NON_UTF8_NAME` for a name that is not
 * UTF-8; `ERR_PAPERCLIP_NATIVE_SYMLINK_LOOP` for a link cycle under `followSymlinks`;
 * an `AbortError` when `signal` aborts (our addition), leaving no file behind.
 */
export declare function createTarballFromDirectory(input: {
  localDir: string;
  archivePath: string;
  exclude?: string[];
  followSymlinks?: boolean;
  /** Our addition: aborts the pack (rejects with an `AbortError`, no archive left). */
  signal?: AbortSignal;
}): Promise<void>;
/** Options of {@link mirrorDirectory}. */
export interface MirrorDirectoryOptions {
  /** Target paths (and everything below them) kept even though the source lacks them. */
  preserveAbsent?: string[];
}
/**
 * Makes `targetDir` (created if missing) a copy of `sourceDir`, upstream's semantics:
 * target entries the source lacks are removed (`rm -rf`, longest path first) unless they
 * are or lie below a `preserveAbsent` path; then each source entry is copied in
 * `localeCompare` order: directories created, symlinks recreated, files copied (reflink
 * first) to a staged sibling `<target>.paperclip-copy.<uuid>`, given the source mode, and
 * renamed into place (the staged sibling never survives a failure). Symlinks are never
 * followed while listing. Refuses (`code` `"ERR_PAPERCLIP_NATIVE_SYMLINKED_ANCESTOR"`) to
 * copy children into a target directory that is a symlink to a directory, and, before any
 * change, a source holding a name this library reserves (its staging directories and key,
 * at any depth; `code` `"ERR_PAPERCLIP_NATIVE_UNSAFE_ARCHIVE_ENTRY"`).
 */
export declare function mirrorDirectory(
  sourceDir: string,
  targetDir: string,
  options?: MirrorDirectoryOptions,
): Promise<void>;
/**
 * Throws unless every mapping's `sourcePath` lies in (or equals) one of
 * `roots.sourceRoots` and every `targetPath` one of `roots.targetRoots`, after POSIX
 * normalisation (`sync operation <source|target> path is not a confined absolute path: <p>`
 * / `sync operation <source|target> path escapes its confinement root: <p>`).
 */
export declare function assertSyncOperationsConfined(
  operations: readonly {
    files: readonly { sourcePath: string; targetPath: string }[];
  }[],
  roots: {
    sourceRoots: readonly string[];
    targetRoots: readonly string[];
  },
): void;
/** The sandbox a runtime runs in (upstream's `SandboxRemoteExecutionSpec`). */
export interface SandboxRemoteExecutionSpec {
  transport: "sandbox";
  provider: string;
  sandboxId: string;
  remoteCwd: string;
  timeoutMs: number;
  apiKey: string | null;
}
/** What a sandbox client offers (upstream's `SandboxManagedRuntimeClient`). */
export interface SandboxManagedRuntimeClient {
  makeDir(remotePath: string): Promise<void>;
  writeFile(remotePath: string, bytes: ArrayBuffer, options?: SandboxTransferProgressOptions): Promise<void>;
  readFile(remotePath: string, options?: SandboxTransferProgressOptions): Promise<Buffer | Uint8Array | ArrayBuffer>;
  listFiles(remotePath: string): Promise<string[]>;
  remove(remotePath: string): Promise<void>;
  run(command: string, options: { timeoutMs: number }): Promise<void>;
  allowConcurrentSyncOperations?: boolean;
  syncIn?(operations: SandboxSyncOperation[]): Promise<SandboxSyncResult>;
  syncOut?(operations: SandboxSyncOperation[]): Promise<SandboxSyncResult>;
}
/** A runtime asset: a host directory staged into `<runtimeRoot>/<key>`. */
export interface SandboxManagedRuntimeAsset {
  /** A simple path segment, not `workspace` or `git-workspace`. */
  key: string;
  localDir: string;
  followSymlinks?: boolean;
  exclude?: string[];
  /** Helper files staged next to the asset archive and the command that places it. */
  provision?: {
    stageFiles?: { name: string; contents: Buffer | string }[];
    postUploadCommand?: (ctx: { assetTarPath: string; assetDir: string; runtimeRootDir: string }) => string;
  };
  /** Called by `restoreWorkspace()` to bring the asset's changes back. */
  restore?: (ctx: {
    assetDir: string;
    readFile: (remotePath: string) => Promise<Buffer>;
    tempDir?: string;
  }) => Promise<void>;
}
/** A referenced project staged read-only into `<runtimeRoot>/project-<projectId>`. */
export interface SandboxAdditionalSource {
  localPath: string;
  projectId: string;
  ignoreResolution: ReferencedSourceIgnoreResolution;
}
/** How the workspace reaches the sandbox. */
export type WorkspaceInboundMode = "host_current" | "durable_seed" | "adopt_remote";
/** Archives of a workspace kept on the host for later runs. */
export interface WorkspaceDurableSeedPaths {
  workspaceArchivePath: string;
  workspaceArchiveSha256?: string;
  gitArchivePath?: string | null;
  gitArchiveSha256?: string | null;
}
/** A referenced project that could not be staged, and why. */
export interface AdditionalSourceStagingFailure {
  projectId: string;
  error: string;
}
/** A prepared runtime; `restoreWorkspace()` brings the run's work back. */
export interface PreparedSandboxManagedRuntime {
  spec: SandboxRemoteExecutionSpec;
  workspaceLocalDir: string;
  workspaceRemoteDir: string;
  runtimeRootDir: string;
  assetDirs: Record<string, string>;
  additionalSourceDirs: Record<string, string>;
  additionalSourceFailures: AdditionalSourceStagingFailure[];
  workspaceSyncSnapshot: { baseline: DirectorySnapshot; gitSnapshot: GitWorkspaceSnapshot | null } | null;
  /**
   * Brings the sandbox workspace back (git history as a delta bundle, then the tree read
   * slice by slice into the safe extractor) and merges it three-way into the host
   * workspace; then each asset's `restore`. A hostile archive is refused
   * (`ERR_PAPERCLIP_NATIVE_UNSAFE_ARCHIVE_ENTRY` / `ERR_PAPERCLIP_NATIVE_BAD_ARCHIVE`) and
   * leaves the workspace untouched.
   */
  restoreWorkspace(onProgress?: RuntimeProgressSink): Promise<void>;
}
/** A span wrapper for the steps (`snapshot.git`, `pack`, `stage.workspace`, …). */
export type RuntimeSpanRunner = <T>(name: string, work: () => Promise<T>) => Promise<T>;
/**
 * Upstream's sandbox staging: the workspace (git-backed: a depth-1 HEAD clone plus the
 * working-tree overlay and the deletions; plain: the tree), each asset and each referenced
 * project through `client.syncIn` (confined, with the run timeout on every post-upload
 * command; at most 4 at once when the client allows concurrency), with upstream's modes,
 * progress lines, statuses and errors. Archives are packed in-process (no host `tar`); with
 * our command-managed client on its fallback transport they are packed straight into the
 * upload and never written to the host.
 */
export declare function prepareSandboxManagedRuntime(input: {
  spec: SandboxRemoteExecutionSpec;
  adapterKey: string;
  client: SandboxManagedRuntimeClient;
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
