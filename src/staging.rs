//! Our staging directories inside a user's tree (the logic is
//! `paperclip_sync_core::staging` and `::reserved`; this is conversion only): the
//! reserved-name predicate the JS layer filters top-level listings with, fresh tagged
//! names, and the sweep an SSH pull runs before it starts.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use napi_derive::napi;
use paperclip_sync_core::error::{codes, Error as CoreError};
use paperclip_sync_core::fsat::Dir;
use paperclip_sync_core::reserved::{self, Kind};
use paperclip_sync_core::staging;

use crate::error::run_blocking;

/// True when `name` is one this library reserves (its staging directories and key;
/// internal).
#[napi]
pub fn reserved_name(name: String) -> bool {
    reserved::is_reserved(name.as_bytes())
}

/// A fresh staging name of `kind` (`"extract"`, `"pull"`, `"merge"` or `"restore"`) owned by this
/// process (internal).
#[napi]
pub fn staging_name(kind: String) -> napi::Result<String> {
    let kind = match kind.as_str() {
        "extract" => Kind::Extract,
        "pull" => Kind::Pull,
        "merge" => Kind::Merge,
        "restore" => Kind::Restore,
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

/// What a sweep left for its caller (internal).
#[napi(object)]
pub struct StagingSwept {
    /// Interrupted pulls to complete.
    pub pulls: Vec<StagingPendingPull>,
    /// Entries carrying one of our staging names that this host did not create: left
    /// alone, to be reported.
    pub foreign: Vec<String>,
}

/// Sweeps `dir` (see `paperclip_sync_core::staging::sweep`): returns the interrupted pulls
/// for the caller to complete and the foreign look-alikes to report (internal). A missing
/// `dir` has nothing to sweep.
#[napi]
pub async fn staging_sweep(dir: String) -> napi::Result<StagingSwept> {
    run_blocking(move || {
        let path = PathBuf::from(dir);
        let root = match Dir::open_nofollow(&path) {
            Ok(root) => root,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) => {
                return Ok(StagingSwept { pulls: Vec::new(), foreign: Vec::new() })
            }
            Err(e) => return Err(CoreError::io(e, "open", &path)),
        };
        let swept = staging::sweep(&root, &path, true)?;
        let lossy = |name: &[u8]| OsStr::from_bytes(name).to_string_lossy().into_owned();
        Ok(StagingSwept {
            pulls: swept
                .pulls
                .into_iter()
                .map(|(name, journal)| StagingPendingPull {
                    name: lossy(name.as_bytes()),
                    journal: String::from_utf8_lossy(&journal).into_owned(),
                })
                .collect(),
            foreign: swept.foreign.iter().map(|name| lossy(name.as_bytes())).collect(),
        })
    })
    .await
}
