/** The exclude entries that keep a `.git` directory (and its contents) out of an archive. */
export declare const GIT_ARCHIVE_EXCLUDES: readonly [".git", ".git/*"];

/** The directory of a task workspace that holds its managed project repositories. */
export declare const PROJECT_REPOSITORIES_DIR = ".paperclip-repositories";

/** What a git command printed. */
export interface GitCommandResult {
  stdout: string;
  stderr: string;
}

/** One expensive git command, as handed to a host's {@link ExpensiveWorkspaceGitExecutor}. */
export interface ExpensiveWorkspaceGitInput {
  /** The directory git runs in (`git -C <localDir>`). */
  localDir: string;
  /** The arguments after `-C <localDir>`. */
  args: readonly string[];
  /**
   * The operation name: `referenced_source.toplevel`, `referenced_source.ignored_files`,
   * `adapter_sync.overlay_diff`, `adapter_sync.untracked_files`,
   * `adapter_sync.deleted_files` or `adapter_sync.ignored_files`.
   */
  operation: string;
  /** Milliseconds the command may run. */
  timeout: number;
  /** Bytes of output the command may produce. */
  maxBuffer: number;
  /**
   * The environment to run git with: the hardened environment (no `GIT_*` variables, no
   * system or global configuration) for a referenced project's scan; absent for the
   * anchor workspace's reads, which inherit the process environment.
   */
  env?: NodeJS.ProcessEnv;
}

/** A host's runner for expensive git commands (its admission policy, e.g. a bounded queue). */
export type ExpensiveWorkspaceGitExecutor = (input: ExpensiveWorkspaceGitInput) => Promise<GitCommandResult>;

/** The host scan scheduler's `code` for a saturated queue: the only error a resolution retries. */
export declare const WORKSPACE_GIT_SCAN_SATURATED_CODE = "workspace_git_scan_saturated";

/**
 * Registers the host's executor for expensive git commands, or removes it with `null`.
 * While one is registered, every git command of this module goes through it (with
 * upstream's arguments, operation names, timeouts, output allowances and environment) and
 * no scan runs in-process. This registration is this package's own: a host that also calls
 * upstream's module directly registers there too.
 */
export declare function setExpensiveWorkspaceGitExecutor(executor: ExpensiveWorkspaceGitExecutor | null): void;

/** The anchor workspace's git state, as {@link readGitWorkspaceSnapshot} reads it. */
export interface GitWorkspaceSnapshot {
  headCommit: string;
  /** `null` on a detached `HEAD`. */
  branchName: string | null;
  /** Changed and untracked paths (sorted with `localeCompare`). */
  overlayPaths: string[];
  /** Deleted tracked paths (sorted). */
  deletedPaths: string[];
  /** Ignored paths, wholly ignored directories collapsed, trailing slashes stripped (sorted). */
  ignoredPaths: string[];
  /** Managed, editable repositories inside the task workspace. */
  repositories?: Array<{
    path: string;
    snapshot: GitWorkspaceSnapshot;
  }>;
}

/**
 * The anchor workspace's git state: `HEAD`, branch, overlay, deleted and ignored paths, and
 * the managed repositories under `.paperclip-repositories` when `includeRepositories`
 * (default `true`). `null` when `localDir` is not a git work tree or not its top level.
 * Runs git with the process environment (the anchor workspace is trusted); the four
 * full-tree reads go through the registered executor, whose errors propagate unchanged.
 */
export declare function readGitWorkspaceSnapshot(
  localDir: string,
  includeRepositories?: boolean,
): Promise<GitWorkspaceSnapshot | null>;

/** A referenced project's ignore scan, as {@link readReferencedSourceGitIgnoredPaths} returns it. */
export interface ReferencedSourceGitIgnoreScan {
  /** The absolute work-tree top, as `git rev-parse --show-toplevel` prints it. */
  toplevel: string;
  /** Ignored paths relative to `toplevel`, trailing slashes stripped, sorted with `localeCompare`. */
  ignoredPaths: string[];
}

/** Bound on the number of ignored entries a referenced-project scan accepts. */
export declare const REFERENCED_SOURCE_IGNORE_MAX_ENTRY_COUNT = 10000;

/** Bound on the summed UTF-8 byte length of the ignored paths a referenced-project scan accepts (2 MiB). */
export declare const REFERENCED_SOURCE_IGNORE_MAX_TOTAL_BYTES: number;

/**
 * Thrown by {@link readReferencedSourceGitIgnoredPaths} when the ignored-path list breaches
 * {@link REFERENCED_SOURCE_IGNORE_MAX_ENTRY_COUNT} or
 * {@link REFERENCED_SOURCE_IGNORE_MAX_TOTAL_BYTES}. `resolveReferencedSourceIgnore` turns it
 * into the fixed reason `git-ignore-scan-limit-exceeded`.
 */
export declare class ReferencedSourceIgnoreScanLimitExceededError extends Error {
  constructor(message: string);
}

/** Options of {@link readReferencedSourceGitIgnoredPaths} (our addition). */
export interface ReadReferencedSourceGitIgnoredPathsOptions {
  /** Aborting rejects the scan with an `AbortError` and stops the in-process walk. */
  signal?: AbortSignal;
}

/**
 * The git-ignored paths of a referenced project's directory: exactly what
 * `git ls-files --others --ignored --exclude-standard --directory --full-name -z` lists
 * under upstream's hardened environment, computed in-process and read-only (no index
 * refresh, no lock file, no hook, filter or fsmonitor program, no system or global
 * configuration), or through the registered executor when a host set one. `null` when
 * `localDir` is not inside a git work tree.
 *
 * Rejects on any other failure (an unreadable or corrupt repository; a timeout: 15 s for the
 * toplevel, 60 s for the listing) and with {@link ReferencedSourceIgnoreScanLimitExceededError}
 * on a bound breach. At most four in-process scans run at once; the others queue.
 */
export declare function readReferencedSourceGitIgnoredPaths(
  localDir: string,
  options?: ReadReferencedSourceGitIgnoredPathsOptions,
): Promise<ReferencedSourceGitIgnoreScan | null>;
