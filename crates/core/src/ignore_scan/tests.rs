//! Differential tests against the git CLI run the way upstream runs it, plus hardening,
//! bound and edge-case tests.

use std::ffi::OsStr;
use std::fs;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::*;

/// A temporary directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("pcl-ignore-{}-{tag}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        TempDir(fs::canonicalize(&dir).unwrap())
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("IGNORE_SCAN_KEEP").is_some() {
            eprintln!("kept {}", self.0.display());
            return;
        }
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A small deterministic PRNG (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// `git` with upstream's hardened environment; `home` stands in for the user's HOME.
fn git(dir: &Path, home: &Path) -> Command {
    let mut cmd = Command::new("git");
    for (key, _) in std::env::vars_os() {
        if key.as_bytes().starts_with(b"GIT_") {
            cmd.env_remove(key);
        }
    }
    cmd.env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .arg("-C")
        .arg(dir)
        .stdin(Stdio::null());
    cmd
}

fn run_git(dir: &Path, home: &Path, args: &[&str]) {
    let out = git(dir, home)
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
}

fn git_add(dir: &Path, home: &Path, paths: &[Vec<u8>]) {
    if paths.is_empty() {
        return;
    }
    let mut child = git(dir, home)
        .args(["add", "-f", "--pathspec-from-file=-", "--pathspec-file-nul"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        let stdin = child.stdin.as_mut().unwrap();
        for p in paths {
            stdin.write_all(p).unwrap();
            stdin.write_all(b"\0").unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "git add failed: {}", String::from_utf8_lossy(&out.stderr));
}

/// The oracle: upstream's command, parsed like upstream (NUL split, trailing `/` stripped,
/// empty records skipped), in git's order. `None` when git fails.
fn oracle(local: &Path, home: &Path) -> Option<(String, Vec<String>)> {
    let top = git(local, home).args(["-c", "core.fsmonitor=false", "--no-optional-locks", "rev-parse", "--show-toplevel"]).output().unwrap();
    if !top.status.success() {
        return None;
    }
    let out = git(local, home)
        .args(["-c", "core.fsmonitor=false", "--no-optional-locks"])
        .args(["ls-files", "--others", "--ignored", "--exclude-standard", "--directory", "--full-name", "-z"])
        .output()
        .unwrap();
    if !out.status.success() {
        return None;
    }
    let paths = out
        .stdout
        .split(|&c| c == 0)
        .map(|r| {
            let end = r.iter().rposition(|&c| c != b'/').map_or(0, |i| i + 1);
            String::from_utf8(r[..end].to_vec()).unwrap()
        })
        .filter(|e| !e.is_empty())
        .collect();
    Some((String::from_utf8(top.stdout).unwrap().trim().to_string(), paths))
}

fn user_env(home: &Path) -> UserEnv {
    UserEnv { home: Some(home.as_os_str().to_owned()), xdg_config_home: None }
}

fn scan(local: &Path, home: &Path) -> Result<Option<IgnoreScan>, ScanError> {
    scan_ignored_paths_with_env(local, Limits::UPSTREAM, &user_env(home), &AtomicBool::new(false))
}

/// Assert our scan equals the oracle for `local`.
fn assert_same(local: &Path, home: &Path, context: &str) {
    let ours = scan(local, home);
    match oracle(local, home) {
        Some((top, paths)) => {
            let ours = ours.unwrap_or_else(|e| panic!("{context}: git succeeded, we failed: {e}"));
            let ours = ours.unwrap_or_else(|| panic!("{context}: git succeeded, we said not a repository"));
            assert_eq!(ours.toplevel, top, "{context}: toplevel");
            assert_eq!(ours.ignored_paths, paths, "{context}: ignored paths (ours vs git)");
        }
        None => match ours {
            Err(ScanError::Failed(_)) => {}
            other => panic!("{context}: git failed, we returned {other:?}"),
        },
    }
}

const NAMES: &[&str] = &[
    "a", "b", "build", "node_modules", "dist", "src", "keep.log", "x.log", "y.tmp", "name with space", "ünï", "#hash",
    "!bang", "trail ", " lead", "日本", "z.txt", "Foo", "deep", "sub", "important", "d1", "out", "c",
];

const PATTERNS: &[&str] = &[
    "*.log", "!keep.log", "build/", "/dist", "**/deep", "a/**/b", "\\#hash", "trail\\ ", "trail ", "node_modules", "*.tmp",
    "!*.tmp", "src/*.txt", "?oo", "[a-c]", "**/x.log", "d*/", "!important/", "name with space", "\\!bang", "*", "!*/", "sub/",
    "ünï", "/a/b", "#comment", "", "**", "a/**", "**/b/**", "!a", "out", "/out/", "important", "!d1", "*.txt", " lead",
    "日本/", "!/build", "**/*.log", "c/", "!c", "deep/", "[!a-m]*", "x.l?g", "!x.log\r", "b\\",
];

fn random_patterns(rng: &mut Rng) -> String {
    let n = 1 + rng.below(6);
    let mut s = String::new();
    for _ in 0..n {
        s.push_str(*rng.pick(PATTERNS));
        s.push('\n');
    }
    s
}

/// Build a random tree under `dir` (relative path `rel`); returns the created files.
fn random_tree(rng: &mut Rng, root: &Path, rel: &str, depth: usize, files: &mut Vec<String>, dirs: &mut Vec<String>) {
    let n = rng.below(if depth == 0 { 8 } else { 5 }) + 1;
    for _ in 0..n {
        let name = *rng.pick(NAMES);
        let path = if rel.is_empty() { name.to_string() } else { format!("{rel}/{name}") };
        let abs = root.join(&path);
        if abs.symlink_metadata().is_ok() {
            continue;
        }
        match rng.below(10) {
            0..=4 => {
                fs::write(&abs, b"x").unwrap();
                files.push(path);
            }
            5..=7 if depth < 3 => {
                fs::create_dir(&abs).unwrap();
                dirs.push(path.clone());
                if rng.chance(85) {
                    random_tree(rng, root, &path, depth + 1, files, dirs);
                }
                if rng.chance(30) {
                    fs::write(abs.join(".gitignore"), random_patterns(rng)).unwrap();
                }
            }
            8 => {
                let target = if rng.chance(50) { "z.txt" } else { "sub" };
                symlink(target, &abs).unwrap();
                files.push(path);
            }
            _ => {
                fs::create_dir(&abs).unwrap(); // an empty directory
                dirs.push(path);
            }
        }
    }
}

fn differential_case(seed: u64) {
    let mut rng = Rng(seed);
    let tmp = TempDir::new("diff");
    let home = tmp.path().join("home");
    let repo = tmp.path().join("repo");
    fs::create_dir_all(&home).unwrap();
    fs::create_dir_all(&repo).unwrap();
    run_git(&repo, &home, &["init", "-q"]);
    let mut files = Vec::new();
    let mut dirs = Vec::new();
    random_tree(&mut rng, &repo, "", 0, &mut files, &mut dirs);
    fs::write(repo.join(".gitignore"), random_patterns(&mut rng)).unwrap();
    if rng.chance(50) {
        fs::write(repo.join(".git/info/exclude"), random_patterns(&mut rng)).unwrap();
    }
    match rng.below(3) {
        0 => {
            fs::write(repo.join(".git/my-excludes"), random_patterns(&mut rng)).unwrap();
            run_git(&repo, &home, &["config", "core.excludesFile", ".git/my-excludes"]);
        }
        1 => {
            fs::create_dir_all(home.join(".config/git")).unwrap();
            fs::write(home.join(".config/git/ignore"), random_patterns(&mut rng)).unwrap();
        }
        _ => {}
    }
    let tracked: Vec<Vec<u8>> = files.iter().filter(|_| rng.chance(30)).map(|f| f.as_bytes().to_vec()).collect();
    git_add(&repo, &home, &tracked);
    assert_same(&repo, &home, &format!("seed {seed} at the top"));
    for _ in 0..2 {
        if let Some(dir) = (!dirs.is_empty()).then(|| rng.pick(&dirs).clone()) {
            assert_same(&repo.join(&dir), &home, &format!("seed {seed} in {dir:?}"));
        }
    }
}

#[test]
fn differential_against_git_on_generated_repositories() {
    let base: u64 = std::env::var("IGNORE_SCAN_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5EED_0000);
    let count: u64 = std::env::var("IGNORE_SCAN_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(240);
    let started = std::time::Instant::now();
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as u64;
                if i >= count {
                    break;
                }
                let seed = base + i;
                let result = std::panic::catch_unwind(|| differential_case(seed));
                if let Err(e) = result {
                    eprintln!("differential case failed; rerun with IGNORE_SCAN_SEED={seed} IGNORE_SCAN_CASES=1");
                    std::panic::resume_unwind(e);
                }
            });
        }
    });
    eprintln!("{count} generated repositories matched git in {:?}", started.elapsed());
}
