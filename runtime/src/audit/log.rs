//! The append side of the log: sealing events into a hash chain, group commit, the
//! head file, and recovery after a crash.

use std::io::{self, BufReader};
use std::mem;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::entry::{Body, EventError, MAX_SEQ};
use super::head::{Head, HeadError};
use super::storage::{FileStorage, Storage, io_error};
use super::verify::{EntryReader, VerifyError, VerifyErrorKind};
use crate::call::Checksum;
use crate::event::{Event, PartialRecord, RecordError, Recorder};

/// Why the log could not open or append.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AuditError {
    /// The event was refused; nothing was written.
    #[error("audit event refused: {0}")]
    Event(#[from] EventError),
    /// A file operation failed. If it failed during an append, that append and the
    /// ones batched with it were not recorded (the file was cut back to the last
    /// acknowledged entry); entries acknowledged before are intact.
    #[error("audit log: cannot {op}: {source}")]
    Io {
        /// What the log was doing.
        op: &'static str,
        /// The operating system's error.
        #[source]
        source: Arc<io::Error>,
    },
    /// Another handle, in this process or another, has the log open.
    #[error("audit log {0} is open elsewhere (in this process or another)")]
    Locked(PathBuf),
    /// The log holds a bad entry that a crash cannot explain; it is not opened for
    /// appending. `tooltrust audit verify` shows the same finding.
    #[error("audit log is corrupt at {0}")]
    Corrupt(#[source] VerifyError),
    /// The head file is unreadable.
    #[error("audit log head file: {0}")]
    Head(#[source] HeadError),
    /// The log holds entries but its head file is gone, so truncation could no longer
    /// be detected locally.
    #[error(
        "audit log has entries but no head file; restore the head (from a pinned copy) before opening"
    )]
    HeadMissing,
    /// The log holds 2^53 entries, the most canonical JSON numbers count exactly.
    #[error("audit log is full (seq 2^53)")]
    Full,
    /// An earlier failure left the file's state unknown (a failed sync, a failed cut
    /// back, a failed head write); the log refuses appends until it is reopened, which
    /// verifies it again.
    #[error("audit log refuses appends after an earlier failure ({0}); reopen it")]
    Poisoned(Box<AuditError>),
}

/// What an acknowledged append recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Receipt {
    /// The entry's sequence number.
    pub seq: u64,
    /// The entry's hash.
    pub hash: Checksum,
}

/// What opening found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenReport {
    /// The number of intact entries.
    pub entries: u64,
    /// The last intact entry.
    pub head: Head,
    /// A torn last line (a write a crash interrupted), if there was one. Its bytes were
    /// moved to a side file and the log continues after the last intact entry.
    pub torn: Option<TornTail>,
}

/// A torn tail found and set aside when opening.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// Where it started: the length of the intact log.
    pub offset: u64,
    /// Its length in bytes.
    pub len: u64,
    /// The last intact entry's seq.
    pub last_good_seq: u64,
    /// The side file now holding its bytes.
    pub saved_to: PathBuf,
}

/// How the log batches syncs and when it rewrites the head file.
///
/// # Group commit
///
/// One writer syncs at a time; appends that arrive meanwhile join the next batch.
/// Each appender waits for its own sync, so without help the writers split into two
/// cohorts that alternate between batches. Before syncing, a writer therefore waits
/// up to `gather` for as many entries as the last round saw (the entries of the last
/// batch plus those that arrived during its sync), so that the whole cohort shares
/// one sync. A lone writer never waits: its cohort is itself.
///
/// # Head file
///
/// The head file is what makes truncation detectable locally, and each rewrite costs
/// a temporary file, its sync, a rename and a directory sync: rewriting it after every
/// batch made single-writer appends 3-5x slower in `benches/audit.rs`. So after a
/// batch has been made durable, it is rewritten only once `head_every` entries or
/// `head_interval` have passed since it was last written (the default, 256 entries or
/// one second, measured within noise of never rewriting it), and always by
/// [`AuditLog::sync_head`], [`AuditLog::close`], on drop and when opening. The cost:
/// after a crash the head file may lag the log by up to that much, and cutting those
/// last entries off would go unnoticed locally. The entries themselves are durable
/// regardless; pin [`AuditLog::head`] elsewhere when it matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuditOptions {
    /// Rewrite the head file after this many new durable entries (1: after every batch).
    pub head_every: u64,
    /// Rewrite it after this long, if any entry was added.
    pub head_interval: Duration,
    /// The longest a writer waits for concurrent appenders to join its batch
    /// (zero: never wait; at most one second is used).
    pub gather: Duration,
}

impl Default for AuditOptions {
    /// The head file every 256 entries or every second; batches gathered for up to
    /// 100 µs.
    fn default() -> Self {
        AuditOptions {
            head_every: 256,
            head_interval: Duration::from_secs(1),
            gather: Duration::from_micros(GATHER_MICROS),
        }
    }
}

/// A tamper-evident, append-only audit log in files.
///
/// Each entry is one line of canonical JSON: the event's fields plus `seq` (from 1),
/// `ts` (RFC 3339, UTC), `prev` (the previous entry's hash) and `hash` (SHA-256 over
/// `prev` and the entry without `hash`); see [`Entry`](super::Entry). The log stores
/// exactly what it is given: **never pass key material, session keys or quarantined
/// plaintext in an event**; record ids, sizes and reasons instead.
///
/// # Durability
///
/// [`append`](Self::append) returns `Ok` only once the entry is on disk (fdatasync);
/// concurrent appends are batched so that one sync acknowledges them all (group
/// commit), and sequence numbers follow the order of the chain.
///
/// # Pinning the head
///
/// A shorter log is still a valid log, so truncation is only detectable against a
/// head recorded earlier. The log keeps one in `audit.head` (see [`AuditOptions`]),
/// which catches accidents and crashes; someone able to rewrite the log can rewrite
/// that file too. To be sure, a host copies [`head`](Self::head) (or the head file,
/// after [`sync_head`](Self::sync_head)) to a system the agent cannot write — a
/// ticket, a remote log, another host — at the moments that matter, and later checks
/// the log against it with [`verify`](super::verify) or
/// `tooltrust audit verify audit.jsonl --head pinned.head`.
///
/// ```
/// use tooltrust::audit::{AuditLog, verify};
/// let dir = tempfile::tempdir()?;
/// let log = AuditLog::open(dir.path())?;
/// let receipt = log.append(&serde_json::json!({"event": "call_denied", "tool": "send_email"}))?;
/// assert_eq!(receipt.seq, 1);
/// let pinned = log.head(); // copy this somewhere the agent cannot write
/// drop(log);
/// let report = verify(&dir.path().join("audit.jsonl"), Some(&pinned))?;
/// assert_eq!(report.entries, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct AuditLog {
    state: Mutex<State>,
    /// Signalled when entries become durable or fail, or the turn is free.
    changed: Condvar,
    /// Signalled to a gathering writer when an entry joins the pending batch.
    arrived: Condvar,
    options: AuditOptions,
    report: OpenReport,
}

struct State {
    /// Out only while a writer does I/O without the lock.
    storage: Option<Box<dyn Storage>>,
    /// The chain's last entry, durable or not.
    tip: Head,
    /// Sealed lines waiting for the next batch.
    pending: Vec<u8>,
    /// The last acknowledged entry.
    durable: Head,
    durable_len: u64,
    /// What the head file holds, and since when.
    head_file: Head,
    head_file_at: Instant,
    /// Someone holds the turn: gathers a batch or does I/O.
    writing: bool,
    gathering: bool,
    /// How many entries the last round saw: what the next batch waits for.
    cohort: u64,
    /// Bumped by every failed batch; `failures[e]` says, for an entry of epoch `e` not
    /// acknowledged by then, why it was dropped (with the last seq that survived).
    epoch: usize,
    failures: Vec<(u64, AuditError)>,
    poisoned: Option<AuditError>,
}

impl AuditLog {
    /// Opens the log in `dir` (created if missing) with the default options; see
    /// [`open_with`](Self::open_with).
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, AuditError> {
        Self::open_with(FileStorage::open(dir)?, AuditOptions::default())
    }

    /// Opens a log over `storage`: verifies every entry and the head file, and sets
    /// aside a torn last line (the bytes of a write a crash interrupted, which was
    /// never acknowledged) into a side file, reporting it in
    /// [`open_report`](Self::open_report). Any other bad entry, or a log shorter than
    /// its head file, refuses to open: [`AuditError::Corrupt`].
    pub fn open_with(
        storage: impl Storage + 'static,
        options: AuditOptions,
    ) -> Result<Self, AuditError> {
        let mut storage: Box<dyn Storage> = Box::new(storage);
        let head_file = match storage
            .read_head()
            .map_err(|e| io_error("read the head file", e))?
        {
            Some(bytes) => {
                let text = String::from_utf8(bytes)
                    .map_err(|_| AuditError::Head(HeadError::Malformed("not UTF-8".into())))?;
                Some(Head::parse(&text).map_err(AuditError::Head)?)
            }
            None => None,
        };

        let (tip, good_len, torn) = {
            let log = storage
                .read_log()
                .map_err(|e| io_error("read the log file", e))?;
            let mut reader = EntryReader::new(BufReader::with_capacity(1 << 16, log), head_file);
            let mut torn = None;
            while let Some(entry) = reader.next() {
                match entry {
                    Ok(_) => {}
                    Err(VerifyError {
                        kind: VerifyErrorKind::TornTail { offset, .. },
                        ..
                    }) => torn = reader.take_torn().map(|bytes| (offset, bytes)),
                    Err(error) => return Err(AuditError::Corrupt(error)),
                }
            }
            reader.finish().map_err(AuditError::Corrupt)?;
            (reader.tip(), reader.good_len(), torn)
        };
        if head_file.is_none() && (tip.seq > 0 || torn.is_some()) {
            return Err(AuditError::HeadMissing);
        }

        let torn = match torn {
            Some((offset, bytes)) => {
                let saved_to = storage
                    .save_torn(offset, &bytes)
                    .map_err(|e| io_error("save the torn tail", e))?;
                storage
                    .truncate(offset)
                    .map_err(|e| io_error("cut the torn tail", e))?;
                let torn = TornTail {
                    offset,
                    len: bytes.len() as u64,
                    last_good_seq: tip.seq,
                    saved_to,
                };
                tracing::warn!(
                    offset,
                    len = torn.len,
                    last_good_seq = tip.seq,
                    saved_to = %torn.saved_to.display(),
                    "audit log: a torn last line (an unacknowledged write cut by a crash) was set aside"
                );
                Some(torn)
            }
            None => None,
        };
        // The log was verified against the old head; bring the head file up to date.
        if head_file != Some(tip) {
            storage
                .write_head(tip.to_json().as_bytes())
                .map_err(|e| io_error("write the head file", e))?;
        }

        Ok(AuditLog {
            state: Mutex::new(State {
                storage: Some(storage),
                tip,
                pending: Vec::new(),
                durable: tip,
                durable_len: good_len,
                head_file: tip,
                head_file_at: Instant::now(),
                writing: false,
                gathering: false,
                cohort: 1,
                epoch: 0,
                failures: Vec::new(),
                poisoned: None,
            }),
            changed: Condvar::new(),
            arrived: Condvar::new(),
            options,
            report: OpenReport {
                entries: tip.seq,
                head: tip,
                torn,
            },
        })
    }

    /// What opening found (including any torn tail that was set aside).
    pub fn open_report(&self) -> &OpenReport {
        &self.report
    }

    /// Appends an event and returns once it is durable.
    ///
    /// The event must serialize to a JSON object with a string field `"event"` naming
    /// its type (`[A-Za-z0-9_-]{1,128}`) and no field named `seq`, `ts`, `prev` or
    /// `hash`. Never pass secrets: see the type's documentation.
    pub fn append<T: Serialize + ?Sized>(&self, event: &T) -> Result<Receipt, AuditError> {
        let mut receipts = self
            .append_bodies(vec![Body::of(event)?])
            .map_err(|partial| partial.error)?;
        // One receipt per body appended.
        Ok(receipts.swap_remove(0))
    }

    /// Appends `events` in order, as consecutive entries that share one sync, and
    /// returns once all are durable. Every event is checked before any is written, so
    /// a malformed one appends nothing; if the write or sync fails, the error says how
    /// many of the events (from the first) are durable.
    pub fn append_all<T: Serialize>(&self, events: &[T]) -> Result<Vec<Receipt>, PartialAppend> {
        let bodies = events
            .iter()
            .map(Body::of)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| PartialAppend {
                appended: 0,
                error: error.into(),
            })?;
        self.append_bodies(bodies)
    }

    fn append_bodies(&self, bodies: Vec<Body>) -> Result<Vec<Receipt>, PartialAppend> {
        let refused = |error| PartialAppend { appended: 0, error };
        let mut state = self.lock();
        if let Some(error) = &state.poisoned {
            return Err(refused(AuditError::Poisoned(Box::new(error.clone()))));
        }
        if state.tip.seq + bodies.len() as u64 > MAX_SEQ {
            return Err(refused(AuditError::Full));
        }
        let first = state.tip.seq + 1;
        let mut receipts = Vec::with_capacity(bodies.len());
        for body in bodies {
            let seq = state.tip.seq + 1;
            let (line, hash) = body
                .seal(seq, crate::timestamp::now(), &state.tip.hash)
                .map_err(|error| refused(error.into()))?;
            state.pending.extend_from_slice(&line);
            state.tip = Head { seq, hash };
            receipts.push(Receipt { seq, hash });
        }
        let Some(last) = receipts.last().map(|receipt| receipt.seq) else {
            return Ok(receipts);
        };
        if state.gathering {
            self.arrived.notify_one();
        }
        let epoch = state.epoch;
        loop {
            if let Some((survived, error)) = state.failures.get(epoch) {
                return if last <= *survived {
                    Ok(receipts)
                } else {
                    Err(PartialAppend {
                        appended: usize::try_from(survived.saturating_sub(first - 1))
                            .unwrap_or(usize::MAX)
                            .min(receipts.len()),
                        error: error.clone(),
                    })
                };
            }
            if state.durable.seq >= last {
                return Ok(receipts);
            }
            if let Some(error) = &state.poisoned {
                return Err(PartialAppend {
                    appended: usize::try_from(state.durable.seq.saturating_sub(first - 1))
                        .unwrap_or(usize::MAX)
                        .min(receipts.len()),
                    error: AuditError::Poisoned(Box::new(error.clone())),
                });
            }
            state = if state.writing {
                self.changed
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner)
            } else {
                self.write_batch(state)
            };
        }
    }

    /// The last acknowledged entry: what a host pins elsewhere.
    pub fn head(&self) -> Head {
        self.lock().durable
    }

    /// Rewrites the head file now if it lags, and returns the head it holds.
    pub fn sync_head(&self) -> Result<Head, AuditError> {
        let mut state = self.lock();
        while state.writing {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if let Some(error) = &state.poisoned {
            return Err(AuditError::Poisoned(Box::new(error.clone())));
        }
        if state.head_file != state.durable {
            state = self.write_head(state);
            if let Some(error) = &state.poisoned {
                return Err(error.clone());
            }
        }
        Ok(state.head_file)
    }

    /// Brings the head file up to date and closes the log, reporting any failure
    /// (dropping the log does the same, silently).
    pub fn close(self) -> Result<Head, AuditError> {
        self.sync_head()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes and syncs every pending line as one batch, then acknowledges them all.
    fn write_batch<'a>(&'a self, mut state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        if state.storage.is_none() {
            return state;
        }
        state.writing = true;
        state = self.gather(state);
        let Some(mut storage) = state.storage.take() else {
            state.writing = false;
            return state;
        };
        let batch = mem::take(&mut state.pending);
        let batch_tip = state.tip;
        let batch_start = state.durable.seq;
        let durable_len = state.durable_len;
        drop(state);

        let turn = Turn { log: self };
        let outcome = match storage.append(&batch) {
            Ok(()) => storage
                .sync()
                .map_err(|e| (io_error("sync the log file", e), SYNC_FAILED)),
            Err(e) => Err((io_error("write the log file", e), !SYNC_FAILED)),
        };
        // After a failed write the file may hold part of the batch; after a failed sync
        // the kernel may have dropped the dirty pages. Cut back to what was acknowledged.
        let cut = match &outcome {
            Err(_) => Some(storage.truncate(durable_len)),
            Ok(()) => None,
        };
        turn.end();

        let mut state = self.lock();
        state.storage = Some(storage);
        state.writing = false;
        match outcome {
            Ok(()) => {
                state.durable = batch_tip;
                state.durable_len += batch.len() as u64;
                // This batch plus what arrived while it was synced.
                state.cohort = state.tip.seq - batch_start;
                let due = state.durable.seq.saturating_sub(state.head_file.seq)
                    >= self.options.head_every
                    || state.head_file_at.elapsed() >= self.options.head_interval;
                if due && state.head_file != state.durable {
                    self.changed.notify_all();
                    state = self.write_head(state);
                }
            }
            Err((error, sync_failed)) => {
                let cut_failed = match cut {
                    Some(Err(e)) => Some(io_error("cut the log back after a failed write", e)),
                    _ => None,
                };
                if sync_failed || cut_failed.is_some() {
                    state.poisoned = Some(cut_failed.unwrap_or_else(|| error.clone()));
                }
                self.fail_epoch(&mut state, error);
            }
        }
        self.changed.notify_all();
        state
    }

    /// Waits, up to `gather`, until the pending batch holds a whole cohort.
    fn gather<'a>(&'a self, mut state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        let deadline = Instant::now() + self.options.gather.min(MAX_GATHER);
        state.gathering = true;
        while state.tip.seq - state.durable.seq < state.cohort {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                break;
            };
            if left.is_zero() {
                break;
            }
            state = self
                .arrived
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        state.gathering = false;
        state
    }

    /// Rewrites the head file to the durable head; a failure poisons the log.
    fn write_head<'a>(&'a self, mut state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        let Some(mut storage) = state.storage.take() else {
            return state;
        };
        state.writing = true;
        let head = state.durable;
        drop(state);

        let turn = Turn { log: self };
        let written = storage.write_head(head.to_json().as_bytes());
        turn.end();

        let mut state = self.lock();
        state.storage = Some(storage);
        state.writing = false;
        match written {
            Ok(()) => {
                state.head_file = head;
                state.head_file_at = Instant::now();
            }
            Err(e) => {
                let error = io_error("write the head file", e);
                state.poisoned = Some(error.clone());
                self.fail_epoch(&mut state, error);
            }
        }
        self.changed.notify_all();
        state
    }

    /// Drops every entry not yet acknowledged and rolls the chain back to the last
    /// acknowledged one.
    fn fail_epoch(&self, state: &mut State, error: AuditError) {
        let survived = state.durable.seq;
        state.failures.push((survived, error));
        state.epoch += 1;
        state.pending.clear();
        state.tip = state.durable;
        state.cohort = 1;
    }
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        if state.poisoned.is_some() || state.head_file == state.durable {
            return;
        }
        if let Some(storage) = state.storage.as_mut()
            && let Err(error) = storage.write_head(state.durable.to_json().as_bytes())
        {
            tracing::warn!(%error, "audit log: cannot write the head file on close");
        }
    }
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog")
            .field("head", &self.head())
            .field("open_report", &self.report)
            .finish_non_exhaustive()
    }
}

/// Held while a writer does I/O without the lock: if the storage panics, the log is
/// poisoned and every waiter is released, instead of waiting forever.
struct Turn<'a> {
    log: &'a AuditLog,
}

impl Turn<'_> {
    /// The I/O returned (with a result or an error): nothing to clean up.
    fn end(self) {
        mem::forget(self);
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut state = self.log.lock();
        let error = io_error(
            "complete a storage operation",
            io::Error::other("the storage panicked"),
        );
        state.writing = false;
        state.poisoned = Some(error.clone());
        self.log.fail_epoch(&mut state, error);
        self.log.changed.notify_all();
    }
}

/// The default [`AuditOptions::gather`], in microseconds: a fraction of one sync, so
/// that concurrent appenders join a batch without delaying a lone one much
/// (`benches/audit.rs` measures the trade-off).
const GATHER_MICROS: u64 = 100;

/// The longest gathering wait used, whatever the options say.
const MAX_GATHER: Duration = Duration::from_secs(1);

/// Whether a batch failed in its sync (rather than its write).
const SYNC_FAILED: bool = true;

/// The session's events go to the log; an event that cannot be made durable is a
/// decision that is not taken. A batch costs one sync.
impl Recorder for AuditLog {
    fn record(&self, event: &Event) -> Result<(), RecordError> {
        self.append(event).map(|_| ()).map_err(RecordError::new)
    }

    fn record_batch(&self, events: &[Event]) -> Result<(), PartialRecord> {
        self.append_all(events)
            .map(|_| ())
            .map_err(|partial| PartialRecord {
                recorded: partial.appended,
                error: RecordError::new(partial.error),
            })
    }
}

/// An append of several events that stopped part-way.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{appended} event(s) were appended before the log failed: {error}")]
pub struct PartialAppend {
    /// How many of the events, from the first, are durable.
    pub appended: usize,
    /// Why the rest are not.
    #[source]
    pub error: AuditError,
}
