//! Safe placement: each member's path and link target checked, the member created in the
//! staging directory through a chain of directory handles (never through a symbolic link),
//! then everything checked against what the destination holds and moved in, with the
//! journal that lets a killed extraction be completed by the next one.

use std::collections::HashSet;
use std::ffi::CString;
use std::fs;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::limits::Budget;
use super::reader::{ArchiveReader, Member};
use super::{refuse, shown, ExtractOptions};
use crate::error::{codes, Error, Result};
use crate::fsat::{c_name, fchmod, futimens, Dir, Node};
use crate::reserved;
use crate::staging;
use crate::tar::header::kind;
use crate::tar::stream::COPY_BUFFER;

/// Completes an extraction into `dest_root` that was killed while moving its members in:
/// `name` is its staging directory there, `journal` what it wrote before the first move.
/// The members still staged are moved in as the extraction would have moved them, then the
/// directory modes and times recorded in the journal are applied.
pub(crate) fn roll_forward(dest_root: &Dir, dest: &Path, name: &std::ffi::OsStr, journal: &[u8]) -> Result<()> {
    let corrupt = || Error::new(codes::INTERNAL, "an interrupted extraction's journal is unreadable");
    let (preserve_mtime, deferred_dirs) = decode_journal(journal).ok_or_else(corrupt)?;
    let staging_dir = dest_root.open_dir_nofollow(name).map_err(|e| Error::io(e, "open", dest))?;
    let root = match staging_dir.open_dir_nofollow(std::ffi::OsStr::new(crate::reserved::TREE)) {
        Ok(root) => root,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
        Err(e) => return Err(Error::io(e, "open", dest)),
    };
    let opts = ExtractOptions { preserve_mtime, ..ExtractOptions::default() };
    let extractor = Extractor {
        dest,
        root,
        dest_root: dest_root.try_clone().map_err(|e| Error::io(e, "open", dest))?,
        opts: &opts,
        chain: Vec::new(),
        deferred_dirs,
        buffer: Vec::new(),
        budget: Budget::unlimited(),
        journal: None,
        known_links: None,
    };
    extractor.merge(&extractor.root, &extractor.dest_root)?;
    extractor.finish()
}

/// The journal of an extraction: `extract <preserve_mtime 0|1>\n`, then per deferred
/// directory `<mode octal> <mtime> <path relative to the destination>\0`.
fn encode_journal(preserve_mtime: bool, deferred: &[(String, u32, i64)]) -> Vec<u8> {
    let mut out = format!("extract {}\n", u8::from(preserve_mtime)).into_bytes();
    for (rel, mode, mtime) in deferred {
        out.extend_from_slice(format!("{mode:o} {mtime} {rel}\0").as_bytes());
    }
    out
}

type Deferred = Vec<(String, u32, i64)>;

fn decode_journal(journal: &[u8]) -> Option<(bool, Deferred)> {
    let text = std::str::from_utf8(journal).ok()?;
    let (head, rest) = text.split_once('\n')?;
    let preserve_mtime = match head {
        "extract 0" => false,
        "extract 1" => true,
        _ => return None,
    };
    let mut deferred = Vec::new();
    for record in rest.split_terminator('\0') {
        let mut fields = record.splitn(3, ' ');
        let mode = u32::from_str_radix(fields.next()?, 8).ok()?;
        let mtime = fields.next()?.parse().ok()?;
        let rel = fields.next()?;
        if rel.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
            return None;
        }
        deferred.push((rel.to_owned(), mode, mtime));
    }
    Some((preserve_mtime, deferred))
}

/// A member's destination, checked: the components under the root.
struct Target {
    components: Vec<String>,
    shown: String,
}

impl Target {
    fn parent(&self) -> &[String] {
        &self.components[..self.components.len().saturating_sub(1)]
    }

    fn file_name(&self) -> Result<CString> {
        let last = self.components.last().map(String::as_bytes).unwrap_or_default();
        c_name(last).map_err(|_| refuse(&self.shown, "the name contains a NUL byte"))
    }
}

/// Whether a member path or link target holds a name this library reserves.
fn holds_reserved(raw: &[u8]) -> bool {
    raw.split(|b| *b == b'/').any(reserved::is_reserved)
}

/// Splits and checks an archive path: UTF-8, relative, no `..`, no name this library
/// reserves ([`reserved`]); `.` and empty components dropped. An empty result names the
/// root itself.
fn check_path(raw: &[u8], member: &str, what: &str) -> Result<Vec<String>> {
    let text = std::str::from_utf8(raw).map_err(|_| {
        Error::new(codes::NON_UTF8_NAME, format!("archive member '{member}': {what} is not valid UTF-8 bytes"))
    })?;
    if text.contains('\0') {
        return Err(refuse(member, format!("the {what} contains a NUL byte")));
    }
    if text.starts_with('/') {
        return Err(refuse(member, format!("the {what} is an absolute path")));
    }
    let mut components = Vec::new();
    for component in text.split('/') {
        match component {
            "" | "." => {}
            ".." => return Err(refuse(member, format!("the {what} contains a '..' component"))),
            name if reserved::is_reserved(name.as_bytes()) => {
                return Err(refuse(member, format!("the {what} holds '{name}': {}", reserved::WHY)))
            }
            name => components.push(name.to_owned()),
        }
    }
    Ok(components)
}

/// Checks a symbolic link target for a link `depth` directories below the root: relative,
/// its `..` only leading and no more of them than `depth`.
fn check_symlink_target(target: &[u8], depth: usize, member: &str) -> Result<CString> {
    let text = std::str::from_utf8(target).map_err(|_| {
        Error::new(codes::NON_UTF8_NAME, format!("archive member '{member}': link target is not valid UTF-8 bytes"))
    })?;
    if text.is_empty() {
        return Err(refuse(member, "empty symbolic link target"));
    }
    if text.starts_with('/') {
        return Err(refuse(member, format!("symbolic link to the absolute path '{}'", shown(target))));
    }
    let mut climbs = 0;
    let mut after_name = false;
    for component in text.split('/') {
        match component {
            "" | "." => {}
            ".." if after_name => {
                return Err(refuse(member, format!("symbolic link target '{}' has '..' after a name", shown(target))))
            }
            ".." => climbs += 1,
            name if reserved::is_reserved(name.as_bytes()) => {
                return Err(refuse(
                    member,
                    format!("symbolic link target '{}' holds '{name}': {}", shown(target), reserved::WHY),
                ))
            }
            _ => after_name = true,
        }
    }
    if climbs > depth {
        return Err(refuse(
            member,
            format!("symbolic link target '{}' points outside the extraction root", shown(target)),
        ));
    }
    c_name(target).map_err(|_| refuse(member, "the link target contains a NUL byte"))
}

/// Applies members to the staging directory, then moves them into the destination.
pub(super) struct Extractor<'a> {
    /// The destination's path, for messages (members are named where they will land).
    dest: &'a Path,
    /// The staging directory the members are extracted into.
    root: Dir,
    /// The destination itself.
    dest_root: Dir,
    opts: &'a ExtractOptions,
    /// The open directories from the staging root down to the last member's parent, one per
    /// component: the next member reuses the prefix it shares, so placing a member costs the
    /// components that differ, not its depth.
    chain: Vec<(String, Dir)>,
    /// Directories whose mode and time are applied at the end: (`/`-joined path, mode, mtime).
    deferred_dirs: Vec<(String, u32, i64)>,
    buffer: Vec<u8>,
    /// The limits and the free-space guard.
    budget: Budget,
    /// The staging directory, where the journal goes before the first move (`None` when
    /// completing an interrupted extraction).
    journal: Option<&'a Dir>,
    /// The tree whose symbolic links vouch for escaping ones ([`ExtractOptions::known_links`]).
    known_links: Option<Dir>,
}

impl<'a> Extractor<'a> {
    /// An extractor of members into `root` (the staging tree, inside `staging`, where the
    /// journal goes) for the destination `dest_root` at `dest`.
    pub(super) fn new(
        dest: &'a Path,
        root: Dir,
        dest_root: Dir,
        opts: &'a ExtractOptions,
        budget: Budget,
        staging: &'a Dir,
    ) -> Self {
        Extractor {
            dest,
            root,
            dest_root,
            opts,
            chain: Vec::new(),
            deferred_dirs: Vec::new(),
            buffer: vec![0; COPY_BUFFER],
            budget,
            journal: Some(staging),
            known_links: None,
        }
    }

    /// The same extractor, with `known_links` vouching for escaping symbolic links.
    pub(super) fn vouched_by(mut self, known_links: Option<Dir>) -> Self {
        self.known_links = known_links;
        self
    }

    /// Whether the reference tree holds a symbolic link at `target`'s path whose target is
    /// exactly `link` (reached through directories only, never through a link).
    fn holds_same_link(&self, target: &Target, link: &[u8]) -> bool {
        let Some(reference) = &self.known_links else { return false };
        let Some((name, parents)) = target.components.split_last() else { return false };
        let mut dir = match reference.try_clone() {
            Ok(dir) => dir,
            Err(_) => return false,
        };
        for component in parents {
            dir = match dir.open_dir_nofollow(std::ffi::OsStr::new(component)) {
                Ok(next) => next,
                Err(_) => return false,
            };
        }
        dir.readlink(std::ffi::OsStr::new(name)).is_ok_and(|held| held.as_bytes() == link)
    }

    /// Extracts one member; `false` when it was skipped (the root's own entry; with
    /// [`super::ExtractOptions::skip_untransferable`], a special file or a reserved name).
    pub(super) fn apply(&mut self, member: &Member, archive: &mut ArchiveReader<'_>) -> Result<bool> {
        if self.opts.skip_untransferable && holds_reserved(&member.path) {
            return Ok(false);
        }
        let shown_name = shown(&member.path);
        let components = check_path(&member.path, &shown_name, "name")?;
        let mut typeflag = member.typeflag;
        if matches!(typeflag, kind::REGULAR | kind::REGULAR_OLD) && member.path.ends_with(b"/") {
            typeflag = kind::DIRECTORY; // old tars marked directories by the trailing slash only
        }
        if components.is_empty() {
            if typeflag == kind::DIRECTORY {
                return Ok(false); // `./`: never touch the root's own mode or time
            }
            return Err(refuse(&shown_name, "it names the extraction root itself"));
        }
        let target = Target { components, shown: shown_name };
        let special = matches!(typeflag, kind::CHAR_DEVICE | kind::BLOCK_DEVICE | kind::FIFO);
        let linked = matches!(typeflag, kind::SYMLINK | kind::HARD_LINK);
        if self.opts.skip_untransferable && (special || (linked && holds_reserved(&member.link))) {
            return Ok(false);
        }
        let data =
            if matches!(typeflag, kind::REGULAR | kind::REGULAR_OLD | kind::CONTIGUOUS) { member.size } else { 0 };
        self.budget.charge(&target.shown, data, &self.dest_root, self.dest)?;
        // Safe permission bits: no setuid, setgid or sticky bit.
        let mode = member.mode & 0o777;
        match typeflag {
            kind::DIRECTORY => self.directory(&target, mode, member.mtime)?,
            kind::REGULAR | kind::REGULAR_OLD | kind::CONTIGUOUS if !member.sparse => {
                self.regular(&target, mode, member.mtime, member.size, archive)?
            }
            kind::SYMLINK => self.symlink(&target, &member.link, member.mtime)?,
            kind::HARD_LINK => self.hard_link(&target, &member.link)?,
            kind::CHAR_DEVICE | kind::BLOCK_DEVICE => {
                return Err(refuse(&target.shown, "device files are not extracted"))
            }
            kind::FIFO => return Err(refuse(&target.shown, "FIFOs are not extracted")),
            _ if member.sparse || typeflag == b'S' => {
                return Err(refuse(&target.shown, "sparse files are not supported"))
            }
            other => return Err(refuse(&target.shown, format!("unsupported entry type '{}'", shown(&[other])))),
        }
        Ok(true)
    }

    /// The host path of some components, for I/O error messages.
    fn host_path(&self, components: &[impl AsRef<str>]) -> std::path::PathBuf {
        use std::os::unix::ffi::OsStrExt;
        let mut path = self.dest.as_os_str().to_os_string();
        path.reserve(components.iter().map(|c| c.as_ref().len() + 1).sum());
        for component in components {
            // As `Path::join` spells it: no doubled separator after a root such as `/` or `d/`.
            if !path.as_bytes().ends_with(b"/") {
                path.push("/");
            }
            path.push(component.as_ref());
        }
        path.into()
    }

    /// Opens the directory at `components` below `root` (the staging directory or the
    /// destination), creating missing ones when `create` is set and refusing to pass
    /// through a symbolic link.
    fn open_dir_in(&self, root: &Dir, components: &[String], create: bool, member: &str) -> Result<Dir> {
        let mut dir = root.try_clone().map_err(|e| Error::io(e, "open", self.dest))?;
        for index in 0..components.len() {
            dir = self.open_step(&dir, &components[..=index], create, member)?;
        }
        Ok(dir)
    }

    /// Opens the last of `here` (a directory's components) in `dir` (the directory of the
    /// ones before it), creating it when missing and `create` is set, refusing a symbolic
    /// link or a file there.
    fn open_step(&self, dir: &Dir, here: &[String], create: bool, member: &str) -> Result<Dir> {
        let component = here.last().expect("at least one component");
        let name = c_name(component.as_bytes()).map_err(|_| refuse(member, "the name contains a NUL byte"))?;
        match dir.node(&name).map_err(|e| Error::io(e, "lstat", &self.host_path(here)))? {
            Some(Node::Directory) => {}
            Some(Node::Symlink) => {
                return Err(refuse(
                    member,
                    format!("it would be written through the symbolic link '{}'", here.join("/")),
                ))
            }
            Some(_) => {
                let err = io::Error::from_raw_os_error(libc::ENOTDIR);
                return Err(Error::io(err, "mkdir", &self.host_path(here)));
            }
            None if create => match dir.mkdir(&name, 0o777) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
                Err(e) => return Err(Error::io(e, "mkdir", &self.host_path(here))),
            },
            None => {
                return Err(refuse(member, format!("hard link target directory '{}' does not exist", here.join("/"))))
            }
        }
        dir.open_dir_nofollow(&name).map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) | Some(libc::ENOTDIR) => {
                refuse(member, format!("it would be written through the symbolic link '{}'", here.join("/")))
            }
            _ => Error::io(e, "open", &self.host_path(here)),
        })
    }

    /// The member's parent directory in the staging tree, created as needed. The handles of
    /// the previous member's parent are reused down to the first component that differs;
    /// only the rest is opened, with every check of [`Self::open_step`]. A reused handle is
    /// never stale: a member only changes entries of its own parent, and the chain is cut
    /// back to that parent first, so no handle below it survives.
    fn take_parent(&mut self, target: &Target) -> Result<Dir> {
        let parent = target.parent();
        let shared = self.chain.iter().zip(parent).take_while(|((name, _), component)| name == *component).count();
        self.chain.truncate(shared);
        for index in shared..parent.len() {
            let next = {
                let below = self.chain.last().map_or(&self.root, |(_, dir)| dir);
                self.open_step(below, &parent[..=index], true, &target.shown)
            };
            match next {
                Ok(dir) => self.chain.push((parent[index].clone(), dir)),
                Err(err) => {
                    self.chain.clear();
                    return Err(err);
                }
            }
        }
        let dir = self.chain.last().map_or(&self.root, |(_, dir)| dir);
        dir.try_clone().map_err(|e| Error::io(e, "open", &self.host_path(parent)))
    }

    /// Clears the way for a new non-directory `name`: removes a file or link there, or an
    /// empty directory. Never follows anything.
    fn clear_slot(&self, parent: &Dir, name: &CString, target: &Target) -> Result<()> {
        let path = || self.host_path(&target.components);
        match parent.node(name).map_err(|e| Error::io(e, "lstat", &path()))? {
            None => Ok(()),
            Some(Node::Directory) => parent.rmdir(name).map_err(|e| Error::io(e, "rmdir", &path())),
            Some(_) => parent.unlink(name).map_err(|e| Error::io(e, "unlink", &path())),
        }
    }

    fn directory(&mut self, target: &Target, mode: u32, mtime: i64) -> Result<()> {
        let parent = self.take_parent(target)?;
        let name = target.file_name()?;
        let path = || self.host_path(&target.components);
        let result = (|| {
            match parent.node(&name).map_err(|e| Error::io(e, "lstat", &path()))? {
                Some(Node::Directory) => return Ok(()),
                // A link or file in the way is replaced, never followed.
                Some(_) => parent.unlink(&name).map_err(|e| Error::io(e, "unlink", &path()))?,
                None => {}
            }
            // Owner-accessible until the deferred mode is applied at the end.
            parent.mkdir(&name, 0o700).map_err(|e| Error::io(e, "mkdir", &path()))
        })();
        drop(parent);
        result?;
        self.deferred_dirs.push((target.components.join("/"), mode, mtime));
        Ok(())
    }

    fn regular(
        &mut self,
        target: &Target,
        mode: u32,
        mtime: i64,
        size: u64,
        archive: &mut ArchiveReader<'_>,
    ) -> Result<()> {
        let parent = self.take_parent(target)?;
        let name = target.file_name()?;
        let path = self.host_path(&target.components);
        let result = self.clear_slot(&parent, &name, target).and_then(|()| {
            let file = parent.create_new_file(&name, 0o600).map_err(|e| Error::io(e, "open", &path))?;
            let written = self.fill_file(file, &path, mode, mtime, size, archive);
            if written.is_err() {
                // Best effort: no partial file left behind.
                let _ = parent.unlink(&name);
            }
            written
        });
        drop(parent);
        result
    }

    /// Copies the member's data into the new `file`, then sets its mode and time.
    fn fill_file(
        &mut self,
        mut file: fs::File,
        path: &Path,
        mode: u32,
        mtime: i64,
        size: u64,
        archive: &mut ArchiveReader<'_>,
    ) -> Result<()> {
        let mut remaining = size;
        while remaining > 0 {
            let got = archive.read_data(&mut self.buffer)?;
            file.write_all(&self.buffer[..got]).map_err(|e| Error::io(e, "write", path))?;
            remaining -= got as u64;
        }
        fchmod(&file, mode).map_err(|e| Error::io(e, "chmod", path))?;
        if self.opts.preserve_mtime {
            futimens(&file, mtime).map_err(|e| Error::io(e, "utime", path))?;
        }
        Ok(())
    }

    fn symlink(&mut self, target: &Target, link: &[u8], mtime: i64) -> Result<()> {
        let link = match check_symlink_target(link, target.components.len() - 1, &target.shown) {
            Ok(checked) => checked,
            // An absolute or escaping target the host itself holds at this path: the link
            // came back as it went out. It is placed, never followed.
            Err(refused) if refused.code == codes::UNSAFE_ARCHIVE_ENTRY && self.holds_same_link(target, link) => {
                c_name(link).map_err(|_| refuse(&target.shown, "the link target contains a NUL byte"))?
            }
            Err(refused) => return Err(refused),
        };
        let parent = self.take_parent(target)?;
        let name = target.file_name()?;
        let path = self.host_path(&target.components);
        let result = (|| {
            self.clear_slot(&parent, &name, target)?;
            parent.symlink(&link, &name).map_err(|e| Error::io(e, "symlink", &path))?;
            if self.opts.preserve_mtime {
                // Not every file system can time a link; that is no reason to fail.
                let _ = parent.set_link_mtime(&name, mtime);
            }
            Ok(())
        })();
        drop(parent);
        result
    }

    fn hard_link(&mut self, target: &Target, link: &[u8]) -> Result<()> {
        let source = check_path(link, &target.shown, "hard link target")?;
        let Some((source_name, source_parent)) = source.split_last() else {
            return Err(refuse(&target.shown, "hard link to the extraction root"));
        };
        let source_name = c_name(source_name.as_bytes()).map_err(|_| refuse(&target.shown, "NUL in link target"))?;
        let source_path = self.host_path(&source);
        // An earlier member of this archive (staged), else a file the destination holds.
        let mut found = None;
        for root in [&self.root, &self.dest_root] {
            let looked = self.open_dir_in(root, source_parent, false, &target.shown).and_then(|dir| {
                let node = dir.node(&source_name).map_err(|e| Error::io(e, "lstat", &source_path))?;
                Ok((dir, node))
            });
            let hit = matches!(looked, Ok((_, Some(_))));
            found = Some(looked);
            if hit {
                break;
            }
        }
        let (source_dir, source_node) = found.expect("two roots were searched")?;
        let Some(Node::Regular { dev, ino }) = source_node else {
            let reason = match source_node {
                None => format!("hard link target '{}' does not exist", source.join("/")),
                Some(_) => format!("hard link target '{}' is not a regular file", source.join("/")),
            };
            return Err(refuse(&target.shown, reason));
        };
        let parent = self.take_parent(target)?;
        let name = target.file_name()?;
        let path = self.host_path(&target.components);
        let result = (|| {
            let existing = parent.node(&name).map_err(|e| Error::io(e, "lstat", &path))?;
            if existing == Some(Node::Regular { dev, ino }) {
                return Ok(()); // already that file (a link to itself, or extracted twice)
            }
            self.clear_slot(&parent, &name, target)?;
            parent.hard_link(&source_dir, &source_name, &name).map_err(|e| Error::io(e, "link", &path))
        })();
        drop(parent);
        result
    }

    /// Moves the staged tree into the destination once all of it was checked against what
    /// the destination holds, then applies the deferred directory modes and times there.
    pub(super) fn commit(mut self) -> Result<()> {
        self.chain.clear();
        let explicit: HashSet<&str> = self.deferred_dirs.iter().map(|(rel, _, _)| rel.as_str()).collect();
        self.check_merge(&self.root, &self.dest_root, &explicit)?;
        // From here on a killed process leaves the journal: the next extraction into this
        // destination completes the moves.
        if let Some(dir) = self.journal {
            let journal = encode_journal(self.opts.preserve_mtime, &self.deferred_dirs);
            staging::write_journal(dir, &journal).map_err(|e| Error::io(e, "write", self.dest))?;
        }
        self.merge(&self.root, &self.dest_root)?;
        self.finish()
    }

    /// The names in a staged directory.
    fn staged_names(&self, dir: &Dir, at: &[String]) -> Result<Vec<std::ffi::OsString>> {
        dir.names().map_err(|e| Error::io(e, "scandir", &self.host_path(at)))
    }

    /// Refuses, before anything moves, what extracting in place would have refused: members
    /// under a symbolic link or a file of the destination that no directory member of the
    /// archive replaces, and a non-directory member where the destination has a non-empty
    /// directory. Walks the staged tree with an explicit stack: no depth overflows the
    /// thread's stack.
    fn check_merge(&self, staged: &Dir, dest: &Dir, explicit: &HashSet<&str>) -> Result<()> {
        let mut at: Vec<String> = Vec::new();
        let open_err = |e| Error::io(e, "open", self.dest);
        let mut stack = vec![(
            staged.try_clone().map_err(open_err)?,
            dest.try_clone().map_err(open_err)?,
            self.staged_names(staged, &at)?.into_iter(),
        )];
        while let Some((_, _, names)) = stack.last_mut() {
            let Some(name) = names.next() else {
                stack.pop();
                at.pop();
                continue;
            };
            at.push(name.to_string_lossy().into_owned());
            let (staged, dest, _) = stack.last().expect("a frame was just looked at");
            match self.check_entry(staged, dest, &name, &at, explicit)? {
                Some(frame) => stack.push(frame),
                None => {
                    at.pop();
                }
            }
        }
        Ok(())
    }

    /// One entry of [`Self::check_merge`]: the staged and destination directories to descend
    /// into, with the staged names, when both are directories.
    fn check_entry(
        &self,
        staged: &Dir,
        dest: &Dir,
        name: &std::ffi::OsStr,
        at: &[String],
        explicit: &HashSet<&str>,
    ) -> Result<Option<(Dir, Dir, std::vec::IntoIter<std::ffi::OsString>)>> {
        let path = self.host_path(at);
        let staged_node = staged.node(name).map_err(|e| Error::io(e, "lstat", &path))?;
        let dest_node = dest.node(name).map_err(|e| Error::io(e, "lstat", &path))?;
        let open = |dir: &Dir| dir.open_dir_nofollow(name).map_err(|e| Error::io(e, "open", &path));
        let is_explicit = || explicit.contains(at.join("/").as_str());
        match (staged_node, dest_node) {
            (Some(Node::Directory), Some(Node::Directory)) => {
                let (inner_staged, inner_dest) = (open(staged)?, open(dest)?);
                let names = self.staged_names(&inner_staged, at)?;
                return Ok(Some((inner_staged, inner_dest, names.into_iter())));
            }
            // Only a directory member of its own replaces a link or file in the way.
            (Some(Node::Directory), Some(Node::Symlink)) if !is_explicit() => {
                let inner = self.staged_names(&open(staged)?, at)?;
                let member = match inner.first() {
                    Some(child) => format!("{}/{}", at.join("/"), child.to_string_lossy()),
                    None => at.join("/"),
                };
                let reason = format!("it would be written through the symbolic link '{}'", at.join("/"));
                return Err(refuse(&member, reason));
            }
            (Some(Node::Directory), Some(_)) if !is_explicit() => {
                return Err(Error::io(io::Error::from_raw_os_error(libc::ENOTDIR), "mkdir", &path));
            }
            (Some(staged_kind), Some(Node::Directory))
                if staged_kind != Node::Directory && !self.staged_names(&open(dest)?, at)?.is_empty() =>
            {
                let err = io::Error::from_raw_os_error(libc::ENOTEMPTY);
                return Err(Error::io(err, "rmdir", &path));
            }
            _ => {}
        }
        Ok(None)
    }

    /// Moves every staged entry into the destination: a rename each, replacing a file, link
    /// or empty directory in the way, merging into a directory that is already there (then
    /// removing the emptied staged one). An explicit stack, as in [`Self::check_merge`].
    fn merge(&self, staged: &Dir, dest: &Dir) -> Result<()> {
        let mut at: Vec<String> = Vec::new();
        let open_err = |e| Error::io(e, "open", self.dest);
        let mut stack = vec![(
            staged.try_clone().map_err(open_err)?,
            dest.try_clone().map_err(open_err)?,
            self.staged_names(staged, &at)?.into_iter(),
            None,
        )];
        while let Some((_, _, names, _)) = stack.last_mut() {
            let Some(name) = names.next() else {
                let (_, _, _, own_name) = stack.pop().expect("a frame was just looked at");
                if let (Some(own_name), Some((parent, _, _, _))) = (own_name, stack.last()) {
                    let path = self.host_path(&at);
                    parent.rmdir(&own_name).map_err(|e| Error::io(e, "rmdir", &path))?;
                }
                at.pop();
                continue;
            };
            at.push(name.to_string_lossy().into_owned());
            let (staged, dest, _, _) = stack.last().expect("a frame was just looked at");
            let path = self.host_path(&at);
            let staged_node = staged.node(&name).map_err(|e| Error::io(e, "lstat", &path))?;
            let dest_node = dest.node(&name).map_err(|e| Error::io(e, "lstat", &path))?;
            match (staged_node, dest_node) {
                (Some(Node::Directory), Some(Node::Directory)) => {
                    let open = |dir: &Dir| dir.open_dir_nofollow(&name).map_err(|e| Error::io(e, "open", &path));
                    let (inner_staged, inner_dest) = (open(staged)?, open(dest)?);
                    let names = self.staged_names(&inner_staged, &at)?;
                    stack.push((inner_staged, inner_dest, names.into_iter(), Some(name)));
                    continue;
                }
                (Some(Node::Directory), Some(_)) => {
                    dest.unlink(&name).map_err(|e| Error::io(e, "unlink", &path))?;
                    staged.rename(&name, dest, &name).map_err(|e| Error::io(e, "rename", &path))?;
                }
                (Some(_), Some(Node::Directory)) => {
                    dest.rmdir(&name).map_err(|e| Error::io(e, "rmdir", &path))?;
                    staged.rename(&name, dest, &name).map_err(|e| Error::io(e, "rename", &path))?;
                }
                _ => staged.rename(&name, dest, &name).map_err(|e| Error::io(e, "rename", &path))?,
            }
            at.pop();
        }
        Ok(())
    }

    /// Applies the deferred directory modes and times in the destination, deepest
    /// last-recorded first, each directory once (its last entry wins). A directory replaced
    /// since by something else is skipped: modes are never applied through a link.
    fn finish(mut self) -> Result<()> {
        let mut done: HashSet<String> = HashSet::new();
        let deferred = std::mem::take(&mut self.deferred_dirs);
        // The open destination directories of the last parent, reused as in `take_parent`.
        let mut chain: Vec<(&str, Dir)> = Vec::new();
        for (rel, mode, mtime) in deferred.iter().rev() {
            if !done.insert(rel.clone()) {
                continue;
            }
            let components: Vec<&str> = rel.split('/').collect();
            let Some((name, parent)) = components.split_last() else { continue };
            let shared = chain.iter().zip(parent).take_while(|((have, _), want)| have == *want).count();
            chain.truncate(shared);
            for component in &parent[shared..] {
                let below = chain.last().map_or(&self.dest_root, |(_, dir)| dir);
                match c_name(component.as_bytes()).and_then(|c| below.open_dir_nofollow(&c)) {
                    Ok(dir) => chain.push((component, dir)),
                    Err(_) => break,
                }
            }
            if chain.len() != parent.len() {
                continue;
            }
            let below = chain.last().map_or(&self.dest_root, |(_, dir)| dir);
            let Ok(name) = c_name(name.as_bytes()) else { continue };
            let Ok(dir) = below.open_dir_nofollow(&name) else { continue };
            let path = self.host_path(&components);
            dir.chmod(*mode).map_err(|e| Error::io(e, "chmod", &path))?;
            if self.opts.preserve_mtime {
                dir.set_mtime(*mtime).map_err(|e| Error::io(e, "utime", &path))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tar::extract::test_support::*;
    use crate::tar::testutil::*;

    #[test]
    fn archives_deeper_than_path_max_are_extracted_whole() {
        use std::ffi::OsStr;
        // 3 000 levels (a 6 000-byte path), a file every 100 levels, as GNU tar archives it.
        let mut archive = RawArchive::new();
        let mut rel = String::new();
        for level in 0..3000 {
            if level % 100 == 0 {
                archive.file(&format!("{rel}f"), format!("level {level}").as_bytes());
            }
            rel.push_str("d/");
            archive.dir(&rel, 0o755);
        }
        let sandbox = Sandbox::new();
        let archive = archive.finish();
        let summary = run(&archive, &sandbox.dest()).unwrap();
        assert_eq!(summary.entries, 3030);
        // Again over the extracted tree, so every level merges into an existing directory,
        // on a thread with a small stack: the merge walks with an explicit stack, not recursion.
        let dest = sandbox.dest();
        let again = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || run(&archive, &dest).map(|summary| summary.entries))
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(again.unwrap(), 3030);
        let mut dir = Dir::open(&sandbox.dest()).unwrap();
        for level in 0..3000 {
            let mut names = dir.names().unwrap();
            names.sort();
            let expected: &[&str] = if level % 100 == 0 { &["d", "f"] } else { &["d"] };
            assert_eq!(names, expected, "level {level}");
            if level % 100 == 0 {
                let mut text = String::new();
                io::Read::read_to_string(&mut dir.open_file_nofollow(OsStr::new("f")).unwrap(), &mut text).unwrap();
                assert_eq!(text, format!("level {level}"));
            }
            dir = dir.open_dir_nofollow(OsStr::new("d")).unwrap();
            assert_eq!(dir.metadata().unwrap().mode() & 0o7777, 0o755, "level {level}");
        }
        assert!(dir.names().unwrap().is_empty());
        Dir::open(sandbox.dest().parent().unwrap()).unwrap().remove_tree(OsStr::new("dest")).unwrap();
    }

    #[test]
    fn reused_parent_handles_never_write_through_a_replaced_directory() {
        // `a/b/c` is an open handle of the previous member's parent when a member replaces it
        // with a link; the next member below it must meet the link, not the old handle.
        let sandbox = Sandbox::new();
        let mut archive = RawArchive::new();
        archive.dir("a/", 0o755).dir("a/b/", 0o755).dir("a/b/c/", 0o755);
        archive.file("a/b/keep", b"k").symlink("a/b/c", "..").file("a/b/c/x", b"payload");
        let err = sandbox.refuses(&archive.finish(), codes::UNSAFE_ARCHIVE_ENTRY, "write through a replaced directory");
        assert!(err.message.contains("symbolic link 'a/b/c'"), "{}", err.message);
        assert_eq!(fs::read_dir(sandbox.dest()).unwrap().count(), 0);
    }

    #[test]
    fn escaping_links_the_host_holds_unchanged_are_placed_and_never_followed() {
        use std::os::unix::fs::symlink;
        let sandbox = Sandbox::new();
        let dest = sandbox.dest();
        let outside = sandbox.outside().to_string_lossy().into_owned();
        // What the host sent: a virtualenv's absolute links and a link out of the tree.
        fs::create_dir_all(dest.join("venv/bin")).unwrap();
        symlink("/usr/bin/python3", dest.join("venv/bin/python3")).unwrap();
        symlink("../../outside-target", dest.join("venv/up")).unwrap();
        symlink(&outside, dest.join("out")).unwrap();
        let mut back = RawArchive::new();
        back.dir("venv/", 0o755).dir("venv/bin/", 0o755).symlink("venv/bin/python3", "/usr/bin/python3");
        back.symlink("venv/up", "../../outside-target").symlink("out", &outside).file("venv/new.txt", b"agent");
        run(&back.finish(), &dest).unwrap();
        assert_eq!(fs::read_link(dest.join("venv/bin/python3")).unwrap(), Path::new("/usr/bin/python3"));
        assert_eq!(fs::read_link(dest.join("venv/up")).unwrap(), Path::new("../../outside-target"));
        assert_eq!(fs::read(dest.join("venv/new.txt")).unwrap(), b"agent");
        // Another target at the same path, or a new escaping link, is refused as before.
        let changed = RawArchive::new().symlink("venv/bin/python3", "/bin/sh").finish();
        sandbox.refuses(&changed, codes::UNSAFE_ARCHIVE_ENTRY, "a held link with another target");
        let new = RawArchive::new().symlink("venv/bin/pip", "/usr/bin/pip").finish();
        sandbox.refuses(&new, codes::UNSAFE_ARCHIVE_ENTRY, "a new absolute link");
        // A vouched link is still never written through.
        let through = RawArchive::new().symlink("out", &outside).file("out/x", b"evil").finish();
        sandbox.refuses(&through, codes::UNSAFE_ARCHIVE_ENTRY, "a write through a held link");
        assert!(!sandbox.outside().join("x").exists());
    }

    #[test]
    fn a_reference_tree_vouches_only_through_directories() {
        use std::os::unix::fs::symlink;
        let sandbox = Sandbox::new();
        let reference = sandbox.outside().join("workspace");
        fs::create_dir_all(reference.join("real")).unwrap();
        symlink("/usr/bin/python3", reference.join("real/python3")).unwrap();
        symlink("real", reference.join("alias")).unwrap();
        let opts = ExtractOptions { known_links: Some(reference.clone()), ..ExtractOptions::default() };
        let extract_with = |archive: &[u8]| {
            crate::tar::extract(archive, &sandbox.dest(), &opts, |_| {}, &std::sync::atomic::AtomicBool::new(false))
        };
        // Held in the reference tree (the destination is an empty staging directory).
        extract_with(&RawArchive::new().symlink("real/python3", "/usr/bin/python3").finish()).unwrap();
        assert_eq!(fs::read_link(sandbox.dest().join("real/python3")).unwrap(), Path::new("/usr/bin/python3"));
        // Reached through a symbolic link in the reference: not vouched.
        let err = extract_with(&RawArchive::new().symlink("alias/python3", "/usr/bin/python3").finish()).unwrap_err();
        assert_eq!(err.code, codes::UNSAFE_ARCHIVE_ENTRY, "{}", err.message);
    }

    #[test]
    fn refuses_escaping_names() {
        let sandbox = Sandbox::new();
        let outside = sandbox.outside().to_string_lossy().into_owned();
        for (what, archive) in escaping_names(&outside) {
            let err = sandbox.refuses(&archive, codes::UNSAFE_ARCHIVE_ENTRY, &what);
            if !what.contains("absolute") {
                assert!(err.message.contains("'..'"), "{}", err.message);
            }
        }
        assert!(!Path::new("/etc/paperclip-native-test").exists());
        // Checked before anything is created: the dest stays empty.
        assert_eq!(fs::read_dir(sandbox.dest()).unwrap().count(), 0);
    }

    #[test]
    fn refuses_escaping_symlinks_and_writes_through_links() {
        let sandbox = Sandbox::new();
        let outside = sandbox.outside().to_string_lossy().into_owned();
        for (what, archive) in escaping_symlinks(&outside) {
            sandbox.refuses(&archive, codes::UNSAFE_ARCHIVE_ENTRY, &what);
            assert!(!sandbox.dest().join("sub/x").exists());
        }
        // A link that was in the destination before is not written through either.
        std::os::unix::fs::symlink(sandbox.outside(), sandbox.dest().join("evil")).unwrap();
        let archive = RawArchive::new().file("evil/x", b"evil").finish();
        sandbox.refuses(&archive, codes::UNSAFE_ARCHIVE_ENTRY, "pre-existing link");
        let archive = RawArchive::new().file("evil/etc/deeper/x", b"evil").finish();
        sandbox.refuses(&archive, codes::UNSAFE_ARCHIVE_ENTRY, "pre-existing link, missing dirs");
    }

    #[test]
    fn inside_symlinks_are_extracted() {
        let sandbox = Sandbox::new();
        let archive = RawArchive::new()
            .dir("a/", 0o755)
            .dir("a/b/", 0o755)
            .file("a/b/f", b"f")
            .symlink("a/up", "..")
            .symlink("a/b/top", "../../a/b/f")
            .symlink("rel", "a/./b//f")
            .finish();
        run(&archive, &sandbox.dest()).unwrap();
        assert_eq!(fs::read_link(sandbox.dest().join("a/up")).unwrap(), Path::new(".."));
        assert_eq!(fs::read(sandbox.dest().join("a/b/top")).unwrap(), b"f");
        assert_eq!(fs::read(sandbox.dest().join("rel")).unwrap(), b"f");
    }

    #[test]
    fn refuses_bad_hard_links_and_special_files() {
        let sandbox = Sandbox::new();
        let outside = sandbox.outside().to_string_lossy().into_owned();
        for (what, archive) in bad_links_and_special_files(&outside) {
            sandbox.refuses(&archive, codes::UNSAFE_ARCHIVE_ENTRY, &what);
        }
        // A good hard link is a hard link.
        let archive = RawArchive::new().file("a", b"data").hard_link("h", "a").hard_link("a", "a").finish();
        run(&archive, &sandbox.dest()).unwrap();
        let a = fs::metadata(sandbox.dest().join("a")).unwrap();
        let h = fs::metadata(sandbox.dest().join("h")).unwrap();
        assert_eq!((a.ino(), a.nlink()), (h.ino(), 2));
    }

    #[test]
    fn special_files_and_reserved_names_are_left_out_when_asked() {
        let sandbox = Sandbox::new();
        let archive = RawArchive::new()
            .file("before", b"b")
            .entry(b'6', b"fifo", b"", 0o666, b"")
            .entry(b'3', b"tty", b"", 0o666, b"")
            .entry(b'4', b"disk", b"", 0o666, b"ignored data")
            .file("app/.paperclip-staging-key", b"a committed file of a reserved name")
            .symlink("to-key", "app/.paperclip-staging-key")
            .file("after", b"a")
            .finish();
        let opts = ExtractOptions { skip_untransferable: true, ..ExtractOptions::default() };
        let summary = run_with(&archive, &sandbox.dest(), &opts).unwrap();
        assert_eq!(summary.entries, 2);
        let mut names: Vec<_> = fs::read_dir(sandbox.dest()).unwrap().map(|e| e.unwrap().file_name()).collect();
        names.sort();
        assert_eq!(names, ["after", "before"]);
        assert_eq!(fs::read(sandbox.dest().join("after")).unwrap(), b"a");
        // Without the option the same archive is refused.
        let sandbox = Sandbox::new();
        sandbox.refuses(&archive, codes::UNSAFE_ARCHIVE_ENTRY, "special files");
    }

    #[test]
    fn links_and_files_in_the_way_are_replaced_never_followed() {
        let sandbox = Sandbox::new();
        let dest = sandbox.dest();
        // A link in the destination to an outside directory, then a directory entry of the
        // same name: the link is replaced, the outside directory keeps its mode.
        std::os::unix::fs::symlink(sandbox.outside(), dest.join("d")).unwrap();
        // A link to the outside sentinel, then a file entry of that name.
        std::os::unix::fs::symlink(sandbox.outside().join("sentinel"), dest.join("f")).unwrap();
        let outside_mode = fs::metadata(sandbox.outside()).unwrap().mode();
        let archive = RawArchive::new()
            .dir("d/", 0o700)
            .file("d/x", b"inside")
            .file("f", b"replaced")
            // An archive link replaced by a directory, then written into: lands in the
            // directory, not in the link's target.
            .dir("sub/", 0o755)
            .symlink("s", "sub")
            .dir("s/", 0o755)
            .file("s/y", b"in s")
            .finish();
        let before = sandbox.world();
        run(&archive, &dest).unwrap();
        assert_same_tree(&sandbox.world(), &before, "replacements");
        assert_eq!(fs::metadata(sandbox.outside()).unwrap().mode(), outside_mode);
        assert!(fs::symlink_metadata(dest.join("d")).unwrap().is_dir());
        assert_eq!(fs::read(dest.join("d/x")).unwrap(), b"inside");
        assert!(fs::symlink_metadata(dest.join("f")).unwrap().is_file());
        assert_eq!(fs::read(dest.join("f")).unwrap(), b"replaced");
        assert!(fs::symlink_metadata(dest.join("s")).unwrap().is_dir());
        assert_eq!(fs::read(dest.join("s/y")).unwrap(), b"in s");
        assert!(!dest.join("sub/y").exists());
        // A non-empty directory in the way of a file is an error, not a deletion.
        fs::create_dir_all(dest.join("full/child")).unwrap();
        let err = run(&RawArchive::new().file("full", b"x").finish(), &dest).unwrap_err();
        assert_eq!(err.code, "ENOTEMPTY");
        assert!(dest.join("full/child").is_dir());
        // A file where a directory is needed.
        fs::write(dest.join("plain"), b"").unwrap();
        let err = run(&RawArchive::new().file("plain/x", b"x").finish(), &dest).unwrap_err();
        assert_eq!(err.code, "ENOTDIR");
    }

    #[test]
    fn modes_are_safe_and_directories_are_finished_last() {
        let sandbox = Sandbox::new();
        let dest = sandbox.dest();
        fs::set_permissions(&dest, fs::Permissions::from_mode(0o700)).unwrap();
        let archive = RawArchive::new()
            .dir("./", 0o777)
            .entry(b'0', b"suid", b"", 0o4755, b"x")
            .entry(b'0', b"sgid", b"", 0o2750, b"x")
            .dir("sticky/", 0o1777)
            .dir("ro/", 0o555)
            .file("ro/inside", b"written before the mode")
            .finish();
        let summary = run(&archive, &dest).unwrap();
        assert_eq!(summary.entries, 5, "the ./ entry is not counted");
        let mode = |p: &str| fs::symlink_metadata(dest.join(p)).unwrap().mode() & 0o7777;
        assert_eq!(mode("suid"), 0o755);
        assert_eq!(mode("sgid"), 0o750);
        assert_eq!(mode("sticky"), 0o777);
        assert_eq!(mode("ro"), 0o555);
        assert_eq!(fs::read(dest.join("ro/inside")).unwrap(), b"written before the mode");
        assert_eq!(fs::metadata(&dest).unwrap().mode() & 0o7777, 0o700, "./ does not touch the root");
        assert_eq!(fs::metadata(dest.join("ro")).unwrap().mtime(), 1_600_000_000);
    }

    #[test]
    fn non_utf8_names_are_refused() {
        let sandbox = Sandbox::new();
        let archive = RawArchive::new().entry(b'0', b"bad\xff", b"", 0o644, b"").finish();
        sandbox.refuses(&archive, codes::NON_UTF8_NAME, "non-UTF-8 name");
        let archive = RawArchive::new().entry(b'2', b"l", b"t\xfe", 0o777, b"").finish();
        sandbox.refuses(&archive, codes::NON_UTF8_NAME, "non-UTF-8 link target");
    }

    #[test]
    fn extraction_merges_into_what_the_destination_holds() {
        let sandbox = Sandbox::new();
        let dest = sandbox.dest();
        fs::write(dest.join("keep.txt"), b"keep").unwrap();
        fs::create_dir(dest.join("d")).unwrap();
        fs::write(dest.join("d/old.txt"), b"old").unwrap();
        std::os::unix::fs::symlink("d", dest.join("ln")).unwrap();
        fs::write(dest.join("f"), b"before").unwrap();
        fs::create_dir(dest.join("empty")).unwrap();
        let archive = RawArchive::new()
            .dir("d/", 0o750)
            .file("d/new.txt", b"new")
            .dir("ln/", 0o755) // a directory member replaces the link in its place
            .file("ln/inside", b"inside")
            .file("f", b"after")
            .file("empty", b"a file where an empty directory was")
            .hard_link("hl", "keep.txt") // a file the destination already held
            .dir("fresh/", 0o705)
            .file("fresh/x", b"x")
            .finish();
        let summary = run(&archive, &dest).unwrap();
        assert_eq!(summary.entries, 9);
        assert_eq!(fs::read(dest.join("keep.txt")).unwrap(), b"keep");
        assert_eq!(fs::read(dest.join("d/old.txt")).unwrap(), b"old");
        assert_eq!(fs::read(dest.join("d/new.txt")).unwrap(), b"new");
        assert_eq!(fs::metadata(dest.join("d")).unwrap().mode() & 0o7777, 0o750);
        assert!(fs::symlink_metadata(dest.join("ln")).unwrap().is_dir());
        assert_eq!(fs::read(dest.join("ln/inside")).unwrap(), b"inside");
        assert!(!dest.join("d/inside").exists(), "written through the old link");
        assert_eq!(fs::read(dest.join("f")).unwrap(), b"after");
        assert!(fs::symlink_metadata(dest.join("empty")).unwrap().is_file());
        assert_eq!(fs::metadata(dest.join("hl")).unwrap().ino(), fs::metadata(dest.join("keep.txt")).unwrap().ino());
        assert_eq!(fs::metadata(dest.join("fresh")).unwrap().mode() & 0o7777, 0o705);
        assert_eq!(fs::metadata(dest.join("fresh")).unwrap().mtime(), 1_600_000_000);
        assert_eq!(staging_leftovers(&dest), Vec::<String>::new());
    }

    /// An extraction killed during its moves (simulated: a staging directory of a dead
    /// owner with its journal and part of its tree still staged) is completed by the next
    /// extraction into the destination; one killed before its journal is just removed.
    #[test]
    fn the_next_extraction_completes_an_interrupted_one() {
        let sandbox = Sandbox::new();
        let dest = sandbox.dest();
        fs::create_dir(dest.join("d")).unwrap();
        fs::write(dest.join("d/moved"), b"new").unwrap(); // already moved in
        fs::write(dest.join("old"), b"old").unwrap(); // still to be replaced
        let dead = crate::reserved::Owner { pid: dead_pid(), start: 0 };
        let staged = dest.join(staging::name_owned_by(STAGING_PREFIX, dead));
        fs::create_dir_all(staged.join("tree/d/deep")).unwrap();
        fs::write(staged.join("tree/d/deep/f"), b"deep").unwrap();
        fs::write(staged.join("tree/old"), b"new").unwrap();
        let deferred = vec![("d".to_string(), 0o750, 1_500_000_000), ("d/deep".to_string(), 0o700, 1_500_000_000)];
        fs::write(staged.join("journal"), encode_journal(true, &deferred)).unwrap();
        let killed_early = dest.join(staging::name_owned_by(STAGING_PREFIX, dead));
        fs::create_dir_all(killed_early.join("tree/half")).unwrap();
        fs::write(killed_early.join("tree/half/written"), b"x").unwrap();

        run(&RawArchive::new().file("other", b"o").finish(), &dest).unwrap();
        assert_eq!(staging_leftovers(&dest), Vec::<String>::new());
        assert_eq!(fs::read(dest.join("old")).unwrap(), b"new");
        assert_eq!(fs::read(dest.join("d/moved")).unwrap(), b"new");
        assert_eq!(fs::read(dest.join("d/deep/f")).unwrap(), b"deep");
        assert_eq!(fs::read(dest.join("other")).unwrap(), b"o");
        assert!(!dest.join("half").exists());
        let meta = fs::metadata(dest.join("d")).unwrap();
        assert_eq!((meta.mode() & 0o777, meta.mtime()), (0o750, 1_500_000_000));
        assert_eq!(decode_journal(&encode_journal(false, &deferred)), Some((false, deferred)));
        assert_eq!(decode_journal(b"extract 1\n644 0 ../x\0"), None);
    }

    /// A look-alike of an interrupted extraction that this host did not create (planted by
    /// hand, or left by a version whose names had no tag) is reported and left alone: its
    /// staged file is not moved in, and the extraction goes ahead.
    #[test]
    fn a_foreign_look_alike_is_reported_not_completed() {
        let sandbox = Sandbox::new();
        let dest = sandbox.dest();
        let planted = format!("{STAGING_PREFIX}{}-0-0123456789abcdef", dead_pid());
        fs::create_dir_all(dest.join(&planted).join("tree")).unwrap();
        fs::write(dest.join(&planted).join("tree/planted.sh"), b"#!/bin/sh\n").unwrap();
        fs::write(dest.join(&planted).join("journal"), b"extract 0\n").unwrap();
        let forged = format!("{STAGING_PREFIX}{}-0-{}", dead_pid(), "0123456789abcdef".repeat(2));
        fs::create_dir_all(dest.join(&forged).join("tree")).unwrap();
        fs::write(dest.join(&forged).join("tree/planted.sh"), b"#!/bin/sh\n").unwrap();
        fs::write(dest.join(&forged).join("journal"), b"extract 0\n").unwrap();
        let summary = run(&RawArchive::new().file("other", b"o").finish(), &dest).unwrap();
        let mut expected = vec![planted.clone(), forged.clone()];
        expected.sort();
        assert_eq!(summary.foreign_staging, expected);
        assert!(!dest.join("planted.sh").exists(), "a planted journal was obeyed");
        assert!(dest.join(&planted).join("tree/planted.sh").exists() && dest.join(&forged).join("journal").exists());
        assert_eq!(fs::read(dest.join("other")).unwrap(), b"o");
    }
}
