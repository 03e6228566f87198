//! The three-way restore merge (upstream `mergeDirectoryWithBaseline`; docs/merge.md).
//!
//! Given the host's `baseline` snapshot (taken before the remote run), the remote result
//! `source` and the host tree as it is now (`current`, captured here, inside the caller's
//! lock), the merge
//!
//! 1. deletes the files and symlinks the remote deleted, but only where the host still
//!    holds the baseline's version (a local edit survives);
//! 2. removes the directories the remote deleted, non-recursively (a directory that still
//!    holds anything survives), longest path first;
//! 3. applies every source entry that differs from the baseline: directories first (parents
//!    before children), then files and symlinks in parallel. The remote wins for every path
//!    it changed.
//!
//! Upstream applies step 3 one entry at a time in `localeCompare` order. Directories first,
//! then leaves in any order, gives the same tree: a leaf only touches its own name and
//! (through `mkdir -p`) ancestors that are source directories, which step 3 handles before
//! any leaf. Only which of several failures is reported can differ.
//!
//! Every mutation goes through directory descriptors opened one component at a time with
//! `O_NOFOLLOW` from the (canonical) target: nothing is ever written, deleted or linked
//! through a symlinked ancestor of the target. Where upstream would do that, the merge is
//! refused before anything changes ([`codes::SYMLINKED_ANCESTOR`]), and a symlink planted
//! during the merge fails the operation that meets it. Files are copied to a staged copy
//! (reflinked where the file system can) in the merge's staging directory at the target's
//! root (beside the file when its directory is on another file system), given their mode,
//! then renamed over the target, so a failed copy never destroys the host's version. The
//! staging directory holds the merge's journal while it applies: a merge killed meanwhile
//! is reported to the next operation on the target ([`crate::staging`]).

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::error::{codes, Error, Result};
use crate::fsat::{self, Dir};
use crate::remote_start::RemoteStart;
use crate::reserved::OnReserved;
use crate::snapshot::{self, CaptureOptions, Entry, Hash, Snapshot};

mod judged;
use crate::walk::{join_like_node, ReaddirErrors};
pub use judged::{Kept, KeptReason};

/// The code of a merge refused by `conflictPolicy: "reject"` (upstream vNext's code).
pub const CONFLICT_CODE: &str = "DIRECTORY_MERGE_CONFLICT";

/// The message of a refused conflicting merge (upstream vNext's message).
pub const CONFLICT_MESSAGE: &str = "Directory contents changed concurrently";

/// Prefix of the staged copies the merge renames into place (and of the staging directory
/// at the target's root that holds them and the merge's journal).
pub const STAGING_PREFIX: &str = crate::reserved::MERGE_PREFIX;

/// One entry of the caller's baseline snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BaselineEntry {
    Dir,
    File {
        mode: u32,
        hash: Hash,
    },
    Symlink {
        target: String,
    },
    /// A non-directory entry that no file system entry can equal (a malformed entry in a
    /// caller-built snapshot: unknown kind, mode out of range, hash not lowercase hex).
    /// Upstream's `entriesMatch` is false for it, so it is never deleted and never
    /// counts as unchanged.
    Unmatchable,
}

/// The baseline: `(relative path, entry)` in the snapshot's order. Paths no tree walk
/// can produce (empty, absolute, with an empty, `.` or `..` segment) are dropped by
/// [`Baseline::new`]: they can never equal a source or current path, and acting on them
/// could leave the target.
#[derive(Debug, Default)]
pub struct Baseline {
    entries: Vec<(String, BaselineEntry)>,
}

impl Baseline {
    /// A baseline from `(path, entry)` pairs; a repeated path keeps its first entry.
    pub fn new(entries: impl IntoIterator<Item = (String, BaselineEntry)>) -> Baseline {
        let mut entries: Vec<(String, BaselineEntry)> =
            entries.into_iter().filter(|(rel, _)| is_walk_path(rel)).collect();
        // Repeats found over borrowed paths (no copy of each path), removed afterwards.
        let mut seen: HashSet<&str> = HashSet::with_capacity(entries.len());
        let first: Vec<bool> = entries.iter().map(|(rel, _)| seen.insert(rel.as_str())).collect();
        drop(seen);
        if first.contains(&false) {
            let mut keep = first.into_iter();
            entries.retain(|_| keep.next().unwrap_or(false));
        }
        Baseline { entries }
    }

    /// The number of usable entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there are no usable entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// True for a relative POSIX path a walk can produce: non-empty segments, none `.`/`..`.
pub fn is_walk_path(rel: &str) -> bool {
    !rel.is_empty() && !rel.contains('\0') && rel.split('/').all(|seg| !seg.is_empty() && seg != "." && seg != "..")
}

/// Upstream `entriesMatch(baseline, entry)`: false when either side is missing.
fn matches(base: Option<&BaselineEntry>, entry: Option<&Entry>) -> bool {
    match (base, entry) {
        (Some(BaselineEntry::Dir), Some(Entry::Dir)) => true,
        (Some(BaselineEntry::File { mode: bm, hash: bh }), Some(Entry::File { mode, hash })) => {
            bm == mode && bh == hash
        }
        (Some(BaselineEntry::Symlink { target: bt }), Some(Entry::Symlink { target })) => bt == target,
        _ => false,
    }
}

/// True when a side still holds the baseline's state at a path (both absent included).
fn unchanged(base: Option<&BaselineEntry>, entry: Option<&Entry>) -> bool {
    (base.is_none() && entry.is_none()) || matches(base, entry)
}

/// A snapshot's entries by relative path.
struct Indexed<'a> {
    snapshot: &'a Snapshot,
    by_rel: HashMap<&'a str, usize>,
}

impl<'a> Indexed<'a> {
    fn new(snapshot: &'a Snapshot) -> Self {
        let mut by_rel = HashMap::with_capacity(snapshot.tree.nodes.len());
        by_rel.extend(
            snapshot
                .tree
                .nodes
                .iter()
                .enumerate()
                .filter(|(i, _)| snapshot.entries[*i].is_some())
                .map(|(i, node)| (node.rel.as_str(), i)),
        );
        Indexed { snapshot, by_rel }
    }

    /// The walked node at `rel` (an entry's).
    fn node(&self, rel: &str) -> Option<&'a crate::walk::Node> {
        self.by_rel.get(rel).map(|i| &self.snapshot.tree.nodes[*i])
    }

    fn get(&self, rel: &str) -> Option<&'a Entry> {
        self.by_rel.get(rel).and_then(|i| self.snapshot.entries[*i].as_ref())
    }

    /// Every entry below `rel` (which must be a directory node), depth-first.
    fn descendants(&self, rel: &str, out: &mut Vec<&'a str>) {
        let Some(&index) = self.by_rel.get(rel) else { return };
        let mut stack = vec![index as u32];
        while let Some(i) = stack.pop() {
            let (start, end) = self.snapshot.tree.children[i as usize];
            for child in start..end {
                if self.snapshot.entries[child as usize].is_some() {
                    out.push(&self.snapshot.tree.nodes[child as usize].rel);
                    stack.push(child);
                }
            }
        }
    }

    /// Entries in walk order (not sorted).
    fn iter(&self) -> impl Iterator<Item = (&'a str, &'a Entry)> + '_ {
        let snapshot = self.snapshot;
        snapshot
            .tree
            .nodes
            .iter()
            .zip(&snapshot.entries)
            .filter_map(|(node, entry)| entry.as_ref().map(|e| (node.rel.as_str(), e)))
    }
}

/// What the merge will do, computed from the three snapshots before any change.
#[derive(Default)]
struct Plan<'a> {
    delete_leaves: Vec<&'a str>,
    delete_dirs: Vec<&'a str>,
    apply_dirs: Vec<&'a str>,
    /// Files and symlinks to write, each with the mode a file gets (the source's, but for a
    /// lane's restore that keeps the host's, see [`judged`]).
    apply_leaves: Vec<(&'a str, &'a Entry, u32)>,
    /// Host files whose mode alone changes (a lane's restore only).
    chmods: Vec<(&'a str, u32)>,
    /// What a lane's restore left as the host holds it although it looked changed.
    kept: Vec<Kept>,
}

/// Longest first by UTF-16 length, as upstream's stable sort (ties keep the order given).
fn by_length_desc<'a>(list: &mut Vec<&'a str>) {
    let mut keyed: Vec<(usize, &'a str)> = list.iter().map(|rel| (rel.encode_utf16().count(), *rel)).collect();
    keyed.sort_by_key(|k| std::cmp::Reverse(k.0));
    *list = keyed.into_iter().map(|(_, rel)| rel).collect();
}

fn plan<'a>(
    baseline: &'a Baseline,
    base: &HashMap<&'a str, &'a BaselineEntry>,
    source: &Indexed<'a>,
    current: &Indexed<'a>,
) -> Plan<'a> {
    let mut delete_leaves = Vec::new();
    let mut delete_dirs = Vec::new();
    for (rel, entry) in &baseline.entries {
        if source.get(rel).is_some() {
            continue;
        }
        if *entry == BaselineEntry::Dir {
            delete_dirs.push(rel.as_str());
        } else if matches(Some(entry), current.get(rel)) {
            delete_leaves.push(rel.as_str());
        }
    }
    by_length_desc(&mut delete_leaves);
    by_length_desc(&mut delete_dirs);
    let mut apply_dirs = Vec::new();
    let mut apply_leaves = Vec::new();
    for (rel, entry) in source.iter() {
        if matches(base.get(rel).copied(), Some(entry)) {
            continue;
        }
        match entry {
            Entry::Dir => apply_dirs.push(rel),
            Entry::File { mode, .. } => apply_leaves.push((rel, entry, *mode)),
            Entry::Symlink { .. } => apply_leaves.push((rel, entry, 0)),
        }
    }
    // Byte order puts every directory after its ancestors.
    apply_dirs.sort_unstable();
    apply_leaves.sort_unstable_by(|a, b| a.0.cmp(b.0));
    Plan { delete_leaves, delete_dirs, apply_dirs, apply_leaves, ..Plan::default() }
}

/// The paths `conflictPolicy: "reject"` refuses, sorted: a path the remote changed (its
/// source entry differs from the baseline) that the host changed too (its current state
/// differs from the baseline, a host deletion or creation included), unless both sides
/// made the same change; and, where a remote file or symlink replaces a host directory,
/// every entry below it that the host added or changed (the replacement would delete it).
/// A remote deletion never conflicts: the merge keeps a host-edited file.
fn conflicts<'a>(plan: &Plan<'a>, base: &HashMap<&'a str, &'a BaselineEntry>, current: &Indexed<'a>) -> Vec<String> {
    let mut out = Vec::new();
    let mut below = Vec::new();
    let dir = Entry::Dir;
    let changed = plan
        .apply_dirs
        .iter()
        .map(|rel| (*rel, &dir))
        .chain(plan.apply_leaves.iter().map(|(rel, entry, _)| (*rel, *entry)));
    for (rel, entry) in changed {
        let host = current.get(rel);
        if !unchanged(base.get(rel).copied(), host) && host != Some(entry) {
            out.push(rel.to_string());
        }
        if *entry != Entry::Dir && host == Some(&Entry::Dir) {
            below.clear();
            current.descendants(rel, &mut below);
            out.extend(
                below.iter().filter(|d| !unchanged(base.get(**d).copied(), current.get(d))).map(|d| d.to_string()),
            );
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The symlinked ancestors upstream would write through: a proper ancestor of an applied
/// entry that is a symlink to a directory on the host and that the merge does not itself
/// replace by a directory (it is only replaced when the remote changed it). A link to
/// anything else makes upstream's `mkdir -p` fail, and the apply fails the same way.
fn symlinked_ancestors<'a>(plan: &Plan<'a>, current: &Indexed<'a>, leads_to_dir: impl Fn(&str) -> bool) -> Vec<String> {
    let replaced: HashSet<&str> = plan.apply_dirs.iter().copied().collect();
    let mut out = HashSet::new();
    let rels = plan
        .apply_dirs
        .iter()
        .copied()
        .chain(plan.apply_leaves.iter().map(|(rel, ..)| *rel))
        .chain(plan.chmods.iter().map(|(rel, _)| *rel));
    for rel in rels {
        for (i, _) in rel.match_indices('/') {
            let ancestor = &rel[..i];
            if matches!(current.get(ancestor), Some(Entry::Symlink { .. }))
                && !replaced.contains(ancestor)
                && !out.contains(ancestor)
                && leads_to_dir(ancestor)
            {
                out.insert(ancestor.to_string());
            }
        }
    }
    let mut out: Vec<String> = out.into_iter().collect();
    out.sort_unstable();
    out
}

/// What [`merge`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergeStats {
    /// Files and symlinks deleted because the remote deleted them.
    pub deleted: usize,
    /// Directories removed because the remote deleted them (and they were empty).
    pub removed_dirs: usize,
    /// Source entries written (directories created, files copied, symlinks created).
    pub applied: usize,
    /// Host files given the source's mode alone (a lane's restore).
    pub chmodded: usize,
    /// What a lane's restore left as the host holds it, and why (see [`judged`]); sorted.
    pub kept: Vec<Kept>,
    /// Names of entries at the target's root that carry one of our staging names but that
    /// this host cannot prove it created ([`crate::staging::Swept::foreign`]): left alone,
    /// for the caller to report.
    pub foreign_staging: Vec<String>,
    /// A lane's restore: what the host now holds where the merge changed it (`None`: the
    /// merge removed the path), sorted by path. A later restore of the same run judges the
    /// host against its baseline with these in place, so what this restore wrote does not
    /// read as a host edit made during the run.
    pub advanced: Vec<(String, Option<BaselineEntry>)>,
}

/// A merge refused before any change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// [`CONFLICT_CODE`] or [`codes::SYMLINKED_ANCESTOR`].
    pub code: &'static str,
    pub message: String,
    /// The conflicting paths, or the symlinked ancestors, relative to the target.
    pub paths: Vec<String>,
}

/// The result of [`merge`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Merged(MergeStats),
    Refused(Refusal),
    /// Some changed entries could not be applied (the others were): each failing path
    /// with its Node-shaped error. The caller reports the one upstream would have met
    /// first (the least path in `localeCompare` order).
    Failed {
        stats: MergeStats,
        failures: Vec<(String, Error)>,
    },
}

/// Options of [`merge`].
pub struct MergeOptions<'a> {
    /// The directory the source snapshot was captured from.
    pub source_root: &'a Path,
    pub source: &'a Snapshot,
    /// The canonical target (the caller's lock protects it).
    pub target: &'a Path,
    pub baseline: &'a Baseline,
    /// The baseline's exclude list (the current tree is captured with it).
    pub exclude: &'a [String],
    /// Refuse with [`CONFLICT_CODE`] when a path changed on both sides.
    pub reject_conflicts: bool,
    /// A lane's restore: what the prepare gave the remote. With it the merge changes on the
    /// host only what the agent changed and the host did not ([`judged`]); without it, it is
    /// upstream's merge.
    pub start: Option<&'a RemoteStart>,
    pub threads: usize,
    pub cancel: &'a AtomicBool,
}

/// Upstream's merge steps inside the lock, after `beforeApply`: captures the current tree,
/// plans, checks the refusals, then deletes and applies (see the module docs). Entries that
/// fail to apply are returned in [`Outcome::Failed`]; deletion failures are ignored, as
/// upstream ignores them; a failing capture is an `Err`.
pub fn merge(opts: &MergeOptions<'_>) -> Result<Outcome> {
    // The host tree is walked in full, as upstream walks it (same visibility: excluded
    // paths, symlinks not descended, unreadable directories empty; same failures: lstat,
    // readlink and open errors). Without the conflict check only the files the remote
    // deleted need their content: the others are opened but not read.
    let source = Indexed::new(opts.source);
    let source_root = Dir::open(opts.source_root).map_err(|e| Error::io(e, "open", opts.source_root))?;
    let sources = Sources { root: source_root, path: opts.source_root };
    let mut base: HashMap<&str, &BaselineEntry> = HashMap::with_capacity(opts.baseline.entries.len());
    base.extend(opts.baseline.entries.iter().map(|(rel, e)| (rel.as_str(), e)));
    // A lane's restore judges the source against what the remote started with first (which
    // reads the source's changed files a checkout made); the host's content is then needed
    // only where the agent changed something.
    let judged = match opts.start {
        Some(start) => Some(judged::prejudge(opts.baseline, &base, &source, start, &sources)?),
        None => None,
    };
    let hash_set: HashSet<&str> = match &judged {
        Some(judged) => judged.host_reads(opts.baseline, &base),
        None => opts
            .baseline
            .entries
            .iter()
            .filter(|(rel, entry)| *entry != BaselineEntry::Dir && source.get(rel).is_none())
            .map(|(rel, _)| rel.as_str())
            .collect(),
    };
    let hash_only = |rel: &str| hash_set.contains(rel);
    // What a killed extraction or merge left in the target is cleaned up first; an
    // interrupted merge is reported (`ERR_PAPERCLIP_NATIVE_INTERRUPTED_RESTORE`).
    let mut foreign_staging = Vec::new();
    if let Ok(root) = Dir::open_nofollow(opts.target) {
        let swept = crate::staging::sweep(&root, opts.target, false)?;
        foreign_staging.extend(swept.foreign.iter().map(|name| name.to_string_lossy().into_owned()));
    }
    let current_snapshot = snapshot::capture(&CaptureOptions {
        root: opts.target,
        exclude: opts.exclude,
        threads: opts.threads,
        previous: None,
        hash_only: if opts.reject_conflicts { None } else { Some(&hash_only) },
        readdir_errors: ReaddirErrors::TreatAsEmpty,
        on_reserved: OnReserved::Skip,
        cancel: opts.cancel,
    })?;
    let current = Indexed::new(&current_snapshot);
    let plan = match (&judged, opts.start) {
        (Some(judged), Some(start)) => judged::plan(judged, &base, &source, &current, start),
        _ => plan(opts.baseline, &base, &source, &current),
    };

    if opts.reject_conflicts {
        let paths = conflicts(&plan, &base, &current);
        if !paths.is_empty() {
            return Ok(Outcome::Refused(Refusal { code: CONFLICT_CODE, message: CONFLICT_MESSAGE.to_string(), paths }));
        }
    }
    let root = Dir::open_nofollow(opts.target).map_err(|e| Error::io(e, "open", opts.target))?;
    let leads_to_dir = |rel: &str| root.stat_following(OsStr::new(rel)).is_ok_and(|st| is_dir(&st));
    let paths = symlinked_ancestors(&plan, &current, leads_to_dir);
    if !paths.is_empty() {
        let message = format!(
            "{}: refusing to write through symlinked directories of the merge target '{}': {}",
            codes::SYMLINKED_ANCESTOR,
            opts.target.display(),
            paths.join(", ")
        );
        return Ok(Outcome::Refused(Refusal { code: codes::SYMLINKED_ANCESTOR, message, paths }));
    }

    // Before the first change: a staging directory at the target's root for the staged
    // copies, with the journal that marks the apply as under way (a killed merge leaves it
    // and the next operation on the target reports it). Removed when this returns. A root
    // that cannot take it (read-only, while the directories below are not) gets none: the
    // copies are then staged beside their files, as they are across file systems.
    let staging = crate::staging::Staging::create(&root, crate::reserved::Kind::Merge)
        .and_then(|staging| staging.journal(b"merge\n").map(|()| staging))
        .ok();
    let staging_dev = staging.as_ref().and_then(|staging| staging.dir.metadata().ok()).map(|meta| meta.dev());
    let target = Targets { root, path: opts.target, keep_full_dirs: opts.start.is_some() };
    let mut stats = MergeStats { foreign_staging, kept: plan.kept.clone(), ..MergeStats::default() };

    // 1. Files and symlinks the remote deleted and the host did not touch (errors ignored).
    let groups = group_by_parent(plan.delete_leaves.iter().map(|rel| (*rel, ())));
    stats.deleted = parallel(&groups, opts.threads, opts.cancel, |parent, items| {
        let Ok(dir) = target.open(parent, false) else { return Ok(0) };
        Ok(items.iter().filter(|(name, _)| dir.remove_tree(OsStr::new(name)).is_ok()).count())
    })?;

    // 2. Directories the remote deleted, non-recursively, longest first (errors ignored).
    for rel in &plan.delete_dirs {
        check_cancel(opts.cancel)?;
        let (parent, name) = split_parent(rel);
        if let Ok(dir) = target.open(parent, false) {
            stats.removed_dirs += usize::from(dir.rmdir(OsStr::new(name)).is_ok());
        }
    }

    // 3. Changed entries. A failing entry does not stop the others (upstream stops at its
    //    first failure in `localeCompare` order; the caller reports the failure that comes
    //    first in that order, which is the one upstream reports: an entry's failure does
    //    not depend on entries after it, whose paths never lie above it).
    let failures: Mutex<Vec<(String, Error)>> = Mutex::new(Vec::new());
    let kept: Mutex<Vec<Kept>> = Mutex::new(Vec::new());
    let fail = |parent: &str, name: &str, err: Error| {
        if err.code == KEPT_NOT_EMPTY {
            if let Ok(mut list) = kept.lock() {
                list.push(Kept { path: join_rel(parent, name), reason: KeptReason::NotEmpty });
            }
        } else if let Ok(mut list) = failures.lock() {
            list.push((join_rel(parent, name), err));
        }
    };
    // 3a. Directories, parents first.
    for rel in &plan.apply_dirs {
        check_cancel(opts.cancel)?;
        match target.apply_dir(rel) {
            Ok(()) => stats.applied += 1,
            Err(err) => fail("", rel, err),
        }
    }
    // 3b. Files and symlinks, one parent directory per task.
    let groups = group_by_parent(plan.apply_leaves.iter().map(|(rel, entry, mode)| (*rel, (*entry, *mode))));
    stats.applied += parallel(&groups, opts.threads, opts.cancel, |parent, items| {
        let dir = match target.open(parent, true) {
            Ok(dir) => dir,
            Err(err) => {
                items.iter().for_each(|(name, _)| fail(parent, name, err.clone()));
                return Ok(0);
            }
        };
        // Staged at the root when on the same file system (a rename across directories),
        // else beside the target.
        let stage = match (&staging, staging_dev) {
            (Some(staging), Some(dev)) if dir.metadata().is_ok_and(|meta| meta.dev() == dev) => &staging.dir,
            _ => &dir,
        };
        let mut source_dir = None;
        let mut applied = 0;
        for (name, (entry, mode)) in items {
            check_cancel(opts.cancel)?;
            let result = match entry {
                Entry::Symlink { target: link } => target.apply_symlink(&dir, parent, name, link),
                Entry::File { .. } => {
                    if source_dir.is_none() {
                        source_dir = Some(sources.open(parent));
                    }
                    match source_dir.as_ref().expect("opened above") {
                        Ok(from) => target.apply_file(from, &sources, stage, &dir, parent, name, *mode),
                        Err(err) => Err(err.clone()),
                    }
                }
                Entry::Dir => unreachable!("directories are applied in step 3a"),
            };
            match result {
                Ok(()) => applied += 1,
                Err(err) => fail(parent, name, err),
            }
        }
        Ok(applied)
    })?;
    // 3c. Modes alone (a lane's restore: the agent changed a file's mode, not its bytes).
    for (rel, mode) in &plan.chmods {
        check_cancel(opts.cancel)?;
        let (parent, name) = split_parent(rel);
        match target.open(parent, false).and_then(|dir| target.apply_mode(&dir, parent, name, *mode)) {
            Ok(()) => stats.chmodded += 1,
            Err(err) => fail(parent, name, err),
        }
    }
    let failures = failures.into_inner().unwrap_or_default();
    let kept = kept.into_inner().unwrap_or_default();
    if !kept.is_empty() {
        stats.kept.extend(kept);
        stats.kept.sort();
        stats.kept.dedup_by(|a, b| a.path == b.path);
    }
    if opts.start.is_some() && failures.is_empty() {
        stats.advanced = advanced(&plan, &base, &stats.kept);
    }
    if !failures.is_empty() {
        return Ok(Outcome::Failed { stats, failures });
    }
    Ok(Outcome::Merged(stats))
}

/// What the host holds after a lane's merge carried out `plan` where it changed something
/// (see [`MergeStats::advanced`]): the paths it kept are left out (the host holds its own
/// there, which the baseline still describes).
fn advanced(
    plan: &Plan<'_>,
    base: &HashMap<&str, &BaselineEntry>,
    kept: &[Kept],
) -> Vec<(String, Option<BaselineEntry>)> {
    let kept: HashSet<&str> = kept.iter().map(|k| k.path.as_str()).collect();
    let mut out: Vec<(String, Option<BaselineEntry>)> = Vec::new();
    for rel in plan.delete_leaves.iter().chain(&plan.delete_dirs) {
        out.push((rel.to_string(), None));
    }
    out.extend(plan.apply_dirs.iter().map(|rel| (rel.to_string(), Some(BaselineEntry::Dir))));
    for (rel, entry, mode) in &plan.apply_leaves {
        let now = match entry {
            Entry::File { hash, .. } => BaselineEntry::File { mode: *mode, hash: *hash },
            Entry::Symlink { target } => BaselineEntry::Symlink { target: target.clone() },
            Entry::Dir => BaselineEntry::Dir,
        };
        out.push((rel.to_string(), Some(now)));
    }
    for (rel, mode) in &plan.chmods {
        if let Some(BaselineEntry::File { hash, .. }) = base.get(rel) {
            out.push((rel.to_string(), Some(BaselineEntry::File { mode: *mode, hash: *hash })));
        }
    }
    out.retain(|(rel, _)| !kept.contains(rel.as_str()));
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

fn check_cancel(cancel: &AtomicBool) -> Result<()> {
    if cancel.load(Ordering::Relaxed) {
        Err(Error::aborted())
    } else {
        Ok(())
    }
}

/// `("a/b", "c")` for `"a/b/c"`, `("", "c")` for `"c"`.
fn split_parent(rel: &str) -> (&str, &str) {
    rel.rsplit_once('/').unwrap_or(("", rel))
}

type Group<'a, T> = (&'a str, Vec<(&'a str, T)>);

/// Items grouped by parent directory (in first-seen order), each item as `(name, value)`.
fn group_by_parent<'a, T>(items: impl Iterator<Item = (&'a str, T)>) -> Vec<Group<'a, T>> {
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut groups: Vec<Group<'a, T>> = Vec::new();
    for (rel, value) in items {
        let (parent, name) = split_parent(rel);
        let slot = *index.entry(parent).or_insert_with(|| {
            groups.push((parent, Vec::new()));
            groups.len() - 1
        });
        groups[slot].1.push((name, value));
    }
    groups
}

/// Runs `work` over the groups on up to `threads` workers; the first error stops the
/// others (they finish the group in hand) and is returned. Sums what `work` returns.
fn parallel<T: Sync>(
    groups: &[Group<'_, T>],
    threads: usize,
    cancel: &AtomicBool,
    work: impl Fn(&str, &[(&str, T)]) -> Result<usize> + Sync,
) -> Result<usize> {
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let failure: Mutex<Option<Error>> = Mutex::new(None);
    let workers = threads.max(1).min(groups.len());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                if failed.load(Ordering::Relaxed) || cancel.load(Ordering::Relaxed) {
                    break;
                }
                let Some((parent, items)) = groups.get(next.fetch_add(1, Ordering::Relaxed)) else { break };
                match work(parent, items) {
                    Ok(n) => {
                        done.fetch_add(n, Ordering::Relaxed);
                    }
                    Err(err) => {
                        failed.store(true, Ordering::Relaxed);
                        if let Ok(mut slot) = failure.lock() {
                            slot.get_or_insert(err);
                        }
                        break;
                    }
                }
            });
        }
    });
    if let Some(err) = failure.into_inner().ok().flatten() {
        return Err(err);
    }
    check_cancel(cancel)?;
    Ok(done.into_inner())
}

fn is_dir(st: &fsat::RawStat) -> bool {
    st.0.st_mode & libc::S_IFMT == libc::S_IFDIR
}

fn symlinked_ancestor_error(path: std::path::PathBuf) -> Error {
    let mut e = Error::new(
        codes::SYMLINKED_ANCESTOR,
        format!(
            "{}: refusing to write through the symlinked directory '{}'",
            codes::SYMLINKED_ANCESTOR,
            path.display()
        ),
    );
    e.path = Some(path);
    e
}

/// Opens `rel` below `root` one component at a time, never following a symlink.
///
/// With `create` this is `mkdir -p` of `requested` (which is `rel` or a path below it)
/// as far as `rel`: missing components are made (mode 0777 before the umask); a symlink
/// to a directory is refused with [`codes::SYMLINKED_ANCESTOR`]; any other component that
/// is not a directory fails with the code Node's recursive `mkdir` gives for `requested`
/// (`EEXIST` when it is `requested` itself, `ENOENT` for a dangling link there, `ENOTDIR`
/// for an ancestor). Without `create`, any failure is returned as it is.
fn open_below(root: &Dir, root_path: &Path, rel: &str, create: bool, requested: &str) -> Result<Dir> {
    let mut dir = root.try_clone().map_err(|e| Error::io(e, "open", root_path))?;
    if rel.is_empty() {
        return Ok(dir);
    }
    let syscall = if create { "mkdir" } else { "open" };
    let fail =
        |errno: i32| Error::io(io::Error::from_raw_os_error(errno), syscall, &join_like_node(root_path, requested));
    let mut walked = 0;
    for name in rel.split('/') {
        walked += name.len() + usize::from(walked > 0);
        let name = OsStr::new(name);
        let opened = match dir.open_dir_nofollow(name) {
            Err(err) if create && err.raw_os_error() == Some(libc::ENOENT) => match dir.mkdir(name, 0o777) {
                Ok(()) => dir.open_dir_nofollow(name),
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => dir.open_dir_nofollow(name),
                Err(e) => return Err(Error::io(e, "mkdir", &join_like_node(root_path, requested))),
            },
            other => other,
        };
        dir = match opened {
            Ok(child) => child,
            Err(err) if create && matches!(err.raw_os_error(), Some(libc::ELOOP) | Some(libc::ENOTDIR)) => {
                let last = walked == requested.len();
                let is_link = dir.lstat(name).is_ok_and(|st| st.0.st_mode & libc::S_IFMT == libc::S_IFLNK);
                if !is_link {
                    return Err(fail(if last { libc::EEXIST } else { libc::ENOTDIR }));
                }
                return Err(match dir.stat_following(name) {
                    Ok(st) if is_dir(&st) => symlinked_ancestor_error(join_like_node(root_path, &rel[..walked])),
                    Ok(_) => fail(if last { libc::EEXIST } else { libc::ENOTDIR }),
                    Err(_) => fail(if last { libc::ENOENT } else { libc::ENOTDIR }),
                });
            }
            Err(err) => return Err(Error::io(err, syscall, &join_like_node(root_path, requested))),
        };
    }
    Ok(dir)
}

/// The source tree, read without following symlinks below its root.
struct Sources<'a> {
    root: Dir,
    path: &'a Path,
}

impl Sources<'_> {
    fn open(&self, rel: &str) -> Result<Dir> {
        open_below(&self.root, self.path, rel, false, rel)
    }
}

/// The marker of a file or link a lane's restore did not place over a directory that is not
/// empty (reported as kept, never a failure).
const KEPT_NOT_EMPTY: &str = "KEPT_NOT_EMPTY";

/// The target tree; every mutation is relative to a descriptor of its parent directory.
struct Targets<'a> {
    root: Dir,
    path: &'a Path,
    /// A lane's restore: a directory in the way of a file or link goes only when empty.
    keep_full_dirs: bool,
}

impl Targets<'_> {
    fn open(&self, rel: &str, create: bool) -> Result<Dir> {
        open_below(&self.root, self.path, rel, create, rel)
    }

    fn full(&self, parent: &str, name: &str) -> std::path::PathBuf {
        join_like_node(self.path, &if parent.is_empty() { name.to_string() } else { format!("{parent}/{name}") })
    }

    /// Upstream's directory step: an existing directory is kept; anything else there is
    /// removed; then `mkdir -p`.
    fn apply_dir(&self, rel: &str) -> Result<()> {
        let (parent, name) = split_parent(rel);
        let dir = open_below(&self.root, self.path, parent, true, rel)?;
        let name = OsStr::new(name);
        match dir.lstat(name) {
            Ok(st) if st.0.st_mode & libc::S_IFMT == libc::S_IFDIR => return Ok(()),
            Ok(_) => {
                let _ = dir.remove_tree(name);
            }
            Err(_) => {}
        }
        match dir.mkdir(name, 0o777) {
            Ok(()) => Ok(()),
            Err(e)
                if e.raw_os_error() == Some(libc::EEXIST)
                    && dir.lstat(name).is_ok_and(|st| st.0.st_mode & libc::S_IFMT == libc::S_IFDIR) =>
            {
                Ok(())
            }
            Err(e) => Err(Error::io(e, "mkdir", &join_like_node(self.path, rel))),
        }
    }

    /// A host file's new mode: only a regular file gets it (never a link's target).
    fn apply_mode(&self, dir: &Dir, parent: &str, name: &str, mode: u32) -> Result<()> {
        let full = || self.full(parent, name);
        let os_name = OsStr::new(name);
        let regular = |st: &fsat::RawStat| st.0.st_mode & libc::S_IFMT == libc::S_IFREG;
        match dir.open_file_nofollow(os_name) {
            Ok(file) => fsat::fchmod(&file, mode).map_err(|e| Error::io(e, "chmod", &full())),
            // A file nobody may read (mode 000, not root): its mode set by name, once `lstat`
            // says it is a regular file.
            Err(e) if e.raw_os_error() == Some(libc::EACCES) => match dir.lstat(os_name) {
                Ok(st) if regular(&st) => dir.chmod_at(os_name, mode).map_err(|e| Error::io(e, "chmod", &full())),
                _ => Err(Error::io(e, "chmod", &full())),
            },
            Err(e) => Err(Error::io(e, "chmod", &full())),
        }
    }

    /// Makes room for a file or link at `name` where a directory is: upstream removes the
    /// whole tree; a lane's restore only an empty directory (what it deleted before emptied
    /// it), else [`KEPT_NOT_EMPTY`]: what the capture did not see (an excluded subtree) or
    /// what came since stays.
    fn clear_dir(&self, dir: &Dir, name: &OsStr) -> Result<()> {
        if !self.keep_full_dirs {
            let _ = dir.remove_tree(name);
            return Ok(());
        }
        match dir.rmdir(name) {
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTEMPTY) | Some(libc::EEXIST)) => {
                Err(Error::new(KEPT_NOT_EMPTY, "the directory is not empty"))
            }
            _ => Ok(()),
        }
    }

    /// Upstream's symlink step: remove whatever is there, then link the raw target.
    fn apply_symlink(&self, dir: &Dir, parent: &str, name: &str, link: &str) -> Result<()> {
        let name = OsStr::new(name);
        match dir.lstat(name) {
            Ok(st) if st.0.st_mode & libc::S_IFMT == libc::S_IFDIR => self.clear_dir(dir, name)?,
            _ => {
                let _ = dir.remove_tree(name);
            }
        }
        dir.symlink(OsStr::new(link), name)
            .map_err(|e| Error::io(e, "symlink", &self.full(parent, name.to_str().unwrap_or_default())))
    }

    /// Upstream's file step, staged: copy (reflink where possible) to a new sibling, apply
    /// the mode, then rename it over the target (a directory there is removed first). On
    /// failure the staged copy is removed and the host's entry is left as it was.
    #[allow(clippy::too_many_arguments)]
    fn apply_file(
        &self,
        from: &Dir,
        sources: &Sources<'_>,
        stage: &Dir,
        dir: &Dir,
        parent: &str,
        name: &str,
        mode: u32,
    ) -> Result<()> {
        let os_name = OsStr::new(name);
        let mut input = from
            .open_file_nofollow(os_name)
            .map_err(|e| Error::io(e, "copyfile", &join_like_node(sources.path, &join_rel(parent, name))))?;
        let (staged, mut output) = loop {
            let staged = crate::staging::unique_name(STAGING_PREFIX);
            match stage.create_new_file(&staged, 0o600) {
                Ok(file) => break (staged, file),
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => continue,
                Err(e) => return Err(Error::io(e, "copyfile", &self.full(parent, name))),
            }
        };
        let written = fsat::copy_contents(&mut input, &mut output)
            .map_err(|e| Error::io(e, "copyfile", &self.full(parent, name)))
            .and_then(|_| fsat::fchmod(&output, mode).map_err(|e| Error::io(e, "chmod", &self.full(parent, name))))
            .and_then(|()| {
                drop(output);
                if dir.lstat(os_name).is_ok_and(|st| st.0.st_mode & libc::S_IFMT == libc::S_IFDIR) {
                    self.clear_dir(dir, os_name)?;
                }
                stage.rename(&staged, dir, os_name).map_err(|e| Error::io(e, "rename", &self.full(parent, name)))
            });
        if written.is_err() {
            let _ = stage.unlink(&staged);
        }
        written
    }
}

fn join_rel(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}/{name}")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{symlink, PermissionsExt};
    use std::path::PathBuf;

    pub(crate) fn tmp(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("pc-merge-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    pub(crate) fn capture(root: &Path) -> Snapshot {
        snapshot::capture(&CaptureOptions {
            root,
            exclude: &[],
            threads: 2,
            previous: None,
            hash_only: None,
            readdir_errors: ReaddirErrors::Propagate,
            on_reserved: OnReserved::Skip,
            cancel: &AtomicBool::new(false),
        })
        .unwrap()
    }

    pub(crate) fn baseline_of(snap: &Snapshot) -> Baseline {
        Baseline::new(snap.tree.nodes.iter().zip(&snap.entries).filter_map(|(node, entry)| {
            let entry = match entry.as_ref()? {
                Entry::Dir => BaselineEntry::Dir,
                Entry::File { mode, hash } => BaselineEntry::File { mode: *mode, hash: *hash },
                Entry::Symlink { target } => BaselineEntry::Symlink { target: target.clone() },
            };
            Some((node.rel.clone(), entry))
        }))
    }

    fn run(source_root: &Path, target: &Path, baseline: &Baseline, reject: bool) -> Result<Outcome> {
        let source = capture(source_root);
        let outcome = merge(&MergeOptions {
            source_root,
            source: &source,
            target,
            baseline,
            exclude: &[],
            reject_conflicts: reject,
            start: None,
            threads: 3,
            cancel: &AtomicBool::new(false),
        })?;
        match outcome {
            Outcome::Failed { mut failures, .. } => {
                failures.sort_by(|a, b| a.0.cmp(&b.0));
                Err(failures.remove(0).1)
            }
            other => Ok(other),
        }
    }

    pub(crate) fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    #[test]
    fn applies_remote_changes_keeps_host_edits_and_deletes_untouched_files() {
        let root = tmp("basic");
        let (src, dst) = (root.join("src"), root.join("dst"));
        for base in [&src, &dst] {
            write(&base.join("keep.txt"), "same");
            write(&base.join("gone.txt"), "old");
            write(&base.join("edited-here.txt"), "old");
            write(&base.join("d/x"), "x");
            fs::create_dir_all(base.join("empty")).unwrap();
        }
        let baseline = baseline_of(&capture(&dst));
        // Remote: deletes gone.txt, edited-here.txt and the empty dir, modifies d/x, adds a file, a link, a dir.
        fs::remove_file(src.join("gone.txt")).unwrap();
        fs::remove_file(src.join("edited-here.txt")).unwrap();
        fs::remove_dir(src.join("empty")).unwrap();
        write(&src.join("d/x"), "remote");
        fs::set_permissions(src.join("d/x"), fs::Permissions::from_mode(0o755)).unwrap();
        write(&src.join("new/deep/file"), "new");
        symlink("../keep.txt", src.join("d/link")).unwrap();
        // Host: edits a file the remote deleted, adds a local file.
        write(&dst.join("edited-here.txt"), "host edit");
        write(&dst.join("local-only"), "mine");

        let outcome = run(&src, &dst, &baseline, false).unwrap();
        let Outcome::Merged(stats) = outcome else { panic!("{outcome:?}") };
        assert_eq!(stats.deleted, 1);
        assert_eq!(stats.removed_dirs, 1);
        assert_eq!(fs::read_to_string(dst.join("d/x")).unwrap(), "remote");
        assert_eq!(fs::metadata(dst.join("d/x")).unwrap().permissions().mode() & 0o7777, 0o755);
        assert_eq!(fs::read_to_string(dst.join("new/deep/file")).unwrap(), "new");
        assert_eq!(fs::read_link(dst.join("d/link")).unwrap(), PathBuf::from("../keep.txt"));
        assert_eq!(fs::read_to_string(dst.join("edited-here.txt")).unwrap(), "host edit");
        assert_eq!(fs::read_to_string(dst.join("local-only")).unwrap(), "mine");
        assert!(!dst.join("gone.txt").exists());
        assert!(!dst.join("empty").exists());
        let leftovers: Vec<_> = fs::read_dir(dst.join("d"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n.to_string_lossy().starts_with(STAGING_PREFIX))
            .collect();
        assert!(leftovers.is_empty());
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn refuses_to_write_through_a_symlinked_ancestor() {
        let root = tmp("ancestor");
        let (src, dst, outside) = (root.join("src"), root.join("dst"), root.join("outside"));
        fs::create_dir_all(src.join("sub")).unwrap();
        fs::create_dir_all(dst.join("sub")).unwrap();
        fs::create_dir_all(&outside).unwrap();
        let baseline = baseline_of(&capture(&dst));
        fs::remove_dir(dst.join("sub")).unwrap();
        symlink(&outside, dst.join("sub")).unwrap();
        write(&src.join("sub/x"), "payload");
        let outcome = run(&src, &dst, &baseline, false).unwrap();
        match outcome {
            Outcome::Refused(r) => {
                assert_eq!(r.code, codes::SYMLINKED_ANCESTOR);
                assert_eq!(r.paths, ["sub"]);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(fs::read_dir(&outside).unwrap().count(), 0);
        // A directory opened during the merge that turns out to be a link fails as well.
        let target = Targets { root: Dir::open_nofollow(&dst).unwrap(), path: &dst, keep_full_dirs: false };
        assert_eq!(target.open("sub", true).unwrap_err().code, codes::SYMLINKED_ANCESTOR);
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn reject_policy_lists_paths_both_sides_changed() {
        let root = tmp("conflict");
        let (src, dst) = (root.join("src"), root.join("dst"));
        for base in [&src, &dst] {
            write(&base.join("both"), "base");
            write(&base.join("same-change"), "base");
            write(&base.join("remote-only"), "base");
            write(&base.join("dir/kept"), "base");
        }
        let baseline = baseline_of(&capture(&dst));
        write(&src.join("both"), "remote");
        write(&dst.join("both"), "host");
        write(&src.join("same-change"), "equal");
        write(&dst.join("same-change"), "equal");
        write(&src.join("remote-only"), "remote");
        // The remote replaces dir/ by a file; the host added a file inside it.
        fs::remove_dir_all(src.join("dir")).unwrap();
        write(&src.join("dir"), "now a file");
        write(&dst.join("dir/host-new"), "host");
        let outcome = run(&src, &dst, &baseline, true).unwrap();
        match outcome {
            Outcome::Refused(r) => {
                assert_eq!(r.code, CONFLICT_CODE);
                assert_eq!(r.paths, ["both", "dir/host-new"]);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(fs::read_to_string(dst.join("remote-only")).unwrap(), "base");
        // Without the policy the remote wins (upstream).
        assert!(matches!(run(&src, &dst, &baseline, false).unwrap(), Outcome::Merged(_)));
        assert_eq!(fs::read_to_string(dst.join("both")).unwrap(), "remote");
        assert_eq!(fs::read_to_string(dst.join("dir")).unwrap(), "now a file");
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn baseline_drops_paths_no_walk_produces() {
        let b = Baseline::new([
            ("../x".to_string(), BaselineEntry::Dir),
            ("a//b".to_string(), BaselineEntry::Dir),
            ("/abs".to_string(), BaselineEntry::Dir),
            ("a/./b".to_string(), BaselineEntry::Dir),
            ("ok/path".to_string(), BaselineEntry::Dir),
            ("ok/path".to_string(), BaselineEntry::Unmatchable),
        ]);
        assert_eq!(b.entries, [("ok/path".to_string(), BaselineEntry::Dir)]);
    }

    #[test]
    fn a_file_in_place_of_a_needed_directory_fails_like_node() {
        // Node's `mkdir -p` says EEXIST for the requested path itself, ENOTDIR for an ancestor.
        for (remote_file, code) in [("a/x", "EEXIST"), ("a/b/x", "ENOTDIR")] {
            let root = tmp("enotdir");
            let (src, dst) = (root.join("src"), root.join("dst"));
            fs::create_dir_all(src.join("a")).unwrap();
            fs::create_dir_all(dst.join("a")).unwrap();
            let baseline = baseline_of(&capture(&dst));
            fs::remove_dir(dst.join("a")).unwrap();
            write(&dst.join("a"), "host file");
            write(&src.join(remote_file), "remote");
            let err = run(&src, &dst, &baseline, false).unwrap_err();
            assert_eq!(err.code, code, "{remote_file}");
            assert_eq!(fs::read_to_string(dst.join("a")).unwrap(), "host file");
            fs::remove_dir_all(root).unwrap();
        }
    }

    #[test]
    fn a_symlink_to_a_file_or_nowhere_fails_like_node_instead_of_being_refused() {
        for (link, code) in [("host-file", "EEXIST"), ("nowhere", "ENOENT")] {
            let root = tmp("linkfile");
            let (src, dst) = (root.join("src"), root.join("dst"));
            fs::create_dir_all(src.join("a")).unwrap();
            fs::create_dir_all(dst.join("a")).unwrap();
            let baseline = baseline_of(&capture(&dst));
            fs::remove_dir(dst.join("a")).unwrap();
            write(&dst.join("host-file"), "h");
            symlink(link, dst.join("a")).unwrap();
            write(&src.join("a/x"), "remote");
            assert_eq!(run(&src, &dst, &baseline, false).unwrap_err().code, code, "{link}");
            fs::remove_dir_all(root).unwrap();
        }
    }
}
