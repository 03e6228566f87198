//! Benchmark floor probes (bench/ only, no public API): what the machine must do at least.
//!
//! * `walk <dir> [--threads N] [--runs N] [--skip-file F]`: the walk alone with the one
//!   walker ([`walk`]: open, getdents, `lstat` of every entry, no hashing, no readlink);
//!   `--skip-file` names relative paths (one a line) left out with everything below them.
//!   Prints `{"ms":…,"entries":…,"files":…,"bytes":…}` (`ms`: median of the runs).
//! * `sha [--threads N] [--mb N]`: SHA-256 throughput of the hash the snapshot uses, on N
//!   threads at once over an in-memory buffer each (no I/O). Prints `{"mbps":…}`, the
//!   aggregate MB/s (10^6 bytes per second).
//!
//! `cargo run --release -p paperclip-sync-core --no-default-features --example bench_floor -- walk <dir>`
use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use paperclip_sync_core::walk::{walk, Kind, ReaddirErrors, WalkOptions};
use sha2::{Digest, Sha256};

fn option(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
    let threads: usize = option(&args, "--threads").map(|t| t.parse().expect("--threads")).unwrap_or(cores);
    let runs: usize = option(&args, "--runs").map(|t| t.parse().expect("--runs")).unwrap_or(3).max(1);
    match args.first().map(String::as_str) {
        Some("walk") => {
            let dir = args.get(1).expect("usage: bench_floor walk <dir>");
            let skip: HashSet<String> = option(&args, "--skip-file")
                .map(|f| std::fs::read_to_string(f).expect("--skip-file"))
                .unwrap_or_default()
                .lines()
                .map(|l| l.trim_end_matches('/').to_string())
                .filter(|l| !l.is_empty())
                .collect();
            let cancel = AtomicBool::new(false);
            let mut times = Vec::new();
            let (mut entries, mut files, mut bytes) = (0, 0, 0u64);
            for _ in 0..runs {
                let start = Instant::now();
                let tree = walk(&WalkOptions {
                    root: Path::new(dir),
                    threads,
                    readdir_errors: ReaddirErrors::TreatAsEmpty,
                    skip: &|rel| skip.contains(rel),
                    descend: &|_| true,
                    read_link_targets: false,
                    inline_file: None,
                    on_reserved: paperclip_sync_core::reserved::OnReserved::Skip,
                    cancel: &cancel,
                })
                .expect("walk");
                times.push(start.elapsed().as_secs_f64() * 1e3);
                entries = tree.nodes.len();
                let regular = tree.nodes.iter().filter(|n| n.stat.kind == Kind::File);
                files = regular.clone().count();
                bytes = regular.map(|n| n.stat.size).sum();
            }
            println!("{{\"ms\":{:.3},\"entries\":{entries},\"files\":{files},\"bytes\":{bytes}}}", median(times));
        }
        Some("sha") => {
            let mb: usize = option(&args, "--mb").map(|t| t.parse().expect("--mb")).unwrap_or(256);
            let mut rates = Vec::new();
            for _ in 0..runs {
                let start = Instant::now();
                std::thread::scope(|scope| {
                    for t in 0..threads {
                        scope.spawn(move || {
                            let buffer = vec![t as u8 ^ 0x5a; 1 << 20];
                            let mut hasher = Sha256::new();
                            for _ in 0..mb {
                                hasher.update(&buffer);
                            }
                            std::hint::black_box(hasher.finalize());
                        });
                    }
                });
                let seconds = start.elapsed().as_secs_f64();
                rates.push((threads * mb * (1 << 20)) as f64 / 1e6 / seconds);
            }
            println!("{{\"mbps\":{:.1},\"threads\":{threads}}}", median(rates));
        }
        _ => panic!(
            "usage: bench_floor walk <dir> [--threads N] [--runs N] [--skip-file F] | sha [--threads N] [--mb N]"
        ),
    }
}
