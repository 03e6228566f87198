//! Measurement behind the SSH lane's use of the `base64` crate: its standard encoder
//! against the hand-written encoder it replaced (kept below as `handwritten`), on one
//! buffer of pseudo-random bytes. Checks both give the same text, then times them in
//! interleaved rounds and prints the median of each.
//!
//! `CARGO_TARGET_DIR=target/examples cargo run --release -p paperclip-sync-core --no-default-features --example base64_speed -- [MiB] [rounds]`
//! (defaults: 64 MiB, 7 rounds; the crate is a dev-dependency too, so no C dependency is built).
use std::time::Instant;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

mod common;
use common::random_bytes;

/// The encoder `ssh/known_hosts.rs` carried before the crate: standard base64 with padding.
fn handwritten(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mib: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(64);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(7);
    // One byte over a multiple of 3, so the padded tail is part of the comparison.
    let data = random_bytes(mib * 1024 * 1024 + 1, 0x5eed);
    assert_eq!(handwritten(&data), STANDARD.encode(&data), "the two encoders differ");
    let (mut ours, mut crate_times) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let start = Instant::now();
        std::hint::black_box(handwritten(std::hint::black_box(&data)));
        ours.push(start.elapsed().as_secs_f64());
        let start = Instant::now();
        std::hint::black_box(STANDARD.encode(std::hint::black_box(&data)));
        crate_times.push(start.elapsed().as_secs_f64());
    }
    let (ours, theirs) = (median(ours), median(crate_times));
    let rate = |secs: f64| data.len() as f64 / secs / 1e6;
    println!("{mib} MiB, {rounds} interleaved rounds, medians:");
    println!("  hand-written  {:8.1} ms  {:7.0} MB/s", ours * 1e3, rate(ours));
    println!(
        "  base64 crate  {:8.1} ms  {:7.0} MB/s  ({:.2}x the hand-written)",
        theirs * 1e3,
        rate(theirs),
        ours / theirs
    );
}
