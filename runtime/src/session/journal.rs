//! Handing a session's events to its recorder, in order, outside the state lock.
//!
//! A transition numbers its events while it still holds the state lock (they enter the
//! queue in the order the transitions happened) and receives a [`Ticket`]: the number
//! one past its last event. Its caller then calls [`Journal::flush`] with the ticket,
//! after releasing the state lock. One flusher at a time takes everything queued and
//! records it as one batch, so concurrent callers share one sync (group commit) and a
//! slow recorder never holds the state lock. A caller returns once every event up to
//! its ticket is recorded; if the recorder fails, the unrecorded events stay at the
//! head of the queue, in order, and the next flush records them first.

use std::sync::Arc;
use std::time::Duration;

use crate::event::{Event, PartialRecord, RecordError, Recorder};
use crate::group_commit::{Committer, GatherOptions, GroupCommit, OnFailure, Partial};

pub(crate) use crate::group_commit::Ticket;

/// The session's events wait in a [`GroupCommit`] whose rounds go to the recorder.
pub(crate) struct Journal {
    events: GroupCommit<Queued, RecordError>,
    recorder: ToRecorder,
}

/// An event, and whether it may be made durable after its caller goes on.
struct Queued {
    event: Event,
    deferred: bool,
}

/// A round of events is one [`Recorder::record_batch`], or one
/// [`Recorder::record_deferred`] when every event of the round may wait.
struct ToRecorder(Arc<dyn Recorder>);

impl Committer<Queued> for ToRecorder {
    type Error = RecordError;
    /// The events record decisions already taken: they are never dropped.
    const ON_FAILURE: OnFailure = OnFailure::Retry;

    fn commit(
        &self,
        batch: &mut [Queued],
    ) -> impl std::future::Future<Output = Result<(), Partial<RecordError>>> + Send {
        let deferred = batch.iter().all(|queued| queued.deferred);
        let events: Vec<Event> = batch.iter().map(|queued| queued.event.clone()).collect();
        let recorded = if deferred {
            self.0.record_deferred(&events)
        } else {
            self.0.record_batch(&events)
        };
        let result = recorded.map_err(|PartialRecord { recorded, error }| Partial {
            committed: recorded,
            error,
        });
        std::future::ready(result)
    }

    fn lost(&self) -> RecordError {
        RecordError::new(std::io::Error::other("the recorder panicked"))
    }
}

impl Journal {
    pub(crate) fn new(recorder: Arc<dyn Recorder>) -> Self {
        Journal {
            // The recorder batches syncs itself (the audit log does); the journal only
            // keeps the order and records outside the state lock.
            events: GroupCommit::new(
                GatherOptions {
                    gather: Duration::ZERO,
                    max_batch: usize::MAX,
                },
                (),
            ),
            recorder: ToRecorder(recorder),
        }
    }

    /// Queues `events` and returns the ticket to flush. Called with the state lock held,
    /// so that the queue's order is the order of the transitions.
    pub(crate) fn enqueue(&self, events: Vec<Event>) -> Ticket {
        self.events.enqueue(events.into_iter().map(|event| Queued {
            event,
            deferred: false,
        }))
    }

    /// Like [`enqueue`](Self::enqueue), for events that report what already happened
    /// and gate nothing: flushing their ticket hands them to the recorder without
    /// waiting for their sync (see [`Recorder::record_deferred`]).
    pub(crate) fn enqueue_deferred(&self, events: Vec<Event>) -> Ticket {
        self.events.enqueue(events.into_iter().map(|event| Queued {
            event,
            deferred: true,
        }))
    }

    /// Returns once every event of `ticket` is recorded, recording the queue's events
    /// itself if no other caller is.
    pub(crate) fn flush(&self, ticket: Ticket) -> Result<(), RecordError> {
        self.events
            .flush(ticket, &self.recorder)
            .map_err(|partial| partial.error)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::event::MemoryRecorder;

    fn event(n: u64) -> Event {
        Event::KeyRotation { rewrapped: n }
    }

    /// Fails every event after the first `ok`, and notes how each batch arrived.
    struct Recording {
        ok: AtomicUsize,
        inner: MemoryRecorder,
        calls: Mutex<Vec<(&'static str, usize)>>,
    }

    impl Recording {
        fn new(ok: usize) -> Self {
            Recording {
                ok: AtomicUsize::new(ok),
                inner: MemoryRecorder::new(),
                calls: Mutex::new(Vec::new()),
            }
        }
    }

    impl Recorder for Recording {
        fn record(&self, event: &Event) -> Result<(), RecordError> {
            if self
                .ok
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_err()
            {
                return Err(RecordError::new(std::io::Error::other("disk full")));
            }
            self.inner.record(event)
        }

        fn record_batch(&self, events: &[Event]) -> Result<(), PartialRecord> {
            self.calls.lock().unwrap().push(("batch", events.len()));
            for (recorded, event) in events.iter().enumerate() {
                self.record(event)
                    .map_err(|error| PartialRecord { recorded, error })?;
            }
            Ok(())
        }

        fn record_deferred(&self, events: &[Event]) -> Result<(), PartialRecord> {
            self.calls.lock().unwrap().push(("deferred", events.len()));
            self.inner.record_batch(events)
        }
    }

    #[test]
    fn unrecorded_events_stay_queued_in_order_and_go_first_next_time() {
        let recorder = Arc::new(Recording::new(1));
        let journal = Journal::new(recorder.clone());
        let first = journal.enqueue(vec![event(1), event(2)]);
        assert!(journal.flush(first).is_err(), "event 2 was not recorded");
        let second = journal.enqueue(vec![event(3)]);
        recorder.ok.store(10, Ordering::SeqCst);
        journal.flush(second).unwrap();
        assert_eq!(
            recorder.inner.events(),
            vec![event(1), event(2), event(3)],
            "every event, once, in order"
        );
        journal.flush(first).unwrap();
        assert_eq!(recorder.inner.events().len(), 3);
    }

    #[test]
    fn only_a_round_of_deferred_events_is_recorded_deferred() {
        let recorder = Arc::new(Recording::new(usize::MAX));
        let journal = Journal::new(recorder.clone());
        let outcome = journal.enqueue_deferred(vec![event(1)]);
        journal.flush(outcome).unwrap();
        // A deferred event queued before a decision goes with the decision's sync.
        let _carried = journal.enqueue_deferred(vec![event(2)]);
        let decision = journal.enqueue(vec![event(3)]);
        journal.flush(decision).unwrap();
        assert_eq!(
            *recorder.calls.lock().unwrap(),
            vec![("deferred", 1), ("batch", 2)]
        );
        assert_eq!(recorder.inner.events(), vec![event(1), event(2), event(3)]);
    }
}
