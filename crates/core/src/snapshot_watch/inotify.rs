//! The kernel side of a watched snapshot: inotify's ABI spelled out, and a non-blocking
//! inotify instance (Linux) or its stand-in that watches nothing (elsewhere).

// inotify's kernel ABI (`<sys/inotify.h>`), spelled out so the state logic compiles everywhere.
pub(super) const IN_MODIFY: u32 = 0x0000_0002;
pub(super) const IN_ATTRIB: u32 = 0x0000_0004;
pub(super) const IN_MOVED_FROM: u32 = 0x0000_0040;
pub(super) const IN_MOVED_TO: u32 = 0x0000_0080;
pub(super) const IN_CREATE: u32 = 0x0000_0100;
pub(super) const IN_DELETE: u32 = 0x0000_0200;
pub(super) const IN_DELETE_SELF: u32 = 0x0000_0400;
pub(super) const IN_MOVE_SELF: u32 = 0x0000_0800;
pub(super) const IN_UNMOUNT: u32 = 0x0000_2000;
pub(super) const IN_Q_OVERFLOW: u32 = 0x0000_4000;
pub(super) const IN_IGNORED: u32 = 0x0000_8000;
pub(super) const IN_ONLYDIR: u32 = 0x0100_0000;
pub(super) const IN_DONT_FOLLOW: u32 = 0x0200_0000;
/// What each directory's watch asks for.
pub(super) const WATCH_MASK: u32 = IN_MODIFY
    | IN_ATTRIB
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR;
/// Events that say a watched directory itself is gone from its path.
pub(super) const SELF_GONE: u32 = IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT;

/// One raw inotify event.
#[derive(Debug)]
pub(super) struct Event {
    pub(super) wd: i32,
    pub(super) mask: u32,
    pub(super) name: Vec<u8>,
}

#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::CString;
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    use super::Event;

    /// A non-blocking inotify instance; dropping it closes the descriptor and every watch.
    pub struct Inotify {
        fd: OwnedFd,
        buffer: Vec<u8>,
    }

    impl Inotify {
        pub fn new() -> io::Result<Inotify> {
            // SAFETY: plain syscall; the descriptor is owned from here on.
            let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `fd` is a fresh descriptor nobody else owns.
            Ok(Inotify { fd: unsafe { OwnedFd::from_raw_fd(fd) }, buffer: vec![0u8; 64 * 1024] })
        }

        pub fn add(&self, path: &Path, mask: u32) -> io::Result<i32> {
            let c =
                CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
            // SAFETY: `c` is a valid NUL-terminated path.
            let wd = unsafe { libc::inotify_add_watch(self.fd.as_raw_fd(), c.as_ptr(), mask) };
            if wd < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(wd)
            }
        }

        pub fn remove(&self, wd: i32) {
            // SAFETY: plain syscall; an unknown wd only fails with EINVAL.
            unsafe { libc::inotify_rm_watch(self.fd.as_raw_fd(), wd) };
        }

        /// Appends every queued event to `out`, without blocking.
        pub fn drain(&mut self, out: &mut Vec<Event>) -> io::Result<()> {
            loop {
                // SAFETY: reads into our own buffer, within its length.
                let n = unsafe {
                    libc::read(self.fd.as_raw_fd(), self.buffer.as_mut_ptr() as *mut libc::c_void, self.buffer.len())
                };
                if n < 0 {
                    let err = io::Error::last_os_error();
                    match err.raw_os_error() {
                        Some(libc::EAGAIN) => return Ok(()),
                        Some(libc::EINTR) => continue,
                        _ => return Err(err),
                    }
                }
                let n = n as usize;
                if n == 0 {
                    return Ok(());
                }
                let mut at = 0;
                while at + 16 <= n {
                    let word = |i: usize| [self.buffer[i], self.buffer[i + 1], self.buffer[i + 2], self.buffer[i + 3]];
                    let wd = i32::from_ne_bytes(word(at));
                    let mask = u32::from_ne_bytes(word(at + 4));
                    let len = u32::from_ne_bytes(word(at + 12)) as usize;
                    let raw = &self.buffer[at + 16..(at + 16 + len).min(n)];
                    let end = raw.iter().position(|b| *b == 0).unwrap_or(raw.len());
                    out.push(Event { wd, mask, name: raw[..end].to_vec() });
                    at += 16 + len;
                }
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod other {
    use std::io;
    use std::path::Path;

    use super::Event;

    /// No inotify here: every watcher works unwatched (a full walk per capture).
    pub struct Inotify;

    impl Inotify {
        pub fn new() -> io::Result<Inotify> {
            Err(io::Error::from(io::ErrorKind::Unsupported))
        }
        pub fn add(&self, _: &Path, _: u32) -> io::Result<i32> {
            Err(io::Error::from(io::ErrorKind::Unsupported))
        }
        pub fn remove(&self, _: i32) {}
        pub fn drain(&mut self, _: &mut Vec<Event>) -> io::Result<()> {
            Ok(())
        }
    }
}

#[cfg(target_os = "linux")]
pub(super) use linux::Inotify;
#[cfg(not(target_os = "linux"))]
pub(super) use other::Inotify;
