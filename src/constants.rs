//! Constants the JS layer shares with the core crate, exported so that each is defined once
//! (in the core) and read by JS (`constants` in `lib/native.js`).

use napi_derive::napi;
use paperclip_sync_core::{exclude, ignore_scan, tar};

/// The core's constants that JS also uses.
#[napi(object, object_from_js = false)]
pub struct SharedConstants {
    /// The exclude every upstream tar invocation starts with (`._*`, macOS AppleDouble files).
    pub apple_double_exclude: &'static str,
    /// Upstream's `GIT_ARCHIVE_EXCLUDES`: the entries that keep `.git` out of an archive.
    pub git_archive_excludes: Vec<&'static str>,
    /// Upstream's `REFERENCED_SOURCE_IGNORE_MAX_ENTRY_COUNT`.
    pub ignore_scan_max_entry_count: u32,
    /// Upstream's `REFERENCED_SOURCE_IGNORE_MAX_TOTAL_BYTES`.
    pub ignore_scan_max_total_bytes: u32,
    /// Upstream's raw listing allowance of an ignore scan (its `maxBuffer`).
    pub ignore_scan_max_output_bytes: u32,
    /// The largest `chunkSize` a tar pack stream takes (64 MiB).
    pub max_chunk_size: u32,
    /// The prefix of a native rejection's reason that carries the error's details as JSON
    /// (`src/error.rs`; `lib/native.js` turns it into a coded JS error).
    pub structured_error_prefix: &'static str,
}

/// The core's constants that JS also uses (internal; see `constants` in `lib/native.js`).
#[napi]
pub fn shared_constants() -> SharedConstants {
    SharedConstants {
        apple_double_exclude: tar::APPLE_DOUBLE_EXCLUDE,
        git_archive_excludes: exclude::GIT_ARCHIVE_EXCLUDES.to_vec(),
        ignore_scan_max_entry_count: ignore_scan::MAX_ENTRY_COUNT as u32,
        ignore_scan_max_total_bytes: ignore_scan::MAX_TOTAL_BYTES as u32,
        ignore_scan_max_output_bytes: ignore_scan::MAX_OUTPUT_BYTES as u32,
        max_chunk_size: crate::tar::MAX_CHUNK_SIZE,
        structured_error_prefix: crate::error::STRUCTURED_PREFIX,
    }
}
