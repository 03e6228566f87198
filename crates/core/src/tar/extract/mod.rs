//! Safe extraction of a tar (or gzip-compressed tar) stream into a directory.
//!
//! Every member is checked before anything is created for it, and nothing is created through
//! a symbolic link: all file-system calls are relative to directory handles opened with
//! `O_NOFOLLOW` ([`crate::fsat`]). Refused, with code `ERR_PAPERCLIP_NATIVE_UNSAFE_ARCHIVE_ENTRY`
//! and a message naming the member (never a host path):
//!
//! * absolute names and names with a `..` component;
//! * members whose parent directory, in the destination, is a symbolic link (whether the
//!   archive created it or it was there before): `link/etc/passwd` after `link -> /`;
//! * symbolic links with an absolute target, with more leading `..` than their depth, or with
//!   a `..` after a name (`a/b/..` could climb out through a link `a/b`);
//! * hard links whose target is outside the root, missing, or not a regular file;
//! * a name this library reserves ([`crate::reserved`]: our staging directories and key) at
//!   any depth of a member's name or of a link's target;
//! * devices, FIFOs, sparse files and unknown entry types.
//!
//! Extraction follows `tar -xpf` otherwise: an existing file, link or empty directory in the
//! way of a member is replaced (never written through), an existing directory is kept,
//! permission bits are applied exactly but setuid, setgid and sticky bits are dropped,
//! modification times are restored, ownership is not. Directory modes and times are applied
//! at the end, so a read-only directory can still receive its members. A truncated or corrupt
//! archive fails with `ERR_PAPERCLIP_NATIVE_BAD_ARCHIVE`, including one that stops without
//! its end-of-archive blocks.
//!
//! The destination changes only after the whole archive was read and every member accepted:
//! members are extracted into a private staging directory inside the destination
//! (`.paperclip-extract-…`, mode 0700), then checked against what the destination already
//! holds, then moved in (a rename per entry, merging into existing directories), and the
//! directory modes and times are applied last. A refusal, a corrupt archive, a source error
//! or a cancellation before that point removes the staging directory and leaves the
//! destination as it was. Only a failure of the moves themselves (a destination changed
//! meanwhile, permissions) can leave part of the archive applied.
//!
//! The staging directory (`<dest>/.paperclip-extract-<owner>-<nonce>/`, see
//! [`crate::staging`]) holds the members under `tree/` and, from the first move on, a
//! `journal` of the directory modes and times still to apply: a process killed during the
//! moves is completed by the next extraction into the same destination ([`roll_forward`]),
//! one killed earlier is removed by it.
//!
//! The [`ArchiveLimits`] (bounds, opt-in, and the free-space floor, on by default) are
//! charged at each member's header, before its entry or any of its data is written.

mod limits;
mod place;
mod reader;
#[cfg(test)]
mod test_support;

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use super::stream::{check_cancel, CountingReader, ReadState};
use crate::error::{codes, Error, Result};
use crate::fsat::Dir;
use crate::reserved::{self, Kind as StagingKind};
use crate::staging::{self, Staging};

use limits::Budget;
pub use limits::{default_min_free_bytes, ArchiveLimits};
pub(crate) use place::roll_forward;
use place::Extractor;
use reader::{decompressed, ArchiveReader};

/// Prefix of the staging directory an extraction fills inside its destination.
#[cfg(test)]
const STAGING_PREFIX: &str = reserved::EXTRACT_PREFIX;

/// How to extract.
#[derive(Debug, Clone)]
pub struct ExtractOptions {
    /// Restore modification times from the archive (default `true`).
    pub preserve_mtime: bool,
    /// Bounds for an untrusted archive (none by default) and the free-space floor (the
    /// default floor by default).
    pub limits: ArchiveLimits,
    /// The tree whose symbolic links vouch for the archive's: a member that is a symbolic
    /// link to an absolute path or out of the root (refused otherwise) is extracted when
    /// this directory holds a symbolic link at the same path with exactly that target: the
    /// link went out and came back unchanged (a Python virtualenv's `bin/python3 ->
    /// /usr/bin/python3`). Links are never followed, so such a link writes nothing outside.
    /// `None`: the destination itself.
    pub known_links: Option<PathBuf>,
    /// Leave out, instead of refusing the archive, what never travels in a lane's restore:
    /// FIFOs and device files, and members (or links) whose path holds a name this library
    /// reserves (a workspace's FIFO, or a committed file of such a name, comes back in the
    /// remote's archive; the host keeps its own).
    pub skip_untransferable: bool,
}

impl Default for ExtractOptions {
    fn default() -> Self {
        ExtractOptions {
            preserve_mtime: true,
            limits: ArchiveLimits::default(),
            known_links: None,
            skip_untransferable: false,
        }
    }
}

/// What an extraction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractSummary {
    /// Members extracted (the root's own `./` entry and pax/GNU metadata not counted).
    pub entries: u64,
    /// Bytes read from `reader` (compressed bytes for a gzip stream).
    pub bytes_read: u64,
    /// Names of entries in the destination that carry one of our staging names but that
    /// this host cannot prove it created ([`crate::staging::Swept::foreign`]): left alone,
    /// for the caller to report.
    pub foreign_staging: Vec<String>,
}

/// Extracts the archive read from `reader` into `dest` (created if missing).
///
/// A gzip stream is recognised by its magic bytes. `progress` receives the running count of
/// bytes read from `reader`; `cancel` is checked on every read and every member, and once set
/// the call fails with [`Error::aborted`]. After the end-of-archive blocks the rest of the
/// input is read and discarded (so a gzip stream's checksum is verified).
pub fn extract<R: Read>(
    reader: R,
    dest: &Path,
    opts: &ExtractOptions,
    progress: impl FnMut(u64),
    cancel: &AtomicBool,
) -> Result<ExtractSummary> {
    check_cancel(cancel)?;
    fs::create_dir_all(dest).map_err(|e| Error::io(e, "mkdir", dest))?;
    let dest_root = Dir::open(dest).map_err(|e| Error::io(e, "open", dest))?;
    // What a killed extraction (or merge) left here is cleaned up, or completed, first.
    let swept = staging::sweep(&dest_root, dest, false)?;
    let foreign_staging = swept.foreign.iter().map(|name| name.to_string_lossy().into_owned()).collect();
    let budget = Budget::new(&opts.limits, &dest_root, dest)?;
    let staging = Staging::create(&dest_root, StagingKind::Extract).map_err(|e| Error::io(e, "mkdir", dest))?;
    staging.dir.mkdir(std::ffi::OsStr::new(reserved::TREE), 0o700).map_err(|e| Error::io(e, "mkdir", dest))?;
    let root =
        staging.dir.open_dir_nofollow(std::ffi::OsStr::new(reserved::TREE)).map_err(|e| Error::io(e, "open", dest))?;
    let state = ReadState::default();
    let counting = CountingReader::new(reader, progress, cancel, &state);
    let source = decompressed(counting).map_err(|e| state.take_failure().unwrap_or_else(|| bad(e.to_string())))?;
    let mut archive = ArchiveReader::new(source, &state);
    // A reference tree that cannot be opened vouches for nothing.
    let known_links = match &opts.known_links {
        Some(path) => Dir::open_nofollow(path).ok(),
        None => dest_root.try_clone().ok(),
    };
    let mut extractor = Extractor::new(dest, root, dest_root, opts, budget, &staging.dir).vouched_by(known_links);
    let mut entries = 0;
    while let Some(member) = archive.next_member()? {
        check_cancel(cancel)?;
        if extractor.apply(&member, &mut archive)? {
            entries += 1;
        }
    }
    archive.drain()?;
    // The last moment an abort leaves the destination untouched.
    check_cancel(cancel)?;
    extractor.commit()?;
    drop(staging);
    Ok(ExtractSummary { entries, bytes_read: state.count(), foreign_staging })
}

/// The `BAD_ARCHIVE` error.
fn bad(message: impl std::fmt::Display) -> Error {
    Error::new(codes::BAD_ARCHIVE, format!("invalid archive: {message}"))
}

/// The `UNSAFE_ARCHIVE_ENTRY` error for `member`.
fn refuse(member: &str, reason: impl std::fmt::Display) -> Error {
    Error::new(codes::UNSAFE_ARCHIVE_ENTRY, format!("refusing archive member '{member}': {reason}"))
}

/// A member name as shown in messages: lossy UTF-8 with control characters escaped.
fn shown(raw: &[u8]) -> String {
    let mut out = String::with_capacity(raw.len());
    for c in String::from_utf8_lossy(raw).chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tar::extract::test_support::*;
    use crate::tar::testutil::*;

    /// Packed generated trees (plain and gzip) extract to the same tree, setuid/setgid/sticky
    /// bits dropped.
    #[test]
    fn round_trip_through_pack() {
        let options = TreeOptions {
            long_names: true,
            big_files: true,
            modes_and_times: true,
            inside_links: true,
            ..Default::default()
        };
        for case in 0..case_count(60) / 2 {
            let seed = 0xe47a_0000 + case;
            let mut rng = Rng::new(seed);
            let src = TempDir::new("extract-src");
            build_tree(&mut rng, src.path(), &options);
            let gzip = rng.chance(30).then_some(1);
            let archive = pack_tree(src.path(), gzip);
            let out = TempDir::new("extract-out");
            let summary = run(&archive, out.path()).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            assert_eq!(summary.bytes_read, archive.len() as u64);
            let expected = expected_after_extract(src.path());
            assert_same_tree(&snapshot(out.path(), true), &expected, &format!("seed {seed}"));
        }
    }

    #[test]
    fn progress_cancel_and_source_errors() {
        let src = TempDir::new("extract-progress");
        for i in 0..10 {
            fs::write(src.join(format!("f{i}")), vec![1u8; 200_000]).unwrap();
        }
        let archive = pack_tree(src.path(), Some(1));
        let out = TempDir::new("extract-progress-out");
        let mut seen = Vec::new();
        extract(&archive[..], out.path(), &ExtractOptions::default(), |n| seen.push(n), &AtomicBool::new(false))
            .unwrap();
        assert!(seen.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(*seen.last().unwrap(), archive.len() as u64);

        let cancel = AtomicBool::new(false);
        let out = TempDir::new("extract-cancel-out");
        let err = extract(
            &archive[..],
            out.path(),
            &ExtractOptions::default(),
            |n| {
                if n > 1000 {
                    cancel.store(true, std::sync::atomic::Ordering::Relaxed)
                }
            },
            &cancel,
        )
        .unwrap_err();
        assert!(err.is_aborted(), "{err:?}");

        /// Fails with EIO after some bytes.
        struct Failing<'a>(&'a [u8]);
        impl Read for Failing<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                if self.0.is_empty() {
                    return Err(io::Error::from_raw_os_error(libc::EIO));
                }
                let n = buf.len().min(self.0.len()).min(700);
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let out = TempDir::new("extract-eio-out");
        let err =
            extract(Failing(&archive[..5000]), out.path(), &ExtractOptions::default(), |_| {}, &AtomicBool::new(false))
                .unwrap_err();
        assert_eq!(err.code, "EIO", "{}", err.message);
        assert_eq!(err.errno, Some(-libc::EIO));
    }

    /// Random corruption of valid archives: never a panic, never a write outside, and only
    /// the expected kinds of error.
    #[test]
    fn mutated_archives_fail_safely() {
        let options = TreeOptions { long_names: true, inside_links: true, ..Default::default() };
        let allowed = [
            codes::BAD_ARCHIVE,
            codes::UNSAFE_ARCHIVE_ENTRY,
            codes::NON_UTF8_NAME,
            "ENAMETOOLONG",
            "ENOTDIR",
            "ENOTEMPTY",
            "EISDIR",
            "EEXIST",
        ];
        for case in 0..case_count(60) * 3 {
            let seed = 0xbad_0000 + case;
            let mut rng = Rng::new(seed);
            let src = TempDir::new("mutate-src");
            build_tree(&mut rng, src.path(), &options);
            let mut archive = pack_tree(src.path(), None);
            for _ in 0..1 + rng.below(8) {
                let at = rng.below(archive.len());
                match rng.below(4) {
                    0 => archive[at] = rng.next_u64() as u8,
                    1 => archive[at] ^= 1 << rng.below(8),
                    2 => archive[at] = *rng.pick(b"./\0 7L2"),
                    _ => archive.truncate(at.max(1)),
                }
            }
            let sandbox = Sandbox::new();
            let before = sandbox.world();
            if let Err(err) = run(&archive, &sandbox.dest()) {
                assert!(allowed.contains(&err.code.as_ref()), "seed {seed}: {err:?}");
            }
            assert_same_tree(&sandbox.world(), &before, &format!("seed {seed}"));
        }
    }

    #[test]
    fn a_failed_or_cancelled_extraction_leaves_the_destination_as_it_was() {
        let sandbox = Sandbox::new();
        let dest = sandbox.dest();
        fs::write(dest.join("keep.txt"), b"keep").unwrap();
        fs::create_dir(dest.join("d")).unwrap();
        fs::write(dest.join("d/old.txt"), b"old").unwrap();
        std::os::unix::fs::symlink("keep.txt", dest.join("ln")).unwrap();
        let before = snapshot(&dest, true);
        let valid = || {
            let mut archive = RawArchive::new();
            archive.file("new.txt", b"new").dir("d/", 0o700).file("d/new.txt", b"new").file("keep.txt", b"overwritten");
            archive
        };
        let truncated = {
            let mut bytes = valid().file("big.bin", &[7u8; 4096]).finish();
            bytes.truncate(bytes.len() - 1024 - 2048);
            bytes
        };
        let cases: Vec<(Vec<u8>, &str, &str)> = vec![
            (valid().file("../x", b"evil").finish(), codes::UNSAFE_ARCHIVE_ENTRY, "refused last member"),
            (valid().symlink("s", "/etc").finish(), codes::UNSAFE_ARCHIVE_ENTRY, "refused link"),
            (truncated, codes::BAD_ARCHIVE, "truncated"),
            (valid().file("ln/x", b"evil").finish(), codes::UNSAFE_ARCHIVE_ENTRY, "under a link already there"),
            (valid().file("d", b"file over a full directory").finish(), "ENOTEMPTY", "file over a non-empty directory"),
            (valid().file("keep.txt/x", b"under a file").finish(), "ENOTDIR", "under a file already there"),
        ];
        for (archive, code, what) in cases {
            let err = run(&archive, &dest).expect_err(what);
            assert_eq!(err.code, code, "{what}: {}", err.message);
            assert_same_tree(&snapshot(&dest, true), &before, what);
            assert_eq!(staging_leftovers(&dest), Vec::<String>::new(), "{what}");
        }
        // Cancelled after the first members were read.
        let mut archive = valid();
        for i in 0..64 {
            archive.file(&format!("many/{i}"), &[1u8; 8192]);
        }
        let archive = archive.finish();
        let cancel = AtomicBool::new(false);
        let progress = |bytes: u64| {
            if bytes > 64 * 1024 {
                cancel.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        };
        let err = extract(&archive[..], &dest, &ExtractOptions::default(), progress, &cancel).unwrap_err();
        assert_eq!(err.code, Error::aborted().code);
        assert_same_tree(&snapshot(&dest, true), &before, "cancelled");
        assert_eq!(staging_leftovers(&dest), Vec::<String>::new());
    }

    /// No name this library reserves arrives from an archive: refused at any depth, with
    /// nothing written, and the next extraction into the same destination succeeds.
    #[test]
    fn reserved_names_are_refused_at_any_depth() {
        let sandbox = Sandbox::new();
        let dest = sandbox.dest();
        fs::write(dest.join("keep.txt"), b"keep").unwrap();
        let before = snapshot(&dest, true);
        let cases = reserved_name_archives();
        assert!(cases.len() >= 66, "{}", cases.len());
        for (what, archive) in cases {
            let err = sandbox.refuses(&archive, codes::UNSAFE_ARCHIVE_ENTRY, &what);
            assert!(err.message.contains("reserves"), "{what}: {}", err.message);
            assert_same_tree(&snapshot(&dest, true), &before, &what);
            assert_eq!(staging_leftovers(&dest), Vec::<String>::new(), "{what}");
        }
        let summary = run(&RawArchive::new().file("after.txt", b"after").finish(), &dest).unwrap();
        assert_eq!((summary.entries, summary.foreign_staging.len()), (1, 0));
        assert_eq!(fs::read(dest.join("after.txt")).unwrap(), b"after");
    }

    /// Our staging names never enter a snapshot or a pack of the tree.
    #[test]
    fn staging_names_are_not_walked_or_packed() {
        let src = TempDir::new("staging-walk");
        fs::write(src.join("real"), b"r").unwrap();
        fs::create_dir_all(src.join(format!("{STAGING_PREFIX}1-2-0123456789abcdef/tree"))).unwrap();
        fs::create_dir_all(src.join(format!("sub/{}1-2-0123456789abcdef", crate::reserved::MERGE_PREFIX))).unwrap();
        fs::write(src.join(".paperclip-merge-notes"), b"a user's file").unwrap();
        let out = TempDir::new("staging-walk-out");
        run(&pack_tree(src.path(), None), out.path()).unwrap();
        let mut names: Vec<String> = snapshot(out.path(), false).into_keys().collect();
        names.sort();
        assert_eq!(names, vec![".paperclip-merge-notes", "real", "sub"]);
    }
}
