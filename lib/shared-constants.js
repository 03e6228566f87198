// The constants the JS layer shares with the core crate: a frozen copy of what the binding's
// `sharedConstants()` returns (src/constants.rs). The JS layer reads the binding's own values
// (`constants` in lib/native.js); this copy stands in only where no native binary loads, so
// that importing the package (and upstream's constants it re-exports) still works there.
// __test__/error-codes.test.js checks that the two are equal.

/** The shared constants, by the binding's names. */
export const FALLBACK_CONSTANTS = Object.freeze({
  appleDoubleExclude: "._*",
  gitArchiveExcludes: Object.freeze([".git", ".git/*"]),
  ignoreScanMaxEntryCount: 10_000,
  ignoreScanMaxTotalBytes: 2 * 1024 * 1024,
  ignoreScanMaxOutputBytes: 4 * 1024 * 1024,
  maxChunkSize: 64 * 1024 * 1024,
  structuredErrorPrefix: "\u0000paperclip-native:",
});
