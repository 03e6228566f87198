//! The temporary file a pack to a path writes, renamed into place only on success.

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{codes, Error, Result};

/// A temporary file beside a target, removed on drop unless persisted.
pub(super) struct TempFile {
    pub(super) path: PathBuf,
    pub(super) file: File,
    persisted: bool,
}

impl TempFile {
    /// A new, empty temporary file in the directory of `target`.
    pub(super) fn create_beside(target: &Path) -> Result<TempFile> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let name = target.file_name().ok_or_else(|| {
            Error::new(codes::INVALID_ARGUMENT, format!("archive path '{}' does not name a file", target.display()))
        })?;
        let dir = target.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        for _ in 0..16 {
            let unique = format!(
                ".{}.{}-{}.partial",
                name.to_string_lossy(),
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::Relaxed)
            );
            let path = dir.join(unique);
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(file) => return Ok(TempFile { path, file, persisted: false }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Error::io(e, "open", &path)),
            }
        }
        Err(Error::new(codes::INTERNAL, format!("could not create a temporary file in '{}'", dir.display())))
    }

    /// Renames the file to `target`.
    pub(super) fn persist(mut self, target: &Path) -> Result<()> {
        fs::rename(&self.path, target).map_err(|e| Error::io(e, "rename", target))?;
        self.persisted = true;
        Ok(())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.persisted {
            let _ = fs::remove_file(&self.path);
        }
    }
}
