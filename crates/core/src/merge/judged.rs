//! A lane's restore merge: the host changes exactly what the agent changed.
//!
//! Upstream's merge ([`super::plan`]) takes every source entry that differs from the host's
//! baseline for the agent's work, and every baseline entry the source lacks for a deletion.
//! A lane knows better what the remote started with ([`RemoteStart`]): a path no transfer
//! carries is never judged (never deleted, never replaced), and a path is the agent's change
//! only where its end state differs from what the remote was given (a checkout's blob, a mode a
//! remote umask narrowed, are not changes). Where the agent changed a path, the host's copy is
//! replaced or deleted only if the host still holds its baseline there; a path the host
//! changed during the run is kept and reported ([`Kept`]), and so is a directory the agent
//! removed or replaced that still holds what the host changed or what was never sent: those
//! entries stay, with the directories above them.
//!
//! Where the agent changed a file's bytes but not its mode (as the transfer left it), the
//! host's mode stays; where it changed the mode alone, only the mode moves.

use std::collections::{HashMap, HashSet};

use super::{by_length_desc, matches, BaselineEntry, Indexed, Plan, Sources};
use crate::error::{Error, Result};
use crate::remote_start::{holds_blob, Given, RemoteStart};
use crate::snapshot::{Entry, Snapshot};
use crate::walk::Kind;

/// Why a lane's restore left a host path as the host holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum KeptReason {
    /// The agent changed the path and the host changed it too during the run: the host's
    /// version stays.
    HostChanged,
    /// The agent made the path, where the host holds one the transfer never sent.
    NeverSent,
    /// The agent removed or replaced a directory that still holds what the host changed or
    /// what the transfer never sent: those stay, with the directories above them.
    NotEmpty,
    /// A FIFO, socket or device is there on the host: never replaced.
    Special,
    /// A path above it was kept, and is not a directory on the host.
    Blocked,
}

impl KeptReason {
    /// The reason as the JS layer reports it.
    pub fn as_str(&self) -> &'static str {
        match self {
            KeptReason::HostChanged => "host-changed",
            KeptReason::NeverSent => "never-sent",
            KeptReason::NotEmpty => "not-empty",
            KeptReason::Special => "special-file",
            KeptReason::Blocked => "blocked",
        }
    }
}

/// A host path a lane's restore kept, and why.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Kept {
    pub path: String,
    pub reason: KeptReason,
}

/// A path whose remote end state is not what the remote was given (or that the agent made).
struct Change<'a> {
    rel: &'a str,
    source: Option<&'a Entry>,
    base: Option<&'a BaselineEntry>,
    given: Option<Given<'a>>,
    /// A file whose bytes are as given: only its mode changed.
    mode_only: bool,
}

/// The source judged against the remote's start, before the host tree is read.
pub(super) struct Judged<'a> {
    changes: Vec<Change<'a>>,
}

/// Whether the source entry `source` at `rel` is what the remote was given there; for a file
/// also whether its bytes are (its mode aside). Reads the file when the start was a blob.
fn as_given(
    rel: &str,
    source: Option<&Entry>,
    given: &Given<'_>,
    index: &Indexed<'_>,
    sources: &Sources<'_>,
    start: &RemoteStart,
) -> Result<(bool, bool)> {
    let Some(source) = source else { return Ok((false, false)) };
    Ok(match (source, given) {
        (Entry::Dir, Given::Dir) => (true, true),
        (Entry::Symlink { target }, Given::Symlink(start)) => (target == start, target == start),
        (Entry::File { mode, hash }, Given::HostFile { hash: sent, .. }) => {
            let bytes = hash == *sent;
            (bytes && start.mode_as_given(*mode, given), bytes)
        }
        (Entry::File { mode, .. }, Given::Blob { oid, .. }) => {
            let size = index.node(rel).map_or(0, |node| node.stat.size);
            let (parent, name) = super::split_parent(rel);
            let path = || super::join_like_node(sources.path, rel);
            let dir = sources.open(parent)?;
            let bytes = holds_blob(|| dir.open_file_nofollow(std::ffi::OsStr::new(name)), size, oid)
                .map_err(|e| Error::io(e, "open", &path()))?;
            (bytes && start.mode_as_given(*mode, given), bytes)
        }
        _ => (false, false),
    })
}

/// Upstream's candidates (a baseline entry the source lacks, a source entry unlike the
/// baseline's), less what never travels and what the remote holds as it was given.
pub(super) fn prejudge<'a>(
    baseline: &'a super::Baseline,
    base: &HashMap<&'a str, &'a BaselineEntry>,
    source: &Indexed<'a>,
    start: &'a RemoteStart,
    sources: &Sources<'_>,
) -> Result<Judged<'a>> {
    let mut changes = Vec::new();
    let mut consider = |rel: &'a str, entry: Option<&'a Entry>, b: Option<&'a BaselineEntry>| -> Result<()> {
        if !start.transferable(rel) {
            return Ok(());
        }
        let given = start.given(rel, b);
        let mode_only = match &given {
            // Never sent, gone from the source: nothing the agent did.
            None if entry.is_none() => return Ok(()),
            None => false,
            Some(g) => match as_given(rel, entry, g, source, sources, start)? {
                (true, _) => return Ok(()),
                (false, bytes) => bytes,
            },
        };
        changes.push(Change { rel, source: entry, base: b, given, mode_only });
        Ok(())
    };
    for (rel, entry) in &baseline.entries {
        if source.get(rel).is_none() {
            consider(rel, None, Some(entry))?;
        }
    }
    for (rel, entry) in source.iter() {
        let b = base.get(rel).copied();
        if !matches(b, Some(entry)) {
            consider(rel, Some(entry), b)?;
        }
    }
    Ok(Judged { changes })
}

impl<'a> Judged<'a> {
    /// The host files whose content the plan compares: each changed path, and what the
    /// baseline holds below a directory the agent replaced by a file or link.
    pub(super) fn host_reads(
        &self,
        baseline: &'a super::Baseline,
        base: &HashMap<&str, &BaselineEntry>,
    ) -> HashSet<&'a str> {
        let mut out: HashSet<&'a str> = self.changes.iter().map(|c| c.rel).collect();
        let replaced: Vec<String> = self
            .changes
            .iter()
            .filter(|c| matches!(c.source, Some(Entry::File { .. } | Entry::Symlink { .. })))
            .filter(|c| matches!(base.get(c.rel), Some(BaselineEntry::Dir)))
            .map(|c| format!("{}/", c.rel))
            .collect();
        if !replaced.is_empty() {
            for (rel, _) in &baseline.entries {
                if replaced.iter().any(|prefix| rel.starts_with(prefix.as_str())) {
                    out.insert(rel.as_str());
                }
            }
        }
        out
    }
}

/// The host's state at a path, from the current capture.
#[derive(Clone, Copy)]
enum Host<'a> {
    Absent,
    /// A FIFO, socket or device.
    Special,
    /// A file the capture did not read (not one the plan compares).
    Unread,
    Entry(&'a Entry),
}

/// Every node of the current capture by path (entries, unread files and special files).
struct HostTree<'a> {
    snapshot: &'a Snapshot,
    nodes: HashMap<&'a str, usize>,
}

impl<'a> HostTree<'a> {
    fn new(snapshot: &'a Snapshot) -> Self {
        let nodes = snapshot.tree.nodes.iter().enumerate().map(|(i, node)| (node.rel.as_str(), i)).collect();
        HostTree { snapshot, nodes }
    }

    fn at(&self, rel: &str) -> Host<'a> {
        let Some(&i) = self.nodes.get(rel) else { return Host::Absent };
        match (&self.snapshot.entries[i], self.snapshot.tree.nodes[i].stat.kind) {
            (Some(entry), _) => Host::Entry(entry),
            (None, Kind::Other) => Host::Special,
            (None, _) => Host::Unread,
        }
    }

    /// Every node below `rel`, depth-first.
    fn below(&self, rel: &str) -> Vec<&'a str> {
        let mut out = Vec::new();
        let Some(&index) = self.nodes.get(rel) else { return out };
        let mut stack = vec![index];
        while let Some(i) = stack.pop() {
            let (start, end) = self.snapshot.tree.children[i];
            for child in start..end {
                out.push(self.snapshot.tree.nodes[child as usize].rel.as_str());
                stack.push(child as usize);
            }
        }
        out
    }
}

/// The host still holds the baseline's state (both absent included).
fn unchanged(base: Option<&BaselineEntry>, host: Host<'_>) -> bool {
    match (base, host) {
        (None, Host::Absent) => true,
        (Some(b), Host::Entry(e)) => matches(Some(b), Some(e)),
        _ => false,
    }
}

/// The host already holds the source's state (both absent included).
fn same_as_source(source: Option<&Entry>, host: Host<'_>) -> bool {
    match (source, host) {
        (None, Host::Absent) => true,
        (Some(s), Host::Entry(e)) => s == e,
        _ => false,
    }
}

/// The plan of a lane's restore (see the module docs), from the judged source and the host
/// tree captured inside the lock.
pub(super) fn plan<'a>(
    judged: &Judged<'a>,
    base: &HashMap<&'a str, &'a BaselineEntry>,
    source: &Indexed<'a>,
    current: &Indexed<'a>,
    start: &'a RemoteStart,
) -> Plan<'a> {
    let host = HostTree::new(current.snapshot);
    let mut plan = Plan::default();
    let mut kept: Vec<Kept> = Vec::new();
    let keep = |kept: &mut Vec<Kept>, rel: &str, reason| kept.push(Kept { path: rel.to_string(), reason });
    // Whether everything the host holds below the directory `rel` goes with the agent's
    // replacement of it: each entry was given, is gone from the source and is the host's
    // baseline.
    let all_below_goes = |rel: &str| {
        host.below(rel).into_iter().all(|d| {
            let b = base.get(d).copied();
            let h = host.at(d);
            !matches!(h, Host::Special) && source.get(d).is_none() && start.given(d, b).is_some() && unchanged(b, h)
        })
    };
    for change in &judged.changes {
        let rel = change.rel;
        let h = host.at(rel);
        if same_as_source(change.source, h) {
            continue;
        }
        let Some(given) = &change.given else {
            // The agent made a path the prepare gave it nothing at.
            let Some(entry) = change.source else { continue };
            match h {
                Host::Absent => push_apply(&mut plan, rel, entry, None),
                Host::Special => keep(&mut kept, rel, KeptReason::Special),
                _ if change.base.is_some() && unchanged(change.base, h) => keep(&mut kept, rel, KeptReason::NeverSent),
                _ => keep(&mut kept, rel, KeptReason::HostChanged),
            }
            continue;
        };
        if !unchanged(change.base, h) {
            let reason = if matches!(h, Host::Special) { KeptReason::Special } else { KeptReason::HostChanged };
            keep(&mut kept, rel, reason);
            continue;
        }
        match change.source {
            None if matches!(change.base, Some(BaselineEntry::Dir)) => plan.delete_dirs.push(rel),
            None => plan.delete_leaves.push(rel),
            Some(entry @ Entry::Dir) => push_apply(&mut plan, rel, entry, None),
            Some(entry) => {
                if matches!(h, Host::Entry(Entry::Dir)) && !all_below_goes(rel) {
                    keep(&mut kept, rel, KeptReason::NotEmpty);
                    continue;
                }
                let host_mode = match h {
                    Host::Entry(Entry::File { mode, .. }) => Some(*mode),
                    _ => None,
                };
                match (entry, host_mode) {
                    (Entry::File { mode, .. }, Some(_)) if change.mode_only => plan.chmods.push((rel, *mode)),
                    (Entry::File { mode, .. }, Some(host_mode)) if start.mode_as_given(*mode, given) => {
                        push_apply(&mut plan, rel, entry, Some(host_mode))
                    }
                    _ => push_apply(&mut plan, rel, entry, None),
                }
            }
        }
    }
    // A directory the agent removed that keeps entries the merge leaves: reported.
    let going: HashSet<&str> = plan.delete_leaves.iter().chain(&plan.delete_dirs).copied().collect();
    for rel in &plan.delete_dirs {
        if host.below(rel).into_iter().any(|d| !going.contains(d)) {
            keep(&mut kept, rel, KeptReason::NotEmpty);
        }
    }
    // What lies below a kept path that is not a directory on the host cannot be placed.
    let blocking: HashSet<String> =
        kept.iter().filter(|k| !matches!(host.at(&k.path), Host::Entry(Entry::Dir))).map(|k| k.path.clone()).collect();
    if !blocking.is_empty() {
        let blocked = |rel: &str| rel.match_indices('/').any(|(i, _)| blocking.contains(&rel[..i]));
        let rels = plan.apply_dirs.iter().copied();
        let rels =
            rels.chain(plan.apply_leaves.iter().map(|(rel, ..)| *rel)).chain(plan.chmods.iter().map(|(rel, _)| *rel));
        kept.extend(
            rels.filter(|rel| blocked(rel)).map(|rel| Kept { path: rel.to_string(), reason: KeptReason::Blocked }),
        );
        plan.apply_dirs.retain(|rel| !blocked(rel));
        plan.apply_leaves.retain(|(rel, ..)| !blocked(rel));
        plan.chmods.retain(|(rel, _)| !blocked(rel));
    }
    by_length_desc(&mut plan.delete_leaves);
    by_length_desc(&mut plan.delete_dirs);
    plan.apply_dirs.sort_unstable();
    plan.apply_leaves.sort_unstable_by(|a, b| a.0.cmp(b.0));
    kept.sort();
    kept.dedup_by(|a, b| a.path == b.path);
    plan.kept = kept;
    plan
}

/// Adds the source `entry` at `rel` to what the merge writes; a file gets `mode` when given
/// (the host's), else its own.
fn push_apply<'a>(plan: &mut Plan<'a>, rel: &'a str, entry: &'a Entry, mode: Option<u32>) {
    match entry {
        Entry::Dir => plan.apply_dirs.push(rel),
        Entry::File { mode: own, .. } => plan.apply_leaves.push((rel, entry, mode.unwrap_or(*own))),
        Entry::Symlink { .. } => plan.apply_leaves.push((rel, entry, 0)),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{baseline_of, capture, tmp, write};
    use super::super::{merge, MergeOptions, Outcome};
    use super::*;
    use crate::remote_start::{Checkout, TreeEntry};
    use std::fs;
    use std::os::unix::fs::{symlink, FileTypeExt, PermissionsExt};
    use std::path::Path;
    use std::sync::atomic::AtomicBool;

    /// A merge of `src` into `dst` against `baseline`, the current tree captured with
    /// `exclude`: a lane's with `start`, upstream's without.
    fn merge_with(
        src: &Path,
        dst: &Path,
        baseline: &super::super::Baseline,
        exclude: &[String],
        start: Option<&RemoteStart>,
    ) -> super::super::MergeStats {
        let source = capture(src);
        let outcome = merge(&MergeOptions {
            source_root: src,
            source: &source,
            target: dst,
            baseline,
            exclude,
            reject_conflicts: false,
            start,
            threads: 2,
            cancel: &AtomicBool::new(false),
        })
        .unwrap();
        match outcome {
            Outcome::Merged(stats) => stats,
            other => panic!("{other:?}"),
        }
    }

    /// A lane's merge of `src` into `dst` against `baseline`, given `start`.
    fn lane(
        src: &Path,
        dst: &Path,
        baseline: &super::super::Baseline,
        start: &RemoteStart,
    ) -> super::super::MergeStats {
        merge_with(src, dst, baseline, &[], Some(start))
    }

    fn mode(path: &Path) -> u32 {
        fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
    }

    fn kept(stats: &super::super::MergeStats) -> Vec<(String, &'static str)> {
        stats.kept.iter().map(|k| (k.path.clone(), k.reason.as_str())).collect()
    }

    #[test]
    fn what_never_travelled_stays_and_the_agents_edit_arrives() {
        let root = tmp("lane-unsent");
        let (src, dst) = (root.join("src"), root.join("dst"));
        write(&dst.join("edit.txt"), "before");
        write(&dst.join("._notes"), "apple");
        write(&dst.join("docs/._draft.md"), "apple");
        write(&dst.join("sub/.git"), "gitdir: ../.git/modules/sub");
        write(&dst.join("app/secrets/key.txt"), "secret");
        write(&dst.join("docs/.paperclip-runtime/notes.md"), "notes");
        let baseline = baseline_of(&capture(&dst));
        // The remote got what tar let through; the agent edited one file.
        write(&src.join("edit.txt"), "after");
        fs::create_dir_all(src.join("docs")).unwrap();
        fs::create_dir_all(src.join("sub")).unwrap();
        fs::create_dir_all(src.join("app")).unwrap();
        let start = RemoteStart::new(&[".git", ".paperclip-runtime", "secrets"], None);
        let stats = lane(&src, &dst, &baseline, &start);
        assert_eq!(fs::read_to_string(dst.join("edit.txt")).unwrap(), "after");
        for kept in
            ["._notes", "docs/._draft.md", "sub/.git", "app/secrets/key.txt", "docs/.paperclip-runtime/notes.md"]
        {
            assert!(dst.join(kept).exists(), "{kept}");
        }
        assert_eq!(stats.deleted, 0);
        // Upstream's merge, without the start, deletes every one of them.
        let baseline = baseline_of(&capture(&dst));
        write(&src.join("edit.txt"), "again");
        merge_with(&src, &dst, &baseline, &[], None);
        assert!(!dst.join("._notes").exists() && !dst.join("sub/.git").exists());
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn what_a_lane_merge_wrote_is_where_the_next_restore_starts() {
        let root = tmp("lane-advanced");
        let (src, dst) = (root.join("src"), root.join("dst"));
        for name in ["a.txt", "gone.txt", "p.txt", "stays.txt"] {
            write(&dst.join(name), name);
            write(&src.join(name), name);
        }
        let baseline = baseline_of(&capture(&dst));
        write(&src.join("a.txt"), "the agent's first");
        fs::remove_file(src.join("gone.txt")).unwrap();
        fs::set_permissions(src.join("p.txt"), fs::Permissions::from_mode(0o700)).unwrap();
        write(&src.join("d/n.txt"), "new");
        let start = RemoteStart::new::<&str>(&[], None);
        let stats = lane(&src, &dst, &baseline, &start);
        // What the merge wrote, as a capture of the host now describes it; nothing it did not write.
        let now = baseline_of(&capture(&dst));
        let now: HashMap<&str, &BaselineEntry> = now.entries.iter().map(|(rel, e)| (rel.as_str(), e)).collect();
        let paths: Vec<&str> = stats.advanced.iter().map(|(rel, _)| rel.as_str()).collect();
        assert_eq!(paths, ["a.txt", "d", "d/n.txt", "gone.txt", "p.txt"]);
        for (rel, entry) in &stats.advanced {
            assert_eq!(entry.as_ref(), now.get(rel.as_str()).copied(), "{rel}");
        }
        // The next restore against the baseline with those in place: the agent's later edit
        // arrives (against the prepare's baseline it reads as a host edit and is kept).
        let mut entries = baseline.entries.clone();
        entries.retain(|(rel, _)| !paths.contains(&rel.as_str()));
        entries.extend(stats.advanced.iter().filter_map(|(rel, e)| e.clone().map(|e| (rel.clone(), e))));
        let advanced = super::super::Baseline::new(entries);
        write(&src.join("a.txt"), "the agent's second");
        let stale = lane(&src, &dst, &baseline, &start);
        assert_eq!(kept(&stale), [("a.txt".to_string(), "host-changed")]);
        let stats = lane(&src, &dst, &advanced, &start);
        assert!(stats.kept.is_empty(), "{:?}", stats.kept);
        assert_eq!(fs::read_to_string(dst.join("a.txt")).unwrap(), "the agent's second");
        assert_eq!(fs::read_to_string(dst.join("stays.txt")).unwrap(), "stays.txt");
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_mode_a_remote_umask_narrowed_is_not_the_agents_change() {
        let root = tmp("lane-umask");
        let (src, dst) = (root.join("src"), root.join("dst"));
        for (name, host, remote) in [("g.txt", 0o664, 0o644), ("x.sh", 0o775, 0o755), ("p.txt", 0o600, 0o600)] {
            write(&dst.join(name), name);
            fs::set_permissions(dst.join(name), fs::Permissions::from_mode(host)).unwrap();
            write(&src.join(name), name);
            fs::set_permissions(src.join(name), fs::Permissions::from_mode(remote)).unwrap();
        }
        // The agent edits g.txt's bytes (its mode stays as the transfer left it) and makes p.txt executable.
        write(&src.join("g.txt"), "edited");
        fs::set_permissions(src.join("g.txt"), fs::Permissions::from_mode(0o644)).unwrap();
        fs::set_permissions(src.join("p.txt"), fs::Permissions::from_mode(0o700)).unwrap();
        let baseline = baseline_of(&capture(&dst));
        let stats = lane(&src, &dst, &baseline, &RemoteStart::new::<&str>(&[], None));
        assert_eq!(fs::read_to_string(dst.join("g.txt")).unwrap(), "edited");
        assert_eq!(mode(&dst.join("g.txt")), 0o664, "the host's mode stays with the agent's bytes");
        assert_eq!(mode(&dst.join("x.sh")), 0o775);
        assert_eq!(mode(&dst.join("p.txt")), 0o700, "a mode the agent changed arrives");
        assert_eq!(fs::read_to_string(dst.join("p.txt")).unwrap(), "p.txt");
        assert_eq!((stats.applied, stats.chmodded), (1, 1));
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_checkout_is_judged_by_its_blobs() {
        let root = tmp("lane-blob");
        let (src, dst) = (root.join("src"), root.join("dst"));
        // The host: a skip-worktree edit, a 600 file and a CRLF file, all clean to git.
        write(&dst.join("skip.txt"), "host's local edit\n");
        write(&dst.join("private.txt"), "private\n");
        fs::set_permissions(dst.join("private.txt"), fs::Permissions::from_mode(0o600)).unwrap();
        write(&dst.join("crlf.txt"), "a\r\nb\r\n");
        write(&dst.join("edited.txt"), "head\n");
        let baseline = baseline_of(&capture(&dst));
        // The remote: HEAD's blobs as a checkout writes them; the agent edits one.
        write(&src.join("skip.txt"), "head\n");
        write(&src.join("private.txt"), "private\n");
        write(&src.join("crlf.txt"), "a\nb\n");
        write(&src.join("edited.txt"), "agent\n");
        let oid = |text: &str| {
            use sha1::{Digest, Sha1};
            let mut h = Sha1::new();
            h.update(format!("blob {}\0", text.len()).as_bytes());
            h.update(text.as_bytes());
            let id: [u8; 20] = h.finalize().into();
            TreeEntry::Blob { oid: id, executable: false }
        };
        let tree = HashMap::from([
            ("skip.txt".to_string(), oid("head\n")),
            ("private.txt".to_string(), oid("private\n")),
            ("crlf.txt".to_string(), oid("a\nb\n")),
            ("edited.txt".to_string(), oid("head\n")),
        ]);
        let start = RemoteStart::new(&[".git"], Some(Checkout::new(tree, [], [])));
        let stats = lane(&src, &dst, &baseline, &start);
        assert_eq!(fs::read_to_string(dst.join("skip.txt")).unwrap(), "host's local edit\n");
        assert_eq!(mode(&dst.join("private.txt")), 0o600);
        assert_eq!(fs::read_to_string(dst.join("crlf.txt")).unwrap(), "a\r\nb\r\n");
        assert_eq!(fs::read_to_string(dst.join("edited.txt")).unwrap(), "agent\n");
        assert_eq!(stats.applied, 1);
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn host_edits_during_the_run_are_kept_and_reported() {
        let root = tmp("lane-host");
        let (src, dst) = (root.join("src"), root.join("dst"));
        for base in [&src, &dst] {
            write(&base.join("both.txt"), "base");
            write(&base.join("dir/inner.txt"), "base");
            write(&base.join("dir/other.txt"), "base");
            write(&base.join("deleted-there.txt"), "base");
        }
        let baseline = baseline_of(&capture(&dst));
        write(&src.join("both.txt"), "agent");
        write(&dst.join("both.txt"), "host");
        // The agent replaces dir/ by a file; the host edited a file inside it meanwhile.
        fs::remove_dir_all(src.join("dir")).unwrap();
        write(&src.join("dir"), "a file now");
        write(&dst.join("dir/inner.txt"), "host edit");
        fs::remove_file(src.join("deleted-there.txt")).unwrap();
        write(&dst.join("deleted-there.txt"), "host edit");
        // And makes a new file the host made too.
        write(&src.join("new.txt"), "agent");
        write(&dst.join("new.txt"), "host");
        let stats = lane(&src, &dst, &baseline, &RemoteStart::new::<&str>(&[], None));
        assert_eq!(fs::read_to_string(dst.join("both.txt")).unwrap(), "host");
        assert_eq!(fs::read_to_string(dst.join("dir/inner.txt")).unwrap(), "host edit");
        assert!(!dst.join("dir/other.txt").exists(), "the agent's deletion inside arrives");
        assert_eq!(fs::read_to_string(dst.join("deleted-there.txt")).unwrap(), "host edit");
        assert_eq!(fs::read_to_string(dst.join("new.txt")).unwrap(), "host");
        assert_eq!(
            kept(&stats),
            [
                ("both.txt".to_string(), "host-changed"),
                ("deleted-there.txt".to_string(), "host-changed"),
                ("dir".to_string(), "not-empty"),
                ("dir/inner.txt".to_string(), "host-changed"),
                ("new.txt".to_string(), "host-changed"),
            ]
        );
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_removed_directory_keeps_what_was_never_sent() {
        let root = tmp("lane-rmdir");
        let (src, dst) = (root.join("src"), root.join("dst"));
        write(&dst.join("docs/a.md"), "a");
        write(&dst.join("docs/._a.md"), "apple");
        write(&dst.join("gone/b.md"), "b");
        let baseline = baseline_of(&capture(&dst));
        fs::create_dir_all(&src).unwrap();
        let stats = lane(&src, &dst, &baseline, &RemoteStart::new::<&str>(&[], None));
        assert!(!dst.join("docs/a.md").exists() && !dst.join("gone").exists());
        assert_eq!(fs::read_to_string(dst.join("docs/._a.md")).unwrap(), "apple");
        assert_eq!(kept(&stats), [("docs".to_string(), "not-empty")]);
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn special_files_are_left_alone() {
        let root = tmp("lane-fifo");
        let (src, dst) = (root.join("src"), root.join("dst"));
        fs::create_dir_all(&dst).unwrap();
        let fifo = std::ffi::CString::new(dst.join("pipe").to_str().unwrap()).unwrap();
        // SAFETY: a valid path string.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        let baseline = baseline_of(&capture(&dst));
        write(&src.join("pipe"), "the agent's file");
        write(&src.join("pipe-dir/x"), "x");
        let stats = lane(&src, &dst, &baseline, &RemoteStart::new::<&str>(&[], None));
        assert!(fs::symlink_metadata(dst.join("pipe")).unwrap().file_type().is_fifo());
        assert_eq!(fs::read_to_string(dst.join("pipe-dir/x")).unwrap(), "x");
        assert_eq!(kept(&stats), [("pipe".to_string(), "special-file")]);
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_directory_holding_what_the_capture_excludes_is_not_replaced() {
        let root = tmp("lane-excluded");
        let (src, dst) = (root.join("src"), root.join("dst"));
        write(&dst.join("d/a.txt"), "a");
        write(&dst.join("d/node_modules/dep.js"), "never sent, never walked");
        let baseline = baseline_of(&capture(&dst));
        write(&src.join("d"), "the agent's file");
        let start = RemoteStart::new(&["node_modules"], None);
        let stats = merge_with(&src, &dst, &baseline, &["d/node_modules".to_string()], Some(&start));
        assert_eq!(fs::read_to_string(dst.join("d/node_modules/dep.js")).unwrap(), "never sent, never walked");
        assert!(!dst.join("d/a.txt").exists(), "the agent's deletion inside arrives");
        assert_eq!(kept(&stats), [("d".to_string(), "not-empty")]);
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn under_a_kept_file_nothing_is_placed() {
        let root = tmp("lane-blocked");
        let (src, dst) = (root.join("src"), root.join("dst"));
        write(&dst.join("x"), "base");
        let baseline = baseline_of(&capture(&dst));
        write(&dst.join("x"), "host edit");
        write(&src.join("x/inside.txt"), "agent");
        symlink("inside.txt", src.join("x/link")).unwrap();
        let stats = lane(&src, &dst, &baseline, &RemoteStart::new::<&str>(&[], None));
        assert_eq!(fs::read_to_string(dst.join("x")).unwrap(), "host edit");
        assert_eq!(
            kept(&stats),
            [
                ("x".to_string(), "host-changed"),
                ("x/inside.txt".to_string(), "blocked"),
                ("x/link".to_string(), "blocked")
            ]
        );
        fs::remove_dir_all(root).unwrap();
    }
}
