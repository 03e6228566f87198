//! An open directory and the `*at` calls relative to it (`fstatat`, `openat`, `readlinkat`,
//! `readdir` on the same descriptor): no path is re-resolved from the root for every entry
//! (much cheaper on deep trees), and nothing is ever followed through a symlink
//! (`O_NOFOLLOW`, `AT_SYMLINK_NOFOLLOW`), which the safety rules of merge and extract need.

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

fn cstring(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// The `lstat` result of [`Dir::lstat`]: what the walkers need, without a `Metadata`.
#[derive(Debug, Clone, Copy)]
pub struct RawStat(pub libc::stat);

impl Dir {
    /// Opens `path` as a directory (following symlinks in `path` itself, as `readdir` does).
    pub fn open(path: &Path) -> io::Result<Dir> {
        let c = cstring(path.as_os_str())?;
        // SAFETY: `c` is a valid NUL-terminated string; the result is checked.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor we own.
        Ok(Dir { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// Opens the child directory `name`, refusing to follow a symlink there.
    pub fn open_dir_nofollow(&self, name: &OsStr) -> io::Result<Dir> {
        let c = cstring(name)?;
        // SAFETY: valid descriptor and string; the result is checked.
        let fd = unsafe {
            libc::openat(self.fd.as_raw_fd(), c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor we own.
        Ok(Dir { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// The names in the directory, without `.` and `..`, in the order the kernel returns them.
    pub fn names(&self) -> io::Result<Vec<OsString>> {
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
        let mut out = Vec::new();
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
                out.push(OsString::from_vec(name.to_vec()));
            }
        };
        // SAFETY: closes the stream and the duplicate descriptor it owns.
        unsafe { libc::closedir(stream) };
        result.map(|()| out)
    }

    /// `lstat` of a child (`fstatat` with `AT_SYMLINK_NOFOLLOW`).
    pub fn lstat(&self, name: &OsStr) -> io::Result<RawStat> {
        let c = cstring(name)?;
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: valid descriptor, string and out-pointer; the result is checked.
        let rc = unsafe { libc::fstatat(self.fd.as_raw_fd(), c.as_ptr(), st.as_mut_ptr(), libc::AT_SYMLINK_NOFOLLOW) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fstatat succeeded, so `st` is initialised.
        Ok(RawStat(unsafe { st.assume_init() }))
    }

    /// Opens a child for reading; a symlink there fails (`ELOOP`) instead of being followed.
    pub fn open_file_nofollow(&self, name: &OsStr) -> io::Result<File> {
        let c = cstring(name)?;
        // SAFETY: valid descriptor and string; the result is checked.
        let fd = unsafe { libc::openat(self.fd.as_raw_fd(), c.as_ptr(), libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor we own.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    /// The raw target of a child symlink (`readlinkat`).
    pub fn readlink(&self, name: &OsStr) -> io::Result<OsString> {
        let c = cstring(name)?;
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

#[cfg(any(target_os = "linux", target_os = "android"))]
unsafe fn errno_location() -> *mut libc::c_int {
    libc::__errno_location()
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
        // Listing twice works (the duplicate descriptor is rewound).
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
}
