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
    ///
    /// On Unix the log is its owner's alone: a directory it creates has mode 0700 and
    /// its files 0600, whatever the umask; a directory and files that already existed
    /// open to others are made so when the log opens. A directory or file of another
    /// user, one whose mode cannot be changed, or a directory others may write to that
    /// holds other files than the log's, is refused: [`AuditError::Io`] of kind
    /// [`PermissionDenied`](io::ErrorKind::PermissionDenied), saying which path, its mode
    /// and what to do.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, AuditError> {
        let dir = dir.as_ref().to_path_buf();
        create_owner_only_dir(&dir).map_err(|e| io_error("create the log directory", e))?;
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
        // After the log file is opened, so that a directory this user may not write to
        // is reported as such.
        #[cfg(unix)]
        make_owner_only(&dir, effective_uid(), &|path, mode| {
            fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(mode))
        })?;
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

/// Why a log was not opened: a file or directory of the log could be read or changed by
/// others than this process's user, and could not be made its alone. Returned inside
/// [`AuditError::Io`] (kind [`PermissionDenied`](io::ErrorKind::PermissionDenied)); the
/// message says which path, its mode, and what to do.
#[cfg(unix)]
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ModeError {
    /// The directory or a file of the log belongs to another user, whose owner can read
    /// and change it whatever its mode.
    #[error(
        "{} belongs to uid {owner}, not to this process's user (uid {user}): open the log as uid {owner}, or give it to uid {user} (chown) and make it owner-only",
        path.display()
    )]
    NotOwned {
        /// The directory or file.
        path: PathBuf,
        /// The uid that owns it.
        owner: u32,
        /// This process's (effective) uid.
        user: u32,
    },
    /// The directory or a file of the log is open to others, and its mode could not be
    /// changed.
    #[error(
        "{} has mode {mode:04o}, open to others than its owner, and cannot be made owner-only: run `chmod {wanted:o}` on it as its owner",
        path.display()
    )]
    NotOwnerOnly {
        /// The directory or file.
        path: PathBuf,
        /// Its mode (permission bits).
        mode: u32,
        /// The mode the log wants (0700 for its directory, 0600 for its files).
        wanted: u32,
        /// Why the mode could not be changed.
        #[source]
        source: Arc<io::Error>,
    },
    /// The log's directory holds files that are not the log's (so it is not made
    /// owner-only for the log's sake) and others may write to it: they could replace
    /// the log's files.
    #[error(
        "the log directory {} has mode {mode:04o}: others may write to it, and it holds files that are not the log's; give the log a directory of its own (it is made owner-only, 0700)",
        path.display()
    )]
    SharedDirectory {
        /// The directory.
        path: PathBuf,
        /// Its mode (permission bits).
        mode: u32,
    },
}

/// Creates `dir` and any missing parent; on Unix those it creates are owner-only (mode
/// 0700, whatever the umask). An existing directory is left for `make_owner_only`.
fn create_owner_only_dir(dir: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Whether `name` is one of the files a log keeps in its directory.
#[cfg(unix)]
fn is_log_file(name: &std::ffi::OsStr) -> bool {
    name == LOG_FILE
        || name == HEAD_FILE
        || name == HEAD_TEMP_FILE
        || name
            .to_str()
            .is_some_and(|name| name.starts_with("audit.torn-"))
}

/// Makes the log's directory and files its owner's alone, removing every permission
/// of group and others with `chmod`: the directory (0700) when it holds nothing but
/// the log's files, and each of the log's files (0600). Refused ([`ModeError`]): a
/// directory or file that `user` does not own (where `user` is known), one whose mode
/// `chmod` cannot change, and a directory shared with other files that others may
/// write to.
#[cfg(unix)]
fn make_owner_only(
    dir: &Path,
    user: Option<u32>,
    chmod: &dyn Fn(&Path, u32) -> io::Result<()>,
) -> Result<(), AuditError> {
    use std::os::unix::fs::MetadataExt;
    const OP: &str = "check the owner and mode of the log's files";
    let refused = |error: ModeError| AuditError::Io {
        op: "make the log owner-only",
        source: Arc::new(io::Error::new(io::ErrorKind::PermissionDenied, error)),
    };
    let owned = |path: &Path, metadata: &fs::Metadata| match user {
        Some(user) if metadata.uid() != user => Err(refused(ModeError::NotOwned {
            path: path.to_path_buf(),
            owner: metadata.uid(),
            user,
        })),
        _ => Ok(()),
    };
    let tighten = |path: &Path, metadata: &fs::Metadata, wanted: u32| {
        let mode = metadata.mode() & 0o7777;
        if mode & 0o077 == 0 {
            return Ok(());
        }
        chmod(path, mode & 0o700).map_err(|error| {
            refused(ModeError::NotOwnerOnly {
                path: path.to_path_buf(),
                mode,
                wanted,
                source: Arc::new(error),
            })
        })
    };

    let metadata = fs::metadata(dir).map_err(|e| io_error(OP, e))?;
    owned(dir, &metadata)?;
    let mut files = Vec::new();
    let mut shared = false;
    for entry in fs::read_dir(dir).map_err(|e| io_error(OP, e))? {
        let name = entry.map_err(|e| io_error(OP, e))?.file_name();
        if is_log_file(&name) {
            files.push(dir.join(name));
        } else {
            shared = true;
        }
    }
    // The directory first: once it is the owner's alone, no one else can swap the
    // files checked next.
    let mode = metadata.mode() & 0o7777;
    if !shared {
        tighten(dir, &metadata, 0o700)?;
    } else if mode & 0o022 != 0 {
        return Err(refused(ModeError::SharedDirectory {
            path: dir.to_path_buf(),
            mode,
        }));
    }
    for file in files {
        let metadata = match fs::metadata(&file) {
            Ok(metadata) => metadata,
            // Removed meanwhile (a head written atomically renames its temp file).
            Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
            Err(error) => return Err(io_error(OP, error)),
        };
        owned(&file, &metadata)?;
        tighten(&file, &metadata, 0o600)?;
    }
    Ok(())
}

/// The user this process acts as (its effective uid), where the system says so without
/// `unsafe`: Linux's `/proc/self/status`. `None` elsewhere, or if it cannot be read;
/// then only what `chmod` refuses (another user's file, unless running as root) is
/// refused.
#[cfg(unix)]
fn effective_uid() -> Option<u32> {
    if !cfg!(any(target_os = "linux", target_os = "android")) {
        return None;
    }
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let uids = status.lines().find_map(|line| line.strip_prefix("Uid:"))?;
    // Real, effective, saved and file-system uids.
    uids.split_whitespace().nth(1)?.parse().ok()
}

/// A failed file operation `op` as an [`AuditError`].
pub(crate) fn io_error(op: &'static str, error: io::Error) -> AuditError {
    AuditError::Io {
        op,
        source: Arc::new(error),
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    use super::*;
    use crate::audit::{AuditLog, verify};

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().mode() & 0o7777
    }

    fn set_mode(path: &Path, mode: u32) {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    fn chmod(path: &Path, mode: u32) -> io::Result<()> {
        fs::set_permissions(path, fs::Permissions::from_mode(mode))
    }

    /// A log with entries, closed, in `root/name`.
    fn written_log(root: &Path, name: &str) -> PathBuf {
        let dir = root.join(name);
        let log = AuditLog::open(&dir).unwrap();
        for n in 1..=2 {
            log.append(&serde_json::json!({"event": "note", "n": n}))
                .unwrap();
        }
        dir
    }

    /// The refusal inside an `AuditError`, if that is what it is.
    fn mode_error(error: &AuditError) -> Option<&ModeError> {
        let AuditError::Io { op, source } = error else {
            return None;
        };
        assert_eq!(*op, "make the log owner-only");
        assert_eq!(source.kind(), io::ErrorKind::PermissionDenied);
        source.get_ref()?.downcast_ref::<ModeError>()
    }

    /// A new log directory (and any parent the log creates) is owner-only from the
    /// start, whatever the umask.
    #[test]
    fn a_new_log_directory_is_owner_only() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("state").join("audit");
        drop(AuditLog::open(&dir).unwrap());
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&root.path().join("state")), 0o700);
        assert_eq!(mode(&dir.join(LOG_FILE)), 0o600);
    }

    /// A log directory and files left open to others (an older build, or a person) are
    /// made owner-only when the log opens, and the log still verifies.
    #[test]
    fn an_existing_log_open_to_others_is_made_owner_only() {
        let root = tempfile::tempdir().unwrap();
        let dir = written_log(root.path(), "audit");
        fs::write(dir.join("audit.torn-7"), b"{\"seq\":").unwrap();
        set_mode(&dir, 0o755);
        for name in [LOG_FILE, HEAD_FILE, "audit.torn-7"] {
            set_mode(&dir.join(name), 0o644);
        }

        let log = AuditLog::open(&dir).unwrap();
        log.append(&serde_json::json!({"event": "note", "n": 3}))
            .unwrap();
        drop(log);
        assert_eq!(mode(&dir), 0o700);
        for name in [LOG_FILE, HEAD_FILE, "audit.torn-7"] {
            assert_eq!(mode(&dir.join(name)), 0o600, "{name}");
        }
        assert_eq!(verify(&dir.join(LOG_FILE), None).unwrap().entries, 3);
    }

    /// A directory shared with other files is not the log's to close: its files are
    /// made owner-only and, if others may only read it, the directory is left as it is.
    #[test]
    fn a_shared_directory_others_may_only_read_is_left_as_it_is() {
        let root = tempfile::tempdir().unwrap();
        let dir = written_log(root.path(), "config");
        fs::write(dir.join("tooltrust.toml"), b"audit_log = \".\"\n").unwrap();
        set_mode(&dir, 0o755);
        set_mode(&dir.join(LOG_FILE), 0o644);

        drop(AuditLog::open(&dir).unwrap());
        assert_eq!(mode(&dir), 0o755);
        assert_eq!(mode(&dir.join(LOG_FILE)), 0o600);
    }

    /// A shared directory others may write to (`/tmp`, say) is refused: they could
    /// replace the log's files. Nothing is changed.
    #[test]
    fn a_shared_directory_others_may_write_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let dir = written_log(root.path(), "shared");
        fs::write(dir.join("notes.txt"), b"").unwrap();
        set_mode(&dir, 0o1777);
        set_mode(&dir.join(LOG_FILE), 0o644);

        let error = AuditLog::open(&dir).unwrap_err();
        assert!(
            matches!(mode_error(&error), Some(ModeError::SharedDirectory { path, mode: 0o1777 }) if *path == dir),
            "{error:?}"
        );
        let text = error.to_string();
        assert!(
            text.contains(&dir.display().to_string()) && text.contains("directory of its own"),
            "{text}"
        );
        assert_eq!(mode(&dir), 0o1777);
        assert_eq!(mode(&dir.join(LOG_FILE)), 0o644);
        set_mode(&dir, 0o700);
    }

    /// A directory or file of another user is refused, whatever its mode.
    #[test]
    fn a_log_of_another_user_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let dir = written_log(root.path(), "theirs");
        let owner = fs::metadata(&dir).unwrap().uid();
        let other = owner.wrapping_add(1);
        let error =
            make_owner_only(&dir, Some(other), &|_, _| unreachable!("not ours")).unwrap_err();
        assert!(
            matches!(mode_error(&error), Some(ModeError::NotOwned { path, owner: o, user })
                if *path == dir && *o == owner && *user == other),
            "{error:?}"
        );
        assert!(error.to_string().contains("chown"), "{error}");
    }

    /// As root, a real log directory given to another user: opening refuses it and
    /// changes nothing. (Without root nothing can be given away; the case above checks
    /// the same refusal.)
    #[test]
    fn opening_a_log_directory_of_another_user_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let dir = written_log(root.path(), "given-away");
        set_mode(&dir, 0o755);
        if effective_uid().is_none() || std::os::unix::fs::chown(&dir, Some(65534), None).is_err() {
            return;
        }
        let error = AuditLog::open(&dir).unwrap_err();
        assert!(
            matches!(mode_error(&error), Some(ModeError::NotOwned { path, owner: 65534, .. }) if *path == dir),
            "{error:?}"
        );
        assert_eq!(mode(&dir), 0o755);
    }

    /// A directory or file open to others whose mode cannot be changed is refused,
    /// saying which, its mode and what to do.
    #[test]
    fn a_mode_that_cannot_be_changed_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let dir = written_log(root.path(), "stuck");
        let user = fs::metadata(&dir).unwrap().uid();
        let denied = |_: &Path, _: u32| Err(io::Error::from(io::ErrorKind::PermissionDenied));

        set_mode(&dir, 0o750);
        let error = make_owner_only(&dir, Some(user), &denied).unwrap_err();
        assert!(
            matches!(mode_error(&error), Some(ModeError::NotOwnerOnly { path, mode: 0o750, wanted: 0o700, .. }) if *path == dir),
            "{error:?}"
        );
        assert!(
            error.to_string().contains("0750") && error.to_string().contains("chmod 700"),
            "{error}"
        );

        set_mode(&dir, 0o700);
        set_mode(&dir.join(HEAD_FILE), 0o640);
        let error = make_owner_only(&dir, Some(user), &denied).unwrap_err();
        assert!(
            matches!(mode_error(&error), Some(ModeError::NotOwnerOnly { path, mode: 0o640, wanted: 0o600, .. }) if *path == dir.join(HEAD_FILE)),
            "{error:?}"
        );
        // What is already owner-only needs no change.
        set_mode(&dir.join(HEAD_FILE), 0o600);
        make_owner_only(&dir, Some(user), &|_, _| unreachable!("nothing to change")).unwrap();
        // Only the permissions of others go: a read-only file stays read-only.
        set_mode(&dir.join(HEAD_FILE), 0o444);
        make_owner_only(&dir, Some(user), &chmod).unwrap();
        assert_eq!(mode(&dir.join(HEAD_FILE)), 0o400);
    }
}
