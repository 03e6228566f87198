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
//!   walk that reuses unchanged hashes; without inotify (not Linux) likewise.
//!
//! Every capture's result is the tree as a cold [`crate::snapshot::capture`] would see it:
//! the same walker, exclude matcher and hashing, applied to the directories that changed.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::exclude::should_exclude_path;
use crate::fsat::Dir;
use crate::snapshot::{self, Entry, FileIdentity, Hash};
use crate::walk::{self, join_like_node, Kind, Node, ReaddirErrors, Stat, Tree, WalkOptions, ROOT};

/// Files modified within this window before a capture started are re-hashed by the next
/// capture even when their stat identity is unchanged (the same rule as incremental captures).
pub const RACY_GRANULARITY_NS: i128 = 2_000_000_000;

// inotify's kernel ABI (`<sys/inotify.h>`), spelled out so the state logic compiles everywhere.
const IN_MODIFY: u32 = 0x0000_0002;
const IN_ATTRIB: u32 = 0x0000_0004;
const IN_MOVED_FROM: u32 = 0x0000_0040;
const IN_MOVED_TO: u32 = 0x0000_0080;
const IN_CREATE: u32 = 0x0000_0100;
const IN_DELETE: u32 = 0x0000_0200;
const IN_DELETE_SELF: u32 = 0x0000_0400;
const IN_MOVE_SELF: u32 = 0x0000_0800;
const IN_UNMOUNT: u32 = 0x0000_2000;
const IN_Q_OVERFLOW: u32 = 0x0000_4000;
const IN_IGNORED: u32 = 0x0000_8000;
const IN_ONLYDIR: u32 = 0x0100_0000;
const IN_DONT_FOLLOW: u32 = 0x0200_0000;
/// What each directory's watch asks for.
const WATCH_MASK: u32 = IN_MODIFY
    | IN_ATTRIB
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR;
/// Events that say a watched directory itself is gone from its path.
const SELF_GONE: u32 = IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT;

/// One raw inotify event.
#[derive(Debug)]
struct Event {
    wd: i32,
    mask: u32,
    name: Vec<u8>,
}

#[cfg(target_os = "linux")]
mod inotify {
    use std::ffi::CString;
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    use super::Event;

    /// A non-blocking inotify instance; dropping it closes the descriptor and every watch.
    pub struct Inotify {
        fd: OwnedFd,
        buffer: Vec<u8>,
    }

    impl Inotify {
        pub fn new() -> io::Result<Inotify> {
            // SAFETY: plain syscall; the descriptor is owned from here on.
            let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `fd` is a fresh descriptor nobody else owns.
            Ok(Inotify { fd: unsafe { OwnedFd::from_raw_fd(fd) }, buffer: vec![0u8; 64 * 1024] })
        }

        pub fn add(&self, path: &Path, mask: u32) -> io::Result<i32> {
            let c =
                CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
            // SAFETY: `c` is a valid NUL-terminated path.
            let wd = unsafe { libc::inotify_add_watch(self.fd.as_raw_fd(), c.as_ptr(), mask) };
            if wd < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(wd)
            }
        }

        pub fn remove(&self, wd: i32) {
            // SAFETY: plain syscall; an unknown wd only fails with EINVAL.
            unsafe { libc::inotify_rm_watch(self.fd.as_raw_fd(), wd) };
        }

        /// Appends every queued event to `out`, without blocking.
        pub fn drain(&mut self, out: &mut Vec<Event>) -> io::Result<()> {
            loop {
                // SAFETY: reads into our own buffer, within its length.
                let n = unsafe {
                    libc::read(self.fd.as_raw_fd(), self.buffer.as_mut_ptr() as *mut libc::c_void, self.buffer.len())
                };
                if n < 0 {
                    let err = io::Error::last_os_error();
                    match err.raw_os_error() {
                        Some(libc::EAGAIN) => return Ok(()),
                        Some(libc::EINTR) => continue,
                        _ => return Err(err),
                    }
                }
                let n = n as usize;
                if n == 0 {
                    return Ok(());
                }
                let mut at = 0;
                while at + 16 <= n {
                    let word = |i: usize| [self.buffer[i], self.buffer[i + 1], self.buffer[i + 2], self.buffer[i + 3]];
                    let wd = i32::from_ne_bytes(word(at));
                    let mask = u32::from_ne_bytes(word(at + 4));
                    let len = u32::from_ne_bytes(word(at + 12)) as usize;
                    let raw = &self.buffer[at + 16..(at + 16 + len).min(n)];
                    let end = raw.iter().position(|b| *b == 0).unwrap_or(raw.len());
                    out.push(Event { wd, mask, name: raw[..end].to_vec() });
                    at += 16 + len;
                }
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod inotify {
    use std::io;
    use std::path::Path;

    use super::Event;

    /// No inotify here: every watcher works unwatched (a full walk per capture).
    pub struct Inotify;

    impl Inotify {
        pub fn new() -> io::Result<Inotify> {
            Err(io::Error::from(io::ErrorKind::Unsupported))
        }
        pub fn add(&self, _: &Path, _: u32) -> io::Result<i32> {
            Err(io::Error::from(io::ErrorKind::Unsupported))
        }
        pub fn remove(&self, _: i32) {}
        pub fn drain(&mut self, _: &mut Vec<Event>) -> io::Result<()> {
            Ok(())
        }
    }
}

use inotify::Inotify;

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
struct DirState {
    dev: u64,
    ino: u64,
    mode: u32,
    wd: Option<i32>,
    children: Vec<Child>,
}

impl DirState {
    fn same_dir(&self, stat: &Stat) -> bool {
        stat.kind == Kind::Dir && stat.dev == self.dev && stat.ino == self.ino && stat.mode == self.mode
    }

    fn child(&self, name: &str) -> Option<&Child> {
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

/// The watched state of one tree (see the module docs).
pub struct SnapshotWatcher {
    root: PathBuf,
    exclude: Vec<String>,
    options: WatchOptions,
    inotify: Option<Inotify>,
    /// Why `inotify` is `None`.
    unwatched_reason: Option<&'static str>,
    /// Watch descriptor → directory.
    wds: HashMap<i32, String>,
    dirs: HashMap<String, DirState>,
    /// Directories without a watch (their `inotify_add_watch` failed): re-read every capture.
    unwatched: HashSet<String>,
    /// Directories holding files modified within the racy window of the last capture.
    racy: HashSet<String>,
    /// Directories holding a file with several hard links: a write through another of its
    /// names raises no event here, so they are re-read by every capture.
    linked: HashSet<String>,
    initialized: bool,
    root_identity: Option<(u64, u64)>,
    last_start_ns: i128,
    counters: Counters,
}

/// `parent/name`, or `name` at the root.
fn join_rel(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}/{name}")
    }
}

fn parent_of(rel: &str) -> &str {
    rel.rfind('/').map_or("", |i| &rel[..i])
}

fn split_rel(rel: &str) -> (&str, &str) {
    match rel.rfind('/') {
        Some(i) => (&rel[..i], &rel[i + 1..]),
        None => ("", rel),
    }
}

fn depth_key(rel: &str) -> (usize, String) {
    let depth = if rel.is_empty() { 0 } else { rel.bytes().filter(|b| *b == b'/').count() + 1 };
    (depth, rel.to_string())
}

fn now_ns() -> i128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i128).unwrap_or(0)
}

fn stat_root(root: &Path) -> Option<(u64, u64, u32)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(root).ok()?;
    meta.is_dir().then(|| (meta.dev(), meta.ino(), meta.mode()))
}

fn entry_of(node: &Node, hash: Option<Hash>) -> Option<Entry> {
    match node.stat.kind {
        Kind::Dir => Some(Entry::Dir),
        Kind::Symlink => Some(Entry::Symlink { target: node.link_target.clone().unwrap_or_default() }),
        Kind::File => hash.map(|hash| Entry::File { mode: node.stat.mode, hash }),
        Kind::Other => None,
    }
}

thread_local! {
    static BUFFER: RefCell<Vec<u8>> = RefCell::new(vec![0u8; 256 * 1024]);
}

/// The result of walking one directory (and its fresh subtrees).
struct Walked {
    tree: Tree,
    /// Per node: a directory walked fresh (its children are in the tree).
    fresh: Vec<bool>,
    /// Per node: its file hash.
    hashes: Vec<Option<Hash>>,
    /// Watches added for fresh directories, in the order they were added.
    added: Vec<(String, io::Result<i32>)>,
    reused: u64,
    hashed: u64,
    racy: u64,
    /// Directories (full relative paths) whose walked files include one with several links.
    linked: HashSet<String>,
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
            let Some(rel) = self.wds.get(&event.wd).cloned() else { continue };
            if event.mask & SELF_GONE != 0 {
                if event.mask & IN_IGNORED != 0 {
                    self.wds.remove(&event.wd);
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
        if events.iter().any(|e| e.mask & IN_Q_OVERFLOW != 0) {
            self.counters.overflow += 1;
        }
        let root_now = stat_root(&self.root).map(|(dev, ino, _)| (dev, ino));
        if root_now != self.root_identity {
            self.counters.directory_replaced += 1;
            full = true;
        }
        if full {
            return self.full_walk(start, cancel);
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
            for (rel, walked) in level.into_iter().zip(walks) {
                let walked = walked?;
                self.counters.dirs_reread += 1;
                let own = {
                    let state = &self.dirs[&rel];
                    (state.dev, state.ino, state.mode)
                };
                // Fresh directories were read after their watch was added: not again.
                done.extend(self.install(&rel, own, walked, true, &mut touched));
                done.insert(rel);
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
                // The same inode watched under another path (a directory moved within the
                // tree whose old place is not re-read yet): the watch now names the new place.
                if let Some(old) = self.wds.insert(wd, rel.to_string()) {
                    if old != rel {
                        if let Some(state) = self.dirs.get_mut(&old) {
                            state.wd = None;
                        }
                    }
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
                if self.wds.get(&wd).is_some_and(|r| *r == dir) {
                    self.wds.remove(&wd);
                    if let Some(inotify) = &self.inotify {
                        inotify.remove(wd);
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

    /// Walks the directory `rel`: one level, plus every subdirectory not kept from the state
    /// (all of them when `all_fresh`), adding watches before the fresh ones are read.
    fn walk_dir(&self, rel: &str, all_fresh: bool, cancel: &AtomicBool) -> Result<Walked> {
        let base = join_like_node(&self.root, rel);
        let old = &self.dirs;
        let previous_start = self.last_start_ns;
        let added: Mutex<Vec<(String, io::Result<i32>)>> = Mutex::new(Vec::new());
        let reused = AtomicU64::new(0);
        let hashed = AtomicU64::new(0);
        let racy = AtomicU64::new(0);
        let watches_before = self.wds.len();
        let kept = |node: &Node| -> bool {
            !all_fresh
                && !node.rel.contains('/')
                && old.get(&join_rel(rel, &node.rel)).is_some_and(|state| state.same_dir(&node.stat))
        };
        let skip = |sub: &str| self.excluded(&join_rel(rel, sub));
        let descend = |node: &Node| -> bool {
            if kept(node) {
                return false;
            }
            let full = join_rel(rel, &node.rel);
            if self.inotify.is_some() {
                let Ok(mut list) = added.lock() else { return true };
                let result = if watches_before + list.len() >= self.options.max_watches {
                    Err(io::Error::from_raw_os_error(libc::ENOSPC))
                } else {
                    self.add_watch(&join_like_node(&self.root, &full), true)
                };
                list.push((full, result));
            }
            true
        };
        let reusable = |full: &str, stat: &Stat| -> Option<Hash> {
            let (parent, name) = split_rel(full);
            let child = old.get(parent)?.child(name)?;
            let Some(Entry::File { hash, .. }) = &child.entry else { return None };
            if FileIdentity::from(&child.stat) != FileIdentity::from(stat) {
                return None;
            }
            if stat.mtime_ns >= previous_start - RACY_GRANULARITY_NS {
                racy.fetch_add(1, Ordering::Relaxed);
                return None;
            }
            Some(*hash)
        };
        let linked: Mutex<HashSet<String>> = Mutex::new(HashSet::new());
        let note_links = |nlink: u64, full: &str| {
            if nlink > 1 {
                if let Ok(mut dirs) = linked.lock() {
                    dirs.insert(parent_of(full).to_string());
                }
            }
        };
        let inline = |dir: &Dir, name: &OsStr, sub: &str, stat: &Stat| -> Result<Option<Hash>> {
            let full = join_rel(rel, sub);
            let reuse = reusable(&full, stat);
            if reuse.is_some() || stat.size > snapshot::INLINE_HASH_MAX {
                if let Ok(raw) = dir.lstat(name) {
                    note_links(raw.0.st_nlink as u64, &full);
                }
                if reuse.is_some() {
                    reused.fetch_add(1, Ordering::Relaxed);
                }
                return Ok(reuse);
            }
            let path = || join_like_node(&self.root, &full);
            let file = dir.open_file_nofollow(name).map_err(|err| Error::io(err, "open", &path()))?;
            if let Ok(meta) = file.metadata() {
                use std::os::unix::fs::MetadataExt;
                note_links(meta.nlink(), &full);
            }
            hashed.fetch_add(1, Ordering::Relaxed);
            BUFFER
                .with(|buffer| snapshot::hash_reader_sized(file, stat.size, &mut buffer.borrow_mut(), cancel, path))
                .map(Some)
        };
        let walked = walk::walk(&WalkOptions {
            root: &base,
            threads: if all_fresh { self.options.threads } else { 1 },
            readdir_errors: ReaddirErrors::TreatAsEmpty,
            skip: &skip,
            descend: &descend,
            read_link_targets: true,
            inline_file: Some(&inline),
            cancel,
        });
        let added = added.into_inner().unwrap_or_default();
        // Watches added for a walk that failed are dropped with the state by the caller.
        let tree = match walked {
            Ok(tree) => tree,
            Err(err) => {
                if let Some(inotify) = &self.inotify {
                    for (_, result) in &added {
                        if let Ok(wd) = result {
                            if !self.wds.contains_key(wd) {
                                inotify.remove(*wd);
                            }
                        }
                    }
                }
                return Err(err);
            }
        };
        let fresh: Vec<bool> = tree.nodes.iter().map(|node| node.stat.kind == Kind::Dir && !kept(node)).collect();
        let mut hashes: Vec<Option<Hash>> = tree.nodes.iter().map(|node| node.inline_digest).collect();
        let big: Vec<usize> =
            (0..tree.nodes.len()).filter(|&i| tree.nodes[i].stat.kind == Kind::File && hashes[i].is_none()).collect();
        let threads = if big.len() > 1 { self.options.threads } else { 1 };
        for (index, hash) in snapshot::hash_files(&base, &tree.nodes, &big, threads, cancel)? {
            hashes[index] = Some(hash);
        }
        Ok(Walked {
            tree,
            fresh,
            hashes,
            added,
            reused: reused.into_inner(),
            linked: linked.into_inner().unwrap_or_default(),
            hashed: hashed.into_inner() + big.len() as u64,
            racy: racy.into_inner(),
        })
    }

    /// Applies a walk of `rel` to the state: the directory's children replaced, kept
    /// subdirectories left as they are, the others' old subtrees dropped and the fresh ones
    /// inserted with their watches.
    fn install(
        &mut self,
        rel: &str,
        own: (u64, u64, u32),
        walked: Walked,
        count_subtrees: bool,
        touched: &mut HashSet<String>,
    ) -> Vec<String> {
        let Walked { tree, fresh, hashes, added, reused, hashed, racy, linked } = walked;
        // This walk read `rel`'s files and its fresh subtrees': their links are known anew.
        self.linked.remove(rel);
        self.linked.extend(linked);
        self.counters.hashes_reused += reused;
        self.counters.files_hashed += hashed;
        self.counters.racy_window += racy;
        let mut nodes: Vec<Node> = tree.nodes;
        let children_of = |range: (u32, u32), nodes: &mut Vec<Node>, hashes: &[Option<Hash>]| -> Vec<Child> {
            (range.0..range.1)
                .map(|i| {
                    let node = &mut nodes[i as usize];
                    let entry = entry_of(node, hashes[i as usize]);
                    Child { name: std::mem::take(&mut node.name), stat: node.stat, entry }
                })
                .collect()
        };
        // Old subdirectories that are not kept as they were: their subtrees go.
        if let Some(old) = self.dirs.get(rel) {
            let mut gone = Vec::new();
            for child in old.children.iter().filter(|c| c.stat.kind == Kind::Dir) {
                let position = (tree.root_children.0..tree.root_children.1)
                    .find(|&i| nodes[i as usize].parent == ROOT && nodes[i as usize].name == child.name);
                match position {
                    Some(i) if !fresh[i as usize] => {}
                    Some(i) => {
                        // Another inode or kind at the path (a mode change alone is no replacement).
                        let now = &nodes[i as usize].stat;
                        if now.kind != Kind::Dir || now.dev != child.stat.dev || now.ino != child.stat.ino {
                            self.counters.directory_replaced += 1;
                        }
                        gone.push(join_rel(rel, &child.name));
                    }
                    None => gone.push(join_rel(rel, &child.name)),
                }
            }
            for dir in gone {
                self.remove_subtree(&dir, touched);
            }
        }
        let wd = self.dirs.get(rel).and_then(|d| d.wd);
        let root_children = children_of(tree.root_children, &mut nodes, &hashes);
        self.dirs
            .insert(rel.to_string(), DirState { dev: own.0, ino: own.1, mode: own.2, wd, children: root_children });
        touched.insert(rel.to_string());
        // Fresh directories (each node's `rel` is relative to `rel`).
        let mut fresh_dirs = Vec::new();
        for i in 0..nodes.len() {
            if !fresh[i] {
                continue;
            }
            let full = join_rel(rel, &nodes[i].rel);
            let children = children_of(tree.children[i], &mut nodes, &hashes);
            let stat = nodes[i].stat;
            self.dirs
                .insert(full.clone(), DirState { dev: stat.dev, ino: stat.ino, mode: stat.mode, wd: None, children });
            touched.insert(full.clone());
            fresh_dirs.push(full);
            if count_subtrees && nodes[i].parent == ROOT {
                self.counters.subtree_rewalks += 1;
            }
        }
        for (full, result) in added {
            if self.dirs.contains_key(&full) {
                self.record_watch(&full, result);
            } else if let (Ok(wd), Some(inotify)) = (&result, &self.inotify) {
                // A directory the walk skipped after all (it vanished): no state, no watch.
                if !self.wds.contains_key(wd) {
                    inotify.remove(*wd);
                }
            }
        }
        fresh_dirs
    }

    /// Walks each of the directories `rels` one level deep (see [`Self::walk_dir`]), on up
    /// to `threads` threads when there are several.
    fn walk_many(&self, rels: &[String], cancel: &AtomicBool) -> Vec<Result<Walked>> {
        let threads = self.options.threads.min(rels.len());
        // A cap of our own is counted exactly by one reader at a time.
        if threads <= 1 || rels.len() < 4 || self.options.max_watches != usize::MAX {
            return rels.iter().map(|rel| self.walk_dir(rel, false, cancel)).collect();
        }
        let next = std::sync::atomic::AtomicUsize::new(0);
        let slots: Vec<Mutex<Option<Result<Walked>>>> = rels.iter().map(|_| Mutex::new(None)).collect();
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(rel) = rels.get(i) else { break };
                    let walked = self.walk_dir(rel, false, cancel);
                    if let Ok(mut slot) = slots[i].lock() {
                        *slot = Some(walked);
                    }
                });
            }
        });
        slots
            .into_iter()
            .map(|slot| {
                slot.into_inner()
                    .ok()
                    .flatten()
                    .unwrap_or_else(|| Err(Error::new(crate::error::codes::INTERNAL, "watch re-read worker panicked")))
            })
            .collect()
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
        let own = stat_root(&self.root);
        self.root_identity = own.map(|(dev, ino, _)| (dev, ino));
        if let Ok(wd) = &root_wd {
            self.wds.insert(*wd, String::new());
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
        let mut changed: Vec<String> = self.dirs.keys().cloned().collect();
        changed.sort();
        Ok(Delta { reset: true, changed, removed: Vec::new() })
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{symlink, PermissionsExt};

    /// A scratch directory, removed when dropped (also when a test panics).
    struct Scratch(PathBuf);

    impl std::ops::Deref for Scratch {
        type Target = PathBuf;
        fn deref(&self) -> &PathBuf {
            &self.0
        }
    }

    impl AsRef<Path> for Scratch {
        fn as_ref(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn tmp(tag: &str) -> Scratch {
        let base = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
        let dir = base.join(format!("pc-watch-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn options() -> WatchOptions {
        WatchOptions { threads: 2, max_watches: usize::MAX }
    }

    /// The watcher's state as sorted `(path, entry)` pairs.
    fn state(watcher: &SnapshotWatcher) -> Vec<(String, Entry)> {
        let mut out = Vec::new();
        let mut stack = vec![String::new()];
        while let Some(dir) = stack.pop() {
            for child in watcher.children(&dir).unwrap_or_else(|| panic!("no state for {dir:?}")) {
                let rel = join_rel(&dir, &child.name);
                if child.stat.kind == Kind::Dir {
                    stack.push(rel.clone());
                }
                if let Some(entry) = &child.entry {
                    out.push((rel, entry.clone()));
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// A cold capture as sorted `(path, entry)` pairs.
    fn cold(root: &Path, exclude: &[String]) -> Vec<(String, Entry)> {
        let snap = snapshot::capture(&snapshot::CaptureOptions {
            root,
            exclude,
            threads: 2,
            previous: None,
            hash_only: None,
            readdir_errors: ReaddirErrors::TreatAsEmpty,
            cancel: &AtomicBool::new(false),
        })
        .unwrap();
        let mut out: Vec<(String, Entry)> = snap
            .tree
            .nodes
            .iter()
            .zip(snap.entries)
            .filter_map(|(node, entry)| entry.map(|e| (node.rel.clone(), e)))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    fn capture(watcher: &mut SnapshotWatcher) -> Delta {
        watcher.capture(&AtomicBool::new(false)).unwrap()
    }

    fn seed_tree(root: &Path) {
        fs::create_dir_all(root.join("a/b/c")).unwrap();
        fs::create_dir_all(root.join("d/e")).unwrap();
        fs::create_dir_all(root.join("node_modules/pkg")).unwrap();
        fs::write(root.join("a/one"), b"1").unwrap();
        fs::write(root.join("a/b/two"), b"22").unwrap();
        fs::write(root.join("a/b/c/three"), b"333").unwrap();
        fs::write(root.join("d/e/four"), b"4444").unwrap();
        fs::write(root.join("node_modules/pkg/index.js"), b"x").unwrap();
        symlink("../a/one", root.join("d/link")).unwrap();
    }

    #[test]
    fn repeat_captures_equal_cold_captures_after_every_kind_of_change() {
        let root = tmp("kinds");
        let outside = tmp("kinds-outside");
        seed_tree(&root);
        let exclude = vec!["node_modules".to_string()];
        let mut watcher = SnapshotWatcher::new(&root, &exclude, options());
        let first = capture(&mut watcher);
        assert!(first.reset);
        assert_eq!(state(&watcher), cold(&root, &exclude));
        assert_eq!(watcher.counters().full_walks, 1);
        assert_eq!(watcher.watches(), 6, "root, a, a/b, a/b/c, d, d/e (node_modules excluded)");

        let steps: Vec<Box<dyn Fn()>> = vec![
            Box::new(|| fs::write(root.join("a/new"), b"new").unwrap()),
            Box::new(|| fs::remove_file(root.join("a/one")).unwrap()),
            Box::new(|| fs::rename(root.join("a/b/c"), root.join("d/c-moved")).unwrap()),
            Box::new(|| {
                fs::remove_dir_all(root.join("d/e")).unwrap();
                fs::write(root.join("d/e"), b"now a file").unwrap();
            }),
            Box::new(|| {
                fs::remove_dir_all(root.join("d/c-moved")).unwrap();
                symlink("/etc", root.join("d/c-moved")).unwrap();
            }),
            Box::new(|| fs::set_permissions(root.join("a/b/two"), fs::Permissions::from_mode(0o755)).unwrap()),
            Box::new(|| {
                fs::create_dir_all(outside.join("sub/deeper")).unwrap();
                fs::write(outside.join("sub/deeper/f"), b"from outside").unwrap();
                fs::rename(outside.join("sub"), root.join("a/b/sub")).unwrap();
            }),
            Box::new(|| fs::write(root.join("a/b/sub/deeper/f"), b"changed inside a moved-in subtree").unwrap()),
            Box::new(|| fs::write(root.join("node_modules/pkg/index.js"), b"excluded change").unwrap()),
        ];
        for (i, step) in steps.iter().enumerate() {
            step();
            capture(&mut watcher);
            assert_eq!(state(&watcher), cold(&root, &exclude), "after step {i}");
        }
        let counters = watcher.counters();
        assert_eq!(counters.full_walks, 1, "{counters:?}");
        assert_eq!(counters.overflow, 0);
        assert!(counters.dirs_reread >= steps.len() as u64 - 1, "{counters:?}");
        assert!(counters.subtree_rewalks >= 2, "the moved directory and the moved-in subtree: {counters:?}");
        assert!(counters.dropped_watch >= 2, "deleted and moved directories: {counters:?}");
        drop(steps);
        fs::remove_dir_all(root).unwrap();
        fs::remove_dir_all(outside).unwrap();
    }

    #[test]
    fn an_unchanged_tree_rereads_only_racy_directories_and_reuses_hashes() {
        let root = tmp("quiet");
        seed_tree(&root);
        let mut watcher = SnapshotWatcher::new(&root, &[], options());
        capture(&mut watcher);
        // Everything was just written: every directory with files is racy once.
        let second = capture(&mut watcher);
        let counters = watcher.counters();
        assert!(counters.racy_window >= 4, "{counters:?}");
        assert_eq!(counters.hashes_reused, 0, "racy files are re-read: {counters:?}");
        assert!(!second.reset);
        // Pretend the captures were long ago: nothing is racy, nothing is re-read.
        watcher.last_start_ns = now_ns() + 10 * RACY_GRANULARITY_NS;
        watcher.racy.clear();
        let reread = watcher.counters().dirs_reread;
        let third = capture(&mut watcher);
        assert_eq!(watcher.counters().dirs_reread, reread);
        assert!(third.changed.is_empty() && third.removed.is_empty(), "{third:?}");
        // A change re-reads one directory and reuses its other hashes.
        watcher.last_start_ns = 0;
        fs::write(root.join("a/b/extra"), b"e").unwrap();
        let fourth = capture(&mut watcher);
        assert_eq!(fourth.changed, vec!["a/b".to_string()]);
        assert_eq!(watcher.counters().dirs_reread, reread + 1);
        assert_eq!(state(&watcher), cold(&root, &[]));
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_racy_file_with_an_unchanged_identity_is_rehashed() {
        let root = tmp("racy");
        fs::write(root.join("f"), b"before").unwrap();
        let mut watcher = SnapshotWatcher::new(&root, &[], options());
        capture(&mut watcher);
        // Forge the state: a wrong hash under the file's current identity. Within the racy
        // window it must not be reused; past it, it would be (proving the rule decides).
        watcher.dirs.get_mut("").unwrap().children[0].entry = Some(Entry::File { mode: 0o100644, hash: [9u8; 32] });
        watcher.racy.insert(String::new());
        capture(&mut watcher);
        assert_eq!(state(&watcher), cold(&root, &[]));
        watcher.dirs.get_mut("").unwrap().children[0].entry = Some(Entry::File { mode: 0o100644, hash: [9u8; 32] });
        watcher.racy.insert(String::new());
        watcher.last_start_ns = now_ns() + 10 * RACY_GRANULARITY_NS;
        capture(&mut watcher);
        assert_ne!(state(&watcher), cold(&root, &[]), "past the window the (forged) hash is reused");
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn an_overflowed_event_queue_falls_back_to_a_full_walk() {
        let max: usize = fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(16384);
        let root = tmp("overflow");
        fs::create_dir_all(root.join("burst")).unwrap();
        let mut watcher = SnapshotWatcher::new(&root, &[], options());
        capture(&mut watcher);
        for i in 0..max + 100 {
            fs::File::create(root.join(format!("burst/{i}"))).unwrap();
        }
        let delta = capture(&mut watcher);
        assert!(delta.reset);
        assert_eq!(watcher.counters().overflow, 1);
        assert_eq!(watcher.counters().full_walks, 2);
        assert_eq!(state(&watcher), cold(&root, &[]));
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn the_watch_limit_stops_watching_and_every_capture_walks() {
        let root = tmp("limit");
        seed_tree(&root);
        let mut watcher = SnapshotWatcher::new(&root, &[], WatchOptions { threads: 2, max_watches: 3 });
        capture(&mut watcher);
        assert_eq!(watcher.counters().watch_limit, 1);
        assert_eq!(watcher.unwatched_reason(), Some("watch-limit"));
        assert_eq!(watcher.watches(), 0);
        fs::write(root.join("a/b/c/three"), b"changed").unwrap();
        let delta = capture(&mut watcher);
        assert!(delta.reset);
        assert_eq!(watcher.counters().full_walks, 2);
        assert_eq!(state(&watcher), cold(&root, &[]));
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_replaced_root_is_walked_again() {
        let root = tmp("root");
        seed_tree(&root);
        let mut watcher = SnapshotWatcher::new(&root, &[], options());
        capture(&mut watcher);
        fs::remove_dir_all(&root).unwrap();
        fs::create_dir_all(root.join("fresh")).unwrap();
        let delta = capture(&mut watcher);
        assert!(delta.reset);
        assert_eq!(state(&watcher), cold(&root, &[]));
        assert_eq!(watcher.counters().full_walks, 2);
        fs::remove_dir_all(&root).unwrap();
        // A missing root reads as empty, as a cold capture reads it.
        capture(&mut watcher);
        assert_eq!(state(&watcher), Vec::new());
    }

    /// Throws away every queued event, as if the kernel had lost them.
    fn lose_events(watcher: &mut SnapshotWatcher) {
        let mut lost = Vec::new();
        watcher.inotify.as_mut().unwrap().drain(&mut lost).unwrap();
    }

    #[test]
    fn a_directory_replaced_unseen_is_caught_by_its_identity_when_its_parent_is_reread() {
        let root = tmp("unseen");
        seed_tree(&root);
        let mut watcher = SnapshotWatcher::new(&root, &[], options());
        capture(&mut watcher);
        fs::remove_dir_all(root.join("d/e")).unwrap();
        fs::create_dir_all(root.join("d/e/new")).unwrap();
        fs::write(root.join("d/e/new/file"), b"new").unwrap();
        lose_events(&mut watcher);
        watcher.racy.insert("d".into()); // something re-reads the parent
        capture(&mut watcher);
        assert_eq!(state(&watcher), cold(&root, &[]));
        assert!(watcher.counters().directory_replaced >= 1, "{:?}", watcher.counters());
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_root_replaced_unseen_is_caught_by_its_identity() {
        let root = tmp("root-unseen");
        seed_tree(&root);
        let mut watcher = SnapshotWatcher::new(&root, &[], options());
        capture(&mut watcher);
        fs::remove_dir_all(&root).unwrap();
        fs::create_dir_all(root.join("other")).unwrap();
        lose_events(&mut watcher);
        let delta = capture(&mut watcher);
        assert!(delta.reset);
        assert_eq!(state(&watcher), cold(&root, &[]));
        assert_eq!(watcher.counters().directory_replaced, 1);
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_dropped_watch_is_replaced_so_later_changes_are_seen() {
        let root = tmp("dropped");
        seed_tree(&root);
        let mut watcher = SnapshotWatcher::new(&root, &[], options());
        capture(&mut watcher);
        // The kernel drops the watch of a/b (as on an unmount): IN_IGNORED, nothing else.
        let wd = watcher.dirs["a/b"].wd.unwrap();
        watcher.inotify.as_ref().unwrap().remove(wd);
        capture(&mut watcher);
        assert_eq!(watcher.counters().dropped_watch, 1);
        assert!(watcher.dirs["a/b"].wd.is_some_and(|new| new != wd), "a/b watched again");
        watcher.last_start_ns = 0;
        fs::write(root.join("a/b/later"), b"later").unwrap();
        capture(&mut watcher);
        assert_eq!(state(&watcher), cold(&root, &[]));
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn many_dirty_directories_of_one_level_are_read_in_parallel_and_still_exact() {
        let root = tmp("level");
        for i in 0..12 {
            fs::create_dir_all(root.join(format!("p{i}/q"))).unwrap();
            fs::write(root.join(format!("p{i}/f")), b"f").unwrap();
            fs::write(root.join(format!("p{i}/q/g")), b"g").unwrap();
        }
        let mut watcher = SnapshotWatcher::new(&root, &[], options());
        capture(&mut watcher);
        for i in 0..12 {
            fs::write(root.join(format!("p{i}/f")), format!("changed {i}")).unwrap();
            if i % 3 == 0 {
                fs::rename(root.join(format!("p{i}/q")), root.join(format!("p{}/moved{i}", (i + 1) % 12))).unwrap();
            }
        }
        let delta = capture(&mut watcher);
        assert!(!delta.reset);
        assert_eq!(state(&watcher), cold(&root, &[]));
        assert!(watcher.counters().dirs_reread >= 12, "{:?}", watcher.counters());
        fs::write(root.join("p1/moved0/g"), b"seen through the new watch").unwrap();
        watcher.last_start_ns = 0;
        capture(&mut watcher);
        assert_eq!(state(&watcher), cold(&root, &[]));
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_file_written_through_another_hard_link_is_seen() {
        let root = tmp("links");
        let outside = tmp("links-outside");
        seed_tree(&root);
        fs::hard_link(root.join("d/e/four"), outside.join("other-name")).unwrap();
        let mut watcher = SnapshotWatcher::new(&root, &[], options());
        capture(&mut watcher);
        watcher.racy.clear(); // only the link rule may re-read d/e
        fs::write(outside.join("other-name"), b"written elsewhere").unwrap();
        capture(&mut watcher);
        assert_eq!(state(&watcher), cold(&root, &[]));
        assert!(watcher.counters().hard_links >= 1);
        fs::remove_dir_all(root).unwrap();
        fs::remove_dir_all(outside).unwrap();
    }
}
