/** One entry of a directory snapshot. `mode` is the full `st_mode` (type bits included). */
export type SnapshotEntry = {
    kind: "dir";
} | {
    kind: "file";
    mode: number;
    hash: string;
} | {
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
}
/**
 * Walks `rootDir` (symlinks never followed; sockets, FIFOs and devices skipped; unreadable
 * directories read as empty; a missing root gives an empty snapshot) and hashes every
 * regular file with SHA-256, in parallel. Entries are in upstream's order: pre-order,
 * siblings by `localeCompare` in the process locale. `lstat`, `readlink` and read errors
 * reject with Node's `code` (`ENOENT`, `EACCES`, …).
 */
export declare function captureDirectorySnapshot(rootDir: string, options?: CaptureDirectorySnapshotOptions): Promise<DirectorySnapshot>;
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
export declare function directoryEntryMatchesBaseline(rootDir: string, relative: string, baselineEntry: SnapshotEntry): Promise<boolean>;
/** The stable `code` of a merge-lock timeout. */
export declare const WORKSPACE_RESTORE_LOCK_TIMEOUT_CODE = "ERR_WORKSPACE_RESTORE_LOCK_TIMEOUT";
/** The allowlisted restore failure categories. */
export type WorkspaceRestoreFailureCode = "restore_permission_denied" | "restore_lock_timeout" | "restore_failed";
/** The outcome of one workspace restore. */
export type WorkspaceRestoreOutcome = {
    readonly ok: true;
} | {
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
