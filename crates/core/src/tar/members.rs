//! What a pack walked, member by member: the `stat` record of every member as the packer
//! saw it before reading it. The SSH lane keeps these in its delta manifest (the host side
//! of "what was last sent"), so a later upload can tell an unchanged file from a changed
//! one without reading it.

use super::walk::{EntryKind, WalkEntry};

/// One member as the walk found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberRecord {
    /// The member name without the `./` prefix (`a/b`).
    pub member: String,
    /// `d` directory, `f` regular file, `l` symlink, `p` FIFO, `c`/`b` devices (the letters
    /// of `find -printf %y`).
    pub kind: char,
    /// File size (0 for anything but a regular file).
    pub size: u64,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
    pub ino: u64,
    pub dev: u64,
    /// The raw target of a symlink.
    pub link: Option<Vec<u8>>,
}

impl MemberRecord {
    pub(crate) fn of(entry: &WalkEntry<'_>) -> MemberRecord {
        let (kind, size, link) = match &entry.kind {
            EntryKind::Directory => ('d', 0, None),
            EntryKind::File { size } => ('f', *size, None),
            EntryKind::Symlink { target } => ('l', 0, Some(target.clone())),
            EntryKind::Fifo => ('p', 0, None),
            EntryKind::CharDevice { .. } => ('c', 0, None),
            EntryKind::BlockDevice { .. } => ('b', 0, None),
        };
        MemberRecord {
            member: entry.member.to_string(),
            kind,
            size,
            mode: entry.mode,
            mtime_ns: entry.stat.mtime_ns,
            ctime_ns: entry.stat.ctime_ns,
            ino: entry.stat.ino,
            dev: entry.stat.dev,
            link,
        }
    }
}
