//! The tar writer: each member as GNU tar encodes it (long-name entries, header, data and
//! padding) over a buffered or gzip-compressed sink that counts the tar bytes.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::AtomicBool;

use super::owners::OwnerNames;
use super::read_ahead::{read_some, Content, Member};
use super::END_OF_ARCHIVE;
use crate::error::{codes, Error, Result};
use crate::tar::gzip::GzipWriter;
use crate::tar::header::{self, kind, long_entry, padded, HeaderSpec, BLOCK, NAME_FIELD};
use crate::tar::stream::{stream_error, CountingWriter, WriteFailure, COPY_BUFFER};
use crate::tar::walk::EntryKind;

/// The output stack: buffered, or gzip-compressed (which buffers its output); counted.
pub(super) enum Sink<W: Write> {
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
    /// The sink for `writer`: plain, or gzip at `gzip`'s level (0-9).
    pub(super) fn new(writer: W, gzip: Option<u32>) -> Result<Sink<W>> {
        Ok(match gzip {
            None => Sink::Plain(BufWriter::with_capacity(COPY_BUFFER, writer)),
            Some(level @ 0..=9) => Sink::Gzip(Box::new(GzipWriter::new(writer, level))),
            Some(level) => {
                return Err(Error::new(codes::INVALID_ARGUMENT, format!("gzip level {level} is out of range 0-9")))
            }
        })
    }

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
pub(super) struct TarOut<'a, W: Write, P: FnMut(u64)> {
    out: CountingWriter<'a, Sink<W>, P>,
    /// The file being written, for error messages.
    target: Option<&'a Path>,
    /// Member name prefix (`./` or nothing).
    prefix: &'static str,
    owners: OwnerNames,
    buffer: Vec<u8>,
}

impl<'a, W: Write, P: FnMut(u64)> TarOut<'a, W, P> {
    /// A writer into `sink`, reporting to `progress` and stopping once `cancel` is set;
    /// `target` is the file written (for messages), `prefix` the member name prefix.
    pub(super) fn new(
        sink: Sink<W>,
        progress: P,
        cancel: &'a AtomicBool,
        target: Option<&'a Path>,
        prefix: &'static str,
    ) -> Self {
        TarOut {
            out: CountingWriter::new(sink, progress, cancel),
            target,
            prefix,
            owners: OwnerNames::default(),
            buffer: vec![0; COPY_BUFFER],
        }
    }

    /// Writes the end-of-archive blocks and ends the sink: the uncompressed tar bytes
    /// written, and the writer.
    pub(super) fn finish(mut self) -> Result<(u64, W)> {
        self.put(&END_OF_ARCHIVE)?;
        let tar_bytes = self.out.count();
        let target = self.target;
        let writer = self.out.into_inner().finish().map_err(|e| stream_error(e, "write", target))?;
        Ok((tar_bytes, writer))
    }

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
    pub(super) fn member(&mut self, entry: &Member, content: Result<Content>) -> Result<()> {
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

/// Major and minor numbers of a device id.
fn split_device(rdev: u64) -> (u64, u64) {
    let dev = rdev as libc::dev_t;
    (libc::major(dev) as u64, libc::minor(dev) as u64)
}
