//! Group commit: every write to a chain (appends, decisions, claims) waits in that
//! chain's queue of the runtime's group-commit engine (`tooltrust::group_commit`), and
//! a task, spawned while there is work, commits all the work waiting at that moment in
//! one transaction.
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
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use sqlx::AnyPool;
use tokio::sync::oneshot;
use tooltrust::Id;
use tooltrust::audit::{Body, Receipt};
use tooltrust::group_commit::{Committer, GatherOptions, GroupCommit, OnFailure, Partial};

use crate::chain::{self, APPEND};
use crate::engine::Engine;
use crate::error::StoreError;
use crate::options::Authority;
use crate::transition::{self, DECISIONS_CHANNEL, Done, Work};

/// The most jobs one transaction holds.
const MAX_BATCH_JOBS: usize = 1024;

/// One chain's writers: their work waits in the runtime's group-commit engine, and a
/// task spawned while there is work commits it in rounds.
pub(crate) struct Appender {
    jobs: GroupCommit<Job, StoreError>,
    transactions: Transactions,
}

/// One caller's work, waiting in the queue, and where its answer goes.
pub(crate) struct Job {
    work: Work,
    reply: Option<oneshot::Sender<Result<Done, StoreError>>>,
}

/// Commits a round of jobs in one transaction.
struct Transactions {
    pool: AnyPool,
    engine: Engine,
    authority: Arc<Authority>,
}

impl Appender {
    pub(crate) fn new(
        pool: AnyPool,
        engine: Engine,
        gather: Duration,
        authority: Arc<Authority>,
    ) -> Arc<Self> {
        Arc::new(Appender {
            jobs: GroupCommit::new(
                GatherOptions {
                    gather,
                    max_batch: MAX_BATCH_JOBS,
                },
                (),
            ),
            transactions: Transactions {
                pool,
                engine,
                authority,
            },
        })
    }

    /// Queues `work` and waits for its commit, starting the committing task if none
    /// runs.
    pub(crate) async fn submit(self: &Arc<Self>, work: Work) -> Result<Done, StoreError> {
        let (reply, answer) = oneshot::channel();
        // The answer comes through `reply`, so the ticket is not needed.
        let _ticket = self.jobs.enqueue([Job {
            work,
            reply: Some(reply),
        }]);
        if self.jobs.claim_turn() {
            let appender = Arc::clone(self);
            tokio::spawn(async move {
                appender
                    .jobs
                    .drive(&appender.transactions, tokio::time::sleep)
                    .await;
            });
        }
        answer.await.map_err(|_| StoreError::Closed)?
    }
}

/// Each job is answered through its own reply, so a round never fails as a whole: a
/// job that cannot be done gets its error and the others are tried again without it.
impl Committer<Job> for Transactions {
    type Error = StoreError;
    const ON_FAILURE: OnFailure = OnFailure::Discard;

    fn commit(
        &self,
        batch: &mut [Job],
    ) -> impl Future<Output = Result<(), Partial<StoreError>>> + Send {
        commit(&self.pool, self.engine, &self.authority, batch)
    }

    fn lost(&self) -> StoreError {
        StoreError::Closed
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
async fn commit(
    pool: &AnyPool,
    engine: Engine,
    authority: &Authority,
    jobs: &mut [Job],
) -> Result<(), Partial<StoreError>> {
    let mut answers: Vec<Option<Result<Done, StoreError>>> = jobs.iter().map(|_| None).collect();
    loop {
        let live: Vec<usize> = (0..jobs.len()).filter(|&i| answers[i].is_none()).collect();
        if live.is_empty() {
            break;
        }
        match attempt(pool, engine, authority, jobs, &live).await {
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
    for (job, answer) in jobs.iter_mut().zip(answers) {
        if let Some(reply) = job.reply.take() {
            // A caller that stopped waiting has nothing to be told.
            let _ = reply.send(answer.unwrap_or(Err(StoreError::Closed)));
        }
    }
    Ok(())
}

/// One transaction for the `live` jobs.
async fn attempt(
    pool: &AnyPool,
    engine: Engine,
    authority: &Authority,
    jobs: &[Job],
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
        .filter_map(|&i| jobs[i].work.call().map(|call| (call, i)))
        .collect();
    transitions.sort();
    for (_, i) in transitions {
        let applied = match transition::apply(&mut tx, engine, authority, &jobs[i].work).await {
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
        if let Work::Append { tenant, bodies } = &jobs[i].work {
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
            let writer = authority.writer.as_deref();
            match chain::seal(&tenant, &mut head, bodies.clone(), &ts, writer, &mut lines) {
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
        if matches!(jobs[i].work, Work::Append { .. }) {
            done.push((i, Done::Appended(receipts.remove(&i).unwrap_or_default())));
        }
    }
    Ok(done)
}
