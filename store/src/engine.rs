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
/// SQLite gives its journal files the database file's mode. An existing file is left as
/// it is.
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
