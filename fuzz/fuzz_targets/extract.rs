//! Fuzz target `extract`: bytes through `paperclip_sync_core::tar::extract` into a fresh root
//! inside a fresh sandbox directory, then checks the extractor's promise:
//!
//! * no panic, and a failure is a coded error (ours, or an OS error with its errno name);
//! * nothing outside the root changed: the sandbox around the root (sibling directories, a
//!   sentinel file, the process's working directory, the directories above) is compared
//!   entry by entry (type, mode, size, times, link count, content) before and after;
//! * no symbolic link left in the root resolves (lexically, from where it is) outside it,
//!   and no file in the root shares its inode with a file outside, except what this target
//!   planted itself;
//! * a successful extraction read its whole input;
//! * extraction is atomic: a failed one leaves every entry of the root exactly as it was,
//!   and none leaves a `.paperclip-extract-…` staging directory behind;
//! * no name the library reserves (`paperclip_sync_core::reserved`: its staging directories
//!   and key, which the seeds plant in archives) is in the root afterwards, at any depth.
//!
//! Writes through a symbolic link are caught by the sandbox comparison: every link that
//! leads out of the root (planted ones, or any the extractor wrongly created, up to three
//! levels up) leads into the sandbox.
//!
//! Input layout. The first byte selects how the rest becomes the extractor's input (the
//! seeds written by the core crate's `tar::fuzz_seeds` test use the same layout):
//!
//! * bits 0-1, the shape: 0 the rest as is (a gzip stream when it starts with the magic);
//!   1 the rest gzip-compressed; 2 a valid prefix archive without its end marker, then the
//!   rest; 3 the prefix and the rest as two concatenated gzip members. The prefix makes
//!   directories, a file, a hard link and symbolic links inside the root (`d/up -> ..`,
//!   `sl -> d`, …) for the rest's members to run into.
//! * bit 2: recompute the checksum of every non-zero 512-byte block of the rest, so that a
//!   mutated header is not rejected by its checksum alone.
//! * bit 3: plant hostile entries in the root first: `out` and `sent`, absolute symbolic links
//!   to the outside directory and the sentinel in it; `rel -> ../outside`;
//!   `pre/esc -> ../../outside`; `hl`, a hard link to the outside file `linked`.
//! * bit 4: extract without restoring modification times.

#![no_main]

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use libfuzzer_sys::fuzz_target;
use paperclip_sync_core::error::{codes, Error};
use paperclip_sync_core::reserved::is_reserved;
use paperclip_sync_core::tar::{extract, ArchiveLimits, ExtractOptions};

/// Longer inputs are skipped: they slow the run down and reach nothing new.
const MAX_INPUT: usize = 128 << 10;
/// A gzip input that inflates to more than this is skipped (a small bomb would otherwise
/// write hundreds of megabytes per run).
const MAX_INFLATED: u64 = 8 << 20;

const SHAPE: u8 = 0b11;
const FIX_CHECKSUMS: u8 = 1 << 2;
const PLANT: u8 = 1 << 3;
const NO_MTIME: u8 = 1 << 4;

/// Where the root is inside the sandbox: three levels down, so that a link climbing up to
/// three levels out of the root still lands in the sandbox.
const ROOT: &str = "a/b/root";

fuzz_target!(|data: &[u8]| run(data));

fn run(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else { return };
    if rest.len() > MAX_INPUT {
        return;
    }
    let mut rest = rest.to_vec();
    if flags & FIX_CHECKSUMS != 0 {
        fix_checksums(&mut rest);
    }
    let input = match flags & SHAPE {
        0 => {
            if rest.starts_with(&[0x1f, 0x8b]) && inflates_past(&rest, MAX_INFLATED) {
                return;
            }
            rest
        }
        1 => gzip(&rest),
        2 => [prefix(), &rest[..]].concat(),
        _ => [gzip(prefix()), gzip(&rest)].concat(),
    };

    let sandbox = Sandbox::new();
    let planted = if flags & PLANT != 0 { sandbox.plant() } else { Vec::new() };
    let before = sandbox.outside_state();
    let root_before = sandbox.root_state();
    // No free-space floor: declared sizes far beyond the disk must reach the parser's checks.
    let opts = ExtractOptions {
        preserve_mtime: flags & NO_MTIME == 0,
        limits: ArchiveLimits { min_free_bytes: Some(0), ..ArchiveLimits::default() },
        // The destination vouches for its own links: an archive that repeats a planted
        // escaping link gets it placed (never followed); the root checks allow exactly those.
        known_links: None,
        skip_untransferable: false,
    };
    // A relative path resolved against the working directory by mistake lands in `cwd`.
    // (libFuzzer's own relative paths need the real one back.)
    let home = std::env::current_dir().unwrap();
    std::env::set_current_dir(sandbox.path.join("cwd")).unwrap();
    let result = extract(&input[..], &sandbox.root(), &opts, |_| {}, &AtomicBool::new(false));
    std::env::set_current_dir(home).unwrap();

    match &result {
        Ok(summary) => {
            assert_eq!(summary.bytes_read, input.len() as u64, "a successful extraction reads its whole input")
        }
        Err(err) => {
            check_error(err);
            // Atomic: a failed extraction leaves the root exactly as it was.
            assert!(
                sandbox.root_state() == root_before,
                "a failed extraction ({}: {}) changed the root",
                err.code,
                err.message
            );
        }
    }
    let mut reserved = Vec::new();
    walk(&sandbox.root(), "", &mut |rel, path, meta| {
        open_up(path, meta);
        let name = path.file_name().map(|n| n.as_bytes()).unwrap_or_default();
        if is_reserved(name) {
            reserved.push(rel.to_owned());
        }
        true
    });
    assert!(reserved.is_empty(), "reserved names (staging, key) in the root: {reserved:?}");
    let after = sandbox.outside_state();
    compare(&before, &after);
    sandbox.check_root(&planted, &after);
    let entries: Vec<_> = fs::read_dir(base()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(entries.len(), 1, "the sandbox's parent holds only the sandbox: {entries:?}");
}

/// Failures are coded: ours for bad or unsafe archives, an errno name for OS errors.
fn check_error(err: &Error) {
    let ours = [codes::BAD_ARCHIVE, codes::UNSAFE_ARCHIVE_ENTRY, codes::NON_UTF8_NAME];
    let os = err.errno.is_some() && err.code.starts_with('E');
    assert!(ours.contains(&err.code.as_ref()) || os, "unexpected error: {err:?}");
    assert!(!err.message.is_empty(), "error without a message: {err:?}");
}

/// The parent of every sandbox (its own directory in `$TMPDIR`).
fn base() -> &'static Path {
    static BASE: OnceLock<PathBuf> = OnceLock::new();
    BASE.get_or_init(|| {
        let path = std::env::temp_dir().join(format!("paperclip-fuzz-extract-{}", std::process::id()));
        fs::create_dir_all(&path).unwrap();
        path
    })
}

/// A fresh sandbox: `cwd/`, `a/sentinel`, `a/b/outside/{sentinel,linked,etc/}` and the empty
/// root `a/b/root/`. Removed on drop.
struct Sandbox {
    path: PathBuf,
}

impl Sandbox {
    fn new() -> Sandbox {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let path = base().join(format!("s{}", COUNTER.fetch_add(1, Ordering::Relaxed)));
        fs::create_dir(&path).unwrap();
        fs::create_dir(path.join("cwd")).unwrap();
        fs::create_dir_all(path.join("a/b/outside/etc")).unwrap();
        fs::write(path.join("a/sentinel"), b"above the root").unwrap();
        fs::write(path.join("a/b/outside/sentinel"), b"untouched").unwrap();
        fs::write(path.join("a/b/outside/linked"), b"hard-linked from the root").unwrap();
        fs::create_dir(path.join(ROOT)).unwrap();
        Sandbox { path }
    }

    fn root(&self) -> PathBuf {
        self.path.join(ROOT)
    }

    /// Plants the hostile entries; returns the planted links as (path in the root, target).
    fn plant(&self) -> Vec<(String, Vec<u8>)> {
        let root = self.root();
        let outside = self.path.join("a/b/outside");
        let mut links = vec![
            ("out".to_owned(), outside.as_os_str().as_bytes().to_vec()),
            ("sent".to_owned(), outside.join("sentinel").as_os_str().as_bytes().to_vec()),
            ("rel".to_owned(), b"../outside".to_vec()),
            ("pre/esc".to_owned(), b"../../outside".to_vec()),
        ];
        fs::create_dir(root.join("pre")).unwrap();
        for (name, target) in &mut links {
            std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(target), root.join(&*name)).unwrap();
        }
        fs::hard_link(outside.join("linked"), root.join("hl")).unwrap();
        links
    }

    /// Every entry below the root (the root itself aside: its times follow the staging
    /// directory an extraction creates and removes).
    fn root_state(&self) -> BTreeMap<String, Entry> {
        let mut out = BTreeMap::new();
        walk(&self.root(), "", &mut |rel, path, meta| {
            let mut entry = Entry::new(path, meta);
            if rel == "hl" {
                // The planted hard link's ctime moves when an archive's hard link to it is
                // staged and then rolled back (a link made and removed): its content, mode,
                // inode and link count are what must not change.
                entry.ctime = (0, 0);
            }
            out.insert(rel.to_owned(), entry);
            true
        });
        out
    }

    /// Every entry of the sandbox but the root's subtree.
    fn outside_state(&self) -> BTreeMap<String, Entry> {
        let mut out = BTreeMap::new();
        walk(&self.path, "", &mut |rel, path, meta| {
            if rel == ROOT {
                return false;
            }
            let mut entry = Entry::new(path, meta);
            if rel == "a/b/outside/linked" {
                // Its link count and ctime follow the planted hard link `hl`, which the
                // archive may replace.
                entry.nlink = 0;
                entry.ctime = (0, 0);
            }
            out.insert(rel.to_owned(), entry);
            true
        });
        out
    }

    /// Links in the root resolve inside it; no file in it is an outside file.
    fn check_root(&self, planted: &[(String, Vec<u8>)], outside: &BTreeMap<String, Entry>) {
        let outside_inodes: HashSet<(u64, u64)> =
            outside.values().filter(|e| e.mode & libc::S_IFMT == libc::S_IFREG).map(|e| e.ino).collect();
        walk(&self.root(), "", &mut |rel, path, meta| {
            open_up(path, meta);
            if meta.file_type().is_symlink() {
                let target = fs::read_link(path).unwrap();
                let target = target.as_os_str().as_bytes();
                if !planted.iter().any(|(name, t)| name == rel && t == target) {
                    assert!(
                        resolves_inside(rel, target),
                        "the link '{rel}' -> '{}' resolves outside the root",
                        String::from_utf8_lossy(target)
                    );
                }
            } else if meta.is_file() && outside_inodes.contains(&(meta.dev(), meta.ino())) {
                // The planted `hl` shares `linked`'s file, and so does a hard link the archive
                // made to `hl` (a file the destination holds, as `tar -x` links to; members
                // replace files, never write through them): that file and no other.
                let linked = outside.get("a/b/outside/linked").map(|e| e.ino);
                assert!(
                    !planted.is_empty() && Some((meta.dev(), meta.ino())) == linked,
                    "'{rel}' in the root is a file outside it"
                );
            }
            true
        });
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        // The archive may leave directories without write or search permission.
        walk(&self.path, "", &mut |_, path, meta| {
            open_up(path, meta);
            true
        });
        fs::remove_dir_all(&self.path).unwrap();
    }
}

/// Gives a directory owner rwx (the archive may leave it without): for the walks and the
/// removal when not running as root.
fn open_up(path: &Path, meta: &fs::Metadata) {
    if meta.is_dir() && meta.mode() & 0o700 != 0o700 {
        fs::set_permissions(path, fs::Permissions::from_mode(0o700)).unwrap();
    }
}

/// Visits everything under `dir` without following links, parents first (so `visit` can
/// [`open_up`] a directory before it is read); `visit` returns whether to descend.
fn walk(dir: &Path, prefix: &str, visit: &mut dyn FnMut(&str, &Path, &fs::Metadata) -> bool) {
    let mut names: Vec<_> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    for name in names {
        let rel = if prefix.is_empty() {
            name.to_string_lossy().into_owned()
        } else {
            format!("{prefix}/{}", name.to_string_lossy())
        };
        let path = dir.join(&name);
        let meta = fs::symlink_metadata(&path).unwrap();
        if visit(&rel, &path, &meta) && meta.is_dir() {
            walk(&path, &rel, visit);
        }
    }
}

/// Whether `target`, for a link at `link` (components under the root), stays in the root
/// when resolved lexically.
fn resolves_inside(link: &str, target: &[u8]) -> bool {
    if target.starts_with(b"/") {
        return false;
    }
    let mut depth = link.split('/').count() - 1;
    for component in target.split(|&b| b == b'/') {
        match component {
            b"" | b"." => {}
            b".." if depth == 0 => return false,
            b".." => depth -= 1,
            _ => depth += 1,
        }
    }
    true
}

/// One sandbox entry as compared: any change is a write outside the root.
#[derive(Debug, PartialEq, Eq)]
struct Entry {
    mode: u32,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    nlink: u64,
    ino: (u64, u64),
    /// A file's content or a link's target.
    data: Vec<u8>,
}

impl Entry {
    fn new(path: &Path, meta: &fs::Metadata) -> Entry {
        let data = if meta.is_file() {
            fs::read(path).unwrap()
        } else if meta.file_type().is_symlink() {
            fs::read_link(path).unwrap().as_os_str().as_bytes().to_vec()
        } else {
            Vec::new()
        };
        Entry {
            mode: meta.mode(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
            nlink: meta.nlink(),
            ino: (meta.dev(), meta.ino()),
            data,
        }
    }
}

fn compare(before: &BTreeMap<String, Entry>, after: &BTreeMap<String, Entry>) {
    let mut problems = Vec::new();
    for (rel, entry) in before {
        match after.get(rel) {
            None => problems.push(format!("removed: {rel}")),
            Some(now) if now != entry => problems.push(format!("changed: {rel}: {entry:?} -> {now:?}")),
            Some(_) => {}
        }
    }
    for rel in after.keys().filter(|rel| !before.contains_key(*rel)) {
        problems.push(format!("created: {rel}"));
    }
    assert!(problems.is_empty(), "written outside the root:\n{}", problems.join("\n"));
}

/// Sets the checksum field of every non-zero whole block, as if each were a header.
fn fix_checksums(bytes: &mut [u8]) {
    for block in bytes.chunks_exact_mut(512) {
        if block.iter().all(|&b| b == 0) {
            continue;
        }
        set_checksum(block);
    }
}

fn set_checksum(block: &mut [u8]) {
    block[148..156].fill(b' ');
    let sum: u32 = block.iter().map(|&b| u32::from(b)).sum();
    block[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::fast());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

/// Whether the gzip stream `data` inflates to more than `limit` bytes (before it fails, if
/// it is corrupt).
fn inflates_past(data: &[u8], limit: u64) -> bool {
    let mut decoder = MultiGzDecoder::new(data);
    let mut buffer = vec![0u8; 64 << 10];
    let mut total = 0u64;
    loop {
        match decoder.read(&mut buffer) {
            Ok(0) | Err(_) => return false,
            Ok(n) => {
                total += n as u64;
                if total > limit {
                    return true;
                }
            }
        }
    }
}

/// The valid prefix archive (no end marker) of shapes 2 and 3.
fn prefix() -> &'static [u8] {
    static PREFIX: OnceLock<Vec<u8>> = OnceLock::new();
    PREFIX.get_or_init(|| {
        let mut out = Vec::new();
        let mut member = |name: &str, typeflag: u8, link: &str, mode: u64, data: &[u8]| {
            let mut block = [0u8; 512];
            block[..name.len()].copy_from_slice(name.as_bytes());
            octal(&mut block[100..108], mode);
            octal(&mut block[108..116], 0);
            octal(&mut block[116..124], 0);
            octal(&mut block[124..136], data.len() as u64);
            octal(&mut block[136..148], 1_600_000_000);
            block[156] = typeflag;
            block[157..157 + link.len()].copy_from_slice(link.as_bytes());
            block[257..263].copy_from_slice(b"ustar\0");
            block[263..265].copy_from_slice(b"00");
            set_checksum(&mut block);
            out.extend_from_slice(&block);
            out.extend_from_slice(data);
            out.resize(out.len().div_ceil(512) * 512, 0);
        };
        member("d/", b'5', "", 0o755, b"");
        member("d/e/", b'5', "", 0o700, b"");
        member("d/f", b'0', "", 0o644, b"prefix data\n");
        member("d/up", b'2', "..", 0o777, b"");
        member("d/e/top", b'2', "../../d/f", 0o777, b"");
        member("sl", b'2', "d", 0o777, b"");
        member("d/h", b'1', "d/f", 0o644, b"");
        member("ro/", b'5', "", 0o555, b"");
        out
    })
}

/// An octal field: zero-padded digits and a NUL.
fn octal(field: &mut [u8], value: u64) {
    let text = format!("{value:0width$o}\0", width = field.len() - 1);
    field.copy_from_slice(text.as_bytes());
}
