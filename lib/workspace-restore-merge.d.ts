/** One entry of a directory snapshot. `mode` is the full `st_mode` (type bits included). */
export type SnapshotEntry =
  | {
      kind: "dir";
    }
  | {
      kind: "file";
      mode: number;
      hash: string;
    }
  | {
      kind: "symlink";
      target: string;
    };
/** A captured tree: the exclude list it was taken with and its entries in walk order. */
export interface DirectorySnapshot {
  exclude: string[];
  entries: Map<string, SnapshotEntry>;
}
/** The durable form of a snapshot (entries sorted by path with `localeCompare`). */
export interface SerializedDirectorySnapshot {
  version: 1;
  exclude: string[];
  entries: Array<[string, SnapshotEntry]>;
}
/** Options of {@link captureDirectorySnapshot}; everything but `exclude` is our addition. */
export interface CaptureDirectorySnapshotOptions {
  /** Upstream exclude entries (`X`, `X/*`, `*\/X`, `*\/X/*`), matched before any `lstat`. */
  exclude?: string[];
  /** Aborting rejects the capture promptly with an `AbortError`. */
  signal?: AbortSignal;
  /**
   * Opt-in: keep the stat data of this capture beside the snapshot so a later capture
   * with `previous: snapshot` can reuse its hashes.
   */
  incremental?: boolean;
  /**
   * Opt-in: reuse the hashes of `previous` (a snapshot captured with `incremental: true`
   * or `previous`) for files whose `(dev, ino, size, mtime, ctime, mode)` did not change;
   * files modified within 2 s before that capture started are re-read (git's racy-clean
   * rule). The result is identical to a cold capture. Implies `incremental`.
   */
  previous?: DirectorySnapshot;
  /**
   * Opt-in: serve this capture from the process-wide watcher of this root and exclude
   * list (created on first use; what `PAPERCLIP_NATIVE_WATCH_SNAPSHOTS=1` does for every
   * capture): the same result, and a repeat capture re-reads only what changed. Only for
   * an absolute `rootDir` without `incremental`/`previous`; otherwise ignored.
   */
  watch?: boolean;
}
/**
 * Walks `rootDir` (symlinks never followed; sockets, FIFOs and devices skipped; unreadable
 * directories read as empty; a missing root gives an empty snapshot) and hashes every
 * regular file with SHA-256, in parallel. Entries are in upstream's order: pre-order,
 * siblings by `localeCompare` in the process locale. `lstat`, `readlink` and read errors
 * reject with Node's `code` (`ENOENT`, `EACCES`, …).
 */
export declare function captureDirectorySnapshot(
  rootDir: string,
  options?: CaptureDirectorySnapshotOptions,
): Promise<DirectorySnapshot>;
/** The durable form of a snapshot: `{ version: 1, exclude, entries }`, entries sorted by path. */
export declare function serializeDirectorySnapshot(snapshot: DirectorySnapshot): SerializedDirectorySnapshot;
/**
 * Validates and revives a serialized snapshot: `null` for anything malformed, including an
 * absolute path, a `..` segment or a duplicate path.
 */
export declare function parseDirectorySnapshot(value: unknown): DirectorySnapshot | null;
/** Hex SHA-256 of the JSON of {@link serializeDirectorySnapshot}; equal to upstream's digest. */
export declare function directorySnapshotSha256(snapshot: DirectorySnapshot): string;
/** True when the entry at `rootDir/relative` still equals `baselineEntry` (kind, mode, hash, target). */
export declare function directoryEntryMatchesBaseline(
  rootDir: string,
  relative: string,
  baselineEntry: SnapshotEntry,
): Promise<boolean>;
/** The environment the merge lock reads `PAPERCLIP_HOME` and `PAPERCLIP_INSTANCE_ID` from. */
export interface DirectoryMergeLockEnv {
  [name: string]: string | undefined;
}
/**
 * Runs `fn(canonicalTargetDir)` while holding the directory-merge lock of `targetDir`, and
 * resolves to its result. Upstream's protocol exactly, so this lock and upstream's
 * TypeScript lock exclude each other, in one process or across processes:
 * `realpath(targetDir)` must exist (else `ENOENT`); the lock is the directory
 * `<PAPERCLIP_HOME>/instances/<PAPERCLIP_INSTANCE_ID>/locks/directory-merge/<sha256(realpath)>.lock`
 * with an `owner.json` (`{pid, createdAt}`), read from `env` only (default `process.env`;
 * home `~/.paperclip`, instance `default`). The lock root must be a plain directory
 * (`... is not a plain directory.` otherwise) and is created with mode 0700. A lock whose
 * owner pid is dead (`kill(pid, 0)` fails, EPERM included) or, without a readable
 * `owner.json`, whose directory is older than 30 s is taken over. Waiters poll every
 * 50 ms; after 30 s they reject with `code` {@link WORKSPACE_RESTORE_LOCK_TIMEOUT_CODE}.
 * There is no in-process mutex and no re-entrancy: a nested call on the same target
 * times out. The lock is released (its directory removed) when `fn` settles.
 */
export declare function withDirectoryMergeLock<T>(
  targetDir: string,
  fn: (canonicalTargetDir: string) => Promise<T>,
  env?: DirectoryMergeLockEnv,
): Promise<T>;
/** Input of {@link mergeDirectoryWithBaseline}; `conflictPolicy` and `refuseEmptySource` are our opt-in additions. */
export interface MergeDirectoryWithBaselineInput {
  /** The host tree as captured before the remote run (its `exclude` list applies to both captures). */
  baseline: DirectorySnapshot;
  /** The materialised remote result. */
  sourceDir: string;
  /** The host workspace (must exist; the lock protects its real path). */
  targetDir: string;
  /** Awaited inside the lock before the host tree is captured. */
  beforeApply?: () => Promise<void>;
  /** Awaited inside the lock after the changes are applied (not after a failure). */
  afterApply?: () => Promise<void>;
  /**
   * `"overwrite"` (default, upstream's): the remote wins for every path it changed.
   * `"reject"`: before changing anything, refuse with an `Error` whose `code` is
   * `"DIRECTORY_MERGE_CONFLICT"` (message `Directory contents changed concurrently`,
   * name `DirectoryMergeConflict`) and whose `paths` lists, sorted, every path that both
   * sides changed since the baseline to different results (a host creation or deletion
   * counts), plus every host-added or host-changed entry below a host directory the
   * remote replaces with a file or symlink. A remote deletion of a host-edited file is
   * not a conflict (the merge keeps the host's file). `afterApply` is not called.
   */
  conflictPolicy?: "overwrite" | "reject";
  /**
   * Opt-in guard (Mutagen's root-emptying safety): when the captured source has no entries
   * but the baseline has some, reject with `code` `"ERR_PAPERCLIP_NATIVE_EMPTY_SOURCE"`
   * before taking the lock; no hook runs and nothing changes. Without it an emptied or
   * missing source deletes every host file that still matches the baseline (upstream).
   */
  refuseEmptySource?: boolean;
}
/**
 * Three-way merge of a remote result into the host workspace, upstream's semantics:
 * captures `sourceDir` (outside the lock), then inside {@link withDirectoryMergeLock}
 * awaits `beforeApply`, captures the host tree, deletes the files and symlinks the remote
 * deleted that the host still holds unchanged, removes the directories the remote deleted
 * when empty (never recursively), applies every source entry that differs from the
 * baseline (the remote wins; files reflinked or copied with their mode, symlinks
 * recreated with their raw target), and awaits `afterApply`. Host-only files and host
 * edits the remote did not touch survive. Runs natively and in parallel.
 *
 * Safety (always on): nothing is written, deleted or linked through a symlinked directory
 * of the target; where upstream would do so the merge is refused before any change with
 * `code` `"ERR_PAPERCLIP_NATIVE_SYMLINKED_ANCESTOR"` and `paths` (the symlinks), and a
 * symlink planted during the merge fails the operation that meets it with the same code.
 * A `sourceDir` holding a name this library reserves (its staging directories and key, at
 * any depth) is refused before any change with `ERR_PAPERCLIP_NATIVE_UNSAFE_ARCHIVE_ENTRY`.
 * A file is copied to a staged sibling and renamed into place, so a failed copy keeps the
 * host's version. File-system failures reject with Node's `code` (`EACCES`, `EPERM`,
 * `ENOTDIR`, …), so {@link classifyWorkspaceRestoreFailure} maps them as upstream does.
 * When several entries fail, the error reported is the one upstream would meet first (the
 * least path in `localeCompare` order); unlike upstream, which stops there, the other
 * changed entries are still applied. The lock is released on any failure; the merge is
 * not atomic (as upstream).
 */
export declare function mergeDirectoryWithBaseline(input: MergeDirectoryWithBaselineInput): Promise<void>;
/** The stable `code` of a merge-lock timeout. */
export declare const WORKSPACE_RESTORE_LOCK_TIMEOUT_CODE = "ERR_WORKSPACE_RESTORE_LOCK_TIMEOUT";
/** The allowlisted restore failure categories. */
export type WorkspaceRestoreFailureCode = "restore_permission_denied" | "restore_lock_timeout" | "restore_failed";
/** The outcome of one workspace restore. */
export type WorkspaceRestoreOutcome =
  | {
      readonly ok: true;
    }
  | {
      readonly ok: false;
      readonly code: WorkspaceRestoreFailureCode;
    };
/**
 * Classifies a caught restore error by its `code` only: `EACCES`/`EPERM` → permission
 * denied, the lock-timeout code → lock timeout, anything else → failed.
 */
export declare function classifyWorkspaceRestoreFailure(error: unknown): WorkspaceRestoreFailureCode;
/** The fixed log line for a restore failure category (never an error message or path). */
export declare function describeWorkspaceRestoreFailure(code: WorkspaceRestoreFailureCode): string;
