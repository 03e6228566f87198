//! Streamed transfers: a directory packed into a remote command's stdin, a remote
//! command's stdout extracted into a directory, and whole files either way.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender};
use std::sync::Arc;

use super::{
    Connection, Input, Output, Piece, Sessions, SshTarget, StderrLimit, CHUNK, PIPELINE_DEPTH, TRANSFER_STDERR_LIMIT,
};
use crate::error::{codes, Error, Result};
use crate::pipe::{ChunkReader, ChunkSink, ChunkWriter};
use crate::tar::{self, ExtractOptions, ExtractSummary, MemberRecord, PackOptions, PackSummary};
use crate::worker::Worker;

/// What a transfer moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TransferSummary {
    /// Bytes sent to the remote command's stdin (uploads) or read from its stdout (downloads).
    pub bytes: u64,
    /// Archive members packed or extracted (0 for a plain file).
    pub entries: u64,
}

/// Runs `command` with `input`, failing unless it succeeded; its stdout is discarded, or
/// collected up to `collect` bytes. Returns the input bytes sent and the stdout.
fn run_upload(
    conn: &mut Connection,
    command: &str,
    input: Input<'_>,
    collect: Option<usize>,
    progress: &mut impl FnMut(u64),
) -> Result<(u64, Vec<u8>)> {
    let output = match collect {
        Some(limit) => Output::Collect(limit),
        None => Output::Discard,
    };
    let outcome =
        conn.exec(command, input, output, StderrLimit::Truncate(TRANSFER_STDERR_LIMIT), |sent, _| progress(sent))?;
    if outcome.succeeded() {
        Ok((outcome.bytes_sent, outcome.stdout))
    } else {
        Err(outcome.failure())
    }
}

/// What an upload of a pack asks for beyond the archive itself.
#[derive(Debug, Default)]
pub struct UploadTarOptions {
    /// Write only these members (see [`tar::pack_selected`]); `None`: all of them.
    pub only: Option<HashSet<String>>,
    /// Keep the `stat` record of every member written.
    pub record: bool,
    /// Collect the remote command's stdout up to this many bytes (more fails the upload);
    /// `None`: discard it.
    pub collect_stdout: Option<usize>,
}

/// What an upload of a pack did.
#[derive(Debug, Default)]
pub struct UploadTarOutcome {
    pub summary: TransferSummary,
    /// Bytes of the uncompressed tar stream.
    pub tar_bytes: u64,
    /// The remote command's stdout (with [`UploadTarOptions::collect_stdout`]).
    pub stdout: Vec<u8>,
    /// The members written (with [`UploadTarOptions::record`]), in archive order.
    pub members: Vec<MemberRecord>,
}

/// Packs `pack` (on a thread of its own) into the stdin of `command` on a session of
/// `sessions`: upstream's `tar -cf - … | ssh host "sh -c 'mkdir -p dir && tar -xf - -C dir'"`,
/// in process. `progress` receives the bytes of the uncompressed tar stream packed so far
/// (the unit of upstream's counter, whether or not the stream is compressed on the wire).
/// Fails unless the whole archive reached the command and it exited with status 0.
pub fn upload_tar(
    sessions: Sessions<'_>,
    target: &SshTarget,
    command: &str,
    pack: PackOptions,
    opts: UploadTarOptions,
    cancel: Arc<AtomicBool>,
    progress: impl FnMut(u64),
) -> Result<UploadTarOutcome> {
    sessions.run(target, Arc::clone(&cancel), None, |conn| upload_tar_on(conn, command, pack, opts, cancel, progress))
}

fn upload_tar_on(
    conn: &mut Connection,
    command: &str,
    pack: PackOptions,
    opts: UploadTarOptions,
    cancel: Arc<AtomicBool>,
    mut progress: impl FnMut(u64),
) -> Result<UploadTarOutcome> {
    let (tx, rx) = mpsc::sync_channel::<Piece>(PIPELINE_DEPTH);
    let packed_bytes = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&packed_bytes);
    let UploadTarOptions { only, record, collect_stdout } = opts;
    let packer = Worker::linked("paperclip-ssh-pack", &cancel, move |cancel| {
        let mut writer = ChunkWriter::new(CHUNK, PieceSink(&tx));
        let mut members = Vec::new();
        let mut keep = |member: MemberRecord| {
            if record {
                members.push(member);
            }
        };
        let summary = tar::pack_selected(
            &pack,
            only.as_ref(),
            &mut writer,
            |n| counter.store(n, Ordering::Relaxed),
            cancel,
            &mut keep,
        )?;
        writer.finish().map_err(|_| Error::aborted())?;
        tx.send(Piece::End).map_err(|_| Error::aborted())?;
        Ok((summary, members))
    })?;
    let sent = run_upload(conn, command, Input::Chunks(rx), collect_stdout, &mut |_| {
        progress(packed_bytes.load(Ordering::Relaxed))
    });
    if sent.is_err() {
        packer.stop();
    }
    let (sent, stdout) = match sent {
        Ok((bytes, stdout)) => (Ok(bytes), stdout),
        Err(e) => (Err(e), Vec::new()),
    };
    let (packed, members) = match packer.join() {
        Ok((summary, members)) => (Ok(summary), members),
        Err(e) => (Err(e), Vec::new()),
    };
    let summary = upload_outcome(sent, packed)?;
    let tar_bytes = packed_bytes.load(Ordering::Relaxed);
    progress(tar_bytes);
    Ok(UploadTarOutcome { summary, tar_bytes, stdout, members })
}

/// The result of an upload from its two sides: the bytes the exec sent and the packer's
/// summary.
fn upload_outcome(sent: Result<u64>, packed: Result<PackSummary>) -> Result<TransferSummary> {
    match (sent, packed) {
        (Ok(bytes), Ok(summary)) => Ok(TransferSummary { bytes, entries: summary.entries }),
        // A broken input means the packer ended first: its error explains it, whether its own
        // failure or the caller's cancellation (which the packer may notice before the
        // channel side does; `stop` is only called after the exec returned).
        (Err(e), Err(pack_err)) if e.code == codes::INTERNAL => Err(pack_err),
        (Err(e), _) => Err(e),
        (Ok(_), Err(e)) => Err(e),
    }
}

/// Streams the stdout of `command` (upstream's remote `tar -cf - .`) into a safe extraction
/// of `dest` on a thread of its own, on a session of `sessions`. `progress` receives the
/// bytes read from the channel. Fails unless the command exited with status 0 and the
/// archive extracted completely.
pub fn download_tar(
    sessions: Sessions<'_>,
    target: &SshTarget,
    command: &str,
    dest: &Path,
    opts: ExtractOptions,
    cancel: Arc<AtomicBool>,
    progress: impl FnMut(u64),
) -> Result<TransferSummary> {
    sessions.run(target, Arc::clone(&cancel), None, |conn| download_tar_on(conn, command, dest, opts, cancel, progress))
}

fn download_tar_on(
    conn: &mut Connection,
    command: &str,
    dest: &Path,
    opts: ExtractOptions,
    cancel: Arc<AtomicBool>,
    mut progress: impl FnMut(u64),
) -> Result<TransferSummary> {
    let (tx, rx) = mpsc::sync_channel::<Vec<u8>>(PIPELINE_DEPTH);
    let dest = dest.to_path_buf();
    let extractor = Worker::linked("paperclip-ssh-extract", &cancel, move |cancel| {
        let reader = ChunkReader::new(rx);
        tar::extract(reader, &dest, &opts, |_| {}, cancel)
    })?;
    let outcome = conn.exec(
        command,
        Input::Empty,
        Output::Chunks(tx),
        StderrLimit::Truncate(TRANSFER_STDERR_LIMIT),
        |_, received| progress(received),
    );
    // `tx` went with the exec: the extraction sees the end of its input now.
    if outcome.is_err() {
        extractor.stop();
    }
    let extracted: Result<ExtractSummary> = extractor.join();
    let outcome = match outcome {
        Ok(outcome) => outcome,
        // The extraction's own failure explains a consumer that went away.
        Err(e) if e.code == codes::INTERNAL => return Err(extracted.err().unwrap_or(e)),
        Err(e) => return Err(e),
    };
    if !outcome.succeeded() {
        return Err(outcome.failure());
    }
    let summary = extracted?;
    Ok(TransferSummary { bytes: outcome.bytes_received, entries: summary.entries })
}

/// Streams the file `path` into the stdin of `command` (upstream's bundle upload,
/// `streamLocalFileToSsh`), on a session of `sessions`. Fails unless all of it was read by a
/// command that exited 0.
pub fn upload_file(
    sessions: Sessions<'_>,
    target: &SshTarget,
    command: &str,
    path: &Path,
    cancel: Arc<AtomicBool>,
    mut progress: impl FnMut(u64),
) -> Result<TransferSummary> {
    let mut file = fs::File::open(path).map_err(|e| Error::io(e, "open", path))?;
    sessions.run(target, cancel, None, |conn| {
        let (bytes, _) = run_upload(conn, command, Input::Reader(&mut file), None, &mut progress)?;
        Ok(TransferSummary { bytes, entries: 0 })
    })
}

/// Writes the stdout of `command` to a new file `path` (mode 0600; upstream's bundle
/// download, `streamSshToLocalFile`), on a session of `sessions`. On failure the file is
/// removed.
pub fn download_file(
    sessions: Sessions<'_>,
    target: &SshTarget,
    command: &str,
    path: &Path,
    cancel: Arc<AtomicBool>,
    progress: impl FnMut(u64),
) -> Result<TransferSummary> {
    sessions.run(target, cancel, None, |conn| download_file_on(conn, command, path, progress))
}

fn download_file_on(
    conn: &mut Connection,
    command: &str,
    path: &Path,
    mut progress: impl FnMut(u64),
) -> Result<TransferSummary> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| Error::io(e, "open", path))?;
    let result = conn
        .exec(command, Input::Empty, Output::Writer(&mut file), StderrLimit::Truncate(TRANSFER_STDERR_LIMIT), |_, r| {
            progress(r)
        })
        .and_then(|outcome| if outcome.succeeded() { Ok(outcome.bytes_received) } else { Err(outcome.failure()) })
        .and_then(|bytes| file.sync_all().map(|()| bytes).map_err(|e| Error::io(e, "fsync", path)));
    match result {
        Ok(bytes) => Ok(TransferSummary { bytes, entries: 0 }),
        Err(e) => {
            drop(file);
            let _ = fs::remove_file(path);
            Err(e)
        }
    }
}

/// The pack thread's sink: each chunk as a [`Piece::Data`] into the pipeline (the
/// [`Piece::End`] follows once the pack succeeded).
struct PieceSink<'a>(&'a SyncSender<Piece>);

impl ChunkSink for PieceSink<'_> {
    fn send(&mut self, chunk: Vec<u8>, _last: bool) -> io::Result<()> {
        self.0.send(Piece::Data(chunk)).map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the SSH channel closed"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary() -> PackSummary {
        PackSummary { entries: 3, tar_bytes: 3072 }
    }

    #[test]
    fn an_upload_fails_with_the_side_that_explains_it() {
        let broken_input = || Err(Error::new(codes::INTERNAL, "the input of the remote command failed"));
        assert_eq!(upload_outcome(Ok(4096), Ok(summary())), Ok(TransferSummary { bytes: 4096, entries: 3 }));
        // The packer ended first: its failure, or the cancellation it noticed first.
        let failed = upload_outcome(broken_input(), Err(Error::new(codes::FILE_CHANGED, "shrank")));
        assert_eq!(failed.unwrap_err().code, codes::FILE_CHANGED);
        assert!(upload_outcome(broken_input(), Err(Error::aborted())).unwrap_err().is_aborted());
        // The remote side failed first (the packer was stopped after it): the remote's error.
        let remote = upload_outcome(Err(Error::new(codes::SSH_REMOTE_FAILED, "tar: boom")), Err(Error::aborted()));
        assert_eq!(remote.unwrap_err().code, codes::SSH_REMOTE_FAILED);
        let pack_only = upload_outcome(Ok(10), Err(Error::new(codes::FILE_CHANGED, "shrank")));
        assert_eq!(pack_only.unwrap_err().code, codes::FILE_CHANGED);
    }
}
