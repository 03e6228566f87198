//! Directory handles for extraction: every operation is relative to an open directory and
//! never follows a symbolic link in the name it acts on (`openat` with `O_NOFOLLOW`,
//! `fstatat` with `AT_SYMLINK_NOFOLLOW`, `mkdirat`, `symlinkat`, `linkat` without
//! `AT_SYMLINK_FOLLOW`, `unlinkat`).

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// What `lstat` says a name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Node {
    Directory,
    Regular { dev: u64, ino: u64 },
    Symlink,
    Other,
}

/// An open directory.
#[derive(Debug)]
pub(crate) struct Dir {
    fd: OwnedFd,
}

/// Retries a call interrupted by a signal; maps `-1` to the OS error.
fn check(mut call: impl FnMut() -> libc::c_int) -> io::Result<libc::c_int> {
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

/// A C string for a name that the caller already checked has no NUL.
pub(crate) fn c_name(name: &[u8]) -> io::Result<CString> {
    CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

impl Dir {
    /// Opens a directory by path, following symbolic links (the caller's own root).
    pub fn open(path: &Path) -> io::Result<Dir> {
        let path = c_name(path.as_os_str().as_bytes())?;
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
        // SAFETY: a valid NUL-terminated path; the returned descriptor is owned below.
        let fd = check(|| unsafe { libc::open(path.as_ptr(), flags) })?;
        // SAFETY: `fd` was just opened and nothing else owns it.
        Ok(Dir { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// A second handle on the same directory.
    pub fn duplicate(&self) -> io::Result<Dir> {
        Ok(Dir { fd: self.fd.try_clone()? })
    }

    /// Opens the child directory `name`; fails (`ELOOP`/`ENOTDIR`) on a symbolic link.
    pub fn open_dir(&self, name: &CStr) -> io::Result<Dir> {
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: valid descriptor and name.
        let fd = check(|| unsafe { libc::openat(self.fd.as_raw_fd(), name.as_ptr(), flags) })?;
        // SAFETY: `fd` was just opened and nothing else owns it.
        Ok(Dir { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// What `name` is, without following it; `None` when it does not exist.
    pub fn lstat(&self, name: &CStr) -> io::Result<Option<Node>> {
        // SAFETY: `stat` is plain data that fstatat fills in.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        let flags = libc::AT_SYMLINK_NOFOLLOW;
        // SAFETY: valid descriptor, name and out-pointer.
        match check(|| unsafe { libc::fstatat(self.fd.as_raw_fd(), name.as_ptr(), &mut st, flags) })
        {
            Ok(_) => {}
            Err(err) if err.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            Err(err) => return Err(err),
        }
        Ok(Some(match st.st_mode & libc::S_IFMT {
            libc::S_IFDIR => Node::Directory,
            libc::S_IFREG => Node::Regular { dev: st.st_dev as u64, ino: st.st_ino as u64 },
            libc::S_IFLNK => Node::Symlink,
            _ => Node::Other,
        }))
    }

    pub fn mkdir(&self, name: &CStr, mode: u32) -> io::Result<()> {
        // SAFETY: valid descriptor and name.
        check(|| unsafe { libc::mkdirat(self.fd.as_raw_fd(), name.as_ptr(), mode as libc::mode_t) })
            .map(drop)
    }

    /// Removes `name`: a file or link, or an empty directory when `directory` is set.
    pub fn remove(&self, name: &CStr, directory: bool) -> io::Result<()> {
        let flags = if directory { libc::AT_REMOVEDIR } else { 0 };
        // SAFETY: valid descriptor and name.
        check(|| unsafe { libc::unlinkat(self.fd.as_raw_fd(), name.as_ptr(), flags) }).map(drop)
    }

    /// Creates the new regular file `name` (never an existing one, never through a link).
    pub fn create_file(&self, name: &CStr, mode: u32) -> io::Result<File> {
        let flags =
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        let mode = mode as libc::c_uint;
        // SAFETY: valid descriptor and name; the descriptor is owned by the File.
        let fd =
            check(|| unsafe { libc::openat(self.fd.as_raw_fd(), name.as_ptr(), flags, mode) })?;
        // SAFETY: `fd` was just opened and nothing else owns it.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    pub fn symlink(&self, target: &CStr, name: &CStr) -> io::Result<()> {
        // SAFETY: valid descriptor and strings.
        check(|| unsafe { libc::symlinkat(target.as_ptr(), self.fd.as_raw_fd(), name.as_ptr()) })
            .map(drop)
    }

    /// Creates `name` as a hard link to `from_name` in `from` (a link is not followed).
    pub fn hard_link(&self, from: &Dir, from_name: &CStr, name: &CStr) -> io::Result<()> {
        // SAFETY: valid descriptors and names.
        check(|| unsafe {
            libc::linkat(
                from.fd.as_raw_fd(),
                from_name.as_ptr(),
                self.fd.as_raw_fd(),
                name.as_ptr(),
                0,
            )
        })
        .map(drop)
    }

    /// Sets the modification time of `name` itself (a symlink is not followed); the access
    /// time is left alone.
    pub fn set_link_mtime(&self, name: &CStr, mtime: i64) -> io::Result<()> {
        let times = times(mtime);
        let flags = libc::AT_SYMLINK_NOFOLLOW;
        // SAFETY: valid descriptor, name and a two-element timespec array.
        check(|| unsafe {
            libc::utimensat(self.fd.as_raw_fd(), name.as_ptr(), times.as_ptr(), flags)
        })
        .map(drop)
    }

    /// Sets this directory's permission bits.
    pub fn chmod(&self, mode: u32) -> io::Result<()> {
        fchmod(&self.fd, mode)
    }

    /// Sets this directory's modification time.
    pub fn set_mtime(&self, mtime: i64) -> io::Result<()> {
        futimens(&self.fd, mtime)
    }
}

/// `fchmod` on any open descriptor.
pub(crate) fn fchmod(fd: &impl AsRawFd, mode: u32) -> io::Result<()> {
    // SAFETY: a valid descriptor.
    check(|| unsafe { libc::fchmod(fd.as_raw_fd(), mode as libc::mode_t) }).map(drop)
}

/// Sets the modification time of an open file; the access time is left alone.
pub(crate) fn futimens(fd: &impl AsRawFd, mtime: i64) -> io::Result<()> {
    let times = times(mtime);
    // SAFETY: a valid descriptor and a two-element timespec array.
    check(|| unsafe { libc::futimens(fd.as_raw_fd(), times.as_ptr()) }).map(drop)
}

/// `[atime, mtime]` for the `*utimens*` calls: access time untouched.
fn times(mtime: i64) -> [libc::timespec; 2] {
    // SAFETY: timespec is plain data.
    let mut omit: libc::timespec = unsafe { std::mem::zeroed() };
    omit.tv_nsec = libc::UTIME_OMIT;
    // SAFETY: as above.
    let mut modified: libc::timespec = unsafe { std::mem::zeroed() };
    modified.tv_sec = mtime as libc::time_t;
    [omit, modified]
}
