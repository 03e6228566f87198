//! Safe extraction of a tar (or gzip-compressed tar) stream into a directory.
//!
//! Every member is checked before anything is created for it, and nothing is created through
//! a symbolic link: all file-system calls are relative to directory handles opened with
//! `O_NOFOLLOW` ([`super::dirfd`]). Refused, with code `ERR_PAPERCLIP_NATIVE_UNSAFE_ARCHIVE_ENTRY`
//! and a message naming the member (never a host path):
//!
//! * absolute names and names with a `..` component;
//! * members whose parent directory, in the destination, is a symbolic link (whether the
//!   archive created it or it was there before): `link/etc/passwd` after `link -> /`;
//! * symbolic links with an absolute target, with more leading `..` than their depth, or with
//!   a `..` after a name (`a/b/..` could climb out through a link `a/b`);
//! * hard links whose target is outside the root, missing, or not a regular file;
//! * devices, FIFOs, sparse files and unknown entry types.
//!
//! Extraction follows `tar -xpf` otherwise: an existing file, link or empty directory in the
//! way of a member is replaced (never written through), an existing directory is kept,
//! permission bits are applied exactly but setuid, setgid and sticky bits are dropped,
//! modification times are restored, ownership is not. Directory modes and times are applied
//! at the end, so a read-only directory can still receive its members. A truncated or corrupt
//! archive fails with `ERR_PAPERCLIP_NATIVE_BAD_ARCHIVE`, including one that stops without
//! its end-of-archive blocks. Extraction is not atomic: members extracted before a failure
//! stay in the destination (inside it, never outside).

use std::collections::HashSet;
use std::ffi::CString;
use std::fs;
use std::io::{self, BufReader, Cursor, Read, Write};
use std::path::Path;
use std::sync::atomic::AtomicBool;

use flate2::read::MultiGzDecoder;

use super::dirfd::{c_name, fchmod, futimens, Dir, Node};
use super::header::{self, kind, padded, BLOCK};
use super::stream::{check_cancel, CountingReader, ReadState, COPY_BUFFER};
use crate::error::{codes, Error, Result};

/// Largest GNU long name, long link or pax header accepted (they are held in memory).
const MAX_METADATA: u64 = 1 << 20;

/// How to extract.
#[derive(Debug, Clone)]
pub struct ExtractOptions {
    /// Restore modification times from the archive (default `true`).
    pub preserve_mtime: bool,
}

impl Default for ExtractOptions {
    fn default() -> Self {
        ExtractOptions { preserve_mtime: true }
    }
}

/// What an extraction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtractSummary {
    /// Members extracted (the root's own `./` entry and pax/GNU metadata not counted).
    pub entries: u64,
    /// Bytes read from `reader` (compressed bytes for a gzip stream).
    pub bytes_read: u64,
}

/// Extracts the archive read from `reader` into `dest` (created if missing).
///
/// A gzip stream is recognised by its magic bytes. `progress` receives the running count of
/// bytes read from `reader`; `cancel` is checked on every read and every member, and once set
/// the call fails with [`Error::aborted`]. After the end-of-archive blocks the rest of the
/// input is read and discarded (so a gzip stream's checksum is verified).
pub fn extract<R: Read>(
    reader: R,
    dest: &Path,
    opts: &ExtractOptions,
    progress: impl FnMut(u64),
    cancel: &AtomicBool,
) -> Result<ExtractSummary> {
    check_cancel(cancel)?;
    fs::create_dir_all(dest).map_err(|e| Error::io(e, "mkdir", dest))?;
    let root = Dir::open(dest).map_err(|e| Error::io(e, "open", dest))?;
    let state = ReadState::default();
    let counting = CountingReader::new(reader, progress, cancel, &state);
    let source = decompressed(counting).map_err(|e| state.take_failure().unwrap_or_else(|| bad(e.to_string())))?;
    let mut archive = ArchiveReader { inner: source, state: &state, data_left: 0, pad_left: 0, seen_header: false };
    let mut extractor = Extractor {
        dest,
        root,
        opts,
        cached_parent: None,
        deferred_dirs: Vec::new(),
        buffer: vec![0; COPY_BUFFER],
    };
    let mut entries = 0;
    while let Some(member) = archive.next_member()? {
        check_cancel(cancel)?;
        if extractor.apply(&member, &mut archive)? {
            entries += 1;
        }
    }
    archive.drain()?;
    extractor.finish()?;
    Ok(ExtractSummary { entries, bytes_read: state.count() })
}

/// The `BAD_ARCHIVE` error.
fn bad(message: impl std::fmt::Display) -> Error {
    Error::new(codes::BAD_ARCHIVE, format!("invalid archive: {message}"))
}

/// The `UNSAFE_ARCHIVE_ENTRY` error for `member`.
fn refuse(member: &str, reason: impl std::fmt::Display) -> Error {
    Error::new(codes::UNSAFE_ARCHIVE_ENTRY, format!("refusing archive member '{member}': {reason}"))
}

/// A member name as shown in messages: lossy UTF-8 with control characters escaped.
fn shown(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw)
        .chars()
        .flat_map(|c| -> Box<dyn Iterator<Item = char>> {
            if c.is_control() {
                Box::new(c.escape_default())
            } else {
                Box::new(std::iter::once(c))
            }
        })
        .collect()
}

/// Wraps `source` in a gzip decoder when it starts with the gzip magic bytes.
fn decompressed<'a>(mut source: impl Read + 'a) -> io::Result<Box<dyn Read + 'a>> {
    let mut magic = Vec::with_capacity(2);
    while magic.len() < 2 {
        let mut byte = [0u8; 2];
        let want = 2 - magic.len();
        match source.read(&mut byte[..want]) {
            Ok(0) => break,
            Ok(n) => magic.extend_from_slice(&byte[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    let is_gzip = magic == [0x1f, 0x8b];
    let input = BufReader::with_capacity(COPY_BUFFER, Cursor::new(magic).chain(source));
    Ok(if is_gzip { Box::new(MultiGzDecoder::new(input)) } else { Box::new(input) })
}

/// One archive member, with GNU long names and pax records applied.
#[derive(Debug)]
struct Member {
    typeflag: u8,
    path: Vec<u8>,
    link: Vec<u8>,
    mode: u32,
    mtime: i64,
    size: u64,
    sparse: bool,
}

/// A streaming tar parser (GNU, ustar, pax, V7), bounded in memory.
struct ArchiveReader<'a> {
    inner: Box<dyn Read + 'a>,
    state: &'a ReadState,
    /// Unread data bytes of the current member, then its padding.
    data_left: u64,
    pad_left: u64,
    seen_header: bool,
}

/// Values from a pax extended header that override the next header's fields.
#[derive(Debug, Default)]
struct Pax {
    path: Option<Vec<u8>>,
    linkpath: Option<Vec<u8>>,
    size: Option<u64>,
    mtime: Option<i64>,
    sparse: bool,
}

impl ArchiveReader<'_> {
    /// An I/O error from below: the source's own error or the cancellation if that is what
    /// happened, else a decompression failure.
    fn failure(&self, err: io::Error) -> Error {
        self.state.take_failure().unwrap_or_else(|| bad(format!("corrupt compressed stream ({err})")))
    }

    /// Reads into `buf` until it is full or the input ends; returns the count.
    fn fill(&mut self, buf: &mut [u8]) -> Result<usize> {
        let mut filled = 0;
        while filled < buf.len() {
            match self.inner.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.failure(e)),
            }
        }
        Ok(filled)
    }

    /// Skips `count` bytes, which must be there.
    fn skip(&mut self, mut count: u64) -> Result<()> {
        let mut scratch = [0u8; 8 * BLOCK];
        while count > 0 {
            let want = count.min(scratch.len() as u64) as usize;
            if self.fill(&mut scratch[..want])? < want {
                return Err(bad("unexpected end of input inside a member (truncated archive)"));
            }
            count -= want as u64;
        }
        Ok(())
    }

    /// The next member, or `None` after the end-of-archive block.
    fn next_member(&mut self) -> Result<Option<Member>> {
        self.skip(self.data_left + self.pad_left)?;
        self.data_left = 0;
        self.pad_left = 0;
        let mut long_name: Option<Vec<u8>> = None;
        let mut long_link: Option<Vec<u8>> = None;
        let mut pax: Option<Pax> = None;
        loop {
            let mut block = [0u8; BLOCK];
            match self.fill(&mut block)? {
                BLOCK => {}
                0 if !self.seen_header => return Err(bad("empty input")),
                0 => return Err(bad("unexpected end of input: no end-of-archive marker (truncated archive)")),
                _ => return Err(bad("unexpected end of input inside a header (truncated archive)")),
            }
            if header::is_zero_block(&block) {
                if long_name.is_some() || long_link.is_some() || pax.is_some() {
                    return Err(bad("end of archive right after an extended header"));
                }
                // Zero blocks alone are an empty archive (what an empty tree packs to).
                return Ok(None);
            }
            let parsed = header::parse(&block).map_err(|err| {
                if self.seen_header {
                    bad(err)
                } else {
                    bad(format!("this does not look like a tar archive ({err})"))
                }
            })?;
            self.seen_header = true;
            match parsed.typeflag {
                kind::GNU_LONG_NAME => long_name = Some(trim_nuls(self.metadata(parsed.size)?)),
                kind::GNU_LONG_LINK => long_link = Some(trim_nuls(self.metadata(parsed.size)?)),
                kind::PAX_LOCAL => pax = Some(parse_pax(&self.metadata(parsed.size)?)?),
                kind::PAX_GLOBAL => {
                    parse_pax(&self.metadata(parsed.size)?)?;
                }
                kind::GNU_VOLUME_LABEL => self.skip(padded(parsed.size))?,
                _ => {
                    let pax = pax.take().unwrap_or_default();
                    let member = Member {
                        typeflag: parsed.typeflag,
                        path: pax.path.or(long_name.take()).unwrap_or(parsed.name),
                        link: pax.linkpath.or(long_link.take()).unwrap_or(parsed.link),
                        mode: parsed.mode,
                        mtime: pax.mtime.unwrap_or(parsed.mtime),
                        size: pax.size.unwrap_or(parsed.size),
                        sparse: pax.sparse,
                    };
                    self.data_left = member.size;
                    self.pad_left = padded(member.size) - member.size;
                    return Ok(Some(member));
                }
            }
        }
    }

    /// Reads a metadata member's data (and padding), bounded by [`MAX_METADATA`].
    fn metadata(&mut self, size: u64) -> Result<Vec<u8>> {
        if size > MAX_METADATA {
            return Err(bad(format!("extended header of {size} bytes exceeds the {MAX_METADATA}-byte limit")));
        }
        let mut data = vec![0u8; size as usize];
        if self.fill(&mut data)? < data.len() {
            return Err(bad("unexpected end of input inside an extended header (truncated archive)"));
        }
        self.skip(padded(size) - size)?;
        Ok(data)
    }

    /// Reads the current member's data; 0 at its end.
    fn read_data(&mut self, buf: &mut [u8]) -> Result<usize> {
        if self.data_left == 0 {
            return Ok(0);
        }
        let want = self.data_left.min(buf.len() as u64) as usize;
        loop {
            match self.inner.read(&mut buf[..want]) {
                Ok(0) => return Err(bad("unexpected end of input inside a member (truncated archive)")),
                Ok(n) => {
                    self.data_left -= n as u64;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.failure(e)),
            }
        }
    }

    /// Reads and discards the rest of the input.
    fn drain(&mut self) -> Result<()> {
        let mut scratch = [0u8; 8 * BLOCK];
        while self.fill(&mut scratch)? > 0 {}
        Ok(())
    }
}

/// Drops the NUL terminator(s) GNU tar stores after a long name.
fn trim_nuls(mut value: Vec<u8>) -> Vec<u8> {
    while value.last() == Some(&0) {
        value.pop();
    }
    value
}

/// Parses pax records (`"<length> <key>=<value>\n"`).
fn parse_pax(data: &[u8]) -> Result<Pax> {
    let malformed = || bad("malformed pax extended header");
    let mut pax = Pax::default();
    let mut rest = data;
    while !rest.is_empty() {
        if rest.iter().all(|&b| b == 0) {
            break; // some writers pad with NULs
        }
        let space = rest.iter().position(|&b| b == b' ').ok_or_else(malformed)?;
        let length: usize = std::str::from_utf8(&rest[..space])
            .ok()
            .and_then(|digits| digits.parse().ok())
            .ok_or_else(malformed)?;
        if length <= space + 1 || length > rest.len() || rest[length - 1] != b'\n' {
            return Err(malformed());
        }
        let record = &rest[space + 1..length - 1];
        rest = &rest[length..];
        let equals = record.iter().position(|&b| b == b'=').ok_or_else(malformed)?;
        let (key, value) = (&record[..equals], &record[equals + 1..]);
        match key {
            b"path" => pax.path = Some(value.to_vec()),
            b"linkpath" => pax.linkpath = Some(value.to_vec()),
            b"size" => pax.size = Some(parse_decimal(value).ok_or_else(malformed)?),
            b"mtime" => pax.mtime = Some(parse_pax_time(value).ok_or_else(malformed)?),
            key if key.starts_with(b"GNU.sparse.") => pax.sparse = true,
            _ => {}
        }
    }
    Ok(pax)
}

fn parse_decimal(value: &[u8]) -> Option<u64> {
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// A pax time (`"1700000000.25"`, `"-5"`) in whole seconds, rounded down.
fn parse_pax_time(value: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(value).ok()?;
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let seconds: i64 = whole.parse().ok()?;
    let has_fraction = fraction.bytes().any(|b| b != b'0');
    Some(if seconds < 0 || whole.starts_with('-') { seconds - i64::from(has_fraction) } else { seconds })
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

/// Splits and checks an archive path: UTF-8, relative, no `..`; `.` and empty components
/// dropped. An empty result names the root itself.
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
            _ => after_name = true,
        }
    }
    if climbs > depth {
        return Err(refuse(member, format!("symbolic link target '{}' points outside the extraction root", shown(target))));
    }
    c_name(target).map_err(|_| refuse(member, "the link target contains a NUL byte"))
}

/// Applies members to the destination.
struct Extractor<'a> {
    dest: &'a Path,
    root: Dir,
    opts: &'a ExtractOptions,
    /// The parent directory of the last member, which the next one usually shares.
    cached_parent: Option<(Vec<String>, Dir)>,
    /// Directories whose mode and time are applied at the end: (components, mode, mtime).
    deferred_dirs: Vec<(Vec<String>, u32, i64)>,
    buffer: Vec<u8>,
}

impl Extractor<'_> {
    /// Extracts one member; `false` when it was skipped (the root's own entry).
    fn apply(&mut self, member: &Member, archive: &mut ArchiveReader<'_>) -> Result<bool> {
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
            other => {
                return Err(refuse(&target.shown, format!("unsupported entry type '{}'", shown(&[other]))))
            }
        }
        Ok(true)
    }

    /// The host path of some components, for I/O error messages.
    fn host_path(&self, components: &[String]) -> std::path::PathBuf {
        components.iter().fold(self.dest.to_path_buf(), |path, c| path.join(c))
    }

    /// Opens the directory at `components`, creating missing ones when `create` is set and
    /// refusing to pass through a symbolic link.
    fn open_dir(&self, components: &[String], create: bool, member: &str) -> Result<Dir> {
        let mut dir = self.root.duplicate().map_err(|e| Error::io(e, "open", self.dest))?;
        for (index, component) in components.iter().enumerate() {
            let here = &components[..=index];
            let name = c_name(component.as_bytes()).map_err(|_| refuse(member, "the name contains a NUL byte"))?;
            match dir.lstat(&name).map_err(|e| Error::io(e, "lstat", &self.host_path(here)))? {
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
            dir = dir.open_dir(&name).map_err(|e| match e.raw_os_error() {
                Some(libc::ELOOP) | Some(libc::ENOTDIR) => refuse(
                    member,
                    format!("it would be written through the symbolic link '{}'", here.join("/")),
                ),
                _ => Error::io(e, "open", &self.host_path(here)),
            })?;
        }
        Ok(dir)
    }

    /// The member's parent directory, created as needed; hand it back with [`Self::keep_parent`].
    fn take_parent(&mut self, target: &Target) -> Result<Dir> {
        if let Some((components, dir)) = self.cached_parent.take() {
            if components == target.parent() {
                return Ok(dir);
            }
        }
        self.open_dir(target.parent(), true, &target.shown)
    }

    fn keep_parent(&mut self, target: &Target, dir: Dir) {
        self.cached_parent = Some((target.parent().to_vec(), dir));
    }

    /// Clears the way for a new non-directory `name`: removes a file or link there, or an
    /// empty directory. Never follows anything.
    fn clear_slot(&self, parent: &Dir, name: &CString, target: &Target) -> Result<()> {
        let path = || self.host_path(&target.components);
        match parent.lstat(name).map_err(|e| Error::io(e, "lstat", &path()))? {
            None => Ok(()),
            Some(Node::Directory) => parent.remove(name, true).map_err(|e| Error::io(e, "rmdir", &path())),
            Some(_) => parent.remove(name, false).map_err(|e| Error::io(e, "unlink", &path())),
        }
    }

    fn directory(&mut self, target: &Target, mode: u32, mtime: i64) -> Result<()> {
        let parent = self.take_parent(target)?;
        let name = target.file_name()?;
        let path = || self.host_path(&target.components);
        let result = (|| {
            match parent.lstat(&name).map_err(|e| Error::io(e, "lstat", &path()))? {
                Some(Node::Directory) => return Ok(()),
                // A link or file in the way is replaced, never followed.
                Some(_) => parent.remove(&name, false).map_err(|e| Error::io(e, "unlink", &path()))?,
                None => {}
            }
            // Owner-accessible until the deferred mode is applied at the end.
            parent.mkdir(&name, 0o700).map_err(|e| Error::io(e, "mkdir", &path()))
        })();
        self.keep_parent(target, parent);
        result?;
        self.deferred_dirs.push((target.components.clone(), mode, mtime));
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
        let result = self.write_file(&parent, &name, target, mode, mtime, size, archive);
        if result.is_err() {
            // Best effort: do not leave a partial file behind.
            let _ = parent.remove(&name, false);
        }
        self.keep_parent(target, parent);
        result
    }

    #[allow(clippy::too_many_arguments)]
    fn write_file(
        &mut self,
        parent: &Dir,
        name: &CString,
        target: &Target,
        mode: u32,
        mtime: i64,
        size: u64,
        archive: &mut ArchiveReader<'_>,
    ) -> Result<()> {
        let path = self.host_path(&target.components);
        self.clear_slot(parent, name, target)?;
        let mut file = parent.create_file(name, 0o600).map_err(|e| Error::io(e, "open", &path))?;
        let mut remaining = size;
        while remaining > 0 {
            let got = archive.read_data(&mut self.buffer)?;
            file.write_all(&self.buffer[..got]).map_err(|e| Error::io(e, "write", &path))?;
            remaining -= got as u64;
        }
        fchmod(&file, mode).map_err(|e| Error::io(e, "chmod", &path))?;
        if self.opts.preserve_mtime {
            futimens(&file, mtime).map_err(|e| Error::io(e, "utime", &path))?;
        }
        Ok(())
    }

    fn symlink(&mut self, target: &Target, link: &[u8], mtime: i64) -> Result<()> {
        let link = check_symlink_target(link, target.components.len() - 1, &target.shown)?;
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
        self.keep_parent(target, parent);
        result
    }

    fn hard_link(&mut self, target: &Target, link: &[u8]) -> Result<()> {
        let source = check_path(link, &target.shown, "hard link target")?;
        let Some((source_name, source_parent)) = source.split_last() else {
            return Err(refuse(&target.shown, "hard link to the extraction root"));
        };
        let source_dir = self.open_dir(source_parent, false, &target.shown)?;
        let source_name = c_name(source_name.as_bytes()).map_err(|_| refuse(&target.shown, "NUL in link target"))?;
        let source_path = self.host_path(&source);
        let source_node = source_dir.lstat(&source_name).map_err(|e| Error::io(e, "lstat", &source_path))?;
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
            let existing = parent.lstat(&name).map_err(|e| Error::io(e, "lstat", &path))?;
            if existing == Some(Node::Regular { dev, ino }) {
                return Ok(()); // already that file (a link to itself, or extracted twice)
            }
            self.clear_slot(&parent, &name, target)?;
            parent.hard_link(&source_dir, &source_name, &name).map_err(|e| Error::io(e, "link", &path))
        })();
        self.keep_parent(target, parent);
        result
    }

    /// Applies the deferred directory modes and times, deepest last-recorded first, each
    /// directory once (its last entry wins). A directory replaced since by something else is
    /// skipped: modes are never applied through a link.
    fn finish(mut self) -> Result<()> {
        self.cached_parent = None;
        let mut done: HashSet<Vec<String>> = HashSet::new();
        let deferred = std::mem::take(&mut self.deferred_dirs);
        for (components, mode, mtime) in deferred.into_iter().rev() {
            if !done.insert(components.clone()) {
                continue;
            }
            let (name, parent_components) = match components.split_last() {
                Some(split) => split,
                None => continue,
            };
            let Ok(parent) = self.open_existing(parent_components) else { continue };
            let Ok(name) = c_name(name.as_bytes()) else { continue };
            let Ok(dir) = parent.open_dir(&name) else { continue };
            let path = self.host_path(&components);
            dir.chmod(mode).map_err(|e| Error::io(e, "chmod", &path))?;
            if self.opts.preserve_mtime {
                dir.set_mtime(mtime).map_err(|e| Error::io(e, "utime", &path))?;
            }
        }
        Ok(())
    }

    /// Opens existing directories only, through no link.
    fn open_existing(&self, components: &[String]) -> io::Result<Dir> {
        let mut dir = self.root.duplicate()?;
        for component in components {
            dir = dir.open_dir(&c_name(component.as_bytes())?)?;
        }
        Ok(dir)
    }
}
