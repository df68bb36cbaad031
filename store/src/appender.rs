//! Group commit: every write to a chain (appends, decisions, claims) goes through one
//! task per chain of an opened store, which commits all the work waiting at that moment
//! in one transaction.
//!
//! A chain is linear, so its writers take turns on its head row, and each turn lasts
//! until its commit is durable (one fsync, a few milliseconds on common disks). Done one
//! by one, a chain would carry one entry per fsync, whatever the number of writers;
//! batched, it carries as many as arrive meanwhile.
//!
//! One transaction locks rows in a fixed order, which every process follows, so two
//! processes never wait for each other in a circle: first the calls it decides or
//! claims (by id), then the heads of the chains it writes (by tenant).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use sqlx::AnyPool;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tooltrust::Id;
use tooltrust::audit::{Body, Receipt};

use crate::chain::{self, APPEND};
use crate::engine::Engine;
use crate::error::StoreError;
use crate::transition::{self, DECISIONS_CHANNEL, Done, Work};

/// The most entries one transaction holds.
const MAX_BATCH_ENTRIES: usize = 1024;

/// The longest a batch waits for more work, whatever the options say.
const MAX_GATHER: Duration = Duration::from_secs(1);

/// One caller's work, waiting in the queue.
pub(crate) struct Job {
    pub(crate) work: Work,
    pub(crate) reply: oneshot::Sender<Result<Done, StoreError>>,
}

/// Queues `work` and waits for its commit.
pub(crate) async fn submit(
    queue: &mpsc::UnboundedSender<Job>,
    work: Work,
) -> Result<Done, StoreError> {
    let (reply, answer) = oneshot::channel();
    queue
        .send(Job { work, reply })
        .map_err(|_| StoreError::Closed)?;
    answer.await.map_err(|_| StoreError::Closed)?
}

/// Starts the task that commits the queue's work in batches; it ends when every sender
/// is dropped.
pub(crate) fn spawn(pool: AnyPool, engine: Engine, gather: Duration) -> mpsc::UnboundedSender<Job> {
    let (sender, receiver) = mpsc::unbounded_channel();
    tokio::spawn(run(pool, engine, gather.min(MAX_GATHER), receiver));
    sender
}

/// Callers wait for their own commit, so without help they split into two cohorts that
/// alternate between transactions; a batch therefore waits up to `gather` for as many
/// jobs as the last round saw (its batch plus those that arrived during its commit), so
/// that the whole cohort shares one commit. A lone caller never waits.
async fn run(
    pool: AnyPool,
    engine: Engine,
    gather: Duration,
    mut receiver: mpsc::UnboundedReceiver<Job>,
) {
    let mut cohort = 1;
    while let Some(first) = receiver.recv().await {
        let mut batch = Batch::default();
        batch.push(first);
        batch.take_queued(&mut receiver);
        let deadline = Instant::now() + gather;
        while batch.jobs.len() < cohort && !batch.is_full() && !gather.is_zero() {
            match tokio::time::timeout_at(deadline, receiver.recv()).await {
                Ok(Some(job)) => {
                    batch.push(job);
                    batch.take_queued(&mut receiver);
                }
                Ok(None) | Err(_) => break,
            }
        }
        let size = batch.jobs.len();
        commit(&pool, engine, batch.jobs).await;
        cohort = size + receiver.len();
    }
}

#[derive(Default)]
struct Batch {
    jobs: Vec<Job>,
    entries: usize,
}

impl Batch {
    fn push(&mut self, job: Job) {
        self.entries += job.work.entries();
        self.jobs.push(job);
    }

    fn is_full(&self) -> bool {
        self.entries >= MAX_BATCH_ENTRIES
    }

    fn take_queued(&mut self, receiver: &mut mpsc::UnboundedReceiver<Job>) {
        while !self.is_full() {
            let Ok(job) = receiver.try_recv() else { break };
            self.push(job);
        }
    }
}

/// Why an attempt at a batch's transaction was rolled back.
enum Abort {
    /// These jobs cannot be done (their chain is damaged, say): answer them, and try
    /// the others again without them.
    Exclude(Vec<(usize, StoreError)>),
    /// The transaction failed: none of the jobs was done.
    Store(StoreError),
}

/// Commits the jobs' work in one transaction and answers each job.
async fn commit(pool: &AnyPool, engine: Engine, jobs: Vec<Job>) {
    let (works, replies): (Vec<Work>, Vec<_>) = jobs.into_iter().map(|j| (j.work, j.reply)).unzip();
    let mut answers: Vec<Option<Result<Done, StoreError>>> = works.iter().map(|_| None).collect();
    loop {
        let live: Vec<usize> = (0..works.len()).filter(|&i| answers[i].is_none()).collect();
        if live.is_empty() {
            break;
        }
        match attempt(pool, engine, &works, &live).await {
            Ok(done) => {
                for (i, done) in done {
                    answers[i] = Some(Ok(done));
                }
                break;
            }
            Err(Abort::Exclude(failed)) => {
                for (i, error) in failed {
                    answers[i] = Some(Err(error));
                }
            }
            Err(Abort::Store(error)) => {
                for i in live {
                    answers[i] = Some(Err(error.clone()));
                }
                break;
            }
        }
    }
    for (reply, answer) in replies.into_iter().zip(answers) {
        // A caller that stopped waiting has nothing to be told.
        let _ = reply.send(answer.unwrap_or(Err(StoreError::Closed)));
    }
}

/// One transaction for the `live` jobs of `works`.
async fn attempt(
    pool: &AnyPool,
    engine: Engine,
    works: &[Work],
    live: &[usize],
) -> Result<Vec<(usize, Done)>, Abort> {
    let mut tx = engine
        .begin_write(pool, APPEND)
        .await
        .map_err(Abort::Store)?;
    let mut done = Vec::with_capacity(live.len());
    // Per tenant, the entries to seal, each with the job it belongs to.
    let mut entries: BTreeMap<Id, Vec<(usize, Vec<Body>)>> = BTreeMap::new();
    let mut decided = false;

    let mut transitions: Vec<(&Id, usize)> = live
        .iter()
        .filter_map(|&i| works[i].call().map(|call| (call, i)))
        .collect();
    transitions.sort();
    for (_, i) in transitions {
        let applied = match transition::apply(&mut tx, engine, &works[i]).await {
            Ok(applied) => applied,
            Err(error @ StoreError::Event(_)) => return Err(Abort::Exclude(vec![(i, error)])),
            Err(error) => return Err(Abort::Store(error)),
        };
        if let Some((tenant, bodies)) = applied.entry {
            entries.entry(tenant).or_default().push((i, bodies));
        }
        decided |= matches!(applied.done, Done::Decided(Ok(_)));
        done.push((i, applied.done));
    }
    for &i in live {
        if let Work::Append { tenant, bodies } = &works[i] {
            entries
                .entry(tenant.clone())
                .or_default()
                .push((i, bodies.clone()));
        }
    }

    let mut receipts: HashMap<usize, Vec<Receipt>> = HashMap::new();
    for (tenant, items) in entries {
        let all_of_tenant = |error: StoreError| {
            Abort::Exclude(items.iter().map(|(i, _)| (*i, error.clone())).collect())
        };
        let mut head = match chain::lock_head(&mut tx, engine, &tenant).await {
            Ok(head) => head,
            Err(error @ StoreError::ChainDamaged { .. }) => return Err(all_of_tenant(error)),
            Err(error) => return Err(Abort::Store(error)),
        };
        let first_seq = head.seq + 1;
        let ts = crate::clock::now();
        let mut lines = Vec::new();
        for (i, bodies) in &items {
            match chain::seal(&tenant, &mut head, bodies.clone(), &ts, &mut lines) {
                Ok(sealed) => {
                    receipts.insert(*i, sealed);
                }
                Err(error) => return Err(Abort::Exclude(vec![(*i, error)])),
            }
        }
        match chain::write_entries(&mut tx, engine, &tenant, first_seq, &lines, head).await {
            Ok(()) => {}
            Err(error @ StoreError::ChainDamaged { .. }) => return Err(all_of_tenant(error)),
            Err(error) => return Err(Abort::Store(error)),
        }
    }
    if decided && engine == Engine::Postgres {
        // Wakes the processes waiting for decisions (delivered at commit).
        sqlx::query("SELECT pg_notify($1, '')")
            .bind(DECISIONS_CHANNEL)
            .execute(&mut *tx)
            .await
            .map_err(|e| Abort::Store(engine.error(APPEND, e)))?;
    }
    engine.commit(tx, APPEND).await.map_err(Abort::Store)?;

    for &i in live {
        if matches!(works[i], Work::Append { .. }) {
            done.push((i, Done::Appended(receipts.remove(&i).unwrap_or_default())));
        }
    }
    Ok(done)
}
