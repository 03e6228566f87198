//! Finding and opening the repository of a directory the way `git` does, read-only and with
//! no system, global or XDG configuration.

use std::collections::{HashMap, HashSet};
use std::ffi::{CString, OsStr, OsString};
use std::fs;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use git2::{ConfigLevel, Repository, RepositoryOpenFlags};

use super::index_file::read_entries;
use super::ScanError;

/// Largest `.git` file git reads (`read_gitfile_gently`).
const MAX_GITFILE_SIZE: u64 = 1 << 20;

/// Point libgit2's system, global, XDG and ProgramData configuration search paths at
/// nothing, once per process, before the first repository is opened.
///
/// This is the in-process twin of upstream's `GIT_CONFIG_NOSYSTEM=1` and
/// `GIT_CONFIG_GLOBAL=/dev/null`: only the repository's own configuration (and what it
/// includes) is ever read. The setting is process-wide: any other libgit2 user in this
/// process also stops seeing those files, which is what a hardened addon wants.
pub fn harden_libgit2() -> Result<(), ScanError> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    let outcome = DONE.get_or_init(|| {
        for level in [ConfigLevel::System, ConfigLevel::Global, ConfigLevel::XDG, ConfigLevel::ProgramData] {
            // SAFETY: `set_search_path` mutates libgit2's global settings and must not race
            // with other libgit2 calls. It runs exactly once, inside this `OnceLock`
            // initialiser, before this module opens any repository; the rest of the crate
            // opens repositories only through this module.
            unsafe { git2::opts::set_search_path(level, "") }.map_err(|e| e.message().to_string())?;
        }
        Ok(())
    });
    outcome.clone().map_err(|message| ScanError::failed(format!("cannot harden libgit2: {message}")))
}

/// What discovery found for a start directory.
pub enum Discovery {
    /// A work tree whose top directory contains `.git` (a directory or a gitfile).
    WorkTree(PathBuf),
    /// No repository: git would say "not a git repository".
    NotARepository,
}

/// `access(2)` with `X_OK`, as git uses to probe `objects/` and `refs/`.
fn accessible(path: &Path) -> bool {
    match CString::new(path.as_os_str().as_bytes()) {
        // SAFETY: a valid NUL-terminated string; `access` only reads it.
        Ok(c) => unsafe { libc::access(c.as_ptr(), libc::X_OK) == 0 },
        Err(_) => false,
    }
}

/// A `HEAD` that git accepts: a symlink into `refs/`, `ref: refs/...`, or an object id.
fn valid_head(path: &Path) -> bool {
    let Ok(meta) = fs::symlink_metadata(path) else { return false };
    if meta.file_type().is_symlink() {
        return fs::read_link(path).is_ok_and(|t| t.as_os_str().as_bytes().starts_with(b"refs/"));
    }
    let Ok(file) = fs::File::open(path) else { return false };
    let mut buf = Vec::with_capacity(255);
    if file.take(255).read_to_end(&mut buf).is_err() {
        return false;
    }
    if let Some(rest) = buf.strip_prefix(b"ref:") {
        let rest = &rest[rest.iter().position(|c| !c.is_ascii_whitespace()).unwrap_or(rest.len())..];
        if rest.starts_with(b"refs/") {
            return true;
        }
    }
    let hex = buf.iter().take_while(|c| c.is_ascii_hexdigit()).count();
    hex == 40 || hex == 64
}

/// git's `is_git_directory`: a valid `HEAD`, and `objects/` and `refs/` in the common dir.
pub fn is_git_directory(dir: &Path) -> bool {
    if !valid_head(&dir.join("HEAD")) {
        return false;
    }
    let common = match fs::read(dir.join("commondir")) {
        Ok(raw) => {
            let end = raw.iter().rposition(|c| !c.is_ascii_whitespace()).map_or(0, |i| i + 1);
            let named = Path::new(OsStr::from_bytes(&raw[..end]));
            if named.is_absolute() {
                named.to_path_buf()
            } else {
                dir.join(named)
            }
        }
        Err(_) => dir.to_path_buf(),
    };
    accessible(&common.join("objects")) && accessible(&common.join("refs"))
}

/// Outcome of reading a `.git` file.
enum Gitfile {
    /// Not a regular file (missing, a directory, …): look further.
    NotAFile,
    /// Points at a valid git directory.
    Valid,
    /// Points at something that is not a repository ("not a git repository: …").
    NotARepo,
    /// Any other problem git dies on (open/read failure, bad format, too large).
    Broken(String),
}

fn read_gitfile(path: &Path) -> Gitfile {
    let Ok(meta) = fs::metadata(path) else { return Gitfile::NotAFile };
    if !meta.is_file() {
        return Gitfile::NotAFile;
    }
    if meta.len() > MAX_GITFILE_SIZE {
        return Gitfile::Broken(format!("too large to be a .git file: '{}'", path.display()));
    }
    let raw = match fs::read(path) {
        Ok(raw) => raw,
        Err(e) => return Gitfile::Broken(format!("error reading '{}': {e}", path.display())),
    };
    let Some(rest) = raw.strip_prefix(b"gitdir: ") else {
        return Gitfile::Broken(format!("invalid gitfile format: {}", path.display()));
    };
    let end = rest.iter().rposition(|&c| c != b'\n' && c != b'\r').map_or(0, |i| i + 1);
    let rest = &rest[..end];
    if rest.is_empty() {
        return Gitfile::Broken(format!("no path in gitfile: {}", path.display()));
    }
    let target = Path::new(OsStr::from_bytes(rest));
    let target =
        if target.is_absolute() { target.to_path_buf() } else { path.parent().unwrap_or(Path::new("/")).join(target) };
    if is_git_directory(&target) {
        Gitfile::Valid
    } else {
        Gitfile::NotARepo
    }
}

/// git's `is_nonbare_repository_dir`: `dir/.git` is a usable gitfile or git directory.
/// Also true when a `.git` file exists but cannot be opened or read, as in git.
pub fn is_nonbare_repository_dir(dir: &Path) -> bool {
    let dotgit = dir.join(".git");
    match read_gitfile(&dotgit) {
        Gitfile::Valid => true,
        Gitfile::Broken(_) if fs::File::open(&dotgit).is_err() => true,
        _ => is_git_directory(&dotgit),
    }
}

/// git's repository discovery from a physical (canonical) directory: walk up looking for
/// `.git`, stop at the file-system boundary, and fail like git on a bare repository or a
/// broken gitfile.
pub fn discover(start: &Path) -> Result<Discovery, ScanError> {
    let device = fs::metadata(start).map_err(|e| ScanError::io(e, "stat", start))?.dev();
    let mut dir = start;
    loop {
        let dotgit = dir.join(".git");
        match read_gitfile(&dotgit) {
            Gitfile::Valid => return Ok(Discovery::WorkTree(dir.to_path_buf())),
            Gitfile::NotARepo => return Ok(Discovery::NotARepository),
            Gitfile::Broken(message) => return Err(ScanError::failed(message)),
            Gitfile::NotAFile => {
                if is_git_directory(&dotgit) {
                    return Ok(Discovery::WorkTree(dir.to_path_buf()));
                }
            }
        }
        if is_git_directory(dir) {
            return Err(ScanError::failed("this operation must be run in a work tree"));
        }
        let Some(parent) = dir.parent() else { return Ok(Discovery::NotARepository) };
        match fs::metadata(parent) {
            Ok(meta) if meta.dev() == device => dir = parent,
            Ok(_) => return Ok(Discovery::NotARepository),
            Err(e) => return Err(ScanError::io(e, "stat", parent)),
        }
    }
}

/// Open the repository whose work tree top is `worktree`, without searching and without
/// reading any environment variable.
pub fn open(worktree: &Path) -> Result<Repository, ScanError> {
    harden_libgit2()?;
    Repository::open_ext(worktree, RepositoryOpenFlags::NO_SEARCH, std::iter::empty::<&OsStr>())
        .map_err(|e| ScanError::failed(format!("cannot open repository: {}", e.message())))
}

/// The index facts the walk needs: entry names (toplevel-relative bytes) sorted in byte
/// order in one arena, looked up by binary search the way git does.
#[derive(Default)]
pub struct IndexFacts {
    names: Vec<u8>,
    entries: Vec<IndexName>,
    /// Every entry name, for the exact lookups of each walked file (a hash lookup instead of
    /// a binary search of long shared-prefix names).
    exact: HashSet<Box<[u8]>>,
    /// Entries marked skip-worktree (sparse checkout) at stage 0, with their blob id.
    skip_worktree: HashMap<Box<[u8]>, git2::Oid>,
    /// With `core.ignoreCase`, ASCII-lowercased name sets for git's case-insensitive lookups.
    folded: Option<Box<Folded>>,
}

#[derive(Clone, Copy)]
struct IndexName {
    start: usize,
    len: usize,
    gitlink: bool,
}

#[derive(Default)]
struct Folded {
    files: HashSet<Box<[u8]>>,
    dirs: HashSet<Box<[u8]>>,
    gitlinks: HashSet<Box<[u8]>>,
}

/// How a directory name relates to the index (`directory_exists_in_index`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InIndex {
    Nothing,
    /// Some entry lives under it.
    Directory,
    /// It is a gitlink.
    Gitlink,
}

/// How many parsed indexes [`IndexFacts::read_cached`] keeps.
pub const INDEX_CACHE_CAPACITY: usize = 8;

/// How long an index file must have been unchanged before [`IndexFacts::read_cached`]
/// keeps what it read.
pub const INDEX_RACY_WINDOW: std::time::Duration = std::time::Duration::from_secs(1);

/// An index file's identity and the read's parameters.
#[derive(PartialEq, Eq)]
struct IndexKey {
    path: PathBuf,
    identity: (u64, u64, u64, i64, i64, i64, i64),
    ignore_case: bool,
    keep: Vec<u8>,
}

/// The parsed indexes of recent scans, least recently used first.
type IndexCache = Mutex<Vec<(IndexKey, Arc<IndexFacts>)>>;
static INDEX_CACHE: OnceLock<IndexCache> = OnceLock::new();

const GITLINK_MODE: u32 = 0o160000;

impl IndexFacts {
    /// Read the index (`index_file`: as git reads it, without hashing the whole file),
    /// keeping only entries whose names start with `keep` (bytes): `ls-files` prunes its index
    /// to the start directory *without* its trailing slash before walking, so tracked files
    /// elsewhere do not make the start directory's ancestors "tracked" (while `sub/build` does
    /// keep `sub/b`'s ancestors tracked when starting in `sub/b`). A missing index file is an
    /// empty index, as for git. Nothing is written.
    pub fn read(repo: &Repository, ignore_case: bool, keep: &[u8]) -> Result<IndexFacts, ScanError> {
        let path = repo.path().join("index");
        let data = match fs::read(&path) {
            Ok(data) => Some(data),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(ScanError::io(e, "open", &path)),
        };
        let mut facts = IndexFacts::default();
        if let Some(data) = data {
            read_entries(&data, |entry| {
                if !entry.name.starts_with(keep) {
                    return;
                }
                if entry.skip_worktree && entry.stage == 0 {
                    if let Ok(oid) = git2::Oid::from_bytes(&entry.oid) {
                        facts.skip_worktree.insert(entry.name.into(), oid);
                    }
                }
                let start = facts.names.len();
                facts.names.extend_from_slice(entry.name);
                facts.entries.push(IndexName {
                    start,
                    len: entry.name.len(),
                    gitlink: entry.mode & 0o170000 == GITLINK_MODE,
                });
            })
            .map_err(|e| ScanError::failed(format!("cannot read the index: {e}")))?;
        }
        // An index written case-insensitively (libgit2 with core.ignoreCase) may not be in byte
        // order; git's lookups need bytes.
        let names = &facts.names;
        let key = |e: &IndexName| &names[e.start..e.start + e.len];
        if !facts.entries.is_sorted_by(|a, b| key(a) <= key(b)) {
            facts.entries.sort_by(|a, b| key(a).cmp(key(b)));
        }
        facts.exact.reserve(facts.entries.len());
        for e in &facts.entries {
            facts.exact.insert(facts.names[e.start..e.start + e.len].into());
        }
        if ignore_case {
            let mut folded = Folded::default();
            for e in &facts.entries {
                let lower = key(e).to_ascii_lowercase();
                let mut end = lower.len();
                while let Some(slash) = lower[..end].iter().rposition(|&c| c == b'/') {
                    if !folded.dirs.insert(lower[..slash].into()) {
                        break;
                    }
                    end = slash;
                }
                if e.gitlink {
                    folded.gitlinks.insert(lower.clone().into_boxed_slice());
                }
                folded.files.insert(lower.into_boxed_slice());
            }
            facts.folded = Some(Box::new(folded));
        }
        Ok(facts)
    }

    /// [`IndexFacts::read`], reusing the facts of an earlier scan while the index file is the
    /// same file, unchanged: same device, inode, size, modification and change times (to
    /// the nanosecond), before and after the read. git and libgit2 replace the index by
    /// renaming a new file over it, so any change gives it a new identity. Reading the index
    /// is a fifth to a quarter of a warm scan of a 4 000–5 000-file repository; a
    /// long-running host scans the same repositories run after run. At most
    /// [`INDEX_CACHE_CAPACITY`] indexes are kept (the least recently used is dropped); a
    /// missing or unreadable index file, or one changed within the last
    /// [`INDEX_RACY_WINDOW`], is never cached.
    pub fn read_cached(repo: &Repository, ignore_case: bool, keep: &[u8]) -> Result<Arc<IndexFacts>, ScanError> {
        let path = repo.path().join("index");
        let identity = |path: &Path| {
            fs::metadata(path)
                .ok()
                .map(|m| (m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec()))
        };
        let Some(before) = identity(&path) else {
            return IndexFacts::read(repo, ignore_case, keep).map(Arc::new);
        };
        let key = IndexKey { path, identity: before, ignore_case, keep: keep.to_vec() };
        let cache = INDEX_CACHE.get_or_init(|| Mutex::new(Vec::new()));
        if let Ok(mut cache) = cache.lock() {
            if let Some(at) = cache.iter().position(|(k, _)| *k == key) {
                let hit = cache.remove(at);
                let facts = Arc::clone(&hit.1);
                cache.push(hit);
                return Ok(facts);
            }
        }
        let facts = Arc::new(IndexFacts::read(repo, ignore_case, keep)?);
        // Timestamps are coarse (a few ms) and a freed inode number can come back, so an index
        // changed within the last [`INDEX_RACY_WINDOW`] is not kept: a rewrite after this read
        // can then no longer repeat its identity.
        let (_, _, _, mtime, mtime_nsec, ctime, ctime_nsec) = key.identity;
        let newest = (mtime, mtime_nsec).max((ctime, ctime_nsec));
        let settled = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).is_ok_and(|now| {
            let limit = now.saturating_sub(INDEX_RACY_WINDOW);
            (limit.as_secs() as i64, i64::from(limit.subsec_nanos())) > newest
        });
        if settled && identity(&key.path) == Some(key.identity) {
            if let Ok(mut cache) = cache.lock() {
                cache.retain(|(k, _)| k.path != key.path || k.ignore_case != key.ignore_case || k.keep != key.keep);
                if cache.len() >= INDEX_CACHE_CAPACITY {
                    cache.remove(0);
                }
                cache.push((key, Arc::clone(&facts)));
            }
        }
        Ok(facts)
    }

    fn name(&self, i: usize) -> &[u8] {
        let e = self.entries[i];
        &self.names[e.start..e.start + e.len]
    }

    /// Index of the first entry not less than `name`.
    fn lower_bound(&self, name: &[u8]) -> usize {
        self.entries.partition_point(|e| &self.names[e.start..e.start + e.len] < name)
    }

    /// `index_file_exists(name, ignore_case)`.
    pub fn has_file(&self, name: &[u8]) -> bool {
        match &self.folded {
            Some(f) => f.files.contains(name.to_ascii_lowercase().as_slice()),
            None => self.has_exact(name),
        }
    }

    /// Exact, case-sensitive presence at any stage (`index_name_is_other`).
    pub fn has_exact(&self, name: &[u8]) -> bool {
        self.exact.contains(name)
    }

    /// `directory_exists_in_index` for a name without its trailing slash.
    pub fn directory_status(&self, name: &[u8]) -> InIndex {
        if let Some(f) = &self.folded {
            let lower = name.to_ascii_lowercase();
            return if f.dirs.contains(lower.as_slice()) {
                InIndex::Directory
            } else if f.gitlinks.contains(lower.as_slice()) {
                InIndex::Gitlink
            } else {
                InIndex::Nothing
            };
        }
        // Entries equal to `name` sort first, then `name-…`, `name.…` (below `/`), then
        // `name/…`; anything after `/` ends the search.
        for i in self.lower_bound(name)..self.entries.len() {
            let entry = self.name(i);
            if !entry.starts_with(name) {
                break;
            }
            match entry.get(name.len()) {
                None if self.entries[i].gitlink => return InIndex::Gitlink,
                None => {}
                Some(b'/') => return InIndex::Directory,
                Some(&c) if c > b'/' => break,
                Some(_) => {}
            }
        }
        InIndex::Nothing
    }

    /// The blob of a stage-0 skip-worktree entry (git reads a missing `.gitignore` from it).
    pub fn skip_worktree_blob(&self, name: &[u8]) -> Option<git2::Oid> {
        self.skip_worktree.get(name).copied()
    }
}

/// The user's environment as git would see it under upstream's hardened environment
/// (which keeps `HOME` and `XDG_CONFIG_HOME`): it decides where the default
/// `core.excludesFile` (`$XDG_CONFIG_HOME/git/ignore` or `~/.config/git/ignore`) is and what
/// `~/` expands to.
#[derive(Clone, Debug, Default)]
pub struct UserEnv {
    pub home: Option<OsString>,
    pub xdg_config_home: Option<OsString>,
}

impl UserEnv {
    /// `HOME` and `XDG_CONFIG_HOME` of this process.
    pub fn from_process() -> UserEnv {
        UserEnv { home: std::env::var_os("HOME"), xdg_config_home: std::env::var_os("XDG_CONFIG_HOME") }
    }

    /// git's default excludes file when `core.excludesFile` is unset.
    pub fn default_excludes_file(&self) -> Option<PathBuf> {
        if let Some(xdg) = self.xdg_config_home.as_ref().filter(|x| !x.is_empty()) {
            return Some(Path::new(xdg).join("git").join("ignore"));
        }
        // git formats "%s/.config/git/ignore", so an empty HOME gives "/.config/git/ignore".
        self.home.as_ref().map(|home| {
            let mut p = home.clone();
            p.push("/.config/git/ignore");
            PathBuf::from(p)
        })
    }
}

/// The repository-local settings that change the result.
pub struct Settings {
    /// `core.excludesFile`, resolved (or the XDG default); `None` when there is none.
    pub excludes_file: Option<PathBuf>,
    pub ignore_case: bool,
}

impl Settings {
    pub fn read(repo: &Repository, top: &Path, env: &UserEnv) -> Result<Settings, ScanError> {
        let config = repo
            .config()
            .and_then(|mut c| c.snapshot())
            .map_err(|e| ScanError::failed(format!("cannot read the repository configuration: {}", e.message())))?;
        let ignore_case = match config.get_bool("core.ignorecase") {
            Ok(v) => v,
            Err(e) if e.code() == git2::ErrorCode::NotFound => false,
            Err(e) => return Err(ScanError::failed(format!("bad core.ignorecase: {}", e.message()))),
        };
        let excludes_file = match config.get_entry("core.excludesfile") {
            Ok(entry) if entry.has_value() => Some(expand_path(entry.value_bytes(), top, env)?),
            Ok(_) => return Err(ScanError::failed("missing value for 'core.excludesfile'")),
            Err(e) if e.code() == git2::ErrorCode::NotFound => env.default_excludes_file(),
            Err(e) => return Err(ScanError::failed(format!("bad core.excludesfile: {}", e.message()))),
        };
        Ok(Settings { excludes_file, ignore_case })
    }
}

/// git's `interpolate_path` for a config path: `~/` is `$HOME/`; a relative path is relative
/// to the work tree top (git runs from there). An empty value stays empty (no file).
fn expand_path(value: &[u8], top: &Path, env: &UserEnv) -> Result<PathBuf, ScanError> {
    if value.is_empty() {
        return Ok(PathBuf::new());
    }
    let expanded: PathBuf = if let Some(rest) = value.strip_prefix(b"~/") {
        let Some(home) = &env.home else {
            return Err(ScanError::failed("failed to expand user dir in core.excludesfile"));
        };
        Path::new(home).join(OsStr::from_bytes(rest))
    } else if value.starts_with(b"~") {
        return Err(ScanError::failed("core.excludesfile with ~user is not supported"));
    } else {
        PathBuf::from(OsStr::from_bytes(value))
    };
    Ok(if expanded.is_absolute() { expanded } else { top.join(expanded) })
}
