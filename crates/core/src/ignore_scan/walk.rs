//! The work-tree walk behind `git ls-files --others --ignored --exclude-standard
//! --directory`, reproducing git's directory treatment (`dir.c`) for exactly that flag set:
//!
//! - a file or symlink is reported when it is untracked and excluded;
//! - an untracked directory that is excluded is reported once, with a trailing `/`, and
//!   never entered (an empty one too);
//! - a directory with tracked entries below it is always entered, even when excluded
//!   (everything untracked inside is then excluded);
//! - an untracked, not excluded directory is entered; its excluded contents are reported,
//!   and when *everything* in it is excluded the directory itself is reported as well
//!   (git prints both `d/` and `d/x.log`);
//! - a nested repository that is not excluded is not entered; submodules (gitlinks) are
//!   skipped; anything named `.git` is skipped;
//! - when the scan starts below the top (git's `prefix`), the leading directories are
//!   treated one by one first, as git does with its cwd pathspec, including git's failure
//!   when the start directory lies inside an excluded directory.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use git2::Repository;

use super::patterns::{Kind, PatternList, PATTERN_MAX_FILE_SIZE};
use super::repo::{is_nonbare_repository_dir, InIndex, IndexFacts};
use super::ScanError;
use crate::fsat::Dir;

/// git's `path_treatment`, ordered by significance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Treatment {
    None,
    Recurse,
    Excluded,
    Untracked,
}

/// Where a directory sits relative to the start directory's leading path.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Leading {
    /// Inside the start directory: no pathspec effect.
    No,
    /// A proper ancestor of the start directory.
    Ancestor,
    /// The start directory itself.
    Start,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum EntryType {
    Dir,
    /// Regular file or symlink (symlinks are never followed).
    FileOrLink,
    /// FIFO, socket, device, or unknown: git ignores these.
    Other,
}

/// Where a directory's `.gitignore` is opened.
#[derive(Clone, Copy)]
enum IgnoreFile<'d> {
    /// By its path from the top.
    ByPath,
    /// Relative to the directory's handle.
    In(&'d Dir),
    /// Nowhere: the directory's listing names none.
    Absent,
}

/// Collected output records in one arena, bounded by the raw-output allowance.
pub struct Collected {
    arena: Vec<u8>,
    spans: Vec<(usize, usize)>,
    raw_bytes: usize,
}

impl Collected {
    /// The records in git's output order (byte order of the record, where a directory
    /// carries its trailing `/`).
    pub fn sorted(&self) -> impl Iterator<Item = &[u8]> {
        let mut spans = self.spans.clone();
        spans.sort_unstable_by(|a, b| self.arena[a.0..a.0 + a.1].cmp(&self.arena[b.0..b.0 + b.1]));
        spans.into_iter().map(move |(start, len)| &self.arena[start..start + len])
    }
}

pub struct Walker<'a> {
    pub top: &'a Path,
    pub repo: &'a Repository,
    pub index: &'a IndexFacts,
    pub casefold: bool,
    /// `[core.excludesFile, info/exclude]` (later entries win).
    pub file_lists: Vec<PatternList>,
    /// The start directory relative to the top, with a trailing `/` (empty at the top).
    pub prefix: Vec<u8>,
    /// Abort with a failure once the output (records + NUL) exceeds this many bytes.
    pub max_output_bytes: usize,
    pub cancel: &'a AtomicBool,
    /// `.gitignore` lists of the directories being walked, outermost first.
    dir_lists: Vec<PatternList>,
    /// Canonical path of this repository's git directory (a nested `.git` that resolves
    /// here is not a nested repository).
    gitdir_real: Option<PathBuf>,
    out: Collected,
    ticks: u32,
}

impl<'a> Walker<'a> {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        top: &'a Path,
        repo: &'a Repository,
        index: &'a IndexFacts,
        casefold: bool,
        file_lists: Vec<PatternList>,
        prefix: Vec<u8>,
        max_output_bytes: usize,
        cancel: &'a AtomicBool,
    ) -> Self {
        Walker {
            top,
            repo,
            index,
            casefold,
            file_lists,
            prefix,
            max_output_bytes,
            cancel,
            dir_lists: Vec::new(),
            gitdir_real: fs::canonicalize(repo.path()).ok(),
            out: Collected { arena: Vec::new(), spans: Vec::new(), raw_bytes: 0 },
            ticks: 0,
        }
    }

    /// Run the walk and return the collected records.
    pub fn run(mut self) -> Result<Collected, ScanError> {
        let root = self.load_dir_patterns(b"", IgnoreFile::ByPath)?;
        self.dir_lists.push(root);
        if self.prefix.is_empty() {
            self.read_directory(b"", None, false)?;
        } else {
            self.walk_leading_path()?;
        }
        Ok(self.out)
    }

    fn tick(&mut self) -> Result<(), ScanError> {
        self.ticks = self.ticks.wrapping_add(1);
        if self.ticks.is_multiple_of(256) && self.cancel.load(Ordering::Relaxed) {
            return Err(ScanError::Aborted);
        }
        Ok(())
    }

    fn abs(&self, rel: &[u8]) -> PathBuf {
        if rel.is_empty() {
            self.top.to_path_buf()
        } else {
            self.top.join(OsStr::from_bytes(rel))
        }
    }

    /// git's `treat_leading_path`: treat each directory on the way to the start directory,
    /// then walk the start directory when every step says "recurse".
    fn walk_leading_path(&mut self) -> Result<(), ScanError> {
        let prefix = self.prefix.clone();
        let components: Vec<&[u8]> = prefix[..prefix.len() - 1].split(|&c| c == b'/').collect();
        let mut rel: Vec<u8> = Vec::new();
        let mut ancestor_excluded = false;
        let mut state = Treatment::None;
        let mut excluded = false;
        let mut reached: Vec<u8> = Vec::new();
        for (i, component) in components.iter().enumerate() {
            let mut path = rel.clone();
            path.extend_from_slice(component);
            if !self.abs(&path).is_dir() {
                break;
            }
            let leading = if i + 1 == components.len() { Leading::Start } else { Leading::Ancestor };
            (state, excluded) = self.treat_path(&path, None, EntryType::Dir, ancestor_excluded, leading)?;
            path.push(b'/');
            reached = path.clone();
            if state != Treatment::Recurse || i + 1 == components.len() {
                break;
            }
            if excluded {
                ancestor_excluded = true;
            } else if !ancestor_excluded {
                let list = self.load_dir_patterns(&path, IgnoreFile::ByPath)?;
                self.dir_lists.push(list);
            }
            rel = path;
        }
        match state {
            Treatment::Excluded => self.add(&reached)?,
            Treatment::Recurse => {
                self.read_directory(&prefix, None, ancestor_excluded || excluded)?;
            }
            _ => {}
        }
        Ok(())
    }

    /// git's `read_directory_recursive` for `dir` (toplevel-relative with a trailing `/`, or
    /// empty), opened relative to `parent` (the handle of the directory holding it) or, with
    /// none, by path. `dir_excluded`: the directory itself (or an ancestor) is excluded, so
    /// every path inside is, and its `.gitignore` is not read.
    fn read_directory(&mut self, dir: &[u8], parent: Option<&Dir>, dir_excluded: bool) -> Result<Treatment, ScanError> {
        // Like git, an unreadable directory reads as empty, and a failing readdir ends it;
        // but one too deep to open by path (as git opens it) fails the scan (git would read
        // it as empty and miss everything ignored below it).
        if self.too_long(dir) {
            return Err(too_deep(dir));
        }
        let opened = match parent {
            Some(parent) => {
                let name = dir.strip_suffix(b"/").unwrap_or(dir);
                let name = &name[name.iter().rposition(|&c| c == b'/').map_or(0, |i| i + 1)..];
                parent.open_dir_nofollow(OsStr::from_bytes(name))
            }
            None => Dir::open(&self.abs(dir)),
        };
        let Ok(handle) = opened else { return Ok(Treatment::None) };
        let mut listed: Vec<(OsString, EntryType)> = handle
            .entries()
            .unwrap_or_default()
            .into_iter()
            .map(|(name, kind)| {
                let kind = match kind {
                    libc::DT_DIR => EntryType::Dir,
                    libc::DT_REG | libc::DT_LNK => EntryType::FileOrLink,
                    libc::DT_UNKNOWN => match handle.lstat(&name) {
                        Ok(st) => match st.0.st_mode & libc::S_IFMT {
                            libc::S_IFDIR => EntryType::Dir,
                            libc::S_IFREG | libc::S_IFLNK => EntryType::FileOrLink,
                            _ => EntryType::Other,
                        },
                        Err(_) => EntryType::Other,
                    },
                    _ => EntryType::Other,
                };
                (name, kind)
            })
            .collect();
        listed.shrink_to_fit();
        let pushed = !dir_excluded && !dir.is_empty();
        if pushed {
            // git opens `.gitignore` in every directory it reads; one the listing does not
            // name (in any case, for case-insensitive file systems) cannot be opened.
            let present = listed.iter().any(|(name, _)| name.as_bytes().eq_ignore_ascii_case(b".gitignore"));
            let list =
                self.load_dir_patterns(dir, if present { IgnoreFile::In(&handle) } else { IgnoreFile::Absent })?;
            self.dir_lists.push(list);
        }
        let result = self.treat_entries(dir, &handle, &listed, dir_excluded);
        if pushed {
            self.dir_lists.pop();
        }
        result
    }

    fn treat_entries(
        &mut self,
        dir: &[u8],
        handle: &Dir,
        listed: &[(OsString, EntryType)],
        dir_excluded: bool,
    ) -> Result<Treatment, ScanError> {
        let mut dir_state = Treatment::None;
        let mut path = dir.to_vec();
        for (name, kind) in listed {
            let kind = *kind;
            self.tick()?;
            path.truncate(dir.len());
            path.extend_from_slice(name.as_bytes());
            let (state, excluded) = self.treat_path(&path, Some(handle), kind, dir_excluded, Leading::No)?;
            dir_state = dir_state.max(state);
            if kind == EntryType::Dir {
                path.push(b'/');
            }
            if state == Treatment::Recurse {
                let sub = self.read_directory(&path, Some(handle), excluded)?;
                dir_state = dir_state.max(sub);
            }
            if state == Treatment::Excluded {
                self.add(&path)?;
            }
        }
        Ok(dir_state)
    }

    /// Whether `rel` (toplevel-relative) names a path git could not open: `PATH_MAX` bytes
    /// or more once joined to the top.
    fn too_long(&self, rel: &[u8]) -> bool {
        let len = if rel.is_empty() { self.top.as_os_str().len() } else { self.top.as_os_str().len() + 1 + rel.len() };
        len >= libc::PATH_MAX as usize
    }

    /// git's `treat_path`: how one entry is treated, and whether it is excluded.
    fn treat_path(
        &mut self,
        path: &[u8],
        parent: Option<&Dir>,
        kind: EntryType,
        ancestor_excluded: bool,
        leading: Leading,
    ) -> Result<(Treatment, bool), ScanError> {
        let name_at = path.iter().rposition(|&c| c == b'/').map_or(0, |i| i + 1);
        let name = &path[name_at..];
        let is_dot_git = if self.casefold { name.eq_ignore_ascii_case(b".git") } else { name == b".git" };
        if is_dot_git || kind == EntryType::Other {
            return Ok((Treatment::None, false));
        }
        if kind != EntryType::Dir && self.index.has_file(path) {
            return Ok((Treatment::None, false));
        }
        let pattern_kind = if kind == EntryType::Dir { Kind::Dir } else { Kind::NotDir };
        let excluded = ancestor_excluded || self.is_excluded(path, name_at, pattern_kind);
        let state = if kind == EntryType::Dir {
            self.treat_directory(path, parent, excluded, leading)?
        } else if excluded {
            Treatment::Excluded
        } else {
            Treatment::Untracked
        };
        Ok((state, excluded))
    }

    /// git's `treat_directory` for `--directory --ignored` without `--no-empty-directory`.
    fn treat_directory(
        &mut self,
        path: &[u8],
        parent: Option<&Dir>,
        excluded: bool,
        leading: Leading,
    ) -> Result<Treatment, ScanError> {
        match self.index.directory_status(path) {
            InIndex::Directory => return Ok(Treatment::Recurse),
            InIndex::Gitlink => return Ok(Treatment::None),
            InIndex::Nothing => {}
        }
        // git's cwd pathspec matches an ancestor of the start directory as a "leading" path
        // (only checked when the directory is not excluded).
        let leading_match = leading == Leading::Ancestor && !excluded;
        // An excluded directory is reported whole whether or not it is a nested repository,
        // so the probe is only needed for the others.
        if !excluded && self.is_nested_repository(path) {
            return Ok(if leading_match { Treatment::None } else { Treatment::Untracked });
        }
        if leading_match {
            return Ok(Treatment::Recurse);
        }
        if excluded {
            return Ok(Treatment::Excluded);
        }
        let mut dir = path.to_vec();
        dir.push(b'/');
        let state = self.read_directory(&dir, parent, false)?;
        Ok(if state == Treatment::None { Treatment::Untracked } else { state })
    }

    fn is_nested_repository(&self, path: &[u8]) -> bool {
        let abs = self.abs(path);
        if !is_nonbare_repository_dir(&abs) {
            return false;
        }
        // The work tree's own `.git` seen from a parent (an unusual core.worktree setup).
        match (&self.gitdir_real, fs::canonicalize(abs.join(".git"))) {
            (Some(own), Ok(this)) => *own != this,
            _ => true,
        }
    }

    fn is_excluded(&self, path: &[u8], name_at: usize, kind: Kind) -> bool {
        self.dir_lists
            .iter()
            .rev()
            .chain(self.file_lists.iter().rev())
            .find_map(|list| list.last_match(path, name_at, kind, self.casefold))
            .unwrap_or(false)
    }

    /// Record one output record (a directory with its trailing `/`), applying what
    /// `ls-files` does when it prints: skip names the index has, and die on a record
    /// outside the start directory.
    fn add(&mut self, record: &[u8]) -> Result<(), ScanError> {
        let name = record.strip_suffix(b"/").unwrap_or(record);
        if self.index.has_exact(name) {
            return Ok(());
        }
        // `ls-files` compares with the start directory without its trailing slash.
        if record.len() + 1 < self.prefix.len() {
            return Err(ScanError::failed("git ls-files: internal error - directory entry not superset of prefix"));
        }
        self.out.raw_bytes += record.len() + 1;
        if self.out.raw_bytes > self.max_output_bytes {
            return Err(ScanError::failed(format!(
                "the ignored-path listing exceeds the {}-byte output allowance (stdout maxBuffer length exceeded)",
                self.max_output_bytes
            )));
        }
        let start = self.out.arena.len();
        self.out.arena.extend_from_slice(record);
        self.out.spans.push((start, record.len()));
        Ok(())
    }

    /// The `.gitignore` of `dir` (with a trailing `/`, or empty), read like git: never
    /// through a symlink, falling back to the index blob of a skip-worktree entry.
    fn load_dir_patterns(&self, dir: &[u8], file: IgnoreFile<'_>) -> Result<PatternList, ScanError> {
        let mut rel = dir.to_vec();
        rel.extend_from_slice(b".gitignore");
        let path = self.abs(&rel);
        let opened = match file {
            IgnoreFile::Absent => Err(std::io::Error::from_raw_os_error(libc::ENOENT)),
            _ if self.too_long(&rel) => Err(std::io::Error::from_raw_os_error(libc::ENAMETOOLONG)),
            IgnoreFile::In(handle) => handle.open_file_for_reading(OsStr::new(".gitignore"), false),
            IgnoreFile::ByPath => {
                OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(&path)
            }
        };
        let contents = match opened {
            Ok(file) => read_pattern_file(file, &path, false)?,
            Err(err) if err.raw_os_error() == Some(libc::ENAMETOOLONG) => return Err(too_deep(&rel)),
            Err(_) => match self.index.skip_worktree_blob(&rel) {
                Some(oid) => self.repo.find_blob(oid).map(|b| b.content().to_vec()).ok(),
                None => None,
            },
        };
        Ok(contents.map(|c| PatternList::parse(dir, &c)).unwrap_or_default())
    }
}

/// The failure of a scan that meets a path longer than path-based calls accept (the work
/// tree is deeper than `PATH_MAX`): the scan cannot be complete, so it does not pretend to
/// be. The message names the depth, not the host path.
fn too_deep(rel: &[u8]) -> ScanError {
    ScanError::failed(format!(
        "the work tree is too deep to scan: a path {} bytes below its top exceeds PATH_MAX",
        rel.len()
    ))
}

/// Read an opened pattern file as git's `add_patterns` does. `None` means "no patterns";
/// `strict` (for `info/exclude` and `core.excludesFile`) turns git's fatal cases into errors.
pub fn read_pattern_file(mut file: File, path: &Path, strict: bool) -> Result<Option<Vec<u8>>, ScanError> {
    let meta = file.metadata().map_err(|e| ScanError::io(e, "fstat", path))?;
    let file_type = meta.file_type();
    if file_type.is_fifo() || file_type.is_socket() {
        // git would block opening it; fail instead of hanging.
        return Err(ScanError::failed(format!("refusing to read pattern file {}: not a regular file", path.display())));
    }
    if meta.len() == 0 {
        return Ok(None);
    }
    let cannot_use = || ScanError::failed(format!("cannot use {} as an exclude file", path.display()));
    if meta.is_dir() || meta.len() > PATTERN_MAX_FILE_SIZE {
        return if strict { Err(cannot_use()) } else { Ok(None) };
    }
    let mut buf = Vec::with_capacity(meta.len() as usize);
    match file.read_to_end(&mut buf) {
        Ok(_) => Ok(Some(buf)),
        Err(_) if !strict => Ok(None),
        Err(_) => Err(cannot_use()),
    }
}
