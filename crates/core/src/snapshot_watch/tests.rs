//! The watcher's unit tests: every capture equals a cold capture.

use super::*;
use crate::reserved::OnReserved;
use crate::snapshot::{self, Entry};
use crate::walk::ReaddirErrors;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};

/// A scratch directory, removed when dropped (also when a test panics).
struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn tmp(tag: &str) -> Scratch {
    let base = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    let dir = base.join(format!("pc-watch-{tag}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

fn options() -> WatchOptions {
    WatchOptions { threads: 2, max_watches: usize::MAX }
}

/// The watcher's state as sorted `(path, entry)` pairs.
fn state(watcher: &SnapshotWatcher) -> Vec<(String, Entry)> {
    let mut out = Vec::new();
    let mut stack = vec![String::new()];
    while let Some(dir) = stack.pop() {
        for child in watcher.children(&dir).unwrap_or_else(|| panic!("no state for {dir:?}")) {
            let rel = join_rel(&dir, &child.name);
            if child.stat.kind == Kind::Dir {
                stack.push(rel.clone());
            }
            if let Some(entry) = &child.entry {
                out.push((rel, entry.clone()));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// A cold capture as sorted `(path, entry)` pairs.
fn cold(root: &Path, exclude: &[String]) -> Vec<(String, Entry)> {
    let snap = snapshot::capture(&snapshot::CaptureOptions {
        root,
        exclude,
        threads: 2,
        previous: None,
        hash_only: None,
        readdir_errors: ReaddirErrors::TreatAsEmpty,
        on_reserved: OnReserved::Skip,
        cancel: &AtomicBool::new(false),
    })
    .unwrap();
    let mut out: Vec<(String, Entry)> = snap
        .tree
        .nodes
        .iter()
        .zip(snap.entries)
        .filter_map(|(node, entry)| entry.map(|e| (node.rel.clone(), e)))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn capture(watcher: &mut SnapshotWatcher) -> Delta {
    watcher.capture(&AtomicBool::new(false)).unwrap()
}

fn seed_tree(root: &Path) {
    fs::create_dir_all(root.join("a/b/c")).unwrap();
    fs::create_dir_all(root.join("d/e")).unwrap();
    fs::create_dir_all(root.join("node_modules/pkg")).unwrap();
    fs::write(root.join("a/one"), b"1").unwrap();
    fs::write(root.join("a/b/two"), b"22").unwrap();
    fs::write(root.join("a/b/c/three"), b"333").unwrap();
    fs::write(root.join("d/e/four"), b"4444").unwrap();
    fs::write(root.join("node_modules/pkg/index.js"), b"x").unwrap();
    symlink("../a/one", root.join("d/link")).unwrap();
}

#[test]
fn repeat_captures_equal_cold_captures_after_every_kind_of_change() {
    let root = tmp("kinds");
    let outside = tmp("kinds-outside");
    seed_tree(&root);
    let exclude = vec!["node_modules".to_string()];
    let mut watcher = SnapshotWatcher::new(&root, &exclude, options());
    let first = capture(&mut watcher);
    assert!(first.reset);
    assert_eq!(state(&watcher), cold(&root, &exclude));
    assert_eq!(watcher.counters().full_walks, 1);
    assert_eq!(watcher.watches(), 6, "root, a, a/b, a/b/c, d, d/e (node_modules excluded)");

    let steps: Vec<Box<dyn Fn()>> = vec![
        Box::new(|| fs::write(root.join("a/new"), b"new").unwrap()),
        Box::new(|| fs::remove_file(root.join("a/one")).unwrap()),
        Box::new(|| fs::rename(root.join("a/b/c"), root.join("d/c-moved")).unwrap()),
        Box::new(|| {
            fs::remove_dir_all(root.join("d/e")).unwrap();
            fs::write(root.join("d/e"), b"now a file").unwrap();
        }),
        Box::new(|| {
            fs::remove_dir_all(root.join("d/c-moved")).unwrap();
            symlink("/etc", root.join("d/c-moved")).unwrap();
        }),
        Box::new(|| fs::set_permissions(root.join("a/b/two"), fs::Permissions::from_mode(0o755)).unwrap()),
        Box::new(|| {
            fs::create_dir_all(outside.join("sub/deeper")).unwrap();
            fs::write(outside.join("sub/deeper/f"), b"from outside").unwrap();
            fs::rename(outside.join("sub"), root.join("a/b/sub")).unwrap();
        }),
        Box::new(|| fs::write(root.join("a/b/sub/deeper/f"), b"changed inside a moved-in subtree").unwrap()),
        Box::new(|| fs::write(root.join("node_modules/pkg/index.js"), b"excluded change").unwrap()),
    ];
    for (i, step) in steps.iter().enumerate() {
        step();
        capture(&mut watcher);
        assert_eq!(state(&watcher), cold(&root, &exclude), "after step {i}");
    }
    let counters = watcher.counters();
    assert_eq!(counters.full_walks, 1, "{counters:?}");
    assert_eq!(counters.overflow, 0);
    assert!(counters.dirs_reread >= steps.len() as u64 - 1, "{counters:?}");
    assert!(counters.subtree_rewalks >= 2, "the moved directory and the moved-in subtree: {counters:?}");
    assert!(counters.dropped_watch >= 2, "deleted and moved directories: {counters:?}");
    drop(steps);
    fs::remove_dir_all(root).unwrap();
    fs::remove_dir_all(outside).unwrap();
}

#[test]
fn an_unchanged_tree_rereads_only_racy_directories_and_reuses_hashes() {
    let root = tmp("quiet");
    seed_tree(&root);
    let mut watcher = SnapshotWatcher::new(&root, &[], options());
    capture(&mut watcher);
    // Everything was just written: every directory with files is racy once.
    let second = capture(&mut watcher);
    let counters = watcher.counters();
    assert!(counters.racy_window >= 4, "{counters:?}");
    assert_eq!(counters.hashes_reused, 0, "racy files are re-read: {counters:?}");
    assert!(!second.reset);
    // Pretend the captures were long ago: nothing is racy, nothing is re-read.
    watcher.last_start_ns = now_ns() + 10 * RACY_GRANULARITY_NS;
    watcher.racy.clear();
    let reread = watcher.counters().dirs_reread;
    let third = capture(&mut watcher);
    assert_eq!(watcher.counters().dirs_reread, reread);
    assert!(third.changed.is_empty() && third.removed.is_empty(), "{third:?}");
    // A change re-reads one directory and reuses its other hashes.
    watcher.last_start_ns = 0;
    fs::write(root.join("a/b/extra"), b"e").unwrap();
    let fourth = capture(&mut watcher);
    assert_eq!(fourth.changed, vec!["a/b".to_string()]);
    assert_eq!(watcher.counters().dirs_reread, reread + 1);
    assert_eq!(state(&watcher), cold(&root, &[]));
    fs::remove_dir_all(root).unwrap();
}

#[test]
fn a_racy_file_with_an_unchanged_identity_is_rehashed() {
    let root = tmp("racy");
    fs::write(root.join("f"), b"before").unwrap();
    let mut watcher = SnapshotWatcher::new(&root, &[], options());
    capture(&mut watcher);
    // Forge the state: a wrong hash under the file's current identity. Within the racy
    // window it must not be reused; past it, it would be (proving the rule decides).
    watcher.dirs.get_mut("").unwrap().children[0].entry = Some(Entry::File { mode: 0o100644, hash: [9u8; 32] });
    watcher.racy.insert(String::new());
    capture(&mut watcher);
    assert_eq!(state(&watcher), cold(&root, &[]));
    watcher.dirs.get_mut("").unwrap().children[0].entry = Some(Entry::File { mode: 0o100644, hash: [9u8; 32] });
    watcher.racy.insert(String::new());
    watcher.last_start_ns = now_ns() + 10 * RACY_GRANULARITY_NS;
    capture(&mut watcher);
    assert_ne!(state(&watcher), cold(&root, &[]), "past the window the (forged) hash is reused");
    fs::remove_dir_all(root).unwrap();
}

#[test]
fn an_overflowed_event_queue_falls_back_to_a_full_walk() {
    let max: usize = fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(16384);
    let root = tmp("overflow");
    fs::create_dir_all(root.join("burst")).unwrap();
    let mut watcher = SnapshotWatcher::new(&root, &[], options());
    capture(&mut watcher);
    for i in 0..max + 100 {
        fs::File::create(root.join(format!("burst/{i}"))).unwrap();
    }
    let delta = capture(&mut watcher);
    assert!(delta.reset);
    assert_eq!(watcher.counters().overflow, 1);
    assert_eq!(watcher.counters().full_walks, 2);
    assert_eq!(state(&watcher), cold(&root, &[]));
    fs::remove_dir_all(root).unwrap();
}

#[test]
fn the_watch_limit_stops_watching_and_every_capture_walks() {
    let root = tmp("limit");
    seed_tree(&root);
    let mut watcher = SnapshotWatcher::new(&root, &[], WatchOptions { threads: 2, max_watches: 3 });
    capture(&mut watcher);
    assert_eq!(watcher.counters().watch_limit, 1);
    assert_eq!(watcher.unwatched_reason(), Some("watch-limit"));
    assert_eq!(watcher.watches(), 0);
    fs::write(root.join("a/b/c/three"), b"changed").unwrap();
    let delta = capture(&mut watcher);
    assert!(delta.reset);
    assert_eq!(watcher.counters().full_walks, 2);
    assert_eq!(state(&watcher), cold(&root, &[]));
    fs::remove_dir_all(root).unwrap();
}

#[test]
fn a_replaced_root_is_walked_again() {
    let root = tmp("root");
    seed_tree(&root);
    let mut watcher = SnapshotWatcher::new(&root, &[], options());
    capture(&mut watcher);
    fs::remove_dir_all(&root).unwrap();
    fs::create_dir_all(root.join("fresh")).unwrap();
    let delta = capture(&mut watcher);
    assert!(delta.reset);
    assert_eq!(state(&watcher), cold(&root, &[]));
    assert_eq!(watcher.counters().full_walks, 2);
    fs::remove_dir_all(&root).unwrap();
    // A missing root reads as empty, as a cold capture reads it.
    capture(&mut watcher);
    assert_eq!(state(&watcher), Vec::new());
}

/// Throws away every queued event, as if the kernel had lost them.
fn lose_events(watcher: &mut SnapshotWatcher) {
    let mut lost = Vec::new();
    watcher.inotify.as_mut().unwrap().drain(&mut lost).unwrap();
}

#[test]
fn a_directory_replaced_unseen_is_caught_by_its_identity_when_its_parent_is_reread() {
    let root = tmp("unseen");
    seed_tree(&root);
    let mut watcher = SnapshotWatcher::new(&root, &[], options());
    capture(&mut watcher);
    fs::remove_dir_all(root.join("d/e")).unwrap();
    fs::create_dir_all(root.join("d/e/new")).unwrap();
    fs::write(root.join("d/e/new/file"), b"new").unwrap();
    lose_events(&mut watcher);
    watcher.racy.insert("d".into()); // something re-reads the parent
    capture(&mut watcher);
    assert_eq!(state(&watcher), cold(&root, &[]));
    assert!(watcher.counters().directory_replaced >= 1, "{:?}", watcher.counters());
    fs::remove_dir_all(root).unwrap();
}

#[test]
fn a_root_replaced_unseen_is_caught_by_its_identity() {
    let root = tmp("root-unseen");
    seed_tree(&root);
    let mut watcher = SnapshotWatcher::new(&root, &[], options());
    capture(&mut watcher);
    fs::remove_dir_all(&root).unwrap();
    fs::create_dir_all(root.join("other")).unwrap();
    lose_events(&mut watcher);
    let delta = capture(&mut watcher);
    assert!(delta.reset);
    assert_eq!(state(&watcher), cold(&root, &[]));
    assert_eq!(watcher.counters().directory_replaced, 1);
    fs::remove_dir_all(root).unwrap();
}

#[test]
fn a_dropped_watch_is_replaced_so_later_changes_are_seen() {
    let root = tmp("dropped");
    seed_tree(&root);
    let mut watcher = SnapshotWatcher::new(&root, &[], options());
    capture(&mut watcher);
    // The kernel drops the watch of a/b (as on an unmount): IN_IGNORED, nothing else.
    let wd = watcher.dirs["a/b"].wd.unwrap();
    watcher.inotify.as_ref().unwrap().remove(wd);
    capture(&mut watcher);
    assert_eq!(watcher.counters().dropped_watch, 1);
    assert!(watcher.dirs["a/b"].wd.is_some_and(|new| new != wd), "a/b watched again");
    watcher.last_start_ns = 0;
    fs::write(root.join("a/b/later"), b"later").unwrap();
    capture(&mut watcher);
    assert_eq!(state(&watcher), cold(&root, &[]));
    fs::remove_dir_all(root).unwrap();
}

#[test]
fn many_dirty_directories_of_one_level_are_read_in_parallel_and_still_exact() {
    let root = tmp("level");
    for i in 0..12 {
        fs::create_dir_all(root.join(format!("p{i}/q"))).unwrap();
        fs::write(root.join(format!("p{i}/f")), b"f").unwrap();
        fs::write(root.join(format!("p{i}/q/g")), b"g").unwrap();
    }
    let mut watcher = SnapshotWatcher::new(&root, &[], options());
    capture(&mut watcher);
    for i in 0..12 {
        fs::write(root.join(format!("p{i}/f")), format!("changed {i}")).unwrap();
        if i % 3 == 0 {
            fs::rename(root.join(format!("p{i}/q")), root.join(format!("p{}/moved{i}", (i + 1) % 12))).unwrap();
        }
    }
    let delta = capture(&mut watcher);
    assert!(!delta.reset);
    assert_eq!(state(&watcher), cold(&root, &[]));
    assert!(watcher.counters().dirs_reread >= 12, "{:?}", watcher.counters());
    fs::write(root.join("p1/moved0/g"), b"seen through the new watch").unwrap();
    watcher.last_start_ns = 0;
    capture(&mut watcher);
    assert_eq!(state(&watcher), cold(&root, &[]));
    fs::remove_dir_all(root).unwrap();
}

#[test]
fn a_file_written_through_another_hard_link_is_seen() {
    let root = tmp("links");
    let outside = tmp("links-outside");
    seed_tree(&root);
    fs::hard_link(root.join("d/e/four"), outside.join("other-name")).unwrap();
    let mut watcher = SnapshotWatcher::new(&root, &[], options());
    capture(&mut watcher);
    watcher.racy.clear(); // only the link rule may re-read d/e
    fs::write(outside.join("other-name"), b"written elsewhere").unwrap();
    capture(&mut watcher);
    assert_eq!(state(&watcher), cold(&root, &[]));
    assert!(watcher.counters().hard_links >= 1);
    fs::remove_dir_all(root).unwrap();
    fs::remove_dir_all(outside).unwrap();
}

/// A hard link made after the first capture, from one watched directory into another, then
/// written through its new name: the write raises an event only in the new name's
/// directory, so the old name's directory must be found by the inode they share.
#[test]
fn a_hard_link_made_after_the_first_capture_is_followed_to_the_name_already_held() {
    let root = tmp("late-link");
    fs::create_dir_all(root.join("a")).unwrap();
    fs::create_dir_all(root.join("b")).unwrap();
    fs::write(root.join("a/f"), b"before").unwrap();
    let mut watcher = SnapshotWatcher::new(&root, &[], options());
    capture(&mut watcher);
    watcher.last_start_ns = 0; // nothing racy: only events and the link rule re-read
    watcher.racy.clear();
    fs::hard_link(root.join("a/f"), root.join("b/g")).unwrap();
    capture(&mut watcher);
    assert_eq!(state(&watcher), cold(&root, &[]));
    watcher.last_start_ns = 0;
    watcher.racy.clear();
    fs::write(root.join("b/g"), b"written through the new name").unwrap();
    capture(&mut watcher);
    assert_eq!(state(&watcher), cold(&root, &[]), "after a write through the new name");
    watcher.last_start_ns = 0;
    watcher.racy.clear();
    fs::write(root.join("b/g"), b"and again, later").unwrap();
    capture(&mut watcher);
    assert_eq!(state(&watcher), cold(&root, &[]), "after a later write");
}

/// Runs `test` (this binary's test of that name) again in a private mount namespace as
/// root: `Some(())` when this is that run, `None` after the parent ran it (or skipped it,
/// saying why, when not root or `unshare -m` fails).
fn in_private_mount_namespace(test: &str) -> Option<()> {
    if std::env::var_os("PC_WATCH_MOUNT_NAMESPACE").is_some() {
        return Some(());
    }
    // SAFETY: plain syscall without arguments.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped {test}: mounting needs root (run the tests as root to cover mounts)");
        return None;
    }
    let probe = std::process::Command::new("unshare").args(["-m", "--propagation", "private", "true"]).output();
    match probe {
        Ok(out) if out.status.success() => {}
        Ok(out) => {
            eprintln!("skipped {test}: unshare -m failed: {}", String::from_utf8_lossy(&out.stderr).trim());
            return None;
        }
        Err(e) => {
            eprintln!("skipped {test}: unshare is not available: {e}");
            return None;
        }
    }
    let status = std::process::Command::new("unshare")
        .args(["-m", "--propagation", "private"])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env("PC_WATCH_MOUNT_NAMESPACE", "1")
        .status()
        .unwrap();
    assert!(status.success(), "{test} failed in its mount namespace");
    None
}

fn mount(source: &Path, target: &Path, fstype: Option<&str>, flags: libc::c_ulong) {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).unwrap();
    let fstype = fstype.map(|t| CString::new(t).unwrap());
    let (source, target) = (c(source), c(target));
    // SAFETY: valid NUL-terminated strings; no data argument.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.as_ref().map_or(std::ptr::null(), |t| t.as_ptr()),
            flags,
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "mount {target:?}: {}", io::Error::last_os_error());
}

fn umount(target: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let target = std::ffi::CString::new(target.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    let rc = unsafe { libc::umount2(target.as_ptr(), 0) };
    assert_eq!(rc, 0, "umount {target:?}: {}", io::Error::last_os_error());
}

/// Mounts raise no inotify event: a tmpfs over a watched subdirectory, a bind mount over one
/// (its source outside the tree, and one inside it), writes through a bind's source, a bind
/// mount over a single file, and each unmount. Every capture equals a cold one, and the
/// mount changes are counted.
#[test]
fn mount_changes_under_the_root_are_walked() {
    if in_private_mount_namespace("snapshot_watch::tests::mount_changes_under_the_root_are_walked").is_none() {
        return;
    }
    let root = tmp("mounts");
    let outside = tmp("mounts-outside");
    fs::create_dir_all(root.join("sub/deep")).unwrap();
    fs::write(root.join("sub/deep/old.txt"), b"old").unwrap();
    fs::create_dir_all(root.join("other")).unwrap();
    fs::write(root.join("other/hidden.txt"), b"hidden by the bind").unwrap();
    fs::create_dir_all(root.join("inner/x")).unwrap();
    fs::write(root.join("inner/x/f"), b"inner").unwrap();
    fs::create_dir_all(root.join("mirror")).unwrap();
    fs::write(root.join("file.txt"), b"the file").unwrap();
    fs::create_dir_all(outside.join("src/nested")).unwrap();
    fs::write(outside.join("src/nested/from-source.txt"), b"source").unwrap();
    fs::write(outside.join("single"), b"a single file").unwrap();
    let mut watcher = SnapshotWatcher::new(&root, &[], options());
    capture(&mut watcher);
    let check = |what: &str, watcher: &mut SnapshotWatcher| {
        watcher.last_start_ns = 0; // nothing racy: only events and mount checks re-read
        watcher.racy.clear();
        capture(watcher);
        assert_eq!(state(watcher), cold(&root, &[]), "{what}");
    };
    mount(Path::new("tmpfs"), &root.join("sub"), Some("tmpfs"), 0);
    fs::write(root.join("sub/new.txt"), b"on the tmpfs").unwrap();
    check("tmpfs over sub", &mut watcher);
    fs::write(root.join("sub/later.txt"), b"later, on the tmpfs").unwrap();
    check("a write on the tmpfs", &mut watcher);
    umount(&root.join("sub"));
    check("tmpfs unmounted", &mut watcher);
    mount(&outside.join("src"), &root.join("other"), None, libc::MS_BIND);
    check("bind over other", &mut watcher);
    fs::write(outside.join("src/nested/through-source.txt"), b"written through the source").unwrap();
    fs::write(outside.join("src/nested/from-source.txt"), b"changed through the source").unwrap();
    check("writes through the bind's source", &mut watcher);
    mount(&root.join("inner"), &root.join("mirror"), None, libc::MS_BIND);
    check("bind of a directory of the tree", &mut watcher);
    fs::write(root.join("inner/x/f"), b"changed through the first name").unwrap();
    check("a write through the other path of the same directory", &mut watcher);
    mount(&outside.join("single"), &root.join("file.txt"), None, libc::MS_BIND);
    check("bind over a file", &mut watcher);
    fs::write(outside.join("single"), b"the single file, changed through its source").unwrap();
    check("a write through the file's source", &mut watcher);
    for target in ["file.txt", "mirror", "other"] {
        umount(&root.join(target));
        check(&format!("{target} unmounted"), &mut watcher);
    }
    let counters = watcher.counters();
    eprintln!("mount test counters: {counters:?}");
    assert!(counters.mount_changes >= 8, "{counters:?}");
    assert_eq!(counters.full_walks, 1, "{counters:?}");
}
