//! The tar view of the in-order walk ([`crate::walk::in_order`]) behind [`super::pack`] and
//! [`super::precompute_size`]: which members `tar -c [-h] -C root --exclude … -- <names>`
//! archives, in archive order, and what kind of member each one is.

use std::collections::HashSet;
use std::ffi::CStr;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use super::exclude::TarExcludeSet;
use crate::error::{codes, Error, Result};
use crate::fsat::{Dir, RawStat};
use crate::walk::{in_order, InOrderOptions, Visit};

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
pub(crate) struct WalkEntry<'a> {
    /// The member name: `/`-separated, relative to the root, no trailing `/`.
    pub member: &'a str,
    /// The host path (`root/member`), for messages.
    pub path: &'a Path,
    /// The open directory holding the member, and its name there (to open it with `openat`).
    pub dir: &'a Dir,
    pub name: &'a CStr,
    pub kind: EntryKind,
    /// Permission bits, setuid/setgid/sticky included (`st_mode & 0o7777`).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub mtime: i64,
    /// The whole `lstat` (`stat` when following symlinks) record, for callers that keep
    /// more than the header fields (the SSH lane's delta manifest).
    pub stat: crate::walk::Stat,
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
    /// When set, the walk goes only where these member names (a selection and every
    /// ancestor of it) lead: anything else is skipped before it is even stat'ed.
    pub within: Option<&'a HashSet<String>>,
    pub cancel: &'a AtomicBool,
}

impl Walk<'_> {
    /// Visits every archived member in archive order: each top-level name in turn, each
    /// directory before its children, siblings in byte order. Like tar, an excluded name is
    /// never even stat'ed, and sockets are skipped.
    pub fn run(&self, mut visit: impl FnMut(&WalkEntry<'_>) -> Result<()>) -> Result<()> {
        let excluded = |member: &str| {
            if self.within.is_some_and(|within| !within.contains(member)) {
                return true;
            }
            if self.exclude_prefix.is_empty() {
                self.excludes.excludes(member)
            } else {
                self.excludes.excludes(&format!("{}{member}", self.exclude_prefix))
            }
        };
        let opts = InOrderOptions {
            root: self.root,
            top_level: self.top_level,
            follow_symlinks: self.follow_symlinks,
            skip: &excluded,
            cancel: self.cancel,
        };
        in_order(&opts, |found| {
            let st = &found.stat.0;
            if self.skip.contains(&(st.st_dev as u64, st.st_ino as u64)) {
                return Ok(false);
            }
            let Some(kind) = classify(found)? else {
                return Ok(false); // a socket: tar skips it
            };
            visit(&WalkEntry {
                member: found.rel,
                path: found.path,
                dir: found.dir,
                name: found.name,
                kind,
                mode: st.st_mode as u32 & 0o7777, // `mode_t` is u16 on darwin
                uid: st.st_uid,
                gid: st.st_gid,
                mtime: st.st_mtime,
                stat: crate::walk::Stat::from_raw(found.stat),
            })?;
            Ok(true)
        })
    }
}

/// The archive kind of an entry, `None` for sockets.
fn classify(found: &Visit<'_>) -> Result<Option<EntryKind>> {
    let RawStat(st) = found.stat;
    Ok(Some(match st.st_mode & libc::S_IFMT {
        libc::S_IFDIR => EntryKind::Directory,
        libc::S_IFREG => EntryKind::File { size: st.st_size as u64 },
        libc::S_IFLNK => {
            let target = found.dir.readlink(found.name).map_err(|e| Error::io(e, "readlink", found.path))?;
            EntryKind::Symlink { target: target.into_vec() }
        }
        libc::S_IFIFO => EntryKind::Fifo,
        libc::S_IFCHR => EntryKind::CharDevice { rdev: st.st_rdev as u64 },
        libc::S_IFBLK => EntryKind::BlockDevice { rdev: st.st_rdev as u64 },
        _ => return Ok(None),
    }))
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
            return Err(Error::new(codes::INVALID_ARGUMENT, format!("top-level entry {name:?} is listed twice")));
        }
    }
    Ok(())
}
