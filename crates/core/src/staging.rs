//! The staging directories our operations create inside a user's tree, in one place: their
//! names, who owns them, their journals, and the sweep that the next operation on the same
//! root runs before it starts.
//!
//! * **Names.** An extraction stages into `<root>/.paperclip-extract-<owner>-<nonce>/`, an
//!   SSH pull into `<root>/.paperclip-ssh-sync-back-<owner>-<nonce>/`, a restore merge into
//!   `<root>/.paperclip-merge-<owner>-<nonce>/`, where `<owner>` is `<pid>-<start>`: the
//!   creating process's id and its start time (clock ticks since boot, field 22 of
//!   `/proc/<pid>/stat` on Linux; 0, meaning unknown, elsewhere). The owner is part of the
//!   name, so a staging directory is never without its marker, not even for the instant
//!   after `mkdir`. [`is_staging_name`] is the one predicate the walks use to leave these
//!   names out of snapshots, packs and merges.
//! * **Liveness.** An owner is alive when a process with its pid exists and (where the start
//!   time is known) started at the same tick, so a reused pid is not mistaken for the owner.
//!   The merge lock judges its owner by pid alone; this is the same test, made exact.
//! * **Journal.** Just before an operation starts moving staged entries into place it writes
//!   `journal` into its staging directory (atomically: a temporary name, then a rename). A
//!   process killed during the moves leaves it behind.
//! * **Sweep.** [`sweep`] removes every staging directory of a dead owner that has no journal
//!   (an operation killed before it changed anything), completes an interrupted extraction
//!   from its journal (the staged entries are still there; the moves are renames, so every
//!   entry is either old or new), hands an interrupted pull back to its caller (which owns
//!   that apply) and refuses, with [`codes::INTERRUPTED_RESTORE`], to start on a root whose
//!   restore merge was interrupted. Staging directories of live owners (other processes, or
//!   other operations of this one) are left alone. Before acting on a stale directory the
//!   sweep renames it to a name of its own, so two sweeping processes never act on the same
//!   one.

use std::ffi::{OsStr, OsString};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{codes, Error, Result};
use crate::fsat::Dir;

/// Prefix of an extraction's staging directory.
pub const EXTRACT_PREFIX: &str = ".paperclip-extract-";
/// Prefix of an SSH pull's staging directory.
pub const PULL_PREFIX: &str = ".paperclip-ssh-sync-back-";
/// Prefix of a restore merge's staging directory (and of its staged copies).
pub const MERGE_PREFIX: &str = ".paperclip-merge-";
/// Prefix of the directory a sandbox restore extracts the remote workspace into before it
/// merges it (it holds no journal: the merge journals its own apply).
pub const RESTORE_PREFIX: &str = ".paperclip-sandbox-restore-";
/// The journal an operation writes into its staging directory before its first move.
pub const JOURNAL: &str = "journal";
/// The directory inside an extraction's or pull's staging directory that holds the members.
pub const TREE: &str = "tree";

/// Which operation a staging directory belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Extract,
    Pull,
    Merge,
    /// A sandbox restore's extracted copy of the remote workspace.
    Restore,
}

impl Kind {
    /// The name prefix of this kind.
    pub fn prefix(self) -> &'static str {
        match self {
            Kind::Extract => EXTRACT_PREFIX,
            Kind::Pull => PULL_PREFIX,
            Kind::Merge => MERGE_PREFIX,
            Kind::Restore => RESTORE_PREFIX,
        }
    }
}

/// The process that created a staging directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub pid: u32,
    /// Start time in clock ticks since boot; 0 when unknown (then only the pid is checked).
    pub start: u64,
}

/// A process's start time in clock ticks since boot (Linux: field 22 of `/proc/<pid>/stat`);
/// `Ok(None)` where that cannot be known, `Err(NotFound)` when there is no such process.
#[cfg(target_os = "linux")]
pub fn process_start(pid: u32) -> io::Result<Option<u64>> {
    let stat = std::fs::read(format!("/proc/{pid}/stat"))?;
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

/// A fresh name `<prefix><pid>-<start>-<nonce>` owned by this process.
pub fn unique_name(prefix: &str) -> OsString {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let clock = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    let nonce = clock.rotate_left(20) ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let Owner { pid, start } = own();
    OsString::from(format!("{prefix}{pid}-{start}-{nonce:016x}"))
}

/// What a staging name says about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed {
    pub kind: Kind,
    /// `None` for a name that records no owner (a pull staging directory named by
    /// `mkdtemp` in earlier versions).
    pub owner: Option<Owner>,
}

/// Parses one of our staging names: a known prefix followed by `<pid>-<start>-<16 hex>`,
/// or one of the earlier forms (`<32 hex>` with the pid in the first 8, from extraction and
/// merge; 6 `mkdtemp` characters, from the pull). `None` for any other name, so a user's own
/// `.paperclip-merge-notes` is not taken for ours.
pub fn parse(name: &[u8]) -> Option<Parsed> {
    let (kind, rest) = [Kind::Extract, Kind::Pull, Kind::Merge, Kind::Restore]
        .into_iter()
        .find_map(|kind| name.strip_prefix(kind.prefix().as_bytes()).map(|rest| (kind, rest)))?;
    let digits = |s: &[u8]| !s.is_empty() && s.len() <= 20 && s.iter().all(u8::is_ascii_digit);
    let hex = |s: &[u8], len: usize| s.len() == len && s.iter().all(u8::is_ascii_hexdigit);
    let text = std::str::from_utf8(rest).ok()?;
    let fields: Vec<&str> = text.split('-').collect();
    if let [pid, start, nonce] = fields[..] {
        if digits(pid.as_bytes()) && digits(start.as_bytes()) && hex(nonce.as_bytes(), 16) {
            let owner = Owner { pid: pid.parse().ok()?, start: start.parse().ok()? };
            return Some(Parsed { kind, owner: Some(owner) });
        }
        return None;
    }
    if matches!(kind, Kind::Extract | Kind::Merge) && hex(rest, 32) {
        let pid = u32::from_str_radix(&text[..8], 16).ok()?;
        return Some(Parsed { kind, owner: Some(Owner { pid, start: 0 }) });
    }
    if kind == Kind::Pull && rest.len() == 6 && rest.iter().all(u8::is_ascii_alphanumeric) {
        return Some(Parsed { kind, owner: None });
    }
    None
}

/// True for a name our staging uses: the walks skip these (and what is below them).
pub fn is_staging_name(name: &[u8]) -> bool {
    name.starts_with(b".paperclip-") && parse(name).is_some()
}

/// How old an owner-less staging directory must be before the sweep takes it for stale.
const OWNERLESS_STALE_SECS: i64 = 3600;

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
    let temporary = OsStr::new("journal.tmp");
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

/// True when the staging directory `name` in `root`, described by `parsed`, is stale.
fn is_stale(root: &Dir, name: &OsStr, parsed: Parsed) -> bool {
    match parsed.owner {
        Some(owner) => !alive(owner),
        None => root.lstat(name).is_ok_and(|st| {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
            #[allow(clippy::unnecessary_cast)] // `time_t` is not `i64` everywhere
            let mtime = st.0.st_mtime as i64;
            now - mtime > OWNERLESS_STALE_SECS
        }),
    }
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
}

/// Cleans up after dead operations on `root` (see the module docs); interrupted pulls are
/// claimed and returned only with `take_pulls`, else left alone. `root_path` is only used
/// in messages. Fails with [`codes::INTERRUPTED_RESTORE`] when a restore merge into
/// `root` was interrupted; its staging directory is then kept as the sign of it.
pub fn sweep(root: &Dir, root_path: &Path, take_pulls: bool) -> Result<Swept> {
    let mut swept = Swept::default();
    let names = root.names().map_err(|e| Error::io(e, "scandir", root_path))?;
    for name in names {
        let Some(parsed) = parse(name.as_bytes()) else { continue };
        if !is_stale(root, &name, parsed) {
            continue;
        }
        let Ok(Some(crate::fsat::Node::Directory)) = root.node(&name) else {
            // A staged copy left as a file (a merge across file systems): just remove it.
            let _ = root.unlink(&name);
            continue;
        };
        let journal = root.open_dir_nofollow(&name).ok().and_then(|dir| read_journal(&dir).ok().flatten());
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

    #[test]
    fn names_carry_their_owner_and_are_recognised() {
        for kind in [Kind::Extract, Kind::Pull, Kind::Merge, Kind::Restore] {
            let name = unique_name(kind.prefix());
            let parsed = parse(name.as_bytes()).unwrap();
            assert_eq!(parsed, Parsed { kind, owner: Some(own()) });
            assert!(is_staging_name(name.as_bytes()));
            assert_ne!(unique_name(kind.prefix()), name);
        }
        #[cfg(target_os = "linux")]
        assert_ne!(own().start, 0, "the start time is read on Linux");
        // Earlier forms.
        assert_eq!(
            parse(b".paperclip-extract-0000002a0000000100000000deadbeef"),
            Some(Parsed { kind: Kind::Extract, owner: Some(Owner { pid: 42, start: 0 }) })
        );
        assert_eq!(parse(b".paperclip-ssh-sync-back-aB3xYz"), Some(Parsed { kind: Kind::Pull, owner: None }));
        // A user's own names are not ours.
        for name in [
            &b".paperclip-merge-notes"[..],
            b".paperclip-extract-",
            b".paperclip-extract-1-2-3",
            b".paperclip-extract-1-2-0123456789abcdef-x",
            b"paperclip-extract-1-2-0123456789abcdef",
            b".paperclip-runtime",
            b".paperclip-ssh-sync-back-toolong",
        ] {
            assert!(!is_staging_name(name), "{}", String::from_utf8_lossy(name));
        }
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
        let dead = dead_pid();
        let stale = format!("{EXTRACT_PREFIX}{dead}-7-0123456789abcdef");
        fs::create_dir_all(root_path.join(&stale).join("tree/deep")).unwrap();
        fs::write(root_path.join(&stale).join("tree/deep/f"), b"x").unwrap();
        let stale_pull = format!("{PULL_PREFIX}{dead}-7-0123456789abcdef");
        fs::create_dir(root_path.join(&stale_pull)).unwrap();
        let stale_restore = format!("{RESTORE_PREFIX}{dead}-7-0123456789abcdef");
        fs::create_dir_all(root_path.join(&stale_restore).join("src")).unwrap();
        fs::write(root_path.join(&stale_restore).join("src/a.txt"), b"remote").unwrap();
        let live = Staging::create(&root, Kind::Extract).unwrap();
        let reused = format!("{MERGE_PREFIX}{}-{}-0123456789abcdef", own().pid, own().start + 1);
        fs::create_dir(root_path.join(&reused)).unwrap();
        fs::write(root_path.join(".paperclip-merge-notes"), b"mine").unwrap();
        let swept = sweep(&root, &root_path, true).unwrap();
        assert_eq!(swept, Swept { removed: 4, completed: 0, pulls: vec![] });
        let mut left: Vec<String> =
            fs::read_dir(&root_path).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        left.sort();
        let mut expected = vec![".paperclip-merge-notes".to_string(), live.name.to_string_lossy().into_owned()];
        expected.sort();
        assert_eq!(left, expected);
        drop(live);
        assert_eq!(fs::read_dir(&root_path).unwrap().count(), 1);
        fs::remove_dir_all(&root_path).unwrap();
    }

    #[test]
    fn an_interrupted_merge_is_reported_and_a_pull_handed_back() {
        let root_path = tmp("journal");
        let root = Dir::open(&root_path).unwrap();
        let dead = dead_pid();
        let merge = format!("{MERGE_PREFIX}{dead}-0-0123456789abcdef");
        fs::create_dir(root_path.join(&merge)).unwrap();
        fs::write(root_path.join(&merge).join(JOURNAL), b"merge\n").unwrap();
        let err = sweep(&root, &root_path, true).unwrap_err();
        assert_eq!(err.code, codes::INTERRUPTED_RESTORE);
        assert!(err.message.contains(&merge), "{}", err.message);
        assert!(!err.message.contains(&*root_path.to_string_lossy()), "no host path: {}", err.message);
        assert!(root_path.join(&merge).join(JOURNAL).exists(), "the sign is kept");
        fs::remove_dir_all(root_path.join(&merge)).unwrap();

        let pull = format!("{PULL_PREFIX}{dead}-0-0123456789abcdef");
        fs::create_dir(root_path.join(&pull)).unwrap();
        fs::write(root_path.join(&pull).join(JOURNAL), b"{}").unwrap();
        let swept = sweep(&root, &root_path, true).unwrap();
        assert_eq!(swept.pulls.len(), 1);
        let (claimed, journal) = &swept.pulls[0];
        assert_eq!(journal, b"{}");
        assert_eq!(parse(claimed.as_bytes()).unwrap().owner, Some(own()));
        assert!(root_path.join(claimed).join(JOURNAL).exists());
        assert!(!root_path.join(&pull).exists());
        fs::remove_dir_all(&root_path).unwrap();
    }
}
