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

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::fs;
    use std::io::Write;
    use std::process::{Command, Stdio};
    use std::sync::atomic::AtomicBool;

    use super::super::{pack_selected, precompute_size_selected, PackOptions};

    /// The member names GNU tar lists in `archive`.
    fn listed(archive: &[u8]) -> Vec<String> {
        let mut child =
            Command::new("tar").args(["-tf", "-"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
        child.stdin.take().unwrap().write_all(archive).unwrap();
        let out = child.wait_with_output().unwrap();
        String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect()
    }

    #[test]
    fn a_selection_writes_and_records_only_its_members() {
        let root = std::env::temp_dir().join(format!("pc-pack-selected-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("a/b")).unwrap();
        fs::create_dir_all(root.join("x/y")).unwrap();
        fs::write(root.join("a/b/c.txt"), "c").unwrap();
        fs::write(root.join("a/d.txt"), "d").unwrap();
        fs::write(root.join("e.txt"), "e").unwrap();
        fs::write(root.join("x/y/z.txt"), "z").unwrap();
        std::os::unix::fs::symlink("e.txt", root.join("link")).unwrap();
        let opts = PackOptions { root: root.clone(), dot_members: true, ..PackOptions::default() };
        let only: HashSet<String> = ["a/b/c.txt", "x", "link", "missing/name"].iter().map(|s| s.to_string()).collect();
        let mut archive = Vec::new();
        let mut records = Vec::new();
        let mut keep = |r: super::MemberRecord| records.push(r);
        let summary =
            pack_selected(&opts, Some(&only), &mut archive, |_| {}, &AtomicBool::new(false), &mut keep).unwrap();
        assert_eq!(listed(&archive), vec!["./a/b/c.txt", "./link", "./x/"]);
        assert_eq!(summary.entries, 3);
        // The selected stream's size is known before it is packed, as the whole stream's is.
        let size = precompute_size_selected(&opts, Some(&only), &AtomicBool::new(false)).unwrap();
        assert_eq!(size, archive.len() as u64);
        assert_eq!(summary.tar_bytes, archive.len() as u64);
        let kinds: Vec<(String, char)> = records.iter().map(|r| (r.member.clone(), r.kind)).collect();
        assert_eq!(kinds, vec![("a/b/c.txt".into(), 'f'), ("link".into(), 'l'), ("x".into(), 'd')]);
        assert_eq!(records[0].size, 1);
        assert_eq!(records[1].link.as_deref(), Some(&b"e.txt"[..]));
        fs::remove_dir_all(&root).unwrap();
    }
}
