//! Re-reading: one directory walked (one level, plus the subdirectories not kept from the
//! state, with watches added before they are read and unchanged files' hashes reused), the
//! walk installed into the state, and many directories of one level read in parallel.

use std::cell::RefCell;
use std::collections::HashSet;
use std::ffi::OsStr;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use super::state::{join_rel, parent_of, split_rel, Child, DirState};
use super::{SnapshotWatcher, RACY_GRANULARITY_NS};
use crate::error::{Error, Result};
use crate::fsat::Dir;
use crate::reserved::OnReserved;
use crate::snapshot::{self, Entry, FileIdentity, Hash};
use crate::walk::{self, join_like_node, Kind, Node, ReaddirErrors, Stat, Tree, WalkOptions, ROOT};

pub(super) fn entry_of(node: &Node, hash: Option<Hash>) -> Option<Entry> {
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
pub(super) struct Walked {
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
    /// Files with several links that are new at their path or whose identity changed (a
    /// link may just have been made): full relative path and stat.
    newly_linked: Vec<(String, Stat)>,
}

impl SnapshotWatcher {
    /// Walks the directory `rel`: one level, plus every subdirectory not kept from the state
    /// (all of them when `all_fresh`), adding watches before the fresh ones are read.
    pub(super) fn walk_dir(&self, rel: &str, all_fresh: bool, cancel: &AtomicBool) -> Result<Walked> {
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
        let newly_linked: Mutex<Vec<(String, Stat)>> = Mutex::new(Vec::new());
        let note_links = |nlink: u64, full: &str, stat: &Stat| {
            if nlink > 1 {
                if let Ok(mut dirs) = linked.lock() {
                    dirs.insert(parent_of(full).to_string());
                }
                let (parent, name) = split_rel(full);
                let known = old
                    .get(parent)
                    .and_then(|state| state.child(name))
                    .is_some_and(|child| FileIdentity::from(&child.stat) == FileIdentity::from(stat));
                if !known {
                    if let Ok(mut files) = newly_linked.lock() {
                        files.push((full.to_string(), *stat));
                    }
                }
            }
        };
        let inline = |dir: &Dir, name: &OsStr, sub: &str, stat: &Stat| -> Result<Option<Hash>> {
            let full = join_rel(rel, sub);
            let reuse = reusable(&full, stat);
            if reuse.is_some() || stat.size > snapshot::INLINE_HASH_MAX {
                if let Ok(raw) = dir.lstat(name) {
                    note_links(raw.0.st_nlink as u64, &full, stat);
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
                note_links(meta.nlink(), &full, stat);
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
            on_reserved: OnReserved::Skip,
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
            newly_linked: newly_linked.into_inner().unwrap_or_default(),
            hashed: hashed.into_inner() + big.len() as u64,
            racy: racy.into_inner(),
        })
    }

    /// Applies a walk of `rel` to the state: the directory's children replaced, kept
    /// subdirectories left as they are, the others' old subtrees dropped and the fresh ones
    /// inserted with their watches. Returns the fresh directories and the walk's newly
    /// linked files (see [`Walked`]).
    pub(super) fn install(
        &mut self,
        rel: &str,
        own: (u64, u64, u32),
        walked: Walked,
        count_subtrees: bool,
        touched: &mut HashSet<String>,
    ) -> (Vec<String>, Vec<(String, Stat)>) {
        let Walked { tree, fresh, hashes, added, reused, hashed, racy, linked, newly_linked } = walked;
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
        (fresh_dirs, newly_linked)
    }

    /// Walks each of the directories `rels` one level deep (see [`Self::walk_dir`]), on up
    /// to `threads` threads when there are several.
    pub(super) fn walk_many(&self, rels: &[String], cancel: &AtomicBool) -> Vec<Result<Walked>> {
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

    /// The directories holding another name of one of `files` (same device and inode, another
    /// path) among the files already in the state.
    pub(super) fn other_names(&self, files: &[(String, Stat)]) -> HashSet<String> {
        let inodes: HashSet<(u64, u64)> = files.iter().map(|(_, stat)| (stat.dev, stat.ino)).collect();
        let paths: HashSet<&str> = files.iter().map(|(full, _)| full.as_str()).collect();
        let mut out = HashSet::new();
        for (dir, state) in &self.dirs {
            for child in &state.children {
                if child.stat.kind == Kind::File
                    && inodes.contains(&(child.stat.dev, child.stat.ino))
                    && !paths.contains(join_rel(dir, &child.name).as_str())
                {
                    out.insert(dir.clone());
                }
            }
        }
        out
    }
}
