//! How a store is opened.

use std::sync::Arc;
use std::time::Duration;

use tooltrust::Id;
use tooltrust::held::Reviewers;
use tooltrust::signature::SecretKey;

/// How [`Store::open`](crate::Store::open) opens a store. The defaults suit both
/// engines; the engine-specific fields are ignored by the other engine.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// The tenant whose chain, quarantine and conversations the handle uses (default
    /// `default`); [`Store::for_tenant`](crate::Store::for_tenant) switches.
    pub tenant: Id,
    /// Create a SQLite file that does not exist (default `true`). Tools that only read a
    /// store (`tooltrust pending`, `tooltrust audit verify`) set it to `false`, so that a
    /// mistyped path is an error rather than a new empty store.
    pub create: bool,
    /// The most connections the pool opens (default 8).
    pub max_connections: u32,
    /// How long an operation waits for a connection, and (SQLite) for another writer's
    /// lock, before it fails with [`StoreError::Unavailable`](crate::StoreError::Unavailable)
    /// or [`StoreError::Busy`](crate::StoreError::Busy) (default 30 s).
    pub timeout: Duration,
    /// Group commit: how long the appender waits for concurrent appends to join a batch
    /// (see [`Store::append`](crate::Store::append)); zero never waits (default 100 µs,
    /// at most one second is used).
    pub gather: Duration,
    /// PostgreSQL: the schema that holds the tables (created if missing); `None` uses
    /// the connection's `search_path` (by default `public`). Lowercase letters, digits
    /// and `_`, starting with a letter or `_`, at most 63 bytes.
    pub postgres_schema: Option<String>,
    /// SQLite: the largest the database file may grow, in pages of 4 KiB (`PRAGMA
    /// max_page_count`); `None` leaves SQLite's own limit. Past it every write fails
    /// with [`StoreError::Full`](crate::StoreError::Full), exactly as on a full disk.
    pub sqlite_max_pages: Option<u32>,
    /// Who may decide held calls: the reviewers' public keys and tenants (default: none,
    /// so no decision counts). A decision counts only with its reviewer's signature, both
    /// when it is made and when its approval is claimed; write access to the database
    /// approves nothing.
    pub reviewers: Arc<Reviewers>,
    /// The key this process signs its chain entries with (default: none, entries
    /// unsigned). A verifier that holds its public key refuses any entry edited, inserted
    /// or re-hashed without it.
    pub writer: Option<Arc<SecretKey>>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            tenant: default_tenant(),
            create: true,
            max_connections: 8,
            timeout: Duration::from_secs(30),
            gather: Duration::from_micros(100),
            postgres_schema: None,
            sqlite_max_pages: None,
            reviewers: Arc::new(Reviewers::new()),
            writer: None,
        }
    }
}

/// The tenant `default`.
pub fn default_tenant() -> Id {
    // A literal that satisfies the id grammar.
    Id::new("default").unwrap_or_else(|_| unreachable!("\"default\" is a valid id"))
}

/// What gives a store's writes their authority: the reviewers whose signed decisions
/// count, and the key that signs this process's chain entries.
#[derive(Debug, Clone)]
pub(crate) struct Authority {
    pub(crate) reviewers: Arc<Reviewers>,
    pub(crate) writer: Option<Arc<SecretKey>>,
}
