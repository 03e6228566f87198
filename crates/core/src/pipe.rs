//! The chunk pipe between two threads, one end of each kind:
//!
//! * [`ChunkReader`]: a [`Read`] over a stream of byte chunks from another thread (a
//!   channel's receiver, or any [`ChunkSource`]), for a consumer that wants a reader (the
//!   tar extractor fed by an SSH channel or by JS);
//! * [`ChunkWriter`]: a [`Write`] that cuts its output into chunks of one size and hands each
//!   to a [`ChunkSink`] (a channel's sender), for a producer that wants a writer (the tar
//!   packer feeding an SSH channel or JS).
//!
//! Backpressure is the channel's: a bounded channel blocks the producer while it is full.

use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;

/// Where a [`ChunkReader`] gets its chunks.
pub trait ChunkSource {
    /// The next chunk, waiting for it; `None` once the input ended (or its sender went away).
    fn next_chunk(&mut self) -> Option<Vec<u8>>;
}

impl ChunkSource for Receiver<Vec<u8>> {
    fn next_chunk(&mut self) -> Option<Vec<u8>> {
        self.recv().ok()
    }
}

/// A closure is a source: for channels of other crates (`|| rx.blocking_recv()`).
impl<F: FnMut() -> Option<Vec<u8>>> ChunkSource for F {
    fn next_chunk(&mut self) -> Option<Vec<u8>> {
        self()
    }
}

/// A [`Read`] over the chunks of a [`ChunkSource`], in order; end of input when the source
/// ends. With a cancel flag, an end while the flag is set is an error instead, so a
/// consumer whose input was cut off by a cancellation never takes it for complete.
pub struct ChunkReader<S> {
    source: S,
    current: Vec<u8>,
    offset: usize,
    cancel: Option<Arc<AtomicBool>>,
}

impl<S: ChunkSource> ChunkReader<S> {
    /// A reader whose input ends when `source` does.
    pub fn new(source: S) -> Self {
        ChunkReader { source, current: Vec::new(), offset: 0, cancel: None }
    }

    /// A reader whose input ends when `source` does, unless `cancel` is set by then.
    pub fn with_cancel(source: S, cancel: Arc<AtomicBool>) -> Self {
        ChunkReader { cancel: Some(cancel), ..ChunkReader::new(source) }
    }
}

impl<S: ChunkSource> Read for ChunkReader<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.offset == self.current.len() {
            match self.source.next_chunk() {
                Some(chunk) => {
                    self.current = chunk;
                    self.offset = 0;
                }
                None if self.cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed)) => {
                    return Err(io::Error::other("aborted"));
                }
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len() - self.offset);
        buf[..n].copy_from_slice(&self.current[self.offset..self.offset + n]);
        self.offset += n;
        Ok(n)
    }
}

/// Where a [`ChunkWriter`] hands its chunks.
pub trait ChunkSink {
    /// Takes one chunk: exactly the writer's chunk size, except the `last` one (never empty).
    /// An error (the consumer went away) fails the write that filled the chunk.
    fn send(&mut self, chunk: Vec<u8>, last: bool) -> io::Result<()>;

    /// An empty buffer of at least `capacity` bytes for the next chunk (a pool's, or new).
    fn buffer(&mut self, capacity: usize) -> Vec<u8> {
        Vec::with_capacity(capacity)
    }
}

/// A [`Write`] that cuts its output into chunks of `size` bytes and hands each to a
/// [`ChunkSink`] as soon as it is full; [`ChunkWriter::finish`] hands over the rest.
/// Flushing hands nothing over: chunks leave full or at the end.
pub struct ChunkWriter<S: ChunkSink> {
    sink: S,
    chunk: Vec<u8>,
    size: usize,
}

impl<S: ChunkSink> ChunkWriter<S> {
    /// A writer of `size`-byte chunks (at least 1) into `sink`.
    pub fn new(size: usize, mut sink: S) -> Self {
        let size = size.max(1);
        let chunk = sink.buffer(size);
        ChunkWriter { sink, chunk, size }
    }

    /// The sink, to read or update its state between writes.
    pub fn sink_mut(&mut self) -> &mut S {
        &mut self.sink
    }

    /// Hands over the last, partial chunk (nothing when it is empty) and returns the sink.
    pub fn finish(mut self) -> io::Result<S> {
        if !self.chunk.is_empty() {
            let chunk = std::mem::take(&mut self.chunk);
            self.sink.send(chunk, true)?;
        }
        Ok(self.sink)
    }
}

impl<S: ChunkSink> Write for ChunkWriter<S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut rest = buf;
        while !rest.is_empty() {
            let take = (self.size - self.chunk.len()).min(rest.len());
            self.chunk.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if self.chunk.len() == self.size {
                let next = self.sink.buffer(self.size);
                let full = std::mem::replace(&mut self.chunk, next);
                self.sink.send(full, false)?;
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// Records what it is handed; fails once `fail_after` chunks arrived.
    #[derive(Default)]
    struct Recorder {
        chunks: Vec<(Vec<u8>, bool)>,
        fail_after: Option<usize>,
    }

    impl ChunkSink for Recorder {
        fn send(&mut self, chunk: Vec<u8>, last: bool) -> io::Result<()> {
            if self.fail_after.is_some_and(|n| self.chunks.len() >= n) {
                return Err(io::Error::new(io::ErrorKind::BrokenPipe, "gone"));
            }
            self.chunks.push((chunk, last));
            Ok(())
        }
    }

    /// xorshift bytes of a seeded stream.
    fn bytes(len: usize, seed: u64) -> Vec<u8> {
        let mut s = seed | 1;
        (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                s as u8
            })
            .collect()
    }

    #[test]
    fn the_writer_cuts_exact_chunks_whatever_the_write_sizes() {
        let seed = 0x00c0_ffee;
        let data = bytes(10_000, seed);
        for size in [1, 7, 512, 4096, 10_000, 20_000] {
            for step in [1, 3, 511, 4097, 10_000] {
                let mut writer = ChunkWriter::new(size, Recorder::default());
                for piece in data.chunks(step) {
                    writer.write_all(piece).unwrap();
                }
                let chunks = writer.finish().unwrap().chunks;
                let joined: Vec<u8> = chunks.iter().flat_map(|(c, _)| c.iter().copied()).collect();
                assert_eq!(joined, data, "seed {seed} size {size} step {step}");
                let (last, full) = chunks.split_last().unwrap();
                assert!(full.iter().all(|(c, l)| c.len() == size && !l), "size {size} step {step}");
                // The tail is handed over by `finish` only when something is left for it.
                if data.len().is_multiple_of(size) {
                    assert_eq!((last.0.len(), last.1), (size, false), "size {size} step {step}");
                } else {
                    assert_eq!((last.0.len(), last.1), (data.len() % size, true), "size {size} step {step}");
                }
            }
        }
    }

    #[test]
    fn a_sink_that_went_away_fails_the_write() {
        let mut writer = ChunkWriter::new(4, Recorder { fail_after: Some(1), ..Default::default() });
        writer.write_all(b"abcd").unwrap();
        let err = writer.write_all(b"efgh").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
    }

    #[test]
    fn the_reader_returns_the_chunks_in_order() {
        let data = bytes(50_000, 7);
        let (tx, rx) = mpsc::sync_channel(2);
        let sent = data.clone();
        let producer = std::thread::spawn(move || {
            for (i, chunk) in sent.chunks(1000).enumerate() {
                tx.send(chunk.to_vec()).unwrap();
                if i % 5 == 0 {
                    tx.send(Vec::new()).unwrap(); // an empty chunk is no end of input
                }
            }
        });
        let mut out = Vec::new();
        ChunkReader::new(rx).read_to_end(&mut out).unwrap();
        producer.join().unwrap();
        assert_eq!(out, data);
    }

    #[test]
    fn a_cancelled_end_is_an_error_and_a_plain_end_is_eof() {
        let mut chunks = vec![b"xy".to_vec()].into_iter();
        let cancel = Arc::new(AtomicBool::new(false));
        let mut reader = ChunkReader::with_cancel(move || chunks.next(), Arc::clone(&cancel));
        let mut out = Vec::new();
        reader.read_to_end(&mut out).unwrap();
        assert_eq!(out, b"xy");
        cancel.store(true, Ordering::Relaxed);
        assert!(reader.read(&mut [0; 4]).is_err());
    }
}
