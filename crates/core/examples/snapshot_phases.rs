//! Profiling aid: times the walk and the full capture of a directory with N threads.
//! `cargo run --release -p paperclip-sync-core --example snapshot_phases -- <dir> [threads]`
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use paperclip_sync_core::snapshot::{capture, CaptureOptions};
use paperclip_sync_core::walk::{walk, ReaddirErrors, WalkOptions};

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().expect("usage: snapshot_phases <dir> [threads]");
    let threads: usize = args.next().map(|t| t.parse().expect("threads")).unwrap_or(2);
    let root = Path::new(&dir);
    let cancel = AtomicBool::new(false);
    for _ in 0..3 {
        let t = Instant::now();
        let tree = walk(&WalkOptions {
            root,
            threads,
            readdir_errors: ReaddirErrors::TreatAsEmpty,
            skip: &|_| false,
            descend: &|_| true,
            read_link_targets: true,
            inline_file: None,
            on_reserved: paperclip_sync_core::reserved::OnReserved::Skip,
            cancel: &cancel,
        })
        .expect("walk");
        let walk_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let snap = capture(&CaptureOptions {
            root,
            exclude: &[],
            threads,
            previous: None,
            hash_only: None,
            readdir_errors: ReaddirErrors::TreatAsEmpty,
            on_reserved: paperclip_sync_core::reserved::OnReserved::Skip,
            cancel: &cancel,
        })
        .expect("capture");
        let capture_ms = t.elapsed().as_secs_f64() * 1e3;
        println!(
            "nodes {} walk {walk_ms:.0} ms, capture {capture_ms:.0} ms ({} entries)",
            tree.nodes.len(),
            snap.entries.len()
        );
    }
}
