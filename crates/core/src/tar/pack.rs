//! Writing a directory as a tar stream: the members `tar -c --no-xattrs [-h] -C root
//! --exclude ._* --exclude <each> -- <top-level names>` would archive, in GNU format.

use std::collections::HashMap;
use std::ffi::CStr;
use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use flate2::write::GzEncoder;
use flate2::Compression;

use super::exclude::TarExcludeSet;
use super::header::{self, kind, long_entry, long_entry_cost, padded, HeaderSpec, BLOCK, NAME_FIELD};
use super::stream::{stream_error, CountingWriter, WriteFailure, COPY_BUFFER};
use super::walk::{self, EntryKind, Walk, WalkEntry};
use crate::error::{codes, Error, Result};

/// The exclude pattern every upstream tar invocation starts with (macOS AppleDouble files).
pub const APPLE_DOUBLE_EXCLUDE: &str = "._*";

/// The two zero blocks that end every archive; also the whole of an empty one.
const END_OF_ARCHIVE: [u8; 2 * BLOCK] = [0; 2 * BLOCK];

/// What to archive and how.
#[derive(Debug, Clone, Default)]
pub struct PackOptions {
    /// The directory whose entries are archived (tar's `-C`). The directory itself gets no
    /// entry (no `./`).
    pub root: PathBuf,
    /// `--exclude` values with GNU tar's semantics ([`super::TarExcludeSet`]), after the
    /// implicit `._*`.
    pub exclude: Vec<String>,
    /// Dereference symbolic links (`tar -h`): archive what they point to. A cycle is an
    /// error with code `ERR_PAPERCLIP_NATIVE_SYMLINK_LOOP`; a dangling link fails with
    /// `ENOENT`, as `tar -h` fails.
    pub follow_symlinks: bool,
    /// The top-level names to archive, in this order (the names upstream passes after `--`,
    /// sorted by the caller, e.g. with `localeCompare`). Each must be a single file name.
    /// `None`: every entry of `root`, in byte order.
    pub top_level_order: Option<Vec<String>>,
    /// Compress with gzip at this level (0–9). `None`: a plain tar stream.
    pub gzip: Option<u32>,
}

/// What a pack wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackSummary {
    /// Members archived.
    pub entries: u64,
    /// Size of the uncompressed tar stream.
    pub tar_bytes: u64,
}

/// Writes the archive of `opts.root` to `writer`.
///
/// The stream is produced with fixed-size buffers: file contents are copied 64 KiB at a
/// time, never held whole. `progress` receives the running count of *uncompressed* tar bytes
/// produced (the unit of [`precompute_size`]), after every write. `cancel` is checked before
/// every write and every member; once it is set the call fails with [`Error::aborted`].
///
/// Member names are UTF-8 (`ERR_PAPERCLIP_NATIVE_NON_UTF8_NAME` otherwise), headers are GNU
/// format (long names and link targets through `././@LongLink` entries, base-256 numbers when
/// octal overflows), without pax or xattr records. Hard links are stored as regular files,
/// sockets are skipped, FIFOs and devices are archived as tar does. An empty selection
/// writes exactly 1024 zero bytes. The writer is flushed at the end.
pub fn pack<W: Write>(
    opts: &PackOptions,
    writer: W,
    progress: impl FnMut(u64),
    cancel: &AtomicBool,
) -> Result<PackSummary> {
    pack_to(opts, writer, progress, cancel, &[], None).map(|(summary, _)| summary)
}

/// The exact size in bytes of the uncompressed stream [`pack`] would write now, from a walk
/// that reads metadata only. Files that change between this call and the pack make the
/// figures differ.
pub fn precompute_size(opts: &PackOptions) -> Result<u64> {
    let never = AtomicBool::new(false);
    let plan = Plan::new(opts)?;
    let mut total = END_OF_ARCHIVE.len() as u64;
    plan.walk(opts, &[], &never).run(|entry| {
        total += entry_size(entry);
        Ok(())
    })?;
    Ok(total)
}

/// Packs into the file `path`: writes a temporary file beside it and renames it into place
/// only on success, so `path` is either untouched or complete. On failure (cancellation
/// included) the temporary file is removed. Like GNU tar, the archive never contains
/// itself when `path` lies inside `opts.root`.
pub fn pack_to_file(
    opts: &PackOptions,
    path: &Path,
    progress: impl FnMut(u64),
    cancel: &AtomicBool,
) -> Result<PackSummary> {
    let temp = TempFile::create_beside(path)?;
    let file_meta = temp.file.metadata().map_err(|e| Error::io(e, "fstat", &temp.path))?;
    let mut skip = vec![(file_meta.dev(), file_meta.ino())];
    if let Ok(existing) = fs::metadata(path) {
        skip.push((existing.dev(), existing.ino()));
    }
    let file = temp.file.try_clone().map_err(|e| Error::io(e, "open", &temp.path))?;
    let (summary, _) = pack_to(opts, file, progress, cancel, &skip, Some(&temp.path))?;
    temp.persist(path)?;
    Ok(summary)
}

/// The bytes one member takes in the stream: header, long-name entries, padded data.
fn entry_size(entry: &WalkEntry<'_>) -> u64 {
    let name_len = entry.member.len() + usize::from(entry.kind == EntryKind::Directory);
    let extra = match &entry.kind {
        EntryKind::File { size } => padded(*size),
        EntryKind::Symlink { target } => long_entry_cost(target.len()),
        _ => 0,
    };
    BLOCK as u64 + long_entry_cost(name_len) + extra
}

/// The walk settings derived from the options.
struct Plan {
    excludes: TarExcludeSet,
    top_level: Vec<String>,
}

impl Plan {
    fn new(opts: &PackOptions) -> Result<Plan> {
        let mut excludes = TarExcludeSet::new(&[APPLE_DOUBLE_EXCLUDE]);
        for pattern in &opts.exclude {
            excludes.push(pattern);
        }
        let top_level = match &opts.top_level_order {
            Some(names) => {
                walk::check_top_level(names)?;
                names.clone()
            }
            None => walk::read_names(&opts.root)?,
        };
        Ok(Plan { excludes, top_level })
    }

    fn walk<'a>(&'a self, opts: &'a PackOptions, skip: &'a [(u64, u64)], cancel: &'a AtomicBool) -> Walk<'a> {
        Walk {
            root: &opts.root,
            excludes: &self.excludes,
            follow_symlinks: opts.follow_symlinks,
            top_level: &self.top_level,
            skip,
            cancel,
        }
    }
}

/// The output stack: buffered, optionally gzip-compressed, counted.
enum Sink<W: Write> {
    Plain(BufWriter<W>),
    Gzip(GzEncoder<BufWriter<W>>),
}

impl<W: Write> Write for Sink<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Sink::Plain(w) => w.write(buf),
            Sink::Gzip(w) => w.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::Plain(w) => w.flush(),
            Sink::Gzip(w) => w.flush(),
        }
    }
}

impl<W: Write> Sink<W> {
    /// Ends the gzip stream, flushes every layer and hands the writer back.
    fn finish(self) -> std::io::Result<W> {
        let buffered = match self {
            Sink::Plain(w) => w,
            Sink::Gzip(w) => w.finish()?,
        };
        let mut inner = buffered.into_inner().map_err(|e| e.into_error())?;
        inner.flush()?;
        Ok(inner)
    }
}

/// The tar writer: member encoding over a counted sink.
struct TarOut<'a, W: Write, P: FnMut(u64)> {
    out: CountingWriter<'a, Sink<W>, P>,
    /// The file being written, for error messages.
    target: Option<&'a Path>,
    follow_symlinks: bool,
    owners: OwnerNames,
    buffer: Vec<u8>,
}

impl<W: Write, P: FnMut(u64)> TarOut<'_, W, P> {
    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        self.out.put(bytes).map_err(|failure| match failure {
            WriteFailure::Aborted => Error::aborted(),
            WriteFailure::Io(err) => stream_error(err, "write", self.target),
        })
    }

    /// Zero bytes that complete a block after `len` bytes of data.
    fn pad(&mut self, len: u64) -> Result<()> {
        let fill = (padded(len) - len) as usize;
        if fill > 0 {
            self.put(&[0u8; BLOCK][..fill])?;
        }
        Ok(())
    }

    /// A `././@LongLink` entry when `value` does not fit a header field.
    fn long_value(&mut self, typeflag: u8, value: &[u8]) -> Result<()> {
        if value.len() > NAME_FIELD {
            self.put(&long_entry(typeflag, value))?;
            self.put(value)?;
            self.pad(value.len() as u64)?; // the NUL terminator is part of the padding
        }
        Ok(())
    }

    fn member(&mut self, entry: &WalkEntry<'_>) -> Result<()> {
        let mut name = entry.member.as_bytes().to_vec();
        let (typeflag, link, device): (u8, &[u8], Option<u64>) = match &entry.kind {
            EntryKind::Directory => {
                name.push(b'/');
                (kind::DIRECTORY, b"", None)
            }
            EntryKind::File { .. } => (kind::REGULAR, b"", None),
            EntryKind::Symlink { target } => (kind::SYMLINK, target, None),
            EntryKind::Fifo => (kind::FIFO, b"", None),
            EntryKind::CharDevice { rdev } => (kind::CHAR_DEVICE, b"", Some(*rdev)),
            EntryKind::BlockDevice { rdev } => (kind::BLOCK_DEVICE, b"", Some(*rdev)),
        };
        // Open a file before writing anything for it, so an unreadable file fails cleanly,
        // and take its size from the open file so header and data agree.
        let mut file = match entry.kind {
            EntryKind::File { .. } => Some(open_regular(entry, self.follow_symlinks)?),
            _ => None,
        };
        let size = file.as_ref().map_or(0, |(_, size)| *size);
        self.long_value(kind::GNU_LONG_NAME, &name)?;
        self.long_value(kind::GNU_LONG_LINK, link)?;
        let uname = self.owners.user(entry.uid).to_vec();
        let gname = self.owners.group(entry.gid).to_vec();
        let block = header::encode(&HeaderSpec {
            name: &name,
            link,
            typeflag,
            mode: entry.mode,
            uid: u64::from(entry.uid),
            gid: u64::from(entry.gid),
            size,
            mtime: entry.mtime,
            uname: &uname,
            gname: &gname,
            device: device.map(split_device),
        });
        self.put(&block)?;
        if let Some((file, size)) = file.as_mut() {
            self.copy_data(file, *size, entry)?;
        }
        Ok(())
    }

    /// Copies exactly `size` bytes of `file`, then the block padding.
    fn copy_data(&mut self, file: &mut File, size: u64, entry: &WalkEntry<'_>) -> Result<()> {
        let mut buffer = std::mem::take(&mut self.buffer);
        let result = (|| {
            let mut remaining = size;
            while remaining > 0 {
                let want = remaining.min(buffer.len() as u64) as usize;
                let got = match file.read(&mut buffer[..want]) {
                    Ok(0) => {
                        return Err(Error::new(
                            codes::FILE_CHANGED,
                            format!(
                                "'{}' shrank by {remaining} bytes while it was being archived",
                                entry.member
                            ),
                        ))
                    }
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(Error::io(e, "read", entry.path)),
                };
                self.put(&buffer[..got])?;
                remaining -= got as u64;
            }
            self.pad(size)
        })();
        self.buffer = buffer;
        result
    }
}

/// Opens a member that the walk saw as a regular file, without following a symlink swapped
/// in since (unless links are followed) and without blocking on a FIFO swapped in; returns it
/// with its current size.
fn open_regular(entry: &WalkEntry<'_>, follow_symlinks: bool) -> Result<(File, u64)> {
    let mut flags = libc::O_NONBLOCK | libc::O_CLOEXEC;
    if !follow_symlinks {
        flags |= libc::O_NOFOLLOW;
    }
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(entry.path)
        .map_err(|e| Error::io(e, "open", entry.path))?;
    let meta = file.metadata().map_err(|e| Error::io(e, "fstat", entry.path))?;
    if !meta.is_file() {
        return Err(Error::new(
            codes::FILE_CHANGED,
            format!("'{}' is no longer a regular file", entry.member),
        ));
    }
    Ok((file, meta.len()))
}

/// Major and minor numbers of a device id.
fn split_device(rdev: u64) -> (u64, u64) {
    let dev = rdev as libc::dev_t;
    (libc::major(dev) as u64, libc::minor(dev) as u64)
}

/// Writes the whole archive to `writer`.
fn pack_to<W: Write>(
    opts: &PackOptions,
    writer: W,
    progress: impl FnMut(u64),
    cancel: &AtomicBool,
    skip: &[(u64, u64)],
    target: Option<&Path>,
) -> Result<(PackSummary, W)> {
    let sink = match opts.gzip {
        None => Sink::Plain(BufWriter::with_capacity(COPY_BUFFER, writer)),
        Some(level @ 0..=9) => Sink::Gzip(GzEncoder::new(
            BufWriter::with_capacity(COPY_BUFFER, writer),
            Compression::new(level),
        )),
        Some(level) => {
            return Err(Error::new(
                codes::INVALID_ARGUMENT,
                format!("gzip level {level} is out of range 0-9"),
            ))
        }
    };
    let plan = Plan::new(opts)?;
    let mut tar = TarOut {
        out: CountingWriter::new(sink, progress, cancel),
        target,
        follow_symlinks: opts.follow_symlinks,
        owners: OwnerNames::default(),
        buffer: vec![0; COPY_BUFFER],
    };
    let mut entries = 0;
    plan.walk(opts, skip, cancel).run(|entry| {
        tar.member(entry)?;
        entries += 1;
        Ok(())
    })?;
    tar.put(&END_OF_ARCHIVE)?;
    let tar_bytes = tar.out.count();
    let writer = tar
        .out
        .into_inner()
        .finish()
        .map_err(|e| stream_error(e, "write", target))?;
    Ok((PackSummary { entries, tar_bytes }, writer))
}

/// User and group names for uid/gid, looked up once each (GNU tar fills them in too).
#[derive(Default)]
struct OwnerNames {
    users: HashMap<u32, Vec<u8>>,
    groups: HashMap<u32, Vec<u8>>,
}

impl OwnerNames {
    fn user(&mut self, uid: u32) -> &[u8] {
        self.users.entry(uid).or_insert_with(|| lookup_user(uid))
    }

    fn group(&mut self, gid: u32) -> &[u8] {
        self.groups.entry(gid).or_insert_with(|| lookup_group(gid))
    }
}

/// Calls a `get*_r` function with a growing buffer; the name, or empty when there is none.
fn lookup_name(mut call: impl FnMut(&mut [libc::c_char]) -> (libc::c_int, Option<*const libc::c_char>)) -> Vec<u8> {
    let mut buffer: Vec<libc::c_char> = vec![0; 1024];
    loop {
        let (rc, name) = call(&mut buffer);
        if rc == libc::ERANGE && buffer.len() < 1 << 20 {
            buffer.resize(buffer.len() * 2, 0);
            continue;
        }
        return match name {
            // SAFETY: on success the name points into `buffer`, NUL-terminated.
            Some(ptr) if rc == 0 && !ptr.is_null() => unsafe { CStr::from_ptr(ptr) }.to_bytes().to_vec(),
            _ => Vec::new(),
        };
    }
}

fn lookup_user(uid: u32) -> Vec<u8> {
    lookup_name(|buffer| {
        // SAFETY: `passwd` is plain data; getpwuid_r writes it and points `result` at it.
        let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        let rc = unsafe {
            libc::getpwuid_r(uid, &mut entry, buffer.as_mut_ptr(), buffer.len(), &mut result)
        };
        (rc, (!result.is_null()).then_some(entry.pw_name as *const libc::c_char))
    })
}

fn lookup_group(gid: u32) -> Vec<u8> {
    lookup_name(|buffer| {
        // SAFETY: as for `lookup_user`, with getgrgid_r.
        let mut entry: libc::group = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::group = std::ptr::null_mut();
        let rc = unsafe {
            libc::getgrgid_r(gid, &mut entry, buffer.as_mut_ptr(), buffer.len(), &mut result)
        };
        (rc, (!result.is_null()).then_some(entry.gr_name as *const libc::c_char))
    })
}

/// A temporary file beside a target, removed on drop unless persisted.
struct TempFile {
    path: PathBuf,
    file: File,
    persisted: bool,
}

impl TempFile {
    fn create_beside(target: &Path) -> Result<TempFile> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let name = target.file_name().ok_or_else(|| {
            Error::new(
                codes::INVALID_ARGUMENT,
                format!("archive path '{}' does not name a file", target.display()),
            )
        })?;
        let dir = target.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        for _ in 0..16 {
            let unique = format!(
                ".{}.{}-{}.partial",
                name.to_string_lossy(),
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::Relaxed)
            );
            let path = dir.join(unique);
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(file) => return Ok(TempFile { path, file, persisted: false }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Error::io(e, "open", &path)),
            }
        }
        Err(Error::new(codes::INTERNAL, format!("could not create a temporary file in '{}'", dir.display())))
    }

    fn persist(mut self, target: &Path) -> Result<()> {
        fs::rename(&self.path, target).map_err(|e| Error::io(e, "rename", target))?;
        self.persisted = true;
        Ok(())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.persisted {
            let _ = fs::remove_file(&self.path);
        }
    }
}
