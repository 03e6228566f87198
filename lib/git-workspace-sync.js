// Drop-in for the ignore-resolution part of `@paperclipai/adapter-utils/git-workspace-sync`
// (docs/ignore.md, the trust model): the referenced-project ignore scan, the host's git executor seam, and the anchor
// workspace's git snapshot.
//
// Where upstream spawns git for a referenced project's ignore scan, we scan in-process
// (`ignoreScanToplevel`/`ignoreScanList` in the native binding: read-only, hardened, no
// child process) — unless a host registered an executor with
// `setExpensiveWorkspaceGitExecutor`, in which case every git command goes through it exactly
// as upstream sends it (same argv, operation names, timeouts, output allowance and hardened
// environment), so the host's admission policy still governs them.
import { promises as fs } from "node:fs";
import path from "node:path";
import { runLocalGit } from "./local-git.js";
import { scanIgnoredRecords, scanToplevel, UPSTREAM_DEADLINES } from "./ignore-scan.js";
import { abortError, constants } from "./native.js";

/** The exclude entries that keep a `.git` directory (and its contents) out of an archive. */
export const GIT_ARCHIVE_EXCLUDES = [...constants.gitArchiveExcludes];

/** The directory of a task workspace that holds its managed project repositories. */
export const PROJECT_REPOSITORIES_DIR = ".paperclip-repositories";

/** The host scan scheduler's `code` for a saturated queue: the only error a resolution retries. */
export const WORKSPACE_GIT_SCAN_SATURATED_CODE = "workspace_git_scan_saturated";

/** Bound on the number of ignored entries a referenced-project scan accepts. */
export const REFERENCED_SOURCE_IGNORE_MAX_ENTRY_COUNT = constants.ignoreScanMaxEntryCount;

/** Bound on the summed UTF-8 byte length of the ignored paths a referenced-project scan accepts. */
export const REFERENCED_SOURCE_IGNORE_MAX_TOTAL_BYTES = constants.ignoreScanMaxTotalBytes;

/** The raw listing allowance (upstream's `maxBuffer` for the scan): twice the byte bound. */
const REFERENCED_SOURCE_IGNORE_MAX_RAW_BUFFER = constants.ignoreScanMaxOutputBytes;

/** Upstream's output allowance for the toplevel probe. */
const TOPLEVEL_MAX_BUFFER = 64 * 1024;

/** Every hardened git call starts with these (command-line config beats repository config). */
const HARDENED_GIT_ARGS = ["-c", "core.fsmonitor=false", "--no-optional-locks"];
const TOPLEVEL_ARGS = ["rev-parse", "--show-toplevel"];
const LIST_ARGS = ["ls-files", "--others", "--ignored", "--exclude-standard", "--directory", "--full-name", "-z"];

/**
 * Thrown by {@link readReferencedSourceGitIgnoredPaths} when the ignored-path list breaches
 * {@link REFERENCED_SOURCE_IGNORE_MAX_ENTRY_COUNT} or
 * {@link REFERENCED_SOURCE_IGNORE_MAX_TOTAL_BYTES}, so callers can tell a bound breach from a
 * failed read. `resolveReferencedSourceIgnore` turns it into the fixed reason
 * `git-ignore-scan-limit-exceeded`; the message never reaches a resolution.
 */
export class ReferencedSourceIgnoreScanLimitExceededError extends Error {
  constructor(message) {
    super(message);
    this.name = "ReferencedSourceIgnoreScanLimitExceededError";
  }
}

let expensiveWorkspaceGitExecutor = null;

/**
 * Registers the host's executor for expensive git commands (its process-wide admission
 * policy), or removes it with `null`. While one is registered, every git command of this
 * module goes through it and no scan runs in-process.
 *
 * This is this package's own registration: a host that also uses upstream's
 * `@paperclipai/adapter-utils/git-workspace-sync` directly registers there too.
 */
export function setExpensiveWorkspaceGitExecutor(executor) {
  expensiveWorkspaceGitExecutor = executor;
}

/** A git command through the registered executor, or spawned directly when there is none. */
async function runExpensiveWorkspaceGit(localDir, args, operation, { timeout, maxBuffer, env }) {
  const executor = expensiveWorkspaceGitExecutor;
  if (executor) return await executor({ localDir, args, operation, timeout, maxBuffer, env });
  return await runLocalGit(localDir, args, { timeout, maxBuffer, env });
}

/**
 * The environment of a hardened git call: this process's, without any `GIT_*` variable,
 * with the system and global configuration switched off.
 */
function hardenedGitEnv() {
  const env = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("GIT_") && value !== undefined) env[key] = value;
  }
  env.GIT_CONFIG_NOSYSTEM = "1";
  env.GIT_CONFIG_GLOBAL = "/dev/null";
  return env;
}

/** A hardened, read-only git command through the executor seam (upstream's argv and env). */
function runHardenedReadOnlyGit(localDir, args, operation, { timeout, maxBuffer }) {
  return runExpensiveWorkspaceGit(localDir, [...HARDENED_GIT_ARGS, ...args], operation, {
    timeout,
    maxBuffer,
    env: hardenedGitEnv(),
  });
}

/**
 * True when a failed git command failed because its directory is not in a git work tree.
 * A host scheduler's error (`code` `workspace_git_scan_*`) counts only as a completed git
 * exit 128 without a signal whose stderr says so; timeouts, cancellations and output limits
 * never do.
 */
function isNotAGitRepositoryError(error) {
  const notARepository = /not a git repository/i;
  if (
    error !== null &&
    typeof error === "object" &&
    typeof error.code === "string" &&
    error.code.startsWith("workspace_git_scan_")
  ) {
    const details = error.details !== null && typeof error.details === "object" ? error.details : {};
    return (
      error.code === "workspace_git_scan_failed" &&
      details.exitCode === 128 &&
      details.signal === null &&
      typeof details.stderr === "string" &&
      notARepository.test(details.stderr)
    );
  }
  const stderr = error !== null && typeof error === "object" && "stderr" in error ? String(error.stderr) : "";
  const message = error instanceof Error ? error.message : String(error);
  return notARepository.test(stderr) || notARepository.test(message);
}

/** Step 1 (`rev-parse --show-toplevel`): the trimmed toplevel, or `null` outside a work tree. */
async function readToplevel(localDir, signal) {
  if (expensiveWorkspaceGitExecutor) {
    try {
      const { stdout } = await runHardenedReadOnlyGit(localDir, TOPLEVEL_ARGS, "referenced_source.toplevel", {
        timeout: UPSTREAM_DEADLINES.toplevel,
        maxBuffer: TOPLEVEL_MAX_BUFFER,
      });
      return stdout.trim();
    } catch (error) {
      if (isNotAGitRepositoryError(error)) return null;
      throw error;
    }
  }
  return await scanToplevel(localDir, signal);
}

/** Step 2 (`ls-files --others --ignored …`): the raw NUL-terminated records. */
async function readIgnoredRecords(localDir, signal) {
  if (expensiveWorkspaceGitExecutor) {
    const { stdout } = await runHardenedReadOnlyGit(localDir, LIST_ARGS, "referenced_source.ignored_files", {
      timeout: UPSTREAM_DEADLINES.list,
      maxBuffer: REFERENCED_SOURCE_IGNORE_MAX_RAW_BUFFER,
    });
    return stdout;
  }
  return await scanIgnoredRecords(localDir, signal);
}

/** `value` without its trailing slashes (linear, unlike a `/\/+$/` replace). */
function stripTrailingSlashes(value) {
  let end = value.length;
  while (end > 0 && value.charCodeAt(end - 1) === 0x2f) end -= 1;
  return end === value.length ? value : value.slice(0, end);
}

/**
 * Upstream's streaming parse of `-z` records: trailing slashes stripped, no trimming, empty
 * records skipped, both bounds checked per record (count first, then bytes), so the first
 * breach in output order wins. Sorted with `localeCompare` in the process locale.
 */
function parseIgnoredRecords(raw) {
  const accepted = [];
  let totalBytes = 0;
  let start = 0;
  while (start < raw.length) {
    const nul = raw.indexOf("\0", start);
    const end = nul === -1 ? raw.length : nul;
    const entry = stripTrailingSlashes(raw.slice(start, end));
    start = end + 1;
    if (entry.length === 0) continue;
    if (accepted.length + 1 > REFERENCED_SOURCE_IGNORE_MAX_ENTRY_COUNT) {
      throw new ReferencedSourceIgnoreScanLimitExceededError(
        `referenced project ignore scan found more than ${REFERENCED_SOURCE_IGNORE_MAX_ENTRY_COUNT} ignored entries`,
      );
    }
    totalBytes += Buffer.byteLength(entry, "utf8");
    if (totalBytes > REFERENCED_SOURCE_IGNORE_MAX_TOTAL_BYTES) {
      throw new ReferencedSourceIgnoreScanLimitExceededError(
        `referenced project ignore scan exceeded ${REFERENCED_SOURCE_IGNORE_MAX_TOTAL_BYTES} UTF-8 bytes of ignored paths`,
      );
    }
    accepted.push(entry);
  }
  return accepted.sort(localeOrder().compare);
}

let collator = null;
/**
 * The process locale's collator (`localeCompare`'s order). The first one a process makes
 * loads ICU's collation data, milliseconds of the main thread: a scan makes it while its
 * listing runs off the main thread.
 */
function localeOrder() {
  collator ??= new Intl.Collator();
  return collator;
}

/**
 * The git-ignored paths of a referenced project's directory: what
 * `git ls-files --others --ignored --exclude-standard --directory --full-name -z` lists,
 * computed in-process (read-only: no index refresh, no lock, no hook, filter or fsmonitor,
 * no system or global configuration), or through the registered executor when a host set
 * one. `null` when `localDir` is not inside a git work tree.
 *
 * Rejects on any other failure (an unreadable or corrupt repository, a timeout: 15 s for
 * the toplevel, 60 s for the listing) and with
 * {@link ReferencedSourceIgnoreScanLimitExceededError} on a bound breach. `options.signal`
 * (our addition) aborts the scan with an `AbortError`.
 */
export async function readReferencedSourceGitIgnoredPaths(localDir, options) {
  const signal = options?.signal;
  if (signal?.aborted) throw abortError(signal);
  const toplevel = await readToplevel(localDir, signal);
  if (toplevel === null) return null;
  if (!toplevel) throw new Error(`git rev-parse --show-toplevel returned an empty path for ${localDir}`);
  const listing = readIgnoredRecords(localDir, signal);
  // After the listing has started (its microtasks run before this callback).
  if (collator === null) setImmediate(localeOrder);
  return { toplevel, ignoredPaths: parseIgnoredRecords(await listing) };
}

/** NUL-separated records without the empty ones (names keep their spaces). */
function splitNul(value) {
  return value.split("\0").filter((entry) => entry.length > 0);
}

function sortedUnion(...lists) {
  return [...new Set(lists.flat())].sort(new Intl.Collator().compare);
}

function prefixed(repositories, lane) {
  return repositories.flatMap((repo) => repo.snapshot[lane].map((entry) => `${repo.path}/${entry}`));
}

/** The managed project repositories under `<localDir>/.paperclip-repositories`, snapshotted. */
async function readProjectRepositories(localDir) {
  const root = path.join(localDir, PROJECT_REPOSITORIES_DIR);
  let rootStat;
  try {
    rootStat = await fs.lstat(root);
  } catch (error) {
    if (error.code === "ENOENT") return [];
    throw error;
  }
  if (!rootStat.isDirectory() || rootStat.isSymbolicLink()) throw new Error("Invalid project repositories directory");
  const entries = (await fs.readdir(root, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name));
  const repositories = [];
  for (const entry of entries) {
    if (!entry.isDirectory() || !/^[a-zA-Z0-9_-]+$/.test(entry.name))
      throw new Error("Invalid project repository directory");
    const relative = `${PROJECT_REPOSITORIES_DIR}/${entry.name}`;
    const snapshot = await readGitWorkspaceSnapshot(path.join(localDir, relative), false);
    if (!snapshot) throw new Error(`Project repository is not a Git checkout: ${relative}`);
    repositories.push({ path: relative, snapshot });
  }
  return repositories;
}

/**
 * The anchor workspace's git state (upstream's `readGitWorkspaceSnapshot`): `HEAD`, branch, overlay (changed and untracked),
 * deleted and ignored paths, plus the managed repositories under
 * `.paperclip-repositories` when `includeRepositories` (default `true`). `null` when
 * `localDir` is not a git work tree or not its top level.
 *
 * The anchor workspace is trusted, so this runs git with the process environment, as
 * upstream does; the four full-tree reads go through the registered executor (operations
 * `adapter_sync.*`). Executor errors propagate unchanged.
 */
export async function readGitWorkspaceSnapshot(localDir, includeRepositories = true) {
  const repositories = includeRepositories ? await readProjectRepositories(localDir) : [];
  const quick = { timeout: 10_000, maxBuffer: 16 * 1024 };
  let insideWorkTree;
  try {
    insideWorkTree = await runLocalGit(localDir, ["rev-parse", "--is-inside-work-tree"], quick);
  } catch (error) {
    // Only discovery may report an ordinary directory; a confirmed repository's failure never does.
    if (repositories.length === 0 && isNotAGitRepositoryError(error)) return null;
    throw error;
  }
  if (insideWorkTree.stdout.trim() !== "true") return null;
  const toplevel = await runLocalGit(localDir, ["rev-parse", "--show-toplevel"], quick);
  // A selected sub-folder of a repository is not the repository.
  const [workspacePath, repositoryPath] = await Promise.all([
    fs.realpath(localDir),
    fs.realpath(toplevel.stdout.trim()),
  ]);
  if (workspacePath !== repositoryPath) return null;
  const lane = (args, operation, maxBuffer) =>
    runExpensiveWorkspaceGit(localDir, args, operation, { timeout: 10_000, maxBuffer, env: undefined });
  const [head, branch, overlay, untracked, deleted, ignored] = await Promise.all([
    runLocalGit(localDir, ["rev-parse", "HEAD"], quick),
    runLocalGit(localDir, ["rev-parse", "--abbrev-ref", "HEAD"], quick),
    lane(
      ["diff", "--name-only", "-z", "--diff-filter=ACMRTUXB", "HEAD", "--"],
      "adapter_sync.overlay_diff",
      1024 * 1024,
    ),
    lane(["ls-files", "--others", "--exclude-standard", "-z"], "adapter_sync.untracked_files", 1024 * 1024),
    lane(["diff", "--name-only", "-z", "--diff-filter=D", "HEAD", "--"], "adapter_sync.deleted_files", 256 * 1024),
    lane(
      ["ls-files", "--others", "--ignored", "--exclude-standard", "--directory", "-z"],
      "adapter_sync.ignored_files",
      1024 * 1024,
    ),
  ]);
  const branchName = branch.stdout.trim();
  const ownIgnored = splitNul(ignored.stdout)
    .map(stripTrailingSlashes)
    .filter((entry) => entry.length > 0 && !(repositories.length > 0 && entry === PROJECT_REPOSITORIES_DIR));
  return {
    headCommit: head.stdout.trim(),
    branchName: branchName && branchName !== "HEAD" ? branchName : null,
    overlayPaths: sortedUnion(
      splitNul(overlay.stdout),
      splitNul(untracked.stdout),
      prefixed(repositories, "overlayPaths"),
    ),
    deletedPaths: sortedUnion(splitNul(deleted.stdout), prefixed(repositories, "deletedPaths")),
    ignoredPaths: [...ownIgnored, ...prefixed(repositories, "ignoredPaths")].sort(new Intl.Collator().compare),
    ...(repositories.length > 0 ? { repositories } : {}),
  };
}
