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
