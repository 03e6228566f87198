//! Watched snapshots (internal binding of `createSnapshotWatcher`, `lib/snapshot-watch.js`).
//!
//! A handle owns one core [`SnapshotWatcher`]; a capture runs on the bounded blocking pool
//! and returns only the directories whose children changed (the JS layer keeps each
//! directory's sorted children and rebuilds upstream's `Map` from them). There is no thread
//! per watcher: the inotify descriptor is drained by the capture itself.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::{Uint32Array, Uint8Array};
use napi_derive::napi;
use paperclip_sync_core::error::{codes, Error};
use paperclip_sync_core::snapshot::{self, Entry};
use paperclip_sync_core::snapshot_watch::{Counters, SnapshotWatcher, WatchOptions};

use crate::cancel;
use crate::error::run_blocking;
use crate::snapshot::worker_threads;

#[derive(Default, Clone, Copy)]
struct Published {
    counters: Counters,
    watches: u32,
    entries: u32,
    directories: u32,
    watching: bool,
    reason: Option<&'static str>,
}

/// One watched tree (internal).
#[napi]
pub struct SnapshotWatcherHandle {
    inner: Arc<Mutex<Option<SnapshotWatcher>>>,
    published: Arc<Mutex<Published>>,
    closed: Arc<AtomicBool>,
}

fn publish(watcher: &SnapshotWatcher) -> Published {
    Published {
        counters: watcher.counters(),
        watches: watcher.watches() as u32,
        entries: watcher.entries() as u32,
        directories: watcher.directories() as u32,
        watching: watcher.unwatched_reason().is_none(),
        reason: watcher.unwatched_reason(),
    }
}

/// Creates a watcher of `root` (nothing is read until the first capture; internal).
#[napi]
pub fn snapshot_watch_create(root: String, exclude: Vec<String>, max_watches: Option<u32>) -> SnapshotWatcherHandle {
    let options =
        WatchOptions { threads: worker_threads(), max_watches: max_watches.map_or(usize::MAX, |n| n as usize) };
    let watcher = SnapshotWatcher::new(&PathBuf::from(root), &exclude, options);
    let published = publish(&watcher);
    SnapshotWatcherHandle {
        inner: Arc::new(Mutex::new(Some(watcher))),
        published: Arc::new(Mutex::new(published)),
        closed: Arc::new(AtomicBool::new(false)),
    }
}

/// What a watched capture changed (internal). `dirs` names `dirCount` directories
/// (`\0`-joined, `""` the root), directory `k` has `childCounts[k]` children, listed in
/// order in `kinds` (0 skipped, 1 dir, 2 file, 3 symlink), `modes` and `names`; files'
/// hashes (64 hex digits each) and symlinks' targets (`\0`-joined) in child order.
/// `removed` names `removedCount` directories no longer in the tree. With `reset`, the
/// directories listed are the whole tree.
#[napi(object, object_from_js = false)]
pub struct SnapshotWatchTransfer {
    pub reset: bool,
    pub dirs: String,
    pub dir_count: u32,
    pub child_counts: Uint32Array,
    pub removed: String,
    pub removed_count: u32,
    pub kinds: Uint8Array,
    pub modes: Uint32Array,
    pub names: String,
    pub hashes: String,
    pub targets: String,
}

/// Brings the watcher's state up to date and returns what changed (internal).
#[napi]
pub async fn snapshot_watch_capture(
    handle: &SnapshotWatcherHandle,
    cancel_id: Option<u32>,
) -> napi::Result<SnapshotWatchTransfer> {
    let inner = Arc::clone(&handle.inner);
    let published = Arc::clone(&handle.published);
    let closed = Arc::clone(&handle.closed);
    let cancel = cancel::flag(cancel_id);
    run_blocking(move || {
        let mut guard = inner.lock().map_err(|_| Error::new(codes::INTERNAL, "snapshot watcher state poisoned"))?;
        let closed_error = || Error::new(codes::WATCHER_CLOSED, "the snapshot watcher is closed");
        if closed.load(Ordering::Relaxed) {
            guard.take();
        }
        let watcher = guard.as_mut().ok_or_else(closed_error)?;
        let outcome = watcher.capture(&cancel);
        if let Ok(mut slot) = published.lock() {
            *slot = publish(watcher);
        }
        let delta = outcome?;
        let mut dirs = String::new();
        let mut child_counts = Vec::with_capacity(delta.changed.len());
        let mut kinds = Vec::new();
        let mut modes = Vec::new();
        let mut names = String::new();
        let mut hashes = String::new();
        let mut targets = String::new();
        let (mut any_name, mut any_target) = (false, false);
        for (k, rel) in delta.changed.iter().enumerate() {
            if k > 0 {
                dirs.push('\0');
            }
            dirs.push_str(rel);
            let children = watcher.children(rel).unwrap_or(&[]);
            child_counts.push(children.len() as u32);
            for child in children {
                if any_name {
                    names.push('\0');
                }
                any_name = true;
                names.push_str(&child.name);
                modes.push(child.stat.mode);
                kinds.push(match &child.entry {
                    None => 0u8,
                    Some(Entry::Dir) => 1,
                    Some(Entry::File { hash, .. }) => {
                        hashes.push_str(&snapshot::hex(hash));
                        2
                    }
                    Some(Entry::Symlink { target }) => {
                        if any_target {
                            targets.push('\0');
                        }
                        any_target = true;
                        targets.push_str(target);
                        3
                    }
                });
            }
        }
        let transfer = SnapshotWatchTransfer {
            reset: delta.reset,
            dirs,
            dir_count: delta.changed.len() as u32,
            child_counts: child_counts.into(),
            removed: delta.removed.join("\0"),
            removed_count: delta.removed.len() as u32,
            kinds: kinds.into(),
            modes: modes.into(),
            names,
            hashes,
            targets,
        };
        if closed.load(Ordering::Relaxed) {
            guard.take();
        }
        Ok(transfer)
    })
    .await
}

/// A watcher's counters (internal; see `SnapshotWatcher.stats()` in lib/snapshot-watch.d.ts).
#[napi(object, object_from_js = false)]
pub struct SnapshotWatchStats {
    pub captures: f64,
    pub events: f64,
    pub full_walks: f64,
    pub subtree_rewalks: f64,
    pub dirs_reread: f64,
    pub files_hashed: f64,
    pub hashes_reused: f64,
    pub overflow: f64,
    pub dropped_watch: f64,
    pub directory_replaced: f64,
    pub racy_window: f64,
    pub watch_limit: f64,
    pub unsupported_platform: f64,
    pub hard_links: f64,
    pub mount_changes: f64,
    pub mounted_files: f64,
    pub watches: u32,
    pub entries: u32,
    pub directories: u32,
    pub watching: bool,
    pub reason: Option<String>,
    pub closed: bool,
}

/// The counters as of the last capture (internal).
#[napi]
pub fn snapshot_watch_stats(handle: &SnapshotWatcherHandle) -> SnapshotWatchStats {
    let p = handle.published.lock().map(|p| *p).unwrap_or_default();
    let c = p.counters;
    let closed = handle.closed.load(Ordering::Relaxed);
    SnapshotWatchStats {
        captures: c.captures as f64,
        events: c.events as f64,
        full_walks: c.full_walks as f64,
        subtree_rewalks: c.subtree_rewalks as f64,
        dirs_reread: c.dirs_reread as f64,
        files_hashed: c.files_hashed as f64,
        hashes_reused: c.hashes_reused as f64,
        overflow: c.overflow as f64,
        dropped_watch: c.dropped_watch as f64,
        directory_replaced: c.directory_replaced as f64,
        racy_window: c.racy_window as f64,
        watch_limit: c.watch_limit as f64,
        unsupported_platform: c.unsupported_platform as f64,
        hard_links: c.hard_links as f64,
        mount_changes: c.mount_changes as f64,
        mounted_files: c.mounted_files as f64,
        watches: if closed { 0 } else { p.watches },
        entries: p.entries,
        directories: p.directories,
        watching: p.watching && !closed,
        reason: if closed { Some("closed".into()) } else { p.reason.map(str::to_string) },
        closed,
    }
}

/// Closes the watcher: its inotify descriptor and every watch are released now, or, while
/// a capture is running, as soon as it ends (internal). Never blocks on a running capture.
#[napi]
pub fn snapshot_watch_close(handle: &SnapshotWatcherHandle) {
    handle.closed.store(true, Ordering::Relaxed);
    if let Ok(mut guard) = handle.inner.try_lock() {
        guard.take();
    }
}
