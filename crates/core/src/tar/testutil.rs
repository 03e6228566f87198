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
    let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success(), "{command:?} failed: {}", String::from_utf8_lossy(&out.stderr));
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
    let mut names: Vec<String> = String::from_utf8(out).unwrap().lines().map(str::to_owned).collect();
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
    File { mode: u32, mtime: i64, size: u64, sha256: String },
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
            use sha2::Digest;
            let digest = sha2::Sha256::digest(fs::read(&path).unwrap());
            let sha256 = digest.iter().map(|b| format!("{b:02x}")).collect();
            Snap::File { mode, mtime: meta.mtime(), size: meta.len(), sha256 }
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
        "a",
        "b",
        "c",
        "x",
        "y",
        "z",
        "build",
        "node_modules",
        "dist",
        ".git",
        "._x",
        "*",
        "?",
        "[",
        "]",
        "\\",
        "^",
        "$",
        "{",
        "}",
        " ",
        ".",
        "é",
        "日本",
        "🙂",
        "-",
        "!",
        "1",
        "_",
        "[a]",
        "[!b]",
        "secret[1]",
        "a\\b",
        "~",
    ];
    loop {
        let count = 1 + rng.below(3);
        let name: String = (0..count).map(|_| *rng.pick(PIECES)).collect();
        if name != "." && name != ".." {
            return name;
        }
    }
}

/// What [`build_tree`] may put in a tree.
#[derive(Debug, Clone, Default)]
pub struct TreeOptions {
    /// Long names (components of 100+ bytes) and long symlink targets.
    pub long_names: bool,
    /// File contents of up to ~300 KiB (several copy buffers), else a few bytes.
    pub big_files: bool,
    /// Varied permission bits, setuid and sticky included, and varied times.
    pub modes_and_times: bool,
    /// Symlinks only to existing non-ancestor entries (safe for `tar -h`).
    pub followable_links: bool,
    /// Symlink targets that stay inside the tree (what a safe extraction accepts).
    pub inside_links: bool,
}

/// Builds a random tree under `root`; returns the relative paths created.
pub fn build_tree(rng: &mut Rng, root: &Path, options: &TreeOptions) -> Vec<String> {
    let mut paths = Vec::new();
    let mut dirs = Vec::new();
    populate(rng, root, "", 0, options, &mut paths, &mut dirs);
    if options.followable_links {
        // Links to files and to directories that are not ancestors of the link.
        let files: Vec<String> = paths.iter().filter(|p| root.join(p).is_file()).cloned().collect();
        for i in 0..1 + rng.below(3) {
            let link = format!("link{i}");
            let target = if !dirs.is_empty() && rng.chance(50) {
                rng.pick(&dirs).clone()
            } else if !files.is_empty() {
                rng.pick(&files).clone()
            } else {
                continue;
            };
            std::os::unix::fs::symlink(&target, root.join(&link)).unwrap();
            paths.push(link);
        }
    }
    if options.modes_and_times {
        // Deepest first, so that setting a child does not disturb its parent's time.
        let mut all = paths.clone();
        all.sort_by_key(|p| std::cmp::Reverse(p.matches('/').count()));
        for rel in &all {
            let path = root.join(rel);
            let meta = fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                let mode = *rng.pick(&[0o755, 0o700, 0o750, 0o775, 0o1777, 0o2755]);
                fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
            } else if meta.is_file() {
                let mode = *rng.pick(&[0o644, 0o600, 0o755, 0o640, 0o4755, 0o444, 0o666]);
                fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
            }
            let mtime = 1_000_000_000 + rng.below(800_000_000) as i64;
            set_mtime(&path, mtime);
        }
    }
    paths
}

#[allow(clippy::too_many_arguments)]
fn populate(
    rng: &mut Rng,
    root: &Path,
    prefix: &str,
    depth: usize,
    options: &TreeOptions,
    paths: &mut Vec<String>,
    dirs: &mut Vec<String>,
) {
    let count = if depth == 0 { 2 + rng.below(6) } else { rng.below(5) };
    for _ in 0..count {
        let mut name = random_name(rng);
        if options.long_names && rng.chance(15) {
            name = format!("{name}{}", "long-name-".repeat(11 + rng.below(10)));
        }
        let rel = if prefix.is_empty() { name.clone() } else { format!("{prefix}/{name}") };
        let path = root.join(&rel);
        if path.symlink_metadata().is_ok() {
            continue;
        }
        if depth < 3 && rng.chance(40) {
            fs::create_dir(&path).unwrap();
            paths.push(rel.clone());
            dirs.push(rel.clone());
            populate(rng, root, &rel, depth + 1, options, paths, dirs);
        } else if !options.followable_links && rng.chance(12) {
            let climb = if options.inside_links { "../".repeat(rng.below(depth + 1)) } else { "../".into() };
            let target = if options.long_names && rng.chance(30) {
                format!("{climb}{}", "far/away/".repeat(14))
            } else if rng.chance(50) {
                format!("{climb}{}", rng.pick(&["up", "x/y", "é"]))
            } else {
                rng.pick(&["target", "sub/dir", "é", "a\\b", "./dot"]).to_string()
            };
            std::os::unix::fs::symlink(target, &path).unwrap();
            paths.push(rel);
        } else {
            let size = if options.big_files && rng.chance(10) {
                rng.below(300 * 1024)
            } else {
                *rng.pick(&[0, 1, 17, 511, 512, 513, 1024, 3000])
            };
            let content: Vec<u8> = (0..size).map(|i| (i as u64 * 31 + rng.0) as u8).collect();
            fs::write(&path, content).unwrap();
            paths.push(rel);
        }
    }
}

/// Sets a modification time without following a symlink.
pub fn set_mtime(path: &Path, mtime: i64) {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    let times = [
        // `as _`: `time_t`, whose alias the libc crate marks deprecated on musl.
        libc::timespec { tv_sec: mtime as _, tv_nsec: 0 },
        libc::timespec { tv_sec: mtime as _, tv_nsec: 0 },
    ];
    // SAFETY: valid path and two timespecs.
    let rc = unsafe { libc::utimensat(libc::AT_FDCWD, c_path.as_ptr(), times.as_ptr(), libc::AT_SYMLINK_NOFOLLOW) };
    assert_eq!(rc, 0, "utimensat {}", path.display());
}

/// Random `--exclude` lists built from the tree's own paths (escaped or not, the heavy
/// directory quartet forms), `._*`, random globs and names with a wildcard put in.
pub fn random_excludes(rng: &mut Rng, paths: &[String]) -> Vec<String> {
    use crate::exclude::escape_tar_exclude_literal;
    let mut out = Vec::new();
    for _ in 0..1 + rng.below(5) {
        let base = if !paths.is_empty() && rng.chance(75) {
            let path = rng.pick(paths).clone();
            // A suffix of whole components, or the basename.
            let parts: Vec<&str> = path.split('/').collect();
            let from = rng.below(parts.len());
            parts[from..].join("/")
        } else {
            random_name(rng)
        };
        let base =
            if rng.chance(50) { String::from_utf8(escape_tar_exclude_literal(base.as_bytes())).unwrap() } else { base };
        let pattern = match rng.below(9) {
            0 => format!("{base}/*"),
            1 => format!("*/{base}"),
            2 => format!("*/{base}/*"),
            3 => "._*".to_owned(),
            4 => random_glob(rng),
            5 => put_wildcard(rng, &base),
            _ => base,
        };
        out.push(pattern);
    }
    out
}

/// A short random glob over tokens that exercise fnmatch's corners.
fn random_glob(rng: &mut Rng) -> String {
    const TOKENS: &[&str] = &[
        "*",
        "?",
        "[a-c]",
        "[!b]",
        "[^x]",
        "[]]",
        "[",
        "]",
        "\\*",
        "\\[",
        "a",
        "b",
        "x",
        ".",
        "/",
        "build",
        "é",
        "[é-ü]",
        "[[:alpha:]]",
        "[[:digit:]]",
        "[!]]",
        "\\",
        "[.a.]",
        "[=b=]",
        "[a-]",
        "{",
        "}",
        "??",
        "[日-月]",
    ];
    let count = 1 + rng.below(4);
    (0..count).map(|_| *rng.pick(TOKENS)).collect()
}

/// Replaces one character of `base` by a wildcard.
fn put_wildcard(rng: &mut Rng, base: &str) -> String {
    let chars: Vec<char> = base.chars().collect();
    let at = rng.below(chars.len().max(1));
    let replacement = *rng.pick(&["?", "*", "[", "[!a]"]);
    chars.iter().enumerate().map(|(i, c)| if i == at { replacement.to_owned() } else { c.to_string() }).collect()
}

/// Asserts two snapshots are equal, listing only the differences.
pub fn assert_same_tree(left: &BTreeMap<String, Snap>, right: &BTreeMap<String, Snap>, context: &str) {
    let mut problems = Vec::new();
    for (path, snap) in left {
        match right.get(path) {
            None => problems.push(format!("only on the left: {path:?} {snap:?}")),
            Some(other) if other != snap => problems.push(format!("{path:?}: {snap:?} != {other:?}")),
            Some(_) => {}
        }
    }
    for (path, snap) in right {
        if !left.contains_key(path) {
            problems.push(format!("only on the right: {path:?} {snap:?}"));
        }
    }
    assert!(problems.is_empty(), "{context}: trees differ:\n{}", problems.join("\n"));
}

/// Writes archives entry by entry with raw, unchecked names: the hostile-archive generator.
#[derive(Default)]
pub struct RawArchive {
    pub bytes: Vec<u8>,
}

impl RawArchive {
    pub fn new() -> RawArchive {
        RawArchive::default()
    }

    /// One member; GNU long-name entries are added for names and targets over 100 bytes.
    pub fn entry(&mut self, typeflag: u8, name: &[u8], link: &[u8], mode: u32, data: &[u8]) -> &mut Self {
        use super::header::{encode, long_entry, HeaderSpec, NAME_FIELD};
        for (kind, value) in [(b'L', name), (b'K', link)] {
            if value.len() > NAME_FIELD {
                self.bytes.extend_from_slice(&long_entry(kind, value));
                self.data(value, 1);
            }
        }
        self.bytes.extend_from_slice(&encode(&HeaderSpec {
            name,
            link,
            typeflag,
            mode,
            uid: 0,
            gid: 0,
            size: data.len() as u64,
            mtime: 1_600_000_000,
            uname: b"",
            gname: b"",
            device: matches!(typeflag, b'3' | b'4').then_some((1, 3)),
        }));
        self.data(data, 0);
        self
    }

    /// Data padded to a block (`extra` zero bytes count as data, e.g. a NUL terminator).
    fn data(&mut self, data: &[u8], extra: usize) {
        self.bytes.extend_from_slice(data);
        let len = data.len() + extra;
        let padded = len.div_ceil(512) * 512;
        self.bytes.resize(self.bytes.len() + padded - data.len(), 0);
    }

    pub fn file(&mut self, name: &str, data: &[u8]) -> &mut Self {
        self.entry(b'0', name.as_bytes(), b"", 0o644, data)
    }

    pub fn dir(&mut self, name: &str, mode: u32) -> &mut Self {
        self.entry(b'5', name.as_bytes(), b"", mode, b"")
    }

    pub fn symlink(&mut self, name: &str, target: &str) -> &mut Self {
        self.entry(b'2', name.as_bytes(), target.as_bytes(), 0o777, b"")
    }

    pub fn hard_link(&mut self, name: &str, target: &str) -> &mut Self {
        self.entry(b'1', name.as_bytes(), target.as_bytes(), 0o644, b"")
    }

    /// A pax extended header for the next member.
    pub fn pax(&mut self, records: &[(&str, &[u8])]) -> &mut Self {
        self.entry(b'x', b"PaxHeader", b"", 0o644, &pax_records(records))
    }

    /// A pax global header (`g`).
    pub fn pax_global(&mut self, records: &[(&str, &[u8])]) -> &mut Self {
        self.entry(b'g', b"GlobalHead", b"", 0o644, &pax_records(records))
    }

    /// The archive with its end-of-archive blocks.
    pub fn finish(&self) -> Vec<u8> {
        let mut bytes = self.bytes.clone();
        bytes.extend_from_slice(&[0u8; 1024]);
        bytes
    }
}

/// The body of a pax header: `"<length> <key>=<value>\n"` records, each length counting
/// its own digits.
pub fn pax_records(records: &[(&str, &[u8])]) -> Vec<u8> {
    let mut body = Vec::new();
    for (key, value) in records {
        let payload_len = key.len() + value.len() + 3; // space, '=', newline
        let mut len = payload_len + 1;
        while len != payload_len + len.to_string().len() {
            len = payload_len + len.to_string().len();
        }
        body.extend_from_slice(format!("{len} {key}=").as_bytes());
        body.extend_from_slice(value);
        body.push(b'\n');
    }
    body
}

/// Archives the extractor must refuse (`ERR_PAPERCLIP_NATIVE_UNSAFE_ARCHIVE_ENTRY`), each with
/// what it tries, shared by the extractor's tests and the fuzz seeds. `outside` is a
/// directory beside the destination, holding a file `sentinel`. A label says "absolute" when
/// the refusal message may show the host path the archive itself names.
pub fn escaping_names(outside: &str) -> Vec<(String, Vec<u8>)> {
    let mut cases: Vec<(String, Vec<u8>)> = [
        ("../x", "parent"),
        ("../outside/sentinel", "parent overwrite"),
        ("a/../../x", "climb"),
        ("a/b/../../../outside/x", "deep climb"),
        ("./../x", "dot parent"),
    ]
    .into_iter()
    .map(|(name, what)| (what.to_owned(), RawArchive::new().file(name, b"evil").finish()))
    .collect();
    cases.push(("absolute path".into(), RawArchive::new().file(&format!("{outside}/x"), b"evil").finish()));
    cases.push(("absolute /etc".into(), RawArchive::new().file("/etc/paperclip-native-test", b"evil").finish()));
    cases
}

/// Archives that plant a name this library reserves ([`crate::reserved`]): every staging
/// prefix, in the current (tagged, here with a forged tag) and an earlier form, of a live
/// and a dead pid, with and without a journal, at the root and nested; the key file's name;
/// a hard link and a symbolic link through a reserved name. Each starts with an ordinary
/// member, so a refusal must leave even that one out.
pub fn reserved_name_archives() -> Vec<(String, Vec<u8>)> {
    use crate::reserved::Kind;
    let journals = |kind: Kind| match kind {
        Kind::Extract => &b"extract 0\n"[..],
        Kind::Pull => br#"{"phase":"move","preserve":[]}"#,
        Kind::Merge => b"merge\n",
        Kind::Restore => b"restore\n",
    };
    let mut cases = Vec::new();
    for kind in Kind::ALL {
        for (pid, who) in [(std::process::id(), "live"), (4_194_000, "dead")] {
            let forms = [
                (format!("{}{pid}-0-0123456789abcdef", kind.prefix()), "earlier form"),
                (format!("{}{pid}-77-{}", kind.prefix(), "0123456789abcdef".repeat(2)), "forged tag"),
            ];
            for (name, form) in forms {
                for journal in [true, false] {
                    for depth in ["", "sub/"] {
                        let mut archive = RawArchive::new();
                        archive.file("ok.txt", b"fine").dir(&format!("{depth}{name}/"), 0o700);
                        if journal {
                            archive.file(&format!("{depth}{name}/journal"), journals(kind));
                        }
                        archive.file(&format!("{depth}{name}/tree/planted.sh"), b"#!/bin/sh\necho planted\n");
                        let what = format!(
                            "{} {form}, {who} pid, {}journal, {}",
                            kind.prefix(),
                            if journal { "" } else { "no " },
                            if depth.is_empty() { "root" } else { "nested" }
                        );
                        cases.push((what, archive.finish()));
                    }
                }
            }
        }
    }
    let key = crate::reserved::KEY_FILE;
    cases.push(("the key file".into(), RawArchive::new().file("ok.txt", b"fine").file(key, &[7u8; 32]).finish()));
    let nested = format!(".local/state/paperclip-native/{key}");
    cases.push((
        "the key file, nested".into(),
        RawArchive::new().file("ok.txt", b"fine").file(&nested, &[7u8; 32]).finish(),
    ));
    let planted = ".paperclip-merge-1-0-0123456789abcdef";
    cases.push((
        "a hard link into a reserved name".into(),
        RawArchive::new().file("ok.txt", b"fine").hard_link("h", &format!("{planted}/journal")).finish(),
    ));
    cases.push((
        "a symbolic link through a reserved name".into(),
        RawArchive::new().file("ok.txt", b"fine").symlink("s", &format!("{planted}/tree")).finish(),
    ));
    cases
}

/// Symbolic links that lead out of the destination or get written through (see
/// [`escaping_names`]).
pub fn escaping_symlinks(outside: &str) -> Vec<(String, Vec<u8>)> {
    vec![
        ("link to /".into(), RawArchive::new().symlink("link", "/").file("link/etc/x", b"evil").finish()),
        ("absolute link".into(), RawArchive::new().symlink("link", outside).file("link/x", b"evil").finish()),
        ("link to parent".into(), RawArchive::new().symlink("up", "..").finish()),
        ("link two up from a".into(), RawArchive::new().symlink("a/up", "../..").finish()),
        ("link three up".into(), RawArchive::new().symlink("a/b/c", "../../../outside").finish()),
        (
            // a/b -> .. is inside (it is the root), but s -> a/b/.. would climb out of it.
            "dot-dot after a link".into(),
            RawArchive::new().dir("a/", 0o755).symlink("a/b", "..").symlink("s", "a/b/..").finish(),
        ),
        (
            "write through an archive link".into(),
            RawArchive::new().dir("sub/", 0o755).symlink("l", "sub").file("l/x", b"evil").finish(),
        ),
        ("empty target".into(), RawArchive::new().symlink("e", "").finish()),
    ]
}

/// Hard links out of the destination, to nothing or to a directory, and the entry types that
/// are never extracted (see [`escaping_names`]).
pub fn bad_links_and_special_files(outside: &str) -> Vec<(String, Vec<u8>)> {
    vec![
        ("hard link to /etc/passwd".into(), RawArchive::new().hard_link("h", "/etc/passwd").finish()),
        ("absolute hard link".into(), RawArchive::new().hard_link("h", &format!("{outside}/sentinel")).finish()),
        ("hard link up".into(), RawArchive::new().hard_link("h", "../outside/sentinel").finish()),
        ("missing target".into(), RawArchive::new().hard_link("h", "missing").finish()),
        ("hard link to a directory".into(), RawArchive::new().dir("d/", 0o755).hard_link("h", "d").finish()),
        (
            "hard link through a link".into(),
            RawArchive::new().symlink("l", "d").dir("d/", 0o755).file("d/f", b"").hard_link("h", "l/f").finish(),
        ),
        ("hard link to the root".into(), RawArchive::new().hard_link("h", "").finish()),
        ("character device".into(), RawArchive::new().entry(b'3', b"tty", b"", 0o666, b"").finish()),
        ("block device".into(), RawArchive::new().entry(b'4', b"disk", b"", 0o666, b"").finish()),
        ("FIFO".into(), RawArchive::new().entry(b'6', b"fifo", b"", 0o666, b"").finish()),
        ("GNU sparse".into(), RawArchive::new().entry(b'S', b"sparse", b"", 0o644, b"").finish()),
        ("unknown type".into(), RawArchive::new().entry(b'Z', b"odd", b"", 0o644, b"").finish()),
        ("NUL in a pax path".into(), RawArchive::new().pax(&[("path", b"nul\0byte")]).file("x", b"").finish()),
    ]
}

/// Byte lengths at and around every place a tar length field changes shape: the 100-byte name
/// and link fields, the 155-byte ustar prefix, the 255/256 boundaries, and whole multiples of
/// the 512-byte block that a GNU long-name record's value plus its NUL may fill exactly.
pub const BOUNDARY_LENGTHS: &[usize] = &[
    99, 100, 101, 154, 155, 156, 255, 256, 257, 510, 511, 512, 513, 514, 1022, 1023, 1024, 1025, 1026, 1534, 1535,
    1536, 1537, 1538,
];

/// Component lengths at and around the name fields, up to the 255-byte `NAME_MAX`.
pub const COMPONENT_LENGTHS: &[usize] = &[99, 100, 101, 154, 155, 156, 254, 255];

/// A string of exactly `len` bytes: `fill` repeated, topped up with `x` when the fill
/// character's width does not divide `len`, the top-up first when `pad_first`.
pub fn filled(len: usize, fill: char, pad_first: bool) -> String {
    let width = fill.len_utf8();
    let run: String = std::iter::repeat_n(fill, len / width).collect();
    let pad = "x".repeat(len % width);
    if pad_first {
        pad + &run
    } else {
        run + &pad
    }
}

/// A relative path of exactly `len` bytes starting with the component `head`, continued by
/// components of at most 200 bytes of `fill` (so no component passes `NAME_MAX`). `len` must
/// leave room for `head` and one more component.
pub fn path_of_len(head: &str, len: usize, fill: char, pad_first: bool) -> String {
    assert!(len >= head.len() + 2, "{len} bytes cannot start with {head:?}");
    let need = len - head.len(); // each further component costs its bytes plus a `/`
    let count = need.div_ceil(201);
    let mut sizes = vec![200; count];
    let last = need - (count - 1) * 201 - 1;
    sizes[count - 1] = last;
    if last == 0 {
        sizes[count - 2] -= 1;
        sizes[count - 1] = 1;
    }
    let mut path = head.to_owned();
    for size in sizes {
        path.push('/');
        path.push_str(&filled(size, fill, pad_first));
    }
    assert_eq!(path.len(), len);
    path
}

/// A valid tar stream planting `evil/planted-<tag>.sh` (mode 755) and the symlink
/// `evil/link-<tag> -> ../after.txt`: the content of a file that must stay data.
pub fn planted_tar(tag: &str) -> Vec<u8> {
    let mut archive = RawArchive::new();
    let script = format!("evil/planted-{tag}.sh");
    archive.entry(b'0', script.as_bytes(), b"", 0o755, b"#!/bin/sh\necho planted\n");
    archive.symlink(&format!("evil/link-{tag}"), "../after.txt");
    archive.finish()
}

/// Builds, under `root`, files, directories and symlinks whose member names and link targets
/// have every [`BOUNDARY_LENGTHS`] byte length (directories' with and without their trailing
/// `/`), and whose file names have every [`COMPONENT_LENGTHS`] length, in ASCII and in 2-, 3-
/// and 4-byte UTF-8 (shifted so that a character straddles byte 100 and byte 155). Every
/// file's content is a [`planted_tar`]; the one at `after.txt` is what the planted link names.
pub fn build_boundary_tree(root: &Path) {
    let fills: &[(char, bool)] = &[('a', false), ('é', false), ('€', false), ('€', true), ('😀', true)];
    let mut count = 0;
    let mut file = |rel: &str| {
        count += 1;
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, planted_tar(&count.to_string())).unwrap();
    };
    file("after.txt");
    for (f, &(fill, pad_first)) in fills.iter().enumerate() {
        for &len in BOUNDARY_LENGTHS {
            // A file whose member name is `len` bytes.
            file(&path_of_len(&format!("f{f}"), len, fill, pad_first));
            // Directories whose member names (`name/`) are `len` and `len + 1` bytes.
            let dir = path_of_len(&format!("d{f}"), len - 1, fill, pad_first);
            fs::create_dir_all(root.join(&dir)).unwrap();
            let dir = path_of_len(&format!("e{f}"), len, fill, pad_first);
            fs::create_dir_all(root.join(&dir)).unwrap();
            // A symlink whose target is `len` bytes (dangling, relative, no `..`).
            let target = path_of_len("t", len, fill, pad_first);
            fs::create_dir_all(root.join(format!("l{f}"))).unwrap();
            std::os::unix::fs::symlink(&target, root.join(format!("l{f}/{len}"))).unwrap();
            // A symlink whose own name is `len` bytes, to a target of the same length.
            let name = path_of_len(&format!("s{f}"), len, fill, pad_first);
            fs::create_dir_all(root.join(&name).parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(&target, root.join(&name)).unwrap();
        }
        for &len in COMPONENT_LENGTHS {
            file(&filled(len, fill, pad_first));
            file(&format!("c{f}/{}", filled(len, fill, pad_first)));
        }
    }
}
