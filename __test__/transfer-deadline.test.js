// The archive transfer deadline rule (docs/tar.md): 1 s per MiB + 60 s, capped at 30 minutes;
// a small archive keeps the provider timeout while that figure is at most five minutes.
import { describe, expect, it } from "vitest";
import {
  ARCHIVE_TRANSFER_BASE_MS,
  ARCHIVE_TRANSFER_MAX_MS,
  ARCHIVE_TRANSFER_MS_PER_MIB,
  ARCHIVE_TRANSFER_SMALL_MS,
  archiveTransferTimeoutMs,
} from "@paperclipai/adapter-utils-native";

const MIB = 1024 * 1024;
const deadline = (archiveBytes, providerTimeoutMs) => archiveTransferTimeoutMs({ archiveBytes, providerTimeoutMs });

describe("archiveTransferTimeoutMs", () => {
  it("exposes the rule's constants", () => {
    expect([
      ARCHIVE_TRANSFER_BASE_MS,
      ARCHIVE_TRANSFER_MS_PER_MIB,
      ARCHIVE_TRANSFER_MAX_MS,
      ARCHIVE_TRANSFER_SMALL_MS,
    ]).toEqual([60_000, 1_000, 1_800_000, 300_000]);
  });

  it("scales one second per MiB plus 60 s", () => {
    expect(deadline(0)).toBe(60_000);
    expect(deadline(1)).toBe(60_001); // a partial MiB rounds up to the next millisecond
    expect(deadline(MIB)).toBe(61_000);
    expect(deadline(1.5 * MIB)).toBe(61_500);
    expect(deadline(1024 * MIB)).toBe(60_000 + 1_024_000);
  });

  it("caps the figure at 30 minutes", () => {
    expect(deadline(1740 * MIB)).toBe(1_800_000);
    expect(deadline(1741 * MIB)).toBe(1_800_000);
    expect(deadline(100 * 1024 * MIB, 300_000)).toBe(1_800_000);
  });

  it("keeps the provider timeout while the figure is at most five minutes", () => {
    expect(deadline(0, 300_000)).toBe(300_000);
    expect(deadline(10 * MIB, 45_000)).toBe(45_000); // even a shorter one: it is the provider's
    expect(deadline(240 * MIB, 300_000)).toBe(300_000); // exactly five minutes: kept
    expect(deadline(240 * MIB + 1, 300_000)).toBe(300_001); // above: the figure
    expect(deadline(240 * MIB + 1, 600_000)).toBe(300_001);
    expect(deadline(240 * MIB)).toBe(300_000); // no provider timeout: the figure
    expect(deadline(1024 * MIB, null)).toBe(1_084_000);
  });

  it("rejects sizes and timeouts that are not numbers in range", () => {
    for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY, "1", undefined, null]) {
      expect(() => deadline(bad), String(bad)).toThrow(
        expect.objectContaining({ code: "ERR_PAPERCLIP_NATIVE_INVALID_ARGUMENT" }),
      );
    }
    for (const bad of [0, -5, Number.NaN, "300000"]) {
      expect(() => deadline(MIB, bad), String(bad)).toThrow(RangeError);
    }
    expect(() => archiveTransferTimeoutMs()).toThrow(RangeError);
  });
});
