//! Fuzz target `pack`: builds a directory tree from the input, archives it with
//! `paperclip_sync_core::tar::pack`, and checks that the archive is the tree:
//!
//! * the pack succeeds, and its tar stream is as long as it reports and [`precompute_size`]
//!   predicts;
//! * our extractor reproduces the tree exactly (types, permission bits, file contents and
//!   times, link targets), with exactly one member per entry, whatever the files hold;
//! * GNU tar (`tar -x -p`, when `tar` is GNU tar) reproduces the same tree.
//!
//! The trees are what breaks length fields: names, directory names (with their trailing
//! `/`), whole member paths and link targets whose byte lengths are drawn from the
//! boundaries of the tar format (the 100-byte fields, the 155-byte prefix, whole 512-byte
//! blocks) or freely up to 3000 bytes, deep directories, 1- to 4-byte UTF-8 characters, and
//! files whose content is a tar stream of its own (planted members that must stay data).
//!
//! Input layout: the first byte holds flags (bit 0: gzip, bit 1: `./`-prefixed member names
//! as the SSH upload writes them); then each entry takes a few bytes (kind, parent, length,
//! fill, mode, content) until the input runs out or 32 entries exist. Decoding never fails:
//! missing bytes read as zero, and an entry that cannot be created where it was asked for
//! (a name taken, a parent that is a file) is skipped.

#![no_main]

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use paperclip_sync_core::tar::{extract, pack, precompute_size, ExtractOptions, PackOptions};

/// Byte lengths at and around every place a tar length field changes shape.
const BOUNDARIES: &[usize] = &[
    99, 100, 101, 154, 155, 156, 255, 256, 257, 510, 511, 512, 513, 514, 1022, 1023, 1024, 1025, 1026, 1534, 1535,
    1536, 1537, 1538, 2047, 2048, 2049,
];
/// Longest member path built (the sandbox path must stay under `PATH_MAX` for the checks).
const MAX_PATH: usize = 3000;
/// Longest symbolic link target built (Linux takes up to 4095 bytes).
const MAX_TARGET: usize = 4000;
/// Most entries per tree.
const MAX_ENTRIES: usize = 32;
/// Fill alphabets: 1- to 4-byte characters; the last one mixes characters taken from the
/// input (never `/`, NUL or `.`, so no component is `.` or `..`).
const FILLS: &[&[char]] =
    &[&['a'], &['é'], &['€'], &['😀'], &['x', 'é', '€', '😀', ' ', '\\', '*', '[', '-', '\n', 'Ω', '中']];
const FILE_MODES: &[u32] = &[0o644, 0o755, 0o600, 0o640, 0o444];
const DIR_MODES: &[u32] = &[0o755, 0o700, 0o750, 0o775];

fuzz_target!(|data: &[u8]| run(data));

fn run(data: &[u8]) {
    let mut input = Input { data, pos: 0 };
    let flags = input.byte();
    let sandbox = Sandbox::new();
    let src = sandbox.path.join("src");
    fs::create_dir(&src).unwrap();
    build_tree(&mut input, &src);
    let expected = snapshot(&src);

    let opts = PackOptions {
        root: src.clone(),
        gzip: (flags & 1 != 0).then_some(1),
        dot_members: flags & 2 != 0,
        ..PackOptions::default()
    };
    let never = AtomicBool::new(false);
    let mut archive = Vec::new();
    let summary =
        pack(&opts, &mut archive, |_| {}, &never).unwrap_or_else(|e| panic!("pack failed: {}: {}", e.code, e.message));
    let plain = if opts.gzip.is_some() { gunzip(&archive) } else { archive.clone() };
    assert_eq!(summary.tar_bytes, plain.len() as u64, "the pack reports its tar bytes");

    let ours = sandbox.path.join("ours");
    fs::create_dir(&ours).unwrap();
    let extracted = extract(&archive[..], &ours, &ExtractOptions::default(), |_| {}, &never)
        .unwrap_or_else(|e| panic!("our extractor refused our archive: {}: {}", e.code, e.message));
    assert_eq!(extracted.entries, expected.len() as u64, "one member per entry");
    compare(&expected, &snapshot(&ours), "our extractor");

    if gnu_tar() {
        let gnu = sandbox.path.join("gnu");
        fs::create_dir(&gnu).unwrap();
        gnu_extract(&plain, &gnu);
        compare(&expected, &snapshot(&gnu), "GNU tar");
    }
    let predicted = precompute_size(&opts, &never).unwrap();
    assert_eq!(predicted, plain.len() as u64, "precompute_size predicts the archive");
}

/// The input as a stream of bytes, zeros once it is used up.
struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    fn exhausted(&self) -> bool {
        self.pos >= self.data.len()
    }

    /// A number below `n` (> 0) from two bytes.
    fn below(&mut self, n: usize) -> usize {
        (usize::from(self.byte()) << 8 | usize::from(self.byte())) % n
    }

    fn pick<'t, T>(&mut self, items: &'t [T]) -> &'t T {
        &items[usize::from(self.byte()) % items.len()]
    }

    /// A byte length: a boundary (shifted by up to ±2) or a free one in `1..=max`.
    fn length(&mut self, max: usize) -> usize {
        let spec = self.byte();
        let len = if spec < 160 {
            let base = BOUNDARIES[usize::from(spec) % BOUNDARIES.len()];
            (base + usize::from(spec / 32) % 5).saturating_sub(2)
        } else {
            1 + self.below(max)
        };
        len.clamp(1, max)
    }

    /// The next `len` input bytes (fewer at the end).
    fn bytes(&mut self, len: usize) -> &[u8] {
        let start = self.pos.min(self.data.len());
        let end = (start + len).min(self.data.len());
        self.pos = start + len;
        &self.data[start..end]
    }
}

/// Exactly `len` bytes of characters from `fill` (chosen by the input when it has more than
/// one), topped up with `x`; never `.` or `..`, never a `/` or NUL.
fn filled(input: &mut Input<'_>, len: usize, fill: &[char]) -> String {
    let mut out = String::with_capacity(len);
    while out.len() < len {
        let c = if fill.len() == 1 { fill[0] } else { *input.pick(fill) };
        if out.len() + c.len_utf8() <= len {
            out.push(c);
        } else {
            out.push('x');
        }
    }
    out
}

/// A relative path of exactly `len` bytes in components of at most 255 bytes (sizes drawn
/// from the input, often at the field boundaries); `None` when `len` is 0.
fn components(input: &mut Input<'_>, len: usize, fill: &[char]) -> Option<String> {
    if len == 0 {
        return None;
    }
    let mut parts = Vec::new();
    let mut remaining = len;
    loop {
        if remaining <= 255 && input.byte() < 200 {
            parts.push(filled(input, remaining, fill));
            break;
        }
        // A component of `size` bytes then a `/`, leaving at least one byte for the rest.
        let most = remaining.saturating_sub(2).min(255);
        if most == 0 {
            parts.push(filled(input, remaining, fill));
            break;
        }
        let size = match input.byte() % 4 {
            0 => most,
            1 => 100.min(most),
            2 => 155.min(most),
            _ => 1 + input.below(most),
        };
        parts.push(filled(input, size, fill));
        remaining -= size + 1;
    }
    Some(parts.join("/"))
}

/// Builds entries under `root` as the input says.
fn build_tree(input: &mut Input<'_>, root: &Path) {
    let mut dirs: Vec<String> = vec![String::new()];
    let mut times: Vec<(PathBuf, i64)> = Vec::new();
    let mut made = 0;
    while made < MAX_ENTRIES && !input.exhausted() {
        let kind = input.byte() % 5;
        let parent = input.pick(&dirs).clone();
        let fill = *input.pick(FILLS);
        // The member path's length: the parent, a `/`, then a name of the rest.
        let taken = if parent.is_empty() { 0 } else { parent.len() + 1 };
        let total = input.length(MAX_PATH);
        let Some(name) = components(input, total.saturating_sub(taken).max(1), fill) else {
            continue;
        };
        let rel = if parent.is_empty() { name } else { format!("{parent}/{name}") };
        let path = root.join(&rel);
        if fs::symlink_metadata(&path).is_ok() {
            continue;
        }
        // Intermediate directories of a multi-component name are entries too.
        if fs::create_dir_all(path.parent().unwrap()).is_err() {
            continue;
        }
        made += 1;
        match kind {
            0 | 1 => {
                if fs::create_dir(&path).is_err() {
                    continue;
                }
                fs::set_permissions(&path, fs::Permissions::from_mode(*input.pick(DIR_MODES))).unwrap();
                dirs.push(rel);
            }
            2 => {
                // Relative, climbing at most as far as the link is deep: what a safe
                // extraction accepts. Dangling is fine.
                let depth = rel.matches('/').count();
                let climbs = usize::from(input.byte()) % (depth + 1);
                let mut target = "../".repeat(climbs);
                let len = input.length(MAX_TARGET - target.len());
                let fill = *input.pick(FILLS);
                target += &components(input, len, fill).unwrap();
                std::os::unix::fs::symlink(&target, &path).unwrap();
            }
            _ => {
                let content = match kind {
                    3 => {
                        let len = usize::from(input.byte()) * 4;
                        input.bytes(len).to_vec()
                    }
                    _ => planted_tar(input),
                };
                fs::write(&path, content).unwrap();
                fs::set_permissions(&path, fs::Permissions::from_mode(*input.pick(FILE_MODES))).unwrap();
                let mtime = 1_000_000_000 + i64::from(input.byte()) * 1_000_003;
                times.push((path, mtime));
            }
        }
    }
    for (path, mtime) in times {
        let time = libc::timespec { tv_sec: mtime as libc::time_t, tv_nsec: 0 };
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        let rc = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), [time, time].as_ptr(), 0) };
        assert_eq!(rc, 0, "utimensat");
    }
}

/// A valid tar stream (ustar headers, end blocks) of one to three members whose names come
/// from the input: what a file may hold and an archive must keep as data.
fn planted_tar(input: &mut Input<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..1 + input.byte() % 3 {
        let len = 1 + usize::from(input.byte()) % 99;
        let name = format!("evil{i}{}", filled(input, len.saturating_sub(5).max(1), &['p']));
        let size = usize::from(input.byte());
        let data = input.bytes(size).to_vec();
        let mut block = [0u8; 512];
        block[..name.len()].copy_from_slice(name.as_bytes());
        octal(&mut block[100..108], 0o755);
        octal(&mut block[108..116], 0);
        octal(&mut block[116..124], 0);
        octal(&mut block[124..136], data.len() as u64);
        octal(&mut block[136..148], 1_600_000_000);
        block[156] = b'0';
        block[257..263].copy_from_slice(b"ustar\0");
        block[263..265].copy_from_slice(b"00");
        block[148..156].fill(b' ');
        let sum: u32 = block.iter().map(|&b| u32::from(b)).sum();
        block[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        out.extend_from_slice(&block);
        out.extend_from_slice(&data);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out.resize(out.len() + 1024, 0);
    out
}

fn octal(field: &mut [u8], value: u64) {
    let text = format!("{value:0width$o}\0", width = field.len() - 1);
    field.copy_from_slice(text.as_bytes());
}

fn gunzip(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(data).read_to_end(&mut out).unwrap();
    out
}

/// Whether `tar` on PATH is GNU tar (checked once).
fn gnu_tar() -> bool {
    static GNU: OnceLock<bool> = OnceLock::new();
    *GNU.get_or_init(|| {
        Command::new("tar")
            .arg("--version")
            .output()
            .map(|out| String::from_utf8_lossy(&out.stdout).contains("GNU tar"))
            .unwrap_or(false)
    })
}

/// `tar -x -p -f - -C dest` with the archive on stdin; panics with its stderr on failure.
fn gnu_extract(archive: &[u8], dest: &Path) {
    use std::io::Write;
    let mut child = Command::new("tar")
        .args(["-x", "-p", "-f", "-", "-C"])
        .arg(dest)
        .env("LC_ALL", "C.UTF-8")
        .env_remove("TAR_OPTIONS")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tar");
    let mut stdin = child.stdin.take().unwrap();
    let input = archive.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success(), "GNU tar failed: {}", String::from_utf8_lossy(&out.stderr));
}

/// One entry as compared (directory times left out: creating entries in a directory
/// changes its time).
#[derive(Debug, PartialEq, Eq)]
enum Node {
    Dir { mode: u32 },
    File { mode: u32, mtime: i64, data: Vec<u8> },
    Link { target: Vec<u8> },
    Other { mode: u32 },
}

fn snapshot(root: &Path) -> BTreeMap<Vec<u8>, Node> {
    let mut out = BTreeMap::new();
    snapshot_into(root, &mut Vec::new(), &mut out);
    out
}

fn snapshot_into(dir: &Path, rel: &mut Vec<u8>, out: &mut BTreeMap<Vec<u8>, Node>) {
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        let meta = fs::symlink_metadata(&path).unwrap();
        let start = rel.len();
        if !rel.is_empty() {
            rel.push(b'/');
        }
        rel.extend_from_slice(entry.file_name().as_bytes());
        let mode = meta.mode() & 0o7777;
        let node = if meta.is_dir() {
            snapshot_into(&path, rel, out);
            Node::Dir { mode }
        } else if meta.is_file() {
            Node::File { mode, mtime: meta.mtime(), data: fs::read(&path).unwrap() }
        } else if meta.file_type().is_symlink() {
            Node::Link { target: fs::read_link(&path).unwrap().as_os_str().as_bytes().to_vec() }
        } else {
            Node::Other { mode: meta.mode() }
        };
        out.insert(rel.clone(), node);
        rel.truncate(start);
    }
}

fn compare(expected: &BTreeMap<Vec<u8>, Node>, got: &BTreeMap<Vec<u8>, Node>, who: &str) {
    let show = |p: &[u8]| String::from_utf8_lossy(p).into_owned();
    let mut problems = Vec::new();
    for (path, node) in expected {
        match got.get(path) {
            None => problems.push(format!("missing: {} ({} bytes)", show(path), path.len())),
            Some(other) if other != node => problems.push(format!(
                "differs: {} ({} bytes): {:?} != {:?}",
                show(path),
                path.len(),
                short(node),
                short(other)
            )),
            Some(_) => {}
        }
    }
    for path in got.keys().filter(|p| !expected.contains_key(*p)) {
        problems.push(format!("extra: {} ({} bytes)", show(path), path.len()));
    }
    assert!(problems.is_empty(), "{who} did not reproduce the tree:\n{}", problems.join("\n"));
}

/// A node for messages: file data as its length.
fn short(node: &Node) -> String {
    match node {
        Node::File { mode, mtime, data } => {
            format!("File {{ mode: {mode:o}, mtime: {mtime}, {} bytes }}", data.len())
        }
        other => format!("{other:?}"),
    }
}

/// The parent of every sandbox (its own directory in `$TMPDIR`).
fn base() -> &'static Path {
    static BASE: OnceLock<PathBuf> = OnceLock::new();
    BASE.get_or_init(|| {
        let path = std::env::temp_dir().join(format!("paperclip-fuzz-pack-{}", std::process::id()));
        fs::create_dir_all(&path).unwrap();
        path
    })
}

/// A fresh directory for one input, removed on drop.
struct Sandbox {
    path: PathBuf,
}

impl Sandbox {
    fn new() -> Sandbox {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let path = base().join(format!("s{}", COUNTER.fetch_add(1, Ordering::Relaxed)));
        fs::create_dir(&path).unwrap();
        Sandbox { path }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        // Directories are built with owner rwx, so the removal can always descend.
        let _ = fs::remove_dir_all(&self.path);
    }
}
