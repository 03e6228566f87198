import type { RuntimeProgressReporter } from "./runtime-progress.js";

/** Default chunk size of a tarball stream: 1 MiB. */
export declare const TARBALL_STREAM_DEFAULT_CHUNK_SIZE: number;

/** What to archive: the same member set as `createTarballFromDirectory`. */
export interface TarballSource {
  /** The directory whose entries are archived (no `./` self-entry; members are `entry/...`). */
  localDir: string;
  /** tar `--exclude` values with GNU tar's semantics, after the implicit `._*`. */
  exclude?: string[];
  /** Archive what symbolic links point to (`tar -h`). */
  followSymlinks?: boolean;
  /** gzip-compress: `true` for level 6, or a level 0-9. Default: a plain tar stream. */
  gzip?: boolean | number;
  /** Aborts the pack: the call or the iteration rejects with an `AbortError`. */
  signal?: AbortSignal;
  /**
   * Receives progress: `report(doneBytes, totalBytes)` as the pack advances, then
   * `complete(n, n)` on success or `fail()` on failure, abort or early stop. Bytes are
   * uncompressed tar bytes (the unit of `totalBytes`). Create one with
   * `createRuntimeProgressReporter`; its failures are ignored (progress never fails a pack).
   */
  progress?: RuntimeProgressReporter;
}

/** Options of {@link createTarballStreamFromDirectory}. */
export interface TarballStreamOptions extends TarballSource {
  /** Size of every chunk but the last, 1 B to 64 MiB. Default 1 MiB. */
  chunkSize?: number;
  /**
   * Walk the tree's metadata first to learn the exact size of the uncompressed tar stream
   * (`totalBytes`; progress then shows percentages). Files changing in between make it
   * inexact. Default `false`.
   */
  precomputeSize?: boolean;
  /**
   * Archive only these members (names as the archive gives them, `dir/file`): the walk goes
   * only where they lead, a directory not named gets no entry of its own, and a name that
   * is not in the tree is skipped. `totalBytes` then counts only them. Default: every member.
   */
  only?: string[];
}

/** What a finished pack produced. */
export interface TarballSummary {
  /** Members archived. */
  entries: number;
  /** Size of the uncompressed tar stream. */
  tarBytes: number;
  /** Bytes produced: `tarBytes`, or the compressed size with gzip. */
  bytes: number;
}

/**
 * A tar (or tar.gz) archive of a directory, produced while it is read. Iterate it once:
 * `for await (const chunk of stream)`, `stream.pipeline(stream, destination)`, or
 * `Readable.from(stream)`. Every chunk is a new `Buffer` the consumer owns.
 *
 * The pack runs on a native thread of its own and stays at most three chunks ahead of the
 * consumer (backpressure): memory is bounded by the chunk size, whatever the archive size.
 * Ending the iteration early (`break`, an error) stops the pack. An abort rejects the
 * pending or next read with an `AbortError`.
 */
export interface TarballStream extends AsyncIterable<Buffer> {
  /** Exact size of the uncompressed tar stream when `precomputeSize` was set, else `null`. */
  readonly totalBytes: number | null;
  /** Bytes yielded so far (compressed bytes with gzip). */
  readonly bytesRead: number;
  /** Uncompressed tar bytes produced up to the last yielded chunk. */
  readonly tarBytes: number;
  /** The summary once the iteration ended successfully, `null` before. */
  readonly summary: TarballSummary | null;
  /** Stops the pack; a pending or later read rejects with an `AbortError`. */
  cancel(): void;
}

/**
 * Packs `localDir` as a stream of `Buffer` chunks (see {@link TarballStream}). Resolves once
 * the top-level entries are listed (and, with `precomputeSize`, the size is known); the pack
 * itself starts with the first read.
 *
 * Errors (rejecting this call, or the iteration): `localDir`'s readdir failure as Node's
 * error; file-system failures with Node's codes (`EACCES`, …);
 * `ERR_PAPERCLIP_NATIVE_NON_UTF8_NAME`, `ERR_PAPERCLIP_NATIVE_SYMLINK_LOOP`,
 * `ERR_PAPERCLIP_NATIVE_FILE_CHANGED` (a file shrank while it was read);
 * `ERR_PAPERCLIP_NATIVE_INVALID_ARGUMENT` for bad options; an `AbortError`.
 */
export declare function createTarballStreamFromDirectory(input: TarballStreamOptions): Promise<TarballStream>;

/** Options of {@link packDirectoryToFile}. */
export interface PackDirectoryToFileOptions extends TarballSource {
  /** Where the archive goes: a temporary file beside it is renamed into place on success. */
  archivePath: string;
  /** Walk the metadata first so progress shows percentages. Default: `true` when `progress` is set. */
  precomputeSize?: boolean;
}

/**
 * Packs `localDir` into the file `archivePath`, like `createTarballFromDirectory` plus gzip,
 * progress and the summary. On failure or abort `archivePath` is untouched and no temporary
 * file is left. Errors as {@link createTarballStreamFromDirectory}.
 */
export declare function packDirectoryToFile(input: PackDirectoryToFileOptions): Promise<TarballSummary>;

/** Where an archive to extract comes from. */
export type TarballInput =
  /** A tar or tar.gz file. */
  | string
  /** A whole archive in memory. */
  | Uint8Array
  | ArrayBuffer
  /** Chunks of an archive: a Node `Readable`, a web `ReadableStream`, a generator, an array. */
  | AsyncIterable<Uint8Array>
  | Iterable<Uint8Array>;

/** Options of {@link extractTarballToDirectory}. */
export interface ExtractTarballOptions {
  /** The archive; gzip is recognised by its magic bytes. */
  source: TarballInput;
  /** The destination directory, created when missing. */
  localDir: string;
  /** Restore modification times from the archive. Default `true`. */
  preserveMtime?: boolean;
  /** Aborts the extraction: the call rejects with an `AbortError` once it stopped. */
  signal?: AbortSignal;
  /**
   * Receives progress in bytes read from the source (compressed bytes for gzip), with the
   * file's or Buffer's size as the total, or `totalBytes` for a stream.
   */
  progress?: RuntimeProgressReporter;
  /** The stream's size when known (e.g. a `Content-Length`), for progress percentages. */
  totalBytes?: number;
  /** Bounds for an untrusted archive, and the free-space floor. */
  limits?: ExtractLimits;
  /**
   * The tree whose symbolic links vouch for the archive's. A member that is a symbolic link
   * to an absolute path or out of `localDir` is refused (`ERR_PAPERCLIP_NATIVE_UNSAFE_ARCHIVE_ENTRY`)
   * unless this directory holds a symbolic link at the same relative path with exactly that
   * target (the link went out and came back unchanged, as a virtualenv's
   * `bin/python3 -> /usr/bin/python3`); such a link is placed, never followed. Default:
   * `localDir` itself.
   */
  knownLinks?: string;
  /**
   * Leave FIFOs and character and block devices out of the extraction instead of refusing
   * the archive with `ERR_PAPERCLIP_NATIVE_UNSAFE_ARCHIVE_ENTRY` (the default). The sandbox
   * and SSH restores set it: a workspace's FIFO travels out and back, and stays the host's own.
   */
  skipUntransferable?: boolean;
}

/**
 * Bounds for an untrusted archive, each checked at a member's header, before anything past
 * it is written: a breach rejects with `ERR_PAPERCLIP_NATIVE_ARCHIVE_LIMIT_EXCEEDED`
 * (`error.limit` names it, `error.value` is its value) and leaves the destination as it was.
 * Unknown names are rejected with `ERR_PAPERCLIP_NATIVE_INVALID_ARGUMENT`.
 */
export interface ExtractLimits {
  /** Largest total of the members' data sizes, in bytes. Default: none. */
  maxBytes?: number;
  /** Largest number of members (files, directories, links). Default: none. */
  maxEntries?: number;
  /** Largest data size of one member, in bytes. Default: none. */
  maxFileBytes?: number;
  /**
   * Free-space floor in bytes: refused (`ERR_PAPERCLIP_NATIVE_INSUFFICIENT_SPACE`) before a
   * member would leave the destination's file system with less available. Default:
   * `PAPERCLIP_NATIVE_MIN_FREE_BYTES` when set, else 2 % of the file system, at most 1 GiB;
   * 0 turns the check off.
   */
  minFreeBytes?: number;
}

/** What an extraction did. */
export interface ExtractTarballSummary {
  /** Members extracted (directories included). */
  entries: number;
  /** Bytes read from the source. */
  bytesRead: number;
}

/**
 * Extracts a tar or tar.gz archive into `localDir`, safely: every member is checked before
 * anything is created for it, and every file-system call is made relative to directory
 * handles opened without following symbolic links.
 *
 * Refused with `ERR_PAPERCLIP_NATIVE_UNSAFE_ARCHIVE_ENTRY` (the message names the member):
 * absolute names and names with a `..` component; members under a directory that is a
 * symbolic link in the destination (`link/x` after `link -> /`); symbolic links with an
 * absolute target or a target that climbs above the root; hard links whose target is outside
 * the root, missing, or not a regular file; devices, FIFOs, sparse files, unknown types; a
 * name this library reserves (its staging directories `.paperclip-extract-…`,
 * `.paperclip-ssh-sync-back-…`, `.paperclip-merge-…`, `.paperclip-sandbox-restore-…` in
 * their exact forms, and `.paperclip-staging-key`) at any depth of a name or link target.
 * A truncated or corrupt archive fails with `ERR_PAPERCLIP_NATIVE_BAD_ARCHIVE`.
 *
 * Otherwise it behaves like `tar -xpf`: files, links and empty directories in the way of a
 * member are replaced (never written through), existing directories kept, permission bits
 * restored without setuid/setgid/sticky, ownership not restored. `localDir` changes only
 * after the whole archive was read and accepted: members are extracted into a private
 * staging directory inside it (`.paperclip-extract-…`), then moved in (merging into existing
 * directories); a refusal, a corrupt archive, a source error or an abort leaves `localDir`
 * as it was. A stream source
 * is read with backpressure (a few chunks of at most 1 MiB are queued) on a native thread
 * of its own; on failure the source's iterator is closed (a `Readable` is destroyed).
 */
export declare function extractTarballToDirectory(input: ExtractTarballOptions): Promise<ExtractTarballSummary>;
