//! Mount changes under a watched root. A mount or an unmount raises no inotify event, so a
//! watcher keeps `/proc/self/mountinfo` open and polls it for `POLLPRI` (the kernel's "the
//! mount table changed" signal, consumed by the poll) at the start of each capture; only
//! then is the table read again and the mount points under the root compared with the last
//! reading. Elsewhere than Linux there is nothing to poll: [`Mounts::open`] gives `None`.

use std::collections::BTreeMap;
use std::path::Path;
#[cfg(target_os = "linux")]
use std::path::PathBuf;

/// The mount points under one root, kept current.
pub(super) struct Mounts {
    #[cfg(target_os = "linux")]
    file: std::fs::File,
    /// The root, canonical (mount points are listed by their real paths).
    #[cfg(target_os = "linux")]
    root: PathBuf,
    /// Mount point (relative to the root, `""` the root itself) → its mounts' ids, in the
    /// table's order (stacked mounts at one point each have one).
    points: BTreeMap<String, Vec<u64>>,
}

impl Mounts {
    /// Starts following the mount points under `root`; `None` when that cannot be done here.
    pub(super) fn open(root: &Path) -> Option<Mounts> {
        #[cfg(target_os = "linux")]
        {
            let root = std::fs::canonicalize(root).ok()?;
            let file = std::fs::File::open("/proc/self/mountinfo").ok()?;
            let mut mounts = Mounts { file, root, points: BTreeMap::new() };
            mounts.points = mounts.read()?;
            Some(mounts)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = root;
            None
        }
    }

    /// The mount points under the root (relative paths).
    pub(super) fn points(&self) -> impl Iterator<Item = &str> {
        self.points.keys().map(String::as_str)
    }

    /// The mount points under the root whose mounts changed since the last call (mounted,
    /// unmounted, replaced), or `None` when the table could not be read (then anything may
    /// have changed).
    pub(super) fn changes(&mut self) -> Option<Vec<String>> {
        if !self.changed() {
            return Some(Vec::new());
        }
        let now = self.read()?;
        let mut out: Vec<String> =
            now.iter().filter(|(rel, ids)| self.points.get(*rel) != Some(*ids)).map(|(rel, _)| rel.clone()).collect();
        out.extend(self.points.keys().filter(|rel| !now.contains_key(*rel)).cloned());
        self.points = now;
        Some(out)
    }

    #[cfg(target_os = "linux")]
    fn changed(&self) -> bool {
        use std::os::fd::AsRawFd;
        let mut poll = libc::pollfd { fd: self.file.as_raw_fd(), events: libc::POLLPRI, revents: 0 };
        // SAFETY: one valid pollfd, no wait.
        let ready = unsafe { libc::poll(&mut poll, 1, 0) };
        // An error of the poll itself: read the table rather than miss a change.
        ready < 0 || poll.revents & (libc::POLLPRI | libc::POLLERR) != 0
    }

    #[cfg(not(target_os = "linux"))]
    fn changed(&self) -> bool {
        false
    }

    /// Reads the table: the mount points under the root.
    #[cfg(target_os = "linux")]
    fn read(&mut self) -> Option<BTreeMap<String, Vec<u64>>> {
        use std::io::{Read, Seek, SeekFrom};
        let mut text = Vec::new();
        self.file.seek(SeekFrom::Start(0)).ok()?;
        self.file.read_to_end(&mut text).ok()?;
        Some(parse(&text, &self.root))
    }

    #[cfg(not(target_os = "linux"))]
    fn read(&mut self) -> Option<BTreeMap<String, Vec<u64>>> {
        None
    }
}

/// The mount points under `root` in `mountinfo` text (`<id> <parent> <dev> <root> <mount
/// point> …`, the mount point with `\ooo` escapes).
#[cfg(any(target_os = "linux", test))]
fn parse(text: &[u8], root: &Path) -> BTreeMap<String, Vec<u64>> {
    use std::os::unix::ffi::OsStrExt;
    let mut points: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for line in text.split(|&b| b == b'\n') {
        let mut fields = line.split(|&b| b == b' ');
        let (Some(id), Some(point)) = (fields.next(), fields.nth(3)) else { continue };
        let Some(id) = std::str::from_utf8(id).ok().and_then(|id| id.parse().ok()) else { continue };
        let point = unescape(point);
        if let Ok(rel) = Path::new(std::ffi::OsStr::from_bytes(&point)).strip_prefix(root) {
            points.entry(rel.to_string_lossy().into_owned()).or_default().push(id);
        }
    }
    points
}

/// Undoes `mountinfo`'s octal escapes (`\040` for a space, `\134` for a backslash, …).
#[cfg(any(target_os = "linux", test))]
fn unescape(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let octal = raw.get(i + 1..i + 4).filter(|d| raw[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(digits) => {
                out.push(digits.iter().fold(0u8, |n, d| n.wrapping_mul(8).wrapping_add(d - b'0')));
                i += 4;
            }
            None => {
                out.push(raw[i]);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_mount_points_under_a_root() {
        let text = b"22 1 0:21 / /proc rw - proc proc rw\n\
            40 30 0:40 / /w/root/sub rw - tmpfs tmpfs rw\n\
            41 40 0:41 / /w/root/sub rw - tmpfs tmpfs rw\n\
            42 30 8:1 /src /w/root/with\\040space rw - ext4 /dev/sda1 rw\n\
            43 30 8:1 / /w/rootless rw - ext4 /dev/sda1 rw\n\
            44 30 8:1 / /w/root rw - ext4 /dev/sda1 rw\n";
        let points = parse(text, Path::new("/w/root"));
        let expected: BTreeMap<String, Vec<u64>> =
            [("".to_string(), vec![44]), ("sub".to_string(), vec![40, 41]), ("with space".to_string(), vec![42])]
                .into_iter()
                .collect();
        assert_eq!(points, expected);
        assert_eq!(unescape(b"a\\134b\\011c\\0"), b"a\\b\tc\\0");
    }
}
