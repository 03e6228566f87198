//! The read-ahead of a pack: one thread walks the tree (opening each regular file there, in
//! archive order) and a small pool reads small files whole, batch by batch, within a memory
//! budget, so the writer rarely waits on a read.

use std::fs::File;
use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};

use super::selection::Selection;
use super::{PackOptions, Plan};
use crate::error::{codes, Error, Result};
use crate::tar::walk::{EntryKind, Walk, WalkEntry};

/// One read of a member's data into `buffer`: the bytes read (never 0), or the error of a
/// file that ended `remaining` bytes early or failed to read.
pub(super) fn read_some(file: &mut File, buffer: &mut [u8], remaining: u64, entry: &Member) -> Result<usize> {
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
pub(super) struct Member {
    pub(super) member: String,
    /// The host path, for messages.
    pub(super) path: PathBuf,
    pub(super) kind: EntryKind,
    pub(super) mode: u32,
    pub(super) uid: u32,
    pub(super) gid: u32,
    pub(super) mtime: i64,
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
pub(super) enum Content {
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
    /// Bytes of small files to read whole (held against the [`MemoryBudget`] until written).
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

/// The memory of the read-ahead: bytes of file data read ahead and not yet written, at most
/// [`READ_AHEAD_BYTES`] (or one batch, when nothing else is held).
struct MemoryBudget {
    used: Mutex<u64>,
    freed: Condvar,
}

impl MemoryBudget {
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
pub(super) const READ_AHEAD_FILE: u64 = 1 << 20;
/// The most file data read ahead at once.
pub(super) const READ_AHEAD_BYTES: u64 = 16 << 20;
/// A batch ends after this many members, or this many bytes of small files.
const BATCH_MEMBERS: usize = 32;
const BATCH_BYTES: u64 = 1 << 20;
/// The most members between the walk and the writer (each may hold an open file).
pub(super) const READ_AHEAD_MEMBERS: usize = 256;
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

/// Walks the archive on one thread (opening each regular file there, in archive order),
/// reads small files ahead whole on a pool of [`READ_AHEAD_THREADS`], batch by batch, and
/// calls `write` for every member in archive order on the calling thread, with the member's
/// content or the error its open or read met. A walk error is returned at its turn, after
/// every member before it was written. At most about [`READ_AHEAD_MEMBERS`] members and
/// [`READ_AHEAD_BYTES`] of data are held ahead of the writer. The first error of `write`
/// stops the walk and the pool. Returns the number of members written.
pub(super) fn read_ahead(
    plan: &Plan,
    opts: &PackOptions,
    skip: &[(u64, u64)],
    cancel: &AtomicBool,
    mut selection: Selection<'_>,
    mut write: impl FnMut(&Member, Result<Content>) -> Result<()>,
) -> Result<u64> {
    let stop = AtomicBool::new(false);
    let budget = MemoryBudget { used: Mutex::new(0), freed: Condvar::new() };
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
