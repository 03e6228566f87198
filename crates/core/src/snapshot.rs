//! Directory snapshots (upstream `captureDirectorySnapshot` and friends) and the
//! referenced-source content signature.
//!
//! The walk (the shared [`crate::walk`]) and the hashing both run on a bounded set of
//! worker threads; files are streamed through a fixed buffer per worker. Entries come back
//! as a [`Tree`] plus per-node hashes; the caller imposes upstream's sibling order
//! (`localeCompare`, which depends on the process locale, so the JS layer sorts).

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use crate::error::{codes, Error, Result};
use crate::exclude::should_exclude_path;
use crate::fsat::Dir;
use crate::reserved::OnReserved;
use crate::walk::{self, join_like_node, Kind, Node, ReaddirErrors, Stat, Tree, WalkOptions};

/// Bytes read per `read` call when hashing; one buffer per worker.
const HASH_BUFFER: usize = 256 * 1024;

/// Files up to this size are hashed by the walk worker while their directory is open
/// (`openat`, no path resolution); larger ones go to the parallel hash phase, largest first.
pub(crate) const INLINE_HASH_MAX: u64 = 1024 * 1024;

/// A file's SHA-256.
pub type Hash = [u8; 32];

/// What one snapshot entry is (upstream's `SnapshotEntry`, before it crosses into JS).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Dir,
    File { mode: u32, hash: Hash },
    Symlink { target: String },
}

/// A captured snapshot: the walked tree and, for each node, its entry. Sockets, FIFOs and
/// devices are in the tree but have no entry (upstream skips them).
#[derive(Debug)]
pub struct Snapshot {
    pub tree: Tree,
    pub entries: Vec<Option<Entry>>,
    /// How many file hashes were reused from a previous snapshot (incremental capture).
    pub reused_hashes: usize,
}

/// The stat fields an incremental capture compares to decide that a file is unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileIdentity {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
    pub mode: u32,
}

impl From<&Stat> for FileIdentity {
    fn from(s: &Stat) -> Self {
        FileIdentity { dev: s.dev, ino: s.ino, size: s.size, mtime_ns: s.mtime_ns, ctime_ns: s.ctime_ns, mode: s.mode }
    }
}

/// What an incremental capture may reuse: a previous capture's file identities and hashes,
/// and the time that capture started. A file whose identity is unchanged is not re-read,
/// unless it was modified within `granularity_ns` of `captured_at_ns` (git's "racily
/// clean" rule: a write in the same timestamp tick as the capture could go unseen).
#[derive(Debug, Default)]
pub struct PreviousHashes {
    pub files: HashMap<String, (FileIdentity, Hash)>,
    pub captured_at_ns: i128,
    pub granularity_ns: i128,
}

impl PreviousHashes {
    fn reusable(&self, rel: &str, stat: &Stat) -> Option<Hash> {
        let (identity, hash) = self.files.get(rel)?;
        if *identity != FileIdentity::from(stat) {
            return None;
        }
        // Racily clean (git's rule): a write within the timestamp granularity of the previous
        // capture's start may not have moved mtime past what that capture saw.
        if stat.mtime_ns >= self.captured_at_ns - self.granularity_ns {
            return None;
        }
        Some(*hash)
    }
}

/// Options of [`capture`].
pub struct CaptureOptions<'a> {
    pub root: &'a Path,
    /// Upstream exclude entries (matched with the upstream matcher).
    pub exclude: &'a [String],
    pub threads: usize,
    pub previous: Option<&'a PreviousHashes>,
    /// When set, only files for which it returns true are hashed; the others get no entry,
    /// but their read permission is checked (so an unreadable file fails the capture with
    /// `EACCES` as when hashing). A caller that needs a few hashes out of a large tree (the merge) sets it.
    pub hash_only: Option<&'a (dyn Fn(&str) -> bool + Sync)>,
    /// What a directory that cannot be read is: empty, as upstream's walk reads it
    /// ([`ReaddirErrors::TreatAsEmpty`]), or a failure of the capture
    /// ([`ReaddirErrors::Propagate`]: a merge source, whose missing entries would read as
    /// deletions).
    pub readdir_errors: ReaddirErrors,
    /// Reserved names ([`crate::reserved`]): left out of a tree of ours, refused in an
    /// untrusted one (a merge source).
    pub on_reserved: OnReserved,
    pub cancel: &'a AtomicBool,
}

/// Upstream `captureDirectorySnapshot`, minus the ordering: walks `root` without following
/// symlinks, skipping excluded paths before any `lstat`, treating unreadable directories as
/// `opts.readdir_errors` says, and hashes every regular file (in parallel). `lstat`,
/// `readlink` and read errors fail the capture with Node's codes, and so does a path too
/// long for path-based calls (`ENAMETOOLONG`, as upstream): never a partial snapshot.
pub fn capture(opts: &CaptureOptions<'_>) -> Result<Snapshot> {
    let exclude: Vec<&[u8]> = opts.exclude.iter().map(|p| p.as_bytes()).collect();
    let skip = |rel: &str| should_exclude_path(rel.as_bytes(), exclude.iter().copied());
    // Reusable hashes are taken and small files hashed during the walk, while each file's
    // directory is open.
    let reused = AtomicUsize::new(0);
    let wanted = |rel: &str| opts.hash_only.is_none_or(|only| only(rel));
    let inline = |dir: &Dir, name: &OsStr, rel: &str, stat: &Stat| -> Result<Option<Hash>> {
        if !wanted(rel) {
            dir.check_readable(name).map_err(|err| Error::io(err, "open", &join_like_node(opts.root, rel)))?;
            return Ok(None);
        }
        if let Some(hash) = opts.previous.and_then(|prev| prev.reusable(rel, stat)) {
            reused.fetch_add(1, Ordering::Relaxed);
            return Ok(Some(hash));
        }
        if stat.size > INLINE_HASH_MAX {
            return Ok(None);
        }
        let path = || join_like_node(opts.root, rel);
        let file = dir.open_file_nofollow(name).map_err(|err| Error::io(err, "open", &path()))?;
        BUFFER.with(|buffer| hash_reader_sized(file, stat.size, &mut buffer.borrow_mut(), opts.cancel, path)).map(Some)
    };
    let tree = walk::walk(&WalkOptions {
        root: opts.root,
        threads: opts.threads,
        readdir_errors: opts.readdir_errors,
        skip: &skip,
        descend: &|_| true,
        read_link_targets: true,
        inline_file: Some(&inline),
        on_reserved: opts.on_reserved,
        cancel: opts.cancel,
    })?;

    let mut entries: Vec<Option<Entry>> = tree
        .nodes
        .iter()
        .map(|node| match node.stat.kind {
            Kind::Dir => Some(Entry::Dir),
            Kind::Symlink => Some(Entry::Symlink { target: node.link_target.clone().unwrap_or_default() }),
            Kind::File | Kind::Other => None,
        })
        .collect();
    let mut to_hash = Vec::new();
    for (index, node) in tree.nodes.iter().enumerate() {
        if node.stat.kind != Kind::File {
            continue;
        }
        match node.inline_digest {
            Some(hash) => entries[index] = Some(Entry::File { mode: node.stat.mode, hash }),
            None if wanted(&node.rel) => to_hash.push(index),
            None => {}
        }
    }
    for (index, hash) in hash_files(opts.root, &tree.nodes, &to_hash, opts.threads, opts.cancel)? {
        entries[index] = Some(Entry::File { mode: tree.nodes[index].stat.mode, hash });
    }
    Ok(Snapshot { tree, entries, reused_hashes: reused.into_inner() })
}

/// Hashes the given nodes' files on `threads` workers; largest files are started first so
/// one big file does not finish last on an otherwise idle pool.
pub(crate) fn hash_files(
    root: &Path,
    nodes: &[Node],
    indices: &[usize],
    threads: usize,
    cancel: &AtomicBool,
) -> Result<Vec<(usize, Hash)>> {
    let mut order = indices.to_vec();
    order.sort_by(|a, b| nodes[*b].stat.size.cmp(&nodes[*a].stat.size));
    let next = AtomicUsize::new(0);
    let failure: Mutex<Option<Error>> = Mutex::new(None);
    let failed = AtomicBool::new(false);
    let results: Mutex<Vec<(usize, Hash)>> = Mutex::new(Vec::with_capacity(order.len()));
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1).min(order.len().max(1)) {
            scope.spawn(|| {
                let mut local = Vec::new();
                loop {
                    if cancel.load(Ordering::Relaxed) || failed.load(Ordering::Relaxed) {
                        break;
                    }
                    let slot = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&index) = order.get(slot) else { break };
                    let path = join_like_node(root, &nodes[index].rel);
                    let hashed = BUFFER.with(|buffer| hash_file_with(&path, &mut buffer.borrow_mut(), cancel));
                    match hashed {
                        Ok(hash) => local.push((index, hash)),
                        Err(err) => {
                            failed.store(true, Ordering::Relaxed);
                            if let Ok(mut slot) = failure.lock() {
                                slot.get_or_insert(err);
                            }
                            break;
                        }
                    }
                }
                if let Ok(mut all) = results.lock() {
                    all.extend(local);
                }
            });
        }
    });
    if let Some(err) = failure.into_inner().ok().flatten() {
        return Err(err);
    }
    if cancel.load(Ordering::Relaxed) {
        return Err(Error::aborted());
    }
    results.into_inner().map_err(|_| Error::new(codes::INTERNAL, "hash worker panicked"))
}

thread_local! {
    /// The fixed read buffer of each worker thread.
    static BUFFER: RefCell<Vec<u8>> = RefCell::new(vec![0u8; HASH_BUFFER]);
}

/// SHA-256 of a file's bytes, streamed through `buffer`; a symlink in the last component is
/// not followed. Errors are Node's (`open`, `read`).
pub fn hash_file_with(path: &Path, buffer: &mut [u8], cancel: &AtomicBool) -> Result<Hash> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|err| Error::io(err, "open", path))?;
    hash_reader(file, buffer, cancel, || path.to_path_buf())
}

/// SHA-256 of everything `file` yields until EOF; `path` names it in errors.
pub(crate) fn hash_reader(
    file: File,
    buffer: &mut [u8],
    cancel: &AtomicBool,
    path: impl Fn() -> PathBuf,
) -> Result<Hash> {
    let mut hasher = Sha256::new();
    feed_reader(file, &mut hasher, buffer, cancel, path, None)?;
    Ok(hasher.finalize().into())
}

/// [`hash_reader`] for a regular file whose `lstat` said it holds `size` bytes: a read that
/// returns fewer bytes than asked for and brings the total to exactly `size` is the end of
/// the file (a regular file reads short only at its end), so the usual extra `read` that
/// returns 0 is saved; any other count goes on reading until a 0 as [`hash_reader`] does.
pub(crate) fn hash_reader_sized(
    file: File,
    size: u64,
    buffer: &mut [u8],
    cancel: &AtomicBool,
    path: impl Fn() -> PathBuf,
) -> Result<Hash> {
    let mut hasher = Sha256::new();
    feed_reader(file, &mut hasher, buffer, cancel, path, Some(size))?;
    Ok(hasher.finalize().into())
}

/// Feeds everything `file` yields until EOF into `hasher`, through `buffer`; with
/// `size`, a short read reaching exactly `size` bytes is the end (see [`hash_reader_sized`]).
fn feed_reader(
    mut file: File,
    hasher: &mut Sha256,
    buffer: &mut [u8],
    cancel: &AtomicBool,
    path: impl Fn() -> PathBuf,
    size: Option<u64>,
) -> Result<()> {
    let mut total = 0u64;
    loop {
        if cancel.load(Ordering::Relaxed) {
            return Err(Error::aborted());
        }
        let n = match file.read(buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(Error::io(err, "read", &path())),
        };
        hasher.update(&buffer[..n]);
        total += n as u64;
        if n < buffer.len() && Some(total) == size {
            break;
        }
    }
    Ok(())
}

/// Upstream `readSnapshotEntry(root, relative)`: the entry at one path, `None` when it cannot
/// be `lstat`ed or is neither a directory, a symlink nor a regular file.
pub fn read_entry(root: &Path, rel: &str) -> Result<Option<Entry>> {
    let path = join_like_node(root, rel);
    let Ok(meta) = std::fs::symlink_metadata(&path) else { return Ok(None) };
    let ft = meta.file_type();
    if ft.is_dir() {
        return Ok(Some(Entry::Dir));
    }
    if ft.is_symlink() {
        let target = std::fs::read_link(&path).map_err(|err| Error::io(err, "readlink", &path))?;
        use std::os::unix::ffi::OsStrExt;
        return Ok(Some(Entry::Symlink {
            target: String::from_utf8_lossy(target.as_os_str().as_bytes()).into_owned(),
        }));
    }
    if !ft.is_file() {
        return Ok(None);
    }
    use std::os::unix::fs::MetadataExt;
    let mut buffer = vec![0u8; HASH_BUFFER];
    let hash = hash_file_with(&path, &mut buffer, &AtomicBool::new(false))?;
    Ok(Some(Entry::File { mode: meta.mode(), hash }))
}

/// Directory names the content signature never descends into, at any depth.
pub const SIGNATURE_SKIP_DIRS: [&str; 10] =
    ["node_modules", "vendor", "dist", "build", "out", "coverage", ".next", ".turbo", ".cache", ".git"];

/// Upstream `referencedSourceContentSignature` for a `git`/`other` resolution: the first
/// 16 hex digits of a SHA-256 over the tree, walked with siblings in UTF-16 code-unit
/// order, skipping `ignored` paths (literal, root-anchored) and the [`SIGNATURE_SKIP_DIRS`].
/// Errors are returned as they happened; the caller renders `unreadable:<error>`.
pub fn content_signature(root: &Path, ignored: &[String], threads: usize, cancel: &AtomicBool) -> Result<String> {
    let ignored: Vec<&[u8]> = ignored.iter().map(|p| p.as_bytes()).collect();
    let skip = |rel: &str| ignored.iter().any(|p| crate::exclude::is_relative_path_or_descendant(rel.as_bytes(), p));
    let descend = |node: &Node| !SIGNATURE_SKIP_DIRS.contains(&node.name.as_str());
    let tree = walk::walk(&WalkOptions {
        root,
        threads,
        readdir_errors: ReaddirErrors::Propagate,
        skip: &skip,
        descend: &descend,
        read_link_targets: true,
        inline_file: None,
        on_reserved: OnReserved::Skip,
        cancel,
    })?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; HASH_BUFFER];
    // Pre-order, siblings in code-unit order (UTF-16, as JS `<` compares).
    let mut stack: Vec<u32> = sorted_by_code_units(&tree, tree.root_children);
    stack.reverse();
    while let Some(index) = stack.pop() {
        let node = &tree.nodes[index as usize];
        match node.stat.kind {
            Kind::Dir => {
                if descend(node) {
                    let mut children = sorted_by_code_units(&tree, tree.children[index as usize]);
                    children.reverse();
                    stack.extend(children);
                }
            }
            Kind::Symlink => {
                hasher.update(format!("symlink:{}:{}\n", node.rel, node.link_target.as_deref().unwrap_or("")));
            }
            Kind::Other => hasher.update(format!("other:{}:{}\n", node.rel, node.stat.mode)),
            Kind::File => {
                hasher.update(format!("file:{}:{}\n", node.rel, node.stat.size));
                let path = join_like_node(root, &node.rel);
                let file = File::open(&path).map_err(|err| Error::io(err, "open", &path))?;
                feed_reader(file, &mut hasher, &mut buffer, cancel, || path.clone(), None)?;
                hasher.update(b"\n");
            }
        }
    }
    let digest = hasher.finalize();
    Ok(digest.iter().take(8).map(|b| format!("{b:02x}")).collect())
}

fn sorted_by_code_units(tree: &Tree, (start, end): (u32, u32)) -> Vec<u32> {
    let mut ids: Vec<u32> = (start..end).collect();
    ids.sort_by(|a, b| {
        let (x, y) = (&tree.nodes[*a as usize].name, &tree.nodes[*b as usize].name);
        x.encode_utf16().cmp(y.encode_utf16())
    });
    ids
}

/// The `N` bytes that `2 * N` lowercase hex digits spell; `None` for anything else.
pub fn decode_hex<const N: usize>(hex: &str) -> Option<[u8; N]> {
    let bytes = hex.as_bytes();
    if bytes.len() != 2 * N {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; N];
    for (i, pair) in bytes.chunks_exact(2).enumerate() {
        out[i] = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(out)
}

/// Lowercase hex of a hash.
pub fn hex(hash: &Hash) -> String {
    let mut out = String::with_capacity(64);
    push_hex(&mut out, hash);
    out
}

/// Appends the 64 lowercase hex digits of `hash` to `out` (no allocation when `out` has room).
pub fn push_hex(out: &mut String, hash: &Hash) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 64];
    for (pair, b) in digits.chunks_exact_mut(2).zip(hash) {
        pair[0] = DIGITS[(b >> 4) as usize];
        pair[1] = DIGITS[(b & 15) as usize];
    }
    // Hex digits are ASCII.
    out.push_str(std::str::from_utf8(&digits).unwrap_or_default());
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{symlink, PermissionsExt};
    use std::path::PathBuf;

    fn tmp(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("pc-snap-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn sha256_hex(bytes: &[u8]) -> String {
        hex(&Sha256::digest(bytes).into())
    }

    fn capture_at(root: &Path, exclude: &[String], previous: Option<&PreviousHashes>) -> Result<Snapshot> {
        capture(&CaptureOptions {
            root,
            exclude,
            threads: 2,
            previous,
            hash_only: None,
            readdir_errors: ReaddirErrors::TreatAsEmpty,
            on_reserved: OnReserved::Skip,
            cancel: &AtomicBool::new(false),
        })
    }

    fn find<'a>(snap: &'a Snapshot, rel: &str) -> Option<&'a Entry> {
        let i = snap.tree.nodes.iter().position(|n| n.rel == rel)?;
        snap.entries[i].as_ref()
    }

    #[test]
    fn captures_files_dirs_links_with_full_mode_and_hashes() {
        let root = tmp("basic");
        fs::create_dir_all(root.join("a/b")).unwrap();
        fs::write(root.join("a/b/f"), b"hello").unwrap();
        let big: Vec<u8> = (0..(HASH_BUFFER * 3 + 17)).map(|i| (i % 251) as u8).collect();
        fs::write(root.join("big"), &big).unwrap();
        fs::set_permissions(root.join("big"), fs::Permissions::from_mode(0o755)).unwrap();
        symlink("/nowhere/dangling", root.join("a/dangling")).unwrap();
        let snap = capture_at(&root, &[], None).unwrap();
        assert_eq!(find(&snap, "a"), Some(&Entry::Dir));
        match find(&snap, "a/b/f").unwrap() {
            Entry::File { mode, hash } => {
                assert_eq!(*mode & 0o170000, 0o100000);
                assert_eq!(hex(hash), sha256_hex(b"hello"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(find(&snap, "big"), Some(&Entry::File { mode: 0o100755, hash: Sha256::digest(&big).into() }));
        assert_eq!(find(&snap, "a/dangling"), Some(&Entry::Symlink { target: "/nowhere/dangling".into() }));
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn excluded_paths_are_skipped_and_fifos_have_no_entry() {
        let root = tmp("excl");
        fs::create_dir_all(root.join("node_modules/x")).unwrap();
        fs::create_dir_all(root.join("src/node_modules")).unwrap();
        fs::write(root.join("keep"), b"k").unwrap();
        let fifo = root.join("pipe");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let snap = capture_at(&root, &["*/node_modules".to_string()], None).unwrap();
        let rels: Vec<&str> = snap.tree.nodes.iter().map(|n| n.rel.as_str()).collect();
        assert!(!rels.iter().any(|r| r.contains("node_modules")), "{rels:?}");
        assert!(find(&snap, "pipe").is_none());
        assert!(find(&snap, "keep").is_some());
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn unreadable_file_fails_with_eacces_unless_root() {
        if unsafe { libc::geteuid() } == 0 {
            return; // root reads everything; the JS suite covers this as a normal user
        }
        let root = tmp("eacces");
        fs::write(root.join("secret"), b"s").unwrap();
        fs::set_permissions(root.join("secret"), fs::Permissions::from_mode(0o000)).unwrap();
        let err = capture_at(&root, &[], None).unwrap_err();
        assert_eq!(err.code, "EACCES");
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn incremental_reuses_unchanged_hashes_but_not_racy_ones() {
        let root = tmp("incr");
        fs::write(root.join("a"), b"one").unwrap();
        fs::write(root.join("b"), b"two").unwrap();
        let first = capture_at(&root, &[], None).unwrap();
        let mut previous = PreviousHashes { captured_at_ns: i128::MAX / 4, granularity_ns: 0, ..Default::default() };
        for (i, node) in first.tree.nodes.iter().enumerate() {
            if let Some(Entry::File { hash, .. }) = &first.entries[i] {
                // A deliberately wrong hash proves the reuse: it can only come from `previous`.
                let _ = hash;
                previous.files.insert(node.rel.clone(), (FileIdentity::from(&node.stat), [7u8; 32]));
            }
        }
        let second = capture_at(&root, &[], Some(&previous)).unwrap();
        assert_eq!(second.reused_hashes, 2);
        assert_eq!(find(&second, "a"), Some(&Entry::File { mode: first.tree.nodes[0].stat.mode, hash: [7u8; 32] }));
        // Racy: modified within the granularity of the previous capture → re-hashed.
        previous.captured_at_ns = first.tree.nodes[0].stat.mtime_ns;
        previous.granularity_ns = 1_000_000_000;
        let third = capture_at(&root, &[], Some(&previous)).unwrap();
        assert_eq!(third.reused_hashes, 0);
        match find(&third, "a").unwrap() {
            Entry::File { hash, .. } => assert_eq!(hex(hash), sha256_hex(b"one")),
            other => panic!("{other:?}"),
        }
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn content_signature_orders_by_code_units_and_skips() {
        let root = tmp("sig");
        fs::create_dir_all(root.join("node_modules")).unwrap();
        fs::write(root.join("node_modules/x"), b"x").unwrap();
        fs::write(root.join("B"), b"b").unwrap();
        fs::write(root.join("a"), b"a").unwrap();
        fs::write(root.join("secret.env"), b"s").unwrap();
        let sig = content_signature(&root, &["secret.env".into()], 2, &AtomicBool::new(false)).unwrap();
        let expected = Sha256::digest(b"file:B:1\nb\nfile:a:1\na\n");
        assert_eq!(sig, hex(&expected.into())[..16]);
        let err = content_signature(&root.join("missing"), &[], 2, &AtomicBool::new(false)).unwrap_err();
        assert_eq!(err.code, "ENOENT");
        assert!(err.message.starts_with("ENOENT: no such file or directory, scandir '"));
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn sized_reads_hash_every_byte_whatever_the_size_hint() {
        let root = tmp("sized");
        let mut buffer = [0u8; 16];
        let cancel = AtomicBool::new(false);
        for len in [0usize, 1, 15, 16, 17, 32, 40, 100] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 % 256) as u8).collect();
            let path = root.join(format!("f{len}"));
            fs::write(&path, &data).unwrap();
            let expected: Hash = Sha256::digest(&data).into();
            // A hint that is right, too small or too large (the file changed since its lstat)
            // never cuts the read short.
            for hint in [len as u64, (len as u64).saturating_sub(1), len as u64 + 1, 0, 1 << 20] {
                let file = File::open(&path).unwrap();
                let hash = hash_reader_sized(file, hint, &mut buffer, &cancel, || path.clone()).unwrap();
                assert_eq!(hash, expected, "len {len} hint {hint}");
            }
        }
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn read_entry_matches_capture() {
        let root = tmp("read");
        fs::write(root.join("f"), b"data").unwrap();
        let snap = capture_at(&root, &[], None).unwrap();
        assert_eq!(read_entry(&root, "f").unwrap().as_ref(), find(&snap, "f"));
        assert_eq!(read_entry(&root, "missing").unwrap(), None);
        fs::remove_dir_all(root).unwrap();
    }
}
