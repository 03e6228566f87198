//! Helpers shared by the extractor's tests: running an extraction, packing a tree, and a
//! sandbox that checks nothing outside the destination changed.

// What the tests of every part use, for their `use test_support::*`.
pub(super) use super::{extract, ArchiveLimits, ExtractOptions, ExtractSummary, STAGING_PREFIX};
pub(super) use crate::error::{codes, Error, Result};
pub(super) use crate::fsat::{c_name, Dir};
pub(super) use crate::staging;
use crate::tar::pack::{pack, PackOptions};
pub(super) use crate::tar::stream::COPY_BUFFER;
use crate::tar::testutil::*;
pub(super) use std::collections::BTreeMap;
pub(super) use std::fs;
pub(super) use std::io::{self, Read, Write};
pub(super) use std::os::unix::fs::{MetadataExt, PermissionsExt};
pub(super) use std::path::{Path, PathBuf};
pub(super) use std::sync::atomic::AtomicBool;

pub(super) fn run(archive: &[u8], dest: &Path) -> Result<ExtractSummary> {
    extract(archive, dest, &ExtractOptions::default(), |_| {}, &AtomicBool::new(false))
}

pub(super) fn pack_tree(root: &Path, gzip: Option<u32>) -> Vec<u8> {
    let mut out = Vec::new();
    let opts = PackOptions { root: root.to_path_buf(), gzip, ..PackOptions::default() };
    pack(&opts, &mut out, |_| {}, &AtomicBool::new(false)).unwrap();
    out
}

/// A sandbox: `dest` to extract into, `outside` with a sentinel beside it.
pub(super) struct Sandbox {
    base: TempDir,
}

impl Sandbox {
    pub(super) fn new() -> Sandbox {
        let base = TempDir::new("extract-sandbox");
        fs::create_dir(base.join("dest")).unwrap();
        fs::create_dir(base.join("outside")).unwrap();
        fs::write(base.join("outside/sentinel"), b"untouched").unwrap();
        fs::create_dir(base.join("outside/etc")).unwrap();
        Sandbox { base }
    }

    pub(super) fn dest(&self) -> PathBuf {
        self.base.join("dest")
    }

    pub(super) fn outside(&self) -> PathBuf {
        self.base.join("outside")
    }

    /// Everything but the destination: the outside directory, and the names beside.
    pub(super) fn world(&self) -> BTreeMap<String, Snap> {
        let mut world = snapshot(&self.outside(), true);
        let meta = fs::metadata(self.outside()).unwrap();
        world.insert("..outside".into(), Snap::Dir { mode: meta.mode(), mtime: meta.mtime() });
        for entry in fs::read_dir(self.base.path()).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            world.insert(format!("..{name}"), Snap::Other { mode: 0 });
        }
        world
    }

    /// Extracts `archive`, expects the error `code`, and checks that nothing outside the
    /// destination changed and that the message names no host path.
    pub(super) fn refuses(&self, archive: &[u8], code: &str, what: &str) -> Error {
        let before = self.world();
        let err = run(archive, &self.dest()).expect_err(what);
        assert_eq!(err.code, code, "{what}: {}", err.message);
        assert_same_tree(&self.world(), &before, what);
        if code == codes::UNSAFE_ARCHIVE_ENTRY {
            let base = self.base.path().to_string_lossy().into_owned();
            assert!(!err.message.contains(&base) || what.contains("absolute"), "{what}: {}", err.message);
            assert!(err.message.starts_with("refusing archive member '"), "{}", err.message);
        }
        err
    }
}

/// What extraction should produce: the source minus `._*` (never packed), with the
/// special permission bits dropped.
pub(super) fn expected_after_extract(src: &Path) -> BTreeMap<String, Snap> {
    snapshot(src, true)
        .into_iter()
        .filter(|(k, _)| !k.split('/').any(|c| c.starts_with("._")))
        .map(|(k, v)| {
            let v = match v {
                Snap::Dir { mode, mtime } => Snap::Dir { mode: mode & 0o777, mtime },
                Snap::File { mode, mtime, size, sha256 } => Snap::File { mode: mode & 0o777, mtime, size, sha256 },
                other => other,
            };
            (k, v)
        })
        .collect()
}

/// The names a failed or finished extraction must never leave: its staging directories.
pub(super) fn staging_leftovers(dest: &Path) -> Vec<String> {
    fs::read_dir(dest)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(STAGING_PREFIX))
        .collect()
}

pub(super) fn run_with(archive: &[u8], dest: &Path, opts: &ExtractOptions) -> Result<ExtractSummary> {
    extract(archive, dest, opts, |_| {}, &AtomicBool::new(false))
}

pub(super) fn limited(limits: ArchiveLimits) -> ExtractOptions {
    ExtractOptions { limits, ..ExtractOptions::default() }
}

/// A pid no process has.
pub(super) fn dead_pid() -> u32 {
    (2..4_000_000u32).rev().find(|pid| staging::process_start(*pid).is_err()).unwrap()
}
