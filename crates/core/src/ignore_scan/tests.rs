//! Differential tests against the git CLI run the way upstream runs it, plus hardening,
//! bound and edge-case tests.

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
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
            "-c",
            "protocol.file.allow=always",
        ])
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
    let top = git(local, home)
        .args(["-c", "core.fsmonitor=false", "--no-optional-locks", "rev-parse", "--show-toplevel"])
        .output()
        .unwrap();
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

/// Assert our scan equals the oracle for `local`, and the toplevel probe agrees with it.
fn assert_same(local: &Path, home: &Path, context: &str) {
    let ours = scan(local, home);
    match (&ours, probe_toplevel(local)) {
        (Ok(Some(scan)), Ok(Some(top))) => assert_eq!(top, scan.toplevel, "{context}: probed toplevel"),
        (Ok(None), Ok(None)) | (Err(_), _) => {}
        (_, probed) => panic!("{context}: the probe says {probed:?}, the scan {ours:?}"),
    }
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
    "a",
    "b",
    "build",
    "node_modules",
    "dist",
    "src",
    "keep.log",
    "x.log",
    "y.tmp",
    "name with space",
    "ünï",
    "#hash",
    "!bang",
    "trail ",
    " lead",
    "日本",
    "z.txt",
    "Foo",
    "deep",
    "sub",
    "important",
    "d1",
    "out",
    "c",
];

const PATTERNS: &[&str] = &[
    "*.log",
    "!keep.log",
    "build/",
    "/dist",
    "**/deep",
    "a/**/b",
    "\\#hash",
    "trail\\ ",
    "trail ",
    "node_modules",
    "*.tmp",
    "!*.tmp",
    "src/*.txt",
    "?oo",
    "[a-c]",
    "**/x.log",
    "d*/",
    "!important/",
    "name with space",
    "\\!bang",
    "*",
    "!*/",
    "sub/",
    "ünï",
    "/a/b",
    "#comment",
    "",
    "**",
    "a/**",
    "**/b/**",
    "!a",
    "out",
    "/out/",
    "important",
    "!d1",
    "*.txt",
    " lead",
    "日本/",
    "!/build",
    "**/*.log",
    "c/",
    "!c",
    "deep/",
    "[!a-m]*",
    "x.l?g",
    "!x.log\r",
    "b\\",
];

fn random_patterns(rng: &mut Rng) -> String {
    let n = 1 + rng.below(6);
    let mut s = String::new();
    for _ in 0..n {
        let pattern: &&str = rng.pick(PATTERNS);
        s.push_str(pattern);
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
    if rng.chance(10) {
        run_git(&repo, &home, &["config", "core.ignoreCase", "true"]);
    }
    let tracked: Vec<Vec<u8>> = files.iter().filter(|_| rng.chance(30)).map(|f| f.as_bytes().to_vec()).collect();
    git_add(&repo, &home, &tracked);
    if rng.chance(25) {
        // Format 4: names prefix-compressed against the previous entry's.
        run_git(&repo, &home, &["update-index", "--index-version", "4"]);
    }
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

fn fresh_repo(tmp: &TempDir) -> (PathBuf, PathBuf) {
    let home = tmp.path().join("home");
    let repo = tmp.path().join("repo");
    fs::create_dir_all(&home).unwrap();
    fs::create_dir_all(&repo).unwrap();
    run_git(&repo, &home, &["init", "-q"]);
    (repo, home)
}

fn write(path: &Path, contents: &str) {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).unwrap();
    }
    fs::write(path, contents).unwrap();
}

#[test]
fn submodules_and_nested_repositories() {
    let tmp = TempDir::new("submodule");
    let (repo, home) = fresh_repo(&tmp);
    let upstream = tmp.path().join("upstream");
    fs::create_dir_all(&upstream).unwrap();
    run_git(&upstream, &home, &["init", "-q"]);
    write(&upstream.join("a.txt"), "a");
    write(&upstream.join(".gitignore"), "*.log\n");
    run_git(&upstream, &home, &["add", "."]);
    run_git(&upstream, &home, &["commit", "-qm", "sub"]);

    write(&repo.join(".gitignore"), "*.log\nignrepo/\n");
    write(&repo.join("top.txt"), "t");
    run_git(&repo, &home, &["add", "."]);
    run_git(&repo, &home, &["commit", "-qm", "top"]);
    run_git(&repo, &home, &["submodule", "add", "-q", upstream.to_str().unwrap(), "mod"]);
    write(&repo.join("mod/inner.log"), "i");
    write(&repo.join("mod/deep/x.log"), "x");
    write(&repo.join("top.log"), "t");
    for nested in ["nested", "ignrepo"] {
        let dir = repo.join(nested);
        fs::create_dir_all(&dir).unwrap();
        run_git(&dir, &home, &["init", "-q"]);
        write(&dir.join("n.log"), "n");
    }
    assert_same(&repo, &home, "superproject");
    assert_same(&repo.join("mod"), &home, "inside the submodule");
    assert_same(&repo.join("mod/deep"), &home, "below the submodule top");
    assert_same(&repo.join("nested"), &home, "inside a nested repository");
    let top = scan(&repo, &home).unwrap().unwrap();
    assert_eq!(top.ignored_paths, ["ignrepo", "top.log"]);
    let sub = scan(&repo.join("mod"), &home).unwrap().unwrap();
    assert_eq!(sub.toplevel, repo.join("mod").to_str().unwrap());
    assert_eq!(sub.ignored_paths, ["deep", "deep/x.log", "inner.log"]);
}

#[test]
fn linked_worktrees() {
    let tmp = TempDir::new("worktree");
    let (repo, home) = fresh_repo(&tmp);
    write(&repo.join(".gitignore"), "*.log\nbuild/\n");
    write(&repo.join("src/main.txt"), "m");
    run_git(&repo, &home, &["add", "."]);
    run_git(&repo, &home, &["commit", "-qm", "init"]);
    let wt = tmp.path().join("wt");
    run_git(&repo, &home, &["worktree", "add", "-q", wt.to_str().unwrap(), "-b", "side"]);
    write(&repo.join(".git/info/exclude"), "secret\n");
    write(&wt.join("secret"), "s");
    write(&wt.join("build/out.bin"), "b");
    write(&wt.join("src/debug.log"), "d");
    assert!(wt.join(".git").is_file());
    assert_same(&wt, &home, "linked worktree");
    assert_same(&wt.join("src"), &home, "linked worktree subdirectory");
    let scan = scan(&wt, &home).unwrap().unwrap();
    assert_eq!(scan.toplevel, wt.to_str().unwrap());
    assert_eq!(scan.ignored_paths, ["build", "secret", "src/debug.log"]);
}

/// Every path under `root` (including `.git`) with its size, mtime and inode.
fn snapshot(root: &Path) -> Vec<(PathBuf, u64, i64, i64, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.path().symlink_metadata().unwrap();
            out.push((entry.path(), meta.len(), meta.mtime(), meta.mtime_nsec(), meta.ino()));
            if meta.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn scans_are_read_only_and_run_nothing() {
    let tmp = TempDir::new("hostile");
    let (repo, home) = fresh_repo(&tmp);
    write(&repo.join(".gitignore"), "*.log\n");
    write(&repo.join("a.txt"), "a");
    write(&repo.join("b/c.txt"), "c");
    write(&repo.join("b/d.log"), "d");
    run_git(&repo, &home, &["add", "."]);
    run_git(&repo, &home, &["commit", "-qm", "init"]);
    // Make the tracked files' index stat data stale, so any refresh would rewrite the index.
    write(&repo.join("a.txt"), "changed");
    let marker = tmp.path().join("marker");
    let script = tmp.path().join("evil.sh");
    write(&script, &format!("#!/bin/sh\ntouch '{}'\ncat\n", marker.display()));
    fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let hooks = tmp.path().join("hooks");
    for hook in ["post-checkout", "post-index-change", "pre-commit", "fsmonitor-watchman", "reference-transaction"] {
        write(&hooks.join(hook), &format!("#!/bin/sh\ntouch '{}'\n", marker.display()));
        fs::set_permissions(hooks.join(hook), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    let s = script.to_str().unwrap();
    for (key, value) in [
        ("core.fsmonitor", s),
        ("core.hooksPath", hooks.to_str().unwrap()),
        ("filter.evil.clean", s),
        ("filter.evil.smudge", s),
        ("filter.evil.process", s),
        ("core.untrackedCache", "true"),
        ("core.sshCommand", s),
        ("diff.external", s),
    ] {
        run_git(&repo, &home, &["config", key, value]);
    }
    write(&repo.join(".gitattributes"), "* filter=evil\n");
    let before = snapshot(&repo);
    let index_before = fs::metadata(repo.join(".git/index")).unwrap();
    for local in [repo.clone(), repo.join("b")] {
        let result = scan(&local, &home).unwrap().unwrap();
        assert!(result.ignored_paths.contains(&"b/d.log".to_string()));
    }
    assert_eq!(snapshot(&repo), before, "the scan changed the repository");
    let index_after = fs::metadata(repo.join(".git/index")).unwrap();
    assert_eq!((index_before.mtime(), index_before.mtime_nsec()), (index_after.mtime(), index_after.mtime_nsec()));
    assert!(!repo.join(".git/index.lock").exists());
    assert!(!marker.exists(), "a configured program ran");
}

fn many_files(dir: &Path, count: usize, name_len: usize) {
    fs::create_dir_all(dir).unwrap();
    for i in 0..count {
        let stem = format!("{i:07}");
        let name = format!("{stem}{}.log", "x".repeat(name_len.saturating_sub(stem.len() + 4)));
        fs::write(dir.join(name), b"").unwrap();
    }
}

fn scan_with(local: &Path, home: &Path, limits: Limits) -> Result<Option<IgnoreScan>, ScanError> {
    scan_ignored_paths_with_env(local, limits, &user_env(home), &AtomicBool::new(false))
}

#[test]
fn entry_count_bound_at_10000_and_10001() {
    let tmp = TempDir::new("count");
    let (repo, home) = fresh_repo(&tmp);
    write(&repo.join(".gitignore"), "*.log\n");
    many_files(&repo, 10_000, 12);
    assert_same(&repo, &home, "10000 entries");
    assert_eq!(scan(&repo, &home).unwrap().unwrap().ignored_paths.len(), 10_000);
    fs::write(repo.join("one-more.log"), b"").unwrap();
    assert_eq!(
        scan(&repo, &home),
        Err(ScanError::LimitExceeded {
            message: "referenced project ignore scan found more than 10000 ignored entries".into()
        })
    );
}

#[test]
fn byte_bound_at_upstream_limit() {
    let tmp = TempDir::new("bytes");
    let (repo, home) = fresh_repo(&tmp);
    write(&repo.join(".gitignore"), "*.log\n");
    // An untracked directory whose contents are all ignored: git lists it and each file.
    let dir = repo.join("d".repeat(200));
    many_files(&dir, 8_100, 60);
    assert_eq!(
        scan(&repo, &home),
        Err(ScanError::LimitExceeded {
            message: "referenced project ignore scan exceeded 2097152 UTF-8 bytes of ignored paths".into()
        })
    );
    // Just under: remove files until the total (200 + n * 261 bytes) fits.
    let fits = (MAX_TOTAL_BYTES - 200) / 261;
    let mut names: Vec<_> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    names.sort();
    for path in &names[fits..] {
        fs::remove_file(path).unwrap();
    }
    let ok = scan(&repo, &home).unwrap().unwrap();
    assert_eq!(ok.ignored_paths.len(), fits + 1);
    assert!(ok.ignored_paths.iter().map(String::len).sum::<usize>() <= MAX_TOTAL_BYTES);
}

#[test]
fn bounds_apply_in_upstream_order() {
    let tmp = TempDir::new("order");
    let (repo, home) = fresh_repo(&tmp);
    write(&repo.join(".gitignore"), "*.log\n");
    many_files(&repo, 20, 12);
    let limits =
        |entries, bytes, output| Limits { max_entries: entries, max_total_bytes: bytes, max_output_bytes: output };
    // Both bounds breached: the byte bound fires first when it is reached before entry 11.
    let err = scan_with(&repo, &home, limits(10, 50, 1 << 20)).unwrap_err();
    assert_eq!(
        err,
        ScanError::LimitExceeded {
            message: "referenced project ignore scan exceeded 50 UTF-8 bytes of ignored paths".into()
        }
    );
    // Otherwise the count bound fires at entry 11.
    let err = scan_with(&repo, &home, limits(10, 1000, 1 << 20)).unwrap_err();
    assert_eq!(
        err,
        ScanError::LimitExceeded {
            message: "referenced project ignore scan found more than 10 ignored entries".into()
        }
    );
    // Output over the allowance is a plain failure and wins (upstream never parses it).
    assert!(matches!(scan_with(&repo, &home, limits(10, 50, 100)), Err(ScanError::Failed(_))));
    // Exactly at every bound is fine.
    let ok = scan_with(&repo, &home, limits(20, 20 * 12, 20 * 13)).unwrap().unwrap();
    assert_eq!(ok.ignored_paths.len(), 20);
}

#[test]
fn failures_and_non_repositories() {
    let tmp = TempDir::new("fail");
    let plain = tmp.path().join("plain");
    fs::create_dir_all(&plain).unwrap();
    let home = tmp.path().join("home");
    fs::create_dir_all(&home).unwrap();
    assert_eq!(scan(&plain, &home), Ok(None));
    assert!(matches!(scan(&tmp.path().join("missing"), &home), Err(ScanError::Failed(_))));

    let (repo, home) = fresh_repo(&tmp);
    write(&repo.join(".gitignore"), "build/\n");
    write(&repo.join("build/deep/x"), "x");
    write(&repo.join("t.txt"), "t");
    run_git(&repo, &home, &["add", "."]);
    // Starting inside an ignored directory: git itself fails.
    assert_same(&repo.join("build/deep"), &home, "inside an ignored directory");
    assert!(matches!(scan(&repo.join("build/deep"), &home), Err(ScanError::Failed(_))));
    // Starting in the ignored directory itself: git lists it (hazard H13).
    assert_same(&repo.join("build"), &home, "the ignored directory itself");
    assert_eq!(scan(&repo.join("build"), &home).unwrap().unwrap().ignored_paths, ["build"]);
    // Inside .git: git refuses.
    assert!(matches!(scan(&repo.join(".git/refs"), &home), Err(ScanError::Failed(_))));
    // A corrupt index.
    fs::write(repo.join(".git/index"), b"DIRC\0\0\0\x02garbage").unwrap();
    assert_same(&repo, &home, "corrupt index");
    let err = scan(&repo, &home).unwrap_err();
    assert!(
        matches!(err, ScanError::Failed(ref e) if e.code == crate::error::codes::GIT_IGNORE_SCAN_FAILED),
        "{err:?}"
    );
    // A gitfile pointing nowhere is "not a git repository" for git.
    let broken = tmp.path().join("broken");
    write(&broken.join(".git"), "gitdir: /nonexistent/path\n");
    assert_eq!(scan(&broken, &home), Ok(None));
    assert!(oracle(&broken, &home).is_none());
}

#[test]
fn cancellation_aborts() {
    let tmp = TempDir::new("cancel");
    let (repo, home) = fresh_repo(&tmp);
    write(&repo.join(".gitignore"), "*.log\n");
    many_files(&repo, 600, 10);
    let cancel = AtomicBool::new(true);
    assert_eq!(
        scan_ignored_paths_with_env(&repo, Limits::UPSTREAM, &user_env(&home), &cancel),
        Err(ScanError::Aborted)
    );
}

#[test]
fn toplevel_is_trimmed_like_upstream() {
    let tmp = TempDir::new("trim");
    let home = tmp.path().join("home");
    fs::create_dir_all(&home).unwrap();
    let repo = tmp.path().join("padded ");
    fs::create_dir_all(&repo).unwrap();
    run_git(&repo, &home, &["init", "-q"]);
    let scan = scan(&repo, &home).unwrap().unwrap();
    assert_eq!(scan.toplevel, tmp.path().join("padded").to_str().unwrap());
}

#[test]
fn re_relativize_follows_upstream_steps_4_and_5() {
    let list: Vec<String> =
        ["build", "packages/app", "packages/app/dist", "packages/app/.env", "packages/apple/x", "z"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    assert_eq!(re_relativize("/r", "/r", &list).unwrap(), list);
    assert_eq!(re_relativize("/r/", "/r/./", &list).unwrap(), list);
    assert_eq!(re_relativize("/r", "/r/packages/app", &list).unwrap(), ["dist", ".env"]);
    assert_eq!(re_relativize("/r", "/r//packages/x/../app/", &list).unwrap(), ["dist", ".env"]);
    assert_eq!(re_relativize("/", "/r", &["r/a".to_string(), "r".to_string()]).unwrap(), ["a"]);
    assert_eq!(re_relativize("/r", "/other", &list), Err(NotDescendant));
    assert_eq!(re_relativize("/r/a", "/r", &list), Err(NotDescendant));
    assert_eq!(re_relativize("/r", "/rx", &list), Err(NotDescendant));
    assert_eq!(re_relativize("/r", "/r/..foo", &["..foo/a".to_string()]).unwrap(), ["a"]);
    assert_eq!(physical_path("/definitely/not/../here"), "/definitely/here");
}

/// `cargo test -p paperclip-sync-core --release -- --ignored --nocapture scan_performance`
#[test]
#[ignore]
fn scan_performance_against_git() {
    let tmp = TempDir::new("perf");
    let (repo, home) = fresh_repo(&tmp);
    write(&repo.join(".gitignore"), "node_modules/\n*.log\n");
    let mut tracked = Vec::new();
    for d in 0..50 {
        for f in 0..100 {
            let rel = format!("src/m{d:02}/f{f:03}.ts");
            write(&repo.join(&rel), "x");
            tracked.push(rel.into_bytes());
        }
        write(&repo.join(format!("src/m{d:02}/debug.log")), "l");
    }
    git_add(&repo, &home, &tracked);
    for p in 0..1000 {
        many_files(&repo.join(format!("node_modules/pkg{p:04}/lib")), 100, 12);
    }
    let time = |f: &mut dyn FnMut()| {
        let mut best = std::time::Duration::MAX;
        for _ in 0..7 {
            let t = std::time::Instant::now();
            f();
            best = best.min(t.elapsed());
        }
        best
    };
    let mut ours_len = 0;
    let ours = time(&mut || ours_len = scan(&repo, &home).unwrap().unwrap().ignored_paths.len());
    let mut git_len = 0;
    let git_time = time(&mut || git_len = oracle(&repo, &home).unwrap().1.len());
    assert_eq!(ours_len, git_len);
    eprintln!(
        "5000 tracked + 100000 ignored in node_modules ({ours_len} entries): ours {ours:?}, git CLI (rev-parse + ls-files) {git_time:?}"
    );
}

#[test]
fn a_work_tree_deeper_than_path_max_fails_the_scan_instead_of_listing_less() {
    use crate::fsat::Dir;
    use std::ffi::OsStr;
    let tmp = TempDir::new("deep");
    let (repo, home) = fresh_repo(&tmp);
    write(&repo.join(".gitignore"), "*.log\n");
    write(&repo.join("top.log"), "x");
    // 3 000 levels made through handles (a path that long cannot be passed to mkdir), an
    // ignored file at the bottom.
    let mut dir = Dir::open(&repo).unwrap();
    for _ in 0..3000 {
        dir.mkdir(OsStr::new("d"), 0o755).unwrap();
        dir = dir.open_dir_nofollow(OsStr::new("d")).unwrap();
    }
    dir.create_new_file(OsStr::new("deep.log"), 0o644).unwrap();
    match scan(&repo, &home) {
        Err(ScanError::Failed(err)) => {
            assert_eq!(err.code, crate::error::codes::GIT_IGNORE_SCAN_FAILED);
            assert!(!err.message.contains(repo.to_str().unwrap()), "{}", err.message);
        }
        other => panic!("expected a failed scan, got {other:?}"),
    }
    Dir::open(&repo).unwrap().remove_tree(OsStr::new("d")).unwrap();
}

/// The patterns `ignore::gitignore::Gitignore` (ignore 0.4.35) reads differently from git,
/// the reason this module keeps git's own `wildmatch` (docs/dependencies.md): an escaped `]`
/// in a bracket, an escaped `-` in a bracket (a literal, not a range), an unterminated `[`,
/// an empty range and trailing backslashes. Each, alone and together, against the git CLI.
#[test]
fn patterns_the_ignore_crate_reads_differently_match_git() {
    let patterns = ["[\\]]x", "[a\\-z]", "a[", "[z-a]", "\\", "x\\", "[\\]]x\n[a\\-z]\na[\n[z-a]\n\\\nx\\"];
    let names = ["]x", "-", "m", "a", "z", "a[", "x", "x\\", "\\", "ax", "keep"];
    for (i, pattern) in patterns.iter().enumerate() {
        let tmp = TempDir::new(&format!("crate-diff-{i}"));
        let (repo, home) = fresh_repo(&tmp);
        for name in names {
            write(&repo.join(name), "x");
            write(&repo.join("sub").join(name), "x");
        }
        write(&repo.join(".gitignore"), &format!("{pattern}\n"));
        assert_same(&repo, &home, &format!("pattern {pattern:?}"));
    }
}

#[test]
fn a_changed_index_is_read_again() {
    // The parsed index is reused only while the index file is unchanged: tracking an ignored
    // file, or untracking it again, shows in the next scan.
    let tmp = TempDir::new("index-cache");
    let (repo, home) = fresh_repo(&tmp);
    write(&repo.join(".gitignore"), "*.log\n");
    write(&repo.join("a.log"), "x");
    write(&repo.join("b.log"), "x");
    let listed = |repo: &Path| scan(repo, &home).unwrap().unwrap().ignored_paths;
    // Past the racy window after each index change, so that each index read is kept.
    let settle = || std::thread::sleep(repo::INDEX_RACY_WINDOW + std::time::Duration::from_millis(100));
    run_git(&repo, &home, &["add", ".gitignore"]);
    settle();
    assert_eq!(listed(&repo), ["a.log", "b.log"]);
    assert_eq!(listed(&repo), ["a.log", "b.log"]);
    run_git(&repo, &home, &["add", "-f", "a.log"]);
    settle();
    assert_eq!(listed(&repo), ["b.log"]);
    assert_eq!(listed(&repo), ["b.log"]);
    assert_same(&repo, &home, "after git add -f");
    run_git(&repo, &home, &["rm", "-q", "--cached", "a.log"]);
    settle();
    assert_eq!(listed(&repo), ["a.log", "b.log"]);
    assert_same(&repo, &home, "after git rm --cached");
}

#[test]
fn index_formats_2_3_4_and_skip_worktree_ignore_files_match_git() {
    let tmp = TempDir::new("index-formats");
    let (repo, home) = fresh_repo(&tmp);
    write(&repo.join(".gitignore"), "*.log\n");
    write(&repo.join("sub/.gitignore"), "*.tmp\n!keep.tmp\n");
    for rel in ["a.log", "sub/x.tmp", "sub/keep.tmp", "sub/y.txt", "sub/deeper/z.tmp", "sub/deeper/w.txt"] {
        write(&repo.join(rel), "x");
    }
    let tracked: Vec<Vec<u8>> =
        [".gitignore", "sub/.gitignore", "sub/y.txt", "sub/deeper/w.txt"].map(|p| p.into()).to_vec();
    git_add(&repo, &home, &tracked);
    let listed = |repo: &Path| scan(repo, &home).unwrap().unwrap().ignored_paths;
    let expected = ["a.log", "sub/deeper/z.tmp", "sub/x.tmp"];
    for version in ["2", "3", "4"] {
        run_git(&repo, &home, &["update-index", "--index-version", version]);
        assert_same(&repo, &home, &format!("index format {version}"));
        assert_eq!(listed(&repo), expected, "index format {version}");
    }
    // A skip-worktree `.gitignore` missing from the work tree (a sparse checkout): git reads
    // its patterns from the blob the index names. Formats 3 (extended flags) and 4.
    run_git(&repo, &home, &["update-index", "--skip-worktree", "sub/.gitignore"]);
    fs::remove_file(repo.join("sub/.gitignore")).unwrap();
    for version in ["3", "4"] {
        run_git(&repo, &home, &["update-index", "--index-version", version]);
        assert_same(&repo, &home, &format!("skip-worktree .gitignore, index format {version}"));
        assert_eq!(listed(&repo), expected, "skip-worktree .gitignore, index format {version}");
    }
    // A split index (its `link` extension): not read, the scan fails (git reads it).
    run_git(&repo, &home, &["update-index", "--split-index"]);
    assert!(matches!(scan(&repo, &home), Err(ScanError::Failed(_))));
}
