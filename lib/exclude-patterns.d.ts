/**
 * True when `relative` equals `candidate` or lies below it (`relative` starts with
 * `candidate + "/"`). POSIX relative paths; no glob characters are interpreted.
 */
export declare function isRelativePathOrDescendant(relative: string, candidate: string): boolean;
/**
 * Upstream's exclude matcher for one pattern:
 * - `*\/X/*` and `*\/X` match the segment `X` anywhere (and everything below it);
 * - `X/*` matches what lies below the root-anchored `X`, not `X` itself;
 * - anything else is a literal, root-anchored path-or-descendant match (`*.log` matches
 *   only a path literally named `*.log`).
 */
export declare function excludePatternMatches(relative: string, pattern: string): boolean;
/** True when any entry of `exclude` matches `relative` (see {@link excludePatternMatches}). */
export declare function shouldExcludePath(relative: string, exclude: readonly string[]): boolean;
