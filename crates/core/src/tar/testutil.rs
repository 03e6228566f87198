//! Helpers for the tar tests: temporary directories, a seeded generator, the system tars, and
//! tree snapshots for comparisons.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

/// A directory removed (recursively) on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "paperclip-tar-{}-{}-{tag}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.0.join(rel)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        make_writable(&self.0);
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Gives every directory under `path` owner rwx so that it can be removed.
fn make_writable(path: &Path) {
    if let Ok(meta) = fs::symlink_metadata(path) {
        if meta.is_dir() {
            let _ = fs::set_permissions(path, fs::Permissions::from_mode(0o755));
            if let Ok(entries) = fs::read_dir(path) {
                for entry in entries.flatten() {
                    make_writable(&entry.path());
                }
            }
        }
    }
}

/// SplitMix64: small, seedable, good enough for test generation.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Number of generated cases, overridable with `PAPERCLIP_TAR_CASES`.
pub fn case_count(default: u64) -> u64 {
    std::env::var("PAPERCLIP_TAR_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// True when `tar` on PATH is GNU tar; prints why a test is skipped otherwise.
pub fn have_gnu_tar(test: &str) -> bool {
    let gnu = Command::new("tar")
        .arg("--version")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).contains("GNU tar"))
        .unwrap_or(false);
    if !gnu {
        eprintln!("skipping {test}: GNU tar is not installed");
    }
    gnu
}

/// True when `program args…` runs; prints why a test is skipped otherwise.
pub fn have_tool(program: &str, args: &[&str], test: &str) -> bool {
    let ok = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("skipping {test} for {program}: not installed");
    }
    ok
}

/// A tar command in the UTF-8 C locale (character-wise `fnmatch`, literal names).
pub fn tar_command(program: &str) -> Command {
    let mut command = Command::new(program);
    command.env("LC_ALL", "C.UTF-8").env_remove("TAR_OPTIONS").env_remove("POSIXLY_CORRECT");
    command
}

/// Runs `command` with `input` on stdin; panics with its stderr on failure.
pub fn run_with_input(mut command: Command, input: &[u8]) -> Vec<u8> {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(
        out.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// GNU tar's archive of `root` with `tar -c --no-xattrs --no-unquote [-h] --exclude ._*
/// --exclude … -- names` (`--no-unquote` so that a name like `a\b` is taken as is).
pub fn gnu_tar_create(root: &Path, excludes: &[String], names: &[String], follow: bool) -> Vec<u8> {
    let mut command = tar_command("tar");
    command.args(["-c", "--no-xattrs", "--no-unquote"]);
    if follow {
        command.arg("-h");
    }
    command.arg("-f").arg("-").arg("-C").arg(root);
    command.args(["--exclude", "._*"]);
    for exclude in excludes {
        command.arg("--exclude").arg(exclude);
    }
    command.arg("--").args(names);
    run_with_input(command, b"")
}

/// The sorted member names of an archive, as GNU tar (or `program`) lists them.
pub fn list_members(program: &[&str], archive: &[u8]) -> Vec<String> {
    let mut command = tar_command(program[0]);
    command.args(&program[1..]);
    let out = run_with_input(command, archive);
    let mut names: Vec<String> =
        String::from_utf8(out).unwrap().lines().map(str::to_owned).collect();
    names.sort();
    names
}

/// GNU tar's listing of an archive.
pub fn gnu_list(archive: &[u8]) -> Vec<String> {
    list_members(&["tar", "-t", "--quoting-style=literal", "-f", "-"], archive)
}

/// Extracts with `program args… -C dest` reading the archive from stdin.
pub fn system_extract(program: &[&str], archive: &[u8], dest: &Path) {
    let mut command = tar_command(program[0]);
    command.args(&program[1..]).arg("-C").arg(dest);
    run_with_input(command, archive);
}

/// One file-system node as the comparisons see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Snap {
    Dir { mode: u32, mtime: i64 },
    File { mode: u32, mtime: i64, content: Vec<u8> },
    Link { target: Vec<u8> },
    Other { mode: u32 },
}

/// Every node under `root` by relative path (the root itself excluded); `dirs_mtime` records
/// directory times (which a later write into the directory changes).
pub fn snapshot(root: &Path, dirs_mtime: bool) -> BTreeMap<String, Snap> {
    let mut out = BTreeMap::new();
    snapshot_into(root, "", dirs_mtime, &mut out);
    out
}

fn snapshot_into(dir: &Path, prefix: &str, dirs_mtime: bool, out: &mut BTreeMap<String, Snap>) {
    let mut names: Vec<_> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    for name in names {
        let name = name.to_string_lossy().into_owned();
        let rel = if prefix.is_empty() { name.clone() } else { format!("{prefix}/{name}") };
        let path = dir.join(&name);
        let meta = fs::symlink_metadata(&path).unwrap();
        let mode = meta.mode() & 0o7777;
        let snap = if meta.is_dir() {
            snapshot_into(&path, &rel, dirs_mtime, out);
            Snap::Dir { mode, mtime: if dirs_mtime { meta.mtime() } else { 0 } }
        } else if meta.is_file() {
            Snap::File { mode, mtime: meta.mtime(), content: fs::read(&path).unwrap() }
        } else if meta.file_type().is_symlink() {
            use std::os::unix::ffi::OsStrExt;
            Snap::Link { target: fs::read_link(&path).unwrap().as_os_str().as_bytes().to_vec() }
        } else {
            Snap::Other { mode: meta.mode() }
        };
        out.insert(rel, snap);
    }
}

/// Random file and directory names full of glob characters, spaces, dots and non-ASCII.
pub fn random_name(rng: &mut Rng) -> String {
    const PIECES: &[&str] = &[
        "a", "b", "c", "x", "y", "z", "build", "node_modules", "dist", ".git", "._x", "*", "?",
        "[", "]", "\\", "^", "$", "{", "}", " ", ".", "é", "日本", "🙂", "-", "!", "1", "_", "[a]",
        "[!b]", "secret[1]", "a\\b", "~",
    ];
    loop {
        let count = 1 + rng.below(3);
        let name: String = (0..count).map(|_| *rng.pick(PIECES)).collect();
        if name != "." && name != ".." {
            return name;
        }
    }
}
