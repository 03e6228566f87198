//! The one error type of the core crate: a stable `code` plus a message, with Node's
//! `errno`/`syscall`/`path` fields for file-system failures so the binding can build errors
//! shaped like Node's own (`ENOENT: no such file or directory, lstat '/x'`).

use std::borrow::Cow;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Codes of our own, for failures that have no Node or upstream code.
pub mod codes {
    /// The operation was cancelled (an `AbortSignal` fired); the binding maps it to `AbortError`.
    pub const ABORTED: &str = "ABORT_ERR";
    /// A path or argument was rejected before any work (escapes its root, not relative, …).
    pub const INVALID_ARGUMENT: &str = "ERR_PAPERCLIP_NATIVE_INVALID_ARGUMENT";
    /// A file name that is not valid UTF-8 (upstream cannot represent it either).
    pub const NON_UTF8_NAME: &str = "ERR_PAPERCLIP_NATIVE_NON_UTF8_NAME";
    /// An archive member that would land outside the extraction root, or an unsafe type.
    pub const UNSAFE_ARCHIVE_ENTRY: &str = "ERR_PAPERCLIP_NATIVE_UNSAFE_ARCHIVE_ENTRY";
    /// A malformed or truncated archive.
    pub const BAD_ARCHIVE: &str = "ERR_PAPERCLIP_NATIVE_BAD_ARCHIVE";
    /// Following symbolic links led back into a directory being archived (a cycle).
    pub const SYMLINK_LOOP: &str = "ERR_PAPERCLIP_NATIVE_SYMLINK_LOOP";
    /// A file shrank while it was being archived, so its header no longer matches its data.
    pub const FILE_CHANGED: &str = "ERR_PAPERCLIP_NATIVE_FILE_CHANGED";
    /// A mutation that would go through a symlinked ancestor of its root.
    pub const SYMLINKED_ANCESTOR: &str = "ERR_PAPERCLIP_NATIVE_SYMLINKED_ANCESTOR";
    /// A git ignore scan failed (upstream reason `git-ignore-scan-failed`).
    pub const GIT_IGNORE_SCAN_FAILED: &str = "ERR_PAPERCLIP_NATIVE_GIT_IGNORE_SCAN_FAILED";
    /// A git ignore scan breached a bound (upstream reason `git-ignore-scan-limit-exceeded`).
    pub const GIT_IGNORE_SCAN_LIMIT_EXCEEDED: &str = "ERR_PAPERCLIP_NATIVE_GIT_IGNORE_SCAN_LIMIT_EXCEEDED";
    /// The server's host key is not in the known hosts (strict host-key checking).
    pub const SSH_HOST_KEY_UNKNOWN: &str = "ERR_PAPERCLIP_NATIVE_SSH_HOST_KEY_UNKNOWN";
    /// The known hosts hold a different key for the server (strict host-key checking).
    pub const SSH_HOST_KEY_CHANGED: &str = "ERR_PAPERCLIP_NATIVE_SSH_HOST_KEY_CHANGED";
    /// The server accepted none of the offered credentials.
    pub const SSH_AUTH_FAILED: &str = "ERR_PAPERCLIP_NATIVE_SSH_AUTH_FAILED";
    /// The SSH handshake or a protocol step failed (no common algorithm, a refused channel, …).
    pub const SSH_PROTOCOL: &str = "ERR_PAPERCLIP_NATIVE_SSH_PROTOCOL";
    /// The connection broke during a command or transfer.
    pub const SSH_CONNECTION_LOST: &str = "ERR_PAPERCLIP_NATIVE_SSH_CONNECTION_LOST";
    /// No byte moved for longer than the inactivity timeout, or the command's deadline passed.
    pub const SSH_TIMEOUT: &str = "ERR_PAPERCLIP_NATIVE_SSH_TIMEOUT";
    /// The remote command failed: a non-zero exit, a signal, or an exit before it read all
    /// of its input.
    pub const SSH_REMOTE_FAILED: &str = "ERR_PAPERCLIP_NATIVE_SSH_REMOTE_FAILED";
    /// A command's stdout or stderr outgrew `maxBuffer` (Node's `execFile` code).
    pub const MAX_BUFFER: &str = "ERR_CHILD_PROCESS_STDIO_MAXBUFFER";
    /// An archive breached an opt-in extraction limit (`maxBytes`, `maxEntries`, `maxFileBytes`).
    pub const ARCHIVE_LIMIT_EXCEEDED: &str = "ERR_PAPERCLIP_NATIVE_ARCHIVE_LIMIT_EXCEEDED";
    /// A restore would take the destination's file system below its free-space floor.
    pub const INSUFFICIENT_SPACE: &str = "ERR_PAPERCLIP_NATIVE_INSUFFICIENT_SPACE";
    /// A restore merge into this root was interrupted (its process was killed mid-apply).
    pub const INTERRUPTED_RESTORE: &str = "ERR_PAPERCLIP_NATIVE_INTERRUPTED_RESTORE";
    /// No prebuilt native binary loads on this platform (raised by the JS loader, lib/native.js,
    /// when a native function is called; listed here with the others).
    pub const UNSUPPORTED_PLATFORM: &str = "ERR_PAPERCLIP_NATIVE_UNSUPPORTED_PLATFORM";
    /// A snapshot watcher was used after its `close()`.
    pub const WATCHER_CLOSED: &str = "ERR_PAPERCLIP_NATIVE_WATCHER_CLOSED";
    /// Anything else (a bug or an unexpected state); the message says what.
    pub const INTERNAL: &str = "ERR_PAPERCLIP_NATIVE_INTERNAL";
    /// A step of an ignore scan missed upstream's deadline (raised by lib/ignore-scan.js).
    pub const GIT_IGNORE_SCAN_TIMEOUT: &str = "ERR_PAPERCLIP_NATIVE_GIT_IGNORE_SCAN_TIMEOUT";
    /// `refuseEmptySource` and the merge source is empty while the baseline is not (raised by
    /// lib/workspace-restore-merge.js).
    pub const EMPTY_SOURCE: &str = "ERR_PAPERCLIP_NATIVE_EMPTY_SOURCE";
    /// A restore found the remote workspace gone (missing, or re-created empty) and restored
    /// nothing (raised by lib/lifecycle/workspace-guard.js).
    pub const REMOTE_WORKSPACE_GONE: &str = "ERR_PAPERCLIP_NATIVE_REMOTE_WORKSPACE_GONE";
    /// A sandbox runner call missed the deadline we enforce on it, or a duplex transfer went
    /// silent for longer than its inactivity timeout (raised by lib/sandbox/).
    pub const SANDBOX_TIMEOUT: &str = "ERR_PAPERCLIP_NATIVE_SANDBOX_TIMEOUT";
    /// A transfer of our own through the sandbox runner failed: its remote command exited
    /// non-zero, its channel closed first, or it moved another byte count than announced
    /// (raised by lib/sandbox/duplex-transfer.js).
    pub const SANDBOX_TRANSFER_FAILED: &str = "ERR_PAPERCLIP_NATIVE_SANDBOX_TRANSFER_FAILED";
    /// A sandbox command exited non-zero (upstream's message, `<command> failed with exit
    /// code N`; raised by lib/sandbox/shell.js).
    pub const SANDBOX_COMMAND_FAILED: &str = "ERR_PAPERCLIP_NATIVE_SANDBOX_COMMAND_FAILED";

    /// Every code above by its constant's name: the binding exports this table, and the JS
    /// layer reads its codes from it instead of repeating them.
    pub const ALL: &[(&str, &str)] = &[
        ("ABORTED", ABORTED),
        ("INVALID_ARGUMENT", INVALID_ARGUMENT),
        ("NON_UTF8_NAME", NON_UTF8_NAME),
        ("UNSAFE_ARCHIVE_ENTRY", UNSAFE_ARCHIVE_ENTRY),
        ("BAD_ARCHIVE", BAD_ARCHIVE),
        ("SYMLINK_LOOP", SYMLINK_LOOP),
        ("FILE_CHANGED", FILE_CHANGED),
        ("SYMLINKED_ANCESTOR", SYMLINKED_ANCESTOR),
        ("GIT_IGNORE_SCAN_FAILED", GIT_IGNORE_SCAN_FAILED),
        ("GIT_IGNORE_SCAN_LIMIT_EXCEEDED", GIT_IGNORE_SCAN_LIMIT_EXCEEDED),
        ("SSH_HOST_KEY_UNKNOWN", SSH_HOST_KEY_UNKNOWN),
        ("SSH_HOST_KEY_CHANGED", SSH_HOST_KEY_CHANGED),
        ("SSH_AUTH_FAILED", SSH_AUTH_FAILED),
        ("SSH_PROTOCOL", SSH_PROTOCOL),
        ("SSH_CONNECTION_LOST", SSH_CONNECTION_LOST),
        ("SSH_TIMEOUT", SSH_TIMEOUT),
        ("SSH_REMOTE_FAILED", SSH_REMOTE_FAILED),
        ("MAX_BUFFER", MAX_BUFFER),
        ("ARCHIVE_LIMIT_EXCEEDED", ARCHIVE_LIMIT_EXCEEDED),
        ("INSUFFICIENT_SPACE", INSUFFICIENT_SPACE),
        ("INTERRUPTED_RESTORE", INTERRUPTED_RESTORE),
        ("UNSUPPORTED_PLATFORM", UNSUPPORTED_PLATFORM),
        ("INTERNAL", INTERNAL),
        ("GIT_IGNORE_SCAN_TIMEOUT", GIT_IGNORE_SCAN_TIMEOUT),
        ("EMPTY_SOURCE", EMPTY_SOURCE),
        ("WATCHER_CLOSED", WATCHER_CLOSED),
        ("REMOTE_WORKSPACE_GONE", REMOTE_WORKSPACE_GONE),
        ("SANDBOX_TIMEOUT", SANDBOX_TIMEOUT),
        ("SANDBOX_TRANSFER_FAILED", SANDBOX_TRANSFER_FAILED),
        ("SANDBOX_COMMAND_FAILED", SANDBOX_COMMAND_FAILED),
    ];
}

/// A failure with a stable `code`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// Node's code (`ENOENT`, …), upstream's, or one of [`codes`].
    pub code: Cow<'static, str>,
    /// The whole human-readable message, as the JS `Error.message`.
    pub message: String,
    /// The negative errno Node puts in `error.errno`, for OS errors.
    pub errno: Option<i32>,
    /// The failing call, as Node names it (`lstat`, `open`, `scandir`, `readlink`, …).
    pub syscall: Option<&'static str>,
    /// The path the call failed on.
    pub path: Option<PathBuf>,
    /// For `ARCHIVE_LIMIT_EXCEEDED`: the breached limit's option name and its value (JS
    /// `error.limit`, `error.value`).
    pub limit: Option<(&'static str, u64)>,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error with our own code.
    pub fn new(code: impl Into<Cow<'static, str>>, message: impl Into<String>) -> Self {
        Error { code: code.into(), message: message.into(), errno: None, syscall: None, path: None, limit: None }
    }

    /// The same error naming the breached limit and its value.
    pub fn with_limit(self, name: &'static str, value: u64) -> Self {
        Error { limit: Some((name, value)), ..self }
    }

    /// The cancellation error.
    pub fn aborted() -> Self {
        Error::new(codes::ABORTED, "The operation was aborted")
    }

    /// True for the cancellation error.
    pub fn is_aborted(&self) -> bool {
        self.code == codes::ABORTED
    }

    /// An I/O error with no path to name (a caller's stream, a pipe): Node's code and
    /// `CODE: description, syscall` for an OS error, an internal error otherwise.
    pub fn os(err: io::Error, syscall: &'static str) -> Self {
        match err.raw_os_error() {
            Some(raw) => {
                let (code, description) = errno_name(raw);
                Error {
                    errno: Some(-raw),
                    syscall: Some(syscall),
                    ..Error::new(code, format!("{code}: {description}, {syscall}"))
                }
            }
            None => Error { syscall: Some(syscall), ..Error::new(codes::INTERNAL, format!("{syscall} failed: {err}")) },
        }
    }

    /// A file-system error shaped like Node's: `CODE: description, syscall 'path'`.
    pub fn io(err: io::Error, syscall: &'static str, path: &Path) -> Self {
        let Some(raw) = err.raw_os_error() else {
            return Error {
                code: Cow::Borrowed(codes::INTERNAL),
                message: format!("{err}, {syscall} '{}'", path.display()),
                errno: None,
                syscall: Some(syscall),
                path: Some(path.to_path_buf()),
                limit: None,
            };
        };
        let (code, description) = errno_name(raw);
        Error {
            code: Cow::Borrowed(code),
            message: format!("{code}: {description}, {syscall} '{}'", path.display()),
            errno: Some(-raw),
            syscall: Some(syscall),
            path: Some(path.to_path_buf()),
            limit: None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// Node's (libuv's) code and description for an errno.
pub fn errno_name(raw: i32) -> (&'static str, &'static str) {
    match raw {
        libc::ENOENT => ("ENOENT", "no such file or directory"),
        libc::EACCES => ("EACCES", "permission denied"),
        libc::EPERM => ("EPERM", "operation not permitted"),
        libc::ENOTDIR => ("ENOTDIR", "not a directory"),
        libc::EISDIR => ("EISDIR", "illegal operation on a directory"),
        libc::EEXIST => ("EEXIST", "file already exists"),
        libc::ENOTEMPTY => ("ENOTEMPTY", "directory not empty"),
        libc::ELOOP => ("ELOOP", "too many symbolic links encountered"),
        libc::EBUSY => ("EBUSY", "resource busy or locked"),
        libc::EMFILE => ("EMFILE", "too many open files"),
        libc::ENFILE => ("ENFILE", "file table overflow"),
        libc::ENOSPC => ("ENOSPC", "no space left on device"),
        libc::EROFS => ("EROFS", "read-only file system"),
        libc::EXDEV => ("EXDEV", "cross-device link not permitted"),
        libc::EINVAL => ("EINVAL", "invalid argument"),
        libc::EIO => ("EIO", "i/o error"),
        libc::ENAMETOOLONG => ("ENAMETOOLONG", "name too long"),
        libc::EAGAIN => ("EAGAIN", "resource temporarily unavailable"),
        libc::EINTR => ("EINTR", "interrupted system call"),
        libc::ENOMEM => ("ENOMEM", "not enough memory"),
        libc::ESRCH => ("ESRCH", "no such process"),
        libc::EPIPE => ("EPIPE", "broken pipe"),
        libc::ETIMEDOUT => ("ETIMEDOUT", "connection timed out"),
        libc::ECONNREFUSED => ("ECONNREFUSED", "connection refused"),
        libc::ECONNRESET => ("ECONNRESET", "connection reset by peer"),
        libc::EHOSTUNREACH => ("EHOSTUNREACH", "host is unreachable"),
        libc::ENETUNREACH => ("ENETUNREACH", "network is unreachable"),
        libc::EADDRNOTAVAIL => ("EADDRNOTAVAIL", "address not available"),
        _ => ("EUNKNOWN", "unknown error"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_code_table_lists_every_code_once() {
        // Every `pub const … : &str` of `codes`, read from this file, must be in `ALL` under
        // its own name, and `ALL` must hold nothing else.
        let source = include_str!("error.rs");
        let body = &source[source.find("pub mod codes {").unwrap()..source.find("pub const ALL").unwrap()];
        let mut declared: Vec<&str> = body
            .lines()
            .filter_map(|line| line.trim().strip_prefix("pub const "))
            .map(|rest| rest.split(':').next().unwrap())
            .collect();
        let mut listed: Vec<&str> = codes::ALL.iter().map(|(name, _)| *name).collect();
        declared.sort_unstable();
        listed.sort_unstable();
        assert_eq!(listed, declared);
        let mut values: Vec<&str> = codes::ALL.iter().map(|(_, code)| *code).collect();
        values.sort_unstable();
        values.dedup();
        assert_eq!(values.len(), codes::ALL.len(), "two names share a code");
    }

    #[test]
    fn io_errors_look_like_node() {
        let err = std::fs::symlink_metadata("/definitely/not/here").unwrap_err();
        let e = Error::io(err, "lstat", Path::new("/definitely/not/here"));
        assert_eq!(e.code, "ENOENT");
        assert_eq!(e.errno, Some(-libc::ENOENT));
        assert_eq!(e.message, "ENOENT: no such file or directory, lstat '/definitely/not/here'");
    }
}
