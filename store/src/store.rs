//! The store handle: opening either engine, tenants, and the audit chain's operations.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;
use sqlx::{AnyPool, Row};
use tooltrust::Id;
use tooltrust::audit::{Body, Head, Receipt, VerifyReport, Writers};

use crate::appender::Appender;
use crate::chain;
use crate::engine::{self, Engine};
use crate::error::{ChainError, StoreError};
use crate::location::Location;
use crate::options::{Authority, StoreOptions};
use crate::schema;
use crate::transition::{Done, Work};

/// A durable store: the review queue (held calls and their decisions), quarantined
/// outputs, conversations and the audit chain, on SQLite or PostgreSQL.
///
/// A `Store` is a cheap handle (clone it freely) bound to one tenant; all handles of one
/// [`open`](Self::open) share its connection pool and its appenders (one queue per chain,
/// see [`append`](Self::append)). Use it from the Tokio runtime that opened it. Synchronous code records events through
/// [`StoreRecorder`](crate::StoreRecorder) instead.
///
/// ```
/// # tokio::runtime::Runtime::new()?.block_on(async {
/// use tooltrust_store::Store;
/// let dir = tempfile::tempdir()?;
/// let store = Store::open_sqlite(dir.path().join("store.db")).await?;
/// let receipt = store.append(&serde_json::json!({"event": "call_denied", "tool": "send_email"})).await?;
/// assert_eq!(receipt.seq, 1);
/// let report = store.verify_chain(None).await?;
/// assert_eq!(report.entries, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })
/// # .map_err(|e| e.to_string())?; Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Store {
    shared: Arc<Shared>,
    tenant: Id,
}

pub(crate) struct Shared {
    pub(crate) pool: AnyPool,
    pub(crate) engine: Engine,
    pub(crate) location: Location,
    gather: Duration,
    /// Whose decisions count, and the key that signs this process's entries.
    pub(crate) authority: Arc<Authority>,
    /// One appender per chain, started on first use: chains do not share a head, so
    /// their batches commit side by side.
    appenders: Mutex<HashMap<Id, Arc<Appender>>>,
}

impl Store {
    /// Opens the store at `location`: connects, applies the embedded migrations (or
    /// refuses a schema newer than this build knows). Must be called inside a Tokio
    /// runtime, which then runs the store's appender tasks.
    pub async fn open(location: &Location, options: StoreOptions) -> Result<Store, StoreError> {
        let (pool, engine) = match location {
            Location::Sqlite(path) => (
                engine::connect_sqlite(path, &options).await?,
                Engine::Sqlite,
            ),
            Location::Postgres(url) => (
                engine::connect_postgres(url, &options).await?,
                Engine::Postgres,
            ),
        };
        if let Err(error) = schema::migrate(&pool, engine, options.postgres_schema.as_deref()).await
        {
            pool.close().await;
            return Err(error);
        }
        Ok(Store {
            shared: Arc::new(Shared {
                pool,
                engine,
                location: location.clone(),
                gather: options.gather,
                authority: Arc::new(Authority {
                    reviewers: options.reviewers,
                    writer: options.writer,
                }),
                appenders: Mutex::new(HashMap::new()),
            }),
            tenant: options.tenant,
        })
    }

    /// Opens (creating if needed) a SQLite store with the default options.
    pub async fn open_sqlite(path: impl AsRef<Path>) -> Result<Store, StoreError> {
        let location = Location::Sqlite(path.as_ref().to_path_buf());
        Store::open(&location, StoreOptions::default()).await
    }

    /// Connects to a PostgreSQL store with the default options.
    pub async fn connect_postgres(url: &str) -> Result<Store, StoreError> {
        let location = Location::Postgres(url.to_owned());
        Store::open(&location, StoreOptions::default()).await
    }

    /// The engine the store runs on.
    pub fn engine(&self) -> Engine {
        self.shared.engine
    }

    /// Where the store lives.
    pub fn location(&self) -> &Location {
        &self.shared.location
    }

    /// The reviewers whose signed decisions this store accepts.
    pub fn reviewers(&self) -> &tooltrust::held::Reviewers {
        &self.shared.authority.reviewers
    }

    /// The tenant this handle works for.
    pub fn tenant(&self) -> &Id {
        &self.tenant
    }

    /// A handle on the same store for another tenant (its own chain, quarantine and
    /// conversations; the review queue is shared, each call naming its tenant).
    pub fn for_tenant(&self, tenant: Id) -> Store {
        Store {
            shared: self.shared.clone(),
            tenant,
        }
    }

    /// Closes the connection pool of this store and of every handle sharing it, waiting
    /// for the connections to close.
    pub async fn close(self) {
        self.shared.pool.close().await;
    }

    pub(crate) fn pool(&self) -> &AnyPool {
        &self.shared.pool
    }

    /// Appends `event` to the tenant's chain and returns once it is committed.
    ///
    /// The event must serialize to a JSON object with a string field `"event"` naming
    /// its type and no field named `seq`, `ts`, `prev` or `hash`; the entry is sealed
    /// exactly as the file log seals it. Never pass secrets (keys, quarantined
    /// plaintext): the chain stores what it is given.
    ///
    /// # Group commit
    ///
    /// Appends to a chain from all handles of this store (and the decisions and claims
    /// whose entries go to it) go through one task, which commits all the work waiting
    /// at that moment in one transaction; when the last round saw several callers, a
    /// transaction waits up to [`StoreOptions::gather`] for them all to join. An append that returned `Ok` is committed (on SQLite with `synchronous =
    /// FULL`, on disk); one that failed left nothing, unless the error is
    /// [`StoreError::CommitUnknown`].
    pub async fn append<T: Serialize + ?Sized>(&self, event: &T) -> Result<Receipt, StoreError> {
        let mut receipts = self.append_bodies(vec![Body::of(event)?]).await?;
        receipts.pop().ok_or(StoreError::Closed)
    }

    /// Appends `events` in order, all in one transaction: all of them or none.
    pub async fn append_all<T: Serialize>(&self, events: &[T]) -> Result<Vec<Receipt>, StoreError> {
        let bodies = events.iter().map(Body::of).collect::<Result<Vec<_>, _>>()?;
        self.append_bodies(bodies).await
    }

    pub(crate) async fn append_bodies(
        &self,
        bodies: Vec<Body>,
    ) -> Result<Vec<Receipt>, StoreError> {
        if bodies.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(body) = bodies.iter().find(|body| crate::event::is_lifecycle(body)) {
            return Err(StoreError::ReservedEvent(body.event().to_owned()));
        }
        let work = Work::Append {
            tenant: self.tenant.clone(),
            bodies,
        };
        match self.submit(&self.tenant, work).await? {
            Done::Appended(receipts) => Ok(receipts),
            _ => Err(StoreError::Closed),
        }
    }

    /// Hands `work` to the appender of `tenant`'s chain and waits for its commit.
    pub(crate) async fn submit(&self, tenant: &Id, work: Work) -> Result<Done, StoreError> {
        let appender = {
            let mut appenders = self
                .shared
                .appenders
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            appenders
                .entry(tenant.clone())
                .or_insert_with(|| {
                    Appender::new(
                        self.shared.pool.clone(),
                        self.shared.engine,
                        self.shared.gather,
                        self.shared.authority.clone(),
                    )
                })
                .clone()
        };
        appender.submit(work).await
    }

    /// The tenant's head row: the last committed entry ([`Head::EMPTY`] for a chain with
    /// no entry). Pin it somewhere the agents cannot write to detect truncation later.
    pub async fn head(&self) -> Result<Head, StoreError> {
        const OP: &str = "read the chain head";
        let row = sqlx::query("SELECT seq, hash FROM chain_head WHERE tenant = $1")
            .bind(self.tenant.as_str())
            .fetch_optional(self.pool())
            .await
            .map_err(|e| self.engine().error(OP, e))?;
        match row {
            Some(row) => chain::head_of(&self.tenant, row.try_get(0), row.try_get(1)),
            None => Ok(Head::EMPTY),
        }
    }

    /// Verifies the tenant's chain: every entry canonical, hashed and chained (the
    /// checks of [`tooltrust::audit::verify`], by the same reader), the chain ending
    /// exactly at the head row, and, if given, still holding `pinned`.
    pub async fn verify_chain(&self, pinned: Option<Head>) -> Result<VerifyReport, ChainError> {
        chain::verify(self.pool(), self.engine(), &self.tenant, pinned, None).await
    }

    /// [`verify_chain`](Self::verify_chain), and every entry must be signed by one of
    /// `writers` (the public keys of the processes that write the chain): then an entry
    /// edited, inserted or re-hashed by someone with only database access fails, with or
    /// without a pinned head.
    pub async fn verify_chain_signed(
        &self,
        pinned: Option<Head>,
        writers: &Writers,
    ) -> Result<VerifyReport, ChainError> {
        chain::verify(
            self.pool(),
            self.engine(),
            &self.tenant,
            pinned,
            Some(writers.clone()),
        )
        .await
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("location", &self.shared.location)
            .field("tenant", &self.tenant)
            .finish_non_exhaustive()
    }
}
