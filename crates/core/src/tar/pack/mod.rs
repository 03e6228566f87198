//! Writing a directory as a tar stream: the members `tar -c --no-xattrs [-h] -C root
//! --exclude ._* --exclude <each> -- <top-level names>` would archive, in GNU format.
//!
//! By job: this module plans the walk and runs a pack ([`pack`], [`precompute_size`],
//! [`pack_to_file`]); `read_ahead` walks the tree and reads small files ahead on a pool;
//! `writer` encodes each member (headers, long names, data) over the plain or gzip sink;
//! `owners` looks up user and group names; `temp_file` is the file a pack to a path writes
//! before it is renamed into place; `selection` is which members a pack writes
//! ([`pack_selected`]).

mod owners;
mod read_ahead;
mod selection;
mod temp_file;
#[cfg(test)]
mod tests;
mod writer;

use std::collections::HashSet;
use std::fs;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use super::exclude::TarExcludeSet;
use super::header::{long_entry_cost, padded, BLOCK};
use super::members::MemberRecord;
use super::walk::{self, EntryKind, Walk, WalkEntry};
use crate::error::{Error, Result};
use read_ahead::read_ahead;
use selection::Selection;
use temp_file::TempFile;
use writer::{Sink, TarOut};

/// The exclude pattern every upstream tar invocation starts with (macOS AppleDouble files).
pub const APPLE_DOUBLE_EXCLUDE: &str = "._*";

/// The two zero blocks that end every archive; also the whole of an empty one.
const END_OF_ARCHIVE: [u8; 2 * BLOCK] = [0; 2 * BLOCK];

/// What to archive and how.
#[derive(Debug, Clone, Default)]
pub struct PackOptions {
    /// The directory whose entries are archived (tar's `-C`). The directory itself gets no
    /// entry (no `./`).
    pub root: PathBuf,
    /// `--exclude` values with GNU tar's semantics ([`super::TarExcludeSet`]), after the
    /// implicit `._*`.
    pub exclude: Vec<String>,
    /// Dereference symbolic links (`tar -h`): archive what they point to. A cycle is an
    /// error with code `ERR_PAPERCLIP_NATIVE_SYMLINK_LOOP`; a dangling link fails with
    /// `ENOENT`, as `tar -h` fails.
    pub follow_symlinks: bool,
    /// The top-level names to archive, in this order (the names upstream passes after `--`,
    /// sorted by the caller, e.g. with `localeCompare`). Each must be a single file name.
    /// `None`: every entry of `root`, in byte order.
    pub top_level_order: Option<Vec<String>>,
    /// Compress with gzip at this level (0–9). `None`: a plain tar stream. Pieces of file
    /// data that look incompressible are stored rather than compressed, at every level
    /// (see `gzip.rs`).
    pub gzip: Option<u32>,
    /// Name members `./x`, as `tar -cf - .` does (upstream's SSH upload), and match the
    /// excludes against those names (so `*/x` excludes a top-level `x`, and a pattern that
    /// matches `.` excludes everything). The root still gets no `./` entry of its own.
    pub dot_members: bool,
}

/// The member name prefix of [`PackOptions::dot_members`].
const DOT_PREFIX: &str = "./";

/// What a pack wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackSummary {
    /// Members archived.
    pub entries: u64,
    /// Size of the uncompressed tar stream.
    pub tar_bytes: u64,
}

/// Writes the archive of `opts.root` to `writer`.
///
/// The stream is produced with fixed-size buffers: file contents are copied 64 KiB at a
/// time, never held whole. `progress` receives the running count of *uncompressed* tar bytes
/// produced (the unit of [`precompute_size`]), after every write. `cancel` is checked before
/// every write and every member; once it is set the call fails with [`Error::aborted`].
///
/// Member names are UTF-8 (`ERR_PAPERCLIP_NATIVE_NON_UTF8_NAME` otherwise), headers are GNU
/// format (long names and link targets through `././@LongLink` entries, base-256 numbers when
/// octal overflows), without pax or xattr records. Hard links are stored as regular files,
/// sockets are skipped, FIFOs and devices are archived as tar does. An empty selection
/// writes exactly 1024 zero bytes. The writer is flushed at the end.
pub fn pack<W: Write>(
    opts: &PackOptions,
    writer: W,
    progress: impl FnMut(u64),
    cancel: &AtomicBool,
) -> Result<PackSummary> {
    pack_to(opts, writer, progress, cancel, &[], None, Selection::ALL).map(|(summary, _)| summary)
}

/// [`pack`] restricted to the members named in `only` (`None`: all of them): the walk goes
/// only where the named members lead and writes only them (a directory not named is
/// descended into without an entry of its own; a name that is not there is not an error).
/// `record` receives each written member's `stat` record, taken before the member was read.
pub fn pack_selected<W: Write>(
    opts: &PackOptions,
    only: Option<&HashSet<String>>,
    writer: W,
    progress: impl FnMut(u64),
    cancel: &AtomicBool,
    record: &mut (dyn FnMut(MemberRecord) + Send),
) -> Result<PackSummary> {
    pack_to(opts, writer, progress, cancel, &[], None, Selection::new(only, record)).map(|(summary, _)| summary)
}

/// The `stat` record of every member [`pack`] would write now, in archive order, from a
/// walk that reads metadata only.
pub fn member_records(opts: &PackOptions, cancel: &AtomicBool) -> Result<Vec<MemberRecord>> {
    let plan = Plan::new(opts)?;
    let mut members = Vec::new();
    plan.walk(opts, &[], cancel).run(|entry| {
        members.push(MemberRecord::of(entry));
        Ok(())
    })?;
    Ok(members)
}

/// The exact size in bytes of the uncompressed stream [`pack`] would write now, from a walk
/// that reads metadata only. Files that change between this call and the pack make the
/// figures differ. `cancel` is checked before every member, as by [`pack`]; once it is set
/// the call fails with [`Error::aborted`].
pub fn precompute_size(opts: &PackOptions, cancel: &AtomicBool) -> Result<u64> {
    size_walk(opts, None, cancel, |_| {})
}

/// [`precompute_size`] of [`pack_selected`]'s stream: only the members named in `only`
/// (`None`: all of them) are counted, and the walk goes only where they lead.
pub fn precompute_size_selected(
    opts: &PackOptions,
    only: Option<&HashSet<String>>,
    cancel: &AtomicBool,
) -> Result<u64> {
    size_walk(opts, only, cancel, |_| {})
}

/// [`precompute_size`], calling `counted` with the number of members counted so far after
/// each one.
fn size_walk(
    opts: &PackOptions,
    only: Option<&HashSet<String>>,
    cancel: &AtomicBool,
    mut counted: impl FnMut(u64),
) -> Result<u64> {
    let plan = Plan::new(opts)?;
    let mut total = END_OF_ARCHIVE.len() as u64;
    let mut members = 0;
    let prefix = plan.prefix.len();
    let within = only.map(selection::within_of);
    let walk = Walk { within: within.as_ref(), ..plan.walk(opts, &[], cancel) };
    walk.run(|entry| {
        if only.is_some_and(|only| !only.contains(entry.member)) {
            return Ok(());
        }
        total += entry_size(entry, prefix);
        members += 1;
        counted(members);
        Ok(())
    })?;
    Ok(total)
}

/// Packs into the file `path`: writes a temporary file beside it and renames it into place
/// only on success, so `path` is either untouched or complete. On failure (cancellation
/// included) the temporary file is removed. Like GNU tar, the archive never contains
/// itself when `path` lies inside `opts.root`.
pub fn pack_to_file(
    opts: &PackOptions,
    path: &Path,
    progress: impl FnMut(u64),
    cancel: &AtomicBool,
) -> Result<PackSummary> {
    let temp = TempFile::create_beside(path)?;
    let file_meta = temp.file.metadata().map_err(|e| Error::io(e, "fstat", &temp.path))?;
    let mut skip = vec![(file_meta.dev(), file_meta.ino())];
    if let Ok(existing) = fs::metadata(path) {
        skip.push((existing.dev(), existing.ino()));
    }
    let file = temp.file.try_clone().map_err(|e| Error::io(e, "open", &temp.path))?;
    let (summary, _) = pack_to(opts, file, progress, cancel, &skip, Some(&temp.path), Selection::ALL)?;
    temp.persist(path)?;
    Ok(summary)
}

/// The bytes one member takes in the stream: header, long-name entries, padded data.
/// `prefix` is the length of the member name prefix.
fn entry_size(entry: &WalkEntry<'_>, prefix: usize) -> u64 {
    let name_len = prefix + entry.member.len() + usize::from(entry.kind == EntryKind::Directory);
    let extra = match &entry.kind {
        EntryKind::File { size } => padded(*size),
        EntryKind::Symlink { target } => long_entry_cost(target.len()),
        _ => 0,
    };
    BLOCK as u64 + long_entry_cost(name_len) + extra
}

/// The walk settings derived from the options.
struct Plan {
    excludes: TarExcludeSet,
    top_level: Vec<String>,
    /// What member names start with (`./` or nothing).
    prefix: &'static str,
}

impl Plan {
    fn new(opts: &PackOptions) -> Result<Plan> {
        let mut excludes = TarExcludeSet::new(&[APPLE_DOUBLE_EXCLUDE]);
        for pattern in &opts.exclude {
            excludes.push(pattern);
        }
        let top_level = match &opts.top_level_order {
            Some(names) => {
                walk::check_top_level(names)?;
                names.clone()
            }
            None => crate::walk::sorted_names(&opts.root)?,
        };
        let prefix = if opts.dot_members { DOT_PREFIX } else { "" };
        // `tar -cf - .` with an exclude that matches `.` archives nothing.
        let top_level = if opts.dot_members && excludes.excludes(".") { Vec::new() } else { top_level };
        Ok(Plan { excludes, top_level, prefix })
    }

    fn walk<'a>(&'a self, opts: &'a PackOptions, skip: &'a [(u64, u64)], cancel: &'a AtomicBool) -> Walk<'a> {
        Walk {
            root: &opts.root,
            excludes: &self.excludes,
            follow_symlinks: opts.follow_symlinks,
            top_level: &self.top_level,
            exclude_prefix: self.prefix,
            skip,
            within: None,
            cancel,
        }
    }
}

/// Writes the whole archive to `writer`.
fn pack_to<W: Write>(
    opts: &PackOptions,
    writer: W,
    progress: impl FnMut(u64),
    cancel: &AtomicBool,
    skip: &[(u64, u64)],
    target: Option<&Path>,
    selection: Selection<'_>,
) -> Result<(PackSummary, W)> {
    let sink = Sink::new(writer, opts.gzip)?;
    let plan = Plan::new(opts)?;
    let mut tar = TarOut::new(sink, progress, cancel, target, plan.prefix);
    let entries = read_ahead(&plan, opts, skip, cancel, selection, |member, content| tar.member(member, content))?;
    let (tar_bytes, writer) = tar.finish()?;
    Ok((PackSummary { entries, tar_bytes }, writer))
}
