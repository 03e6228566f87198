//! The in-process ignore scan behind `readReferencedSourceGitIgnoredPaths` (docs/ignore.md,
//! the trust model).
//!
//! Two calls mirror upstream's two git invocations, so the JS layer can give each its own
//! deadline (15 s for the toplevel probe, 60 s for the listing) exactly as upstream does:
//! [`ignore_scan_toplevel`] answers `git rev-parse --show-toplevel`, [`ignore_scan_list`]
//! answers `git ls-files --others --ignored --exclude-standard --directory --full-name -z`.
//! The listing is handed back in git's `-z` output form and parsed by the same JS code that
//! parses a host executor's output, so upstream's entry and byte bounds live in one place
//! (`lib/git-workspace-sync.js`); the core only enforces the raw-output allowance (upstream's
//! `maxBuffer`), which keeps a huge ignored set from ever being materialised.

use std::ffi::OsString;
use std::path::PathBuf;

use napi_derive::napi;
use paperclip_sync_core::error::Error as CoreError;
use paperclip_sync_core::ignore_scan::{self, Limits, UserEnv};

use crate::cancel;
use crate::error::run_blocking;

/// The user environment git would see (internal): only `HOME` and `XDG_CONFIG_HOME` change
/// what the hardened command reads (the default excludes file). The JS layer passes them
/// from `process.env` at call time, as upstream's hardened env copies it.
#[napi(object)]
pub struct IgnoreScanEnv {
    pub home: Option<String>,
    pub xdg_config_home: Option<String>,
}

impl From<IgnoreScanEnv> for UserEnv {
    fn from(env: IgnoreScanEnv) -> UserEnv {
        UserEnv { home: env.home.map(OsString::from), xdg_config_home: env.xdg_config_home.map(OsString::from) }
    }
}

/// A listing in transfer form (internal).
#[napi(object, object_from_js = false)]
pub struct IgnoreScanListing {
    /// The work-tree top, as `git rev-parse --show-toplevel` prints it (trimmed).
    pub toplevel: String,
    /// The ignored records in git's order, each followed by a NUL (like git's `-z` output,
    /// trailing slashes already stripped).
    pub records: String,
}

/// The work-tree top of `local_dir`, `null` when it is not inside a git work tree
/// (internal; see `readReferencedSourceGitIgnoredPaths`).
#[napi]
pub async fn ignore_scan_toplevel(local_dir: String) -> napi::Result<Option<String>> {
    run_blocking(move || ignore_scan::probe_toplevel(&PathBuf::from(local_dir)).map_err(CoreError::from)).await
}

/// The ignored records of `local_dir`, `null` when it is not inside a git work tree
/// (internal; see `readReferencedSourceGitIgnoredPaths`). Only upstream's raw-output
/// allowance is enforced here; the entry and byte bounds are applied by the JS parser.
#[napi]
pub async fn ignore_scan_list(
    local_dir: String,
    env: IgnoreScanEnv,
    cancel_id: Option<u32>,
) -> napi::Result<Option<IgnoreScanListing>> {
    let cancel = cancel::flag(cancel_id);
    let env = UserEnv::from(env);
    run_blocking(move || {
        let limits = Limits { max_entries: usize::MAX, max_total_bytes: usize::MAX, ..Limits::UPSTREAM };
        let scan = ignore_scan::scan_ignored_paths_with_env(&PathBuf::from(local_dir), limits, &env, &cancel)
            .map_err(CoreError::from)?;
        Ok(scan.map(|scan| {
            let size = scan.ignored_paths.iter().map(|p| p.len() + 1).sum();
            let mut records = String::with_capacity(size);
            for path in &scan.ignored_paths {
                records.push_str(path);
                records.push('\0');
            }
            IgnoreScanListing { toplevel: scan.toplevel, records }
        }))
    })
    .await
}

/// The physical form of each of `paths` (internal; `resolveReferencedSourceIgnore`'s step 4):
/// `realpath`, or Node's `path.resolve` when `realpath` fails. On the bounded pool, like the
/// scan itself, so a first resolution does not wait for libuv's thread pool to start.
#[napi]
pub async fn ignore_scan_physical_paths(paths: Vec<String>) -> napi::Result<Vec<String>> {
    run_blocking(move || Ok(paths.iter().map(|p| ignore_scan::physical_path(p)).collect())).await
}
