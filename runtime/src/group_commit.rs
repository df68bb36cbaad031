//! Group commit: many writers, one sync.
//!
//! A durable write costs one sync (an `fdatasync`, a database commit) whatever it holds,
//! so writers that arrive together should share one. [`GroupCommit`] is the one engine
//! that does this for the session's journal, the audit log and `tooltrust-store`'s
//! chains: writers [`enqueue`](GroupCommit::enqueue) items in order (under whatever lock
//! orders them) and get a [`Ticket`]; one writer at a time holds the *turn*, takes every
//! item waiting at that moment as a batch and hands it to a [`Committer`]; everyone else
//! waits for the round that carries their ticket.
//!
//! Each writer waits for its own commit, so without help the writers split into two
//! cohorts that alternate between rounds. Before a round, the turn holder therefore
//! waits up to [`GatherOptions::gather`] for as many items as the last round saw (its
//! batch plus what arrived during its commit), so that the whole cohort shares one sync.
//! A lone writer never waits: its cohort is itself. Items queued with no writer waiting
//! for them ([`enqueue_waited_with`](GroupCommit::enqueue_waited_with) with `false`: a
//! call's outcome, carried by the next decision's sync) ride along in a round but count
//! in no cohort, so they never make the next writer wait.
//!
//! Two drivers share the rounds: [`flush`](GroupCommit::flush) blocks a thread (the
//! journal, the audit log) and [`drive`](GroupCommit::drive) is a future that a task
//! runs until the queue is empty (an async store, whose commits are async).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// How long a round waits for its cohort, and how big it may grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GatherOptions {
    /// The longest a round waits for more items (zero: never; at most one second is
    /// used).
    pub gather: Duration,
    /// The most items one round commits.
    pub max_batch: usize,
}

/// The longest a round waits for its cohort, whatever the options say.
const MAX_GATHER: Duration = Duration::from_secs(1);

/// What happens to the items of a round that failed part-way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFailure {
    /// They stay at the head of the queue, in order, and the next round commits them
    /// first; their writers are told of the failure. For items that record something
    /// already done (a session's events), which must never be lost.
    Retry,
    /// They, and every item queued after them, are dropped and their writers told why.
    /// For items built on the ones before (a hash chain's entries), which cannot
    /// follow a gap.
    Discard,
}

/// A round that committed only the first `committed` items of its batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partial<E> {
    /// How many items, from the first, are durable.
    pub committed: usize,
    /// Why the rest are not.
    pub error: E,
}

/// Makes a batch durable.
pub trait Committer<T, S = ()>: Sync {
    /// Why a round failed.
    type Error: Clone + Send;

    /// What becomes of a round's items when it fails part-way.
    const ON_FAILURE: OnFailure;

    /// Commits `batch`, in order, in one sync. Called by the turn holder only, without
    /// the engine's lock. A committer without async I/O writes an `async` block that
    /// never waits; [`GroupCommit::flush`] runs it on the calling thread.
    fn commit(
        &self,
        batch: &mut [T],
    ) -> impl Future<Output = Result<(), Partial<Self::Error>>> + Send;

    /// The error its writers get for a batch whose commit panicked or was dropped
    /// unfinished (its items are gone, whatever [`ON_FAILURE`](Self::ON_FAILURE) says).
    fn lost(&self) -> Self::Error;

    /// Updates the shared state after a round, under the engine's lock: `committed`
    /// items from the front of `batch` are durable, and, when `failed`, the rest (and
    /// with [`OnFailure::Discard`] everything queued since) are not.
    fn settle(&self, shared: &mut S, batch: &[T], committed: usize, failed: bool) {
        let _ = (shared, batch, committed, failed);
    }
}

/// The items a writer enqueued: numbers `start..end` in the engine's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "nothing is durable until the ticket is flushed"]
pub struct Ticket {
    start: u64,
    end: u64,
}

impl Ticket {
    /// How many items the ticket covers.
    pub fn len(&self) -> usize {
        usize::try_from(self.end - self.start).unwrap_or(usize::MAX)
    }

    /// Whether it covers none.
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

/// The engine: a queue of items, the turn, and what the last rounds did.
pub struct GroupCommit<T, E, S = ()> {
    state: Mutex<State<T, E, S>>,
    /// Signalled when a round ends or the turn is free.
    changed: Condvar,
    /// Signalled to a gathering turn holder when an item arrives.
    arrived: Condvar,
    options: GatherOptions,
}

struct State<T, E, S> {
    /// The items not yet taken by a round, oldest first: the last `queue.len()` of
    /// those numbered below `next`.
    queue: VecDeque<T>,
    /// The number the next item gets.
    next: u64,
    /// Every item numbered below this is committed or discarded; those from here to
    /// the queue's first are in the round being committed.
    done: u64,
    shared: S,
    turn: bool,
    gathering: bool,
    /// How many waited-for items the last round saw: what the next one waits for.
    cohort: usize,
    /// The numbers (`start..end`) of items queued with no writer waiting for them, in
    /// order; those below `done` are let go at the next enqueue.
    unwaited: VecDeque<(u64, u64)>,
    /// Ranges of items dropped by [`OnFailure::Discard`], with why.
    discarded: Vec<(u64, u64, E)>,
    /// Rounds ended so far, and the last one that failed with items left queued.
    rounds: u64,
    retry_failure: Option<(u64, E)>,
    /// The async driver waiting for an item to arrive.
    arrival: Option<Waker>,
}

impl<T, E: Clone, S> GroupCommit<T, E, S> {
    /// An empty engine whose committers share `shared` (see
    /// [`with_shared`](Self::with_shared)).
    pub fn new(options: GatherOptions, shared: S) -> Self {
        GroupCommit {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                next: 0,
                done: 0,
                shared,
                turn: false,
                gathering: false,
                cohort: 1,
                unwaited: VecDeque::new(),
                discarded: Vec::new(),
                rounds: 0,
                retry_failure: None,
                arrival: None,
            }),
            changed: Condvar::new(),
            arrived: Condvar::new(),
            options,
        }
    }

    /// Queues `items` and returns their ticket.
    pub fn enqueue(&self, items: impl IntoIterator<Item = T>) -> Ticket {
        self.enqueue_with(|_| Ok::<_, E>(items)).0
    }

    /// Runs `make` on the shared state under the engine's lock and queues the items it
    /// returns, so that what `make` derives from the shared state (a chain's tip, say)
    /// follows the queue's order. Returns the ticket, and `make`'s error if it refused
    /// (nothing is queued then).
    pub fn enqueue_with<I, X>(
        &self,
        make: impl FnOnce(&mut S) -> Result<I, X>,
    ) -> (Ticket, Result<(), X>)
    where
        I: IntoIterator<Item = T>,
    {
        self.enqueue_waited_with(true, make)
    }

    /// Like [`enqueue_with`](Self::enqueue_with); with `waited` false, for items no
    /// writer waits for (someone may flush their ticket later): they go in the next
    /// round but count in no cohort.
    pub fn enqueue_waited_with<I, X>(
        &self,
        waited: bool,
        make: impl FnOnce(&mut S) -> Result<I, X>,
    ) -> (Ticket, Result<(), X>)
    where
        I: IntoIterator<Item = T>,
    {
        let mut state = self.lock();
        let start = state.next;
        let before = state.queue.len();
        let result = make(&mut state.shared).map(|items| state.queue.extend(items));
        state.next += (state.queue.len() - before) as u64;
        let end = state.next;
        let done = state.done;
        while state.unwaited.front().is_some_and(|&(_, end)| end <= done) {
            state.unwaited.pop_front();
        }
        if !waited && end > start {
            state.unwaited.push_back((start, end));
        }
        if end > start {
            if state.gathering {
                self.arrived.notify_one();
            }
            if let Some(waker) = state.arrival.take() {
                waker.wake();
            }
        }
        (Ticket { start, end }, result)
    }

    /// Runs `f` on the shared state under the engine's lock.
    pub fn with_shared<R>(&self, f: impl FnOnce(&mut S) -> R) -> R {
        f(&mut self.lock().shared)
    }

    /// Runs `f` holding the turn (no round runs meanwhile), once every queued item is
    /// committed or dropped; for work that must not interleave with a commit, such as
    /// rewriting a head file.
    pub fn with_turn<C, R>(&self, committer: &C, f: impl FnOnce(&mut S) -> R) -> R
    where
        C: Committer<T, S, Error = E>,
    {
        let mut state = self.lock();
        loop {
            if state.turn {
                state = self.wait(state);
                continue;
            }
            if state.queue.is_empty() {
                break;
            }
            let rounds = state.rounds;
            state = self.round(state, committer);
            // A round that failed and left its items queued (Retry) would loop forever.
            let failed_now =
                matches!(&state.retry_failure, Some((round, _)) if *round == state.rounds);
            if state.rounds > rounds && failed_now && !state.queue.is_empty() {
                break;
            }
        }
        f(&mut state.shared)
    }

    /// Returns once every item of `ticket` is committed, running rounds on this thread
    /// while no one else does. On failure, says how many of the ticket's items (from
    /// the first) are durable.
    pub fn flush<C>(&self, ticket: Ticket, committer: &C) -> Result<(), Partial<E>>
    where
        C: Committer<T, S, Error = E>,
    {
        let mut state = self.lock();
        let seen = state.rounds;
        loop {
            if let Some(outcome) = outcome(&state, ticket, seen) {
                return outcome;
            }
            state = if state.turn {
                self.wait(state)
            } else {
                let gathered = self.gather_blocking(state);
                self.round(gathered, committer)
            };
        }
    }

    /// Runs rounds until the queue is empty, then gives the turn back. Call it when
    /// [`claim_turn`](Self::claim_turn) said so (typically in a spawned task);
    /// `sleep` is the executor's timer, for gathering.
    pub async fn drive<C, F>(&self, committer: &C, sleep: impl Fn(Duration) -> F)
    where
        C: Committer<T, S, Error = E>,
        F: Future<Output = ()>,
    {
        loop {
            // Gather: wait for the cohort, an arrival at a time, up to the deadline.
            let deadline = Instant::now() + self.gather_limit();
            loop {
                let (left, seen) = {
                    let state = self.lock();
                    let len = state.queue.len();
                    if state.queued_waited() >= state.cohort.min(self.options.max_batch) {
                        break;
                    }
                    match deadline.checked_duration_since(Instant::now()) {
                        Some(left) if !left.is_zero() => (left, len),
                        _ => break,
                    }
                };
                race(Arrival { engine: self, seen }, sleep(left)).await;
            }
            let (mut batch, mut state) = self.take_batch(self.lock());
            if batch.is_empty() {
                state.turn = false;
                self.changed.notify_all();
                return;
            }
            drop(state);
            let guard = RoundGuard {
                engine: self,
                committer,
                len: batch.len(),
            };
            let result = committer.commit(&mut batch).await;
            std::mem::forget(guard);
            drop(self.settle(self.lock(), committer, batch, result));
        }
    }

    /// Takes the turn for an async driver if no one holds it: `true` means the caller
    /// must run [`drive`](Self::drive).
    pub fn claim_turn(&self) -> bool {
        let mut state = self.lock();
        if state.turn || state.queue.is_empty() {
            return false;
        }
        state.turn = true;
        true
    }

    /// The result of `ticket` once its round has ended, for async writers that learn
    /// of the end some other way; `None` while it is still queued.
    pub fn outcome(&self, ticket: Ticket) -> Option<Result<(), Partial<E>>> {
        outcome(&self.lock(), ticket, u64::MAX)
    }

    fn gather_limit(&self) -> Duration {
        self.options.gather.min(MAX_GATHER)
    }

    /// Takes the turn and waits, up to `gather`, until the queue holds a whole cohort.
    fn gather_blocking<'a>(
        &'a self,
        mut state: MutexGuard<'a, State<T, E, S>>,
    ) -> MutexGuard<'a, State<T, E, S>> {
        state.turn = true;
        state.gathering = true;
        let deadline = Instant::now() + self.gather_limit();
        while state.queued_waited() < state.cohort.min(self.options.max_batch) {
            let left = match deadline.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => left,
                _ => break,
            };
            state = self
                .arrived
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        state.gathering = false;
        state
    }

    /// Commits one batch on this thread; the caller holds the turn.
    fn round<'a, C>(
        &'a self,
        mut state: MutexGuard<'a, State<T, E, S>>,
        committer: &C,
    ) -> MutexGuard<'a, State<T, E, S>>
    where
        C: Committer<T, S, Error = E>,
    {
        state.turn = true;
        let (mut batch, state) = self.take_batch(state);
        drop(state);
        // If the committer panics, the turn is given back and the batch reported lost.
        let guard = RoundGuard {
            engine: self,
            committer,
            len: batch.len(),
        };
        let result = block_on(committer.commit(&mut batch));
        std::mem::forget(guard);
        let mut state = self.settle(self.lock(), committer, batch, result);
        state.turn = false;
        self.changed.notify_all();
        state
    }

    fn take_batch<'a>(
        &'a self,
        mut state: MutexGuard<'a, State<T, E, S>>,
    ) -> (Vec<T>, MutexGuard<'a, State<T, E, S>>) {
        let n = state.queue.len().min(self.options.max_batch.max(1));
        let batch = state.queue.drain(..n).collect();
        (batch, state)
    }

    /// Records a round's result: advances `done`, requeues or discards what failed,
    /// sizes the next cohort and wakes the waiters.
    fn settle<'a, C>(
        &'a self,
        mut state: MutexGuard<'a, State<T, E, S>>,
        committer: &C,
        batch: Vec<T>,
        result: Result<(), Partial<E>>,
    ) -> MutexGuard<'a, State<T, E, S>>
    where
        C: Committer<T, S, Error = E>,
    {
        let len = batch.len();
        // The batch's items are numbered from `done`; the queue's follow them.
        let round_and_queue = state.waited_since(state.done);
        let (committed, error) = match result {
            Ok(()) => (len, None),
            Err(Partial { committed, error }) => (committed.min(len), Some(error)),
        };
        committer.settle(&mut state.shared, &batch, committed, error.is_some());
        state.done += committed as u64;
        state.rounds += 1;
        match error {
            None => state.cohort = round_and_queue,
            Some(error) => {
                state.cohort = 1;
                match C::ON_FAILURE {
                    OnFailure::Retry => {
                        for item in batch.into_iter().skip(committed).rev() {
                            state.queue.push_front(item);
                        }
                        let round = state.rounds;
                        state.retry_failure = Some((round, error));
                    }
                    OnFailure::Discard => {
                        let (start, end) = (state.done, state.next);
                        state.queue.clear();
                        state.done = end;
                        state.discarded.push((start, end, error));
                    }
                }
            }
        }
        self.changed.notify_all();
        state
    }

    fn wait<'a>(&'a self, state: MutexGuard<'a, State<T, E, S>>) -> MutexGuard<'a, State<T, E, S>> {
        self.changed
            .wait(state)
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn lock(&self) -> MutexGuard<'_, State<T, E, S>> {
        // The state is consistent between statements; a panic elsewhere must not stop
        // committing.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What became of `ticket`: `None` while some of its items are still queued (and no
/// round since `seen` failed on them, with [`OnFailure::Retry`]).
fn outcome<T, E: Clone, S>(
    state: &State<T, E, S>,
    ticket: Ticket,
    seen: u64,
) -> Option<Result<(), Partial<E>>> {
    let durable_before = |at: u64| usize::try_from(at.saturating_sub(ticket.start)).unwrap_or(0);
    if state.done >= ticket.end {
        // Discarded ranges are few (one per failed round); the first one overlapping
        // the ticket says how far it got.
        let lost = state
            .discarded
            .iter()
            .find(|(start, end, _)| *start < ticket.end && *end > ticket.start);
        return Some(match lost {
            Some((start, _, error)) => Err(Partial {
                committed: durable_before(*start).min(ticket.len()),
                error: error.clone(),
            }),
            None => Ok(()),
        });
    }
    match &state.retry_failure {
        Some((round, error)) if *round > seen => Some(Err(Partial {
            committed: durable_before(state.done).min(ticket.len()),
            error: error.clone(),
        })),
        _ => None,
    }
}

/// Held while a committer runs: if it panics (or its future is dropped), the batch is
/// reported lost, the turn given back and the waiters released, instead of waiting
/// forever.
struct RoundGuard<'a, T, E, S, C: Committer<T, S, Error = E>> {
    engine: &'a GroupCommit<T, E, S>,
    committer: &'a C,
    len: usize,
}

impl<T, E, S, C: Committer<T, S, Error = E>> Drop for RoundGuard<'_, T, E, S, C> {
    fn drop(&mut self) {
        let mut state = self
            .engine
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.committer.settle(&mut state.shared, &[], 0, true);
        let start = state.done;
        let mut end = start + self.len as u64;
        if C::ON_FAILURE == OnFailure::Discard {
            end = state.next;
            state.queue.clear();
        }
        state.done = end;
        state.rounds += 1;
        state.cohort = 1;
        state.discarded.push((start, end, self.committer.lost()));
        state.turn = false;
        self.engine.changed.notify_all();
    }
}

impl<T, E, S> State<T, E, S> {
    /// How many items numbered from `from` up to `next` a writer waits for.
    fn waited_since(&self, from: u64) -> usize {
        let unwaited: u64 = self
            .unwaited
            .iter()
            .map(|&(start, end)| end.saturating_sub(start.max(from)))
            .sum();
        usize::try_from(self.next.saturating_sub(from).saturating_sub(unwaited))
            .unwrap_or(usize::MAX)
    }

    /// How many of the queued items a writer waits for.
    fn queued_waited(&self) -> usize {
        self.waited_since(self.next - self.queue.len() as u64)
    }
}

/// Ready once the queue has grown (or on the first poll after a wake).
struct Arrival<'a, T, E, S> {
    engine: &'a GroupCommit<T, E, S>,
    /// The queue's length when the driver last looked.
    seen: usize,
}

impl<T, E, S> Future for Arrival<'_, T, E, S> {
    type Output = ();

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self
            .engine
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if state.queue.len() != self.seen {
            return Poll::Ready(());
        }
        state.arrival = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// Waits for whichever of `a` and `b` finishes first.
async fn race(a: impl Future<Output = ()>, b: impl Future<Output = ()>) {
    let (mut a, mut b) = (pin!(a), pin!(b));
    std::future::poll_fn(|cx| {
        if a.as_mut().poll(cx).is_ready() || b.as_mut().poll(cx).is_ready() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await
}

/// Runs a committer's future on this thread; a synchronous committer's is ready at
/// once.
fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use super::*;

    /// Commits into a vector; fails once `fail_after` more items were committed, and
    /// panics when told to.
    struct Sink {
        committed: Mutex<Vec<u64>>,
        fail_after: AtomicUsize,
        panic: AtomicBool,
    }

    impl Sink {
        fn new() -> Self {
            Sink {
                committed: Mutex::new(Vec::new()),
                fail_after: AtomicUsize::new(usize::MAX),
                panic: AtomicBool::new(false),
            }
        }

        fn items(&self) -> Vec<u64> {
            self.committed.lock().unwrap().clone()
        }

        fn commit_now(&self, batch: &[u64]) -> Result<(), Partial<String>> {
            assert!(!self.panic.load(Ordering::SeqCst), "the disk caught fire");
            let mut committed = self.committed.lock().unwrap();
            for (i, item) in batch.iter().enumerate() {
                if self
                    .fail_after
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_err()
                {
                    return Err(Partial {
                        committed: i,
                        error: "disk full".into(),
                    });
                }
                committed.push(*item);
            }
            Ok(())
        }
    }

    struct Retrying(Arc<Sink>);
    struct Discarding(Arc<Sink>);

    impl Committer<u64> for Retrying {
        type Error = String;
        const ON_FAILURE: OnFailure = OnFailure::Retry;
        fn commit(
            &self,
            batch: &mut [u64],
        ) -> impl Future<Output = Result<(), Partial<String>>> + Send {
            std::future::ready(self.0.commit_now(batch))
        }
        fn lost(&self) -> String {
            "lost".into()
        }
    }

    /// Counts, in its shared state, the items settled as durable.
    impl Committer<u64, u64> for Discarding {
        type Error = String;
        const ON_FAILURE: OnFailure = OnFailure::Discard;
        fn commit(
            &self,
            batch: &mut [u64],
        ) -> impl Future<Output = Result<(), Partial<String>>> + Send {
            std::future::ready(self.0.commit_now(batch))
        }
        fn lost(&self) -> String {
            "lost".into()
        }
        fn settle(&self, durable: &mut u64, _: &[u64], committed: usize, _: bool) {
            *durable += committed as u64;
        }
    }

    fn options(gather: Duration) -> GatherOptions {
        GatherOptions {
            gather,
            max_batch: 64,
        }
    }

    #[test]
    fn retry_keeps_failed_items_at_the_head_and_commits_them_first() {
        let sink = Arc::new(Sink::new());
        let committer = Retrying(sink.clone());
        let engine = GroupCommit::new(options(Duration::ZERO), ());
        sink.fail_after.store(1, Ordering::SeqCst);
        let first = engine.enqueue([1, 2]);
        let failed = engine.flush(first, &committer).unwrap_err();
        assert_eq!(failed.committed, 1, "item 1 is durable, item 2 is not");
        let second = engine.enqueue([3]);
        sink.fail_after.store(usize::MAX, Ordering::SeqCst);
        engine.flush(second, &committer).unwrap();
        assert_eq!(sink.items(), vec![1, 2, 3], "every item, once, in order");
        engine.flush(first, &committer).unwrap();
    }

    #[test]
    fn items_no_writer_waits_for_never_make_a_lone_writer_wait() {
        let sink = Arc::new(Sink::new());
        let committer = Retrying(sink.clone());
        // Long enough that one wait for a cohort would show.
        let engine = GroupCommit::new(options(Duration::from_secs(1)), ());
        for round in 0..3u64 {
            let outcomes = engine
                .enqueue_waited_with(false, |_| {
                    Ok::<_, String>([round * 10, round * 10 + 1, round * 10 + 2])
                })
                .0;
            let decision = engine.enqueue([round * 10 + 3]);
            let start = Instant::now();
            engine.flush(decision, &committer).unwrap();
            assert!(
                start.elapsed() < Duration::from_millis(500),
                "round {round}: a lone writer waited {:?} for a cohort",
                start.elapsed()
            );
            assert_eq!(engine.outcome(outcomes), Some(Ok(())), "carried along");
        }
        assert_eq!(sink.items().len(), 12);
        // Waited-for items still gather as before: the cohort of two waits for its second.
        let engine = GroupCommit::new(options(Duration::from_millis(200)), ());
        let (a, b) = (engine.enqueue([1]), engine.enqueue([2]));
        engine.flush(b, &committer).unwrap();
        engine.flush(a, &committer).unwrap();
        let lone = engine.enqueue([3]);
        let start = Instant::now();
        engine.flush(lone, &committer).unwrap();
        assert!(
            start.elapsed() >= Duration::from_millis(150),
            "a cohort of two waits for its second writer"
        );
    }

    #[test]
    fn a_failure_after_a_tickets_items_is_not_its_error() {
        let sink = Arc::new(Sink::new());
        let committer = Retrying(sink.clone());
        let engine = GroupCommit::new(options(Duration::ZERO), ());
        sink.fail_after.store(1, Ordering::SeqCst);
        let ours = engine.enqueue([1]);
        let theirs = engine.enqueue([2]);
        engine.flush(ours, &committer).unwrap();
        assert!(engine.flush(theirs, &committer).is_err());
    }

    #[test]
    fn discard_drops_the_failed_items_and_everything_queued_after_them() {
        let sink = Arc::new(Sink::new());
        let committer = Discarding(sink.clone());
        let engine = GroupCommit::new(options(Duration::ZERO), 0u64);
        sink.fail_after.store(2, Ordering::SeqCst);
        let first = engine.enqueue([1, 2, 3]);
        let second = engine.enqueue([4]);
        assert_eq!(
            engine.flush(first, &committer),
            Err(Partial {
                committed: 2,
                error: "disk full".into()
            })
        );
        assert_eq!(
            engine.outcome(second),
            Some(Err(Partial {
                committed: 0,
                error: "disk full".into()
            })),
            "queued behind the failure, so dropped with it"
        );
        sink.fail_after.store(usize::MAX, Ordering::SeqCst);
        let third = engine.enqueue([5]);
        engine.flush(third, &committer).unwrap();
        assert_eq!(sink.items(), vec![1, 2, 5]);
        assert_eq!(engine.with_shared(|durable| *durable), 3);
    }

    #[test]
    fn a_panicking_committer_fails_its_batch_and_frees_the_turn() {
        let sink = Arc::new(Sink::new());
        let committer = Retrying(sink.clone());
        let engine = GroupCommit::new(options(Duration::ZERO), ());
        sink.panic.store(true, Ordering::SeqCst);
        let lost = engine.enqueue([1]);
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            engine.flush(lost, &committer)
        }));
        assert!(panicked.is_err());
        assert_eq!(
            engine.outcome(lost),
            Some(Err(Partial {
                committed: 0,
                error: "lost".into()
            }))
        );
        sink.panic.store(false, Ordering::SeqCst);
        let next = engine.enqueue([2]);
        engine.flush(next, &committer).unwrap();
        assert_eq!(sink.items(), vec![2]);
    }

    #[test]
    fn concurrent_flushers_commit_every_item_once_in_queue_order() {
        let sink = Arc::new(Sink::new());
        let committer = Retrying(sink.clone());
        let engine = GroupCommit::new(options(Duration::from_micros(100)), ());
        let order = Mutex::new(Vec::new());
        std::thread::scope(|threads| {
            for thread in 0..4u64 {
                let (engine, order, committer) = (&engine, &order, &committer);
                threads.spawn(move || {
                    for n in 0..250u64 {
                        let ticket = {
                            // The queue's order stands for the writers' order.
                            let mut order = order.lock().unwrap();
                            order.push(thread * 1000 + n);
                            engine.enqueue([thread * 1000 + n])
                        };
                        engine.flush(ticket, committer).unwrap();
                    }
                });
            }
        });
        assert_eq!(sink.items(), *order.lock().unwrap());
    }

    #[test]
    fn the_async_driver_commits_what_writers_queue_while_it_runs() {
        let sink = Arc::new(Sink::new());
        let committer = Retrying(sink.clone());
        let engine = GroupCommit::new(options(Duration::from_millis(1)), ());
        let mut tickets = Vec::new();
        std::thread::scope(|threads| {
            for n in 0..100u64 {
                tickets.push(engine.enqueue([n]));
                if engine.claim_turn() {
                    let (engine, committer) = (&engine, &committer);
                    threads.spawn(move || {
                        pollster::block_on(
                            engine.drive(committer, |d| async move { std::thread::sleep(d) }),
                        )
                    });
                }
            }
        });
        assert_eq!(sink.items(), (0..100).collect::<Vec<_>>());
        for ticket in tickets {
            assert_eq!(engine.outcome(ticket), Some(Ok(())));
        }
        assert!(!engine.claim_turn(), "nothing left to drive");
    }
}
