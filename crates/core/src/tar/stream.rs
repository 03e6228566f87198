//! Byte counting, progress and cancellation around the caller's reader or writer, shared by
//! packing and extraction.

use std::cell::{Cell, RefCell};
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::Error;

/// The size of every copy buffer (file data in, file data out).
pub(crate) const COPY_BUFFER: usize = 64 * 1024;

/// Turns an I/O error of a caller-supplied stream into an [`Error`]: the OS code when there is
/// one (`EPIPE`, `ENOSPC`, …), with `path` when the stream is a known file.
pub(crate) fn stream_error(err: io::Error, syscall: &'static str, path: Option<&Path>) -> Error {
    match path {
        Some(path) => Error::io(err, syscall, path),
        None => Error::os(err, syscall),
    }
}

/// Fails with [`Error::aborted`] once `cancel` is set.
pub(crate) fn check_cancel(cancel: &AtomicBool) -> Result<(), Error> {
    if cancel.load(Ordering::Relaxed) {
        Err(Error::aborted())
    } else {
        Ok(())
    }
}

/// A writer that counts what goes through it and reports the running total.
pub(crate) struct CountingWriter<'a, W, P> {
    inner: W,
    count: u64,
    progress: P,
    cancel: &'a AtomicBool,
}

impl<'a, W: Write, P: FnMut(u64)> CountingWriter<'a, W, P> {
    pub fn new(inner: W, progress: P, cancel: &'a AtomicBool) -> Self {
        CountingWriter { inner, count: 0, progress, cancel }
    }

    /// Writes all of `buf`: checks for cancellation first, reports progress after.
    pub fn put(&mut self, buf: &[u8]) -> Result<(), WriteFailure> {
        if self.cancel.load(Ordering::Relaxed) {
            return Err(WriteFailure::Aborted);
        }
        self.inner.write_all(buf).map_err(WriteFailure::Io)?;
        self.count += buf.len() as u64;
        (self.progress)(self.count);
        Ok(())
    }

    /// Bytes written so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn into_inner(self) -> W {
        self.inner
    }
}

/// Why a [`CountingWriter::put`] failed.
#[derive(Debug)]
pub(crate) enum WriteFailure {
    Aborted,
    Io(io::Error),
}

/// What a [`CountingReader`] observed, readable while the reader itself is buried under a
/// decompressor and the archive parser.
#[derive(Debug, Default)]
pub(crate) struct ReadState {
    count: Cell<u64>,
    cancelled: Cell<bool>,
    source_error: RefCell<Option<io::Error>>,
}

impl ReadState {
    /// Bytes read from the source so far.
    pub fn count(&self) -> u64 {
        self.count.get()
    }

    /// The error to report in place of whatever a layer above made of a failed read: the
    /// cancellation, or the source's own error.
    pub fn take_failure(&self) -> Option<Error> {
        if self.cancelled.get() {
            return Some(Error::aborted());
        }
        self.source_error.borrow_mut().take().map(|err| stream_error(err, "read", None))
    }
}

/// A reader that counts what it delivers, reports the running total, stops with an error
/// once cancelled, and records an error of the underlying source in its [`ReadState`] so
/// that it can be told apart from a malformed archive.
pub(crate) struct CountingReader<'a, R, P> {
    inner: R,
    progress: P,
    cancel: &'a AtomicBool,
    state: &'a ReadState,
}

impl<'a, R: Read, P: FnMut(u64)> CountingReader<'a, R, P> {
    pub fn new(inner: R, progress: P, cancel: &'a AtomicBool, state: &'a ReadState) -> Self {
        CountingReader { inner, progress, cancel, state }
    }
}

impl<R: Read, P: FnMut(u64)> Read for CountingReader<'_, R, P> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.cancel.load(Ordering::Relaxed) {
            self.state.cancelled.set(true);
            return Err(io::Error::other("cancelled"));
        }
        loop {
            match self.inner.read(buf) {
                Ok(n) => {
                    if n > 0 {
                        let count = self.state.count.get() + n as u64;
                        self.state.count.set(count);
                        (self.progress)(count);
                    }
                    return Ok(n);
                }
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => {
                    let echo = io::Error::new(err.kind(), err.to_string());
                    *self.state.source_error.borrow_mut() = Some(err);
                    return Err(echo);
                }
            }
        }
    }
}
