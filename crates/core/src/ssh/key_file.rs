//! A private key written to a temporary file, for the key formats libssh2 reads only from
//! a file.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::PathBuf;

/// A private key written for libssh2 to read: mode 0600 in a fresh 0700 directory, both
/// removed on drop.
pub(super) struct PrivateKeyFile {
    dir: PathBuf,
    pub(super) path: PathBuf,
}

impl PrivateKeyFile {
    pub(super) fn write(key: &str) -> io::Result<PrivateKeyFile> {
        let base = std::env::temp_dir();
        for attempt in 0..16u32 {
            let nonce = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let dir = base.join(format!("paperclip-ssh-key-{}-{nonce:08x}-{attempt}", std::process::id()));
            match fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
            let path = dir.join("payload");
            let file = PrivateKeyFile { dir, path };
            let mut out = fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&file.path)?;
            out.write_all(key.as_bytes())?;
            return Ok(file);
        }
        Err(io::Error::from(io::ErrorKind::AlreadyExists))
    }
}

impl Drop for PrivateKeyFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
        let _ = fs::remove_dir(&self.dir);
    }
}
