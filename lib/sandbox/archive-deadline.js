// The deadline of one archive transfer through a sandbox runner, scaled by its size: what
// runner-deadline.js races each transfer against, exported from the package root as
// `archiveTransferTimeoutMs` (extras.js) for providers that set their own.
import { checkOptionNames, invalidArgument } from "../arguments.js";

const MIB = 1024 * 1024;
/** The fixed part of an archive transfer deadline: 60 s. */
export const ARCHIVE_TRANSFER_BASE_MS = 60_000;
/** The size-scaled part of an archive transfer deadline: 1 s per MiB. */
export const ARCHIVE_TRANSFER_MS_PER_MIB = 1_000;
/** The cap of an archive transfer deadline: 30 minutes. */
export const ARCHIVE_TRANSFER_MAX_MS = 30 * 60_000;
/** Up to this deadline (5 minutes) a transfer keeps the provider's own timeout. */
export const ARCHIVE_TRANSFER_SMALL_MS = 5 * 60_000;

/**
 * The deadline for transferring an archive of `archiveBytes` bytes: one second per MiB plus
 * 60 s, capped at 30 minutes; when that figure is no greater than five minutes and the
 * provider has a timeout, the provider's timeout is kept.
 */
export function archiveTransferTimeoutMs(input) {
  checkOptionNames(input ?? {}, ["archiveBytes", "providerTimeoutMs"], "archiveTransferTimeoutMs");
  const { archiveBytes, providerTimeoutMs } = input ?? {};
  if (typeof archiveBytes !== "number" || !Number.isFinite(archiveBytes) || archiveBytes < 0) {
    throw invalidArgument(`archiveBytes must be a finite number >= 0, got ${String(archiveBytes)}`, RangeError);
  }
  if (providerTimeoutMs != null && (typeof providerTimeoutMs !== "number" || !(providerTimeoutMs > 0))) {
    throw invalidArgument(`providerTimeoutMs must be a number > 0, got ${String(providerTimeoutMs)}`, RangeError);
  }
  const scaled = Math.ceil(ARCHIVE_TRANSFER_BASE_MS + (archiveBytes / MIB) * ARCHIVE_TRANSFER_MS_PER_MIB);
  const figure = Math.min(scaled, ARCHIVE_TRANSFER_MAX_MS);
  return figure <= ARCHIVE_TRANSFER_SMALL_MS && providerTimeoutMs != null ? providerTimeoutMs : figure;
}
