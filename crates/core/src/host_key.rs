//! The per-host key that tags our staging names, so that the sweep acts only on staging
//! this host created ([`crate::staging`]): a name's last 16 hex digits are the first 8 bytes
//! of HMAC-SHA256 under this key of the rest of the name. An archive, a sandbox or an SSH
//! remote cannot compute a tag without the key, and the key never enters a workspace's
//! archive (its file name is reserved, [`crate::reserved::KEY_FILE`]).
//!
//! The key is 32 random bytes in `<state dir>/.paperclip-staging-key` (mode 0600, owned by
//! the user, never followed through a symbolic link), where the state directory is
//! `$PAPERCLIP_NATIVE_STATE_DIR`, else `$XDG_STATE_HOME/paperclip-native`, else
//! `$HOME/.local/state/paperclip-native` (all absolute; created with mode 0700). It is
//! created on first use: written under a temporary name, then hard-linked into place, so
//! two processes creating it at once agree on one key. It is read once per process.
//!
//! When no usable key file can be had (no home, a read-only file system, a file of the
//! wrong owner, mode or size) the process uses a random key of its own
//! ([`Source::Process`]): its staging is still verified while it runs, but what it leaves
//! after a crash cannot be proven by the next process and is reported, not acted upon.

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::reserved::KEY_FILE;

/// The environment variable naming the directory of the key file.
pub const STATE_DIR_ENV: &str = "PAPERCLIP_NATIVE_STATE_DIR";

/// Bytes of the key.
const KEY_LEN: usize = 32;
/// Bytes of a tag (16 hex digits in a name).
pub const TAG_LEN: usize = 8;

/// Where this process's key came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The per-host key file: shared with every process of this user on this host.
    File,
    /// A random key of this process only (no usable key file).
    Process,
}

struct Key {
    bytes: [u8; KEY_LEN],
    source: Source,
}

fn key() -> &'static Key {
    static KEY: OnceLock<Key> = OnceLock::new();
    KEY.get_or_init(|| match state_dir().map(|dir| load_or_create(&dir)) {
        Some(Ok(bytes)) => Key { bytes, source: Source::File },
        _ => Key { bytes: random(), source: Source::Process },
    })
}

/// Where this process's key came from (loading it on first use).
pub fn source() -> Source {
    key().source
}

fn mac() -> Hmac<Sha256> {
    <Hmac<Sha256> as KeyInit>::new_from_slice(&key().bytes).expect("HMAC takes a key of any length")
}

/// The tag of `message` under this host's key.
pub fn tag(message: &[u8]) -> [u8; TAG_LEN] {
    let mut mac = mac();
    mac.update(message);
    let full = mac.finalize().into_bytes();
    let mut out = [0u8; TAG_LEN];
    out.copy_from_slice(&full[..TAG_LEN]);
    out
}

/// True when `tag` is the tag of `message` under this host's key (compared in constant time).
pub fn verify(message: &[u8], tag: &[u8; TAG_LEN]) -> bool {
    let mut mac = mac();
    mac.update(message);
    mac.verify_truncated_left(tag).is_ok()
}

/// Random bytes from the operating system.
pub fn random<const N: usize>() -> [u8; N] {
    let mut out = [0u8; N];
    getrandom::fill(&mut out).expect("the operating system's random source failed");
    out
}

/// The directory of the key file (see the module docs), if one can be named.
pub fn state_dir() -> Option<PathBuf> {
    let absolute = |name: &str| std::env::var_os(name).map(PathBuf::from).filter(|p| p.is_absolute());
    absolute(STATE_DIR_ENV)
        .or_else(|| absolute("XDG_STATE_HOME").map(|d| d.join("paperclip-native")))
        .or_else(|| absolute("HOME").map(|d| d.join(".local/state/paperclip-native")))
}

/// Reads the key file in `dir`, creating it (and `dir`) when missing.
pub fn load_or_create(dir: &Path) -> io::Result<[u8; KEY_LEN]> {
    let path = dir.join(KEY_FILE);
    match read_key(&path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        other => return other,
    }
    fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let temporary = dir.join(format!("{KEY_FILE}.{}.{:016x}", std::process::id(), u64::from_ne_bytes(random())));
    let written = (|| {
        let mut file = fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&temporary)?;
        file.write_all(&random::<KEY_LEN>())?;
        file.sync_all()?;
        // Never replaces a key another process put in place first.
        match fs::hard_link(&temporary, &path) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(e),
            _ => Ok(()),
        }
    })();
    let _ = fs::remove_file(&temporary);
    written?;
    read_key(&path)
}

/// Reads a key file: a regular file (not followed through a link) of this user, readable
/// by nobody else, of exactly [`KEY_LEN`] bytes.
fn read_key(path: &Path) -> io::Result<[u8; KEY_LEN]> {
    let mut file = fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path)?;
    let meta = file.metadata()?;
    // SAFETY: plain syscall without arguments.
    let uid = unsafe { libc::geteuid() };
    if !meta.is_file() || meta.uid() != uid || meta.mode() & 0o077 != 0 || meta.len() != KEY_LEN as u64 {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "unusable staging key file"));
    }
    let mut bytes = [0u8; KEY_LEN];
    file.read_exact(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn tmp(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("pc-host-key-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn the_key_file_is_created_once_and_read_back_by_every_process() {
        let dir = tmp("create");
        let created = load_or_create(&dir.join("state")).unwrap();
        assert_eq!(load_or_create(&dir.join("state")).unwrap(), created);
        let meta = fs::metadata(dir.join("state").join(KEY_FILE)).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert_eq!(fs::metadata(dir.join("state")).unwrap().mode() & 0o777, 0o700);
        assert_eq!(fs::read_dir(dir.join("state")).unwrap().count(), 1, "no temporary file left");
        // Racing creators agree on one key.
        let race = dir.join("race");
        let keys: Vec<[u8; KEY_LEN]> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8).map(|_| scope.spawn(|| load_or_create(&race).unwrap())).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(keys.windows(2).all(|w| w[0] == w[1]));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_unusable_key_file_is_refused() {
        let dir = tmp("unusable");
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join(KEY_FILE);
        fs::write(&path, [7u8; KEY_LEN]).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(load_or_create(&dir).unwrap_err().kind(), io::ErrorKind::InvalidData, "readable by others");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        fs::write(&path, [7u8; 5]).unwrap();
        assert_eq!(load_or_create(&dir).unwrap_err().kind(), io::ErrorKind::InvalidData, "wrong size");
        fs::remove_file(&path).unwrap();
        fs::write(dir.join("elsewhere"), [7u8; KEY_LEN]).unwrap();
        std::os::unix::fs::symlink(dir.join("elsewhere"), &path).unwrap();
        assert!(load_or_create(&dir).is_err(), "a symbolic link is not followed");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn tags_verify_only_their_message() {
        let t = tag(b".paperclip-merge-1-2-0011223344556677");
        assert!(verify(b".paperclip-merge-1-2-0011223344556677", &t));
        assert!(!verify(b".paperclip-merge-1-2-0011223344556678", &t));
        let mut other = t;
        other[0] ^= 1;
        assert!(!verify(b".paperclip-merge-1-2-0011223344556677", &other));
    }
}
