//! Ignore resolution (upstream's `readReferencedSourceGitIgnoredPaths` and
//! `resolveReferencedSourceIgnore`; docs/ignore.md, the trust model): the
//! ignored paths of a referenced project's directory, computed in-process instead of by spawning
//! `git ls-files --others --ignored --exclude-standard --directory --full-name -z`.
//!
//! [`scan_ignored_paths`] produces exactly the records that command prints when run in
//! the directory under upstream's hardened environment (`GIT_CONFIG_NOSYSTEM=1`,
//! `GIT_CONFIG_GLOBAL=/dev/null`, `-c core.fsmonitor=false --no-optional-locks`), trailing
//! slashes stripped, in git's output order, and applies upstream's bounds in upstream's
//! order. [`re_relativize`] implements steps 4–5 of `resolveReferencedSourceIgnore`.
//!
//! Hardened by construction:
//! - libgit2 never reads system, global or XDG *configuration* ([`repo::harden_libgit2`]);
//!   the repository's own configuration is read only for `core.excludesFile` and
//!   `core.ignoreCase`. Like git under the hardened environment, the default excludes file
//!   `$XDG_CONFIG_HOME/git/ignore` (or `~/.config/git/ignore`) *is* read when the repository
//!   does not set `core.excludesFile`: git treats it as a default path, not as config.
//! - Nothing is executed (no hooks, filters, fsmonitor) and nothing is written: the index is
//!   only read (never refreshed), no lock file is taken, and `.gitignore` files are opened
//!   without following symlinks.
//!
//! Known differences from git, all failing closed (`Failed`) where git would succeed:
//! index formats this scan does not read (split index, sparse index), SHA-256 or reftable
//! repositories, `core.excludesFile = ~user/...`, and a `.gitignore`/excludes file that is
//! a FIFO (git would hang). `include.path` values starting with `~/` are not expanded
//! (libgit2 has no home directory once hardened).

mod index_file;
mod patterns;
mod repo;
mod walk;
mod wildmatch;

#[cfg(test)]
mod tests;

use std::ffi::CString;
use std::fmt;
use std::fs::{self, OpenOptions};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use crate::error::{codes, Error};

pub use repo::UserEnv;

use patterns::PatternList;
use repo::{Discovery, IndexFacts, Settings};
use walk::{read_pattern_file, Walker};

/// Upstream's `REFERENCED_SOURCE_IGNORE_MAX_ENTRY_COUNT`.
pub const MAX_ENTRY_COUNT: usize = 10_000;
/// Upstream's `REFERENCED_SOURCE_IGNORE_MAX_TOTAL_BYTES`.
pub const MAX_TOTAL_BYTES: usize = 2 * 1024 * 1024;
/// Upstream's `REFERENCED_SOURCE_IGNORE_MAX_RAW_BUFFER` (the `maxBuffer` of the git call).
pub const MAX_OUTPUT_BYTES: usize = 2 * MAX_TOTAL_BYTES;

/// The bounds of one scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// More accepted entries than this → [`ScanError::LimitExceeded`].
    pub max_entries: usize,
    /// More summed UTF-8 bytes of accepted entries than this → [`ScanError::LimitExceeded`].
    pub max_total_bytes: usize,
    /// More bytes of git output (records with their trailing `/` and NUL) than this →
    /// [`ScanError::Failed`], as upstream's `maxBuffer` overflow is a plain failure. It is
    /// checked while walking and wins over the two bounds above, because upstream parses
    /// only a complete output.
    pub max_output_bytes: usize,
}

impl Limits {
    /// Upstream's bounds.
    pub const UPSTREAM: Limits =
        Limits { max_entries: MAX_ENTRY_COUNT, max_total_bytes: MAX_TOTAL_BYTES, max_output_bytes: MAX_OUTPUT_BYTES };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::UPSTREAM
    }
}

/// Upstream's `ReferencedSourceGitIgnoreScan`, before its `localeCompare` sort.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IgnoreScan {
    /// `git rev-parse --show-toplevel` as upstream keeps it: the physical work-tree top,
    /// with JavaScript `trim()` applied.
    pub toplevel: String,
    /// Toplevel-relative ignored paths, trailing slashes stripped, never trimmed, in git's
    /// output order (byte order of git's records; the JS layer sorts with `localeCompare`).
    pub ignored_paths: Vec<String>,
}

/// Why a scan did not produce a result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScanError {
    /// A bound was breached (upstream's `ReferencedSourceIgnoreScanLimitExceededError`,
    /// reason `git-ignore-scan-limit-exceeded`), with upstream's exact message.
    LimitExceeded { message: String },
    /// The cancel flag was raised.
    Aborted,
    /// Anything else (reason `git-ignore-scan-failed`): unreadable or corrupt repository,
    /// a case where git itself fails, output over the allowance, a non-UTF-8 name, …
    Failed(Error),
}

impl ScanError {
    fn failed(message: impl Into<String>) -> Self {
        ScanError::Failed(Error::new(codes::GIT_IGNORE_SCAN_FAILED, message))
    }

    fn io(err: std::io::Error, syscall: &'static str, path: &Path) -> Self {
        ScanError::Failed(Error::io(err, syscall, path))
    }
}

impl fmt::Display for ScanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScanError::LimitExceeded { message } => f.write_str(message),
            ScanError::Aborted => f.write_str(&Error::aborted().message),
            ScanError::Failed(e) => f.write_str(&e.message),
        }
    }
}

impl std::error::Error for ScanError {}

impl From<ScanError> for Error {
    fn from(e: ScanError) -> Error {
        match e {
            ScanError::LimitExceeded { message } => Error::new(codes::GIT_IGNORE_SCAN_LIMIT_EXCEEDED, message),
            ScanError::Aborted => Error::aborted(),
            ScanError::Failed(e) => e,
        }
    }
}

/// Scan `local_dir` with this process's `HOME`/`XDG_CONFIG_HOME` (see [`UserEnv`]).
///
/// `Ok(None)`: not inside a git work tree (git's "not a git repository"; upstream's
/// `{ kind: "other" }`).
pub fn scan_ignored_paths(
    local_dir: &Path,
    limits: Limits,
    cancel: &AtomicBool,
) -> Result<Option<IgnoreScan>, ScanError> {
    scan_ignored_paths_with_env(local_dir, limits, &UserEnv::from_process(), cancel)
}

/// [`scan_ignored_paths`] with an explicit user environment.
pub fn scan_ignored_paths_with_env(
    local_dir: &Path,
    limits: Limits,
    env: &UserEnv,
    cancel: &AtomicBool,
) -> Result<Option<IgnoreScan>, ScanError> {
    // A deep tree recurses deeply (as in git); run on a stack that cannot overflow before
    // the path length limit stops the walk. (libgit2 handles are not `Sync`, so the whole
    // scan runs on that thread.)
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("ignore-scan".into())
            .stack_size(256 << 20)
            .spawn_scoped(scope, || scan_on_this_thread(local_dir, limits, env, cancel))
            .map_err(|e| ScanError::failed(format!("cannot start the scan thread: {e}")))?
            .join()
            .map_err(|_| ScanError::failed("the scan thread panicked"))?
    })
}

/// Where a scan starts: the physical start directory, its repository, the physical work-tree
/// top and upstream's form of it.
struct Located {
    start: std::path::PathBuf,
    repository: git2::Repository,
    top: std::path::PathBuf,
    toplevel: String,
}

/// `git -C <dir> rev-parse --show-toplevel` under upstream's hardened environment.
///
/// `Ok(None)`: not inside a git work tree (the case upstream maps to `null`). Reads only
/// the `.git` files and directories on the way up and the repository's configuration; the
/// cancel flag is not polled (there is nothing long to interrupt).
pub fn probe_toplevel(local_dir: &Path) -> Result<Option<String>, ScanError> {
    Ok(locate(local_dir)?.map(|located| located.toplevel))
}

fn locate(local_dir: &Path) -> Result<Option<Located>, ScanError> {
    // `git -C <dir>` works on the physical directory.
    let start = fs::canonicalize(local_dir).map_err(|e| ScanError::io(e, "chdir", local_dir))?;
    if !start.is_dir() {
        return Err(ScanError::failed(format!("cannot change to '{}': Not a directory", local_dir.display())));
    }
    let worktree = match repo::discover(&start)? {
        Discovery::NotARepository => return Ok(None),
        Discovery::WorkTree(dir) => dir,
    };
    let repository = repo::open(&worktree)?;
    let Some(workdir) = repository.workdir() else {
        return Err(ScanError::failed("this operation must be run in a work tree"));
    };
    let top = fs::canonicalize(workdir).map_err(|e| ScanError::io(e, "realpath", workdir))?;
    let toplevel = js_trim(utf8(top.as_os_str().as_bytes())?).to_string();
    if toplevel.is_empty() {
        return Err(ScanError::failed(format!(
            "git rev-parse --show-toplevel returned an empty path for {}",
            local_dir.display()
        )));
    }
    Ok(Some(Located { start, repository, top, toplevel }))
}

fn scan_on_this_thread(
    local_dir: &Path,
    limits: Limits,
    env: &UserEnv,
    cancel: &AtomicBool,
) -> Result<Option<IgnoreScan>, ScanError> {
    let Some(Located { start, repository, top, toplevel }) = locate(local_dir)? else {
        return Ok(None);
    };
    let prefix = match start.strip_prefix(&top) {
        Ok(rel) if rel.as_os_str().is_empty() => Vec::new(),
        Ok(rel) => {
            let mut p = rel.as_os_str().as_bytes().to_vec();
            p.push(b'/');
            p
        }
        Err(_) => return Err(ScanError::failed("the directory is outside the repository work tree")),
    };

    let settings = Settings::read(&repository, &top, env)?;
    let index =
        IndexFacts::read_cached(&repository, settings.ignore_case, prefix.strip_suffix(b"/").unwrap_or(&prefix))?;
    let mut file_lists = Vec::new();
    for path in [settings.excludes_file.clone(), Some(repository.commondir().join("info").join("exclude"))]
        .into_iter()
        .flatten()
    {
        if let Some(list) = load_exclude_file(&path)? {
            file_lists.push(list);
        }
    }

    let walker = Walker::new(
        &top,
        &repository,
        &index,
        settings.ignore_case,
        file_lists,
        prefix,
        limits.max_output_bytes,
        cancel,
    );
    let collected = walker.run()?;

    let ignored_paths = apply_bounds(collected.sorted(), limits)?;
    Ok(Some(IgnoreScan { toplevel, ignored_paths }))
}

/// Upstream's streaming parse of the listing (each record checked against the entry and
/// byte bounds as it arrives) over git's records in output order.
fn apply_bounds<'a>(records: impl Iterator<Item = &'a [u8]>, limits: Limits) -> Result<Vec<String>, ScanError> {
    let mut accepted: Vec<String> = Vec::new();
    let mut total_bytes = 0usize;
    for record in records {
        let end = record.iter().rposition(|&c| c != b'/').map_or(0, |i| i + 1);
        let entry = &record[..end];
        if entry.is_empty() {
            continue;
        }
        if accepted.len() + 1 > limits.max_entries {
            return Err(ScanError::LimitExceeded {
                message: format!(
                    "referenced project ignore scan found more than {} ignored entries",
                    limits.max_entries
                ),
            });
        }
        let entry = utf8(entry)?;
        total_bytes += entry.len();
        if total_bytes > limits.max_total_bytes {
            return Err(ScanError::LimitExceeded {
                message: format!(
                    "referenced project ignore scan exceeded {} UTF-8 bytes of ignored paths",
                    limits.max_total_bytes
                ),
            });
        }
        accepted.push(entry.to_string());
    }
    Ok(accepted)
}

fn utf8(bytes: &[u8]) -> Result<&str, ScanError> {
    std::str::from_utf8(bytes).map_err(|_| {
        ScanError::Failed(Error::new(
            codes::NON_UTF8_NAME,
            format!("path is not valid UTF-8: {}", String::from_utf8_lossy(bytes)),
        ))
    })
}

/// `core.excludesFile` or `info/exclude`, read as git's `setup_standard_excludes` does:
/// skipped when not readable, fatal when readable but unusable.
fn load_exclude_file(path: &Path) -> Result<Option<PatternList>, ScanError> {
    if path.as_os_str().is_empty() {
        return Ok(None);
    }
    let readable = CString::new(path.as_os_str().as_bytes())
        // SAFETY: a valid NUL-terminated string; `access` only reads it.
        .map(|c| unsafe { libc::access(c.as_ptr(), libc::R_OK) } == 0)
        .unwrap_or(false);
    if !readable {
        return Ok(None);
    }
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|_| ScanError::failed(format!("cannot use {} as an exclude file", path.display())))?;
    Ok(read_pattern_file(file, path, true)?.map(|c| PatternList::parse(b"", &c)))
}

/// JavaScript's `String.prototype.trim` (WhiteSpace and LineTerminator code points).
fn js_trim(s: &str) -> &str {
    fn js_space(c: char) -> bool {
        matches!(
            c,
            '\u{9}' | '\u{A}' | '\u{B}' | '\u{C}' | '\u{D}' | ' ' | '\u{A0}' | '\u{1680}' | '\u{2000}'
                ..='\u{200A}' | '\u{2028}' | '\u{2029}' | '\u{202F}' | '\u{205F}' | '\u{3000}' | '\u{FEFF}'
        )
    }
    s.trim_matches(js_space)
}

/// The local directory is not the toplevel or below it (reason `git-toplevel-not-descendant`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotDescendant;

impl fmt::Display for NotDescendant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("git-toplevel-not-descendant")
    }
}

impl std::error::Error for NotDescendant {}

/// Node's `path.resolve` for one POSIX path: absolute (against the current directory),
/// `.`/`..`/repeated slashes folded lexically, no trailing slash.
fn resolve_lexically(p: &str) -> String {
    let base;
    let joined: &str = if p.starts_with('/') {
        p
    } else {
        let cwd = std::env::current_dir().map(|d| d.to_string_lossy().into_owned()).unwrap_or_else(|_| "/".into());
        base = format!("{cwd}/{p}");
        &base
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    format!("/{}", parts.join("/"))
}

/// Step 4's "physical form": `realpath`, or `path.resolve` when realpath fails.
pub fn physical_path(p: &str) -> String {
    match fs::canonicalize(p) {
        Ok(real) => match real.to_str() {
            Some(s) => s.to_string(),
            None => resolve_lexically(p),
        },
        Err(_) => resolve_lexically(p),
    }
}

/// The last steps of upstream's `resolveReferencedSourceIgnore`: re-relativise
/// toplevel-relative `paths` to the local directory, given
/// the physical forms of the toplevel and of the local directory (see [`physical_path`]).
///
/// The offset is `path.relative(toplevel, local)`; an offset leaving the toplevel is
/// [`NotDescendant`]. With an empty offset the list is returned as is; otherwise only
/// entries under `offset/` are kept, with that prefix removed. An entry equal to the offset
/// itself (the whole local directory ignored) is dropped, as upstream does (hazard H13).
pub fn re_relativize(
    toplevel_physical: &str,
    local_physical: &str,
    paths: &[String],
) -> Result<Vec<String>, NotDescendant> {
    let from = resolve_lexically(toplevel_physical);
    let to = resolve_lexically(local_physical);
    let offset = if from == to {
        ""
    } else if from == "/" {
        &to[1..]
    } else {
        match to.strip_prefix(from.as_str()).and_then(|rest| rest.strip_prefix('/')) {
            Some(rest) => rest,
            None => return Err(NotDescendant),
        }
    };
    if offset.is_empty() {
        return Ok(paths.to_vec());
    }
    let prefix = format!("{offset}/");
    Ok(paths
        .iter()
        .filter_map(|entry| entry.strip_prefix(prefix.as_str()))
        .filter(|rest| !rest.is_empty())
        .map(str::to_string)
        .collect())
}
