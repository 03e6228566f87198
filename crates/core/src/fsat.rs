//! An open directory and the `*at` calls relative to it (`fstatat`, `openat`, `readlinkat`,
//! `readdir` on the same descriptor, and the mutations `mkdirat`, `unlinkat`, `symlinkat`,
//! `renameat`): no path is re-resolved from the root for every entry (much cheaper on deep
//! trees), and nothing is ever followed through a symlink (`O_NOFOLLOW`,
//! `AT_SYMLINK_NOFOLLOW`), which the safety rules of merge and extract need.

use std::borrow::Cow;
use std::ffi::{CStr, CString, OsStr, OsString};
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

/// An open directory.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
}

/// A C string for a name (`EINVAL` when it holds a NUL byte).
pub fn c_name(name: &[u8]) -> io::Result<CString> {
    CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// A name the `*at` calls accept: an `OsStr` (checked for NUL bytes) or a ready `CStr`.
pub trait AtName {
    fn c_name(&self) -> io::Result<Cow<'_, CStr>>;
}

impl AtName for OsStr {
    fn c_name(&self) -> io::Result<Cow<'_, CStr>> {
        c_name(self.as_bytes()).map(Cow::Owned)
    }
}

impl AtName for OsString {
    fn c_name(&self) -> io::Result<Cow<'_, CStr>> {
        self.as_os_str().c_name()
    }
}

impl AtName for CStr {
    fn c_name(&self) -> io::Result<Cow<'_, CStr>> {
        Ok(Cow::Borrowed(self))
    }
}

impl AtName for CString {
    fn c_name(&self) -> io::Result<Cow<'_, CStr>> {
        Ok(Cow::Borrowed(self.as_c_str()))
    }
}

/// What `lstat` says a name is, for callers that only need the kind (and a regular file's
/// identity).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Node {
    Directory,
    Regular { dev: u64, ino: u64 },
    Symlink,
    Other,
}

/// The `lstat` result of [`Dir::lstat`]: what the walkers need, without a `Metadata`.
#[derive(Debug, Clone, Copy)]
pub struct RawStat(pub libc::stat);

impl Dir {
    /// Opens `path` as a directory (following symlinks in `path` itself, as `readdir` does).
    pub fn open(path: &Path) -> io::Result<Dir> {
        let c = c_name(path.as_os_str().as_bytes())?;
        // SAFETY: `c` is a valid NUL-terminated string; the result is checked.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor we own.
        Ok(Dir { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// Opens `path` as a directory, refusing to follow a symlink in its last component (the
    /// ancestors are resolved as usual: callers pass a canonical path).
    pub fn open_nofollow(path: &Path) -> io::Result<Dir> {
        let c = c_name(path.as_os_str().as_bytes())?;
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: `c` is a valid NUL-terminated string; the result is checked.
        let fd = retry(|| unsafe { libc::open(c.as_ptr(), flags) })?;
        // SAFETY: `fd` is a fresh descriptor we own.
        Ok(Dir { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// A second handle on the same directory.
    pub fn try_clone(&self) -> io::Result<Dir> {
        Ok(Dir { fd: self.fd.try_clone()? })
    }

    /// Opens the child directory `name`, refusing to follow a symlink there.
    pub fn open_dir_nofollow(&self, name: &(impl AtName + ?Sized)) -> io::Result<Dir> {
        let c = name.c_name()?;
        // SAFETY: valid descriptor and string; the result is checked.
        let fd = unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor we own.
        Ok(Dir { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// Opens the child directory `name` through a symlink there too (`tar -h` walks).
    pub fn open_dir_following(&self, name: &(impl AtName + ?Sized)) -> io::Result<Dir> {
        let c = name.c_name()?;
        // SAFETY: valid descriptor and string; the result is checked.
        let fd = retry(|| unsafe {
            libc::openat(self.fd.as_raw_fd(), c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC)
        })?;
        // SAFETY: `fd` is a fresh descriptor we own.
        Ok(Dir { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// The names in the directory, without `.` and `..`, in the order the kernel returns them.
    pub fn names(&self) -> io::Result<Vec<OsString>> {
        let mut out = Vec::new();
        self.each_entry(|name, _| out.push(OsString::from_vec(name.to_vec())))?;
        Ok(out)
    }

    /// The names in the directory with their `d_type` (`libc::DT_*`; `DT_UNKNOWN` where the
    /// file system does not say), without `.` and `..`, in the order the kernel returns them.
    pub fn entries(&self) -> io::Result<Vec<(OsString, u8)>> {
        let mut out = Vec::new();
        self.each_entry(|name, kind| out.push((OsString::from_vec(name.to_vec()), kind)))?;
        Ok(out)
    }

    /// Calls `each(name, d_type)` for every entry but `.` and `..`.
    ///
    /// On Linux this is `lseek` to the start and `getdents64` on the handle itself: no
    /// duplicate descriptor, `fstat`, `fcntl` or `close` per directory, as `fdopendir` needs.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn each_entry(&self, mut each: impl FnMut(&[u8], u8)) -> io::Result<()> {
        // Offsets of `struct linux_dirent64`: d_ino u64, d_off i64, d_reclen u16, d_type u8, d_name.
        const RECLEN_AT: usize = 16;
        const TYPE_AT: usize = 18;
        const NAME_AT: usize = 19;
        let fd = self.fd.as_raw_fd();
        // SAFETY: valid descriptor; the result is checked. Rewinds, so a second call lists again.
        if unsafe { libc::lseek(fd, 0, libc::SEEK_SET) } < 0 {
            return Err(io::Error::last_os_error());
        }
        // u64 words: the kernel writes 8-byte aligned records.
        let mut buf = vec![0u64; 4096];
        let bytes = buf.len() * std::mem::size_of::<u64>();
        loop {
            // SAFETY: `buf` is writable for `bytes` bytes; the result is checked.
            let n = unsafe { libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), bytes) };
            if n < 0 {
                let err = io::Error::last_os_error();
                if err.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(err);
            }
            if n == 0 {
                return Ok(());
            }
            // SAFETY: the kernel initialised the first `n` bytes of `buf`.
            let filled = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n as usize) };
            let mut at = 0;
            while at + NAME_AT < filled.len() {
                let reclen = u16::from_ne_bytes([filled[at + RECLEN_AT], filled[at + RECLEN_AT + 1]]) as usize;
                if reclen == 0 || at + reclen > filled.len() {
                    return Err(io::Error::from_raw_os_error(libc::EIO));
                }
                let record = &filled[at + NAME_AT..at + reclen];
                let name = &record[..record.iter().position(|&b| b == 0).unwrap_or(record.len())];
                if name != b"." && name != b".." {
                    each(name, filled[at + TYPE_AT]);
                }
                at += reclen;
            }
        }
    }

    /// Calls `each(name, d_type)` for every entry but `.` and `..`.
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    fn each_entry(&self, mut each: impl FnMut(&[u8], u8)) -> io::Result<()> {
        // fdopendir takes ownership of its descriptor, so give it a duplicate.
        // SAFETY: valid descriptor; results are checked.
        let dup = unsafe { libc::fcntl(self.fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
        if dup < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `dup` is a descriptor we own; on failure we close it ourselves.
        let stream = unsafe { libc::fdopendir(dup) };
        if stream.is_null() {
            let err = io::Error::last_os_error();
            // SAFETY: `dup` was not taken over by fdopendir.
            unsafe { libc::close(dup) };
            return Err(err);
        }
        // Rewind: the duplicate shares the file offset with `self.fd`.
        // SAFETY: `stream` is a valid DIR*.
        unsafe { libc::rewinddir(stream) };
        let result = loop {
            // SAFETY: errno is thread-local; resetting it distinguishes end from error.
            unsafe { *errno_location() = 0 };
            // SAFETY: `stream` is a valid DIR* owned by this loop.
            let entry = unsafe { libc::readdir(stream) };
            if entry.is_null() {
                // SAFETY: reading the thread-local errno.
                let errno = unsafe { *errno_location() };
                break if errno == 0 { Ok(()) } else { Err(io::Error::from_raw_os_error(errno)) };
            }
            // SAFETY: `d_name` is a NUL-terminated array inside the entry.
            let name = unsafe { CStr::from_ptr((*entry).d_name.as_ptr()) }.to_bytes();
            if name != b"." && name != b".." {
                // SAFETY: `entry` is valid until the next readdir.
                each(name, unsafe { (*entry).d_type });
            }
        };
        // SAFETY: closes the stream and the duplicate descriptor it owns.
        unsafe { libc::closedir(stream) };
        result
    }

    /// `lstat` of a child (`fstatat` with `AT_SYMLINK_NOFOLLOW`).
    pub fn lstat(&self, name: &(impl AtName + ?Sized)) -> io::Result<RawStat> {
        let c = name.c_name()?;
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: valid descriptor, string and out-pointer; the result is checked.
        let rc = unsafe { libc::fstatat(self.fd.as_raw_fd(), c.as_ptr(), st.as_mut_ptr(), libc::AT_SYMLINK_NOFOLLOW) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fstatat succeeded, so `st` is initialised.
        Ok(RawStat(unsafe { st.assume_init() }))
    }

    /// `stat` of a path relative to the directory, following symlinks (used only to ask
    /// where a symlink leads, never to act on it).
    pub fn stat_following(&self, rel: &(impl AtName + ?Sized)) -> io::Result<RawStat> {
        let c = rel.c_name()?;
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: valid descriptor, string and out-pointer; the result is checked.
        let rc = unsafe { libc::fstatat(self.fd.as_raw_fd(), c.as_ptr(), st.as_mut_ptr(), 0) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fstatat succeeded, so `st` is initialised.
        Ok(RawStat(unsafe { st.assume_init() }))
    }

    /// Whether the effective user may read the child `name` (`faccessat(R_OK, AT_EACCESS |
    /// AT_SYMLINK_NOFOLLOW)`): the permission check of an `open` for reading, without
    /// opening anything.
    pub fn check_readable(&self, name: &(impl AtName + ?Sized)) -> io::Result<()> {
        let c = name.c_name()?;
        let flags = libc::AT_EACCESS | libc::AT_SYMLINK_NOFOLLOW;
        // SAFETY: valid descriptor and string.
        retry(|| unsafe { libc::faccessat(self.fd.as_raw_fd(), c.as_ptr(), libc::R_OK, flags) }).map(drop)
    }

    /// Opens a child for reading; a symlink there fails (`ELOOP`) instead of being followed.
    pub fn open_file_nofollow(&self, name: &(impl AtName + ?Sized)) -> io::Result<File> {
        let c = name.c_name()?;
        // SAFETY: valid descriptor and string; the result is checked.
        let fd = unsafe {
            libc::openat(self.fd.as_raw_fd(), c.as_ptr(), libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor we own.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    /// Opens a child for reading without blocking on a FIFO swapped in (`O_NONBLOCK`), and
    /// without following a symlink there unless `follow`.
    pub fn open_file_for_reading(&self, name: &(impl AtName + ?Sized), follow: bool) -> io::Result<File> {
        let c = name.c_name()?;
        let mut flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_CLOEXEC;
        if !follow {
            flags |= libc::O_NOFOLLOW;
        }
        // SAFETY: valid descriptor and string; the result is checked.
        let fd = retry(|| unsafe { libc::openat(self.fd.as_raw_fd(), c.as_ptr(), flags) })?;
        // SAFETY: `fd` is a fresh descriptor we own.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    /// The raw target of a child symlink (`readlinkat`).
    pub fn readlink(&self, name: &(impl AtName + ?Sized)) -> io::Result<OsString> {
        let c = name.c_name()?;
        let mut buf = vec![0u8; 256];
        loop {
            // SAFETY: valid descriptor, string and buffer; the result is checked.
            let n = unsafe { libc::readlinkat(self.fd.as_raw_fd(), c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            let n = n as usize;
            if n < buf.len() {
                buf.truncate(n);
                return Ok(OsString::from_vec(buf));
            }
            buf.resize(buf.len() * 2, 0);
        }
    }

    /// `fstat` of the directory itself.
    pub fn metadata(&self) -> io::Result<Metadata> {
        // SAFETY: `dup` of a valid descriptor; the File owns the duplicate.
        let dup = unsafe { libc::fcntl(self.fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
        if dup < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `dup` is a fresh descriptor we own.
        unsafe { File::from_raw_fd(dup) }.metadata()
    }
}

/// Mutations relative to the directory. None of them follows a symlink in `name`.
impl Dir {
    /// `mkdirat(name, mode)`; the process umask applies, as for `mkdir(2)`.
    pub fn mkdir(&self, name: &(impl AtName + ?Sized), mode: u32) -> io::Result<()> {
        let c = name.c_name()?;
        // SAFETY: valid descriptor and string.
        retry(|| unsafe { libc::mkdirat(self.fd.as_raw_fd(), c.as_ptr(), mode as libc::mode_t) }).map(drop)
    }

    /// Removes the file or symlink `name` (`unlinkat`).
    pub fn unlink(&self, name: &(impl AtName + ?Sized)) -> io::Result<()> {
        let c = name.c_name()?;
        // SAFETY: valid descriptor and string.
        retry(|| unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), 0) }).map(drop)
    }

    /// Removes the empty directory `name` (`unlinkat` with `AT_REMOVEDIR`).
    pub fn rmdir(&self, name: &(impl AtName + ?Sized)) -> io::Result<()> {
        let c = name.c_name()?;
        // SAFETY: valid descriptor and string.
        retry(|| unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), libc::AT_REMOVEDIR) }).map(drop)
    }

    /// Creates the symlink `name` with the raw target `target` (`symlinkat`).
    pub fn symlink(&self, target: &(impl AtName + ?Sized), name: &(impl AtName + ?Sized)) -> io::Result<()> {
        let (t, c) = (target.c_name()?, name.c_name()?);
        // SAFETY: valid descriptor and strings.
        retry(|| unsafe { libc::symlinkat(t.as_ptr(), self.fd.as_raw_fd(), c.as_ptr()) }).map(drop)
    }

    /// Creates the new regular file `name` for writing: never an existing file, never
    /// through a symlink (`O_CREAT | O_EXCL | O_NOFOLLOW`).
    pub fn create_new_file(&self, name: &(impl AtName + ?Sized), mode: u32) -> io::Result<File> {
        let c = name.c_name()?;
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: valid descriptor and string; the result is checked.
        let fd = retry(|| unsafe { libc::openat(self.fd.as_raw_fd(), c.as_ptr(), flags, mode as libc::c_uint) })?;
        // SAFETY: `fd` is a fresh descriptor we own.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    /// Renames `from` in this directory to `to` in `to_dir`, replacing a file or symlink
    /// there (`renameat`; neither name is followed).
    pub fn rename(&self, from: &(impl AtName + ?Sized), to_dir: &Dir, to: &(impl AtName + ?Sized)) -> io::Result<()> {
        let (f, t) = (from.c_name()?, to.c_name()?);
        // SAFETY: valid descriptors and strings.
        retry(|| unsafe { libc::renameat(self.fd.as_raw_fd(), f.as_ptr(), to_dir.fd.as_raw_fd(), t.as_ptr()) })
            .map(drop)
    }

    /// `rm -rf` of the child `name`: a file or symlink is unlinked, a directory is emptied
    /// depth-first through descriptors (never following a symlink) and removed. A missing
    /// `name` is not an error. Iterative, so no tree is too deep for the thread's stack.
    pub fn remove_tree(&self, name: &(impl AtName + ?Sized)) -> io::Result<()> {
        let name = name.c_name()?.into_owned();
        let Some(top) = self.open_for_removal(&name)? else { return Ok(()) };
        // Each frame: an open directory being emptied, its remaining children, and its name
        // in the directory below it on the stack (or in `self`).
        let mut stack = vec![(top.names()?, top, name)];
        while let Some((pending, dir, _)) = stack.last_mut() {
            match pending.pop() {
                Some(child) => {
                    let child = child.c_name()?.into_owned();
                    if let Some(opened) = dir.open_for_removal(&child)? {
                        stack.push((opened.names()?, opened, child));
                    }
                }
                None => {
                    let (_, _, done) = stack.pop().expect("a frame was just looked at");
                    let parent = stack.last().map_or(self, |(_, dir, _)| dir);
                    ignore_missing(parent.rmdir(done.as_c_str()))?;
                }
            }
        }
        Ok(())
    }

    /// For [`Dir::remove_tree`]: unlinks a non-directory child (`None`), or opens a directory
    /// child to be emptied. A missing child is `None`.
    fn open_for_removal(&self, name: &CStr) -> io::Result<Option<Dir>> {
        let is_dir = match self.lstat(name) {
            Ok(st) => st.0.st_mode & libc::S_IFMT == libc::S_IFDIR,
            Err(err) if err.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            Err(err) => return Err(err),
        };
        if !is_dir {
            return ignore_missing(self.unlink(name)).map(|()| None);
        }
        match self.open_dir_nofollow(name) {
            Ok(child) => Ok(Some(child)),
            Err(err) if err.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            // Swapped for a file or symlink since the lstat: unlink that instead.
            Err(err) if matches!(err.raw_os_error(), Some(libc::ELOOP) | Some(libc::ENOTDIR)) => {
                ignore_missing(self.unlink(name)).map(|()| None)
            }
            Err(err) => Err(err),
        }
    }
}

/// What extraction needs beyond the mutations above: kinds, hard links and times.
impl Dir {
    /// What `name` is, without following it; `None` when it does not exist.
    pub fn node(&self, name: &(impl AtName + ?Sized)) -> io::Result<Option<Node>> {
        let st = match self.lstat(name) {
            Ok(st) => st.0,
            Err(err) if err.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            Err(err) => return Err(err),
        };
        Ok(Some(match st.st_mode & libc::S_IFMT {
            libc::S_IFDIR => Node::Directory,
            libc::S_IFREG => Node::Regular { dev: st.st_dev as u64, ino: st.st_ino as u64 },
            libc::S_IFLNK => Node::Symlink,
            _ => Node::Other,
        }))
    }

    /// Creates `name` as a hard link to `from_name` in `from` (a symlink is not followed).
    pub fn hard_link(
        &self,
        from: &Dir,
        from_name: &(impl AtName + ?Sized),
        name: &(impl AtName + ?Sized),
    ) -> io::Result<()> {
        let (f, n) = (from_name.c_name()?, name.c_name()?);
        // SAFETY: valid descriptors and strings.
        retry(|| unsafe { libc::linkat(from.fd.as_raw_fd(), f.as_ptr(), self.fd.as_raw_fd(), n.as_ptr(), 0) }).map(drop)
    }

    /// Sets the modification time of `name` itself (a symlink is not followed); the access
    /// time is left alone.
    pub fn set_link_mtime(&self, name: &(impl AtName + ?Sized), mtime: i64) -> io::Result<()> {
        let (c, times) = (name.c_name()?, mtime_only(mtime));
        // SAFETY: valid descriptor, string and a two-element timespec array.
        retry(|| unsafe { libc::utimensat(self.fd.as_raw_fd(), c.as_ptr(), times.as_ptr(), libc::AT_SYMLINK_NOFOLLOW) })
            .map(drop)
    }

    /// Sets this directory's permission bits.
    pub fn chmod(&self, mode: u32) -> io::Result<()> {
        fchmod(&self.fd, mode)
    }

    /// `fchmodat` of `name` in this directory (a symlink there would be followed: callers
    /// check the entry's kind first).
    pub fn chmod_at(&self, name: &(impl AtName + ?Sized), mode: u32) -> io::Result<()> {
        let c = name.c_name()?;
        // SAFETY: valid descriptor and string; the result is checked.
        let rc = unsafe { libc::fchmodat(self.fd.as_raw_fd(), c.as_ptr(), (mode & 0o7777) as libc::mode_t, 0) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Sets this directory's modification time.
    pub fn set_mtime(&self, mtime: i64) -> io::Result<()> {
        futimens(&self.fd, mtime)
    }

    /// The file system's space as an unprivileged writer sees it: `(available, total)` bytes
    /// (`fstatvfs`: `f_bavail` and `f_blocks` times `f_frsize`).
    pub fn free_space(&self) -> io::Result<(u64, u64)> {
        // SAFETY: an all-zero statvfs is valid; the call fills it.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: valid descriptor and out pointer.
        if unsafe { libc::fstatvfs(self.fd.as_raw_fd(), &mut st) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let unit = st.f_frsize as u64;
        Ok(((st.f_bavail as u64).saturating_mul(unit), (st.f_blocks as u64).saturating_mul(unit)))
    }
}

/// Sets the modification time of an open file or directory; the access time is left alone.
pub fn futimens(fd: &impl AsRawFd, mtime: i64) -> io::Result<()> {
    let times = mtime_only(mtime);
    // SAFETY: a valid descriptor and a two-element timespec array.
    retry(|| unsafe { libc::futimens(fd.as_raw_fd(), times.as_ptr()) }).map(drop)
}

/// `[atime, mtime]` for the `*utimens*` calls: the access time untouched.
fn mtime_only(mtime: i64) -> [libc::timespec; 2] {
    // SAFETY: timespec is plain data.
    let mut omit: libc::timespec = unsafe { std::mem::zeroed() };
    omit.tv_nsec = libc::UTIME_OMIT;
    // SAFETY: as above.
    let mut modified: libc::timespec = unsafe { std::mem::zeroed() };
    // `as _`: the field's own type, `time_t` (the libc crate marks that alias deprecated on musl).
    modified.tv_sec = mtime as _;
    [omit, modified]
}

fn ignore_missing(result: io::Result<()>) -> io::Result<()> {
    match result {
        Err(err) if err.raw_os_error() == Some(libc::ENOENT) => Ok(()),
        other => other,
    }
}

/// Runs a libc call until it is not interrupted; `-1` becomes the OS error.
fn retry(mut call: impl FnMut() -> libc::c_int) -> io::Result<libc::c_int> {
    loop {
        let rc = call();
        if rc != -1 {
            return Ok(rc);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// `fchmod` of an open file: the permission bits of `mode` (type bits are ignored, as the
/// kernel ignores them for `chmod`).
pub fn fchmod(fd: &impl AsRawFd, mode: u32) -> io::Result<()> {
    // SAFETY: a valid descriptor.
    retry(|| unsafe { libc::fchmod(fd.as_raw_fd(), (mode & 0o7777) as libc::mode_t) }).map(drop)
}

/// Copies `src`'s bytes into the empty file `dst`: a reflink (`FICLONE`) where the file
/// system supports it, else an in-kernel copy (`copy_file_range`/`sendfile`, through
/// `std::io::copy`), else a plain read/write loop.
pub fn copy_contents(src: &mut File, dst: &mut File) -> io::Result<u64> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        // SAFETY: two valid descriptors; FICLONE only reads its argument.
        let rc = unsafe { libc::ioctl(dst.as_raw_fd(), libc::FICLONE as _, src.as_raw_fd()) };
        if rc == 0 {
            return Ok(src.metadata()?.len());
        }
    }
    io::copy(src, dst)
}

#[cfg(any(target_os = "macos", target_os = "ios", target_os = "freebsd"))]
unsafe fn errno_location() -> *mut libc::c_int {
    libc::__error()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::io::Read;
    use std::os::unix::fs::symlink;

    #[test]
    fn lists_stats_opens_and_reads_links_without_following() {
        let root = std::env::temp_dir().join(format!("pc-fsat-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("sub")).unwrap();
        fs::write(root.join("f"), b"data").unwrap();
        symlink("f", root.join("link")).unwrap();
        symlink("sub", root.join("dirlink")).unwrap();
        let dir = Dir::open(&root).unwrap();
        let mut names = dir.names().unwrap();
        names.sort();
        assert_eq!(names, ["dirlink", "f", "link", "sub"].map(OsString::from));
        // Listing twice works (the handle is rewound).
        assert_eq!(dir.names().unwrap().len(), 4);
        let st = dir.lstat(OsStr::new("link")).unwrap();
        assert_eq!(st.0.st_mode & libc::S_IFMT, libc::S_IFLNK);
        let mut text = String::new();
        dir.open_file_nofollow(OsStr::new("f")).unwrap().read_to_string(&mut text).unwrap();
        assert_eq!(text, "data");
        assert_eq!(dir.open_file_nofollow(OsStr::new("link")).unwrap_err().raw_os_error(), Some(libc::ELOOP));
        assert!(dir.open_dir_nofollow(OsStr::new("dirlink")).is_err());
        assert!(dir.open_dir_nofollow(OsStr::new("sub")).is_ok());
        assert_eq!(dir.readlink(OsStr::new("link")).unwrap(), OsString::from("f"));
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn lists_a_directory_larger_than_one_read_with_odd_names() {
        let root = std::env::temp_dir().join(format!("pc-fsat-big-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(&root).unwrap();
        // ~3 000 records of 40–300 bytes: many getdents64 buffers, names of every length.
        let mut expected: Vec<OsString> = (0..3000)
            .map(|i| OsString::from(format!("{i}-{}", "n".repeat(i % 250))))
            .chain(["a b", "é", "..x", ".hidden", "\u{1}"].map(OsString::from))
            .collect();
        for name in &expected {
            fs::write(root.join(name), b"").unwrap();
        }
        expected.sort();
        let dir = Dir::open(&root).unwrap();
        for _ in 0..2 {
            let mut names = dir.names().unwrap();
            names.sort();
            assert_eq!(names, expected);
        }
        fs::remove_dir_all(root).unwrap();
    }
}
