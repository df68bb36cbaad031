//! A synchronous [`Recorder`] over a store's chain, for the runtime's session.
//!
//! The session records from synchronous code, which may itself run inside any async
//! executor, or none. Blocking on the caller's runtime from there would deadlock it (a
//! current-thread runtime cannot run the store's task while its only thread waits) or
//! panic (Tokio refuses `block_on` inside a runtime). So the recorder runs its store on
//! a thread of its own, with a runtime of its own: `record` hands the event to that
//! thread and waits on a channel for the commit. Concurrent `record` calls from many
//! threads are committed together (group commit).

use std::sync::Arc;
use std::sync::mpsc as std_mpsc;
use std::thread::JoinHandle;

use serde::Serialize;
use tokio::sync::mpsc;
use tooltrust::audit::{Body, Receipt};
use tooltrust::event::{Event, PartialRecord, RecordError, Recorder};

use crate::error::StoreError;
use crate::location::Location;
use crate::options::StoreOptions;
use crate::store::Store;

type Reply = std_mpsc::SyncSender<Result<Vec<Receipt>, StoreError>>;

/// Records events durably in a store's chain, from synchronous code.
///
/// `record` returns once the event is committed; an error means it was not recorded
/// (and the runtime does not take the decision). Dropping the recorder finishes the
/// appends under way and closes its store.
///
/// ```
/// use tooltrust::Id;
/// use tooltrust::event::{Event, Recorder};
/// use tooltrust_store::{Location, StoreOptions, StoreRecorder};
/// let dir = tempfile::tempdir()?;
/// let location = Location::Sqlite(dir.path().join("store.db"));
/// let recorder = StoreRecorder::open(location, StoreOptions::default())?;
/// recorder.record(&Event::ScopeOpened {
///     scope: Id::new("support")?,
///     parent: None,
///     author: Id::new("ann")?,
///     kind: tooltrust::gate::ScopeRole::Agent,
/// })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct StoreRecorder {
    requests: Option<mpsc::UnboundedSender<(Vec<Body>, Reply)>>,
    thread: Option<JoinHandle<()>>,
}

impl StoreRecorder {
    /// Opens the store at `location` on the recorder's own thread, for
    /// `options.tenant`'s chain; returns once it is open (or why it cannot be).
    pub fn open(location: Location, options: StoreOptions) -> Result<StoreRecorder, StoreError> {
        let io = |op, error| StoreError::Io {
            op,
            source: Arc::new(error),
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| io("start the recorder's runtime", e))?;
        let (requests, mut incoming) = mpsc::unbounded_channel::<(Vec<Body>, Reply)>();
        let (opened, is_open) = std_mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name("tooltrust-store-recorder".to_owned())
            .spawn(move || {
                runtime.block_on(async move {
                    let store = match Store::open(&location, options).await {
                        Ok(store) => {
                            let _ = opened.send(Ok(()));
                            store
                        }
                        Err(error) => {
                            let _ = opened.send(Err(error));
                            return;
                        }
                    };
                    let mut appends = tokio::task::JoinSet::new();
                    while let Some((bodies, reply)) = incoming.recv().await {
                        let store = store.clone();
                        appends.spawn(async move {
                            let _ = reply.send(store.append_bodies(bodies).await);
                        });
                        while appends.try_join_next().is_some() {}
                    }
                    appends.join_all().await;
                    store.close().await;
                });
            })
            .map_err(|e| io("start the recorder's thread", e))?;
        match is_open.recv() {
            Ok(Ok(())) => Ok(StoreRecorder {
                requests: Some(requests),
                thread: Some(thread),
            }),
            Ok(Err(error)) => {
                let _ = thread.join();
                Err(error)
            }
            Err(_) => {
                let _ = thread.join();
                Err(StoreError::Closed)
            }
        }
    }

    /// Appends `event` and returns its receipt once it is committed.
    pub fn append<T: Serialize + ?Sized>(&self, event: &T) -> Result<Receipt, StoreError> {
        let mut receipts = self.send(vec![Body::of(event)?])?;
        receipts.pop().ok_or(StoreError::Closed)
    }

    /// Appends `events` in order in one transaction (all or none): the runtime's
    /// `record_batch` maps here.
    pub fn append_all<T: Serialize>(&self, events: &[T]) -> Result<Vec<Receipt>, StoreError> {
        let bodies = events.iter().map(Body::of).collect::<Result<Vec<_>, _>>()?;
        self.send(bodies)
    }

    fn send(&self, bodies: Vec<Body>) -> Result<Vec<Receipt>, StoreError> {
        if bodies.is_empty() {
            return Ok(Vec::new());
        }
        let requests = self.requests.as_ref().ok_or(StoreError::Closed)?;
        let (reply, answer) = std_mpsc::sync_channel(1);
        requests
            .send((bodies, reply))
            .map_err(|_| StoreError::Closed)?;
        answer.recv().map_err(|_| StoreError::Closed)?
    }
}

impl Recorder for StoreRecorder {
    fn record(&self, event: &Event) -> Result<(), RecordError> {
        self.append(event).map(|_| ()).map_err(RecordError::new)
    }

    /// One transaction: all of the batch is recorded, or none of it.
    fn record_batch(&self, events: &[Event]) -> Result<(), PartialRecord> {
        self.append_all(events)
            .map(|_| ())
            .map_err(|error| PartialRecord {
                recorded: 0,
                error: RecordError::new(error),
            })
    }
}

impl Drop for StoreRecorder {
    fn drop(&mut self) {
        self.requests = None;
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::warn!("the store recorder's thread panicked");
        }
    }
}

impl std::fmt::Debug for StoreRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreRecorder").finish_non_exhaustive()
    }
}
