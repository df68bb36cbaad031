//! Replacing a small file so that a crash leaves the old contents or the new, never a
//! mix: the audit log's head and each quarantined copy are written this way.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

/// Files this crate creates (the audit log, its head, quarantined copies) hold what
/// only their owner should read: created with mode 0600 on Unix, whatever the umask.
pub(crate) fn owner_only(options: &mut OpenOptions) -> &mut OpenOptions {
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(options, 0o600);
    options
}

/// Writes `bytes` to `temp`, syncs it, renames it over `path` and syncs the directory.
/// `temp` must be in `path`'s directory and never a name the caller uses for data.
pub(crate) fn write_atomically(path: &Path, temp: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file =
        owner_only(OpenOptions::new().write(true).create(true).truncate(true)).open(temp)?;
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
