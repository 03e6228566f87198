//! The staging directories our operations create inside a user's tree: who owns them,
//! their tagged names, their journals, and the sweep that the next operation on the same
//! root runs before it starts. Their names are in the one list of reserved names,
//! [`crate::reserved`].
//!
//! * **Names.** An extraction stages into `<root>/.paperclip-extract-<owner>-<nonce>/`, an
//!   SSH pull into `<root>/.paperclip-ssh-sync-back-<owner>-<nonce>/`, a restore merge into
//!   `<root>/.paperclip-merge-<owner>-<nonce>/`, a baseline restore downloads into
//!   `<root>/.paperclip-sandbox-restore-<owner>-<nonce>/`, where `<owner>` is `<pid>-<start>`:
//!   the creating process's id and its start time (clock ticks since boot, field 22 of
//!   `/proc/<pid>/task/<pid>/stat` on Linux; 0, meaning unknown, elsewhere). The owner is part of the
//!   name, so a staging directory is never without its marker, not even for the instant
//!   after `mkdir`.
//! * **Proof of origin.** The nonce is 16 random hex digits followed by a 16-digit tag: the
//!   keyed digest ([`crate::host_key`]) of everything before it. [`is_ours`] checks it, so
//!   only staging this host created is ever removed, completed or reported as interrupted.
//!   A name of ours that fails the check (planted, or left by an earlier version whose names
//!   had no tag) is *foreign*: the sweep leaves it where it is and reports it
//!   ([`Swept::foreign`]); it never blocks an operation. Every untrusted source refuses our
//!   names on the way in ([`crate::reserved`]), so a foreign one can only be made locally.
//! * **Liveness.** An owner is alive when a process with its pid exists and (where the start
//!   time is known) started at the same tick, so a reused pid is not mistaken for the owner.
//!   The merge lock judges its owner by pid alone; this is the same test, made exact.
//! * **Journal.** Just before an operation starts moving staged entries into place it writes
//!   `journal` into its staging directory (atomically: a temporary name, then a rename). A
//!   process killed during the moves leaves it behind.
//! * **Sweep.** [`sweep`] removes every staging directory of ours whose owner is dead and
//!   that has no journal (an operation killed before it changed anything), completes an
//!   interrupted extraction from its journal (the staged entries are still there; the moves
//!   are renames, so every entry is either old or new), hands an interrupted pull back to its
//!   caller (which owns that apply) and refuses, with [`codes::INTERRUPTED_RESTORE`], to
//!   start on a root whose restore merge was interrupted. Staging directories of live owners
//!   (other processes, or other operations of this one) are left alone. Before acting on a
//!   stale directory the sweep renames it to a fresh name of its own, so two sweeping
//!   processes never act on the same one.

use std::ffi::{OsStr, OsString};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::OnceLock;

use crate::error::{codes, Error, Result};
use crate::fsat::Dir;
use crate::host_key;
use crate::reserved::{self, Kind, Owner, JOURNAL, JOURNAL_TMP, TAG_HEX};

/// A process's start time in clock ticks since boot (Linux: field 22 of its main thread's
/// `/proc/<pid>/task/<pid>/stat`, the process's own start time); `Ok(None)` where that cannot
/// be known, `Err(NotFound)` when there is no such process. Not `/proc/<pid>/stat`: under
/// qemu-user (an image of another architecture) a process reading its own `stat` gets the
/// calling thread's start time, so one thread would take another's staging for a dead
/// process's; qemu answers the task path from the kernel.
#[cfg(target_os = "linux")]
pub fn process_start(pid: u32) -> io::Result<Option<u64>> {
    let stat = std::fs::read(format!("/proc/{pid}/task/{pid}/stat"))?;
    // The command name (field 2) is in parentheses and may hold anything: start after the
    // last ')'. The field after it is the state (field 3); the start time is field 22.
    let close = stat.iter().rposition(|&b| b == b')').ok_or_else(|| io::Error::other("malformed stat"))?;
    let rest = std::str::from_utf8(&stat[close + 1..]).map_err(io::Error::other)?;
    let start = rest.split_ascii_whitespace().nth(19).and_then(|field| field.parse().ok());
    Ok(start)
}

/// A process's start time: not known on this system (`Ok(None)`), or `Err(NotFound)` when
/// `kill(pid, 0)` says there is no such process.
#[cfg(not(target_os = "linux"))]
pub fn process_start(pid: u32) -> io::Result<Option<u64>> {
    // SAFETY: signal 0 only checks that the process exists.
    if unsafe { libc::kill(pid as libc::pid_t, 0) } == 0 {
        return Ok(None);
    }
    match io::Error::last_os_error() {
        e if e.raw_os_error() == Some(libc::ESRCH) => Err(io::Error::from(io::ErrorKind::NotFound)),
        _ => Ok(None), // EPERM: it exists, owned by someone else
    }
}

/// This process as an owner.
pub fn own() -> Owner {
    static OWN: OnceLock<Owner> = OnceLock::new();
    *OWN.get_or_init(|| {
        let pid = std::process::id();
        Owner { pid, start: process_start(pid).ok().flatten().unwrap_or(0) }
    })
}

/// True when `owner` is (still) running: its pid exists and, where both start times are
/// known, started when the owner did.
pub fn alive(owner: Owner) -> bool {
    match process_start(owner.pid) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => false,
        Ok(Some(start)) if owner.start != 0 => start == owner.start,
        // Unreadable for another reason, or no start time to compare: assume alive.
        _ => true,
    }
}

/// A fresh tagged name `<prefix><pid>-<start>-<16 random hex><16 hex tag>` owned by this
/// process (`prefix` one of [`Kind::prefix`]).
pub fn unique_name(prefix: &str) -> OsString {
    name_owned_by(prefix, own())
}

/// A fresh tagged name of `owner` (this process, or a dead one in tests).
pub(crate) fn name_owned_by(prefix: &str, owner: Owner) -> OsString {
    let Owner { pid, start } = owner;
    let nonce = u64::from_ne_bytes(host_key::random());
    let untagged = format!("{prefix}{pid}-{start}-{nonce:016x}");
    let tag = u64::from_be_bytes(host_key::tag(untagged.as_bytes()));
    OsString::from(format!("{untagged}{tag:016x}"))
}

/// True when `name` is a staging name this host created: our current form with a tag that
/// checks under this host's key. Any other name of ours ([`reserved::parse`]) is foreign.
pub fn is_ours(name: &[u8]) -> bool {
    let Some(parsed) = reserved::parse(name) else { return false };
    if !parsed.tagged {
        return false;
    }
    let (untagged, tag_hex) = name.split_at(name.len() - TAG_HEX);
    let Some(tag) = std::str::from_utf8(tag_hex).ok().and_then(|hex| u64::from_str_radix(hex, 16).ok()) else {
        return false;
    };
    host_key::verify(untagged, &tag.to_be_bytes())
}

/// Creates a staging directory of `kind` (mode 0700) in `root`; returns its name.
pub fn create(root: &Dir, kind: Kind) -> io::Result<OsString> {
    loop {
        let name = unique_name(kind.prefix());
        match root.mkdir(&name, 0o700) {
            Ok(()) => return Ok(name),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Writes `content` as the journal of the staging directory `dir` (a temporary name, then a
/// rename, so a reader sees all of it or nothing).
pub fn write_journal(dir: &Dir, content: &[u8]) -> io::Result<()> {
    let temporary = OsStr::new(JOURNAL_TMP);
    let _ = dir.unlink(temporary);
    let mut file = dir.create_new_file(temporary, 0o600)?;
    file.write_all(content)?;
    drop(file);
    dir.rename(temporary, dir, OsStr::new(JOURNAL))
}

/// The journal of the staging directory `dir`, if it has one.
pub fn read_journal(dir: &Dir) -> io::Result<Option<Vec<u8>>> {
    let mut file = match dir.open_file_nofollow(OsStr::new(JOURNAL)) {
        Ok(file) => file,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    file.read_to_end(&mut out)?;
    Ok(Some(out))
}

/// What [`sweep`] found and did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Swept {
    /// Stale staging directories removed (their operation had changed nothing).
    pub removed: usize,
    /// Interrupted extractions completed from their journals.
    pub completed: usize,
    /// Interrupted pulls, claimed (renamed to a name of this process) and left for the
    /// caller to complete: `(staging name, journal)`.
    pub pulls: Vec<(OsString, Vec<u8>)>,
    /// Entries carrying one of our staging names that this host cannot prove it created
    /// ([`is_ours`]): left where they are, not acted upon, for the caller to report.
    pub foreign: Vec<OsString>,
}

/// Cleans up after dead operations on `root` (see the module docs); interrupted pulls are
/// claimed and returned only with `take_pulls`, else left alone. `root_path` is only used
/// in messages. Fails with [`codes::INTERRUPTED_RESTORE`] when a restore merge into
/// `root` was interrupted; its staging directory is then kept as the sign of it.
pub fn sweep(root: &Dir, root_path: &Path, take_pulls: bool) -> Result<Swept> {
    let mut swept = Swept::default();
    let mut names = root.names().map_err(|e| Error::io(e, "scandir", root_path))?;
    names.sort_unstable();
    for name in names {
        let Some(parsed) = reserved::parse(name.as_bytes()) else { continue };
        if !is_ours(name.as_bytes()) {
            swept.foreign.push(name);
            continue;
        }
        if parsed.owner.is_some_and(alive) {
            continue;
        }
        let Ok(Some(crate::fsat::Node::Directory)) = root.node(&name) else {
            // A staged copy left as a file (a merge across file systems): just remove it.
            let _ = root.unlink(&name);
            continue;
        };
        // Only an extraction's, a pull's or a merge's journal means anything: they sit
        // beside the staged tree, where no staged member can be. (A restore's directory
        // holds the downloaded tree itself, which may name anything.)
        let journal = match parsed.kind {
            Kind::Restore => None,
            _ => root.open_dir_nofollow(&name).ok().and_then(|dir| read_journal(&dir).ok().flatten()),
        };
        if parsed.kind == Kind::Merge && journal.is_some() {
            return Err(interrupted_merge(&name, parsed.owner));
        }
        if parsed.kind == Kind::Pull && journal.is_some() && !take_pulls {
            continue; // the next pull into this root completes it
        }
        // Claim it: only one sweeper wins the rename.
        let claimed = unique_name(parsed.kind.prefix());
        match root.rename(&name, root, &claimed) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
            Err(e) => return Err(Error::io(e, "rename", &root_path.join(&name))),
        }
        match (parsed.kind, journal) {
            (Kind::Extract, Some(journal)) => {
                crate::tar::roll_forward(root, root_path, &claimed, &journal)?;
                let _ = root.remove_tree(&claimed);
                swept.completed += 1;
            }
            (Kind::Pull, Some(journal)) => swept.pulls.push((claimed, journal)),
            _ => {
                root.remove_tree(&claimed).map_err(|e| Error::io(e, "rm", &root_path.join(&claimed)))?;
                swept.removed += 1;
            }
        }
    }
    Ok(swept)
}

/// The error for a root whose restore merge was interrupted.
fn interrupted_merge(name: &OsStr, owner: Option<Owner>) -> Error {
    let who = owner.map(|o| format!(" by process {}", o.pid)).unwrap_or_default();
    Error::new(
        codes::INTERRUPTED_RESTORE,
        format!(
            "a restore merge into this directory{who} was interrupted and may be partly applied \
             (every entry is either its old or its new version); check the directory or run the \
             restore again from its baseline, after removing '{}' from the directory",
            name.to_string_lossy()
        ),
    )
}

/// A staging directory of this process, removed with everything in it when dropped (on
/// success as on failure; a killed process leaves it for the next [`sweep`]).
pub struct Staging {
    parent: Dir,
    /// Its name in `parent`.
    pub name: OsString,
    /// The staging directory itself.
    pub dir: Dir,
}

impl Staging {
    /// Creates a staging directory of `kind` in `root`.
    pub fn create(root: &Dir, kind: Kind) -> io::Result<Staging> {
        let parent = root.try_clone()?;
        let name = create(&parent, kind)?;
        let dir = match parent.open_dir_nofollow(&name) {
            Ok(dir) => dir,
            Err(e) => {
                let _ = parent.remove_tree(&name);
                return Err(e);
            }
        };
        Ok(Staging { parent, name, dir })
    }

    /// Writes its journal (see [`write_journal`]).
    pub fn journal(&self, content: &[u8]) -> io::Result<()> {
        write_journal(&self.dir, content)
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = self.parent.remove_tree(&self.name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reserved::{parse, Parsed, EXTRACT_PREFIX, MERGE_PREFIX, PULL_PREFIX, RESTORE_PREFIX, TREE};
    use std::fs;

    fn tmp(tag: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("pc-staging-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A pid that is not running (the highest free one below the kernel's maximum).
    fn dead_pid() -> u32 {
        (2..4_000_000u32).rev().find(|pid| process_start(*pid).is_err()).unwrap()
    }

    /// A tagged name of a dead owner: what a process of this host killed meanwhile left.
    fn dead_name(prefix: &str) -> String {
        name_owned_by(prefix, Owner { pid: dead_pid(), start: 7 }).into_string().unwrap()
    }

    fn listing(root: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            fs::read_dir(root).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    #[test]
    fn names_carry_their_owner_and_a_tag_only_this_host_makes() {
        for kind in Kind::ALL {
            let name = unique_name(kind.prefix());
            let parsed = parse(name.as_bytes()).unwrap();
            assert_eq!(parsed, Parsed { kind, owner: Some(own()), tagged: true });
            assert!(is_ours(name.as_bytes()) && reserved::is_reserved(name.as_bytes()));
            assert_ne!(unique_name(kind.prefix()), name);
            // Any change to the name or its tag, and it is not ours.
            let text = name.to_str().unwrap();
            for at in [kind.prefix().len(), text.len() - 20, text.len() - 1] {
                let mut bytes = text.as_bytes().to_vec();
                bytes[at] = if bytes[at] == b'1' { b'2' } else { b'1' };
                assert!(!is_ours(&bytes), "{}", String::from_utf8_lossy(&bytes));
            }
            // Earlier forms carry no tag: reserved, never ours.
            let earlier = format!("{}{}-{}-0123456789abcdef", kind.prefix(), own().pid, own().start);
            assert!(reserved::is_reserved(earlier.as_bytes()) && !is_ours(earlier.as_bytes()));
        }
        #[cfg(target_os = "linux")]
        assert_ne!(own().start, 0, "the start time is read on Linux");
    }

    #[test]
    fn liveness_checks_pid_and_start_time() {
        assert!(alive(own()));
        let dead = dead_pid();
        assert!(!alive(Owner { pid: dead, start: 0 }));
        #[cfg(target_os = "linux")]
        {
            // Our pid with another start time: a reused pid, not the owner.
            assert!(!alive(Owner { pid: own().pid, start: own().start + 1 }));
            // pid 1 exists whoever we are.
            assert!(alive(Owner { pid: 1, start: 0 }));
        }
    }

    #[test]
    fn sweep_removes_stale_ones_and_keeps_live_ones() {
        let root_path = tmp("sweep");
        let root = Dir::open(&root_path).unwrap();
        let stale = dead_name(EXTRACT_PREFIX);
        fs::create_dir_all(root_path.join(&stale).join("tree/deep")).unwrap();
        fs::write(root_path.join(&stale).join("tree/deep/f"), b"x").unwrap();
        let stale_pull = dead_name(PULL_PREFIX);
        fs::create_dir(root_path.join(&stale_pull)).unwrap();
        let stale_restore = dead_name(RESTORE_PREFIX);
        fs::create_dir_all(root_path.join(&stale_restore).join("src")).unwrap();
        fs::write(root_path.join(&stale_restore).join("src/a.txt"), b"remote").unwrap();
        // A restore's directory holds the remote tree: a `journal` there is the remote's file.
        fs::write(root_path.join(&stale_restore).join(JOURNAL), b"merge\n").unwrap();
        let live = Staging::create(&root, Kind::Extract).unwrap();
        let reused = name_owned_by(MERGE_PREFIX, Owner { pid: own().pid, start: own().start + 1 });
        fs::create_dir(root_path.join(&reused)).unwrap();
        fs::write(root_path.join(".paperclip-merge-notes"), b"mine").unwrap();
        let swept = sweep(&root, &root_path, true).unwrap();
        assert_eq!(swept, Swept { removed: 4, completed: 0, pulls: vec![], foreign: vec![] });
        let mut expected = vec![".paperclip-merge-notes".to_string(), live.name.to_string_lossy().into_owned()];
        expected.sort();
        assert_eq!(listing(&root_path), expected);
        drop(live);
        assert_eq!(fs::read_dir(&root_path).unwrap().count(), 1);
        fs::remove_dir_all(&root_path).unwrap();
    }

    #[test]
    fn an_interrupted_merge_is_reported_and_a_pull_handed_back() {
        let root_path = tmp("journal");
        let root = Dir::open(&root_path).unwrap();
        let merge = dead_name(MERGE_PREFIX);
        fs::create_dir(root_path.join(&merge)).unwrap();
        fs::write(root_path.join(&merge).join(JOURNAL), b"merge\n").unwrap();
        let err = sweep(&root, &root_path, true).unwrap_err();
        assert_eq!(err.code, codes::INTERRUPTED_RESTORE);
        assert!(err.message.contains(&merge), "{}", err.message);
        assert!(!err.message.contains(&*root_path.to_string_lossy()), "no host path: {}", err.message);
        assert!(root_path.join(&merge).join(JOURNAL).exists(), "the sign is kept");
        fs::remove_dir_all(root_path.join(&merge)).unwrap();

        let pull = dead_name(PULL_PREFIX);
        fs::create_dir(root_path.join(&pull)).unwrap();
        fs::write(root_path.join(&pull).join(JOURNAL), b"{}").unwrap();
        let swept = sweep(&root, &root_path, true).unwrap();
        assert_eq!(swept.pulls.len(), 1);
        let (claimed, journal) = &swept.pulls[0];
        assert_eq!(journal, b"{}");
        assert_eq!(parse(claimed.as_bytes()).unwrap().owner, Some(own()));
        assert!(is_ours(claimed.as_bytes()), "the claimed name is a tagged one");
        assert!(root_path.join(claimed).join(JOURNAL).exists());
        assert!(!root_path.join(&pull).exists());
        fs::remove_dir_all(&root_path).unwrap();
    }

    /// What this host cannot prove it created is reported, never obeyed: no interrupted
    /// merge blocks the root, no planted extraction is completed, nothing is removed.
    #[test]
    fn foreign_look_alikes_are_reported_and_left_alone() {
        let root_path = tmp("foreign");
        let root = Dir::open(&root_path).unwrap();
        let dead = dead_pid();
        let forged_tag = format!("{MERGE_PREFIX}{dead}-0-{}", "0123456789abcdef".repeat(2));
        let earlier = format!("{EXTRACT_PREFIX}{dead}-0-0123456789abcdef");
        let earlier_pull = format!("{PULL_PREFIX}{dead}-0-fedcba9876543210");
        let live_forged = format!("{RESTORE_PREFIX}{}-{}-{}", own().pid, own().start, "ab".repeat(16));
        fs::create_dir(root_path.join(&forged_tag)).unwrap();
        fs::write(root_path.join(&forged_tag).join(JOURNAL), b"merge\n").unwrap();
        fs::create_dir_all(root_path.join(&earlier).join(TREE)).unwrap();
        fs::write(root_path.join(&earlier).join(TREE).join("planted.sh"), b"#!/bin/sh\n").unwrap();
        fs::write(root_path.join(&earlier).join(JOURNAL), b"extract 0\n").unwrap();
        fs::create_dir(root_path.join(&earlier_pull)).unwrap();
        fs::write(root_path.join(&earlier_pull).join(JOURNAL), b"{\"phase\":\"clear\",\"preserve\":[]}").unwrap();
        fs::write(root_path.join(&live_forged), b"a file").unwrap();
        let before = listing(&root_path);
        let swept = sweep(&root, &root_path, true).unwrap();
        let mut foreign: Vec<String> = swept.foreign.iter().map(|n| n.to_string_lossy().into_owned()).collect();
        foreign.sort();
        let mut expected = vec![forged_tag, earlier, earlier_pull, live_forged];
        expected.sort();
        assert_eq!(foreign, expected);
        assert_eq!((swept.removed, swept.completed, swept.pulls.len()), (0, 0, 0));
        assert_eq!(listing(&root_path), before, "nothing moved in, nothing removed");
        fs::remove_dir_all(&root_path).unwrap();
    }
}
