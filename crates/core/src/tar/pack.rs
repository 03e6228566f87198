//! Writing a directory as a tar stream: the members `tar -c --no-xattrs [-h] -C root
//! --exclude ._* --exclude <each> -- <top-level names>` would archive, in GNU format.

use std::collections::{HashMap, HashSet};
use std::ffi::CStr;
use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};

use super::exclude::TarExcludeSet;
use super::gzip::GzipWriter;
use super::header::{self, kind, long_entry, long_entry_cost, padded, HeaderSpec, BLOCK, NAME_FIELD};
use super::members::MemberRecord;
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
    /// Compress with gzip at this level (0–9). `None`: a plain tar stream. Pieces of file
    /// data that look incompressible are stored rather than compressed, at every level
    /// (see `gzip.rs`).
    pub gzip: Option<u32>,
    /// Name members `./x`, as `tar -cf - .` does (upstream's SSH upload), and match the
    /// excludes against those names (so `*/x` excludes a top-level `x`, and a pattern that
    /// matches `.` excludes everything). The root still gets no `./` entry of its own.
    pub dot_members: bool,
}

/// The member name prefix of [`PackOptions::dot_members`].
const DOT_PREFIX: &str = "./";

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
    pack_to(opts, writer, progress, cancel, &[], None, Selection::ALL).map(|(summary, _)| summary)
}

/// [`pack`] restricted to the members named in `only` (`None`: all of them): the walk goes
/// only where the named members lead and writes only them (a directory not named is
/// descended into without an entry of its own; a name that is not there is not an error). `record` receives each
/// written member's `stat` record, taken before the member was read.
pub fn pack_selected<W: Write>(
    opts: &PackOptions,
    only: Option<&HashSet<String>>,
    writer: W,
    progress: impl FnMut(u64),
    cancel: &AtomicBool,
    record: &mut (dyn FnMut(MemberRecord) + Send),
) -> Result<PackSummary> {
    pack_to(opts, writer, progress, cancel, &[], None, Selection::new(only, record)).map(|(summary, _)| summary)
}

/// The `stat` record of every member [`pack`] would write now, in archive order, from a
/// walk that reads metadata only.
pub fn member_records(opts: &PackOptions, cancel: &AtomicBool) -> Result<Vec<MemberRecord>> {
    let plan = Plan::new(opts)?;
    let mut members = Vec::new();
    plan.walk(opts, &[], cancel).run(|entry| {
        members.push(MemberRecord::of(entry));
        Ok(())
    })?;
    Ok(members)
}

/// Which members a pack writes, and who hears of each.
struct Selection<'a> {
    only: Option<&'a HashSet<String>>,
    /// `only` and every ancestor of its members: where the walk needs to go.
    within: Option<HashSet<String>>,
    record: Option<&'a mut (dyn FnMut(MemberRecord) + Send)>,
}

impl<'a> Selection<'a> {
    const ALL: Selection<'static> = Selection { only: None, within: None, record: None };

    fn new(only: Option<&'a HashSet<String>>, record: &'a mut (dyn FnMut(MemberRecord) + Send)) -> Selection<'a> {
        let within = only.map(|only| {
            let mut within = only.clone();
            for member in only {
                let mut at = member.as_str();
                while let Some(slash) = at.rfind('/') {
                    at = &at[..slash];
                    if !within.insert(at.to_string()) {
                        break;
                    }
                }
            }
            within
        });
        Selection { only, within, record: Some(record) }
    }

    /// Whether `entry` is written (telling the recorder when it is).
    fn take(&mut self, entry: &WalkEntry<'_>) -> bool {
        if self.only.is_some_and(|only| !only.contains(entry.member)) {
            return false;
        }
        if let Some(record) = self.record.as_mut() {
            record(MemberRecord::of(entry));
        }
        true
    }
}

/// The exact size in bytes of the uncompressed stream [`pack`] would write now, from a walk
/// that reads metadata only. Files that change between this call and the pack make the
/// figures differ. `cancel` is checked before every member, as by [`pack`]; once it is set
/// the call fails with [`Error::aborted`].
pub fn precompute_size(opts: &PackOptions, cancel: &AtomicBool) -> Result<u64> {
    size_walk(opts, cancel, |_| {})
}

/// [`precompute_size`], calling `counted` with the number of members counted so far after
/// each one.
fn size_walk(opts: &PackOptions, cancel: &AtomicBool, mut counted: impl FnMut(u64)) -> Result<u64> {
    let plan = Plan::new(opts)?;
    let mut total = END_OF_ARCHIVE.len() as u64;
    let mut members = 0;
    let prefix = plan.prefix.len();
    plan.walk(opts, &[], cancel).run(|entry| {
        total += entry_size(entry, prefix);
        members += 1;
        counted(members);
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
    let (summary, _) = pack_to(opts, file, progress, cancel, &skip, Some(&temp.path), Selection::ALL)?;
    temp.persist(path)?;
    Ok(summary)
}

/// The bytes one member takes in the stream: header, long-name entries, padded data.
/// `prefix` is the length of the member name prefix.
fn entry_size(entry: &WalkEntry<'_>, prefix: usize) -> u64 {
    let name_len = prefix + entry.member.len() + usize::from(entry.kind == EntryKind::Directory);
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
    /// What member names start with (`./` or nothing).
    prefix: &'static str,
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
            None => crate::walk::sorted_names(&opts.root)?,
        };
        let prefix = if opts.dot_members { DOT_PREFIX } else { "" };
        // `tar -cf - .` with an exclude that matches `.` archives nothing.
        let top_level = if opts.dot_members && excludes.excludes(".") { Vec::new() } else { top_level };
        Ok(Plan { excludes, top_level, prefix })
    }

    fn walk<'a>(&'a self, opts: &'a PackOptions, skip: &'a [(u64, u64)], cancel: &'a AtomicBool) -> Walk<'a> {
        Walk {
            root: &opts.root,
            excludes: &self.excludes,
            follow_symlinks: opts.follow_symlinks,
            top_level: &self.top_level,
            exclude_prefix: self.prefix,
            skip,
            within: None,
            cancel,
        }
    }
}

/// The output stack: buffered, or gzip-compressed (which buffers its output); counted.
enum Sink<W: Write> {
    Plain(BufWriter<W>),
    Gzip(Box<GzipWriter<W>>),
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
        match self {
            Sink::Plain(w) => {
                let mut inner = w.into_inner().map_err(|e| e.into_error())?;
                inner.flush()?;
                Ok(inner)
            }
            Sink::Gzip(w) => (*w).finish(),
        }
    }
}

/// The tar writer: member encoding over a counted sink.
struct TarOut<'a, W: Write, P: FnMut(u64)> {
    out: CountingWriter<'a, Sink<W>, P>,
    /// The file being written, for error messages.
    target: Option<&'a Path>,
    /// Member name prefix (`./` or nothing).
    prefix: &'static str,
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

    /// A `././@LongLink` entry when `value` does not fit a header field: its header, then
    /// exactly the `value.len() + 1` bytes it declares (the value and its NUL), padded to a
    /// block from there. (Padding from `value.len()` lost the NUL, and with it one declared
    /// byte, whenever the length was a multiple of 512.)
    fn long_value(&mut self, typeflag: u8, value: &[u8]) -> Result<()> {
        if value.len() > NAME_FIELD {
            self.put(&long_entry(typeflag, value))?;
            self.put(value)?;
            self.put(&[0])?;
            self.pad(value.len() as u64 + 1)?;
        }
        Ok(())
    }

    /// Writes one member: its long-name entries, header and data. `content` is what the
    /// read-ahead made of a regular file (its open, or its error, at this member's turn).
    fn member(&mut self, entry: &Member, content: Result<Content>) -> Result<()> {
        let mut name = Vec::with_capacity(self.prefix.len() + entry.member.len() + 1);
        name.extend_from_slice(self.prefix.as_bytes());
        name.extend_from_slice(entry.member.as_bytes());
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
        // A file was opened before anything was written for it, so an unreadable file fails
        // cleanly, with its size taken from the open file so header and data agree; a file
        // read ahead whole was read completely (or its error is this member's).
        let mut content = content?;
        let size = match &content {
            Content::None => 0,
            Content::Stream(_, size) | Content::Unread(_, size) => *size,
            Content::Data(data) => data.len() as u64,
        };
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
        match &mut content {
            Content::Data(data) => {
                self.put(data)?;
                self.pad(size)?;
            }
            Content::Stream(file, size) | Content::Unread(file, size) => self.copy_data(file, *size, entry)?,
            Content::None => {}
        }
        Ok(())
    }

    /// Copies exactly `size` bytes of `file`, then the block padding.
    fn copy_data(&mut self, file: &mut File, size: u64, entry: &Member) -> Result<()> {
        let mut buffer = std::mem::take(&mut self.buffer);
        let result = (|| {
            let mut remaining = size;
            while remaining > 0 {
                let want = remaining.min(buffer.len() as u64) as usize;
                let got = read_some(file, &mut buffer[..want], remaining, entry)?;
                self.put(&buffer[..got])?;
                remaining -= got as u64;
            }
            self.pad(size)
        })();
        self.buffer = buffer;
        result
    }
}

/// One read of a member's data into `buffer`: the bytes read (never 0), or the error of a
/// file that ended `remaining` bytes early or failed to read.
fn read_some(file: &mut File, buffer: &mut [u8], remaining: u64, entry: &Member) -> Result<usize> {
    loop {
        return match file.read(buffer) {
            Ok(0) => Err(Error::new(
                codes::FILE_CHANGED,
                format!("'{}' shrank by {remaining} bytes while it was being archived", entry.member),
            )),
            Ok(n) => Ok(n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => Err(Error::io(e, "read", &entry.path)),
        };
    }
}

/// A member's header fields, owned: the walk hands them to the writer across threads.
struct Member {
    member: String,
    /// The host path, for messages.
    path: PathBuf,
    kind: EntryKind,
    mode: u32,
    uid: u32,
    gid: u32,
    mtime: i64,
}

impl Member {
    fn of(entry: &WalkEntry<'_>) -> Member {
        Member {
            member: entry.member.to_string(),
            path: entry.path.to_path_buf(),
            kind: entry.kind.clone(),
            mode: entry.mode,
            uid: entry.uid,
            gid: entry.gid,
            mtime: entry.mtime,
        }
    }
}

/// The data of a member, as the read-ahead prepared it.
enum Content {
    /// Not a regular file (or an empty one): no data.
    None,
    /// A large file, open, with its size: the writer copies it in pieces.
    Stream(File, u64),
    /// A small file, open, with its size, for the pool to read whole.
    Unread(File, u64),
    /// A small file read whole by the pool.
    Data(Vec<u8>),
}

/// Consecutive members handed from the walk through the pool to the writer at once (one
/// hand-off per batch rather than per file keeps the threads' synchronization cheap).
#[derive(Default)]
struct Batch {
    members: Vec<(Member, Result<Content>)>,
    /// Bytes of small files to read whole (held against the [`Budget`] until written).
    bytes: u64,
    /// The walk failed (or was cancelled) after these members: the pack fails with this at
    /// its turn.
    failed: Option<Error>,
}

/// Where a reader of the pool leaves a batch it read, for the writer.
#[derive(Default)]
struct Slot {
    batch: Mutex<Option<Batch>>,
    filled: Condvar,
}

impl Slot {
    fn fill(&self, batch: Batch) {
        if let Ok(mut guard) = self.batch.lock() {
            *guard = Some(batch);
        }
        self.filled.notify_all();
    }

    /// Waits until the batch was read.
    fn wait(&self) -> Result<Batch> {
        let poisoned = || Error::new(codes::INTERNAL, "read-ahead slot poisoned");
        let mut guard = self.batch.lock().map_err(|_| poisoned())?;
        loop {
            if let Some(batch) = guard.take() {
                return Ok(batch);
            }
            guard = self.filled.wait(guard).map_err(|_| poisoned())?;
        }
    }
}

/// Bytes of file data read ahead and not yet written: at most [`READ_AHEAD_BYTES`] (or one
/// batch, when nothing else is held).
struct Budget {
    used: Mutex<u64>,
    freed: Condvar,
}

impl Budget {
    /// Waits for room for `bytes`; false once `stop` is set.
    fn acquire(&self, bytes: u64, stop: &AtomicBool) -> bool {
        let Ok(mut used) = self.used.lock() else { return false };
        while *used > 0 && *used + bytes > READ_AHEAD_BYTES {
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            used = match self.freed.wait_timeout(used, std::time::Duration::from_millis(50)) {
                Ok((guard, _)) => guard,
                Err(_) => return false,
            };
        }
        *used += bytes;
        !stop.load(Ordering::Relaxed)
    }

    fn release(&self, bytes: u64) {
        if let Ok(mut used) = self.used.lock() {
            *used -= bytes;
        }
        self.freed.notify_all();
    }
}

/// Files up to this size are read ahead whole by the pool; larger ones are copied in pieces
/// by the writer at their turn.
const READ_AHEAD_FILE: u64 = 1 << 20;
/// The most file data read ahead at once.
const READ_AHEAD_BYTES: u64 = 16 << 20;
/// A batch ends after this many members, or this many bytes of small files.
const BATCH_MEMBERS: usize = 32;
const BATCH_BYTES: u64 = 1 << 20;
/// The most members between the walk and the writer (each may hold an open file).
const READ_AHEAD_MEMBERS: usize = 256;
/// Batches between the walk and the writer.
const READ_AHEAD_BATCHES: usize = READ_AHEAD_MEMBERS / BATCH_MEMBERS;
/// Reader threads of the pool.
const READ_AHEAD_THREADS: usize = 2;

/// Reads a whole small file of exactly `size` bytes (the size of the open file).
fn read_whole(file: &mut File, size: u64, member: &Member) -> Result<Vec<u8>> {
    let mut data = vec![0; size as usize];
    let mut done = 0;
    while done < data.len() {
        done += read_some(file, &mut data[done..], size - done as u64, member)?;
    }
    Ok(data)
}

/// Opens a member that the walk saw as a regular file, through its directory handle,
/// without following a symlink swapped in since (unless links are followed) and without
/// blocking on a FIFO swapped in; returns it with its current size.
fn open_regular(entry: &WalkEntry<'_>, follow_symlinks: bool) -> Result<(File, u64)> {
    let file =
        entry.dir.open_file_for_reading(entry.name, follow_symlinks).map_err(|e| Error::io(e, "open", entry.path))?;
    let meta = file.metadata().map_err(|e| Error::io(e, "fstat", entry.path))?;
    if !meta.is_file() {
        return Err(Error::new(codes::FILE_CHANGED, format!("'{}' is no longer a regular file", entry.member)));
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
    selection: Selection<'_>,
) -> Result<(PackSummary, W)> {
    let sink = match opts.gzip {
        None => Sink::Plain(BufWriter::with_capacity(COPY_BUFFER, writer)),
        Some(level @ 0..=9) => Sink::Gzip(Box::new(GzipWriter::new(writer, level))),
        Some(level) => {
            return Err(Error::new(codes::INVALID_ARGUMENT, format!("gzip level {level} is out of range 0-9")))
        }
    };
    let plan = Plan::new(opts)?;
    let mut tar = TarOut {
        out: CountingWriter::new(sink, progress, cancel),
        target,
        prefix: plan.prefix,
        owners: OwnerNames::default(),
        buffer: vec![0; COPY_BUFFER],
    };
    let entries = read_ahead(&plan, opts, skip, cancel, selection, |member, content| tar.member(member, content))?;
    tar.put(&END_OF_ARCHIVE)?;
    let tar_bytes = tar.out.count();
    let writer = tar.out.into_inner().finish().map_err(|e| stream_error(e, "write", target))?;
    Ok((PackSummary { entries, tar_bytes }, writer))
}

/// Walks the archive on one thread (opening each regular file there, in archive order),
/// reads small files ahead whole on a pool of [`READ_AHEAD_THREADS`], batch by batch, and
/// calls `write` for every member in archive order on the calling thread, with the member's
/// content or the error its open or read met. A walk error is returned at its turn, after
/// every member before it was written. At most about [`READ_AHEAD_MEMBERS`] members and
/// [`READ_AHEAD_BYTES`] of data are held ahead of the writer. The first error of `write`
/// stops the walk and the pool. Returns the number of members written.
fn read_ahead(
    plan: &Plan,
    opts: &PackOptions,
    skip: &[(u64, u64)],
    cancel: &AtomicBool,
    mut selection: Selection<'_>,
    mut write: impl FnMut(&Member, Result<Content>) -> Result<()>,
) -> Result<u64> {
    let stop = AtomicBool::new(false);
    let budget = Budget { used: Mutex::new(0), freed: Condvar::new() };
    let follow = opts.follow_symlinks;
    let (reads, pool) = mpsc::channel::<(Batch, Arc<Slot>)>();
    let pool = Mutex::new(pool);
    std::thread::scope(|scope| {
        let (batches, ordered) = mpsc::sync_channel::<Arc<Slot>>(READ_AHEAD_BATCHES);
        for _ in 0..READ_AHEAD_THREADS {
            let (pool, stop) = (&pool, &stop);
            scope.spawn(move || loop {
                let job = match pool.lock() {
                    Ok(receiver) => receiver.recv(),
                    Err(_) => return,
                };
                let Ok((mut batch, slot)) = job else { return };
                for (member, content) in &mut batch.members {
                    if let Ok(Content::Unread(file, size)) = content {
                        *content = if stop.load(Ordering::Relaxed) {
                            Err(Error::aborted())
                        } else {
                            read_whole(file, *size, member).map(Content::Data)
                        };
                    }
                }
                slot.fill(batch);
            });
        }
        let (stop, budget) = (&stop, &budget);
        scope.spawn(move || {
            // Hands a batch on: false once the writer stopped.
            let send = |batch: Batch| {
                if !budget.acquire(batch.bytes, stop) {
                    return false;
                }
                let slot = Arc::new(Slot::default());
                reads.send((batch, slot.clone())).is_ok() && batches.send(slot).is_ok()
            };
            let mut batch = Batch::default();
            let within = selection.within.take();
            let walk = Walk { within: within.as_ref(), ..plan.walk(opts, skip, cancel) };
            let walked = walk.run(|entry| {
                if !selection.take(entry) {
                    return Ok(());
                }
                let content = match entry.kind {
                    EntryKind::File { .. } => open_regular(entry, follow).map(|(file, size)| {
                        if size == 0 {
                            Content::None
                        } else if size > READ_AHEAD_FILE {
                            Content::Stream(file, size)
                        } else {
                            batch.bytes += size;
                            Content::Unread(file, size)
                        }
                    }),
                    _ => Ok(Content::None),
                };
                batch.members.push((Member::of(entry), content));
                if (batch.members.len() >= BATCH_MEMBERS || batch.bytes >= BATCH_BYTES)
                    && !send(std::mem::take(&mut batch))
                {
                    return Err(Error::aborted());
                }
                Ok(())
            });
            if !stop.load(Ordering::Relaxed) {
                batch.failed = walked.err();
                send(batch);
            }
        });
        let result = (|| {
            let mut written = 0;
            for slot in ordered.iter() {
                let batch = slot.wait()?;
                let wrote: Result<()> = (|| {
                    for (member, content) in batch.members {
                        write(&member, content)?;
                        written += 1;
                    }
                    Ok(())
                })();
                budget.release(batch.bytes);
                wrote?;
                if let Some(err) = batch.failed {
                    return Err(err);
                }
            }
            Ok(written)
        })();
        if result.is_err() {
            stop.store(true, Ordering::Relaxed);
            budget.freed.notify_all();
        }
        // Unblocks a walk waiting to send; the pool ends when the walk drops its sender.
        drop(ordered);
        result
    })
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
        let rc = unsafe { libc::getpwuid_r(uid, &mut entry, buffer.as_mut_ptr(), buffer.len(), &mut result) };
        (rc, (!result.is_null()).then_some(entry.pw_name as *const libc::c_char))
    })
}

fn lookup_group(gid: u32) -> Vec<u8> {
    lookup_name(|buffer| {
        // SAFETY: as for `lookup_user`, with getgrgid_r.
        let mut entry: libc::group = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::group = std::ptr::null_mut();
        let rc = unsafe { libc::getgrgid_r(gid, &mut entry, buffer.as_mut_ptr(), buffer.len(), &mut result) };
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
            Error::new(codes::INVALID_ARGUMENT, format!("archive path '{}' does not name a file", target.display()))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tar::testutil::*;
    use std::collections::BTreeMap;
    use std::io::Read;

    fn opts(root: &Path) -> PackOptions {
        PackOptions { root: root.to_path_buf(), ..PackOptions::default() }
    }

    fn never() -> AtomicBool {
        AtomicBool::new(false)
    }

    fn pack_bytes(opts: &PackOptions) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        let summary = pack(opts, &mut out, |_| {}, &AtomicBool::new(false))?;
        if opts.gzip.is_none() {
            assert_eq!(summary.tar_bytes, out.len() as u64);
        }
        Ok(out)
    }

    fn gunzip(data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(data).read_to_end(&mut out).unwrap();
        out
    }

    /// The source snapshot restricted to the members of an archive listing.
    fn filtered(root: &Path, members: &[String]) -> BTreeMap<String, Snap> {
        let keep: std::collections::HashSet<&str> = members.iter().map(|m| m.trim_end_matches('/')).collect();
        snapshot(root, true).into_iter().filter(|(path, _)| keep.contains(path.as_str())).collect()
    }

    #[test]
    fn empty_tree_is_exactly_1024_zero_bytes() {
        let dir = TempDir::new("pack-empty");
        let bytes = pack_bytes(&opts(dir.path())).unwrap();
        assert_eq!(bytes, vec![0u8; 1024]);
        assert_eq!(precompute_size(&opts(dir.path()), &never()).unwrap(), 1024);
        let gz = pack_bytes(&PackOptions { gzip: Some(6), ..opts(dir.path()) }).unwrap();
        assert_eq!(&gz[..2], &[0x1f, 0x8b]);
        assert_eq!(gunzip(&gz), vec![0u8; 1024]);
        // Everything excluded is empty too, and so is an explicit empty name list.
        fs::write(dir.join("._apple"), b"x").unwrap();
        assert_eq!(pack_bytes(&opts(dir.path())).unwrap(), vec![0u8; 1024]);
        fs::write(dir.join("file"), b"x").unwrap();
        let none = PackOptions { top_level_order: Some(vec![]), ..opts(dir.path()) };
        assert_eq!(pack_bytes(&none).unwrap(), vec![0u8; 1024]);
    }

    /// Generated trees (hostile names, long names and targets, modes, setuid, times, big
    /// files, `a\b` at the top) with random excludes: the member set equals GNU tar's, the
    /// size equals the precomputed one, and `tar -x` of our archive restores the tree.
    #[test]
    fn member_sets_and_content_match_gnu_tar() {
        if !have_gnu_tar("member_sets_and_content_match_gnu_tar") {
            return;
        }
        let options = TreeOptions { long_names: true, big_files: true, modes_and_times: true, ..Default::default() };
        for case in 0..case_count(60) {
            let seed = 0xbac0_0000 + case;
            let mut rng = Rng::new(seed);
            let src = TempDir::new("pack-src");
            fs::write(src.join("a\\b"), b"backslash").unwrap();
            let paths = build_tree(&mut rng, src.path(), &options);
            let excludes = if rng.chance(25) { Vec::new() } else { random_excludes(&mut rng, &paths) };
            let opts = PackOptions { exclude: excludes.clone(), ..opts(src.path()) };
            let ours = pack_bytes(&opts).unwrap();
            assert_eq!(precompute_size(&opts, &never()).unwrap(), ours.len() as u64, "seed {seed}");
            let names = crate::walk::sorted_names(src.path()).unwrap();
            let theirs = gnu_tar_create(src.path(), &excludes, &names, false);
            let members = gnu_list(&ours);
            assert_eq!(members, gnu_list(&theirs), "seed {seed}: excludes {excludes:?}");
            assert!(members.iter().all(|m| !m.starts_with("./")));
            let out = TempDir::new("pack-out");
            system_extract(&["tar", "-x", "-f", "-"], &ours, out.path());
            assert_same_tree(&snapshot(out.path(), true), &filtered(src.path(), &members), &format!("seed {seed}"));
        }
    }

    /// `dot_members` (upstream's SSH upload, `tar -C root --exclude … -cf - .`): the same
    /// members as GNU tar archives for `.`, save the root's own `./` entry, `./`-prefixed,
    /// with the excludes matched against the prefixed names; the size is the precomputed one.
    #[test]
    fn dot_members_match_gnu_tar_of_dot() {
        if !have_gnu_tar("dot_members_match_gnu_tar_of_dot") {
            return;
        }
        let options = TreeOptions { long_names: true, modes_and_times: true, ..Default::default() };
        for case in 0..case_count(40) {
            let seed = 0xd07_0000 + case;
            let mut rng = Rng::new(seed);
            let src = TempDir::new("pack-dot");
            let paths = build_tree(&mut rng, src.path(), &options);
            let mut excludes = if rng.chance(20) { Vec::new() } else { random_excludes(&mut rng, &paths) };
            // Shapes whose meaning depends on the `./` prefix.
            if rng.chance(50) {
                let top = paths.first().cloned().unwrap_or_default();
                let name = top.split('/').next().unwrap_or_default().to_string();
                excludes.push(
                    rng.pick(&[format!("*/{name}"), "*/*".to_string(), format!("./{name}"), ".".to_string()]).clone(),
                );
            }
            let opts = PackOptions { exclude: excludes.clone(), dot_members: true, ..opts(src.path()) };
            let ours = pack_bytes(&opts).unwrap();
            assert_eq!(precompute_size(&opts, &never()).unwrap(), ours.len() as u64, "seed {seed}");
            let theirs = gnu_tar_create(src.path(), &excludes, &[".".to_string()], false);
            let expected: Vec<String> = gnu_list(&theirs).into_iter().filter(|m| m != "./").collect();
            let members = gnu_list(&ours);
            assert_eq!(members, expected, "seed {seed}: excludes {excludes:?}");
            assert!(members.iter().all(|m| m.starts_with("./")), "seed {seed}");
        }
    }

    #[test]
    fn backslash_names_are_archived_as_they_are() {
        if !have_gnu_tar("backslash_names_are_archived_as_they_are") {
            return;
        }
        let dir = TempDir::new("pack-backslash");
        fs::write(dir.join("a\\b"), b"1").unwrap();
        fs::create_dir(dir.join("d\\n")).unwrap();
        fs::write(dir.join("d\\n/x\\ty"), b"2").unwrap();
        let ours = pack_bytes(&opts(dir.path())).unwrap();
        assert_eq!(gnu_list(&ours), ["a\\b", "d\\n/", "d\\n/x\\ty"]);
    }

    #[test]
    fn long_names_and_targets_use_gnu_long_entries() {
        if !have_gnu_tar("long_names_and_targets_use_gnu_long_entries") {
            return;
        }
        let dir = TempDir::new("pack-long");
        let deep = format!("{}/{}/{}", "d".repeat(150), "e".repeat(200), "f".repeat(240));
        fs::create_dir_all(dir.join(&deep)).unwrap();
        fs::write(dir.join(&deep).join("file"), b"deep").unwrap();
        let exactly_100 = "x".repeat(100);
        fs::write(dir.join(&exactly_100), b"").unwrap();
        let exactly_99 = "y".repeat(99); // 100 bytes with the trailing `/` of a directory
        fs::create_dir(dir.join(&exactly_99)).unwrap();
        let target = format!("{}/file", deep);
        std::os::unix::fs::symlink(&target, dir.join("link")).unwrap();
        let ours = pack_bytes(&opts(dir.path())).unwrap();
        assert_eq!(precompute_size(&opts(dir.path()), &never()).unwrap(), ours.len() as u64);
        let names = crate::walk::sorted_names(dir.path()).unwrap();
        assert_eq!(gnu_list(&ours), gnu_list(&gnu_tar_create(dir.path(), &[], &names, false)));
        let out = TempDir::new("pack-long-out");
        system_extract(&["tar", "-x", "-f", "-"], &ours, out.path());
        assert_eq!(fs::read(out.join(&deep).join("file")).unwrap(), b"deep");
        assert_eq!(fs::read_link(out.join("link")).unwrap(), Path::new(&target));
    }

    /// Names, directory names and link targets of every length around the header fields and
    /// the 512-byte blocks, ASCII and multi-byte, every file holding a tar stream of its own:
    /// GNU tar and bsdtar list our archive as GNU tar's own archive of the tree, and our
    /// extractor, GNU tar and bsdtar all reproduce the tree. (A 512-byte name once declared a
    /// long-name record one byte longer than written, which swallowed the member's header and
    /// read its content as members.)
    #[test]
    fn names_and_targets_at_every_block_boundary() {
        if !have_gnu_tar("names_and_targets_at_every_block_boundary") {
            return;
        }
        let src = TempDir::new("pack-boundary");
        build_boundary_tree(src.path());
        let ours = pack_bytes(&opts(src.path())).unwrap();
        let names = crate::walk::sorted_names(src.path()).unwrap();
        let gnu = gnu_tar_create(src.path(), &[], &names, false);
        let listed = gnu_list(&ours);
        let planted: Vec<_> = listed.iter().filter(|m| m.contains("evil")).collect();
        assert!(planted.is_empty(), "planted members: {planted:?}");
        assert_eq!(listed, gnu_list(&gnu));
        assert_eq!(precompute_size(&opts(src.path()), &never()).unwrap(), ours.len() as u64);
        let expected = snapshot(src.path(), true);
        assert_eq!(listed.len(), expected.len());
        let mut extractors: Vec<(&str, &[&str])> = vec![("GNU tar", &["tar", "-x", "-f", "-"])];
        if have_tool("bsdtar", &["--version"], "names_and_targets_at_every_block_boundary") {
            assert_eq!(list_members(&["bsdtar", "-t", "-f", "-"], &ours), listed);
            extractors.push(("bsdtar", &["bsdtar", "-x", "-p", "-P", "-f", "-"]));
        }
        for (tool, command) in extractors {
            let out = TempDir::new("pack-boundary-out");
            system_extract(command, &ours, out.path());
            assert_same_tree(&snapshot(out.path(), true), &expected, tool);
        }
        for (archive, what) in [(&ours, "ours"), (&gnu, "GNU tar's")] {
            let out = TempDir::new("pack-boundary-ours");
            crate::tar::extract(&archive[..], out.path(), &crate::tar::ExtractOptions::default(), |_| {}, &never())
                .unwrap_or_else(|e| panic!("our extractor on {what} archive: {e}"));
            assert_same_tree(&snapshot(out.path(), true), &expected, what);
        }
        // The SSH upload's `./`-prefixed names are two bytes longer: other boundaries.
        let dotted = PackOptions { dot_members: true, ..opts(src.path()) };
        let ours = pack_bytes(&dotted).unwrap();
        assert_eq!(precompute_size(&dotted, &never()).unwrap(), ours.len() as u64);
        let mut command = tar_command("tar");
        command.args(["-c", "--no-xattrs", "-f", "-", "-C"]).arg(src.path()).arg(".");
        let mut theirs = gnu_list(&run_with_input(command, b""));
        theirs.retain(|m| m != "./");
        assert_eq!(gnu_list(&ours), theirs, "./ members");
        let out = TempDir::new("pack-boundary-dot");
        system_extract(&["tar", "-x", "-f", "-"], &ours, out.path());
        assert_same_tree(&snapshot(out.path(), true), &expected, "./ members, GNU tar");
        let out = TempDir::new("pack-boundary-dot-ours");
        let options = crate::tar::ExtractOptions::default();
        crate::tar::extract(&ours[..], out.path(), &options, |_| {}, &never()).unwrap();
        assert_same_tree(&snapshot(out.path(), true), &expected, "./ members, ours");
    }

    /// Byte for byte what GNU tar writes (up to its padding to 10 240-byte records) for a
    /// file, a directory and a link target at each boundary length: the long-name and
    /// long-link records, their sizes, NULs and padding included.
    #[test]
    fn long_records_are_gnu_tars_bytes_at_every_boundary() {
        if !have_gnu_tar("long_records_are_gnu_tars_bytes_at_every_boundary") {
            return;
        }
        for &len in BOUNDARY_LENGTHS {
            for (fill, pad_first) in [('a', false), ('€', true)] {
                let src = TempDir::new("pack-bytes");
                let file = path_of_len("f", len, fill, pad_first);
                fs::create_dir_all(src.join(&file).parent().unwrap()).unwrap();
                fs::write(src.join(&file), planted_tar("bytes")).unwrap();
                fs::create_dir_all(src.join(path_of_len("g", len - 1, fill, pad_first))).unwrap();
                let target = path_of_len("t", len, fill, pad_first);
                std::os::unix::fs::symlink(&target, src.join("l")).unwrap();
                let ours = pack_bytes(&opts(src.path())).unwrap();
                let names = crate::walk::sorted_names(src.path()).unwrap();
                let gnu = gnu_tar_create(src.path(), &[], &names, false);
                let context = format!("{len} bytes of {fill:?}");
                assert!(gnu.len() >= ours.len(), "{context}: GNU tar wrote less");
                if let Some(at) = ours.iter().zip(&gnu).position(|(a, b)| a != b) {
                    panic!("{context}: differs from GNU tar at byte {at} (block {})", at / 512);
                }
                assert!(gnu[ours.len()..].iter().all(|&b| b == 0), "{context}: GNU tar has more");
            }
        }
    }

    #[test]
    fn long_names_that_fill_whole_blocks_keep_the_archive_in_sync() {
        if !have_gnu_tar("long_names_that_fill_whole_blocks_keep_the_archive_in_sync") {
            return;
        }
        // Member names of exactly 512 and 1024 bytes (a directory's with its trailing `/`),
        // a link target of 512: each long-name entry's NUL needs a block of its own.
        let dir = TempDir::new("pack-block-names");
        let d511 = format!("{}/{}", "a".repeat(255), "b".repeat(255));
        fs::create_dir_all(dir.join(&d511)).unwrap();
        let f1024 = format!("{d511}/{}/{}/f", "c".repeat(255), "d".repeat(254));
        fs::create_dir_all(dir.join(&f1024).parent().unwrap()).unwrap();
        assert_eq!(f1024.len(), 1024);
        fs::write(dir.join(&f1024), b"x").unwrap();
        std::os::unix::fs::symlink("t".repeat(512), dir.join("link")).unwrap();
        fs::write(dir.join("zz-last"), b"last").unwrap();
        let ours = pack_bytes(&opts(dir.path())).unwrap();
        assert_eq!(precompute_size(&opts(dir.path()), &never()).unwrap(), ours.len() as u64);
        let names = crate::walk::sorted_names(dir.path()).unwrap();
        let listed = gnu_list(&ours);
        assert!(
            listed.contains(&format!("{d511}/")) && listed.contains(&f1024) && listed.contains(&"zz-last".to_string()),
            "{listed:?}"
        );
        assert_eq!(listed, gnu_list(&gnu_tar_create(dir.path(), &[], &names, false)));
    }

    #[test]
    fn followed_symlinks_match_tar_h() {
        if !have_gnu_tar("followed_symlinks_match_tar_h") {
            return;
        }
        let options = TreeOptions { followable_links: true, ..Default::default() };
        for case in 0..case_count(60) / 3 {
            let seed = 0xf011_0000 + case;
            let mut rng = Rng::new(seed);
            let src = TempDir::new("pack-follow");
            build_tree(&mut rng, src.path(), &options);
            let opts = PackOptions { follow_symlinks: true, ..opts(src.path()) };
            let ours = pack_bytes(&opts).unwrap();
            assert_eq!(precompute_size(&opts, &never()).unwrap(), ours.len() as u64, "seed {seed}");
            let names = crate::walk::sorted_names(src.path()).unwrap();
            let theirs = gnu_tar_create(src.path(), &[], &names, true);
            assert_eq!(gnu_list(&ours), gnu_list(&theirs), "seed {seed}");
        }
    }

    #[test]
    fn symlink_cycles_and_dangling_links_fail_when_following() {
        let dir = TempDir::new("pack-loop");
        fs::create_dir(dir.join("a")).unwrap();
        std::os::unix::fs::symlink("..", dir.join("a/up")).unwrap();
        let follow = PackOptions { follow_symlinks: true, ..opts(dir.path()) };
        let err = pack_bytes(&follow).unwrap_err();
        assert_eq!(err.code, codes::SYMLINK_LOOP);
        assert!(err.message.contains("a/up"), "{}", err.message);
        assert_eq!(precompute_size(&follow, &never()).unwrap_err().code, codes::SYMLINK_LOOP);
        // Not following, the link is just a link.
        assert!(pack_bytes(&opts(dir.path())).is_ok());

        let dangling = TempDir::new("pack-dangling");
        std::os::unix::fs::symlink("nowhere", dangling.join("d")).unwrap();
        let follow = PackOptions { follow_symlinks: true, ..opts(dangling.path()) };
        let err = pack_bytes(&follow).unwrap_err();
        assert_eq!(err.code, "ENOENT");
        assert_eq!(err.syscall, Some("stat"));
    }

    #[test]
    fn top_level_order_is_the_callers() {
        if !have_gnu_tar("top_level_order_is_the_callers") {
            return;
        }
        let dir = TempDir::new("pack-order");
        for name in ["b", "a", "C", "é"] {
            fs::write(dir.join(name), name).unwrap();
        }
        let order: Vec<String> = ["é", "b", "C", "a"].iter().map(|s| s.to_string()).collect();
        let ours = pack_bytes(&PackOptions { top_level_order: Some(order.clone()), ..opts(dir.path()) }).unwrap();
        let mut command = tar_command("tar");
        command.args(["-t", "--quoting-style=literal", "-f", "-"]);
        let listed = String::from_utf8(run_with_input(command, &ours)).unwrap();
        assert_eq!(listed.lines().collect::<Vec<_>>(), order);
        // Default: byte order.
        let ours = pack_bytes(&opts(dir.path())).unwrap();
        let mut command = tar_command("tar");
        command.args(["-t", "--quoting-style=literal", "-f", "-"]);
        let listed = String::from_utf8(run_with_input(command, &ours)).unwrap();
        assert_eq!(listed.lines().collect::<Vec<_>>(), ["C", "a", "b", "é"]);
        for bad in [vec!["a/b"], vec![".."], vec![""], vec!["a", "a"]] {
            let names = bad.iter().map(|s| s.to_string()).collect();
            let err = pack_bytes(&PackOptions { top_level_order: Some(names), ..opts(dir.path()) }).unwrap_err();
            assert_eq!(err.code, codes::INVALID_ARGUMENT, "{bad:?}");
        }
        let missing = PackOptions { top_level_order: Some(vec!["zz".into()]), ..opts(dir.path()) };
        assert_eq!(pack_bytes(&missing).unwrap_err().code, "ENOENT");
    }

    #[test]
    fn special_files() {
        if !have_gnu_tar("special_files") {
            return;
        }
        let dir = TempDir::new("pack-special");
        fs::write(dir.join("file"), b"shared").unwrap();
        fs::hard_link(dir.join("file"), dir.join("hard")).unwrap();
        let fifo = std::ffi::CString::new(dir.join("fifo").into_os_string().into_encoded_bytes()).unwrap();
        // SAFETY: a valid path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        let _socket = std::os::unix::net::UnixListener::bind(dir.join("socket")).unwrap();
        let ours = pack_bytes(&opts(dir.path())).unwrap();
        assert_eq!(precompute_size(&opts(dir.path()), &never()).unwrap(), ours.len() as u64);
        // The socket is skipped; the FIFO is archived as a FIFO; hard links as two files.
        assert_eq!(gnu_list(&ours), ["fifo", "file", "hard"]);
        let mut command = tar_command("tar");
        command.args(["-t", "-v", "-f", "-"]);
        let verbose = String::from_utf8(run_with_input(command, &ours)).unwrap();
        let kinds: Vec<char> = verbose.lines().map(|l| l.chars().next().unwrap()).collect();
        assert_eq!(kinds, ['p', '-', '-']);
        let out = TempDir::new("pack-special-out");
        system_extract(&["tar", "-x", "-f", "-"], &ours, out.path());
        assert_eq!(fs::read(out.join("hard")).unwrap(), b"shared");
    }

    #[test]
    fn non_utf8_names_are_refused() {
        use std::os::unix::ffi::OsStrExt;
        let dir = TempDir::new("pack-non-utf8");
        fs::create_dir(dir.join("d")).unwrap();
        fs::write(dir.join("d").join(std::ffi::OsStr::from_bytes(b"bad\xff")), b"").unwrap();
        let err = pack_bytes(&opts(dir.path())).unwrap_err();
        assert_eq!(err.code, codes::NON_UTF8_NAME);
        assert_eq!(precompute_size(&opts(dir.path()), &never()).unwrap_err().code, codes::NON_UTF8_NAME);
        // Excluded directories are never read, as with tar.
        let excluded = PackOptions { exclude: vec!["d".into()], ..opts(dir.path()) };
        assert_eq!(pack_bytes(&excluded).unwrap(), vec![0u8; 1024]);
    }

    /// The read-ahead: more members than it holds at once, more data than its byte window,
    /// files on both sides of the whole-read limit and empty ones; the archive is GNU tar's,
    /// byte for byte (all top-level, so GNU tar takes them in the order they are named
    /// rather than in its directory-read order).
    #[test]
    fn read_ahead_keeps_gnu_tars_bytes_beyond_its_window() {
        if !have_gnu_tar("read_ahead_keeps_gnu_tars_bytes_beyond_its_window") {
            return;
        }
        let seed = 0x4ead_a4ead;
        let mut rng = Rng::new(seed);
        let src = TempDir::new("pack-ahead");
        let limit = READ_AHEAD_FILE as usize;
        let sizes = [0, 1, 511, 512, 513, limit - 1, limit, limit + 1, 3 * limit];
        let mut data = 0;
        for i in 0..(READ_AHEAD_MEMBERS * 3) {
            let dir = src.path();
            let size = if i % 25 == 0 { *rng.pick(&sizes) } else { rng.below(20_000) };
            let body: Vec<u8> = (0..size).map(|k| (k as u64 * 31 + i as u64) as u8).collect();
            fs::write(dir.join(format!("f{i}")), body).unwrap();
            data += size;
        }
        for i in 0..20 {
            fs::write(src.join(format!("big{i}")), vec![i as u8; limit]).unwrap();
            data += limit;
        }
        assert!(data as u64 > 2 * READ_AHEAD_BYTES, "seed {seed}: the tree must outgrow the window");
        let ours = pack_bytes(&opts(src.path())).unwrap();
        let names = crate::walk::sorted_names(src.path()).unwrap();
        let gnu = gnu_tar_create(src.path(), &[], &names, false);
        assert!(gnu.len() >= ours.len(), "seed {seed}: GNU tar wrote less");
        if let Some(at) = ours.iter().zip(&gnu).position(|(a, b)| a != b) {
            panic!("seed {seed}: differs from GNU tar at byte {at} (block {})", at / 512);
        }
        assert!(gnu[ours.len()..].iter().all(|&b| b == 0), "seed {seed}: GNU tar has more");
    }

    /// A writer that fails stops the walk and the read-ahead pool (no hang), and its error
    /// is the pack's; a walk error (a name that is not UTF-8) comes at its turn, after every
    /// member before it was written whole.
    #[test]
    fn read_ahead_stops_on_the_writers_error_and_fails_at_the_walks_turn() {
        struct FailAfter(usize);
        impl Write for FailAfter {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                if self.0 < buf.len() {
                    return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
                }
                self.0 -= buf.len();
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let src = TempDir::new("pack-ahead-fail");
        for i in 0..(READ_AHEAD_MEMBERS * 2) {
            fs::write(src.join(format!("a{i:04}")), vec![b'x'; 70_000]).unwrap();
        }
        let err = pack(&opts(src.path()), FailAfter(1 << 20), |_| {}, &never()).unwrap_err();
        assert_eq!(err.code, "ENOSPC", "{err:?}");

        use std::os::unix::ffi::OsStrExt;
        fs::create_dir(src.join("z")).unwrap();
        fs::write(src.join("z").join(std::ffi::OsStr::from_bytes(b"bad\xff")), b"x").unwrap();
        let mut out = Vec::new();
        let err = pack(&opts(src.path()), &mut out, |_| {}, &never()).unwrap_err();
        assert_eq!(err.code, codes::NON_UTF8_NAME, "{err:?}");
        // The members written before the failure, read header by header (short ustar names,
        // no end-of-archive blocks: the pack stopped there).
        let mut names = Vec::new();
        let mut at = 0;
        while at + 512 <= out.len() {
            let header = &out[at..at + 512];
            let name_len = header[..100].iter().position(|&b| b == 0).unwrap_or(100);
            let name = String::from_utf8(header[..name_len].to_vec()).unwrap();
            let size_field = std::str::from_utf8(&header[124..135]).unwrap().trim_matches(|c| c == ' ' || c == '\0');
            let size = usize::from_str_radix(size_field, 8).unwrap();
            let body = &out[at + 512..at + 512 + size];
            if name.starts_with('a') {
                assert_eq!(body, &vec![b'x'; 70_000][..], "{name}");
            }
            names.push(name);
            at += 512 + size.div_ceil(512) * 512;
        }
        assert_eq!(at, out.len(), "whole members only");
        let mut expected: Vec<String> = (0..(READ_AHEAD_MEMBERS * 2)).map(|i| format!("a{i:04}")).collect();
        expected.push("z/".into());
        assert_eq!(names, expected);
    }

    #[test]
    fn progress_is_monotonic_and_cancel_aborts() {
        let dir = TempDir::new("pack-progress");
        for i in 0..20 {
            fs::write(dir.join(format!("f{i}")), vec![7u8; 100_000]).unwrap();
        }
        let mut seen = Vec::new();
        let mut out = Vec::new();
        let summary = pack(&opts(dir.path()), &mut out, |n| seen.push(n), &AtomicBool::new(false)).unwrap();
        assert!(seen.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(*seen.last().unwrap(), summary.tar_bytes);
        assert_eq!(summary.entries, 20);

        let cancel = AtomicBool::new(false);
        let mut calls = 0;
        let err = pack(
            &opts(dir.path()),
            std::io::sink(),
            |_| {
                calls += 1;
                if calls == 3 {
                    cancel.store(true, Ordering::Relaxed);
                }
            },
            &cancel,
        )
        .unwrap_err();
        assert!(err.is_aborted());
        assert_eq!(calls, 3);
    }

    #[test]
    fn precompute_size_stops_at_the_next_member_once_cancelled() {
        use std::os::unix::ffi::OsStrExt;
        let dir = TempDir::new("pack-size-cancel");
        for i in 0..50 {
            fs::write(dir.join(format!("f{i:02}")), vec![1u8; 1000]).unwrap();
        }
        // Walked last: a full walk ends in this error.
        fs::create_dir(dir.join("zz")).unwrap();
        fs::write(dir.join("zz").join(std::ffi::OsStr::from_bytes(b"bad\xff")), b"").unwrap();
        let err = precompute_size(&opts(dir.path()), &never()).unwrap_err();
        assert_eq!(err.code, codes::NON_UTF8_NAME);

        let cancelled = AtomicBool::new(true);
        assert!(precompute_size(&opts(dir.path()), &cancelled).unwrap_err().is_aborted());

        let cancel = AtomicBool::new(false);
        let mut seen = 0;
        let err = size_walk(&opts(dir.path()), &cancel, |members| {
            seen = members;
            if members == 3 {
                cancel.store(true, Ordering::Relaxed);
            }
        })
        .unwrap_err();
        assert!(err.is_aborted(), "{err:?}");
        assert_eq!(seen, 3);
    }

    #[test]
    fn pack_to_file_is_atomic() {
        let dir = TempDir::new("pack-file");
        let src = dir.join("src");
        fs::create_dir(&src).unwrap();
        fs::write(src.join("a"), vec![1u8; 300_000]).unwrap();
        let target = dir.join("out.tar");
        fs::write(&target, b"previous").unwrap();

        // Cancelled: the previous file is untouched and no temporary file is left.
        let cancel = AtomicBool::new(false);
        let err = pack_to_file(&opts(&src), &target, |_| cancel.store(true, Ordering::Relaxed), &cancel).unwrap_err();
        assert!(err.is_aborted());
        assert_eq!(fs::read(&target).unwrap(), b"previous");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2);

        let summary = pack_to_file(&opts(&src), &target, |_| {}, &AtomicBool::new(false)).unwrap();
        assert_eq!(fs::read(&target).unwrap(), pack_bytes(&opts(&src)).unwrap());
        assert_eq!(summary.tar_bytes, fs::metadata(&target).unwrap().len());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2);

        // An archive written inside the tree it archives does not contain itself.
        let inside = src.join("self.tar");
        pack_to_file(&opts(&src), &inside, |_| {}, &AtomicBool::new(false)).unwrap();
        pack_to_file(&opts(&src), &inside, |_| {}, &AtomicBool::new(false)).unwrap();
        if have_gnu_tar("pack_to_file_is_atomic") {
            assert_eq!(gnu_list(&fs::read(&inside).unwrap()), ["a"]);
        }

        // Errors leave nothing behind either.
        let missing = opts(&dir.join("missing"));
        assert_eq!(pack_to_file(&missing, &target, |_| {}, &AtomicBool::new(false)).unwrap_err().code, "ENOENT");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn gzip_round_trip() {
        let dir = TempDir::new("pack-gzip");
        let mut rng = Rng::new(42);
        build_tree(&mut rng, dir.path(), &TreeOptions { big_files: true, ..Default::default() });
        let plain = pack_bytes(&opts(dir.path())).unwrap();
        for level in [0, 1, 6, 9] {
            let gz = pack_bytes(&PackOptions { gzip: Some(level), ..opts(dir.path()) }).unwrap();
            assert_eq!(gunzip(&gz), plain, "level {level}");
        }
        let err = pack_bytes(&PackOptions { gzip: Some(10), ..opts(dir.path()) }).unwrap_err();
        assert_eq!(err.code, codes::INVALID_ARGUMENT);
        if have_gnu_tar("gzip_round_trip") {
            let gz = pack_bytes(&PackOptions { gzip: Some(1), ..opts(dir.path()) }).unwrap();
            let out = TempDir::new("pack-gzip-out");
            system_extract(&["tar", "-x", "-z", "-f", "-"], &gz, out.path());
            assert_same_tree(&snapshot(out.path(), false), &snapshot(dir.path(), false), "gzip");
        }
    }

    /// Undoes bsdtar's listing escapes (`\\` and `\ooo`).
    fn unescape_listing(name: &str) -> String {
        let bytes = name.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'\\' && bytes.get(i + 1) == Some(&b'\\') {
                out.push(b'\\');
                i += 2;
            } else if bytes[i] == b'\\'
                && i + 3 < bytes.len()
                && bytes[i + 1..i + 4].iter().all(|b| (b'0'..=b'7').contains(b))
            {
                out.push(u8::from_str_radix(&name[i + 1..i + 4], 8).unwrap());
                i += 4;
            } else {
                out.push(bytes[i]);
                i += 1;
            }
        }
        String::from_utf8(out).unwrap()
    }

    /// bsdtar (libarchive) and busybox tar read what we write, when they are installed.
    /// (bsdtar needs `-P`: by default it strips a leading `\` from member names, a quirk of
    /// its own that GNU tar does not share.)
    #[test]
    fn other_tars_read_our_archives() {
        if !have_gnu_tar("other_tars_read_our_archives") {
            return;
        }
        let options = TreeOptions { long_names: true, big_files: true, modes_and_times: true, ..Default::default() };
        /// Program, probe arguments, list command, extract command.
        type Reader<'a> = (&'a str, &'a [&'a str], &'a [&'a str], &'a [&'a str]);
        let readers: [Reader<'_>; 2] = [
            ("bsdtar", &["--version"], &["bsdtar", "-t", "-f", "-"], &["bsdtar", "-x", "-p", "-P", "-f", "-"]),
            ("busybox", &["tar", "--help"], &["busybox", "tar", "-t", "-f", "-"], &["busybox", "tar", "-x", "-f", "-"]),
        ];
        for (program, probe, list, extract) in readers {
            if !have_tool(program, probe, "other_tars_read_our_archives") {
                continue;
            }
            for case in 0..case_count(60) / 6 {
                let seed = 0x0747_0000 + case;
                let mut rng = Rng::new(seed);
                let src = TempDir::new("pack-other");
                build_tree(&mut rng, src.path(), &options);
                let ours = pack_bytes(&opts(src.path())).unwrap();
                let mut listed: Vec<String> = list_members(list, &ours)
                    .iter()
                    .map(|m| m.trim_end_matches('/'))
                    // bsdtar escapes `\\` and control characters in listings; busybox does not.
                    .map(|m| if program == "bsdtar" { unescape_listing(m) } else { m.to_owned() })
                    .collect();
                listed.sort();
                let expected = filtered(src.path(), &gnu_list(&ours));
                let wanted: Vec<String> = expected.keys().cloned().collect();
                let missing: Vec<_> = wanted.iter().filter(|m| !listed.contains(m)).collect();
                let extra: Vec<_> = listed.iter().filter(|m| !wanted.contains(m)).collect();
                assert!(
                    missing.is_empty() && extra.is_empty(),
                    "{program} seed {seed}: missing {missing:?}, unexpected {extra:?}"
                );
                let out = TempDir::new("pack-other-out");
                system_extract(extract, &ours, out.path());
                let strip_dirs = |m: BTreeMap<String, Snap>| -> BTreeMap<String, Snap> {
                    m.into_iter()
                        .map(|(k, v)| match v {
                            // busybox does not restore directory times; compare contents,
                            // links and file metadata.
                            Snap::Dir { mode, .. } => (k, Snap::Dir { mode, mtime: 0 }),
                            other => (k, other),
                        })
                        .collect()
                };
                assert_same_tree(
                    &strip_dirs(snapshot(out.path(), true)),
                    &strip_dirs(expected),
                    &format!("{program} seed {seed}"),
                );
            }
        }
    }
}
