//! Our staging directories inside a user's tree (the logic is
//! `paperclip_sync_core::staging`; this is conversion only): the name predicate the JS
//! layer filters top-level listings with, fresh owner-tagged names, and the sweep an SSH
//! pull runs before it starts.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use napi_derive::napi;
use paperclip_sync_core::error::{codes, Error as CoreError};
use paperclip_sync_core::fsat::Dir;
use paperclip_sync_core::staging;

use crate::error::run_blocking;

/// True when `name` is one of our staging names (internal).
#[napi]
pub fn staging_is_name(name: String) -> bool {
    staging::is_staging_name(name.as_bytes())
}

/// A fresh staging name of `kind` (`"extract"`, `"pull"`, `"merge"` or `"restore"`) owned by this
/// process (internal).
#[napi]
pub fn staging_name(kind: String) -> napi::Result<String> {
    let kind = match kind.as_str() {
        "extract" => staging::Kind::Extract,
        "pull" => staging::Kind::Pull,
        "merge" => staging::Kind::Merge,
        "restore" => staging::Kind::Restore,
        other => {
            return Err(crate::error::to_napi(CoreError::new(
                codes::INVALID_ARGUMENT,
                format!("unknown staging kind '{other}'"),
            )))
        }
    };
    Ok(staging::unique_name(kind.prefix()).to_string_lossy().into_owned())
}

/// An interrupted pull the sweep claimed for its caller (internal).
#[napi(object)]
pub struct StagingPendingPull {
    /// Its staging directory's name in the swept directory (now owned by this process).
    pub name: String,
    /// The journal it wrote before its first move.
    pub journal: String,
}

/// Sweeps `dir` (see `paperclip_sync_core::staging::sweep`) and returns the interrupted
/// pulls for the caller to complete (internal). A missing `dir` has nothing to sweep.
#[napi]
pub async fn staging_sweep(dir: String) -> napi::Result<Vec<StagingPendingPull>> {
    run_blocking(move || {
        let path = PathBuf::from(dir);
        let root = match Dir::open_nofollow(&path) {
            Ok(root) => root,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) => {
                return Ok(Vec::new())
            }
            Err(e) => return Err(CoreError::io(e, "open", &path)),
        };
        let swept = staging::sweep(&root, &path, true)?;
        Ok(swept
            .pulls
            .into_iter()
            .map(|(name, journal)| StagingPendingPull {
                name: OsStr::from_bytes(name.as_bytes()).to_string_lossy().into_owned(),
                journal: String::from_utf8_lossy(&journal).into_owned(),
            })
            .collect())
    })
    .await
}
