//! Seeds for the cargo-fuzz target `extract` (`fuzz/fuzz_targets/extract.rs`), generated at
//! run time rather than committed: archives from our packer and from GNU tar (its gnu, pax,
//! ustar and oldgnu formats, with hard links, a FIFO and a sparse file), gzip-compressed ones,
//! and the hostile archives of the extractor's tests built with [`RawArchive`], the planted
//! reserved names ([`reserved_name_archives`]) among them.
//!
//! An ignored test, run by `scripts/test/fuzz.sh`:
//! `PAPERCLIP_FUZZ_SEEDS=<dir> cargo test -p paperclip-sync-core --lib -- --ignored --exact
//! tar::fuzz_seeds::write_fuzz_seeds`. Each seed is the target's flags byte followed by the
//! archive; see the target for the layout.

use std::fs;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use super::pack::{pack, PackOptions};
use super::testutil::*;

/// The target's flags byte (fuzz/fuzz_targets/extract.rs).
const AS_IS: u8 = 0;
const GZIP: u8 = 1;
const AFTER_PREFIX: u8 = 2;
const FIX_CHECKSUMS: u8 = 1 << 2;
const PLANT: u8 = 1 << 3;

/// Seeds longer than this are not written (the run's `-max_len`).
const MAX_SEED: usize = 64 << 10;

struct Seeds<'a> {
    dir: &'a Path,
    count: usize,
}

impl Seeds<'_> {
    fn write(&mut self, name: &str, flags: u8, archive: &[u8]) {
        if archive.len() + 1 > MAX_SEED {
            return;
        }
        let mut seed = vec![flags];
        seed.extend_from_slice(archive);
        fs::write(self.dir.join(format!("{name}-{flags:02x}")), seed).unwrap();
        self.count += 1;
    }

    /// A plain archive as is, gzip-compressed by the target, and after the target's prefix
    /// in a root with the planted links.
    fn plain(&mut self, name: &str, archive: &[u8]) {
        self.write(name, AS_IS | FIX_CHECKSUMS, archive);
        self.write(name, GZIP | FIX_CHECKSUMS, archive);
        self.write(name, AFTER_PREFIX | FIX_CHECKSUMS | PLANT, archive);
    }
}

fn pack_tree(root: &Path, gzip: Option<u32>) -> Vec<u8> {
    let mut out = Vec::new();
    let opts = PackOptions { root: root.to_path_buf(), gzip, ..PackOptions::default() };
    pack(&opts, &mut out, |_| {}, &AtomicBool::new(false)).unwrap();
    out
}

#[test]
#[ignore = "writes the fuzz seeds; run by scripts/test/fuzz.sh with PAPERCLIP_FUZZ_SEEDS set"]
fn write_fuzz_seeds() {
    let dir = std::env::var_os("PAPERCLIP_FUZZ_SEEDS").expect("PAPERCLIP_FUZZ_SEEDS: the seed directory");
    let dir = Path::new(&dir);
    fs::create_dir_all(dir).unwrap();
    let mut seeds = Seeds { dir, count: 0 };

    // Our packer's archives of small random trees, plain and gzip-compressed.
    for case in 0..6u64 {
        let mut rng = Rng::new(0xf022_0000 + case);
        let src = TempDir::new("fuzz-seed-pack");
        let options =
            TreeOptions { long_names: case % 2 == 0, modes_and_times: true, inside_links: true, ..Default::default() };
        build_tree(&mut rng, src.path(), &options);
        seeds.plain(&format!("pack{case}"), &pack_tree(src.path(), None));
        seeds.write(&format!("pack{case}-gz"), AS_IS, &pack_tree(src.path(), Some(1)));
    }

    if have_gnu_tar("write_fuzz_seeds") {
        gnu_tar_seeds(&mut seeds);
    }
    hostile_seeds(&mut seeds);
    eprintln!("wrote {} fuzz seeds to {}", seeds.count, dir.display());
    assert!(seeds.count > 50, "too few seeds: {}", seeds.count);
}

/// GNU tar's archives in each format, of a tree with a hard link, a FIFO and a sparse file.
fn gnu_tar_seeds(seeds: &mut Seeds<'_>) {
    for (case, format) in ["gnu", "pax", "ustar", "oldgnu"].into_iter().enumerate() {
        let mut rng = Rng::new(0xf022_1000 + case as u64);
        let src = TempDir::new("fuzz-seed-gnu");
        let options = TreeOptions {
            long_names: format != "ustar",
            modes_and_times: true,
            inside_links: true,
            ..Default::default()
        };
        build_tree(&mut rng, src.path(), &options);
        fs::write(src.join("linked"), b"hard-linked data").unwrap();
        fs::hard_link(src.join("linked"), src.join("hard")).unwrap();
        let fifo = std::ffi::CString::new(src.join("fifo").into_os_string().into_vec()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        let mut command = tar_command("tar");
        if format != "ustar" {
            // ustar has no sparse members (and the whole 256 KiB would make too big a seed).
            use std::os::unix::fs::FileExt;
            let sparse = fs::File::create(src.join("sparse")).unwrap();
            sparse.set_len(256 << 10).unwrap();
            sparse.write_all_at(b"sparse data", 128 << 10).unwrap();
            command.arg("--sparse");
        }
        let names = crate::walk::sorted_names(src.path()).unwrap();
        command
            .args(["-c", "--no-unquote", &format!("--format={format}"), "-f", "-", "-C"])
            .arg(src.path())
            .arg("--")
            .args(&names);
        seeds.plain(&format!("gnu-{format}"), &run_with_input(command, b""));
    }
    // `tar -c .` (a `./` member and `./` prefixes), and `tar -cz`.
    let src = TempDir::new("fuzz-seed-dot");
    fs::create_dir(src.join("dir")).unwrap();
    fs::write(src.join("dir/f"), b"dot").unwrap();
    std::os::unix::fs::symlink("dir/f", src.join("l")).unwrap();
    let mut command = tar_command("tar");
    command.args(["-c", "-f", "-", "-C"]).arg(src.path()).arg(".");
    seeds.plain("gnu-dot", &run_with_input(command, b""));
    let mut command = tar_command("tar");
    command.args(["-cz", "-f", "-", "-C"]).arg(src.path()).arg(".");
    seeds.write("gnu-dot-gz", AS_IS, &run_with_input(command, b""));
}

/// Where the target's sandbox keeps the directory beside the root, as the root sees it.
const OUTSIDE: &str = "../outside";

/// Archives the extractor must refuse or handle with care: the extractor tests' refused
/// ones, then more that it must take apart carefully.
fn hostile_seeds(seeds: &mut Seeds<'_>) {
    let long = "long-name-".repeat(12);
    let shared = [
        escaping_names(OUTSIDE),
        escaping_symlinks(OUTSIDE),
        bad_links_and_special_files(OUTSIDE),
        reserved_name_archives(),
    ];
    for (what, archive) in shared.into_iter().flatten() {
        let name = format!("hostile-{}", what.replace(|c: char| !c.is_ascii_alphanumeric(), "-"));
        seeds.write(&name, AS_IS | FIX_CHECKSUMS, &archive);
        seeds.write(&name, AFTER_PREFIX | FIX_CHECKSUMS | PLANT, &archive);
    }
    let archives: Vec<(&str, Vec<u8>)> = vec![
        ("hard-good", RawArchive::new().file("a", b"data").hard_link("h", "a").hard_link("a", "a").finish()),
        ("chr", RawArchive::new().entry(b'3', b"tty", b"", 0o666, b"").finish()),
        ("blk", RawArchive::new().entry(b'4', b"disk", b"", 0o666, b"").finish()),
        ("fifo", RawArchive::new().entry(b'6', b"fifo", b"", 0o666, b"").finish()),
        ("sparse", RawArchive::new().entry(b'S', b"sparse", b"", 0o644, b"").finish()),
        ("unknown", RawArchive::new().entry(b'Z', b"odd", b"", 0o644, b"").finish()),
        ("contiguous", RawArchive::new().entry(b'7', b"c", b"", 0o644, b"data").finish()),
        (
            "old-regular",
            RawArchive::new().entry(0, b"old", b"", 0o644, b"data").entry(0, b"olddir/", b"", 0o755, b"").finish(),
        ),
        ("non-utf8", RawArchive::new().entry(b'0', b"bad\xff", b"", 0o644, b"").finish()),
        ("non-utf8-link", RawArchive::new().entry(b'2', b"l", b"t\xfe", 0o777, b"").finish()),
        ("root-file", RawArchive::new().file(".", b"x").finish()),
        (
            "modes",
            RawArchive::new()
                .dir("./", 0o777)
                .entry(b'0', b"suid", b"", 0o4755, b"x")
                .entry(b'0', b"sgid", b"", 0o2750, b"x")
                .dir("sticky/", 0o1777)
                .dir("ro/", 0o555)
                .file("ro/inside", b"written before the mode")
                .dir("none/", 0)
                .finish(),
        ),
        (
            "replacements",
            RawArchive::new()
                .file("f", b"file")
                .dir("f/", 0o755)
                .dir("d/", 0o755)
                .file("d", b"file over a dir")
                .dir("sub/", 0o755)
                .symlink("s", "sub")
                .dir("s/", 0o755)
                .file("s/y", b"in s")
                .symlink("t", "sub")
                .file("t", b"over a link")
                .finish(),
        ),
        (
            "long-names",
            RawArchive::new()
                .file(&format!("{long}/{long}/leaf"), b"deep")
                .symlink(&format!("{long}-link"), &format!("{long}/{long}/leaf"))
                .finish(),
        ),
        (
            "pax",
            RawArchive::new()
                .pax(&[("path", format!("{long}/pax-file").as_bytes()), ("mtime", b"1700000000.25")])
                .file("short", b"pax")
                .pax(&[("linkpath", b"short"), ("size", b"0")])
                .symlink("pax-link", "ignored")
                .pax(&[("mtime", b"-5.5")])
                .file("old", b"before 1970")
                .finish(),
        ),
        (
            "pax-extremes",
            RawArchive::new()
                .pax(&[("mtime", b"-9223372036854775808.5")])
                .file("f", b"")
                .pax(&[("size", b"18446744073709551615")])
                .dir("d/", 0o755)
                .finish(),
        ),
        ("pax-nul", RawArchive::new().pax(&[("path", b"nul\0byte")]).file("x", b"").finish()),
        ("pax-sparse", RawArchive::new().pax(&[("GNU.sparse.major", b"1")]).file("x", b"").finish()),
        ("pax-global", RawArchive::new().entry(b'g', b"global", b"", 0o644, b"12 path=x/y\n").file("z", b"").finish()),
        ("pax-bad", RawArchive::new().entry(b'x', b"PaxHeader", b"", 0o644, b"99 path=x\n").file("x", b"").finish()),
        ("volume", RawArchive::new().entry(b'V', b"label", b"", 0o644, b"").file("x", b"").finish()),
        ("truncated", {
            let good = RawArchive::new().file("a", &[7u8; 3000]).file("b", b"bee").finish();
            good[..1000].to_vec()
        }),
        ("empty", vec![0u8; 1024]),
        // Members running into the target's planted entries and prefix (shapes 2 and 3).
        (
            "planted",
            RawArchive::new()
                .file("out/x", b"evil")
                .file("sent", b"over the sentinel link")
                .file("rel/x", b"evil")
                .file("pre/esc/x", b"evil")
                .file("hl", b"over the hard link")
                .dir("out/", 0o700)
                .dir("pre/esc/", 0o700)
                .hard_link("h2", "hl")
                .symlink("s2", "rel/x")
                .finish(),
        ),
        (
            "prefix",
            RawArchive::new()
                .file("d/up/x", b"evil")
                .file("sl/x", b"evil")
                .file("d/e/top", b"over a link")
                .hard_link("h3", "sl/f")
                .hard_link("h4", "d/h")
                .dir("ro/", 0o755)
                .file("ro/x", b"in ro")
                .symlink("d/e/up2", "../..")
                .symlink("d/e/up3", "../../..")
                .finish(),
        ),
    ];
    for (name, archive) in &archives {
        seeds.write(&format!("hostile-{name}"), AS_IS | FIX_CHECKSUMS, archive);
        seeds.write(&format!("hostile-{name}"), AFTER_PREFIX | FIX_CHECKSUMS | PLANT, archive);
    }
}
