//! Snapshot capture, entry reads and the content signature (docs/snapshots.md).
//!
//! A capture crosses into JS as a compact transfer (typed arrays and a few joined strings)
//! instead of one JS object per entry; `lib/workspace-restore-merge.js` builds upstream's
//! `Map` from it in upstream's order (siblings by `localeCompare` in the process locale).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use napi::bindgen_prelude::{Uint32Array, Uint8Array};
use napi_derive::napi;
use paperclip_sync_core::snapshot::{self, Entry, FileIdentity, PreviousHashes};
use paperclip_sync_core::walk::Kind;

use crate::cancel;
use crate::error::run_blocking;

/// Timestamps within this window before a capture started are "racy": a later incremental
/// capture re-hashes such files even when their stat data is unchanged (git's rule).
const RACY_GRANULARITY_NS: i128 = 2_000_000_000;

/// Worker threads for one capture: the machine's parallelism, at most 8.
pub fn worker_threads() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).clamp(1, 8)
}

/// Stat data and hashes of a previous capture, for an incremental capture (internal).
#[napi]
pub struct SnapshotStatCache {
    inner: Arc<PreviousHashes>,
}

#[napi]
impl SnapshotStatCache {
    /// Files whose hashes this cache can offer.
    #[napi(getter)]
    pub fn size(&self) -> u32 {
        self.inner.files.len() as u32
    }
}

/// A capture in transfer form (internal). Node `i` has kind `kinds[i]` (0 skipped, 1 dir,
/// 2 file, 3 symlink), name `names.split("\0")[i]`, mode `modes[i]`, and children
/// `childStart[i]..childEnd[i]`; files' hashes are 64 hex digits each in node order in
/// `hashes`, symlinks' targets are `\0`-joined in node order in `targets`.
#[napi(object, object_from_js = false)]
pub struct SnapshotTransfer {
    pub kinds: Uint8Array,
    pub modes: Uint32Array,
    pub child_start: Uint32Array,
    pub child_end: Uint32Array,
    pub root_start: u32,
    pub root_end: u32,
    pub names: String,
    pub hashes: String,
    pub targets: String,
    pub reused_hashes: u32,
    pub cache: Option<SnapshotStatCache>,
}

/// Captures the tree under `root` (internal; see `captureDirectorySnapshot`).
#[napi]
pub async fn snapshot_capture(
    root: String,
    exclude: Vec<String>,
    previous: Option<&SnapshotStatCache>,
    keep_cache: bool,
    cancel_id: Option<u32>,
) -> napi::Result<SnapshotTransfer> {
    let previous = previous.map(|cache| Arc::clone(&cache.inner));
    let cancel = cancel::flag(cancel_id);
    run_blocking(move || {
        let started_ns = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as i128).unwrap_or(0);
        let root = PathBuf::from(root);
        let snap = snapshot::capture(&snapshot::CaptureOptions {
            root: &root,
            exclude: &exclude,
            threads: worker_threads(),
            previous: previous.as_deref(),
            hash_only: None,
            readdir_errors: paperclip_sync_core::walk::ReaddirErrors::TreatAsEmpty,
            on_reserved: paperclip_sync_core::reserved::OnReserved::Skip,
            cancel: &cancel,
        })?;
        let n = snap.tree.nodes.len();
        let mut kinds = Vec::with_capacity(n);
        let mut modes = Vec::with_capacity(n);
        let mut names = String::with_capacity(snap.tree.nodes.iter().map(|node| node.name.len() + 1).sum());
        let file_count = snap.entries.iter().filter(|e| matches!(e, Some(Entry::File { .. }))).count();
        let mut hashes = String::with_capacity(file_count * 64);
        let mut targets = String::new();
        let mut files = std::collections::HashMap::new();
        let mut symlinks = 0usize;
        for (i, (node, entry)) in snap.tree.nodes.iter().zip(&snap.entries).enumerate() {
            if i > 0 {
                names.push('\0');
            }
            names.push_str(&node.name);
            modes.push(node.stat.mode);
            kinds.push(match entry {
                None => 0u8,
                Some(Entry::Dir) => 1,
                Some(Entry::File { hash, .. }) => {
                    snapshot::push_hex(&mut hashes, hash);
                    if keep_cache {
                        files.insert(node.rel.clone(), (FileIdentity::from(&node.stat), *hash));
                    }
                    2
                }
                Some(Entry::Symlink { target }) => {
                    if symlinks > 0 {
                        targets.push('\0');
                    }
                    symlinks += 1;
                    targets.push_str(target);
                    3
                }
            });
            debug_assert!(entry.is_some() || node.stat.kind == Kind::Other);
        }
        let (child_start, child_end): (Vec<u32>, Vec<u32>) = snap.tree.children.iter().copied().unzip();
        let (root_start, root_end) = snap.tree.root_children;
        let reused_hashes = snap.reused_hashes as u32;
        drop_off_the_critical_path(snap);
        let cache = keep_cache.then(|| SnapshotStatCache {
            inner: Arc::new(PreviousHashes { files, captured_at_ns: started_ns, granularity_ns: RACY_GRANULARITY_NS }),
        });
        Ok(SnapshotTransfer {
            kinds: kinds.into(),
            modes: modes.into(),
            child_start: child_start.into(),
            child_end: child_end.into(),
            root_start,
            root_end,
            names,
            hashes,
            targets,
            reused_hashes,
            cache,
        })
    })
    .await
}

/// Frees a capture's tree (one allocation or more per entry: 7-30 ms for 124 536 entries)
/// on another thread of the runtime's bounded blocking pool, so the result reaches JS
/// without waiting for it; here, when called outside the runtime.
fn drop_off_the_critical_path(snap: snapshot::Snapshot) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => drop(runtime.spawn_blocking(move || drop(snap))),
        Err(_) => drop(snap),
    }
}

/// One entry read for a baseline comparison (internal; see `directoryEntryMatchesBaseline`).
#[napi(object)]
pub struct SnapshotEntryTransfer {
    /// `dir`, `file` or `symlink`.
    pub kind: String,
    pub mode: Option<u32>,
    pub hash: Option<String>,
    pub target: Option<String>,
}

/// Reads the entry at `root/relative`, `null` when it is missing or not a
/// directory/symlink/regular file (internal).
#[napi]
pub async fn snapshot_read_entry(root: String, relative: String) -> napi::Result<Option<SnapshotEntryTransfer>> {
    run_blocking(move || {
        Ok(snapshot::read_entry(&PathBuf::from(root), &relative)?.map(|entry| match entry {
            Entry::Dir => SnapshotEntryTransfer { kind: "dir".into(), mode: None, hash: None, target: None },
            Entry::File { mode, hash } => SnapshotEntryTransfer {
                kind: "file".into(),
                mode: Some(mode),
                hash: Some(snapshot::hex(&hash)),
                target: None,
            },
            Entry::Symlink { target } => {
                SnapshotEntryTransfer { kind: "symlink".into(), mode: None, hash: None, target: Some(target) }
            }
        }))
    })
    .await
}

/// The content signature of a tree (internal; see `referencedSourceContentSignature`).
#[napi]
pub async fn content_signature(
    root: String,
    ignored_paths: Vec<String>,
    cancel_id: Option<u32>,
) -> napi::Result<String> {
    let cancel = cancel::flag(cancel_id);
    run_blocking(move || snapshot::content_signature(&PathBuf::from(root), &ignored_paths, worker_threads(), &cancel))
        .await
}
