//! Limits: the opt-in bounds on what an archive may create and the free-space floor,
//! charged at each member's header before its entry or any of its data is written.

use std::path::Path;

use crate::error::{codes, Error, Result};
use crate::fsat::Dir;

/// The `limits` of an extraction, by the names JS gives them (`maxBytes`, `maxEntries`,
/// `maxFileBytes`, `minFreeBytes`). The three bounds are opt-in; each is checked before
/// anything past it is written (at the member's header), failing with
/// `ERR_PAPERCLIP_NATIVE_ARCHIVE_LIMIT_EXCEEDED`. The free-space floor is on by default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArchiveLimits {
    /// Largest total of the members' data sizes, in bytes.
    pub max_bytes: Option<u64>,
    /// Largest number of members (files, directories, links; the root's `./` not counted).
    pub max_entries: Option<u64>,
    /// Largest data size of one member, in bytes.
    pub max_file_bytes: Option<u64>,
    /// The free-space floor: extraction is refused before the destination's file system
    /// would have less than this many bytes available, failing with
    /// `ERR_PAPERCLIP_NATIVE_INSUFFICIENT_SPACE`. `None`: [`default_min_free_bytes`];
    /// `Some(0)`: no check.
    pub min_free_bytes: Option<u64>,
}

/// The default free-space floor for a file system of `total` bytes: 2 % of it, at most
/// 1 GiB.
pub fn default_min_free_bytes(total: u64) -> u64 {
    (total / 50).min(1 << 30)
}

/// Data written between two `statvfs` calls of the free-space guard at most.
const SPACE_RECHECK_BYTES: u64 = 64 << 20;

/// The limits and the free-space guard, charged member by member before each is created.
pub(super) struct Budget {
    limits: ArchiveLimits,
    entries: u64,
    bytes: u64,
    /// `(floor, available at the last check, reserved since)`; `None` when off.
    space: Option<(u64, u64, u64)>,
}

impl Budget {
    /// No limits and no free-space floor (completing an interrupted extraction).
    pub(super) fn unlimited() -> Budget {
        Budget { limits: ArchiveLimits::default(), entries: 0, bytes: 0, space: None }
    }

    /// The budget of an extraction into `dest_root` (at `dest`) under `limits`.
    pub(super) fn new(limits: &ArchiveLimits, dest_root: &Dir, dest: &Path) -> Result<Budget> {
        let space = if limits.min_free_bytes == Some(0) {
            None
        } else {
            let (available, total) = dest_root.free_space().map_err(|e| Error::io(e, "statfs", dest))?;
            Some((limits.min_free_bytes.unwrap_or_else(|| default_min_free_bytes(total)), available, 0))
        };
        Ok(Budget { limits: *limits, entries: 0, bytes: 0, space })
    }

    /// Charges one member of `size` data bytes; refuses it when it breaches a limit or the
    /// free-space floor.
    pub(super) fn charge(&mut self, member: &str, size: u64, dest_root: &Dir, dest: &Path) -> Result<()> {
        let exceeded = |limit: &'static str, bound: u64, what: String| {
            Error::new(codes::ARCHIVE_LIMIT_EXCEEDED, format!("archive limit exceeded: {limit} is {bound} ({what})"))
                .with_limit(limit, bound)
        };
        if let Some(max) = self.limits.max_entries {
            if self.entries >= max {
                return Err(exceeded(
                    "maxEntries",
                    max,
                    format!("member '{member}' would be entry {}", self.entries + 1),
                ));
            }
        }
        if let Some(max) = self.limits.max_file_bytes {
            if size > max {
                return Err(exceeded("maxFileBytes", max, format!("member '{member}' declares {size} bytes")));
            }
        }
        let total = self.bytes.saturating_add(size);
        if let Some(max) = self.limits.max_bytes {
            if total > max {
                return Err(exceeded("maxBytes", max, format!("member '{member}' brings the total to {total} bytes")));
            }
        }
        if let Some((floor, available, reserved)) = self.space.as_mut() {
            let need = size.div_ceil(4096).saturating_mul(4096);
            let fits = |available: u64, reserved: u64| {
                available.saturating_sub(reserved).saturating_sub(need) >= *floor
                    && available >= reserved.saturating_add(need)
            };
            if !fits(*available, *reserved) || *reserved >= SPACE_RECHECK_BYTES {
                *available = dest_root.free_space().map_err(|e| Error::io(e, "statfs", dest))?.0;
                *reserved = 0;
                if !fits(*available, 0) {
                    return Err(Error::new(
                        codes::INSUFFICIENT_SPACE,
                        format!(
                            "not enough free space: member '{member}' ({size} bytes) would leave the destination's file system \
                             below its free-space floor of {floor} bytes ({available} bytes available)"
                        ),
                    ));
                }
            }
            *reserved += need;
        }
        self.entries += 1;
        self.bytes = total;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tar::extract::test_support::*;
    use crate::tar::testutil::*;

    /// Each limit passes exactly at its bound and refuses one past it, with the destination
    /// unchanged and no staging left.
    #[test]
    fn limits_hold_exactly_at_their_bounds() {
        let sandbox = Sandbox::new();
        let dest = sandbox.dest();
        fs::write(dest.join("keep"), b"keep").unwrap();
        let before = snapshot(&dest, true);
        let mut archive = RawArchive::new();
        archive.dir("d/", 0o755).file("d/a", &[1u8; 100]).file("b", &[2u8; 300]).symlink("l", "b");
        let archive = archive.finish();
        let cases = [
            (
                ArchiveLimits { max_entries: Some(4), ..Default::default() },
                ArchiveLimits { max_entries: Some(3), ..Default::default() },
                "maxEntries is 3",
            ),
            (
                ArchiveLimits { max_bytes: Some(400), ..Default::default() },
                ArchiveLimits { max_bytes: Some(399), ..Default::default() },
                "maxBytes is 399",
            ),
            (
                ArchiveLimits { max_file_bytes: Some(300), ..Default::default() },
                ArchiveLimits { max_file_bytes: Some(299), ..Default::default() },
                "maxFileBytes is 299",
            ),
        ];
        for (at, past, message) in cases {
            let err = run_with(&archive, &dest, &limited(past)).expect_err(message);
            assert_eq!(err.code, codes::ARCHIVE_LIMIT_EXCEEDED, "{}", err.message);
            assert!(err.message.contains(message), "{}", err.message);
            assert_same_tree(&snapshot(&dest, true), &before, message);
            assert_eq!(staging_leftovers(&dest), Vec::<String>::new());
            let out = TempDir::new("limits-at");
            assert_eq!(run_with(&archive, out.path(), &limited(at)).unwrap().entries, 4, "{message}");
        }
    }

    /// Serves a tar header declaring `size` bytes, then zeros for ever, counting what it
    /// handed out.
    struct Endless {
        header: Vec<u8>,
        served: std::rc::Rc<std::cell::Cell<u64>>,
    }

    impl Read for Endless {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let at = self.served.get() as usize;
            // A test that regresses fails here instead of filling the disk.
            if at > 64 << 20 {
                return Err(io::Error::other("the endless stream was read past 64 MiB"));
            }
            let n = buf.len().min(64 * 1024);
            for (i, byte) in buf[..n].iter_mut().enumerate() {
                *byte = self.header.get(at + i).copied().unwrap_or(0);
            }
            self.served.set(self.served.get() + n as u64);
            Ok(n)
        }
    }

    /// A member larger than the file system has free (by 10 GiB), in a stream that never
    /// ends, is refused at its header, by `maxFileBytes`, by `maxBytes` and by the
    /// free-space floor, before any data is read past the first buffer.
    #[test]
    fn a_huge_member_is_refused_at_its_header() {
        let probe = Sandbox::new();
        let (available, _) = Dir::open(&probe.dest()).unwrap().free_space().unwrap();
        let size = available + (10 << 30);
        let header = RawArchive::new().pax(&[("size", size.to_string().as_bytes())]).file("huge", b"").finish();
        let header = header[..header.len() - 1024].to_vec(); // without the end-of-archive blocks
        let cases = [
            (
                limited(ArchiveLimits { max_file_bytes: Some(1 << 20), ..Default::default() }),
                codes::ARCHIVE_LIMIT_EXCEEDED,
            ),
            (limited(ArchiveLimits { max_bytes: Some(1 << 30), ..Default::default() }), codes::ARCHIVE_LIMIT_EXCEEDED),
            (ExtractOptions::default(), codes::INSUFFICIENT_SPACE),
        ];
        for (opts, code) in cases {
            let sandbox = Sandbox::new();
            let served = std::rc::Rc::new(std::cell::Cell::new(0));
            let err = extract(
                Endless { header: header.clone(), served: served.clone() },
                &sandbox.dest(),
                &opts,
                |_| {},
                &AtomicBool::new(false),
            )
            .unwrap_err();
            assert_eq!(err.code, code, "{}", err.message);
            // Refused at the header: at most the reader's buffers were read, nothing written.
            assert!(served.get() <= 4 * COPY_BUFFER as u64, "read {} bytes", served.get());
            assert_eq!(fs::read_dir(sandbox.dest()).unwrap().count(), 0);
        }
    }

    /// The free-space floor: above what the file system has free, the first member with
    /// data is refused; 0 turns the check off.
    #[test]
    fn the_free_space_floor_refuses_before_writing() {
        let sandbox = Sandbox::new();
        let dest = sandbox.dest();
        let (available, _) = Dir::open(&dest).unwrap().free_space().unwrap();
        let archive = RawArchive::new().file("a", b"x").finish();
        let high = limited(ArchiveLimits { min_free_bytes: Some(available + (1 << 30)), ..Default::default() });
        let err = run_with(&archive, &dest, &high).unwrap_err();
        assert_eq!(err.code, codes::INSUFFICIENT_SPACE, "{}", err.message);
        assert!(!err.message.contains(&*dest.to_string_lossy()), "no host path: {}", err.message);
        assert_eq!(fs::read_dir(&dest).unwrap().count(), 0);
        let off = limited(ArchiveLimits { min_free_bytes: Some(0), ..Default::default() });
        run_with(&archive, &dest, &off).unwrap();
        assert_eq!(default_min_free_bytes(10 << 30), (10 << 30) / 50);
        assert_eq!(default_min_free_bytes(1 << 40), 1 << 30);
    }
}
