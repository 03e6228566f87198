//! The restore merge and the listing under `mirrorDirectory` (docs/merge.md).
//!
//! `lib/workspace-restore-merge.js` drives the merge: it captures the source here (outside
//! the lock) and decodes the baseline meanwhile, keeps both native ([`MergeSource`],
//! [`MergeBaseline`]), takes the lock in JS, awaits the
//! caller's hooks, and calls [`merge_apply`] inside the lock. Nothing here waits for JS.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use napi::bindgen_prelude::Buffer;
use napi::bindgen_prelude::{Uint32Array, Uint8Array};
use napi_derive::napi;
use paperclip_sync_core::error::{codes, Error};
use paperclip_sync_core::merge::{self, Baseline, BaselineEntry, Outcome};
use paperclip_sync_core::remote_start::{parse_ls_tree, Checkout, RemoteStart};
use paperclip_sync_core::reserved::OnReserved;
use paperclip_sync_core::snapshot::{self, Snapshot};
use paperclip_sync_core::walk::{self, Kind};

use crate::cancel;
use crate::error::{run_blocking, to_napi};
use crate::snapshot::worker_threads;

/// A captured merge source, kept native until the merge applies it (internal).
#[napi]
pub struct MergeSource {
    root: PathBuf,
    snapshot: Arc<Snapshot>,
}

#[napi]
impl MergeSource {
    /// The number of entries (directories, files, symlinks) the source holds.
    #[napi(getter)]
    pub fn entry_count(&self) -> u32 {
        self.snapshot.entries.iter().filter(|e| e.is_some()).count() as u32
    }
}

/// Captures the merge source (internal; upstream step 1 of `mergeDirectoryWithBaseline`).
/// A name we reserve in it is refused, or with `leave_out_reserved` (a lane's restore, where
/// such a name never travels) left out.
#[napi]
pub async fn merge_capture_source(
    source_dir: String,
    exclude: Vec<String>,
    cancel_id: Option<u32>,
    leave_out_reserved: Option<bool>,
) -> napi::Result<MergeSource> {
    let cancel = cancel::flag(cancel_id);
    run_blocking(move || {
        let root = PathBuf::from(source_dir);
        let snap = snapshot::capture(&snapshot::CaptureOptions {
            root: &root,
            exclude: &exclude,
            threads: worker_threads(),
            previous: None,
            hash_only: None,
            // An unreadable source directory fails the merge before any change: read as
            // empty, its entries would be deleted from the host.
            readdir_errors: walk::ReaddirErrors::Propagate,
            // The source is untrusted (a sandbox's or remote's tree): a name we reserve in
            // it fails the merge before any change, or (a lane's restore) is left out.
            on_reserved: if leave_out_reserved == Some(true) {
                OnReserved::Skip
            } else {
                OnReserved::Refuse("the merge source")
            },
            cancel: &cancel,
        })?;
        Ok(MergeSource { root, snapshot: Arc::new(snap) })
    })
    .await
}

/// A baseline snapshot in transfer form (internal). Entry `i` has path
/// `paths.split("\0")[i]` and kind `kinds[i]` (0 unmatchable, 1 dir, 2 file, 3 symlink);
/// files have `modes[i]` and the next 64 hex digits of `hashes`; symlinks the next
/// `\0`-separated target of `targets`.
#[napi(object, object_to_js = false)]
pub struct MergeBaselineTransfer {
    pub paths: String,
    pub kinds: Uint8Array,
    pub modes: Uint32Array,
    pub hashes: String,
    pub targets: String,
}

/// What a merge did, or why it refused (internal).
#[napi(object, object_from_js = false)]
pub struct MergeOutcomeTransfer {
    /// Set when the merge was refused before any change: the error code.
    pub refused_code: Option<String>,
    pub refused_message: Option<String>,
    /// The refused paths (conflicts or symlinked ancestors), relative to the target.
    pub paths: Vec<String>,
    pub deleted: u32,
    pub removed_dirs: u32,
    pub applied: u32,
    /// Host files given the source's mode alone (a lane's restore).
    pub chmodded: u32,
    /// What a lane's restore kept as the host holds it (sorted), and why (same order:
    /// `host-changed`, `never-sent`, `not-empty`, `special-file`, `blocked`).
    pub kept_paths: Vec<String>,
    pub kept_reasons: Vec<String>,
    /// Entries that failed to apply: their paths, and their errors in the structured form
    /// `lib/native.js` turns into JS errors (same order).
    pub failed_paths: Vec<String>,
    pub failed_errors: Vec<String>,
    /// Entries at the target's root carrying one of our staging names that this host did not
    /// create: left alone, reported by the JS layer.
    pub foreign_staging: Vec<String>,
    /// A lane's restore: what the host now holds where the merge changed it, per path (same
    /// order): its kind (`0` removed, `1` directory, `2` file, `3` symlink), a file's mode and
    /// hash (hex; else `0` and empty), a link's target (else empty).
    pub advanced_paths: Vec<String>,
    pub advanced_kinds: Vec<u32>,
    pub advanced_modes: Vec<u32>,
    pub advanced_hashes: Vec<String>,
    pub advanced_targets: Vec<String>,
}

fn decode_hash(hex: &str) -> Option<[u8; 32]> {
    snapshot::decode_hex(hex)
}

fn decode_baseline(paths: &str, kinds: &[u8], modes: &[u32], hashes: &str, targets: &str) -> Result<Baseline, Error> {
    let bad = || Error::new(codes::INVALID_ARGUMENT, "malformed baseline transfer");
    if kinds.is_empty() {
        return Ok(Baseline::default());
    }
    let mut path_iter = paths.split('\0');
    let mut target_iter = targets.split('\0');
    let mut hash_at = 0usize;
    let mut entries = Vec::with_capacity(kinds.len());
    for (i, kind) in kinds.iter().enumerate() {
        let rel = path_iter.next().ok_or_else(bad)?;
        let entry = match kind {
            1 => BaselineEntry::Dir,
            2 => {
                let hex = hashes.get(hash_at..hash_at + 64).ok_or_else(bad)?;
                hash_at += 64;
                match decode_hash(hex) {
                    Some(hash) => BaselineEntry::File { mode: *modes.get(i).ok_or_else(bad)?, hash },
                    None => BaselineEntry::Unmatchable,
                }
            }
            3 => BaselineEntry::Symlink { target: target_iter.next().ok_or_else(bad)?.to_string() },
            _ => BaselineEntry::Unmatchable,
        };
        entries.push((rel.to_string(), entry));
    }
    Ok(Baseline::new(entries))
}

/// A decoded baseline, kept native until the merge applies against it (internal).
#[napi]
pub struct MergeBaseline {
    baseline: Arc<Baseline>,
}

/// Decodes a baseline transfer off the JS thread (internal): the merge decodes it while the
/// source is captured, before it takes the lock, so the decoding is not inside the lock.
#[napi]
pub async fn merge_decode_baseline(baseline: MergeBaselineTransfer) -> napi::Result<MergeBaseline> {
    let kinds = baseline.kinds.to_vec();
    let modes = baseline.modes.to_vec();
    let MergeBaselineTransfer { paths, hashes, targets, .. } = baseline;
    run_blocking(move || {
        let baseline = decode_baseline(&paths, &kinds, &modes, &hashes, &targets)?;
        Ok(MergeBaseline { baseline: Arc::new(baseline) })
    })
    .await
}

/// What a lane's prepare gave the remote (internal; `lib/lifecycle/remote-start.js` builds it).
#[napi(object, object_to_js = false)]
pub struct RemoteStartTransfer {
    /// The `--exclude` values of the send and of the pull (`._*` is added).
    pub untransferred: Vec<String>,
    /// A git workspace's checkout: `git ls-tree -r -z --full-tree <head>` output.
    pub tree: Option<Buffer>,
    /// The host paths sent over the checkout.
    pub overlay: Option<Vec<String>>,
    /// The host's whole working tree was sent over the checkout (the SSH lane).
    pub whole_tree: Option<bool>,
    /// The paths removed after the checkout and the overlay.
    pub removed: Option<Vec<String>>,
    /// The permission bits the remote's extraction may clear (its umask), when known.
    pub mask: Option<u32>,
    /// The umask a checkout's files were made under on this host.
    pub checkout_umask: Option<u32>,
}

/// A described remote start, kept native for the merge (internal).
#[napi]
pub struct MergeStart {
    start: Arc<RemoteStart>,
}

#[napi]
impl MergeStart {
    /// Which of `paths` some transfer carries (none of their components is excluded).
    #[napi]
    pub fn transferable(&self, paths: Vec<String>) -> Vec<bool> {
        paths.iter().map(|rel| self.start.transferable(rel)).collect()
    }

    /// The top-level names a checkout gave the remote, sorted; `null` without a checkout.
    #[napi]
    pub fn checkout_top_level(&self) -> Option<Vec<String>> {
        self.start.checkout_top_level()
    }
}

/// Describes what a lane's prepare gave the remote, off the JS thread (internal).
#[napi]
pub async fn merge_describe_start(input: RemoteStartTransfer) -> napi::Result<MergeStart> {
    let RemoteStartTransfer { untransferred, tree, overlay, whole_tree, removed, mask, checkout_umask } = input;
    let tree = tree.map(|buffer| buffer.to_vec());
    run_blocking(move || {
        let checkout = match tree {
            Some(bytes) if whole_tree == Some(true) => {
                Some(Checkout::under_whole_tree(parse_ls_tree(&bytes)?, removed.unwrap_or_default()))
            }
            Some(bytes) => {
                Some(Checkout::new(parse_ls_tree(&bytes)?, overlay.unwrap_or_default(), removed.unwrap_or_default()))
            }
            None => None,
        };
        let start = RemoteStart::new(&untransferred, checkout).with_masks(mask, checkout_umask);
        Ok(MergeStart { start: Arc::new(start) })
    })
    .await
}

/// Applies a captured source to the canonical `target` against the decoded baseline
/// (internal; upstream steps 2.2 to 2.5 of `mergeDirectoryWithBaseline`, run inside the JS
/// lock). With `start`, a lane's restore: only what the agent changed (core `merge::judged`).
#[napi]
pub async fn merge_apply(
    source: &MergeSource,
    baseline: &MergeBaseline,
    target: String,
    exclude: Vec<String>,
    reject_conflicts: bool,
    start: Option<&MergeStart>,
) -> napi::Result<MergeOutcomeTransfer> {
    let (source_root, source) = (source.root.clone(), Arc::clone(&source.snapshot));
    let baseline = Arc::clone(&baseline.baseline);
    let start = start.map(|start| Arc::clone(&start.start));
    run_blocking(move || {
        let target = PathBuf::from(target);
        let outcome = merge::merge(&merge::MergeOptions {
            source_root: &source_root,
            source: &source,
            target: &target,
            baseline: &baseline,
            exclude: &exclude,
            reject_conflicts,
            start: start.as_deref(),
            threads: worker_threads(),
            cancel: &AtomicBool::new(false),
        })?;
        let mut out = MergeOutcomeTransfer {
            refused_code: None,
            refused_message: None,
            paths: Vec::new(),
            deleted: 0,
            removed_dirs: 0,
            applied: 0,
            chmodded: 0,
            kept_paths: Vec::new(),
            kept_reasons: Vec::new(),
            failed_paths: Vec::new(),
            failed_errors: Vec::new(),
            foreign_staging: Vec::new(),
            advanced_paths: Vec::new(),
            advanced_kinds: Vec::new(),
            advanced_modes: Vec::new(),
            advanced_hashes: Vec::new(),
            advanced_targets: Vec::new(),
        };
        let set_stats = |stats: merge::MergeStats, out: &mut MergeOutcomeTransfer| {
            out.deleted = stats.deleted as u32;
            out.removed_dirs = stats.removed_dirs as u32;
            out.applied = stats.applied as u32;
            out.chmodded = stats.chmodded as u32;
            for kept in &stats.kept {
                out.kept_paths.push(kept.path.clone());
                out.kept_reasons.push(kept.reason.as_str().to_string());
            }
            out.foreign_staging = stats.foreign_staging;
            for (path, now) in stats.advanced {
                let (kind, mode, hash, target) = match now {
                    None => (0, 0, String::new(), String::new()),
                    Some(BaselineEntry::Dir) => (1, 0, String::new(), String::new()),
                    Some(BaselineEntry::File { mode, hash }) => (2, mode, snapshot::hex(&hash), String::new()),
                    Some(BaselineEntry::Symlink { target }) => (3, 0, String::new(), target),
                    Some(BaselineEntry::Unmatchable) => continue,
                };
                out.advanced_paths.push(path);
                out.advanced_kinds.push(kind);
                out.advanced_modes.push(mode);
                out.advanced_hashes.push(hash);
                out.advanced_targets.push(target);
            }
        };
        match outcome {
            Outcome::Merged(stats) => set_stats(stats, &mut out),
            Outcome::Refused(refusal) => {
                out.refused_code = Some(refusal.code.to_string());
                out.refused_message = Some(refusal.message);
                out.paths = refusal.paths;
            }
            Outcome::Failed { stats, failures } => {
                set_stats(stats, &mut out);
                for (path, err) in failures {
                    out.failed_paths.push(path);
                    out.failed_errors.push(to_napi(err).reason);
                }
            }
        }
        Ok(out)
    })
    .await
}

/// A tree listing (internal; see `mirrorDirectory`): `paths` `\0`-joined, `kinds[i]`
/// 1 dir, 2 file, 3 symlink, 4 other.
#[napi(object, object_from_js = false)]
pub struct TreeListing {
    pub paths: String,
    pub kinds: Uint8Array,
}

/// Lists every entry below `root` without following symlinks; unreadable directories
/// read as empty (internal). Names we reserve are left out, or, with `untrusted` (a
/// mirror's source), refused with `ERR_PAPERCLIP_NATIVE_UNSAFE_ARCHIVE_ENTRY`.
#[napi]
pub async fn list_tree(root: String, untrusted: bool) -> napi::Result<TreeListing> {
    run_blocking(move || {
        let on_reserved = if untrusted { OnReserved::Refuse("the mirror source") } else { OnReserved::Skip };
        let entries = walk::list(&PathBuf::from(root), worker_threads(), on_reserved, &AtomicBool::new(false))?;
        let mut paths = String::with_capacity(entries.len() * 16);
        let mut kinds = Vec::with_capacity(entries.len());
        for (i, (rel, kind)) in entries.into_iter().enumerate() {
            if i > 0 {
                paths.push('\0');
            }
            paths.push_str(&rel);
            kinds.push(match kind {
                Kind::Dir => 1u8,
                Kind::File => 2,
                Kind::Symlink => 3,
                Kind::Other => 4,
            });
        }
        Ok(TreeListing { paths, kinds: kinds.into() })
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_hashes_and_rejects_upper_case() {
        let hex = "00ff".repeat(16);
        assert_eq!(decode_hash(&hex).unwrap()[..2], [0x00, 0xff]);
        assert!(decode_hash(&hex.to_uppercase()).is_none());
        assert!(decode_hash("abc").is_none());
    }

    #[test]
    fn decodes_a_baseline_transfer() {
        let hex = "ab".repeat(32);
        let b = decode_baseline("d\0d/f\0d/l\0weird", &[1, 2, 3, 0], &[0, 0o100644, 0, 0], &hex, "../x").unwrap();
        assert_eq!(b.len(), 4);
        assert!(decode_baseline("d", &[2], &[0], "", "").is_err());
    }
}
