import type { DirectorySnapshot } from "./workspace-restore-merge.js";
/**
 * For a snapshot captured with `incremental: true` or `previous`, how many file hashes the
 * capture reused from the previous snapshot instead of reading the file (0 otherwise).
 */
export declare function snapshotReusedHashCount(snapshot: DirectorySnapshot): number;
/** The fixed part of an archive transfer deadline: 60 000 ms. */
export declare const ARCHIVE_TRANSFER_BASE_MS: number;
/** The size-scaled part of an archive transfer deadline: 1 000 ms per MiB. */
export declare const ARCHIVE_TRANSFER_MS_PER_MIB: number;
/** The cap of an archive transfer deadline: 1 800 000 ms (30 minutes). */
export declare const ARCHIVE_TRANSFER_MAX_MS: number;
/** Up to this deadline (300 000 ms, five minutes) a transfer keeps the provider's timeout. */
export declare const ARCHIVE_TRANSFER_SMALL_MS: number;
/**
 * The deadline in ms for transferring an archive of `archiveBytes` bytes (the design notes'
 * rule; upstream 2026.916.1 has no size-scaled timeout): `60 000 + 1 000 × archiveBytes / MiB`,
 * rounded up, capped at 30 minutes. When that figure is at most five minutes and
 * `providerTimeoutMs` is given, `providerTimeoutMs` is returned unchanged (a small archive
 * keeps the provider's timeout); otherwise the figure.
 *
 * Throws a `RangeError` with code `ERR_PAPERCLIP_NATIVE_INVALID_ARGUMENT` for a negative or
 * non-finite size or a non-positive provider timeout.
 *
 * @example archiveTransferTimeoutMs({ archiveBytes: 1024 ** 3, providerTimeoutMs: 300_000 }) // 1 084 000 (18 min 4 s)
 */
export declare function archiveTransferTimeoutMs(input: { archiveBytes: number; providerTimeoutMs?: number | null }): number;
