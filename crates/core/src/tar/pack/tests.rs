//! Tests of the pack against GNU tar, bsdtar and busybox tar, and of its read-ahead.

use super::read_ahead::{READ_AHEAD_BYTES, READ_AHEAD_FILE, READ_AHEAD_MEMBERS};
use super::*;
use crate::error::codes;
use crate::tar::testutil::*;
use std::collections::BTreeMap;
use std::io::Read;
use std::sync::atomic::Ordering;

fn opts(root: &Path) -> PackOptions {
    PackOptions { root: root.to_path_buf(), ..PackOptions::default() }
}

fn never() -> AtomicBool {
    AtomicBool::new(false)
}

fn pack_bytes(opts: &PackOptions) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let summary = pack(opts, &mut out, |_| {}, &AtomicBool::new(false))?;
    if opts.gzip.is_none() {
        assert_eq!(summary.tar_bytes, out.len() as u64);
    }
    Ok(out)
}

fn gunzip(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(data).read_to_end(&mut out).unwrap();
    out
}

/// The source snapshot restricted to the members of an archive listing.
fn filtered(root: &Path, members: &[String]) -> BTreeMap<String, Snap> {
    let keep: std::collections::HashSet<&str> = members.iter().map(|m| m.trim_end_matches('/')).collect();
    snapshot(root, true).into_iter().filter(|(path, _)| keep.contains(path.as_str())).collect()
}

#[test]
fn empty_tree_is_exactly_1024_zero_bytes() {
    let dir = TempDir::new("pack-empty");
    let bytes = pack_bytes(&opts(dir.path())).unwrap();
    assert_eq!(bytes, vec![0u8; 1024]);
    assert_eq!(precompute_size(&opts(dir.path()), &never()).unwrap(), 1024);
    let gz = pack_bytes(&PackOptions { gzip: Some(6), ..opts(dir.path()) }).unwrap();
    assert_eq!(&gz[..2], &[0x1f, 0x8b]);
    assert_eq!(gunzip(&gz), vec![0u8; 1024]);
    // Everything excluded is empty too, and so is an explicit empty name list.
    fs::write(dir.join("._apple"), b"x").unwrap();
    assert_eq!(pack_bytes(&opts(dir.path())).unwrap(), vec![0u8; 1024]);
    fs::write(dir.join("file"), b"x").unwrap();
    let none = PackOptions { top_level_order: Some(vec![]), ..opts(dir.path()) };
    assert_eq!(pack_bytes(&none).unwrap(), vec![0u8; 1024]);
}

/// Generated trees (hostile names, long names and targets, modes, setuid, times, big
/// files, `a\b` at the top) with random excludes: the member set equals GNU tar's, the
/// size equals the precomputed one, and `tar -x` of our archive restores the tree.
#[test]
fn member_sets_and_content_match_gnu_tar() {
    if !have_gnu_tar("member_sets_and_content_match_gnu_tar") {
        return;
    }
    let options = TreeOptions { long_names: true, big_files: true, modes_and_times: true, ..Default::default() };
    for case in 0..case_count(60) {
        let seed = 0xbac0_0000 + case;
        let mut rng = Rng::new(seed);
        let src = TempDir::new("pack-src");
        fs::write(src.join("a\\b"), b"backslash").unwrap();
        let paths = build_tree(&mut rng, src.path(), &options);
        let excludes = if rng.chance(25) { Vec::new() } else { random_excludes(&mut rng, &paths) };
        let opts = PackOptions { exclude: excludes.clone(), ..opts(src.path()) };
        let ours = pack_bytes(&opts).unwrap();
        assert_eq!(precompute_size(&opts, &never()).unwrap(), ours.len() as u64, "seed {seed}");
        let names = crate::walk::sorted_names(src.path()).unwrap();
        let theirs = gnu_tar_create(src.path(), &excludes, &names, false);
        let members = gnu_list(&ours);
        assert_eq!(members, gnu_list(&theirs), "seed {seed}: excludes {excludes:?}");
        assert!(members.iter().all(|m| !m.starts_with("./")));
        let out = TempDir::new("pack-out");
        system_extract(&["tar", "-x", "-f", "-"], &ours, out.path());
        assert_same_tree(&snapshot(out.path(), true), &filtered(src.path(), &members), &format!("seed {seed}"));
    }
}

/// `dot_members` (upstream's SSH upload, `tar -C root --exclude … -cf - .`): the same
/// members as GNU tar archives for `.`, save the root's own `./` entry, `./`-prefixed,
/// with the excludes matched against the prefixed names; the size is the precomputed one.
#[test]
fn dot_members_match_gnu_tar_of_dot() {
    if !have_gnu_tar("dot_members_match_gnu_tar_of_dot") {
        return;
    }
    let options = TreeOptions { long_names: true, modes_and_times: true, ..Default::default() };
    for case in 0..case_count(40) {
        let seed = 0xd07_0000 + case;
        let mut rng = Rng::new(seed);
        let src = TempDir::new("pack-dot");
        let paths = build_tree(&mut rng, src.path(), &options);
        let mut excludes = if rng.chance(20) { Vec::new() } else { random_excludes(&mut rng, &paths) };
        // Shapes whose meaning depends on the `./` prefix.
        if rng.chance(50) {
            let top = paths.first().cloned().unwrap_or_default();
            let name = top.split('/').next().unwrap_or_default().to_string();
            excludes.push(
                rng.pick(&[format!("*/{name}"), "*/*".to_string(), format!("./{name}"), ".".to_string()]).clone(),
            );
        }
        let opts = PackOptions { exclude: excludes.clone(), dot_members: true, ..opts(src.path()) };
        let ours = pack_bytes(&opts).unwrap();
        assert_eq!(precompute_size(&opts, &never()).unwrap(), ours.len() as u64, "seed {seed}");
        let theirs = gnu_tar_create(src.path(), &excludes, &[".".to_string()], false);
        let expected: Vec<String> = gnu_list(&theirs).into_iter().filter(|m| m != "./").collect();
        let members = gnu_list(&ours);
        assert_eq!(members, expected, "seed {seed}: excludes {excludes:?}");
        assert!(members.iter().all(|m| m.starts_with("./")), "seed {seed}");
    }
}

#[test]
fn backslash_names_are_archived_as_they_are() {
    if !have_gnu_tar("backslash_names_are_archived_as_they_are") {
        return;
    }
    let dir = TempDir::new("pack-backslash");
    fs::write(dir.join("a\\b"), b"1").unwrap();
    fs::create_dir(dir.join("d\\n")).unwrap();
    fs::write(dir.join("d\\n/x\\ty"), b"2").unwrap();
    let ours = pack_bytes(&opts(dir.path())).unwrap();
    assert_eq!(gnu_list(&ours), ["a\\b", "d\\n/", "d\\n/x\\ty"]);
}

#[test]
fn long_names_and_targets_use_gnu_long_entries() {
    if !have_gnu_tar("long_names_and_targets_use_gnu_long_entries") {
        return;
    }
    let dir = TempDir::new("pack-long");
    let deep = format!("{}/{}/{}", "d".repeat(150), "e".repeat(200), "f".repeat(240));
    fs::create_dir_all(dir.join(&deep)).unwrap();
    fs::write(dir.join(&deep).join("file"), b"deep").unwrap();
    let exactly_100 = "x".repeat(100);
    fs::write(dir.join(&exactly_100), b"").unwrap();
    let exactly_99 = "y".repeat(99); // 100 bytes with the trailing `/` of a directory
    fs::create_dir(dir.join(&exactly_99)).unwrap();
    let target = format!("{}/file", deep);
    std::os::unix::fs::symlink(&target, dir.join("link")).unwrap();
    let ours = pack_bytes(&opts(dir.path())).unwrap();
    assert_eq!(precompute_size(&opts(dir.path()), &never()).unwrap(), ours.len() as u64);
    let names = crate::walk::sorted_names(dir.path()).unwrap();
    assert_eq!(gnu_list(&ours), gnu_list(&gnu_tar_create(dir.path(), &[], &names, false)));
    let out = TempDir::new("pack-long-out");
    system_extract(&["tar", "-x", "-f", "-"], &ours, out.path());
    assert_eq!(fs::read(out.join(&deep).join("file")).unwrap(), b"deep");
    assert_eq!(fs::read_link(out.join("link")).unwrap(), Path::new(&target));
}

/// Names, directory names and link targets of every length around the header fields and
/// the 512-byte blocks, ASCII and multi-byte, every file holding a tar stream of its own:
/// GNU tar and bsdtar list our archive as GNU tar's own archive of the tree, and our
/// extractor, GNU tar and bsdtar all reproduce the tree. (A 512-byte name once declared a
/// long-name record one byte longer than written, which swallowed the member's header and
/// read its content as members.)
#[test]
fn names_and_targets_at_every_block_boundary() {
    if !have_gnu_tar("names_and_targets_at_every_block_boundary") {
        return;
    }
    let src = TempDir::new("pack-boundary");
    build_boundary_tree(src.path());
    let ours = pack_bytes(&opts(src.path())).unwrap();
    let names = crate::walk::sorted_names(src.path()).unwrap();
    let gnu = gnu_tar_create(src.path(), &[], &names, false);
    let listed = gnu_list(&ours);
    let planted: Vec<_> = listed.iter().filter(|m| m.contains("evil")).collect();
    assert!(planted.is_empty(), "planted members: {planted:?}");
    assert_eq!(listed, gnu_list(&gnu));
    assert_eq!(precompute_size(&opts(src.path()), &never()).unwrap(), ours.len() as u64);
    let expected = snapshot(src.path(), true);
    assert_eq!(listed.len(), expected.len());
    let mut extractors: Vec<(&str, &[&str])> = vec![("GNU tar", &["tar", "-x", "-f", "-"])];
    if have_tool("bsdtar", &["--version"], "names_and_targets_at_every_block_boundary") {
        assert_eq!(list_members(&["bsdtar", "-t", "-f", "-"], &ours), listed);
        extractors.push(("bsdtar", &["bsdtar", "-x", "-p", "-P", "-f", "-"]));
    }
    for (tool, command) in extractors {
        let out = TempDir::new("pack-boundary-out");
        system_extract(command, &ours, out.path());
        assert_same_tree(&snapshot(out.path(), true), &expected, tool);
    }
    for (archive, what) in [(&ours, "ours"), (&gnu, "GNU tar's")] {
        let out = TempDir::new("pack-boundary-ours");
        crate::tar::extract(&archive[..], out.path(), &crate::tar::ExtractOptions::default(), |_| {}, &never())
            .unwrap_or_else(|e| panic!("our extractor on {what} archive: {e}"));
        assert_same_tree(&snapshot(out.path(), true), &expected, what);
    }
    // The SSH upload's `./`-prefixed names are two bytes longer: other boundaries.
    let dotted = PackOptions { dot_members: true, ..opts(src.path()) };
    let ours = pack_bytes(&dotted).unwrap();
    assert_eq!(precompute_size(&dotted, &never()).unwrap(), ours.len() as u64);
    let mut command = tar_command("tar");
    command.args(["-c", "--no-xattrs", "-f", "-", "-C"]).arg(src.path()).arg(".");
    let mut theirs = gnu_list(&run_with_input(command, b""));
    theirs.retain(|m| m != "./");
    assert_eq!(gnu_list(&ours), theirs, "./ members");
    let out = TempDir::new("pack-boundary-dot");
    system_extract(&["tar", "-x", "-f", "-"], &ours, out.path());
    assert_same_tree(&snapshot(out.path(), true), &expected, "./ members, GNU tar");
    let out = TempDir::new("pack-boundary-dot-ours");
    let options = crate::tar::ExtractOptions::default();
    crate::tar::extract(&ours[..], out.path(), &options, |_| {}, &never()).unwrap();
    assert_same_tree(&snapshot(out.path(), true), &expected, "./ members, ours");
}

/// Byte for byte what GNU tar writes (up to its padding to 10 240-byte records) for a
/// file, a directory and a link target at each boundary length: the long-name and
/// long-link records, their sizes, NULs and padding included.
#[test]
fn long_records_are_gnu_tars_bytes_at_every_boundary() {
    if !have_gnu_tar("long_records_are_gnu_tars_bytes_at_every_boundary") {
        return;
    }
    for &len in BOUNDARY_LENGTHS {
        for (fill, pad_first) in [('a', false), ('€', true)] {
            let src = TempDir::new("pack-bytes");
            let file = path_of_len("f", len, fill, pad_first);
            fs::create_dir_all(src.join(&file).parent().unwrap()).unwrap();
            fs::write(src.join(&file), planted_tar("bytes")).unwrap();
            fs::create_dir_all(src.join(path_of_len("g", len - 1, fill, pad_first))).unwrap();
            let target = path_of_len("t", len, fill, pad_first);
            std::os::unix::fs::symlink(&target, src.join("l")).unwrap();
            let ours = pack_bytes(&opts(src.path())).unwrap();
            let names = crate::walk::sorted_names(src.path()).unwrap();
            let gnu = gnu_tar_create(src.path(), &[], &names, false);
            let context = format!("{len} bytes of {fill:?}");
            assert!(gnu.len() >= ours.len(), "{context}: GNU tar wrote less");
            if let Some(at) = ours.iter().zip(&gnu).position(|(a, b)| a != b) {
                panic!("{context}: differs from GNU tar at byte {at} (block {})", at / 512);
            }
            assert!(gnu[ours.len()..].iter().all(|&b| b == 0), "{context}: GNU tar has more");
        }
    }
}

#[test]
fn long_names_that_fill_whole_blocks_keep_the_archive_in_sync() {
    if !have_gnu_tar("long_names_that_fill_whole_blocks_keep_the_archive_in_sync") {
        return;
    }
    // Member names of exactly 512 and 1024 bytes (a directory's with its trailing `/`),
    // a link target of 512: each long-name entry's NUL needs a block of its own.
    let dir = TempDir::new("pack-block-names");
    let d511 = format!("{}/{}", "a".repeat(255), "b".repeat(255));
    fs::create_dir_all(dir.join(&d511)).unwrap();
    let f1024 = format!("{d511}/{}/{}/f", "c".repeat(255), "d".repeat(254));
    fs::create_dir_all(dir.join(&f1024).parent().unwrap()).unwrap();
    assert_eq!(f1024.len(), 1024);
    fs::write(dir.join(&f1024), b"x").unwrap();
    std::os::unix::fs::symlink("t".repeat(512), dir.join("link")).unwrap();
    fs::write(dir.join("zz-last"), b"last").unwrap();
    let ours = pack_bytes(&opts(dir.path())).unwrap();
    assert_eq!(precompute_size(&opts(dir.path()), &never()).unwrap(), ours.len() as u64);
    let names = crate::walk::sorted_names(dir.path()).unwrap();
    let listed = gnu_list(&ours);
    assert!(
        listed.contains(&format!("{d511}/")) && listed.contains(&f1024) && listed.contains(&"zz-last".to_string()),
        "{listed:?}"
    );
    assert_eq!(listed, gnu_list(&gnu_tar_create(dir.path(), &[], &names, false)));
}

#[test]
fn followed_symlinks_match_tar_h() {
    if !have_gnu_tar("followed_symlinks_match_tar_h") {
        return;
    }
    let options = TreeOptions { followable_links: true, ..Default::default() };
    for case in 0..case_count(60) / 3 {
        let seed = 0xf011_0000 + case;
        let mut rng = Rng::new(seed);
        let src = TempDir::new("pack-follow");
        build_tree(&mut rng, src.path(), &options);
        let opts = PackOptions { follow_symlinks: true, ..opts(src.path()) };
        let ours = pack_bytes(&opts).unwrap();
        assert_eq!(precompute_size(&opts, &never()).unwrap(), ours.len() as u64, "seed {seed}");
        let names = crate::walk::sorted_names(src.path()).unwrap();
        let theirs = gnu_tar_create(src.path(), &[], &names, true);
        assert_eq!(gnu_list(&ours), gnu_list(&theirs), "seed {seed}");
    }
}

#[test]
fn symlink_cycles_and_dangling_links_fail_when_following() {
    let dir = TempDir::new("pack-loop");
    fs::create_dir(dir.join("a")).unwrap();
    std::os::unix::fs::symlink("..", dir.join("a/up")).unwrap();
    let follow = PackOptions { follow_symlinks: true, ..opts(dir.path()) };
    let err = pack_bytes(&follow).unwrap_err();
    assert_eq!(err.code, codes::SYMLINK_LOOP);
    assert!(err.message.contains("a/up"), "{}", err.message);
    assert_eq!(precompute_size(&follow, &never()).unwrap_err().code, codes::SYMLINK_LOOP);
    // Not following, the link is just a link.
    assert!(pack_bytes(&opts(dir.path())).is_ok());

    let dangling = TempDir::new("pack-dangling");
    std::os::unix::fs::symlink("nowhere", dangling.join("d")).unwrap();
    let follow = PackOptions { follow_symlinks: true, ..opts(dangling.path()) };
    let err = pack_bytes(&follow).unwrap_err();
    assert_eq!(err.code, "ENOENT");
    assert_eq!(err.syscall, Some("stat"));
}

#[test]
fn top_level_order_is_the_callers() {
    if !have_gnu_tar("top_level_order_is_the_callers") {
        return;
    }
    let dir = TempDir::new("pack-order");
    for name in ["b", "a", "C", "é"] {
        fs::write(dir.join(name), name).unwrap();
    }
    let order: Vec<String> = ["é", "b", "C", "a"].iter().map(|s| s.to_string()).collect();
    let ours = pack_bytes(&PackOptions { top_level_order: Some(order.clone()), ..opts(dir.path()) }).unwrap();
    let mut command = tar_command("tar");
    command.args(["-t", "--quoting-style=literal", "-f", "-"]);
    let listed = String::from_utf8(run_with_input(command, &ours)).unwrap();
    assert_eq!(listed.lines().collect::<Vec<_>>(), order);
    // Default: byte order.
    let ours = pack_bytes(&opts(dir.path())).unwrap();
    let mut command = tar_command("tar");
    command.args(["-t", "--quoting-style=literal", "-f", "-"]);
    let listed = String::from_utf8(run_with_input(command, &ours)).unwrap();
    assert_eq!(listed.lines().collect::<Vec<_>>(), ["C", "a", "b", "é"]);
    for bad in [vec!["a/b"], vec![".."], vec![""], vec!["a", "a"]] {
        let names = bad.iter().map(|s| s.to_string()).collect();
        let err = pack_bytes(&PackOptions { top_level_order: Some(names), ..opts(dir.path()) }).unwrap_err();
        assert_eq!(err.code, codes::INVALID_ARGUMENT, "{bad:?}");
    }
    let missing = PackOptions { top_level_order: Some(vec!["zz".into()]), ..opts(dir.path()) };
    assert_eq!(pack_bytes(&missing).unwrap_err().code, "ENOENT");
}

#[test]
fn special_files() {
    if !have_gnu_tar("special_files") {
        return;
    }
    let dir = TempDir::new("pack-special");
    fs::write(dir.join("file"), b"shared").unwrap();
    fs::hard_link(dir.join("file"), dir.join("hard")).unwrap();
    let fifo = std::ffi::CString::new(dir.join("fifo").into_os_string().into_encoded_bytes()).unwrap();
    // SAFETY: a valid path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    let _socket = std::os::unix::net::UnixListener::bind(dir.join("socket")).unwrap();
    let ours = pack_bytes(&opts(dir.path())).unwrap();
    assert_eq!(precompute_size(&opts(dir.path()), &never()).unwrap(), ours.len() as u64);
    // The socket is skipped; the FIFO is archived as a FIFO; hard links as two files.
    assert_eq!(gnu_list(&ours), ["fifo", "file", "hard"]);
    let mut command = tar_command("tar");
    command.args(["-t", "-v", "-f", "-"]);
    let verbose = String::from_utf8(run_with_input(command, &ours)).unwrap();
    let kinds: Vec<char> = verbose.lines().map(|l| l.chars().next().unwrap()).collect();
    assert_eq!(kinds, ['p', '-', '-']);
    let out = TempDir::new("pack-special-out");
    system_extract(&["tar", "-x", "-f", "-"], &ours, out.path());
    assert_eq!(fs::read(out.join("hard")).unwrap(), b"shared");
}

#[test]
fn non_utf8_names_are_refused() {
    use std::os::unix::ffi::OsStrExt;
    let dir = TempDir::new("pack-non-utf8");
    fs::create_dir(dir.join("d")).unwrap();
    fs::write(dir.join("d").join(std::ffi::OsStr::from_bytes(b"bad\xff")), b"").unwrap();
    let err = pack_bytes(&opts(dir.path())).unwrap_err();
    assert_eq!(err.code, codes::NON_UTF8_NAME);
    assert_eq!(precompute_size(&opts(dir.path()), &never()).unwrap_err().code, codes::NON_UTF8_NAME);
    // Excluded directories are never read, as with tar.
    let excluded = PackOptions { exclude: vec!["d".into()], ..opts(dir.path()) };
    assert_eq!(pack_bytes(&excluded).unwrap(), vec![0u8; 1024]);
}

/// The read-ahead: more members than it holds at once, more data than its byte window,
/// files on both sides of the whole-read limit and empty ones; the archive is GNU tar's,
/// byte for byte (all top-level, so GNU tar takes them in the order they are named
/// rather than in its directory-read order).
#[test]
fn read_ahead_keeps_gnu_tars_bytes_beyond_its_window() {
    if !have_gnu_tar("read_ahead_keeps_gnu_tars_bytes_beyond_its_window") {
        return;
    }
    let seed = 0x4ead_a4ead;
    let mut rng = Rng::new(seed);
    let src = TempDir::new("pack-ahead");
    let limit = READ_AHEAD_FILE as usize;
    let sizes = [0, 1, 511, 512, 513, limit - 1, limit, limit + 1, 3 * limit];
    let mut data = 0;
    for i in 0..(READ_AHEAD_MEMBERS * 3) {
        let dir = src.path();
        let size = if i % 25 == 0 { *rng.pick(&sizes) } else { rng.below(20_000) };
        let body: Vec<u8> = (0..size).map(|k| (k as u64 * 31 + i as u64) as u8).collect();
        fs::write(dir.join(format!("f{i}")), body).unwrap();
        data += size;
    }
    for i in 0..20 {
        fs::write(src.join(format!("big{i}")), vec![i as u8; limit]).unwrap();
        data += limit;
    }
    assert!(data as u64 > 2 * READ_AHEAD_BYTES, "seed {seed}: the tree must outgrow the window");
    let ours = pack_bytes(&opts(src.path())).unwrap();
    let names = crate::walk::sorted_names(src.path()).unwrap();
    let gnu = gnu_tar_create(src.path(), &[], &names, false);
    assert!(gnu.len() >= ours.len(), "seed {seed}: GNU tar wrote less");
    if let Some(at) = ours.iter().zip(&gnu).position(|(a, b)| a != b) {
        panic!("seed {seed}: differs from GNU tar at byte {at} (block {})", at / 512);
    }
    assert!(gnu[ours.len()..].iter().all(|&b| b == 0), "seed {seed}: GNU tar has more");
}

/// A writer that fails stops the walk and the read-ahead pool (no hang), and its error
/// is the pack's; a walk error (a name that is not UTF-8) comes at its turn, after every
/// member before it was written whole.
#[test]
fn read_ahead_stops_on_the_writers_error_and_fails_at_the_walks_turn() {
    struct FailAfter(usize);
    impl Write for FailAfter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.0 < buf.len() {
                return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
            }
            self.0 -= buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let src = TempDir::new("pack-ahead-fail");
    for i in 0..(READ_AHEAD_MEMBERS * 2) {
        fs::write(src.join(format!("a{i:04}")), vec![b'x'; 70_000]).unwrap();
    }
    let err = pack(&opts(src.path()), FailAfter(1 << 20), |_| {}, &never()).unwrap_err();
    assert_eq!(err.code, "ENOSPC", "{err:?}");

    use std::os::unix::ffi::OsStrExt;
    fs::create_dir(src.join("z")).unwrap();
    fs::write(src.join("z").join(std::ffi::OsStr::from_bytes(b"bad\xff")), b"x").unwrap();
    let mut out = Vec::new();
    let err = pack(&opts(src.path()), &mut out, |_| {}, &never()).unwrap_err();
    assert_eq!(err.code, codes::NON_UTF8_NAME, "{err:?}");
    // The members written before the failure, read header by header (short ustar names,
    // no end-of-archive blocks: the pack stopped there).
    let mut names = Vec::new();
    let mut at = 0;
    while at + 512 <= out.len() {
        let header = &out[at..at + 512];
        let name_len = header[..100].iter().position(|&b| b == 0).unwrap_or(100);
        let name = String::from_utf8(header[..name_len].to_vec()).unwrap();
        let size_field = std::str::from_utf8(&header[124..135]).unwrap().trim_matches(|c| c == ' ' || c == '\0');
        let size = usize::from_str_radix(size_field, 8).unwrap();
        let body = &out[at + 512..at + 512 + size];
        if name.starts_with('a') {
            assert_eq!(body, &vec![b'x'; 70_000][..], "{name}");
        }
        names.push(name);
        at += 512 + size.div_ceil(512) * 512;
    }
    assert_eq!(at, out.len(), "whole members only");
    let mut expected: Vec<String> = (0..(READ_AHEAD_MEMBERS * 2)).map(|i| format!("a{i:04}")).collect();
    expected.push("z/".into());
    assert_eq!(names, expected);
}

#[test]
fn progress_is_monotonic_and_cancel_aborts() {
    let dir = TempDir::new("pack-progress");
    for i in 0..20 {
        fs::write(dir.join(format!("f{i}")), vec![7u8; 100_000]).unwrap();
    }
    let mut seen = Vec::new();
    let mut out = Vec::new();
    let summary = pack(&opts(dir.path()), &mut out, |n| seen.push(n), &AtomicBool::new(false)).unwrap();
    assert!(seen.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(*seen.last().unwrap(), summary.tar_bytes);
    assert_eq!(summary.entries, 20);

    let cancel = AtomicBool::new(false);
    let mut calls = 0;
    let err = pack(
        &opts(dir.path()),
        std::io::sink(),
        |_| {
            calls += 1;
            if calls == 3 {
                cancel.store(true, Ordering::Relaxed);
            }
        },
        &cancel,
    )
    .unwrap_err();
    assert!(err.is_aborted());
    assert_eq!(calls, 3);
}

#[test]
fn precompute_size_stops_at_the_next_member_once_cancelled() {
    use std::os::unix::ffi::OsStrExt;
    let dir = TempDir::new("pack-size-cancel");
    for i in 0..50 {
        fs::write(dir.join(format!("f{i:02}")), vec![1u8; 1000]).unwrap();
    }
    // Walked last: a full walk ends in this error.
    fs::create_dir(dir.join("zz")).unwrap();
    fs::write(dir.join("zz").join(std::ffi::OsStr::from_bytes(b"bad\xff")), b"").unwrap();
    let err = precompute_size(&opts(dir.path()), &never()).unwrap_err();
    assert_eq!(err.code, codes::NON_UTF8_NAME);

    let cancelled = AtomicBool::new(true);
    assert!(precompute_size(&opts(dir.path()), &cancelled).unwrap_err().is_aborted());

    let cancel = AtomicBool::new(false);
    let mut seen = 0;
    let err = size_walk(&opts(dir.path()), None, &cancel, |members| {
        seen = members;
        if members == 3 {
            cancel.store(true, Ordering::Relaxed);
        }
    })
    .unwrap_err();
    assert!(err.is_aborted(), "{err:?}");
    assert_eq!(seen, 3);
}

#[test]
fn pack_to_file_is_atomic() {
    let dir = TempDir::new("pack-file");
    let src = dir.join("src");
    fs::create_dir(&src).unwrap();
    fs::write(src.join("a"), vec![1u8; 300_000]).unwrap();
    let target = dir.join("out.tar");
    fs::write(&target, b"previous").unwrap();

    // Cancelled: the previous file is untouched and no temporary file is left.
    let cancel = AtomicBool::new(false);
    let err = pack_to_file(&opts(&src), &target, |_| cancel.store(true, Ordering::Relaxed), &cancel).unwrap_err();
    assert!(err.is_aborted());
    assert_eq!(fs::read(&target).unwrap(), b"previous");
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2);

    let summary = pack_to_file(&opts(&src), &target, |_| {}, &AtomicBool::new(false)).unwrap();
    assert_eq!(fs::read(&target).unwrap(), pack_bytes(&opts(&src)).unwrap());
    assert_eq!(summary.tar_bytes, fs::metadata(&target).unwrap().len());
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2);

    // An archive written inside the tree it archives does not contain itself.
    let inside = src.join("self.tar");
    pack_to_file(&opts(&src), &inside, |_| {}, &AtomicBool::new(false)).unwrap();
    pack_to_file(&opts(&src), &inside, |_| {}, &AtomicBool::new(false)).unwrap();
    if have_gnu_tar("pack_to_file_is_atomic") {
        assert_eq!(gnu_list(&fs::read(&inside).unwrap()), ["a"]);
    }

    // Errors leave nothing behind either.
    let missing = opts(&dir.join("missing"));
    assert_eq!(pack_to_file(&missing, &target, |_| {}, &AtomicBool::new(false)).unwrap_err().code, "ENOENT");
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2);
}

#[test]
fn gzip_round_trip() {
    let dir = TempDir::new("pack-gzip");
    let mut rng = Rng::new(42);
    build_tree(&mut rng, dir.path(), &TreeOptions { big_files: true, ..Default::default() });
    let plain = pack_bytes(&opts(dir.path())).unwrap();
    for level in [0, 1, 6, 9] {
        let gz = pack_bytes(&PackOptions { gzip: Some(level), ..opts(dir.path()) }).unwrap();
        assert_eq!(gunzip(&gz), plain, "level {level}");
    }
    let err = pack_bytes(&PackOptions { gzip: Some(10), ..opts(dir.path()) }).unwrap_err();
    assert_eq!(err.code, codes::INVALID_ARGUMENT);
    if have_gnu_tar("gzip_round_trip") {
        let gz = pack_bytes(&PackOptions { gzip: Some(1), ..opts(dir.path()) }).unwrap();
        let out = TempDir::new("pack-gzip-out");
        system_extract(&["tar", "-x", "-z", "-f", "-"], &gz, out.path());
        assert_same_tree(&snapshot(out.path(), false), &snapshot(dir.path(), false), "gzip");
    }
}

/// Undoes bsdtar's listing escapes (`\\` and `\ooo`).
fn unescape_listing(name: &str) -> String {
    let bytes = name.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && bytes.get(i + 1) == Some(&b'\\') {
            out.push(b'\\');
            i += 2;
        } else if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4].iter().all(|b| (b'0'..=b'7').contains(b))
        {
            out.push(u8::from_str_radix(&name[i + 1..i + 4], 8).unwrap());
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

/// bsdtar (libarchive) and busybox tar read what we write, when they are installed.
/// (bsdtar needs `-P`: by default it strips a leading `\` from member names, a quirk of
/// its own that GNU tar does not share.)
#[test]
fn other_tars_read_our_archives() {
    if !have_gnu_tar("other_tars_read_our_archives") {
        return;
    }
    let options = TreeOptions { long_names: true, big_files: true, modes_and_times: true, ..Default::default() };
    /// Program, probe arguments, list command, extract command.
    type Reader<'a> = (&'a str, &'a [&'a str], &'a [&'a str], &'a [&'a str]);
    let readers: [Reader<'_>; 2] = [
        ("bsdtar", &["--version"], &["bsdtar", "-t", "-f", "-"], &["bsdtar", "-x", "-p", "-P", "-f", "-"]),
        ("busybox", &["tar", "--help"], &["busybox", "tar", "-t", "-f", "-"], &["busybox", "tar", "-x", "-f", "-"]),
    ];
    for (program, probe, list, extract) in readers {
        if !have_tool(program, probe, "other_tars_read_our_archives") {
            continue;
        }
        for case in 0..case_count(60) / 6 {
            let seed = 0x0747_0000 + case;
            let mut rng = Rng::new(seed);
            let src = TempDir::new("pack-other");
            build_tree(&mut rng, src.path(), &options);
            let ours = pack_bytes(&opts(src.path())).unwrap();
            let mut listed: Vec<String> = list_members(list, &ours)
                .iter()
                .map(|m| m.trim_end_matches('/'))
                // bsdtar escapes `\\` and control characters in listings; busybox does not.
                .map(|m| if program == "bsdtar" { unescape_listing(m) } else { m.to_owned() })
                .collect();
            listed.sort();
            let expected = filtered(src.path(), &gnu_list(&ours));
            let wanted: Vec<String> = expected.keys().cloned().collect();
            let missing: Vec<_> = wanted.iter().filter(|m| !listed.contains(m)).collect();
            let extra: Vec<_> = listed.iter().filter(|m| !wanted.contains(m)).collect();
            assert!(
                missing.is_empty() && extra.is_empty(),
                "{program} seed {seed}: missing {missing:?}, unexpected {extra:?}"
            );
            let out = TempDir::new("pack-other-out");
            system_extract(extract, &ours, out.path());
            let strip_dirs = |m: BTreeMap<String, Snap>| -> BTreeMap<String, Snap> {
                m.into_iter()
                    .map(|(k, v)| match v {
                        // busybox does not restore directory times; compare contents,
                        // links and file metadata.
                        Snap::Dir { mode, .. } => (k, Snap::Dir { mode, mtime: 0 }),
                        other => (k, other),
                    })
                    .collect()
            };
            assert_same_tree(
                &strip_dirs(snapshot(out.path(), true)),
                &strip_dirs(expected),
                &format!("{program} seed {seed}"),
            );
        }
    }
}
