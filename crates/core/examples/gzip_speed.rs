//! Profiling aid: where the time of a gzip pack goes, on one core.
//!
//! `CARGO_TARGET_DIR=target/examples cargo run --release -p paperclip-sync-core --example gzip_speed -- raw [MB] [file…]`
//!   raw flate2 + zlib-rs level 1 on random and on source-like data: CRC32 alone, deflate
//!   alone, `GzEncoder` fed in 512-byte, 64 KiB and 1 MiB writes.
//! `… --example gzip_speed -- pack <dir> [level] [gzip-only]`
//!   the whole pack of `<dir>` into a sink, plain and gzip, with the thread's CPU time.
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use flate2::write::{DeflateEncoder, GzEncoder};
use flate2::Compression;
use paperclip_sync_core::tar::{pack, PackOptions};

mod common;
use common::random_bytes;

/// Lines that look like TypeScript: keywords, identifiers from a small vocabulary, numbers,
/// indentation. gzip -1 makes ~3-4x of it, like real source.
fn source_like(len: usize, seed: u64) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "const",
        "let",
        "return",
        "function",
        "async",
        "await",
        "import",
        "export",
        "from",
        "if",
        "else",
        "for",
        "of",
        "new",
        "this",
        "null",
        "undefined",
        "true",
        "false",
        "type",
        "interface",
        "string",
        "number",
        "Promise",
        "options",
        "value",
        "result",
        "error",
        "path",
        "buffer",
        "length",
        "index",
        "config",
        "request",
        "response",
        "handler",
        "items",
        "map",
        "filter",
        "push",
        "get",
        "set",
        "state",
        "props",
        "data",
        "name",
    ];
    let noise = random_bytes(len / 4 + 64, seed);
    let mut n = 0usize;
    let mut next = |m: usize| {
        n += 1;
        noise[n % noise.len()] as usize % m
    };
    let mut out = Vec::with_capacity(len + 256);
    while out.len() < len {
        out.extend(std::iter::repeat_n(b' ', 2 * next(5)));
        for _ in 0..2 + next(6) {
            out.extend_from_slice(WORDS[next(WORDS.len())].as_bytes());
            match next(8) {
                0 => out.extend_from_slice(format!("{}", next(256) * 7).as_bytes()),
                1 => out.extend_from_slice(b"("),
                2 => out.extend_from_slice(b"."),
                3 => out.extend_from_slice(b" = "),
                4 => out.extend_from_slice(b", "),
                5 => {
                    out.push(b'_');
                    out.push(b'a' + next(26) as u8);
                }
                _ => out.push(b' '),
            }
        }
        out.extend_from_slice(if next(3) == 0 { b");\n" } else { b";\n" });
    }
    out.truncate(len);
    out
}

fn mbps(bytes: usize, secs: f64) -> f64 {
    bytes as f64 / 1e6 / secs
}

/// Best of three.
fn time(mut f: impl FnMut()) -> f64 {
    (0..3)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// zlib-rs directly, one configuration, 64 KiB inputs: MB/s and output/input.
fn zlib_rs_config(data: &[u8], level: i32, strategy: zlib_rs::Strategy) -> (f64, f64) {
    use zlib_rs::{Deflate, DeflateConfig, DeflateFlush};
    let mut out = vec![0u8; data.len() + data.len() / 8 + 4096];
    let mut produced = 0;
    let secs = time(|| {
        let mut deflate =
            Deflate::new_with_config(DeflateConfig { level, window_bits: -15, strategy, ..DeflateConfig::default() });
        let mut at = 0;
        for (i, piece) in data.chunks(1 << 16).enumerate() {
            let last = (i + 1) * (1 << 16) >= data.len();
            let flush = if last { DeflateFlush::Finish } else { DeflateFlush::NoFlush };
            let before = deflate.total_in();
            deflate.compress(piece, &mut out[at..], flush).unwrap();
            assert_eq!(deflate.total_in() - before, piece.len() as u64);
            at = deflate.total_out() as usize;
        }
        produced = at;
    });
    (mbps(data.len(), secs), produced as f64 / data.len() as f64)
}

fn raw(mb: usize, files: &[String]) {
    let len = mb << 20;
    let mut inputs = vec![("random", random_bytes(len, 7)), ("source-like", source_like(len, 7))];
    for file in files {
        let mut data = std::fs::read(file).unwrap();
        data.truncate(len);
        inputs.push((Box::leak(file.clone().into_boxed_str()), data));
    }
    for (label, data) in inputs {
        let len = data.len();
        for (name, level, strategy) in [
            ("level 0 (stored)", 0, zlib_rs::Strategy::Default),
            ("level 1 (quick)", 1, zlib_rs::Strategy::Default),
            ("level 2 (fast)", 2, zlib_rs::Strategy::Default),
            ("level 3", 3, zlib_rs::Strategy::Default),
            ("level 6", 6, zlib_rs::Strategy::Default),
            ("level 1 huffman-only", 1, zlib_rs::Strategy::HuffmanOnly),
            ("level 1 rle", 1, zlib_rs::Strategy::Rle),
        ] {
            let (speed, ratio) = zlib_rs_config(&data, level, strategy);
            println!("{label:12} zlib-rs {name:22} {speed:8.0} MB/s  ratio {ratio:.3}");
        }
        let crc = time(|| {
            let mut crc = flate2::Crc::new();
            crc.update(&data);
            std::hint::black_box(crc.sum());
        });
        println!("{label:12} crc32 (flate2::Crc)            {:8.0} MB/s", mbps(len, crc));
        let mut out_len = 0;
        let deflate = time(|| {
            let mut enc = DeflateEncoder::new(Vec::with_capacity(len + len / 8), Compression::new(1));
            for piece in data.chunks(1 << 16) {
                enc.write_all(piece).unwrap();
            }
            out_len = enc.finish().unwrap().len();
        });
        println!(
            "{label:12} deflate -1, 64 KiB writes       {:8.0} MB/s  ratio {:.3}",
            mbps(len, deflate),
            out_len as f64 / len as f64
        );
        for piece_size in [512, 64 << 10, 1 << 20] {
            let gz = time(|| {
                let mut enc = GzEncoder::new(std::io::sink(), Compression::new(1));
                for piece in data.chunks(piece_size) {
                    enc.write_all(piece).unwrap();
                }
                enc.finish().unwrap();
            });
            println!("{label:12} GzEncoder -1, {:>7}-byte writes {:6.0} MB/s", piece_size, mbps(len, gz));
        }
    }
}

/// CPU time of the calling thread.
fn thread_cpu() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

fn pack_dir(dir: PathBuf, level: u32, plain: bool) {
    let cancel = AtomicBool::new(false);
    for gzip in [None, Some(level)] {
        if gzip.is_none() && !plain {
            continue;
        }
        for _ in 0..2 {
            let opts = PackOptions { root: dir.clone(), gzip, ..Default::default() };
            let (t, cpu) = (Instant::now(), thread_cpu());
            let mut out = 0u64;
            let summary = pack(&opts, CountSink(&mut out), |_| {}, &cancel).unwrap();
            let (secs, cpu) = (t.elapsed().as_secs_f64(), thread_cpu() - cpu);
            println!(
                "pack gzip={gzip:?}: {} MB tar -> {} MB in {secs:.2} s ({:.0} MB/s wall), thread CPU {cpu:.2} s",
                summary.tar_bytes / 1_000_000,
                out / 1_000_000,
                mbps(summary.tar_bytes as usize, secs)
            );
        }
    }
}

struct CountSink<'a>(&'a mut u64);

impl Write for CountSink<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        *self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("raw") => raw(args.get(1).map_or(256, |m| m.parse().expect("MB")), &args[2.min(args.len())..]),
        Some("pack") => pack_dir(
            PathBuf::from(args.get(1).expect("dir")),
            args.get(2).map_or(1, |l| l.parse().expect("level")),
            args.get(3).map(String::as_str) != Some("gzip-only"),
        ),
        _ => eprintln!("usage: gzip_speed raw [MB] [file…] | pack <dir> [level] [gzip-only]"),
    }
}
