//! The gzip layer of a pack: a gzip member (RFC 1952) around a raw deflate stream (RFC 1951)
//! from zlib-rs, in which pieces of file data that cannot be compressed are written as
//! stored blocks instead of being run through the compressor.
//!
//! zlib-rs's level 1 (`deflate_quick`) spends ~8–10 ns a byte on data without repeats
//! (~110 MB/s on one core, against 350–450 MB/s on source text) and, coding every byte with
//! the fixed Huffman code, makes such data 5.5 % *larger*. A stored block copies it, at memory
//! speed, with 5 bytes of framing per 64 KiB. Which pieces are stored is decided from their
//! bytes alone (see [`incompressible`]), so the output is still one deterministic gzip member
//! that any gzip reader takes.

use std::io::{self, Write};

use flate2::{Compress, Compression, Crc, FlushCompress, Status};

/// Writes shorter than this always go through the compressor: tar headers and padding, small
/// files. Storing one costs a full flush (the compressor forgets its history, so the next
/// header compresses without the previous one) and 10 bytes of framing.
const MIN_STORED: usize = 1024;
/// Largest stored block (its length is a 16-bit field).
const MAX_STORED_BLOCK: usize = 65_535;
/// Bytes of a piece whose distribution is looked at: 8 runs of 256, spread over the piece.
const SAMPLE_RUNS: usize = 8;
const SAMPLE_RUN: usize = 256;
/// Entropy (bits per byte) from which a sample's spread counts as incompressible. Text and
/// code sit at 3.5–6, executables at 5–6.5; compressed or encrypted data (archives, images,
/// media, random) at 7.8–8. A Huffman code cannot gain more than (8 − H) / 8 on such data,
/// and level 1's fixed code gains nothing from the distribution at all.
const STORE_ENTROPY: f64 = 7.5;
/// Bytes at the start of a piece searched for repeated strings, and the share of positions
/// (one in this many) that must start one for the piece to count as compressible.
const REPEAT_PROBE: usize = 2048;
const REPEAT_SHARE: usize = 32;
/// Compressed output is handed to the writer in pieces of about this size.
const OUT_CHUNK: usize = 64 * 1024;
/// Stored data at least this long is written straight to the writer, not copied first.
const DIRECT_WRITE: usize = 16 * 1024;

/// A gzip writer for a tar stream. Every `write` is one piece of the stream (a header, a
/// padding, up to 64 KiB of a file): the piece is compressed, or stored when it is at least
/// [`MIN_STORED`] bytes long and looks incompressible.
pub(crate) struct GzipWriter<W: Write> {
    inner: W,
    deflate: Compress,
    crc: Crc,
    /// Output not yet handed to `inner`.
    out: Vec<u8>,
    /// Whether pieces may be stored (not at level 0, where everything is).
    store: bool,
    /// The compressor was given input since its last full flush: a stored block must wait
    /// for that flush, which ends its block on a byte boundary and makes it forget the data
    /// (its back-references must not reach across stored bytes it has not seen).
    dirty: bool,
}

impl<W: Write> GzipWriter<W> {
    pub fn new(inner: W, level: u32) -> Self {
        let mut out = Vec::with_capacity(4 * OUT_CHUNK);
        // The header flate2's `GzEncoder` writes: no name, no mtime, XFL from the level, OS
        // "unknown".
        let xfl = match level {
            0 | 1 => 4,
            9 => 2,
            _ => 0,
        };
        out.extend_from_slice(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, xfl, 255]);
        GzipWriter {
            inner,
            deflate: Compress::new(Compression::new(level), false),
            crc: Crc::new(),
            out,
            store: level > 0,
            dirty: false,
        }
    }

    /// Ends the deflate stream, writes the trailer, flushes and returns the writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.run(&[], FlushCompress::Finish)?;
        let trailer = [self.crc.sum().to_le_bytes(), self.crc.amount().to_le_bytes()];
        self.out.extend_from_slice(trailer.as_flattened());
        self.drain()?;
        self.inner.flush()?;
        Ok(self.inner)
    }

    /// Hands the pending output to `inner`.
    fn drain(&mut self) -> io::Result<()> {
        if !self.out.is_empty() {
            self.inner.write_all(&self.out)?;
            self.out.clear();
        }
        Ok(())
    }

    /// Runs the compressor over all of `input` with `flush`, until the flush is complete.
    fn run(&mut self, mut input: &[u8], flush: FlushCompress) -> io::Result<()> {
        loop {
            if self.out.len() >= OUT_CHUNK {
                self.drain()?;
            }
            let (in_before, out_before) = (self.deflate.total_in(), self.out.len());
            let status = self.deflate.compress_vec(input, &mut self.out, flush).map_err(io::Error::other)?;
            input = &input[(self.deflate.total_in() - in_before) as usize..];
            let room_left = self.out.len() < self.out.capacity();
            match status {
                Status::StreamEnd => return Ok(()),
                // All input taken and, for a flush, all output out (zlib's rule: the flush is
                // complete once it returns with room to spare).
                _ if input.is_empty() && (room_left || flush == FlushCompress::None) => return Ok(()),
                Status::BufError if self.out.len() == out_before => {
                    return Err(io::Error::other("the deflate stream made no progress"))
                }
                _ => {}
            }
        }
    }

    fn compress(&mut self, piece: &[u8]) -> io::Result<()> {
        self.dirty = true;
        self.run(piece, FlushCompress::None)
    }

    /// Writes `piece` as stored blocks (after a full flush of the compressor if it holds data).
    fn stored(&mut self, piece: &[u8]) -> io::Result<()> {
        if self.dirty {
            self.run(&[], FlushCompress::Full)?;
            self.dirty = false;
        }
        for block in piece.chunks(MAX_STORED_BLOCK) {
            let len = block.len() as u16;
            // BFINAL 0, BTYPE 00, then LEN and its complement; the stream is on a byte
            // boundary after a full flush or another stored block.
            self.out.push(0);
            self.out.extend_from_slice(&len.to_le_bytes());
            self.out.extend_from_slice(&(!len).to_le_bytes());
            if block.len() >= DIRECT_WRITE {
                self.drain()?;
                self.inner.write_all(block)?;
            } else {
                self.out.extend_from_slice(block);
                if self.out.len() >= OUT_CHUNK {
                    self.drain()?;
                }
            }
        }
        Ok(())
    }
}

impl<W: Write> Write for GzipWriter<W> {
    fn write(&mut self, piece: &[u8]) -> io::Result<usize> {
        if piece.is_empty() {
            return Ok(0);
        }
        self.crc.update(piece);
        if self.store && piece.len() >= MIN_STORED && incompressible(piece) {
            self.stored(piece)?;
        } else {
            self.compress(piece)?;
        }
        Ok(piece.len())
    }

    /// Hands over what is pending; the compressor keeps what it has not emitted yet (a sync
    /// flush would cost bytes and is never needed: the stream is only read once finished).
    fn flush(&mut self) -> io::Result<()> {
        self.drain()?;
        self.inner.flush()
    }
}

/// Whether deflate would not make `piece` smaller: its bytes are spread so evenly over the
/// 256 values that a Huffman code cannot gain ([`spread_evenly`]), and its start has
/// (almost) no repeated strings for LZ77 to use ([`repeats`]). Repeats further apart than
/// [`REPEAT_PROBE`] bytes are not looked for: in data of that spread they are rare.
pub(crate) fn incompressible(piece: &[u8]) -> bool {
    spread_evenly(piece) && {
        let probe = &piece[..piece.len().min(REPEAT_PROBE)];
        repeats(probe) * REPEAT_SHARE < probe.len()
    }
}

/// Whether a sample of `piece` ([`SAMPLE_RUNS`] runs of [`SAMPLE_RUN`] bytes spread over it,
/// or all of it when shorter) has a collision entropy (Rényi entropy of order 2,
/// −log2 Σ p², a lower bound of the Shannon entropy) of at least [`STORE_ENTROPY`] bits a byte.
fn spread_evenly(piece: &[u8]) -> bool {
    // Four tables, so that runs of one byte value do not wait on one counter.
    let mut counts = [[0u32; 256]; 4];
    let mut count = |run: &[u8]| {
        let mut quads = run.chunks_exact(4);
        for quad in &mut quads {
            for (table, &byte) in counts.iter_mut().zip(quad) {
                table[usize::from(byte)] += 1;
            }
        }
        for &byte in quads.remainder() {
            counts[0][usize::from(byte)] += 1;
        }
    };
    let sample_len = SAMPLE_RUNS * SAMPLE_RUN;
    if piece.len() <= sample_len {
        count(piece);
    } else {
        let step = (piece.len() - SAMPLE_RUN) / (SAMPLE_RUNS - 1);
        for run in 0..SAMPLE_RUNS {
            count(&piece[run * step..run * step + SAMPLE_RUN]);
        }
    }
    let n = piece.len().min(sample_len) as u64;
    let squares: u64 =
        (0..256).map(|value| u64::from(counts.iter().map(|table| table[value]).sum::<u32>()).pow(2)).sum();
    // −log2(Σ c² / n²) ≥ STORE_ENTROPY  ⇔  Σ c² · 2^STORE_ENTROPY ≤ n²
    squares as f64 * STORE_ENTROPY.exp2() <= (n * n) as f64
}

/// How many positions of `data` start 4 bytes seen earlier in it, as far as a table of the
/// last 4 bytes seen per hash finds them (an LZ77 matcher's view, one candidate per hash).
fn repeats(data: &[u8]) -> usize {
    const BITS: u32 = 11;
    let mut last = [0u32; 1 << BITS];
    let mut found = 0;
    for window in data.windows(4) {
        let value = u32::from_le_bytes([window[0], window[1], window[2], window[3]]);
        let slot = &mut last[(value.wrapping_mul(0x9e37_79b1) >> (32 - BITS)) as usize];
        found += usize::from(*slot == value);
        *slot = value;
    }
    found
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::process::Command;

    use super::*;
    use crate::tar::testutil::{have_tool, run_with_input, Rng};

    fn random(rng: &mut Rng, len: usize) -> Vec<u8> {
        (0..len).map(|_| rng.next_u64() as u8).collect()
    }

    /// Lines of made-up code: compressible, entropy ~4.5 bits a byte.
    fn text(rng: &mut Rng, len: usize) -> Vec<u8> {
        const WORDS: &[&str] = &["const", "value", "return", "await", "path", "(", ");", " = ", "\n  "];
        let mut out = Vec::new();
        while out.len() < len {
            out.extend_from_slice(rng.pick(WORDS).as_bytes());
        }
        out.truncate(len);
        out
    }

    /// Every byte value equally often, yet a repeat every 256 bytes.
    fn periodic(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 31 + 7) as u8).collect()
    }

    fn gzip(level: u32, pieces: &[&[u8]]) -> Vec<u8> {
        let mut writer = GzipWriter::new(Vec::new(), level);
        for piece in pieces {
            writer.write_all(piece).unwrap();
        }
        writer.finish().unwrap()
    }

    fn gunzip(data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(data).read_to_end(&mut out).unwrap();
        out
    }

    #[test]
    fn what_counts_as_incompressible() {
        let mut rng = Rng::new(1);
        assert!(incompressible(&random(&mut rng, 65_536)));
        assert!(incompressible(&random(&mut rng, 1024)));
        assert!(!incompressible(&text(&mut rng, 65_536)));
        assert!(!incompressible(&text(&mut rng, 1024)));
        assert!(!incompressible(&periodic(65_536)));
        assert!(!incompressible(&vec![0u8; 4096]));
        // Random data repeated at a short distance: high entropy, but LZ77 finds it.
        let unit = random(&mut rng, 700);
        let repeated: Vec<u8> = unit.iter().cycle().take(20_000).copied().collect();
        assert!(!incompressible(&repeated));
        // Base64-like: no repeats, but only 64 values (6 bits a byte) for Huffman to use.
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let base64: Vec<u8> = (0..8192).map(|_| *rng.pick(alphabet)).collect();
        assert!(!incompressible(&base64));
    }

    #[test]
    fn mixed_pieces_round_trip_at_every_level() {
        let mut rng = Rng::new(2);
        let mut pieces: Vec<Vec<u8>> = Vec::new();
        for _ in 0..60 {
            let len = *rng.pick(&[0, 1, 100, 512, 1023, 1024, 5000, 65_535, 65_536, 200_000]);
            pieces.push(match rng.below(4) {
                0 => random(&mut rng, len),
                1 => text(&mut rng, len),
                2 => periodic(len),
                _ => vec![0; len],
            });
        }
        let refs: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
        let whole = pieces.concat();
        for level in 0..=9 {
            let gz = gzip(level, &refs);
            assert_eq!(gunzip(&gz), whole, "level {level}");
        }
        let gz = gzip(1, &refs);
        if have_tool("gzip", &["--version"], "mixed_pieces_round_trip_at_every_level") {
            let mut command = Command::new("gzip");
            command.arg("-dc");
            assert_eq!(run_with_input(command, &gz), whole);
        }
    }

    #[test]
    fn incompressible_pieces_are_stored_and_the_rest_compressed() {
        let mut rng = Rng::new(3);
        let noise = random(&mut rng, 1 << 20);
        let pieces: Vec<&[u8]> = noise.chunks(65_536).collect();
        for level in 1..=9 {
            let gz = gzip(level, &pieces);
            // 10 header + 8 trailer, 5 per stored block (two per 64 KiB piece), the final block.
            assert!(gz.len() <= noise.len() + 18 + 2 * 16 * 5 + 8, "level {level}: {}", gz.len());
            assert_eq!(gunzip(&gz), noise);
        }
        // Headers between stored pieces still shrink; compressible pieces are compressed.
        let code = text(&mut rng, 1 << 20);
        let mut mixed: Vec<&[u8]> = Vec::new();
        let header = [0u8; 512];
        for (noise, code) in noise.chunks(65_536).zip(code.chunks(65_536)) {
            mixed.extend([&header[..], noise, &header[..], code]);
        }
        let gz = gzip(1, &mixed);
        assert!(gz.len() < noise.len() + code.len() / 2, "{}", gz.len());
        assert_eq!(gunzip(&gz), mixed.concat());
    }

    /// The header is flate2's `GzEncoder`'s, and an empty stream decodes to nothing.
    #[test]
    fn header_and_empty_stream() {
        for level in 0..=9 {
            let ours = gzip(level, &[]);
            let mut theirs = flate2::write::GzEncoder::new(Vec::new(), Compression::new(level));
            theirs.write_all(b"").unwrap();
            assert_eq!(ours[..10], theirs.finish().unwrap()[..10], "level {level}");
            assert!(gunzip(&ours).is_empty());
        }
    }
}
