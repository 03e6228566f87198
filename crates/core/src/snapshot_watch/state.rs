//! The watched state's types: each directory's identity and kept children, the counters,
//! the delta a capture reports, the options; and the relative-path helpers.

use std::path::Path;

use crate::snapshot::Entry;
use crate::walk::{Kind, Stat};

/// One kept entry of a directory, as the walker saw it.
#[derive(Debug, Clone)]
pub struct Child {
    pub name: String,
    pub stat: Stat,
    /// The snapshot entry; `None` for sockets, FIFOs and devices (upstream skips them).
    pub entry: Option<Entry>,
}

/// A directory's state: its own identity and its kept children in byte order of their names.
#[derive(Debug)]
pub(super) struct DirState {
    pub(super) dev: u64,
    pub(super) ino: u64,
    pub(super) mode: u32,
    pub(super) wd: Option<i32>,
    pub(super) children: Vec<Child>,
}

impl DirState {
    pub(super) fn same_dir(&self, stat: &Stat) -> bool {
        stat.kind == Kind::Dir && stat.dev == self.dev && stat.ino == self.ino && stat.mode == self.mode
    }

    pub(super) fn child(&self, name: &str) -> Option<&Child> {
        self.children.binary_search_by(|c| c.name.as_bytes().cmp(name.as_bytes())).ok().map(|i| &self.children[i])
    }
}

/// What the watcher did, cumulatively.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    pub captures: u64,
    /// inotify events read.
    pub events: u64,
    /// Captures that walked the whole tree (the first, and every fallback to a full walk).
    pub full_walks: u64,
    /// Subtrees walked fresh below a re-read directory (new, replaced or unwatched ones).
    pub subtree_rewalks: u64,
    /// Dirty directories re-read (one level each).
    pub dirs_reread: u64,
    /// Files read and hashed.
    pub files_hashed: u64,
    /// Hashes kept from the state because the file's identity was unchanged.
    pub hashes_reused: u64,
    /// Fallback: the kernel's event queue overflowed (a full walk).
    pub overflow: u64,
    /// Fallback: a directory's watch was dropped (deleted, moved away, unmounted): its subtree re-walked.
    pub dropped_watch: u64,
    /// Fallback: something else stood at a watched directory's path: its subtree re-walked.
    pub directory_replaced: u64,
    /// Fallback: files re-hashed only because they were modified within the racy window.
    pub racy_window: u64,
    /// Fallback: the watch limit was reached; watching stopped (full walks from then on).
    pub watch_limit: u64,
    /// Fallback: no inotify on this platform (full walks).
    pub unsupported_platform: u64,
    /// Fallback: directory re-reads because they hold a file with several hard links.
    pub hard_links: u64,
    /// Fallback: mount points under the root whose mount changed (mounted, unmounted,
    /// replaced): the directory holding each re-read, the mounted subtree walked fresh.
    pub mount_changes: u64,
    /// Fallback: directory re-reads because they hold a file that is a mount point (a
    /// bind-mounted file is written through its source without an event here).
    pub mounted_files: u64,
}

/// What a capture changed in the state, for a caller that mirrors it (the JS layer keeps
/// each directory's sorted children and rebuilds only the directories named here).
#[derive(Debug, Default)]
pub struct Delta {
    /// The whole state was rebuilt: forget everything, then take `changed`.
    pub reset: bool,
    /// Directories (relative paths, `""` the root) whose children were (re)written.
    pub changed: Vec<String>,
    /// Directories that are no longer part of the tree.
    pub removed: Vec<String>,
}

/// Options of [`SnapshotWatcher::new`].
#[derive(Debug, Clone, Copy)]
pub struct WatchOptions {
    /// Walk and hash threads.
    pub threads: usize,
    /// At most this many inotify watches (one per directory); past it watching stops.
    pub max_watches: usize,
}

/// `parent/name`, or `name` at the root.
pub(super) fn join_rel(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}/{name}")
    }
}

pub(super) fn parent_of(rel: &str) -> &str {
    rel.rfind('/').map_or("", |i| &rel[..i])
}

pub(super) fn split_rel(rel: &str) -> (&str, &str) {
    match rel.rfind('/') {
        Some(i) => (&rel[..i], &rel[i + 1..]),
        None => ("", rel),
    }
}

pub(super) fn depth_key(rel: &str) -> (usize, String) {
    let depth = if rel.is_empty() { 0 } else { rel.bytes().filter(|b| *b == b'/').count() + 1 };
    (depth, rel.to_string())
}

pub(super) fn now_ns() -> i128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i128).unwrap_or(0)
}

pub(super) fn stat_root(root: &Path) -> Option<(u64, u64, u32)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(root).ok()?;
    meta.is_dir().then(|| (meta.dev(), meta.ino(), meta.mode()))
}
