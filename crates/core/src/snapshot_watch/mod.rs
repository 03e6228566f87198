//! Watched snapshots: a [`SnapshotWatcher`] keeps the per-directory state of one tree (each
//! directory's kept children with their `lstat` identity and snapshot entry) current from
//! inotify events, so that a repeat capture re-reads only the directories that changed.
//!
//! Design (direct inotify through libc rather than the `notify` crate: the state logic needs
//! the exact kernel signals, `IN_Q_OVERFLOW`, `IN_IGNORED`, `IN_MOVE_SELF`, `IN_DELETE_SELF`,
//! and `ENOSPC` from `inotify_add_watch`, and it needs no thread: the non-blocking inotify
//! descriptor is drained at the start of each capture, so there is no reader thread to stop
//! and nothing that keeps a process alive):
//!
//! * a directory is *dirty* when an event named one of its kept children or itself; a capture
//!   re-reads each dirty directory (one level, through the shared walker) and walks fresh only
//!   the subdirectories that are new, replaced or whose watch was dropped; every other
//!   directory's state is kept as it is;
//! * a file's hash is reused only when its identity `(dev, ino, size, mtime, ctime, mode)` is
//!   unchanged and it was not modified within [`RACY_GRANULARITY_NS`] before the previous
//!   capture started (git's racily-clean rule); directories holding such racy files are
//!   re-read by the next capture whatever the events say;
//! * a watch is added before its directory is read (from the walker's `descend` hook), so no
//!   change between the read and the watch goes unseen;
//! * fallbacks, each counted in [`Counters`]: an event-queue overflow walks the whole tree; a
//!   dropped watch (the directory deleted, moved or unmounted) re-walks that subtree; a
//!   directory replaced under its path re-walks its subtree; the watch limit (`ENOSPC`, or
//!   the watcher's own `max_watches`) turns watching off and every later capture is a full
//!   walk that reuses unchanged hashes; without inotify (not Linux) likewise;
//! * mounts raise no event: each capture polls the mount table ([`mounts`]) and, when a mount
//!   point under the root changed, re-reads the directory holding it (so the subtree now at
//!   that path is walked fresh, its identity having changed); a directory holding a file
//!   that is itself a mount point (a bind-mounted file, written through its source without
//!   an event here) is re-read by every capture;
//! * one watch can name several paths (a directory bind-mounted elsewhere in the tree, or a
//!   moved one whose old place is not re-read yet): an event dirties each of them;
//! * a file re-read with several links whose name is new or whose identity changed (a hard
//!   link just made) is looked up by its inode among the files already held: the
//!   directories holding its other names are re-read now and by every later capture (a
//!   write through one name raises an event only in that name's directory).
//!
//! Every capture's result is the tree as a cold [`crate::snapshot::capture`] would see it:
//! the same walker, exclude matcher and hashing, applied to the directories that changed.
//!
//! Files by job: this one holds the watcher and its capture (events turned into dirty
//! directories, fallbacks decided); `reread.rs` walks and installs directories; `state.rs`
//! holds the state's types; `inotify.rs` and `mounts.rs` the kernel interfaces.

mod inotify;
mod mounts;
mod reread;
mod state;
// The tests drive inotify (watch counts, dropped watches, lost events) and Linux mounts
// (`mount`, `MS_BIND`, `umount2`); off Linux there is no inotify and every capture is a full
// walk (counted in `Counters::unsupported_platform`), so they compile and run on Linux only.
#[cfg(all(test, target_os = "linux"))]
mod tests;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Error, Result};
use crate::exclude::should_exclude_path;
use crate::walk::{join_like_node, Kind};
use inotify::{Inotify, IN_DONT_FOLLOW, IN_IGNORED, IN_Q_OVERFLOW, SELF_GONE, WATCH_MASK};
use mounts::Mounts;
use state::{depth_key, join_rel, now_ns, parent_of, stat_root, DirState};
pub use state::{Child, Counters, Delta, WatchOptions};

/// Files modified within this window before a capture started are re-hashed by the next
/// capture even when their stat identity is unchanged (the same rule as incremental captures).
pub const RACY_GRANULARITY_NS: i128 = 2_000_000_000;

/// The watched state of one tree (see the module docs).
pub struct SnapshotWatcher {
    root: PathBuf,
    exclude: Vec<String>,
    options: WatchOptions,
    inotify: Option<Inotify>,
    /// Why `inotify` is `None`.
    unwatched_reason: Option<&'static str>,
    /// Watch descriptor → the directories it names (one, unless the same inode is at
    /// several paths).
    wds: HashMap<i32, Vec<String>>,
    dirs: HashMap<String, DirState>,
    /// Directories without a watch (their `inotify_add_watch` failed): re-read every capture.
    unwatched: HashSet<String>,
    /// Directories holding files modified within the racy window of the last capture.
    racy: HashSet<String>,
    /// Directories holding a file with several hard links: a write through another of its
    /// names raises no event here, so they are re-read by every capture.
    linked: HashSet<String>,
    /// The mount table, followed (Linux).
    mounts: Option<Mounts>,
    /// Directories holding a file that is a mount point: re-read by every capture.
    mounted_files: HashSet<String>,
    initialized: bool,
    root_identity: Option<(u64, u64)>,
    last_start_ns: i128,
    counters: Counters,
}

impl SnapshotWatcher {
    /// A watcher of the tree under `root` with upstream exclude entries `exclude`. Nothing
    /// is read until the first [`capture`](Self::capture).
    pub fn new(root: &Path, exclude: &[String], options: WatchOptions) -> SnapshotWatcher {
        let mut counters = Counters::default();
        let (inotify, reason) = match Inotify::new() {
            Ok(inotify) => (Some(inotify), None),
            Err(err) if err.kind() == io::ErrorKind::Unsupported => {
                counters.unsupported_platform += 1;
                (None, Some("unsupported-platform"))
            }
            Err(_) => {
                // EMFILE: the per-user limit of inotify instances.
                counters.watch_limit += 1;
                (None, Some("watch-limit"))
            }
        };
        SnapshotWatcher {
            root: root.to_path_buf(),
            exclude: exclude.to_vec(),
            options,
            inotify,
            unwatched_reason: reason,
            wds: HashMap::new(),
            dirs: HashMap::new(),
            unwatched: HashSet::new(),
            racy: HashSet::new(),
            linked: HashSet::new(),
            mounts: None,
            mounted_files: HashSet::new(),
            initialized: false,
            root_identity: None,
            last_start_ns: 0,
            counters,
        }
    }

    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Whether inotify watches keep the state current (`None`), or why not.
    pub fn unwatched_reason(&self) -> Option<&'static str> {
        self.unwatched_reason
    }

    /// Watches held.
    pub fn watches(&self) -> usize {
        self.wds.len()
    }

    /// Entries in the state (what a capture returns, excluded paths not counted).
    pub fn entries(&self) -> usize {
        self.dirs.values().map(|d| d.children.iter().filter(|c| c.entry.is_some()).count()).sum()
    }

    /// Directories in the state (the root included).
    pub fn directories(&self) -> usize {
        self.dirs.len()
    }

    /// A directory's kept children in byte order of their names (the root is `""`).
    pub fn children(&self, rel: &str) -> Option<&[Child]> {
        self.dirs.get(rel).map(|d| d.children.as_slice())
    }

    /// Brings the state up to date with the tree and says what changed. On failure (an
    /// unreadable file, an abort) the state is dropped: the next capture walks the whole tree.
    pub fn capture(&mut self, cancel: &AtomicBool) -> Result<Delta> {
        let start = now_ns();
        self.counters.captures += 1;
        match self.capture_inner(start, cancel) {
            Ok(delta) => {
                self.last_start_ns = start;
                Ok(delta)
            }
            Err(err) => {
                self.forget();
                Err(err)
            }
        }
    }

    fn excluded(&self, rel: &str) -> bool {
        should_exclude_path(rel.as_bytes(), self.exclude.iter().map(|e| e.as_bytes()))
    }

    /// Drops the state and every watch (a fresh inotify instance, when watching).
    fn forget(&mut self) {
        self.dirs.clear();
        self.wds.clear();
        self.unwatched.clear();
        self.racy.clear();
        self.linked.clear();
        self.mounts = None;
        self.mounted_files.clear();
        self.initialized = false;
        if self.inotify.is_some() {
            self.inotify = Inotify::new().ok();
            if self.inotify.is_none() {
                self.counters.watch_limit += 1;
                self.unwatched_reason = Some("watch-limit");
            }
        }
    }

    fn stop_watching(&mut self) {
        if self.inotify.is_some() {
            self.inotify = None;
            self.wds.clear();
            self.unwatched.clear();
            self.mounts = None;
            self.mounted_files.clear();
            self.counters.watch_limit += 1;
            self.unwatched_reason = Some("watch-limit");
        }
    }

    fn capture_inner(&mut self, start: i128, cancel: &AtomicBool) -> Result<Delta> {
        if !self.initialized || self.inotify.is_none() {
            return self.full_walk(start, cancel);
        }
        let mut events = Vec::new();
        if let Some(inotify) = self.inotify.as_mut() {
            inotify.drain(&mut events).map_err(|err| Error::os(err, "read"))?;
        }
        self.counters.events += events.len() as u64;
        let mut dirty: BTreeSet<(usize, String)> = BTreeSet::new();
        let mut stale: HashSet<String> = HashSet::new();
        let mut full = false;
        for event in &events {
            if event.mask & IN_Q_OVERFLOW != 0 {
                full = true;
                continue;
            }
            let Some(rels) = self.wds.get(&event.wd).cloned() else { continue };
            if event.mask & SELF_GONE != 0 && event.mask & IN_IGNORED != 0 {
                self.wds.remove(&event.wd);
            }
            for rel in rels {
                if event.mask & SELF_GONE != 0 {
                    if event.mask & IN_IGNORED != 0 {
                        if let Some(state) = self.dirs.get_mut(&rel) {
                            state.wd = None;
                        }
                    }
                    if stale.insert(rel.clone()) {
                        self.counters.dropped_watch += 1;
                    }
                    if rel.is_empty() {
                        full = true;
                    } else {
                        dirty.insert(depth_key(parent_of(&rel)));
                    }
                    continue;
                }
                if !event.name.is_empty() {
                    let child = join_rel(&rel, &String::from_utf8_lossy(&event.name));
                    if self.excluded(&child) {
                        continue;
                    }
                }
                dirty.insert(depth_key(&rel));
            }
        }
        if events.iter().any(|e| e.mask & IN_Q_OVERFLOW != 0) {
            self.counters.overflow += 1;
        }
        let root_now = stat_root(&self.root).map(|(dev, ino, _)| (dev, ino));
        if root_now != self.root_identity {
            self.counters.directory_replaced += 1;
            full = true;
        }
        // Mounts and unmounts under the root: the directory holding each changed mount point
        // is re-read, which walks whatever now stands at that path fresh.
        match self.mounts.as_mut().map(Mounts::changes) {
            Some(None) => full = true, // the table could not be read
            Some(Some(points)) if !points.is_empty() => {
                for rel in points {
                    if rel.is_empty() {
                        full = true;
                    } else if self.dirs.contains_key(parent_of(&rel)) {
                        self.counters.mount_changes += 1;
                        dirty.insert(depth_key(parent_of(&rel)));
                    }
                }
                self.note_mounted_files();
            }
            _ => {}
        }
        if full {
            return self.full_walk(start, cancel);
        }
        self.counters.mounted_files += self.mounted_files.len() as u64;
        for rel in &self.mounted_files {
            dirty.insert(depth_key(rel));
        }
        for rel in self.racy.drain() {
            dirty.insert(depth_key(&rel));
        }
        self.counters.hard_links += self.linked.len() as u64;
        for rel in &self.linked {
            dirty.insert(depth_key(rel));
        }
        for rel in &self.unwatched {
            dirty.insert(depth_key(rel));
        }
        let mut touched: HashSet<String> = HashSet::new();
        for rel in stale {
            if self.dirs.contains_key(&rel) {
                self.remove_subtree(&rel, &mut touched);
            }
        }
        let mut done: HashSet<String> = HashSet::new();
        // Level by level (parents before children); the directories of one level are
        // disjoint, so they are read in parallel and installed one after the other.
        while let Some(&(depth, _)) = dirty.first() {
            if cancel.load(Ordering::Relaxed) {
                return Err(Error::aborted());
            }
            let mut level = Vec::new();
            while dirty.first().is_some_and(|(d, _)| *d == depth) {
                let Some((_, rel)) = dirty.pop_first() else { break };
                if done.contains(&rel) || !self.dirs.contains_key(&rel) {
                    continue;
                }
                if !rel.is_empty() {
                    let path = join_like_node(&self.root, &rel);
                    let now = std::fs::symlink_metadata(&path).ok();
                    let same = now.as_ref().is_some_and(|meta| {
                        use std::os::unix::fs::MetadataExt;
                        let state = &self.dirs[&rel];
                        meta.is_dir() && meta.dev() == state.dev && meta.ino() == state.ino && meta.mode() == state.mode
                    });
                    if !same {
                        // Replaced (or gone) without an event in its parent yet: re-read the
                        // parent, which walks whatever stands there now.
                        if now.is_some() {
                            self.counters.directory_replaced += 1;
                        }
                        self.remove_subtree(&rel, &mut touched);
                        dirty.insert(depth_key(parent_of(&rel)));
                        continue;
                    }
                }
                if self.unwatched.contains(&rel) {
                    let path = join_like_node(&self.root, &rel);
                    let result = self.add_watch(&path, !rel.is_empty());
                    self.record_watch(&rel, result);
                }
                level.push(rel);
            }
            let walks = self.walk_many(&level, cancel);
            let mut newly_linked = Vec::new();
            for (rel, walked) in level.into_iter().zip(walks) {
                let walked = walked?;
                self.counters.dirs_reread += 1;
                let own = {
                    let state = &self.dirs[&rel];
                    (state.dev, state.ino, state.mode)
                };
                // Fresh directories were read after their watch was added: not again.
                let (fresh, linked) = self.install(&rel, own, walked, true, &mut touched);
                done.extend(fresh);
                done.insert(rel);
                newly_linked.extend(linked);
            }
            // A file that may just have been hard-linked: its other names' directories are
            // re-read now (unless they were this capture) and by every later capture.
            if !newly_linked.is_empty() {
                for dir in self.other_names(&newly_linked) {
                    if self.linked.insert(dir.clone()) {
                        self.counters.hard_links += 1;
                    }
                    if !done.contains(&dir) {
                        dirty.insert(depth_key(&dir));
                    }
                }
            }
        }
        self.note_racy(touched.iter(), start);
        let mut delta = Delta::default();
        for rel in touched {
            if self.dirs.contains_key(&rel) {
                delta.changed.push(rel);
            } else {
                delta.removed.push(rel);
            }
        }
        Ok(delta)
    }

    fn add_watch(&self, path: &Path, nofollow: bool) -> io::Result<i32> {
        let Some(inotify) = self.inotify.as_ref() else { return Err(io::Error::from(io::ErrorKind::Unsupported)) };
        if self.wds.len() >= self.options.max_watches {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        inotify.add(path, WATCH_MASK | if nofollow { IN_DONT_FOLLOW } else { 0 })
    }

    /// Records the outcome of a watch added for `rel` (whose state exists or is about to).
    fn record_watch(&mut self, rel: &str, result: io::Result<i32>) {
        if self.inotify.is_none() {
            return; // watching stopped: the instance and all its watches are gone
        }
        match result {
            Ok(wd) => {
                // The same inode may already be watched under another path (a directory
                // bind-mounted elsewhere in the tree, or moved within it whose old place is
                // not re-read yet): the watch then names both.
                let rels = self.wds.entry(wd).or_default();
                if !rels.iter().any(|r| r == rel) {
                    rels.push(rel.to_string());
                }
                if let Some(state) = self.dirs.get_mut(rel) {
                    state.wd = Some(wd);
                }
                self.unwatched.remove(rel);
            }
            Err(err) if err.raw_os_error() == Some(libc::ENOSPC) => self.stop_watching(),
            Err(_) => {
                if self.inotify.is_some() {
                    self.unwatched.insert(rel.to_string());
                }
            }
        }
    }

    /// Drops the state of the directory `rel` and everything below it, with their watches.
    fn remove_subtree(&mut self, rel: &str, touched: &mut HashSet<String>) {
        let mut stack = vec![rel.to_string()];
        while let Some(dir) = stack.pop() {
            let Some(state) = self.dirs.remove(&dir) else { continue };
            if let Some(wd) = state.wd {
                if let Some(rels) = self.wds.get_mut(&wd) {
                    rels.retain(|r| *r != dir);
                    if rels.is_empty() {
                        self.wds.remove(&wd);
                        if let Some(inotify) = &self.inotify {
                            inotify.remove(wd);
                        }
                    }
                }
            }
            self.unwatched.remove(&dir);
            self.racy.remove(&dir);
            self.linked.remove(&dir);
            for child in &state.children {
                if child.stat.kind == Kind::Dir {
                    stack.push(join_rel(&dir, &child.name));
                }
            }
            touched.insert(dir);
        }
    }

    /// Walks the whole tree (first capture, overflow, dropped root, unwatched mode), reusing
    /// the hashes of unchanged files from the old state.
    fn full_walk(&mut self, start: i128, cancel: &AtomicBool) -> Result<Delta> {
        self.counters.full_walks += 1;
        // A fresh inotify instance drops every old watch at once.
        if self.inotify.is_some() {
            self.inotify = Inotify::new().ok();
            if self.inotify.is_none() {
                self.counters.watch_limit += 1;
                self.unwatched_reason = Some("watch-limit");
            }
        }
        self.wds.clear();
        self.unwatched.clear();
        self.racy.clear();
        self.linked.clear();
        let root_wd = self.add_watch(&self.root, false);
        // The mount table is read before the walk: a change from here on is seen by the next
        // capture. (Unwatched, every capture walks the whole tree anyway.)
        self.mounts = if self.inotify.is_some() { Mounts::open(&self.root) } else { None };
        let own = stat_root(&self.root);
        self.root_identity = own.map(|(dev, ino, _)| (dev, ino));
        if let Ok(wd) = &root_wd {
            self.wds.insert(*wd, vec![String::new()]);
        }
        // The old state only serves hash reuse (same identity, not racy).
        let walked = self.walk_dir("", true, cancel)?;
        self.dirs.clear();
        let mut touched = HashSet::new();
        let _ = self.install("", own.unwrap_or((0, 0, 0)), walked, false, &mut touched);
        match root_wd {
            Ok(wd) => {
                if let Some(state) = self.dirs.get_mut("") {
                    state.wd = self.inotify.as_ref().map(|_| wd);
                }
            }
            Err(err) => self.record_watch("", Err(err)),
        }
        self.initialized = true;
        self.note_racy(touched.iter(), start);
        self.note_mounted_files();
        let mut changed: Vec<String> = self.dirs.keys().cloned().collect();
        changed.sort();
        Ok(Delta { reset: true, changed, removed: Vec::new() })
    }

    /// Remembers which directories hold a file that is a mount point (see the module docs).
    fn note_mounted_files(&mut self) {
        self.mounted_files.clear();
        let Some(mounts) = &self.mounts else { return };
        for rel in mounts.points().filter(|rel| !rel.is_empty()) {
            let is_dir = std::fs::symlink_metadata(join_like_node(&self.root, rel)).is_ok_and(|meta| meta.is_dir());
            if !is_dir {
                self.mounted_files.insert(parent_of(rel).to_string());
            }
        }
    }

    /// Remembers which of `dirs` hold a file modified within the racy window of `start`.
    fn note_racy<'a>(&mut self, dirs: impl Iterator<Item = &'a String>, start: i128) {
        let threshold = start - RACY_GRANULARITY_NS;
        let racy: Vec<String> = dirs
            .filter(|rel| {
                self.dirs.get(*rel).is_some_and(|d| {
                    d.children.iter().any(|c| c.stat.kind == Kind::File && c.stat.mtime_ns >= threshold)
                })
            })
            .cloned()
            .collect();
        self.racy.extend(racy);
    }
}
