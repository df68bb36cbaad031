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

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::event::{Event, PartialRecord, RecordError, Recorder};

/// Events not yet recorded, and how far recording has got.
#[derive(Default)]
struct Queue {
    /// Events numbered `recorded..recorded + waiting.len()`, oldest first.
    waiting: VecDeque<Event>,
    /// Every event numbered below this is recorded.
    recorded: u64,
}

/// The number one past the last event a transition queued: its caller may act once
/// everything before it is recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[must_use = "a decision is not taken until its events are recorded: flush the ticket"]
pub(crate) struct Ticket(u64);

pub(crate) struct Journal {
    recorder: Arc<dyn Recorder>,
    queue: Mutex<Queue>,
    /// Held by the one caller recording a batch.
    turn: Mutex<()>,
}

impl Journal {
    pub(crate) fn new(recorder: Arc<dyn Recorder>) -> Self {
        Journal {
            recorder,
            queue: Mutex::new(Queue::default()),
            turn: Mutex::new(()),
        }
    }

    /// Queues `events` and returns the ticket to flush. Called with the state lock held,
    /// so that the queue's order is the order of the transitions.
    pub(crate) fn enqueue(&self, events: Vec<Event>) -> Ticket {
        let mut queue = lock(&self.queue);
        queue.waiting.extend(events);
        Ticket(queue.recorded + queue.waiting.len() as u64)
    }

    /// Returns once every event before `ticket` is recorded, recording the queue's
    /// events itself if no other caller already did.
    pub(crate) fn flush(&self, ticket: Ticket) -> Result<(), RecordError> {
        if lock(&self.queue).recorded >= ticket.0 {
            return Ok(());
        }
        let _turn = lock(&self.turn);
        let batch: Vec<Event> = {
            let mut queue = lock(&self.queue);
            if queue.recorded >= ticket.0 {
                // Another caller recorded ours while we waited for the turn.
                return Ok(());
            }
            queue.waiting.drain(..).collect()
        };
        let result = self.recorder.record_batch(&batch);
        let mut queue = lock(&self.queue);
        let recorded = match &result {
            Ok(()) => batch.len(),
            Err(PartialRecord { recorded, .. }) => (*recorded).min(batch.len()),
        };
        queue.recorded += recorded as u64;
        // What was not recorded goes back to the head, before anything queued since.
        for event in batch.into_iter().skip(recorded).rev() {
            queue.waiting.push_front(event);
        }
        match result {
            Err(partial) if queue.recorded < ticket.0 => Err(partial.error),
            // Our events made it; a later one failing is its own caller's error.
            _ => Ok(()),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The queue is consistent between statements; a panic elsewhere must not stop
    // recording.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::event::MemoryRecorder;

    fn event(n: u64) -> Event {
        Event::KeyRotation { rewrapped: n }
    }

    /// Fails every batch after the first `ok` events, recording none of the rest.
    struct FailAfter {
        ok: AtomicUsize,
        inner: MemoryRecorder,
    }

    impl Recorder for FailAfter {
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
    }

    #[test]
    fn unrecorded_events_stay_queued_in_order_and_go_first_next_time() {
        let recorder = Arc::new(FailAfter {
            ok: AtomicUsize::new(1),
            inner: MemoryRecorder::new(),
        });
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
        // Nothing left: an old ticket is already satisfied.
        journal.flush(first).unwrap();
        assert_eq!(recorder.inner.events().len(), 3);
    }

    #[test]
    fn a_failure_after_our_events_is_not_our_error() {
        let recorder = Arc::new(FailAfter {
            ok: AtomicUsize::new(1),
            inner: MemoryRecorder::new(),
        });
        let journal = Journal::new(recorder.clone());
        let ours = journal.enqueue(vec![event(1)]);
        let theirs = journal.enqueue(vec![event(2)]);
        journal.flush(ours).unwrap();
        assert!(journal.flush(theirs).is_err());
    }

    #[test]
    fn concurrent_flushers_record_every_event_once_in_queue_order() {
        let recorder = Arc::new(MemoryRecorder::new());
        let journal = Arc::new(Journal::new(recorder.clone()));
        let order = Arc::new(Mutex::new(Vec::new()));
        std::thread::scope(|threads| {
            for thread in 0..4u64 {
                let (journal, order) = (journal.clone(), order.clone());
                threads.spawn(move || {
                    for n in 0..250u64 {
                        let ticket = {
                            // The queue's order stands for the transitions' order.
                            let mut order = order.lock().unwrap();
                            let e = event(thread * 1000 + n);
                            order.push(e.clone());
                            journal.enqueue(vec![e])
                        };
                        journal.flush(ticket).unwrap();
                    }
                });
            }
        });
        assert_eq!(recorder.events(), *order.lock().unwrap());
    }
}
