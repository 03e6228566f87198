//! The one directory walker, shared by every native path that walks a tree, in two
//! strategies over the same directory handles and stat records:
//!
//! * [`walk`]: parallel and `lstat`-based, never following symlinks, returning the whole
//!   shape of the tree (snapshots, content signatures, size estimates). Each directory is
//!   read by whichever worker takes it from a shared queue; its children are stored
//!   contiguously, sorted by byte order (what libuv's `scandir`, and so Node's `readdir`,
//!   returns), so a caller can impose any sibling order it needs afterwards.
//! * [`in_order`]: sequential and streaming, in archive order (each directory before its
//!   children, siblings in byte order), holding only the open directories of the current
//!   path, optionally following symlinks with cycle detection (tar packing).

use std::collections::VecDeque;
use std::ffi::{CStr, CString, OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};

use crate::error::{codes, Error, Result};
use crate::fsat::{c_name, Dir, RawStat};
use crate::reserved::{self, OnReserved};

/// Sentinel parent index of the root's children.
pub const ROOT: u32 = u32::MAX;

/// What an entry is, from `lstat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
    Symlink,
    /// A socket, FIFO or device.
    Other,
}

/// The `lstat` fields the native paths use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub kind: Kind,
    /// The full `st_mode`, file-type bits included (what Node's `stats.mode` holds).
    pub mode: u32,
    pub size: u64,
    pub dev: u64,
    pub ino: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
}

impl Stat {
    /// From an `lstat` result.
    pub fn from_raw(raw: &RawStat) -> Stat {
        let st = &raw.0;
        let kind = match st.st_mode & libc::S_IFMT {
            libc::S_IFDIR => Kind::Dir,
            libc::S_IFLNK => Kind::Symlink,
            libc::S_IFREG => Kind::File,
            _ => Kind::Other,
        };
        Stat {
            kind,
            mode: st.st_mode as u32,
            size: st.st_size as u64,
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
            mtime_ns: st.st_mtime as i128 * 1_000_000_000 + st.st_mtime_nsec as i128,
            ctime_ns: st.st_ctime as i128 * 1_000_000_000 + st.st_ctime_nsec as i128,
        }
    }
}

/// One entry of a walked tree.
#[derive(Debug, Clone)]
pub struct Node {
    /// Index of the parent directory's node, or [`ROOT`].
    pub parent: u32,
    /// The entry's name (one path segment).
    pub name: String,
    /// The POSIX path relative to the walk root (`a/b/c`).
    pub rel: String,
    pub stat: Stat,
    /// The raw `readlink` target of a symlink (decoded as Node decodes it).
    pub link_target: Option<String>,
    /// What [`WalkOptions::inline_file`] computed for a regular file while its directory
    /// was open (a content digest), if it did.
    pub inline_digest: Option<[u8; 32]>,
}

/// A walked tree: the root's children first, then each directory's children stored
/// contiguously (in the order directories were read, which is not deterministic across
/// runs); within one directory, children are in byte order of their names.
#[derive(Debug, Default)]
pub struct Tree {
    pub nodes: Vec<Node>,
    /// For each node, the range of its children in `nodes` (empty for non-directories and
    /// for excluded or unreadable directories).
    pub children: Vec<(u32, u32)>,
    /// The range of the root's children.
    pub root_children: (u32, u32),
}

/// How the walk treats a directory it cannot read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReaddirErrors {
    /// As an empty directory (upstream's snapshot walk), and, as there, an entry whose path
    /// is longer than path-based calls accept fails the walk with `ENAMETOOLONG`
    /// ([`check_path_length`]): the walk is complete or an error, never silently shallower.
    TreatAsEmpty,
    /// As a failure of the whole walk.
    Propagate,
}

/// The hook of [`WalkOptions::inline_file`]: `(directory, name, relative path, stat)`.
pub type InlineFile<'a> = dyn Fn(&Dir, &OsStr, &str, &Stat) -> Result<Option<[u8; 32]>> + Sync + 'a;

/// What to walk and how.
pub struct WalkOptions<'a> {
    /// The root as the caller spelled it (used for the root's own `readdir` and messages).
    pub root: &'a Path,
    /// Worker threads (at least one).
    pub threads: usize,
    pub readdir_errors: ReaddirErrors,
    /// Returns true for a relative path that must be skipped, with everything below it,
    /// before it is even `lstat`ed.
    pub skip: &'a (dyn Fn(&str) -> bool + Sync),
    /// Returns false for a directory that must be recorded but not descended into.
    pub descend: &'a (dyn Fn(&Node) -> bool + Sync),
    /// Read symlink targets during the walk.
    pub read_link_targets: bool,
    /// Called for each kept regular file while its directory is open, with the directory,
    /// the file's name and its stat: a cheap place to digest small files (`openat`, no
    /// path resolution). `Ok(None)` leaves the file for the caller.
    pub inline_file: Option<&'a InlineFile<'a>>,
    /// What a name this library reserves ([`crate::reserved`]) is, at any depth: skipped
    /// (a tree of ours) or refused (an untrusted source). Excluded paths are never refused.
    pub on_reserved: OnReserved,
    pub cancel: &'a AtomicBool,
}

/// `path.join(root, rel)` as Node spells it, for a `rel` with no `.`/`..` segments.
pub fn join_like_node(root: &Path, rel: &str) -> PathBuf {
    if rel.is_empty() {
        return root.to_path_buf();
    }
    let root_bytes = root.as_os_str().as_bytes();
    if root_bytes.is_empty() || root_bytes == b"." {
        return PathBuf::from(rel);
    }
    let mut joined = root.as_os_str().to_os_string();
    if !root_bytes.ends_with(b"/") {
        joined.push("/");
    }
    joined.push(rel);
    PathBuf::from(joined)
}

/// Decodes a file name; a name that is not UTF-8 cannot be represented upstream (Node
/// decodes it lossily and then fails to `lstat` it), so it is a coded error, never mangled.
pub fn name_to_string(name: OsString, parent_rel: &str, root: &Path) -> Result<String> {
    name.into_string().map_err(|raw| {
        let lossy = String::from_utf8_lossy(raw.as_bytes()).into_owned();
        let rel = if parent_rel.is_empty() { lossy } else { format!("{parent_rel}/{lossy}") };
        let mut err = Error::new(
            codes::NON_UTF8_NAME,
            format!(
                "{}: file name is not valid UTF-8, lstat '{}'",
                codes::NON_UTF8_NAME,
                join_like_node(root, &rel).display()
            ),
        );
        err.syscall = Some("lstat");
        err
    })
}

/// Every entry below `root` as `(relative path, kind)`: directories descended, symlinks
/// recorded but not followed, unreadable directories read as empty, nothing skipped but
/// reserved names (left out or refused, as `on_reserved` says); a path too long for
/// path-based calls fails with `ENAMETOOLONG`. The order is unspecified (callers sort).
pub fn list(root: &Path, threads: usize, on_reserved: OnReserved, cancel: &AtomicBool) -> Result<Vec<(String, Kind)>> {
    let tree = walk(&WalkOptions {
        root,
        threads,
        readdir_errors: ReaddirErrors::TreatAsEmpty,
        skip: &|_| false,
        descend: &|_| true,
        read_link_targets: false,
        inline_file: None,
        on_reserved,
        cancel,
    })?;
    Ok(tree.nodes.into_iter().map(|node| (node.rel, node.stat.kind)).collect())
}

struct Shared {
    queue: VecDeque<(u32, String)>,
    /// Directories queued or being read.
    pending: usize,
    tree: Tree,
    error: Option<Error>,
}

/// Walks the tree below `opts.root` on `opts.threads` workers.
pub fn walk(opts: &WalkOptions<'_>) -> Result<Tree> {
    let shared = Mutex::new(Shared {
        queue: VecDeque::from([(ROOT, String::new())]),
        pending: 1,
        tree: Tree::default(),
        error: None,
    });
    let wake = Condvar::new();
    if opts.threads <= 1 {
        // One worker: the calling thread itself (no spawn, e.g. a watcher's one-directory re-reads).
        worker(opts, &shared, &wake);
    } else {
        std::thread::scope(|scope| {
            for _ in 0..opts.threads {
                scope.spawn(|| worker(opts, &shared, &wake));
            }
        });
    }
    let shared = shared.into_inner().map_err(|_| Error::new(codes::INTERNAL, "walk worker panicked"))?;
    if let Some(err) = shared.error {
        return Err(err);
    }
    if opts.cancel.load(Ordering::Relaxed) {
        return Err(Error::aborted());
    }
    Ok(shared.tree)
}

fn worker(opts: &WalkOptions<'_>, shared: &Mutex<Shared>, wake: &Condvar) {
    loop {
        let job = {
            let Ok(mut guard) = shared.lock() else { return };
            loop {
                if guard.error.is_some() || opts.cancel.load(Ordering::Relaxed) {
                    guard.queue.clear();
                    guard.pending = 0;
                    wake.notify_all();
                    return;
                }
                if let Some(job) = guard.queue.pop_front() {
                    break job;
                }
                if guard.pending == 0 {
                    return;
                }
                guard = match wake.wait(guard) {
                    Ok(g) => g,
                    Err(_) => return,
                };
            }
        };
        let result = read_directory(opts, &job.1);
        let Ok(mut guard) = shared.lock() else { return };
        guard.pending -= 1;
        match result {
            Ok(children) => {
                let start = guard.tree.nodes.len() as u32;
                let count = children.len() as u32;
                for mut child in children {
                    child.parent = job.0;
                    let index = guard.tree.nodes.len() as u32;
                    let descend = child.stat.kind == Kind::Dir && (opts.descend)(&child);
                    if descend {
                        guard.queue.push_back((index, child.rel.clone()));
                        guard.pending += 1;
                    }
                    guard.tree.nodes.push(child);
                    guard.tree.children.push((0, 0));
                }
                if job.0 == ROOT {
                    guard.tree.root_children = (start, start + count);
                } else {
                    guard.tree.children[job.0 as usize] = (start, start + count);
                }
            }
            Err(err) => {
                if guard.error.is_none() {
                    guard.error = Some(err);
                }
            }
        }
        wake.notify_all();
    }
}

/// Reads one directory: its kept children, `lstat`ed, in byte order of their names.
fn read_directory(opts: &WalkOptions<'_>, rel: &str) -> Result<Vec<Node>> {
    let path = join_like_node(opts.root, rel);
    let listed = Dir::open(&path).and_then(|dir| dir.names().map(|names| (dir, names)));
    let (dir, mut names) = match listed {
        Ok(listed) => listed,
        // A path too long to open is never read as empty: that would drop the subtree.
        Err(err)
            if opts.readdir_errors == ReaddirErrors::TreatAsEmpty && err.raw_os_error() != Some(libc::ENAMETOOLONG) =>
        {
            return Ok(Vec::new())
        }
        Err(err) => return Err(Error::io(err, "scandir", &path)),
    };
    names.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    let mut out = Vec::with_capacity(names.len());
    for raw in names {
        if opts.cancel.load(Ordering::Relaxed) {
            return Err(Error::aborted());
        }
        let reserved = reserved::is_reserved(raw.as_bytes());
        if reserved && opts.on_reserved == OnReserved::Skip {
            continue; // our own staging, never part of a tree
        }
        // The skip check sees the name as Node would (lossily decoded), before any lstat.
        let lossy = String::from_utf8_lossy(raw.as_bytes()).into_owned();
        let child_rel = if rel.is_empty() { lossy } else { format!("{rel}/{lossy}") };
        if (opts.skip)(&child_rel) {
            continue;
        }
        if let (true, OnReserved::Refuse(what)) = (reserved, opts.on_reserved) {
            return Err(reserved::refusal(what, &child_rel));
        }
        if opts.readdir_errors == ReaddirErrors::TreatAsEmpty {
            check_path_length(opts.root, &child_rel)?;
        }
        let raw_stat =
            dir.lstat(&raw).map_err(|err| Error::io(err, "lstat", &join_like_node(opts.root, &child_rel)))?;
        let stat = Stat::from_raw(&raw_stat);
        let link_target = if stat.kind == Kind::Symlink && opts.read_link_targets {
            let target =
                dir.readlink(&raw).map_err(|err| Error::io(err, "readlink", &join_like_node(opts.root, &child_rel)))?;
            Some(String::from_utf8_lossy(target.as_bytes()).into_owned())
        } else {
            None
        };
        let inline_digest = match (stat.kind, opts.inline_file) {
            (Kind::File, Some(inline)) => inline(&dir, &raw, &child_rel, &stat)?,
            _ => None,
        };
        let name = name_to_string(raw, rel, opts.root)?;
        out.push(Node { parent: ROOT, name, rel: child_rel, stat, link_target, inline_digest });
    }
    Ok(out)
}

/// The longest path (in bytes, without the terminating NUL) a path-based system call
/// accepts: `PATH_MAX` less one.
pub const PATH_MAX_LEN: usize = libc::PATH_MAX as usize - 1;

/// Fails with Node's `ENAMETOOLONG` `lstat` error when `root/rel` is longer than a path-based
/// call accepts: what upstream's walk, which `lstat`s every entry by path, meets there. The
/// walk itself reads through directory handles and could go deeper, but its callers hand
/// paths on (hashing, copying, mirroring), so a tree that deep is refused whole rather than
/// returned with its deep part missing.
pub fn check_path_length(root: &Path, rel: &str) -> Result<()> {
    let root_len = root.as_os_str().len();
    // `join_like_node` adds at most one separator; only build the path when it may be long.
    if root_len + 1 + rel.len() <= PATH_MAX_LEN {
        return Ok(());
    }
    let path = join_like_node(root, rel);
    if path.as_os_str().len() <= PATH_MAX_LEN {
        return Ok(());
    }
    Err(Error::io(std::io::Error::from_raw_os_error(libc::ENAMETOOLONG), "lstat", &path))
}

/// One entry met by [`in_order`].
pub struct Visit<'a> {
    /// The `/`-separated path below the root.
    pub rel: &'a str,
    /// The host path (`root/rel`), for messages.
    pub path: &'a Path,
    /// The open directory holding the entry, and its name there: for `openat`,
    /// `readlinkat` on the entry itself, with no path resolution.
    pub dir: &'a Dir,
    pub name: &'a CStr,
    /// `lstat` of the entry (`stat` when following symlinks).
    pub stat: &'a RawStat,
}

/// What [`in_order`] walks and how.
pub struct InOrderOptions<'a> {
    pub root: &'a Path,
    /// The root's children to visit, in this order (single names).
    pub top_level: &'a [String],
    /// `stat` instead of `lstat`, and descend through symlinks to directories; a directory
    /// met again below itself is an `ERR_PAPERCLIP_NATIVE_SYMLINK_LOOP` error.
    pub follow_symlinks: bool,
    /// True for a relative path to leave out, with everything below it, before it is even
    /// stat'ed.
    pub skip: &'a dyn Fn(&str) -> bool,
    pub cancel: &'a AtomicBool,
}

/// A directory of the current path of [`in_order`], with its children still to visit.
struct Frame {
    rel: String,
    dir: Dir,
    id: (u64, u64),
    children: Vec<CString>,
    next: usize,
}

/// Walks `opts.top_level` in order, each directory before its children and siblings in
/// byte order, calling `visit` for every entry not skipped; a directory is descended into
/// when `visit` returns `true`. Names must be UTF-8 (`ERR_PAPERCLIP_NATIVE_NON_UTF8_NAME`
/// for any in a directory read). Fails with the first I/O error, or [`Error::aborted`].
pub fn in_order(opts: &InOrderOptions<'_>, mut visit: impl FnMut(&Visit<'_>) -> Result<bool>) -> Result<()> {
    let root = Dir::open(opts.root).map_err(|e| Error::io(e, "scandir", opts.root))?;
    let mut stack: Vec<Frame> = Vec::new();
    for name in opts.top_level {
        let c = c_name(name.as_bytes()).map_err(|e| Error::io(e, "lstat", &join_like_node(opts.root, name)))?;
        stack.extend(enter(opts, &root, name.clone(), &c, &stack, &mut visit)?);
        while let Some(top) = stack.len().checked_sub(1) {
            let frame = &mut stack[top];
            let Some(child) = frame.children.get(frame.next).cloned() else {
                stack.pop();
                continue;
            };
            frame.next += 1;
            let rel = format!("{}/{}", frame.rel, child.to_str().expect("names were checked as UTF-8"));
            let next = enter(opts, &stack[top].dir, rel, &child, &stack, &mut visit)?;
            stack.extend(next);
        }
    }
    Ok(())
}

/// Visits the entry `name` of `dir` (below the directories of `stack`); returns the frame
/// of a directory to descend into.
fn enter(
    opts: &InOrderOptions<'_>,
    dir: &Dir,
    rel: String,
    name: &CStr,
    stack: &[Frame],
    visit: &mut impl FnMut(&Visit<'_>) -> Result<bool>,
) -> Result<Option<Frame>> {
    if opts.cancel.load(Ordering::Relaxed) {
        return Err(Error::aborted());
    }
    if (opts.skip)(&rel) {
        return Ok(None);
    }
    let path = join_like_node(opts.root, &rel);
    let stat = if opts.follow_symlinks {
        dir.stat_following(name).map_err(|e| Error::io(e, "stat", &path))?
    } else {
        dir.lstat(name).map_err(|e| Error::io(e, "lstat", &path))?
    };
    let is_dir = stat.0.st_mode & libc::S_IFMT == libc::S_IFDIR;
    let id = (stat.0.st_dev as u64, stat.0.st_ino as u64);
    if is_dir {
        if let Some(ancestor) = stack.iter().find(|frame| frame.id == id) {
            return Err(Error::new(
                codes::SYMLINK_LOOP,
                format!("'{rel}' leads back to its ancestor directory '{}' (a symbolic link cycle)", ancestor.rel),
            ));
        }
    }
    let descend = visit(&Visit { rel: &rel, path: &path, dir, name, stat: &stat })?;
    if !(is_dir && descend) {
        return Ok(None);
    }
    let opened = if opts.follow_symlinks { dir.open_dir_following(name) } else { dir.open_dir_nofollow(name) };
    let child = opened.map_err(|e| Error::io(e, "scandir", &path))?;
    let children = sorted_utf8_names(&child, &rel, opts.root)?;
    Ok(Some(Frame { rel, dir: child, id, children, next: 0 }))
}

/// The names in `dir`, in byte order, each checked as UTF-8 (the `NON_UTF8_NAME` error).
fn sorted_utf8_names(dir: &Dir, rel: &str, root: &Path) -> Result<Vec<CString>> {
    let mut names = dir.names().map_err(|e| Error::io(e, "scandir", &join_like_node(root, rel)))?;
    names.retain(|name| !reserved::is_reserved(name.as_bytes())); // our own staging
    names.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    names
        .into_iter()
        .map(|raw| {
            let name = name_to_string(raw, rel, root)?;
            Ok(CString::new(name).expect("a file name holds no NUL"))
        })
        .collect()
}

/// The names of the directory `path`, in byte order, as UTF-8 (the `NON_UTF8_NAME` error
/// otherwise): a tar root's top-level entries.
pub fn sorted_names(path: &Path) -> Result<Vec<String>> {
    let dir = Dir::open(path).map_err(|e| Error::io(e, "scandir", path))?;
    sorted_utf8_names(&dir, "", path)?
        .into_iter()
        .map(|name| name.into_string().map_err(|_| Error::new(codes::INTERNAL, "checked name")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    fn tmp(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("pc-walk-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn walk_all(root: &Path, threads: usize, skip: &(dyn Fn(&str) -> bool + Sync)) -> Result<Tree> {
        let cancel = AtomicBool::new(false);
        walk(&WalkOptions {
            root,
            threads,
            readdir_errors: ReaddirErrors::TreatAsEmpty,
            skip,
            descend: &|_| true,
            read_link_targets: true,
            inline_file: None,
            on_reserved: OnReserved::Skip,
            cancel: &cancel,
        })
    }

    #[test]
    fn walks_every_entry_once_with_contiguous_sorted_children() {
        let root = tmp("all");
        for d in ["b", "a", "a/x", "a/x/y", "c"] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        for f in ["a/1", "a/x/2", "a/x/y/3", "z", "B"] {
            fs::write(root.join(f), f).unwrap();
        }
        symlink("../z", root.join("a/link")).unwrap();
        for threads in [1, 2, 4] {
            let tree = walk_all(&root, threads, &|_| false).unwrap();
            let mut rels: Vec<&str> = tree.nodes.iter().map(|n| n.rel.as_str()).collect();
            rels.sort();
            assert_eq!(rels, ["B", "a", "a/1", "a/link", "a/x", "a/x/2", "a/x/y", "a/x/y/3", "b", "c", "z"]);
            let (s, e) = tree.root_children;
            let top: Vec<&str> = tree.nodes[s as usize..e as usize].iter().map(|n| n.name.as_str()).collect();
            assert_eq!(top, ["B", "a", "b", "c", "z"]);
            for (i, node) in tree.nodes.iter().enumerate() {
                let (s, e) = tree.children[i];
                for child in &tree.nodes[s as usize..e as usize] {
                    assert_eq!(child.parent as usize, i);
                    assert_eq!(child.rel, format!("{}/{}", node.rel, child.name));
                }
            }
            let link = tree.nodes.iter().find(|n| n.rel == "a/link").unwrap();
            assert_eq!(link.stat.kind, Kind::Symlink);
            assert_eq!(link.link_target.as_deref(), Some("../z"));
        }
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn skipped_paths_are_not_visited_and_missing_root_is_empty() {
        let root = tmp("skip");
        fs::create_dir_all(root.join("node_modules/deep")).unwrap();
        fs::write(root.join("keep"), "k").unwrap();
        let tree = walk_all(&root, 2, &|rel| rel == "node_modules").unwrap();
        assert_eq!(tree.nodes.len(), 1);
        assert_eq!(tree.nodes[0].rel, "keep");
        let missing = walk_all(&root.join("missing"), 2, &|_| false).unwrap();
        assert!(missing.nodes.is_empty());
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn cancellation_stops_the_walk() {
        let root = tmp("cancel");
        fs::create_dir_all(root.join("a")).unwrap();
        let cancel = AtomicBool::new(true);
        let err = walk(&WalkOptions {
            root: &root,
            threads: 2,
            readdir_errors: ReaddirErrors::Propagate,
            skip: &|_| false,
            descend: &|_| true,
            read_link_targets: false,
            inline_file: None,
            on_reserved: OnReserved::Skip,
            cancel: &cancel,
        })
        .unwrap_err();
        assert!(err.is_aborted());
        fs::remove_dir_all(root).unwrap();
    }

    /// `levels` nested directories named `name` below `root`, made through handles (a path
    /// that long cannot be passed to `mkdir`), with a file `f` in every 100th one.
    pub(crate) fn deep_tree(root: &Path, levels: usize, name: &str) -> usize {
        let mut dir = Dir::open(root).unwrap();
        let mut entries = 0;
        for level in 0..levels {
            if level % 100 == 0 {
                dir.create_new_file(OsStr::new("f"), 0o644).unwrap();
                entries += 1;
            }
            dir.mkdir(OsStr::new(name), 0o755).unwrap();
            dir = dir.open_dir_nofollow(OsStr::new(name)).unwrap();
            entries += 1;
        }
        entries
    }

    #[test]
    fn trees_deeper_than_path_max_are_an_error_never_a_shallower_tree() {
        for (levels, name) in [(3000, "d"), (30, &*"n".repeat(200))] {
            let root = tmp("deep");
            deep_tree(&root, levels, name);
            for threads in [1, 2] {
                let err = walk_all(&root, threads, &|_| false).unwrap_err();
                assert_eq!(err.code, "ENAMETOOLONG", "{levels} levels: {err:?}");
                assert_eq!(err.syscall, Some("lstat"));
                assert!(err.path.as_ref().is_some_and(|p| p.as_os_str().len() > PATH_MAX_LEN));
                let err = list(&root, threads, OnReserved::Skip, &AtomicBool::new(false)).unwrap_err();
                assert_eq!(err.code, "ENAMETOOLONG");
            }
            // Skipping the deep part makes the rest walkable.
            let first = name.to_string();
            let tree = walk_all(&root, 2, &|rel| rel == first).unwrap();
            assert_eq!(tree.nodes.iter().map(|n| n.rel.as_str()).collect::<Vec<_>>(), ["f"]);
            // Propagating readdir errors: the directory that cannot be opened by path.
            let cancel = AtomicBool::new(false);
            let err = walk(&WalkOptions {
                root: &root,
                threads: 2,
                readdir_errors: ReaddirErrors::Propagate,
                skip: &|_| false,
                descend: &|_| true,
                read_link_targets: false,
                inline_file: None,
                on_reserved: OnReserved::Skip,
                cancel: &cancel,
            })
            .unwrap_err();
            assert_eq!((err.code.as_ref(), err.syscall), ("ENAMETOOLONG", Some("scandir")));
            Dir::open(root.parent().unwrap()).unwrap().remove_tree(root.file_name().unwrap()).unwrap();
        }
    }

    #[test]
    fn joins_like_node() {
        assert_eq!(join_like_node(Path::new("/r"), "a/b"), PathBuf::from("/r/a/b"));
        assert_eq!(join_like_node(Path::new("/r/"), "a"), PathBuf::from("/r/a"));
        assert_eq!(join_like_node(Path::new("/"), "a"), PathBuf::from("/a"));
        assert_eq!(join_like_node(Path::new("."), "a"), PathBuf::from("a"));
        assert_eq!(join_like_node(Path::new("/r"), ""), PathBuf::from("/r"));
    }

    /// A reserved name is left out of a tree of ours and refused, at any depth, in an
    /// untrusted one; an excluded path is never refused (it is not read).
    #[test]
    fn reserved_names_are_skipped_or_refused() {
        let root = tmp("reserved");
        fs::create_dir_all(root.join("a/b")).unwrap();
        fs::write(root.join("a/b/f"), b"f").unwrap();
        fs::write(root.join(format!("a/b/{}", reserved::KEY_FILE)), b"k").unwrap();
        let cancel = AtomicBool::new(false);
        let mut kept: Vec<String> =
            list(&root, 2, OnReserved::Skip, &cancel).unwrap().into_iter().map(|e| e.0).collect();
        kept.sort();
        assert_eq!(kept, vec!["a", "a/b", "a/b/f"]);
        let err = list(&root, 2, OnReserved::Refuse("the test source"), &cancel).unwrap_err();
        assert_eq!(err.code, codes::UNSAFE_ARCHIVE_ENTRY);
        assert!(err.message.contains("'a/b/.paperclip-staging-key' in the test source"), "{}", err.message);
        assert!(!err.message.contains(&*root.to_string_lossy()), "no host path: {}", err.message);
        let tree = walk(&WalkOptions {
            root: &root,
            threads: 1,
            readdir_errors: ReaddirErrors::Propagate,
            skip: &|rel| rel == "a/b",
            descend: &|_| true,
            read_link_targets: false,
            inline_file: None,
            on_reserved: OnReserved::Refuse("the test source"),
            cancel: &cancel,
        })
        .unwrap();
        assert_eq!(tree.nodes.len(), 1, "only 'a': 'a/b' is excluded, so nothing in it is refused");
        fs::remove_dir_all(&root).unwrap();
    }
}
