//! Replacing a small file so that a crash leaves the old contents or the new, never a
//! mix: the audit log's head and each quarantined copy are written this way.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

/// Writes `bytes` to `temp`, syncs it, renames it over `path` and syncs the directory.
/// `temp` must be in `path`'s directory and never a name the caller uses for data.
pub(crate) fn write_atomically(path: &Path, temp: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = File::create(temp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    fs::rename(temp, path)?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// Makes a directory's entries (a rename, a new file) durable.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    File::open(dir)?.sync_all()?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}
