//! The directory walk behind [`super::pack`] and [`super::precompute_size`]: which members
//! `tar -c [-h] -C root --exclude … -- <names>` archives, in a deterministic order.

use std::ffi::OsString;
use std::fs::{self, Metadata};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use super::exclude::TarExcludeSet;
use crate::error::{codes, Error, Result};

/// What a member is, as far as the archive is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EntryKind {
    Directory,
    /// A regular file with the size seen by the walk (hard links are archived as files).
    File {
        size: u64,
    },
    Symlink {
        target: Vec<u8>,
    },
    Fifo,
    CharDevice {
        rdev: u64,
    },
    BlockDevice {
        rdev: u64,
    },
}

/// One member found by the walk.
#[derive(Debug)]
pub(crate) struct WalkEntry<'a> {
    /// The member name: `/`-separated, relative to the root, no trailing `/`.
    pub member: &'a str,
    /// The host path (`root/member`).
    pub path: &'a Path,
    pub kind: EntryKind,
    /// Permission bits, setuid/setgid/sticky included (`st_mode & 0o7777`).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub mtime: i64,
}

/// The walk's settings.
pub(crate) struct Walk<'a> {
    pub root: &'a Path,
    pub excludes: &'a TarExcludeSet,
    pub follow_symlinks: bool,
    /// The names given to tar after `--`, in order.
    pub top_level: &'a [String],
    /// Prepended to a member name before the excludes see it (`./` for `tar -cf - .`).
    pub exclude_prefix: &'a str,
    /// Files never archived (device, inode): the archive being written, like GNU tar's
    /// "file is the archive; not dumped".
    pub skip: &'a [(u64, u64)],
    pub cancel: &'a AtomicBool,
}

/// A directory whose children are being visited.
struct Frame {
    member: String,
    id: (u64, u64),
    children: Vec<String>,
    next: usize,
}

impl Walk<'_> {
    /// Visits every archived member in archive order: each top-level name in turn, each
    /// directory before its children, siblings in byte order.
    pub fn run(&self, mut visit: impl FnMut(&WalkEntry<'_>) -> Result<()>) -> Result<()> {
        let mut stack: Vec<Frame> = Vec::new();
        for name in self.top_level {
            self.enter(name.clone(), &mut stack, &mut visit)?;
            while let Some(frame) = stack.last_mut() {
                if frame.next == frame.children.len() {
                    stack.pop();
                    continue;
                }
                let member = format!("{}/{}", frame.member, frame.children[frame.next]);
                frame.next += 1;
                self.enter(member, &mut stack, &mut visit)?;
            }
        }
        Ok(())
    }

    /// Visits one member, and pushes a frame when it is a directory to descend into.
    fn enter(
        &self,
        member: String,
        stack: &mut Vec<Frame>,
        visit: &mut impl FnMut(&WalkEntry<'_>) -> Result<()>,
    ) -> Result<()> {
        if self.cancel.load(Ordering::Relaxed) {
            return Err(Error::aborted());
        }
        // Like tar, an excluded name is never even stat'ed.
        let excluded = if self.exclude_prefix.is_empty() {
            self.excludes.excludes(&member)
        } else {
            self.excludes.excludes(&format!("{}{member}", self.exclude_prefix))
        };
        if excluded {
            return Ok(());
        }
        let path = self.root.join(&member);
        let meta = if self.follow_symlinks {
            fs::metadata(&path).map_err(|e| Error::io(e, "stat", &path))?
        } else {
            fs::symlink_metadata(&path).map_err(|e| Error::io(e, "lstat", &path))?
        };
        let id = (meta.dev(), meta.ino());
        if self.skip.contains(&id) {
            return Ok(());
        }
        let Some(kind) = classify(&meta, &path)? else {
            return Ok(()); // a socket: tar skips it
        };
        let is_dir = kind == EntryKind::Directory;
        if is_dir {
            if let Some(ancestor) = stack.iter().find(|frame| frame.id == id) {
                return Err(Error::new(
                    codes::SYMLINK_LOOP,
                    format!(
                        "'{member}' leads back to its ancestor directory '{}' (a symbolic link cycle)",
                        ancestor.member
                    ),
                ));
            }
        }
        visit(&WalkEntry {
            member: &member,
            path: &path,
            kind,
            mode: meta.mode() & 0o7777,
            uid: meta.uid(),
            gid: meta.gid(),
            mtime: meta.mtime(),
        })?;
        if is_dir {
            let children = read_names(&path)?;
            stack.push(Frame { member, id, children, next: 0 });
        }
        Ok(())
    }
}

/// The archive kind of a file, `None` for sockets.
fn classify(meta: &Metadata, path: &Path) -> Result<Option<EntryKind>> {
    let file_type = meta.file_type();
    Ok(Some(if file_type.is_dir() {
        EntryKind::Directory
    } else if file_type.is_file() {
        EntryKind::File { size: meta.len() }
    } else if file_type.is_symlink() {
        let target = fs::read_link(path).map_err(|e| Error::io(e, "readlink", path))?;
        EntryKind::Symlink { target: target.into_os_string().into_vec() }
    } else if file_type.is_fifo() {
        EntryKind::Fifo
    } else if file_type.is_char_device() {
        EntryKind::CharDevice { rdev: meta.rdev() }
    } else if file_type.is_block_device() {
        EntryKind::BlockDevice { rdev: meta.rdev() }
    } else {
        return Ok(None);
    }))
}

/// The names in a directory, sorted by bytes; non-UTF-8 names are an error.
pub(crate) fn read_names(dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| Error::io(e, "scandir", dir))? {
        let entry = entry.map_err(|e| Error::io(e, "scandir", dir))?;
        names.push(utf8_name(entry.file_name(), dir)?);
    }
    names.sort_unstable();
    Ok(names)
}

/// A file name as UTF-8, or the `NON_UTF8_NAME` error.
fn utf8_name(name: OsString, dir: &Path) -> Result<String> {
    name.into_string().map_err(|raw| {
        let path: PathBuf = dir.join(&raw);
        Error {
            path: Some(path.clone()),
            ..Error::new(
                codes::NON_UTF8_NAME,
                format!("file name is not valid UTF-8 bytes: '{}'", path.display()),
            )
        }
    })
}

/// Checks caller-supplied top-level names: each must be one plain path component, once.
pub(crate) fn check_top_level(names: &[String]) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    for name in names {
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
            return Err(Error::new(
                codes::INVALID_ARGUMENT,
                format!("top-level entry {name:?} is not a single file name"),
            ));
        }
        if !seen.insert(name.as_str()) {
            return Err(Error::new(
                codes::INVALID_ARGUMENT,
                format!("top-level entry {name:?} is listed twice"),
            ));
        }
    }
    Ok(())
}
