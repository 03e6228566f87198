/**
 * A referenced project's resolved Git-ignore set: `git` with the ignored paths relative to
 * the project directory, `other` for a directory that is not in a Git repository, `failed`
 * with one of {@link REFERENCED_SOURCE_IGNORE_FAILURE_REASONS} (never a raw diagnostic).
 */
export type ReferencedSourceIgnoreResolution = {
    kind: "git";
    ignoredPaths: string[];
} | {
    kind: "other";
} | {
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
export declare function resolveReferencedSourceIgnore(localPath: string, options?: ResolveReferencedSourceIgnoreOptions): Promise<ReferencedSourceIgnoreResolution>;
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
 * copy children into a target directory that is a symlink to a directory.
 */
export declare function mirrorDirectory(sourceDir: string, targetDir: string, options?: MirrorDirectoryOptions): Promise<void>;
/**
 * Throws unless every mapping's `sourcePath` lies in (or equals) one of
 * `roots.sourceRoots` and every `targetPath` one of `roots.targetRoots`, after POSIX
 * normalisation (`sync operation <source|target> path is not a confined absolute path: <p>`
 * / `sync operation <source|target> path escapes its confinement root: <p>`).
 */
export declare function assertSyncOperationsConfined(operations: readonly {
    files: readonly { sourcePath: string; targetPath: string }[];
}[], roots: {
    sourceRoots: readonly string[];
    targetRoots: readonly string[];
}): void;
