
/**
 * Which binding artifact the generated loader actually loaded: `'native'` for
 * a native addon, otherwise the `platformArchABI` of the WASI flavor. Every
 * flavor napi-rs can build is listed, because `NAPI_RS_NATIVE_LIBRARY_PATH`
 * can point the loader at a WASI artifact this package does not build itself.
 */
export declare const __napiBindingTarget: 'native' | 'wasm32-wasi' | 'wasm32-wasip1'

/** Stat data and hashes of a previous capture, for an incremental capture (internal). */
export declare class SnapshotStatCache {
  /** Files whose hashes this cache can offer. */
  get size(): number
}

/** Signals the token's work to stop (internal). */
export declare function cancelTokenAbort(id: number): void

/** Creates a cancellation token and returns its id (internal; used by the JS layer). */
export declare function cancelTokenCreate(): number

/** Forgets a token once its call settled (internal). */
export declare function cancelTokenRelease(id: number): void

/** The content signature of a tree (internal; see `referencedSourceContentSignature`). */
export declare function contentSignature(root: string, ignoredPaths: Array<string>, cancelId?: number | undefined | null): Promise<string>

/**
 * Upstream `escapeTarExcludeLiteral`: doubles each backslash, then escapes `*`, `?` and `[`
 * so that tar reads the entry as a literal name.
 */
export declare function escapeTarExcludeLiteral(entry: string): string

/**
 * Upstream `excludePatternMatches`: `*\/X/*` and `*\/X` match the segment `X` at any depth
 * (and below it), `X/*` matches what lies below the root-anchored `X`, and any other pattern
 * is a literal, root-anchored path-or-descendant match.
 */
export declare function excludePatternMatches(relative: string, pattern: string): boolean

/**
 * The user environment git would see (internal): only `HOME` and `XDG_CONFIG_HOME` change
 * what the hardened command reads (the default excludes file). The JS layer passes them
 * from `process.env` at call time, as upstream's hardened env copies it.
 */
export interface IgnoreScanEnv {
  home?: string
  xdgConfigHome?: string
}

/**
 * The ignored records of `local_dir`, `null` when it is not inside a git work tree
 * (internal; see `readReferencedSourceGitIgnoredPaths`). Only upstream's raw-output
 * allowance is enforced here; the entry and byte bounds are applied by the JS parser.
 */
export declare function ignoreScanList(localDir: string, env: IgnoreScanEnv, cancelId?: number | undefined | null): Promise<IgnoreScanListing | null>

/** A listing in transfer form (internal). */
export interface IgnoreScanListing {
  /** The work-tree top, as `git rev-parse --show-toplevel` prints it (trimmed). */
  toplevel: string
  /**
   * The ignored records in git's order, each followed by a NUL (like git's `-z` output,
   * trailing slashes already stripped).
   */
  records: string
}

/**
 * The work-tree top of `local_dir`, `null` when it is not inside a git work tree
 * (internal; see `readReferencedSourceGitIgnoredPaths`).
 */
export declare function ignoreScanToplevel(localDir: string): Promise<string | null>

/** True when `relative` equals `candidate` or lies below it (`candidate + "/"` prefix). */
export declare function isRelativePathOrDescendant(relative: string, candidate: string): boolean

/**
 * Upstream `mergeExcludes`, taking the groups as one array: concatenated in order, absent
 * groups skipped, duplicates removed with the first occurrence kept.
 */
export declare function mergeExcludeGroups(groups: Array<Array<string> | undefined | null>): Array<string>

/** Upstream `shouldExcludePath`: true when any entry of `exclude` matches `relative`. */
export declare function shouldExcludePath(relative: string, exclude: Array<string>): boolean

/** Captures the tree under `root` (internal; see `captureDirectorySnapshot`). */
export declare function snapshotCapture(root: string, exclude: Array<string>, previous: SnapshotStatCache | undefined | null, keepCache: boolean, cancelId?: number | undefined | null): Promise<SnapshotTransfer>

/** One entry read for a baseline comparison (internal; see `directoryEntryMatchesBaseline`). */
export interface SnapshotEntryTransfer {
  /** `dir`, `file` or `symlink`. */
  kind: string
  mode?: number
  hash?: string
  target?: string
}

/**
 * Reads the entry at `root/relative`, `null` when it is missing or not a
 * directory/symlink/regular file (internal).
 */
export declare function snapshotReadEntry(root: string, relative: string): Promise<SnapshotEntryTransfer | null>

/**
 * A capture in transfer form (internal). Node `i` has kind `kinds[i]` (0 skipped, 1 dir,
 * 2 file, 3 symlink), name `names.split("\0")[i]`, mode `modes[i]`, and children
 * `childStart[i]..childEnd[i]`; files' hashes are 64 hex digits each in node order in
 * `hashes`, symlinks' targets are `\0`-joined in node order in `targets`.
 */
export interface SnapshotTransfer {
  kinds: Uint8Array
  modes: Uint32Array
  childStart: Uint32Array
  childEnd: Uint32Array
  rootStart: number
  rootEnd: number
  names: string
  hashes: string
  targets: string
  reusedHashes: number
  cache?: SnapshotStatCache
}
