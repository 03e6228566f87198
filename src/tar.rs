//! Tar archives written and read in-process (docs/tar.md; the logic is `paperclip_sync_core::tar`; this is scheduling and conversion
//! only).
//!
//! Three shapes of call:
//!
//! * bounded work on the blocking pool ([`run_blocking`]): [`tar_pack_file`],
//!   [`tar_precompute_size`], [`tar_extract_file`], reporting progress through the
//!   coalescing [`Progress`] forwarder (`src/progress.rs`);
//! * a pack stream ([`TarPackStream`]): a thread packs into a bounded channel of chunks
//!   that JS pulls one at a time (the core's chunk writer, `paperclip_sync_core::pipe`);
//! * an extract sink ([`TarExtractSink`]): JS pushes chunks into a bounded channel that a
//!   thread extracts from (the core's chunk reader).
//!
//! The two streams wait on JS (a slow consumer, a slow source) for as long as JS likes, so
//! each runs on a thread of its own: they never hold one of the bounded pool's threads, and
//! never a libuv thread, while they wait. Every JS-facing wait is a Promise.

use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use napi::bindgen_prelude::{BufferSlice, PromiseRaw};
use napi::{Env, Status};
use napi_derive::napi;
use paperclip_sync_core::error::{codes, Error as CoreError};
use paperclip_sync_core::pipe::{ChunkReader, ChunkSink, ChunkWriter};
use paperclip_sync_core::tar::{self, ExtractOptions, ExtractSummary, PackOptions, PackSummary};
use paperclip_sync_core::worker::Worker;
use tokio::sync::{mpsc, watch};

use crate::cancel;
use crate::error::{run_blocking, to_napi};
use crate::progress::{Progress, ProgressCallback};

/// Chunks a pack stream may hold ready for its consumer, beyond the one being filled.
const PACK_QUEUE_CHUNKS: usize = 2;
/// Chunks an extract sink may hold for its thread, beyond the one being read.
const EXTRACT_QUEUE_CHUNKS: usize = 4;
/// Largest chunk a pack stream accepts to produce.
pub(crate) const MAX_CHUNK_SIZE: u32 = 64 * 1024 * 1024;

/// What to archive (internal; see `createTarballFromDirectory` and the streaming pack).
#[napi(object)]
pub struct TarPackInput {
    /// The directory whose entries are archived (tar's `-C`); it gets no `./` entry.
    pub root: String,
    /// `--exclude` values with GNU tar's semantics, applied after the implicit `._*`.
    pub exclude: Vec<String>,
    /// Archive what symbolic links point to (`tar -h`).
    pub follow_symlinks: bool,
    /// The top-level names in archive order; absent: every entry of `root` in byte order.
    pub top_level: Option<Vec<String>>,
    /// gzip level 0-9; absent: a plain tar stream.
    pub gzip: Option<u32>,
    /// Name members `./x` as `tar -cf - .` does, excludes matched against those names.
    pub dot_members: Option<bool>,
    /// Write only these members (names without `./`; the walk goes only where they lead);
    /// absent: all of them.
    pub only: Option<Vec<String>>,
}

impl TarPackInput {
    /// The core's pack options and the selection they are restricted to (`only`).
    pub(crate) fn into_core(self) -> SelectedPack {
        let opts = PackOptions {
            root: PathBuf::from(self.root),
            exclude: self.exclude,
            follow_symlinks: self.follow_symlinks,
            top_level_order: self.top_level,
            gzip: self.gzip,
            dot_members: self.dot_members.unwrap_or(false),
        };
        (opts, self.only.map(|names| names.into_iter().collect()))
    }

    /// The core's pack options of a call that packs every member (`only` refused).
    pub(crate) fn into_whole(self) -> Result<PackOptions, CoreError> {
        match self.into_core() {
            (opts, None) => Ok(opts),
            (_, Some(_)) => Err(invalid("this pack archives every member: `only` is not accepted")),
        }
    }
}

/// What a pack wrote (internal).
#[napi(object)]
pub struct TarPackSummary {
    /// Members archived.
    pub entries: f64,
    /// Size of the uncompressed tar stream.
    pub tar_bytes: f64,
}

impl From<PackSummary> for TarPackSummary {
    fn from(summary: PackSummary) -> Self {
        TarPackSummary { entries: summary.entries as f64, tar_bytes: summary.tar_bytes as f64 }
    }
}

/// What an extraction did (internal).
#[napi(object)]
pub struct TarExtractSummary {
    /// Members extracted.
    pub entries: f64,
    /// Bytes read from the source (compressed bytes for gzip).
    pub bytes_read: f64,
    /// Entries in the destination carrying one of our staging names that this host did not
    /// create: left alone, reported by the JS layer.
    pub foreign_staging: Vec<String>,
}

impl From<ExtractSummary> for TarExtractSummary {
    fn from(summary: ExtractSummary) -> Self {
        TarExtractSummary {
            entries: summary.entries as f64,
            bytes_read: summary.bytes_read as f64,
            foreign_staging: summary.foreign_staging,
        }
    }
}

/// The error of a call whose cancel flag is set is the cancellation, whatever the failing
/// layer made of it (a closed channel, a broken pipe).
fn settle<T>(result: Result<T, CoreError>, cancel: &AtomicBool) -> Result<T, CoreError> {
    result.map_err(|err| failure(err, cancel))
}

/// `err`, or the cancellation when the call was cancelled.
fn failure(err: CoreError, cancel: &AtomicBool) -> CoreError {
    if cancel.load(Ordering::Relaxed) {
        CoreError::aborted()
    } else {
        err
    }
}

fn internal(message: impl Into<String>) -> CoreError {
    CoreError::new(codes::INTERNAL, message)
}

fn invalid(message: impl Into<String>) -> CoreError {
    CoreError::new(codes::INVALID_ARGUMENT, message)
}

/// Locks a mutex whose data stays consistent even if a holder panicked.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Packs into the file `archive_path` through a temporary file renamed into place on success
/// (internal; see `createTarballFromDirectory`). `on_progress` receives uncompressed tar bytes.
#[napi]
pub async fn tar_pack_file(
    input: TarPackInput,
    archive_path: String,
    cancel_id: Option<u32>,
    #[napi(ts_arg_type = "((bytes: number) => void) | undefined | null")] on_progress: Option<ProgressCallback>,
) -> napi::Result<TarPackSummary> {
    let cancel = cancel::flag(cancel_id);
    let opts = input.into_whole().map_err(to_napi)?;
    run_blocking(move || {
        let mut progress = Progress::new(on_progress);
        tar::pack_to_file(&opts, Path::new(&archive_path), |n| progress.update(n), &cancel).map(TarPackSummary::from)
    })
    .await
}

/// The exact size of the uncompressed tar stream a pack of `input` would write now
/// (internal). Rejects with the cancellation once the token is aborted (checked per member).
#[napi]
pub async fn tar_precompute_size(input: TarPackInput, cancel_id: Option<u32>) -> napi::Result<f64> {
    let cancel = cancel::flag(cancel_id);
    let (opts, only) = input.into_core();
    run_blocking(move || tar::precompute_size_selected(&opts, only.as_ref(), &cancel).map(|n| n as f64)).await
}

/// The `limits` of an extraction (internal): the core's `ArchiveLimits` by the same
/// names, as `archiveLimits` in `lib/arguments.js` checked them (non-negative safe integers,
/// `minFreeBytes` from `PAPERCLIP_NATIVE_MIN_FREE_BYTES` when the caller gave none).
#[napi(object)]
pub struct ArchiveLimits {
    pub max_bytes: Option<f64>,
    pub max_entries: Option<f64>,
    pub max_file_bytes: Option<f64>,
    /// Absent: the core's default floor; 0: no free-space check.
    pub min_free_bytes: Option<f64>,
}

impl From<ArchiveLimits> for tar::ArchiveLimits {
    fn from(limits: ArchiveLimits) -> Self {
        // Checked in JS: whole numbers from 0 to 2^53 - 1, which `as` converts exactly.
        let whole = |value: Option<f64>| value.map(|v| v as u64);
        tar::ArchiveLimits {
            max_bytes: whole(limits.max_bytes),
            max_entries: whole(limits.max_entries),
            max_file_bytes: whole(limits.max_file_bytes),
            min_free_bytes: whole(limits.min_free_bytes),
        }
    }
}

/// Where and how to extract (internal; see `extractTarballToDirectory` and the SSH download).
#[napi(object)]
pub struct TarExtractInput {
    /// The destination directory (created if missing).
    pub dest: String,
    /// Restore modification times from the archive.
    pub preserve_mtime: bool,
    /// Bounds and the free-space floor; absent: no bounds and the default floor.
    pub limits: Option<ArchiveLimits>,
    /// The tree whose symbolic links vouch for the archive's escaping ones; absent: `dest`.
    pub known_links: Option<String>,
    /// Leave FIFOs and device files out instead of refusing the archive.
    pub skip_untransferable: Option<bool>,
}

impl TarExtractInput {
    /// The destination and the core options.
    pub(crate) fn into_core(self) -> (PathBuf, ExtractOptions) {
        let limits = self.limits.map(tar::ArchiveLimits::from).unwrap_or_default();
        let known_links = self.known_links.map(PathBuf::from);
        let options = ExtractOptions {
            preserve_mtime: self.preserve_mtime,
            limits,
            known_links,
            skip_untransferable: self.skip_untransferable.unwrap_or(false),
        };
        (PathBuf::from(self.dest), options)
    }
}

/// Extracts the tar or tar.gz file `archive_path` as `input` says (internal; see
/// `extractTarballToDirectory`). `on_progress` receives the bytes read from the file.
#[napi]
pub async fn tar_extract_file(
    input: TarExtractInput,
    archive_path: String,
    cancel_id: Option<u32>,
    #[napi(ts_arg_type = "((bytes: number) => void) | undefined | null")] on_progress: Option<ProgressCallback>,
) -> napi::Result<TarExtractSummary> {
    let cancel = cancel::flag(cancel_id);
    let (dest, opts) = input.into_core();
    run_blocking(move || {
        let archive = PathBuf::from(archive_path);
        let file = std::fs::File::open(&archive).map_err(|e| CoreError::io(e, "open", &archive))?;
        let mut progress = Progress::new(on_progress);
        tar::extract(file, &dest, &opts, |n| progress.update(n), &cancel).map(TarExtractSummary::from)
    })
    .await
}

// ---------------------------------------------------------------------------------------
// Pack stream

/// What the pack thread hands to the consumer.
enum PackMessage {
    /// A chunk, and the uncompressed tar bytes produced up to its end.
    Chunk(Vec<u8>, u64),
    Done(PackSummary),
    Failed(CoreError),
}

/// Chunk buffers the pack thread reuses: a chunk's bytes are copied into a JS-owned `Buffer`
/// when it is handed to JS, and its `Vec` comes back here. Chunks handed out as external
/// buffers would instead be freed only when V8 collects them, which it does lazily (it lets
/// up to ~64 MB of external memory pile up), and from the JS thread into the pack thread's
/// allocator arena, which keeps much of it resident. The copy costs far less than the read.
#[derive(Default)]
struct ChunkPool {
    free: Mutex<Vec<Vec<u8>>>,
}

impl ChunkPool {
    /// Buffers kept: the queued chunks, the one being filled and the one being handed over.
    const KEEP: usize = PACK_QUEUE_CHUNKS + 2;

    fn take(&self, capacity: usize) -> Vec<u8> {
        let mut chunk = lock(&self.free).pop().unwrap_or_default();
        chunk.clear();
        chunk.reserve_exact(capacity);
        chunk
    }

    fn give(&self, chunk: Vec<u8>) {
        let mut free = lock(&self.free);
        if free.len() < Self::KEEP {
            free.push(chunk);
        }
    }
}

/// A chunk on its way to JS: becomes a JS-owned `Buffer` copy, and its `Vec` returns to
/// the pool.
pub struct PooledChunk {
    data: Vec<u8>,
    pool: Arc<ChunkPool>,
}

impl napi::bindgen_prelude::ToNapiValue for PooledChunk {
    unsafe fn to_napi_value(env: napi::sys::napi_env, val: Self) -> napi::Result<napi::sys::napi_value> {
        let mut out = std::ptr::null_mut();
        let mut data = std::ptr::null_mut();
        // SAFETY: `val.data` is live for the call; napi copies `len` bytes from it.
        let status = unsafe {
            napi::sys::napi_create_buffer_copy(env, val.data.len(), val.data.as_ptr().cast(), &mut data, &mut out)
        };
        val.pool.give(val.data);
        if status != napi::sys::Status::napi_ok {
            return Err(napi::Error::new(Status::from(status), "cannot create a Buffer for a tar chunk"));
        }
        Ok(out)
    }
}

/// One chunk of a pack stream (internal).
#[napi(object, object_from_js = false)]
pub struct TarPackChunk {
    /// The bytes: `chunkSize` of them except in the last chunk.
    #[napi(ts_type = "Buffer")]
    pub data: PooledChunk,
    /// Uncompressed tar bytes produced up to the end of this chunk (the unit of
    /// `tarPrecomputeSize`); exact for a plain stream, as far as the compressor consumed for gzip.
    pub tar_bytes: f64,
}

/// The pack thread's sink: hands each chunk, with its tar byte count, to the bounded
/// channel, blocking while it is full (the consumer's backpressure), and takes the buffers
/// of the next chunks from the pool.
struct PackSink<'a> {
    tx: &'a mpsc::Sender<PackMessage>,
    pool: &'a ChunkPool,
    /// Bytes handed over so far (for a plain stream, the tar byte count).
    sent: u64,
    /// The packer's running count of uncompressed bytes (for a gzip stream).
    uncompressed: Option<&'a std::cell::Cell<u64>>,
    /// The final tar byte count, carried by the last chunk (set once the pack succeeded).
    total: Option<u64>,
}

impl ChunkSink for PackSink<'_> {
    fn send(&mut self, data: Vec<u8>, last: bool) -> io::Result<()> {
        self.sent += data.len() as u64;
        let counted = self.uncompressed.map_or(self.sent, |count| count.get());
        let marker = if last { self.total.unwrap_or(counted) } else { counted };
        self.tx
            .blocking_send(PackMessage::Chunk(data, marker))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the pack stream was closed"))
    }

    fn buffer(&mut self, capacity: usize) -> Vec<u8> {
        self.pool.take(capacity)
    }
}

/// A pack's options and the members it is restricted to (`None`: all of them).
type SelectedPack = (PackOptions, Option<HashSet<String>>);

/// The pack thread: runs the pack into the channel, then the last chunk and the outcome.
fn produce(
    (opts, only): SelectedPack,
    chunk_size: usize,
    tx: mpsc::Sender<PackMessage>,
    pool: Arc<ChunkPool>,
    cancel: &AtomicBool,
) {
    let uncompressed = std::cell::Cell::new(0u64);
    let sink = PackSink {
        tx: &tx,
        pool: &pool,
        sent: 0,
        uncompressed: opts.gzip.is_some().then_some(&uncompressed),
        total: None,
    };
    let mut writer = ChunkWriter::new(chunk_size, sink);
    let packed = match &only {
        // No records wanted: a selection only when there is one.
        Some(only) => tar::pack_selected(&opts, Some(only), &mut writer, |n| uncompressed.set(n), cancel, &mut |_| {}),
        None => tar::pack(&opts, &mut writer, |n| uncompressed.set(n), cancel),
    };
    let result = packed.and_then(|summary| {
        writer.sink_mut().total = Some(summary.tar_bytes);
        writer.finish().map_err(|_| CoreError::aborted())?;
        Ok(summary)
    });
    let message = match settle(result, cancel) {
        Ok(summary) => PackMessage::Done(summary),
        Err(err) => PackMessage::Failed(err),
    };
    // The consumer may be gone; then there is no one to tell.
    let _ = tx.blocking_send(message);
}

/// State shared by a pack stream's handle, its pending reads and its cancellation.
struct PackStreamState {
    /// The options and sender until the thread starts (on the first read).
    pending: Mutex<Option<(SelectedPack, usize, mpsc::Sender<PackMessage>)>>,
    /// Closed (`None`) once the stream ended, failed or was cancelled.
    rx: tokio::sync::Mutex<Option<mpsc::Receiver<PackMessage>>>,
    cancel: Arc<AtomicBool>,
    pool: Arc<ChunkPool>,
    summary: Mutex<Option<PackSummary>>,
}

impl PackStreamState {
    fn start(&self) -> Result<(), CoreError> {
        let Some((opts, chunk_size, tx)) = lock(&self.pending).take() else { return Ok(()) };
        let cancel = Arc::clone(&self.cancel);
        let pool = Arc::clone(&self.pool);
        let worker = Worker::with_flag("paperclip-tar-pack", cancel, move |cancel| {
            produce(opts, chunk_size, tx, pool, cancel);
            Ok(())
        })?;
        // The thread reports through the channel.
        worker.detach();
        Ok(())
    }
}

impl Drop for PackStreamState {
    /// A stream dropped unfinished (its JS object collected) stops its thread: the flag
    /// stops the packer, the dropped receiver fails a blocked hand-over.
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
    }
}

/// A directory being packed into a sequence of chunks (internal; see
/// `createTarballStreamFromDirectory`). The pack starts on the first `read()` and stays at
/// most a few chunks ahead of the reads.
#[napi]
pub struct TarPackStream {
    state: Arc<PackStreamState>,
}

/// Creates a pack stream of `input` in chunks of `chunk_size` bytes (internal).
#[napi]
pub fn tar_pack_stream(input: TarPackInput, chunk_size: u32) -> napi::Result<TarPackStream> {
    if chunk_size == 0 || chunk_size > MAX_CHUNK_SIZE {
        return Err(to_napi(invalid(format!("chunk size {chunk_size} is out of range 1-{MAX_CHUNK_SIZE}"))));
    }
    let (tx, rx) = mpsc::channel(PACK_QUEUE_CHUNKS);
    Ok(TarPackStream {
        state: Arc::new(PackStreamState {
            pending: Mutex::new(Some((input.into_core(), chunk_size as usize, tx))),
            rx: tokio::sync::Mutex::new(Some(rx)),
            cancel: Arc::new(AtomicBool::new(false)),
            pool: Arc::default(),
            summary: Mutex::new(None),
        }),
    })
}

#[napi]
impl TarPackStream {
    /// The next chunk; `null` once the archive is complete. Rejects with the pack's error,
    /// or with the cancellation once `cancel()` was called. Reads must not overlap.
    #[napi]
    pub async fn read(&self) -> napi::Result<Option<TarPackChunk>> {
        let state = Arc::clone(&self.state);
        state.start().map_err(to_napi)?;
        let mut rx = state.rx.lock().await;
        if state.cancel.load(Ordering::Relaxed) {
            *rx = None;
            return Err(to_napi(CoreError::aborted()));
        }
        let Some(receiver) = rx.as_mut() else { return Ok(None) };
        match receiver.recv().await {
            Some(PackMessage::Chunk(data, tar_bytes)) => Ok(Some(TarPackChunk {
                data: PooledChunk { data, pool: Arc::clone(&state.pool) },
                tar_bytes: tar_bytes as f64,
            })),
            Some(PackMessage::Done(summary)) => {
                *rx = None;
                *lock(&state.summary) = Some(summary);
                Ok(None)
            }
            Some(PackMessage::Failed(err)) => {
                *rx = None;
                Err(to_napi(err))
            }
            None => {
                *rx = None;
                Err(to_napi(failure(internal("the pack thread ended without a result"), &state.cancel)))
            }
        }
    }

    /// Stops the pack: the thread ends at its next write and a pending or later `read()`
    /// rejects with the cancellation. Idempotent; does nothing after the end.
    #[napi]
    pub fn cancel(&self) {
        let state = &self.state;
        state.cancel.store(true, Ordering::Relaxed);
        lock(&state.pending).take();
        // Closing the receiver fails a hand-over the thread may be blocked in. A pending
        // read holds it; that read ends as soon as the thread, seeing the flag, stops.
        match state.rx.try_lock() {
            Ok(mut rx) => *rx = None,
            Err(_) => {
                let state = Arc::clone(state);
                napi::bindgen_prelude::spawn(async move {
                    state.rx.lock().await.take();
                });
            }
        }
    }

    /// Members and uncompressed size once the stream completed; `null` before.
    #[napi(getter)]
    pub fn summary(&self) -> Option<TarPackSummary> {
        lock(&self.state.summary).map(TarPackSummary::from)
    }
}

// ---------------------------------------------------------------------------------------
// Extract sink

type ExtractOutcome = Option<Result<ExtractSummary, CoreError>>;

/// State shared by an extract sink's handle and its pending writes.
struct ExtractState {
    /// Open until `finish()` or `abort()`.
    tx: Mutex<Option<mpsc::Sender<Vec<u8>>>>,
    outcome: watch::Receiver<ExtractOutcome>,
    cancel: Arc<AtomicBool>,
}

impl ExtractState {
    /// The extraction's result, once the thread ended.
    async fn outcome(&self) -> Result<ExtractSummary, CoreError> {
        let mut outcome = self.outcome.clone();
        let result = match outcome.wait_for(Option::is_some).await {
            Ok(settled) => settled.clone().unwrap_or_else(|| Err(internal("no extraction result"))),
            Err(_) => Err(internal("the extraction thread ended without a result")),
        };
        settle(result, &self.cancel)
    }
}

impl Drop for ExtractState {
    /// A sink dropped unfinished (its JS object collected) ends its extraction as aborted.
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
    }
}

/// An extraction fed chunk by chunk from JS (internal; see `extractTarballToDirectory`).
/// The thread starts at once (creating `dest`) and reads the chunks as they come.
#[napi]
pub struct TarExtractSink {
    state: Arc<ExtractState>,
}

/// Creates an extract sink as `input` says (internal).
#[napi]
pub fn tar_extract_stream(input: TarExtractInput) -> napi::Result<TarExtractSink> {
    let (dest, opts) = input.into_core();
    let (tx, rx) = mpsc::channel(EXTRACT_QUEUE_CHUNKS);
    let (outcome_tx, outcome_rx) = watch::channel(None);
    let cancel = Arc::new(AtomicBool::new(false));
    // The chunks JS pushed, in order; end of input when the sink is finished (or aborted:
    // then an error, so the result is the cancellation).
    let mut rx = rx;
    let reader = ChunkReader::with_cancel(move || rx.blocking_recv(), Arc::clone(&cancel));
    let worker = Worker::with_flag("paperclip-tar-extract", Arc::clone(&cancel), move |cancel| {
        let result = tar::extract(reader, &dest, &opts, |_| {}, cancel);
        let _ = outcome_tx.send(Some(result));
        Ok(())
    })
    .map_err(to_napi)?;
    // The thread reports through the watch channel.
    worker.detach();
    Ok(TarExtractSink { state: Arc::new(ExtractState { tx: Mutex::new(Some(tx)), outcome: outcome_rx, cancel }) })
}

#[napi]
impl TarExtractSink {
    /// Queues a copy of `chunk` for extraction; resolves once it is queued (the queue holds a
    /// few chunks, so a fast source waits for the extraction). Rejects with the extraction's
    /// error once it failed, and after `finish()` or `abort()`.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn write<'env>(&self, env: &'env Env, chunk: BufferSlice<'env>) -> napi::Result<PromiseRaw<'env, ()>> {
        // Copied now: the caller may reuse its buffer as soon as this returns.
        let data = chunk.to_vec();
        let tx = lock(&self.state.tx).clone();
        let state = Arc::clone(&self.state);
        env.spawn_future(async move {
            let Some(tx) = tx else {
                return Err(to_napi(failure(invalid("the extract sink is closed"), &state.cancel)));
            };
            if data.is_empty() {
                return Ok(());
            }
            match tx.send(data).await {
                Ok(()) => Ok(()),
                // The thread stopped reading: it ended, so its result says why.
                Err(_) => Err(to_napi(match state.outcome().await {
                    Err(err) => err,
                    Ok(_) => invalid("the archive ended before this chunk"),
                })),
            }
        })
    }

    /// Ends the input and resolves with the extraction's result.
    #[napi]
    pub async fn finish(&self) -> napi::Result<TarExtractSummary> {
        let state = Arc::clone(&self.state);
        lock(&state.tx).take();
        state.outcome().await.map(TarExtractSummary::from).map_err(to_napi)
    }

    /// Stops the extraction: it ends with the cancellation at its next read. Idempotent.
    #[napi]
    pub fn abort(&self) {
        self.state.cancel.store(true, Ordering::Relaxed);
        lock(&self.state.tx).take();
    }
}
