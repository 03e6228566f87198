
/**
 * Which binding artifact the generated loader actually loaded: `'native'` for
 * a native addon, otherwise the `platformArchABI` of the WASI flavor. Every
 * flavor napi-rs can build is listed, because `NAPI_RS_NATIVE_LIBRARY_PATH`
 * can point the loader at a WASI artifact this package does not build itself.
 */
export declare const __napiBindingTarget: 'native' | 'wasm32-wasi' | 'wasm32-wasip1'

/** A decoded baseline, kept native until the merge applies against it (internal). */
export declare class MergeBaseline {}

/** A captured merge source, kept native until the merge applies it (internal). */
export declare class MergeSource {
  /** The number of entries (directories, files, symlinks) the source holds. */
  get entryCount(): number
}

/** A described remote start, kept native for the merge (internal). */
export declare class MergeStart {
  /** Which of `paths` some transfer carries (none of their components is excluded). */
  transferable(paths: Array<string>): Array<boolean>
  /** The top-level names a checkout gave the remote, sorted; `null` without a checkout. */
  checkoutTopLevel(): Array<string> | null
}

/** Stat data and hashes of a previous capture, for an incremental capture (internal). */
export declare class SnapshotStatCache {
  /** Files whose hashes this cache can offer. */
  get size(): number
}

/** One watched tree (internal). */
export declare class SnapshotWatcherHandle {}

/**
 * An extraction fed chunk by chunk from JS (internal; see `extractTarballToDirectory`).
 * The thread starts at once (creating `dest`) and reads the chunks as they come.
 */
export declare class TarExtractSink {
  /**
   * Queues a copy of `chunk` for extraction; resolves once it is queued (the queue holds a
   * few chunks, so a fast source waits for the extraction). Rejects with the extraction's
   * error once it failed, and after `finish()` or `abort()`.
   */
  write(chunk: Buffer): Promise<void>
  /** Ends the input and resolves with the extraction's result. */
  finish(): Promise<TarExtractSummary>
  /** Stops the extraction: it ends with the cancellation at its next read. Idempotent. */
  abort(): void
}

/**
 * A directory being packed into a sequence of chunks (internal; see
 * `createTarballStreamFromDirectory`). The pack starts on the first `read()` and stays at
 * most a few chunks ahead of the reads.
 */
export declare class TarPackStream {
  /**
   * The next chunk; `null` once the archive is complete. Rejects with the pack's error,
   * or with the cancellation once `cancel()` was called. Reads must not overlap.
   */
  read(): Promise<TarPackChunk | null>
  /**
   * Stops the pack: the thread ends at its next write and a pending or later `read()`
   * rejects with the cancellation. Idempotent; does nothing after the end.
   */
  cancel(): void
  /** Members and uncompressed size once the stream completed; `null` before. */
  get summary(): TarPackSummary | null
}

/**
 * The `limits` of an extraction (internal): the core's `ArchiveLimits` by the same
 * names, as `archiveLimits` in `lib/arguments.js` checked them (non-negative safe integers,
 * `minFreeBytes` from `PAPERCLIP_NATIVE_MIN_FREE_BYTES` when the caller gave none).
 */
export interface ArchiveLimits {
  maxBytes?: number
  maxEntries?: number
  maxFileBytes?: number
  /** Absent: the core's default floor; 0: no free-space check. */
  minFreeBytes?: number
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
 * Our stable error codes by name (`{ INVALID_ARGUMENT: "ERR_PAPERCLIP_NATIVE_INVALID_ARGUMENT",
 * … }`): the core crate's table, which the JS layer reads instead of repeating the strings.
 */
export declare function errorCodes(): Record<string, string>

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
 * The physical form of each of `paths` (internal; `resolveReferencedSourceIgnore`'s step 4):
 * `realpath`, or Node's `path.resolve` when `realpath` fails. On the bounded pool, like the
 * scan itself, so a first resolution does not wait for libuv's thread pool to start.
 */
export declare function ignoreScanPhysicalPaths(paths: Array<string>): Promise<Array<string>>

/**
 * The work-tree top of `local_dir`, `null` when it is not inside a git work tree
 * (internal; see `readReferencedSourceGitIgnoredPaths`).
 */
export declare function ignoreScanToplevel(localDir: string): Promise<string | null>

/** True when `relative` equals `candidate` or lies below it (`candidate + "/"` prefix). */
export declare function isRelativePathOrDescendant(relative: string, candidate: string): boolean

/**
 * Lists every entry below `root` without following symlinks; unreadable directories
 * read as empty (internal). Names we reserve are left out, or, with `untrusted` (a
 * mirror's source), refused with `ERR_PAPERCLIP_NATIVE_UNSAFE_ARCHIVE_ENTRY`.
 */
export declare function listTree(root: string, untrusted: boolean): Promise<TreeListing>

/**
 * Applies a captured source to the canonical `target` against the decoded baseline
 * (internal; upstream steps 2.2 to 2.5 of `mergeDirectoryWithBaseline`, run inside the JS
 * lock). With `start`, a lane's restore: only what the agent changed (core `merge::judged`).
 */
export declare function mergeApply(source: MergeSource, baseline: MergeBaseline, target: string, exclude: Array<string>, rejectConflicts: boolean, start?: MergeStart | undefined | null): Promise<MergeOutcomeTransfer>

/**
 * A baseline snapshot in transfer form (internal). Entry `i` has path
 * `paths.split("\0")[i]` and kind `kinds[i]` (0 unmatchable, 1 dir, 2 file, 3 symlink);
 * files have `modes[i]` and the next 64 hex digits of `hashes`; symlinks the next
 * `\0`-separated target of `targets`.
 */
export interface MergeBaselineTransfer {
  paths: string
  kinds: Uint8Array
  modes: Uint32Array
  hashes: string
  targets: string
}

/**
 * Captures the merge source (internal; upstream step 1 of `mergeDirectoryWithBaseline`).
 * A name we reserve in it is refused, or with `leave_out_reserved` (a lane's restore, where
 * such a name never travels) left out.
 */
export declare function mergeCaptureSource(sourceDir: string, exclude: Array<string>, cancelId?: number | undefined | null, leaveOutReserved?: boolean | undefined | null): Promise<MergeSource>

/**
 * Decodes a baseline transfer off the JS thread (internal): the merge decodes it while the
 * source is captured, before it takes the lock, so the decoding is not inside the lock.
 */
export declare function mergeDecodeBaseline(baseline: MergeBaselineTransfer): Promise<MergeBaseline>

/** Describes what a lane's prepare gave the remote, off the JS thread (internal). */
export declare function mergeDescribeStart(input: RemoteStartTransfer): Promise<MergeStart>

/**
 * Upstream `mergeExcludes`, taking the groups as one array: concatenated in order, absent
 * groups skipped, duplicates removed with the first occurrence kept.
 */
export declare function mergeExcludeGroups(groups: Array<Array<string> | undefined | null>): Array<string>

/** What a merge did, or why it refused (internal). */
export interface MergeOutcomeTransfer {
  /** Set when the merge was refused before any change: the error code. */
  refusedCode?: string
  refusedMessage?: string
  /** The refused paths (conflicts or symlinked ancestors), relative to the target. */
  paths: Array<string>
  deleted: number
  removedDirs: number
  applied: number
  /** Host files given the source's mode alone (a lane's restore). */
  chmodded: number
  /**
   * What a lane's restore kept as the host holds it (sorted), and why (same order:
   * `host-changed`, `never-sent`, `not-empty`, `special-file`, `blocked`).
   */
  keptPaths: Array<string>
  keptReasons: Array<string>
  /**
   * Entries that failed to apply: their paths, and their errors in the structured form
   * `lib/native.js` turns into JS errors (same order).
   */
  failedPaths: Array<string>
  failedErrors: Array<string>
  /**
   * Entries at the target's root carrying one of our staging names that this host did not
   * create: left alone, reported by the JS layer.
   */
  foreignStaging: Array<string>
  /**
   * A lane's restore: what the host now holds where the merge changed it, per path (same
   * order): its kind (`0` removed, `1` directory, `2` file, `3` symlink), a file's mode and
   * hash (hex; else `0` and empty), a link's target (else empty).
   */
  advancedPaths: Array<string>
  advancedKinds: Array<number>
  advancedModes: Array<number>
  advancedHashes: Array<string>
  advancedTargets: Array<string>
}

/** What a lane's prepare gave the remote (internal; `lib/lifecycle/remote-start.js` builds it). */
export interface RemoteStartTransfer {
  /** The `--exclude` values of the send and of the pull (`._*` is added). */
  untransferred: Array<string>
  /** A git workspace's checkout: `git ls-tree -r -z --full-tree <head>` output. */
  tree?: Buffer
  /** The host paths sent over the checkout. */
  overlay?: Array<string>
  /** The host's whole working tree was sent over the checkout (the SSH lane). */
  wholeTree?: boolean
  /** The paths removed after the checkout and the overlay. */
  removed?: Array<string>
  /** The permission bits the remote's extraction may clear (its umask), when known. */
  mask?: number
  /** The umask a checkout's files were made under on this host. */
  checkoutUmask?: number
}

/**
 * True when `name` is one this library reserves (its staging directories and key;
 * internal).
 */
export declare function reservedName(name: string): boolean

/** The core's constants that JS also uses (internal; see `constants` in `lib/native.js`). */
export declare function sharedConstants(): SharedConstants

/** The core's constants that JS also uses. */
export interface SharedConstants {
  /** The exclude every upstream tar invocation starts with (`._*`, macOS AppleDouble files). */
  appleDoubleExclude: string
  /** Upstream's `GIT_ARCHIVE_EXCLUDES`: the entries that keep `.git` out of an archive. */
  gitArchiveExcludes: Array<string>
  /** Upstream's `REFERENCED_SOURCE_IGNORE_MAX_ENTRY_COUNT`. */
  ignoreScanMaxEntryCount: number
  /** Upstream's `REFERENCED_SOURCE_IGNORE_MAX_TOTAL_BYTES`. */
  ignoreScanMaxTotalBytes: number
  /** Upstream's raw listing allowance of an ignore scan (its `maxBuffer`). */
  ignoreScanMaxOutputBytes: number
  /** The largest `chunkSize` a tar pack stream takes (64 MiB). */
  maxChunkSize: number
  /**
   * The prefix of a native rejection's reason that carries the error's details as JSON
   * (`src/error.rs`; `lib/native.js` turns it into a coded JS error).
   */
  structuredErrorPrefix: string
}

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

/** Brings the watcher's state up to date and returns what changed (internal). */
export declare function snapshotWatchCapture(handle: SnapshotWatcherHandle, cancelId?: number | undefined | null): Promise<SnapshotWatchTransfer>

/**
 * Closes the watcher: its inotify descriptor and every watch are released now, or, while
 * a capture is running, as soon as it ends (internal). Never blocks on a running capture.
 */
export declare function snapshotWatchClose(handle: SnapshotWatcherHandle): void

/** Creates a watcher of `root` (nothing is read until the first capture; internal). */
export declare function snapshotWatchCreate(root: string, exclude: Array<string>, maxWatches?: number | undefined | null): SnapshotWatcherHandle

/** The counters as of the last capture (internal). */
export declare function snapshotWatchStats(handle: SnapshotWatcherHandle): SnapshotWatchStats

/** A watcher's counters (internal; see `SnapshotWatcher.stats()` in lib/snapshot-watch.d.ts). */
export interface SnapshotWatchStats {
  captures: number
  events: number
  fullWalks: number
  subtreeRewalks: number
  dirsReread: number
  filesHashed: number
  hashesReused: number
  overflow: number
  droppedWatch: number
  directoryReplaced: number
  racyWindow: number
  watchLimit: number
  unsupportedPlatform: number
  hardLinks: number
  mountChanges: number
  mountedFiles: number
  watches: number
  entries: number
  directories: number
  watching: boolean
  reason?: string
  closed: boolean
}

/**
 * What a watched capture changed (internal). `dirs` names `dirCount` directories
 * (`\0`-joined, `""` the root), directory `k` has `childCounts[k]` children, listed in
 * order in `kinds` (0 skipped, 1 dir, 2 file, 3 symlink), `modes` and `names`; files'
 * hashes (64 hex digits each) and symlinks' targets (`\0`-joined) in child order.
 * `removed` names `removedCount` directories no longer in the tree. With `reset`, the
 * directories listed are the whole tree.
 */
export interface SnapshotWatchTransfer {
  reset: boolean
  dirs: string
  dirCount: number
  childCounts: Uint32Array
  removed: string
  removedCount: number
  kinds: Uint8Array
  modes: Uint32Array
  names: string
  hashes: string
  targets: string
}

/**
 * Creates the connect budget of one public SSH call (internal; lib/ssh-common.js
 * `withConnectBudget`): the connect timeout, in ms (default 10 000), that the connections
 * of the call may lose in all (`paperclip_sync_core::ssh::ConnectBudget`). Returns its id.
 */
export declare function sshConnectBudgetCreate(connectTimeoutMs?: number | undefined | null): number

/** Forgets a connect budget once its call settled (internal; connections still opening keep it). */
export declare function sshConnectBudgetRelease(id: number): void

/**
 * Writes the stdout of `command` to a new 0600 file `path`, removed on failure (internal;
 * the git-bundle download).
 */
export declare function sshDownloadFile(target: SshTargetInput, command: string, path: string, cancelId?: number | undefined | null, onProgress?: ((bytes: number) => void) | undefined | null): Promise<SshTransferSummary>

/**
 * Extracts the stdout of `command` (a tar stream) as `extract` says on a new session
 * (internal; see `syncDirectoryFromSsh`). `on_progress` receives the bytes read from the
 * channel.
 */
export declare function sshDownloadTar(target: SshTargetInput, command: string, extract: TarExtractInput, cancelId?: number | undefined | null, onProgress?: ((bytes: number) => void) | undefined | null): Promise<SshTransferSummary>

/**
 * Runs `command` on a new session (internal; see `runSshCommand`). `stdin` is sent and
 * closed; stdout and stderr are collected up to `max_buffer` bytes each (more fails with
 * `ERR_CHILD_PROCESS_STDIO_MAXBUFFER`); `timeout_ms` bounds the whole call, connect
 * included (`ERR_PAPERCLIP_NATIVE_SSH_TIMEOUT`). A non-zero exit is a result, not an error.
 */
export declare function sshExec(target: SshTargetInput, command: string, stdin?: Buffer | undefined | null, timeoutMs?: number | undefined | null, maxBuffer?: number | undefined | null, cancelId?: number | undefined | null): Promise<SshExecResult>

/** What a remote command left (internal; see `runSshCommand`). */
export interface SshExecResult {
  stdout: Buffer
  stderr: Buffer
  /** The exit status (0 when the server sent none). */
  exitStatus: number
  /** The signal that ended the command, with its `SIG` prefix (`SIGTERM`), if any. */
  exitSignal?: string
}

/**
 * Starts opening a pooled SSH session for `target` ahead of the calls that will use it, on
 * a thread of its own (internal; see `openSshSessionAhead` in lib/ssh-common.js). Nothing
 * happens without session reuse, or when a session of the same key is idle or already
 * being opened. Returns at once; the next call for that key takes the session (a failure
 * to open it is that call's error).
 */
export declare function sshOpenAhead(target: SshTargetInput): void

/** Closes every idle pooled SSH session now (internal; see `closeIdleSshSessions`). */
export declare function sshPoolClear(): void

/** The counters of the process-wide SSH session pool (internal; see `sshPoolStats`). */
export declare function sshPoolStats(): SshPoolStats

/** What the SSH session pool did in this process (diagnostics; see `sshPoolStats`). */
export interface SshPoolStats {
  /** Sessions opened (connected, host key verified, authenticated). */
  opened: number
  /** Calls served by an idle pooled session instead of a new one. */
  reused: number
  /** Sessions put back into the pool after a clean call. */
  returned: number
  /** Sessions disconnected after an error, a cancellation or a timeout. */
  dropped: number
  /** Sessions closed after a clean call without being kept (reuse off, pool full). */
  closed: number
  /** Idle sessions closed after the idle timeout. */
  expired: number
  /** Idle sessions closed because they stopped answering keepalives (docs/ssh.md). */
  dead: number
  /** Pooled sessions found closed by the server at checkout and replaced by a new one. */
  retried: number
  /** Calls served by a session opened ahead of them (counted in `opened`, not `reused`). */
  openedAhead: number
  /** Idle sessions held now. */
  idle: number
  /**
   * Commands run on a warm channel (their remote shell started while the previous
   * command ran; docs/ssh.md).
   */
  warmUsed: number
  /**
   * Warm channels dropped unused because their shell printed something of its own or
   * could not start (the command then ran on a channel of its own).
   */
  warmDropped: number
}

/**
 * Where and how to connect (internal): upstream's `SshConnectionConfig` fields that matter
 * to the connection, plus our connection timeouts and the reuse switch.
 */
export interface SshTargetInput {
  host: string
  port: number
  username: string
  privateKey?: string
  knownHosts?: string
  strictHostKeyChecking: boolean
  /**
   * Limit on reaching an authenticated session (TCP connect, banner, key exchange,
   * authentication), in ms (default 10 000, upstream's `ConnectTimeout=10`).
   */
  connectTimeoutMs?: number
  /** Fails the call when no byte moved for this long, in ms (absent or 0: never). */
  inactivityTimeoutMs?: number
  /**
   * Lease the session from the pool and keep it for the next call when this one ends
   * cleanly (default true; lib/ssh-common.js passes false for
   * `PAPERCLIP_NATIVE_SSH_REUSE=0`).
   */
  reuse?: boolean
  /**
   * The id of the calling public function's connect budget (`sshConnectBudgetCreate`),
   * shared by every connection it opens; absent or released: each connection has its own
   * connect timeout.
   */
  connectBudget?: number
}

/** What a transfer moved (internal). */
export interface SshTransferSummary {
  /** Bytes sent (uploads) or received (downloads) on the channel. */
  bytes: number
  /** Archive members packed or extracted (0 for a file). */
  entries: number
}

/**
 * Upstream's progress total of an SSH upload of `root` (internal; see
 * `paperclip_sync_core::ssh::upload_estimate`).
 */
export declare function sshUploadEstimate(root: string, exclude: Array<string>, followSymlinks: boolean, cancelId?: number | undefined | null): Promise<number>

/** Streams the file `path` into the stdin of `command` (internal; the git-bundle upload). */
export declare function sshUploadFile(target: SshTargetInput, command: string, path: string, cancelId?: number | undefined | null, onProgress?: ((bytes: number) => void) | undefined | null): Promise<SshTransferSummary>

/** What an upload asks for beyond the archive (internal; the SSH lane's delta uploads). */
export interface SshUploadOptions {
  /** Return the `stat` record of every member written (see `members`). */
  record?: boolean
  /** Collect the remote command's stdout up to this many bytes; absent: discard it. */
  collectStdout?: number
}

/** What an upload moved (internal). */
export interface SshUploadResult {
  /** Bytes sent on the channel (compressed when the pack is). */
  bytes: number
  /** Archive members packed. */
  entries: number
  /** Bytes of the uncompressed tar stream. */
  tarBytes: number
  /** The remote command's stdout (with `collectStdout`). */
  stdout?: Buffer
  /** The members written, as JSON (with `record`; see `members_json`). */
  members?: string
}

/**
 * Packs `pack` into the stdin of `command` on a new session (internal; see
 * `syncDirectoryToSsh`). `on_progress` receives the bytes of the uncompressed tar stream
 * packed so far.
 */
export declare function sshUploadTar(target: SshTargetInput, command: string, pack: TarPackInput, cancelId?: number | undefined | null, onProgress?: ((bytes: number) => void) | undefined | null, options?: SshUploadOptions | undefined | null): Promise<SshUploadResult>

/**
 * A fresh staging name of `kind` (`"extract"`, `"pull"`, `"merge"` or `"restore"`) owned by this
 * process (internal).
 */
export declare function stagingName(kind: string): string

/** An interrupted pull the sweep claimed for its caller (internal). */
export interface StagingPendingPull {
  /** Its staging directory's name in the swept directory (now owned by this process). */
  name: string
  /** The journal it wrote before its first move. */
  journal: string
}

/**
 * Sweeps `dir` (see `paperclip_sync_core::staging::sweep`): returns the interrupted pulls
 * for the caller to complete and the foreign look-alikes to report (internal). A missing
 * `dir` has nothing to sweep.
 */
export declare function stagingSweep(dir: string): Promise<StagingSwept>

/** What a sweep left for its caller (internal). */
export interface StagingSwept {
  /** Interrupted pulls to complete. */
  pulls: Array<StagingPendingPull>
  /**
   * Entries carrying one of our staging names that this host did not create: left
   * alone, to be reported.
   */
  foreign: Array<string>
}

/**
 * Extracts the tar or tar.gz file `archive_path` as `input` says (internal; see
 * `extractTarballToDirectory`). `on_progress` receives the bytes read from the file.
 */
export declare function tarExtractFile(input: TarExtractInput, archivePath: string, cancelId?: number | undefined | null, onProgress?: ((bytes: number) => void) | undefined | null): Promise<TarExtractSummary>

/** Where and how to extract (internal; see `extractTarballToDirectory` and the SSH download). */
export interface TarExtractInput {
  /** The destination directory (created if missing). */
  dest: string
  /** Restore modification times from the archive. */
  preserveMtime: boolean
  /** Bounds and the free-space floor; absent: no bounds and the default floor. */
  limits?: ArchiveLimits
  /** The tree whose symbolic links vouch for the archive's escaping ones; absent: `dest`. */
  knownLinks?: string
  /** Leave FIFOs and device files out instead of refusing the archive. */
  skipUntransferable?: boolean
}

/** Creates an extract sink as `input` says (internal). */
export declare function tarExtractStream(input: TarExtractInput): TarExtractSink

/** What an extraction did (internal). */
export interface TarExtractSummary {
  /** Members extracted. */
  entries: number
  /** Bytes read from the source (compressed bytes for gzip). */
  bytesRead: number
  /**
   * Entries in the destination carrying one of our staging names that this host did not
   * create: left alone, reported by the JS layer.
   */
  foreignStaging: Array<string>
}

/**
 * The member records of everything `pack` would archive now, as JSON (see
 * `members_json`; internal: the SSH lane's delta plan).
 */
export declare function tarListMembers(pack: TarPackInput, cancelId?: number | undefined | null): Promise<string>

/** One chunk of a pack stream (internal). */
export interface TarPackChunk {
  /** The bytes: `chunkSize` of them except in the last chunk. */
  data: Buffer
  /**
   * Uncompressed tar bytes produced up to the end of this chunk (the unit of
   * `tarPrecomputeSize`); exact for a plain stream, as far as the compressor consumed for gzip.
   */
  tarBytes: number
}

/**
 * Packs into the file `archive_path` through a temporary file renamed into place on success
 * (internal; see `createTarballFromDirectory`). `on_progress` receives uncompressed tar bytes.
 */
export declare function tarPackFile(input: TarPackInput, archivePath: string, cancelId?: number | undefined | null, onProgress?: ((bytes: number) => void) | undefined | null): Promise<TarPackSummary>

/** What to archive (internal; see `createTarballFromDirectory` and the streaming pack). */
export interface TarPackInput {
  /** The directory whose entries are archived (tar's `-C`); it gets no `./` entry. */
  root: string
  /** `--exclude` values with GNU tar's semantics, applied after the implicit `._*`. */
  exclude: Array<string>
  /** Archive what symbolic links point to (`tar -h`). */
  followSymlinks: boolean
  /** The top-level names in archive order; absent: every entry of `root` in byte order. */
  topLevel?: Array<string>
  /** gzip level 0-9; absent: a plain tar stream. */
  gzip?: number
  /** Name members `./x` as `tar -cf - .` does, excludes matched against those names. */
  dotMembers?: boolean
  /**
   * Write only these members (names without `./`; the walk goes only where they lead);
   * absent: all of them.
   */
  only?: Array<string>
}

/** Creates a pack stream of `input` in chunks of `chunk_size` bytes (internal). */
export declare function tarPackStream(input: TarPackInput, chunkSize: number): TarPackStream

/** What a pack wrote (internal). */
export interface TarPackSummary {
  /** Members archived. */
  entries: number
  /** Size of the uncompressed tar stream. */
  tarBytes: number
}

/**
 * The exact size of the uncompressed tar stream a pack of `input` would write now
 * (internal). Rejects with the cancellation once the token is aborted (checked per member).
 */
export declare function tarPrecomputeSize(input: TarPackInput, cancelId?: number | undefined | null): Promise<number>

/**
 * A tree listing (internal; see `mirrorDirectory`): `paths` `\0`-joined, `kinds[i]`
 * 1 dir, 2 file, 3 symlink, 4 other.
 */
export interface TreeListing {
  paths: string
  kinds: Uint8Array
}
