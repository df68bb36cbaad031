//! Where a log's bytes live: the [`Storage`] trait and its file implementation.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::log::AuditError;
use crate::atomic_write::{sync_dir, write_atomically};

/// The log file's name inside the log directory.
pub const LOG_FILE: &str = "audit.jsonl";
/// The head file's name inside the log directory.
pub const HEAD_FILE: &str = "audit.head";
const HEAD_TEMP_FILE: &str = "audit.head.tmp";

/// The I/O an [`AuditLog`](super::AuditLog) performs. [`FileStorage`] is the real one;
/// tests wrap it to simulate a full disk or a failing sync.
///
/// The log calls these from one thread at a time.
pub trait Storage: Send {
    /// Reads the log from its first byte.
    fn read_log(&mut self) -> io::Result<Box<dyn Read + '_>>;
    /// Appends bytes at the end of the log. On error, any prefix of them may have been
    /// written; the log then cuts the file back with [`truncate`](Self::truncate).
    fn append(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// Makes every appended byte durable (fsync or fdatasync).
    fn sync(&mut self) -> io::Result<()>;
    /// Cuts the log back to `len` bytes, durably.
    fn truncate(&mut self, len: u64) -> io::Result<()>;
    /// Reads the head file, or `None` if there is none.
    fn read_head(&mut self) -> io::Result<Option<Vec<u8>>>;
    /// Replaces the head file atomically and durably: a crash leaves the old or the new
    /// content, never a mixture.
    fn write_head(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// Keeps the bytes of a torn tail found at `offset` in a new side file, durably,
    /// and says where.
    fn save_torn(&mut self, offset: u64, bytes: &[u8]) -> io::Result<PathBuf>;
}

/// A log in a directory: `audit.jsonl`, `audit.head` and, after a crash, one
/// `audit.torn-<offset>` file per torn tail. The log file is locked while open, so
/// that a second handle (in this process or another) cannot interleave writes.
#[derive(Debug)]
pub struct FileStorage {
    dir: PathBuf,
    log: File,
}

impl FileStorage {
    /// Opens (creating if needed) the log in `dir`, which is created if missing.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, AuditError> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).map_err(|e| io_error("create the log directory", e))?;
        let path = dir.join(LOG_FILE);
        let existed = path.exists();
        let log = crate::atomic_write::owner_only(
            OpenOptions::new().read(true).append(true).create(true),
        )
        .open(&path)
        .map_err(|e| io_error("open the log file", e))?;
        match log.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => return Err(AuditError::Locked(path)),
            Err(fs::TryLockError::Error(e)) => return Err(io_error("lock the log file", e)),
        }
        if !existed {
            sync_dir(&dir).map_err(|e| io_error("sync the log directory", e))?;
        }
        Ok(FileStorage { dir, log })
    }

    /// The directory holding the log.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Storage for FileStorage {
    fn read_log(&mut self) -> io::Result<Box<dyn Read + '_>> {
        Ok(Box::new(File::open(self.dir.join(LOG_FILE))?))
    }

    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.log.write_all(bytes)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.log.sync_data()
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.log.set_len(len)?;
        self.log.sync_all()
    }

    fn read_head(&mut self) -> io::Result<Option<Vec<u8>>> {
        match fs::read(self.dir.join(HEAD_FILE)) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error),
        }
    }

    fn write_head(&mut self, bytes: &[u8]) -> io::Result<()> {
        write_atomically(
            &self.dir.join(HEAD_FILE),
            &self.dir.join(HEAD_TEMP_FILE),
            bytes,
        )
    }

    fn save_torn(&mut self, offset: u64, bytes: &[u8]) -> io::Result<PathBuf> {
        // A crash during an earlier repair may have left a file of the same name.
        for attempt in 0u32.. {
            let name = match attempt {
                0 => format!("audit.torn-{offset}"),
                n => format!("audit.torn-{offset}.{n}"),
            };
            let path = self.dir.join(name);
            let mut file = match crate::atomic_write::owner_only(
                OpenOptions::new().write(true).create_new(true),
            )
            .open(&path)
            {
                Ok(file) => file,
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(error) => return Err(error),
            };
            file.write_all(bytes)?;
            file.sync_all()?;
            sync_dir(&self.dir)?;
            return Ok(path);
        }
        Err(io::Error::other("no free name for the torn-tail file"))
    }
}

/// Makes a directory's entries (a created or renamed file) durable.
pub(crate) fn io_error(op: &'static str, error: io::Error) -> AuditError {
    AuditError::Io {
        op,
        source: Arc::new(error),
    }
}
