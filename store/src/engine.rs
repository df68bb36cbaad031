//! The two engines behind one code path: connecting, the few places where their SQL
//! differs, and what their errors mean.
//!
//! Both run through sqlx's `Any` driver, so every query of the store is written (and
//! tested) once; the engine is chosen at run time from a [`Location`](crate::Location).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{Any, AnyPool, AssertSqlSafe, ConnectOptions, Connection, Executor, Row, Transaction};

use crate::error::StoreError;
use crate::options::StoreOptions;

/// Which database a store runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Engine {
    /// SQLite, embedded (bundled with the crate).
    Sqlite,
    /// PostgreSQL.
    Postgres,
}

impl Engine {
    /// Starts a transaction that writes. SQLite takes the write lock at once
    /// (`BEGIN IMMEDIATE`), so two writers never deadlock upgrading read locks; PostgreSQL
    /// locks the rows it writes (`FOR UPDATE`).
    pub(crate) async fn begin_write(
        self,
        pool: &AnyPool,
        op: &'static str,
    ) -> Result<Transaction<'static, Any>, StoreError> {
        let begun = match self {
            Engine::Sqlite => pool.begin_with("BEGIN IMMEDIATE").await,
            Engine::Postgres => pool.begin().await,
        };
        begun.map_err(|e| self.error(op, e))
    }

    /// What a `SELECT` that is about to be updated appends: SQLite's write lock already
    /// covers it.
    pub(crate) fn for_update(self) -> &'static str {
        match self {
            Engine::Sqlite => "",
            Engine::Postgres => " FOR UPDATE",
        }
    }

    /// A database error as a [`StoreError`] that says what it means for the caller.
    pub(crate) fn error(self, op: &'static str, error: sqlx::Error) -> StoreError {
        let code = match &error {
            sqlx::Error::Database(db) => db.code().map(|code| code.into_owned()),
            _ => None,
        };
        let source = Arc::new(error);
        let unreachable = matches!(
            *source,
            sqlx::Error::Io(_)
                | sqlx::Error::Tls(_)
                | sqlx::Error::PoolTimedOut
                | sqlx::Error::PoolClosed
                | sqlx::Error::WorkerCrashed
        );
        if unreachable {
            return StoreError::Unavailable { op, source };
        }
        match (self, code.as_deref()) {
            // SQLite reports extended codes; the primary code is the low byte.
            (Engine::Sqlite, Some(code)) => match code.parse::<i32>().map(|c| c & 0xff) {
                Ok(SQLITE_FULL) => StoreError::Full { op, source },
                Ok(SQLITE_BUSY | SQLITE_LOCKED) => StoreError::Busy { op, source },
                _ => StoreError::Database { op, source },
            },
            // disk_full; serialization_failure and deadlock_detected (retryable);
            // admin_shutdown, crash_shutdown, cannot_connect_now (the server restarts).
            (Engine::Postgres, Some("53100")) => StoreError::Full { op, source },
            (Engine::Postgres, Some("40001" | "40P01")) => StoreError::Busy { op, source },
            (Engine::Postgres, Some("57P01" | "57P02" | "57P03")) => {
                StoreError::Unavailable { op, source }
            }
            _ => StoreError::Database { op, source },
        }
    }

    /// Commits, telling a failed commit from one whose outcome is unknown: a SQLite
    /// commit that fails did not happen; a PostgreSQL connection lost during `COMMIT`
    /// may have committed.
    pub(crate) async fn commit(
        self,
        tx: Transaction<'static, Any>,
        op: &'static str,
    ) -> Result<(), StoreError> {
        match tx.commit().await {
            Ok(()) => Ok(()),
            Err(error) => match (self, self.error(op, error)) {
                (Engine::Postgres, StoreError::Unavailable { op, source }) => {
                    Err(StoreError::CommitUnknown { op, source })
                }
                (_, other) => Err(other),
            },
        }
    }
}

/// Creates the database file, empty, readable and writable by its owner only (mode
/// 0600 on Unix, whatever the umask): it holds the review queue and the audit chain.
/// SQLite gives its journal files the database file's mode. An existing file is left for
/// [`make_owner_only`] to check.
fn create_owner_only(path: &Path) -> Result<(), StoreError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(error) => Err(StoreError::Io {
            op: "create the database file",
            source: std::sync::Arc::new(error),
        }),
    }
}

/// What SQLite appends to the database file's name for the files it keeps beside it:
/// the write-ahead log, its shared-memory index, and the rollback journal.
#[cfg(unix)]
const SQLITE_COMPANIONS: [&str; 3] = ["-wal", "-shm", "-journal"];

/// Makes the database file and the files SQLite keeps beside it readable and writable
/// by their owner only, before anything connects: a file made by an older build, by
/// hand or by a crash under another mode may be open to others (0644, say), and SQLite
/// gives the `-wal` and `-shm` files it creates the database file's mode. Group and
/// other permissions are removed; the owner's are kept.
///
/// A file that belongs to another user than this process's is refused, whatever its
/// mode (its owner can change it at will), and so is one whose mode cannot be changed.
/// The owner is checked where the process's user can be read (Linux: `/proc/self`);
/// elsewhere only a file open to others is refused, when changing its mode fails.
#[cfg(unix)]
fn make_owner_only(path: &Path) -> Result<(), StoreError> {
    let user = effective_uid();
    let companions = SQLITE_COMPANIONS.iter().map(|suffix| {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        std::path::PathBuf::from(name)
    });
    for file in std::iter::once(path.to_path_buf()).chain(companions) {
        tighten(&file, user, |file, mode| {
            std::fs::set_permissions(file, std::os::unix::fs::PermissionsExt::from_mode(mode))
        })?;
    }
    Ok(())
}

/// Checks one file of the store (absent: nothing to do) and removes the permissions of
/// group and others with `chmod`, refusing a file `user` does not own.
#[cfg(unix)]
fn tighten(
    path: &Path,
    user: Option<u32>,
    chmod: impl FnOnce(&Path, u32) -> std::io::Result<()>,
) -> Result<(), StoreError> {
    use std::os::unix::fs::MetadataExt;
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => {
            return Err(StoreError::Io {
                op: "read the owner and mode of the SQLite file and its journals",
                source: Arc::new(error),
            });
        }
    };
    if let Some(user) = user
        && metadata.uid() != user
    {
        return Err(StoreError::NotOwned {
            path: path.to_path_buf(),
            owner: metadata.uid(),
            user,
        });
    }
    let mode = metadata.mode() & 0o7777;
    if mode & 0o077 == 0 {
        return Ok(());
    }
    chmod(path, mode & 0o700).map_err(|error| StoreError::NotOwnerOnly {
        path: path.to_path_buf(),
        mode,
        source: Arc::new(error),
    })
}

/// The user this process acts as (its effective uid), where the system says so without
/// `unsafe`: Linux's `/proc/self/status`. `None` elsewhere, or if it cannot be read.
#[cfg(unix)]
fn effective_uid() -> Option<u32> {
    if !cfg!(any(target_os = "linux", target_os = "android")) {
        return None;
    }
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let uids = status.lines().find_map(|line| line.strip_prefix("Uid:"))?;
    // Real, effective, saved and file-system uids.
    uids.split_whitespace().nth(1)?.parse().ok()
}

const SQLITE_BUSY: i32 = 5;
const SQLITE_LOCKED: i32 = 6;
const SQLITE_FULL: i32 = 13;

/// Opens a pool on a SQLite file: WAL journal (readers never wait for the writer),
/// `synchronous = FULL` (a commit that returned is on disk), the busy timeout, and
/// foreign keys on.
pub(crate) async fn connect_sqlite(
    path: &Path,
    options: &StoreOptions,
) -> Result<AnyPool, StoreError> {
    sqlx::any::install_default_drivers();
    if !options.create && !path.exists() {
        return Err(StoreError::NotFound(path.to_path_buf()));
    }
    if options.create {
        create_owner_only(path)?;
    }
    #[cfg(unix)]
    make_owner_only(path)?;
    let url = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(options.create)
        .to_url_lossy();
    let connect =
        AnyConnectOptions::from_url(&url).map_err(|e| Engine::Sqlite.error("parse", e))?;
    let mut pragmas = format!(
        "PRAGMA busy_timeout = {}; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;",
        options.timeout.as_millis().min(i32::MAX as u128)
    );
    if let Some(pages) = options.sqlite_max_pages {
        pragmas.push_str(&format!(" PRAGMA max_page_count = {pages};"));
    }
    let pragmas: Arc<str> = pragmas.into();
    let pool = pool_options(options)
        .after_connect(move |conn, _| {
            let pragmas = pragmas.clone();
            Box::pin(async move {
                conn.execute(AssertSqlSafe(pragmas.to_string())).await?;
                Ok(())
            })
        })
        .connect_with(connect)
        .await
        .map_err(|e| Engine::Sqlite.error("open the SQLite file", e))?;
    use_wal(&pool, options.timeout).await?;
    Ok(pool)
}

/// Switches the file to WAL mode once (the mode is kept in the file). The switch needs
/// the file to itself and SQLite's busy timeout does not wait for that, so a store
/// opened by two processes at once retries until `timeout`.
async fn use_wal(pool: &AnyPool, timeout: Duration) -> Result<(), StoreError> {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(1);
    loop {
        let mode = sqlx::query("PRAGMA journal_mode = WAL")
            .fetch_one(pool)
            .await
            .and_then(|row| row.try_get::<String, _>(0));
        match mode {
            Ok(mode) if mode.eq_ignore_ascii_case("wal") => return Ok(()),
            Ok(mode) => {
                return Err(StoreError::BadOption {
                    option: "journal_mode",
                    reason: format!("SQLite kept journal mode {mode:?}; the store needs WAL"),
                });
            }
            Err(error) => match Engine::Sqlite.error("switch the SQLite file to WAL", error) {
                StoreError::Busy { .. } if Instant::now() < deadline => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(100));
                }
                other => return Err(other),
            },
        }
    }
}

/// Opens a pool on PostgreSQL; with a schema, every connection works in it.
pub(crate) async fn connect_postgres(
    url: &str,
    options: &StoreOptions,
) -> Result<AnyPool, StoreError> {
    sqlx::any::install_default_drivers();
    let search_path: Option<Arc<str>> = options
        .postgres_schema
        .as_deref()
        .map(|schema| quoted_schema(schema).map(|q| format!("SET search_path TO {q}").into()))
        .transpose()?;
    pool_options(options)
        .after_connect(move |conn, _| {
            let search_path = search_path.clone();
            Box::pin(async move {
                if let Some(search_path) = search_path {
                    conn.execute(AssertSqlSafe(search_path.to_string())).await?;
                }
                Ok(())
            })
        })
        .connect(url)
        .await
        .map_err(|e| Engine::Postgres.error("connect to PostgreSQL", e))
}

/// What both engines' pools share. A connection coming back to the pool first runs
/// the rollback a dropped transaction queued; one whose transaction could not be ended
/// (SQLite may roll a transaction back by itself after SQLITE_FULL, and then the queued
/// rollback fails) is closed instead of being handed to the next caller mid-transaction.
fn pool_options(options: &StoreOptions) -> AnyPoolOptions {
    AnyPoolOptions::new()
        .max_connections(options.max_connections.max(1))
        .acquire_timeout(options.timeout)
        .after_release(|conn, _| {
            Box::pin(async move {
                if conn.is_in_transaction() {
                    conn.ping().await?;
                }
                Ok(!conn.is_in_transaction())
            })
        })
}

/// `"schema"`, once the name is checked against the grammar the option documents (so
/// that it needs no escaping).
pub(crate) fn quoted_schema(schema: &str) -> Result<String, StoreError> {
    let mut chars = schema.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !first_ok || !rest_ok || schema.len() > 63 {
        return Err(StoreError::BadOption {
            option: "postgres_schema",
            reason: format!(
                "{schema:?}: use 1 to 63 of a-z, 0-9 and _, starting with a letter or _"
            ),
        });
    }
    Ok(format!("\"{schema}\""))
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::Store;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().mode() & 0o7777
    }

    fn set_mode(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    fn companion(path: &Path, suffix: &str) -> PathBuf {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    }

    /// A store file that an older build (or a person) left readable by everyone is made
    /// owner-only when the store opens it, and so are the -wal and -shm files SQLite then
    /// creates from its mode.
    #[tokio::test]
    async fn an_existing_store_file_open_to_others_is_made_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        let store = Store::open_sqlite(&path).await.unwrap();
        store
            .append(&serde_json::json!({"event": "note"}))
            .await
            .unwrap();
        store.close().await;
        assert!(
            !companion(&path, "-wal").exists(),
            "the last close removes the WAL"
        );
        set_mode(&path, 0o644);

        let store = Store::open_sqlite(&path).await.unwrap();
        store
            .append(&serde_json::json!({"event": "note"}))
            .await
            .unwrap();
        for file in [
            path.clone(),
            companion(&path, "-wal"),
            companion(&path, "-shm"),
        ] {
            assert_eq!(mode(&file), 0o600, "{}", file.display());
        }
        assert_eq!(store.verify_chain(None).await.unwrap().entries, 2);
        store.close().await;
    }

    /// The -wal and -shm files SQLite keeps while a store is open (and leaves behind
    /// after a crash) are checked too: a second handle opening the file tightens them.
    #[tokio::test]
    async fn journals_open_to_others_are_made_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journals.db");
        let first = Store::open_sqlite(&path).await.unwrap();
        first
            .append(&serde_json::json!({"event": "note"}))
            .await
            .unwrap();
        let files = [
            path.clone(),
            companion(&path, "-wal"),
            companion(&path, "-shm"),
        ];
        for file in &files {
            set_mode(file, 0o664);
        }

        let second = Store::open_sqlite(&path).await.unwrap();
        second
            .append(&serde_json::json!({"event": "note"}))
            .await
            .unwrap();
        for file in &files {
            assert_eq!(mode(file), 0o600, "{}", file.display());
        }
        first.close().await;
        second.close().await;
    }

    /// Only group and other permissions are removed: a file its owner made read-only
    /// stays read-only.
    #[test]
    fn tightening_removes_only_the_permissions_of_others() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("read-only.db");
        std::fs::write(&path, b"").unwrap();
        set_mode(&path, 0o444);
        let owner = std::fs::metadata(&path).unwrap().uid();
        tighten(&path, Some(owner), |file, mode| {
            std::fs::set_permissions(file, std::fs::Permissions::from_mode(mode))
        })
        .unwrap();
        assert_eq!(mode(&path), 0o400);
        // Absent: nothing to check.
        tighten(&dir.path().join("absent"), Some(owner), |_, _| {
            unreachable!("nothing to change")
        })
        .unwrap();
    }

    /// A file of another user is refused, whatever its mode, and left as it is.
    #[test]
    fn a_file_of_another_user_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("theirs.db");
        std::fs::write(&path, b"").unwrap();
        set_mode(&path, 0o600);
        let owner = std::fs::metadata(&path).unwrap().uid();
        let other = owner.wrapping_add(1);
        let refused = tighten(&path, Some(other), |_, _| {
            unreachable!("not ours to change")
        });
        let Err(error @ StoreError::NotOwned { .. }) = refused else {
            panic!("{refused:?}");
        };
        assert!(
            matches!(&error, StoreError::NotOwned { path: p, owner: o, user: u }
                if *p == path && *o == owner && *u == other),
            "{error:?}"
        );
        let text = error.to_string();
        assert!(
            text.contains(&path.display().to_string()) && text.contains("chown"),
            "{text}"
        );
        assert_eq!(mode(&path), 0o600);
    }

    /// As root, a real store file given to another user: `Store::open` refuses it and
    /// changes nothing. (Without root a file cannot be given away; the case above checks
    /// the same refusal.)
    #[tokio::test]
    async fn opening_a_store_file_of_another_user_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("given-away.db");
        Store::open_sqlite(&path).await.unwrap().close().await;
        set_mode(&path, 0o644);
        if effective_uid().is_none() || std::os::unix::fs::chown(&path, Some(65534), None).is_err()
        {
            return;
        }
        let opened = Store::open_sqlite(&path).await;
        assert!(
            matches!(&opened, Err(StoreError::NotOwned { path: p, owner: 65534, .. }) if *p == path),
            "{opened:?}"
        );
        assert_eq!(mode(&path), 0o644, "left as it was");
        assert!(!companion(&path, "-wal").exists(), "never opened");
    }

    /// A file open to others whose mode cannot be changed is refused, saying which file,
    /// its mode and what to do.
    #[test]
    fn a_mode_that_cannot_be_changed_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stuck.db");
        std::fs::write(&path, b"").unwrap();
        set_mode(&path, 0o644);
        let owner = std::fs::metadata(&path).unwrap().uid();
        let refused = tighten(&path, Some(owner), |_, _| {
            Err(std::io::Error::from(std::io::ErrorKind::PermissionDenied))
        });
        let Err(error) = refused else {
            panic!("a mode that could not be changed was accepted");
        };
        assert!(
            matches!(&error, StoreError::NotOwnerOnly { path: p, mode: 0o644, .. } if *p == path),
            "{error:?}"
        );
        let text = error.to_string();
        assert!(
            text.contains(&path.display().to_string())
                && text.contains("0644")
                && text.contains("chmod 600"),
            "{text}"
        );
    }

    /// On Linux the process's user is known: it owns the files it creates.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_process_user_owns_what_it_creates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mine");
        std::fs::write(&path, b"").unwrap();
        assert_eq!(
            effective_uid(),
            Some(std::fs::metadata(&path).unwrap().uid())
        );
    }
}
