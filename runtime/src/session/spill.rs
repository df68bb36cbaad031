//! Where the text of blocks a session lets go of goes: hashed and put into its
//! quarantine store, and recorded as [`Event::BlockForgotten`], on a thread of its own,
//! so that a call never waits for the hash, the store's encryption or its syncs.

use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use super::journal::Journal;
use crate::call::Checksum;
use crate::event::Event;
use crate::id::Id;
use crate::quarantine::{QuarantineStore, custodian};
use crate::shared_text::SharedText;

enum Job {
    /// Store the text of block `block` of scope `scope` for the custodian.
    Put {
        scope: Id,
        block: Id,
        text: SharedText,
    },
    /// Answer once every job before it is done.
    Sync(Sender<()>),
}

/// The quarantine's writer for forgotten blocks.
pub(crate) struct Spill {
    store: Arc<dyn QuarantineStore>,
    journal: Arc<Journal>,
    jobs: Mutex<Option<Sender<Job>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Spill {
    /// A writer into `store`; without a thread of its own (the system refused one), it
    /// writes on the caller's.
    pub(crate) fn new(store: Arc<dyn QuarantineStore>, journal: Arc<Journal>) -> Spill {
        let (jobs, queue) = mpsc::channel::<Job>();
        let (worker, worker_journal) = (Arc::clone(&store), Arc::clone(&journal));
        let thread = std::thread::Builder::new()
            .name("tooltrust-spill".to_owned())
            .spawn(move || {
                for job in queue {
                    match job {
                        Job::Put { scope, block, text } => {
                            put(&*worker, &worker_journal, scope, block, &text)
                        }
                        Job::Sync(done) => {
                            let _ = done.send(());
                        }
                    }
                }
            })
            .ok();
        Spill {
            store,
            journal,
            jobs: Mutex::new(thread.as_ref().map(|_| jobs)),
            thread: Mutex::new(thread),
        }
    }

    /// Stores `text`, soon.
    pub(crate) fn put(&self, scope: Id, block: Id, text: SharedText) {
        let jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        let job = Job::Put { scope, block, text };
        let unsent = match &*jobs {
            Some(jobs) => jobs.send(job).err().map(|failed| failed.0),
            None => Some(job),
        };
        drop(jobs);
        if let Some(Job::Put { scope, block, text }) = unsent {
            put(&*self.store, &self.journal, scope, block, &text);
        }
    }

    /// Returns once every text handed over before is stored (or failed to be).
    pub(crate) fn sync(&self) {
        let (done, wait) = mpsc::channel();
        let sent = self
            .jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|jobs| jobs.send(Job::Sync(done)).is_ok());
        if sent {
            let _ = wait.recv();
        }
    }
}

impl Drop for Spill {
    /// Stores what is still queued before the session goes.
    fn drop(&mut self) {
        self.jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(thread) = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            let _ = thread.join();
        }
    }
}

/// Stores `text` for the custodian and records its length and checksum. A copy that
/// cannot be stored is only lost to reviewers, never to a decision (a forgotten block
/// vouches for nothing either way).
fn put(store: &dyn QuarantineStore, journal: &Journal, scope: Id, block: Id, text: &SharedText) {
    let bytes = text.as_str().as_bytes();
    if let Err(error) = store.put(&block, &scope, &custodian(), bytes) {
        tracing::warn!(%block, %error, "a forgotten block's text could not be quarantined");
    }
    let event = Event::BlockForgotten {
        scope,
        block,
        bytes: bytes.len(),
        sha256: Checksum::of(bytes),
    };
    let ticket = journal.enqueue_deferred(vec![event]);
    if let Err(error) = journal.flush(ticket) {
        tracing::warn!(%error, "a forgotten block could not be recorded");
    }
}
