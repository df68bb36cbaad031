//! The append side of the log: sealing events into a hash chain, group commit, the
//! head file, and recovery after a crash.

use std::collections::VecDeque;
use std::future::{Future, ready};
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::entry::{Body, EventError, MAX_SEQ, sign_line};
use super::head::{Head, HeadError};
use super::storage::{FileStorage, Storage, io_error};
use super::verify::{EntryReader, VerifyError, VerifyErrorKind};
use crate::call::Checksum;
use crate::event::{Event, PartialRecord, RecordError, Recorder};
use crate::group_commit::{Committer, GatherOptions, GroupCommit, OnFailure, Partial, Ticket};
use crate::signature::{PublicKey, SecretKey};

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
///
/// # Deferred entries
///
/// Entries appended with [`AuditLog::append_deferred`] (a call's outcome, once its
/// decision is durable) are sealed in order but not waited for: they become durable
/// with the next append's sync, or after `linger` on the log's own flusher thread,
/// whichever comes first; closing or dropping the log syncs them too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuditOptions {
    /// Rewrite the head file after this many new durable entries (1: after every batch).
    pub head_every: u64,
    /// Rewrite it after this long, if any entry was added.
    pub head_interval: Duration,
    /// The longest a writer waits for concurrent appenders to join its batch
    /// (zero: never wait; at most one second is used).
    pub gather: Duration,
    /// The longest a deferred entry waits for an append to carry it before the log
    /// syncs it on its own.
    pub linger: Duration,
}

impl Default for AuditOptions {
    /// The head file every 256 entries or every second; batches gathered for up to
    /// 100 µs; deferred entries synced within 20 ms.
    fn default() -> Self {
        AuditOptions {
            head_every: 256,
            head_interval: Duration::from_secs(1),
            gather: Duration::from_micros(GATHER_MICROS),
            linger: Duration::from_millis(20),
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
    inner: Arc<Inner>,
    /// Syncs deferred entries no append carried; started by the first one.
    flusher: Mutex<Option<std::thread::JoinHandle<()>>>,
    report: OpenReport,
}

struct Inner {
    /// Sealed lines waiting for their sync, and the chain they extend.
    lines: GroupCommit<Line, AuditError, Chain>,
    writer: Writer,
    /// The last deferred entries not yet known durable, for the flusher.
    lingering: Mutex<Lingering>,
    wake: Condvar,
}

#[derive(Default)]
struct Lingering {
    /// Deferred entries' tickets not yet seen durable, oldest first, each with when it
    /// was appended: each gets `linger` from then for an append to carry it.
    waiting: VecDeque<(Ticket, Instant)>,
    stop: bool,
}

/// One sealed entry: its bytes (with the newline) and the head it makes.
struct Line {
    bytes: Vec<u8>,
    head: Head,
}

/// The chain as the appenders see it, kept under the engine's lock so that sealing
/// follows the queue's order.
struct Chain {
    /// The chain's last entry, durable or not.
    tip: Head,
    /// The last acknowledged entry.
    durable: Head,
    /// Set once the file's state is unknown; appends are refused until reopened.
    poisoned: Option<AuditError>,
    /// The last deferred entry sealed: a failed round before it is durable loses it,
    /// and with it the log's promise, so the log is poisoned.
    deferred: u64,
    /// The writer each entry names, if the log is signed.
    signer: Option<PublicKey>,
}

/// Writes rounds of lines to the storage: one write and one sync per round.
struct Writer {
    /// Locked only by the turn holder (and on close), so never contended.
    file: Mutex<File>,
    options: AuditOptions,
    /// Signs the last entry of each round, if the log is signed: through the hash chain
    /// that signature vouches for every entry before it, at one signature per sync.
    key: Option<Arc<SecretKey>>,
}

struct File {
    storage: Box<dyn Storage>,
    durable_len: u64,
    /// What the head file holds, and since when.
    head_file: Head,
    head_file_at: Instant,
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
        Self::open_inner(Box::new(storage), options, None)
    }

    /// Like [`open_with`](Self::open_with), and every entry appended from now on is
    /// signed with `writer` (see [`Body::seal_signed`]): a verifier that holds its
    /// public key ([`verify_signed`](super::verify_signed)) then refuses any entry edited,
    /// inserted or re-hashed by someone without the key. Keep the key where the log's
    /// readers and writers of its files cannot read it.
    pub fn open_signed(
        storage: impl Storage + 'static,
        options: AuditOptions,
        writer: Arc<SecretKey>,
    ) -> Result<Self, AuditError> {
        Self::open_inner(Box::new(storage), options, Some(writer))
    }

    fn open_inner(
        mut storage: Box<dyn Storage>,
        options: AuditOptions,
        writer: Option<Arc<SecretKey>>,
    ) -> Result<Self, AuditError> {
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

        let keyed = writer.is_some();
        let (tip, good_len, torn) = {
            let log = storage
                .read_log()
                .map_err(|e| io_error("read the log file", e))?;
            let mut reader = EntryReader::new(BufReader::with_capacity(1 << 16, log), head_file);
            let mut torn = None;
            // Where the entries no signature vouches for begin: an entry that names a
            // writer but is not signed, after the last one that is.
            let mut unvouched: Option<(u64, Head)> = None;
            loop {
                let (offset, before) = (reader.good_len(), reader.tip());
                let Some(entry) = reader.next() else {
                    break;
                };
                match entry {
                    Ok(entry) => match (&entry.signer, &entry.sig) {
                        (Some(signer), Some(sig))
                            if super::entry::signature_verifies(signer, &entry.hash, sig) =>
                        {
                            unvouched = None;
                        }
                        (Some(_), _) => {
                            unvouched.get_or_insert((offset, before));
                        }
                        (None, _) => {}
                    },
                    Err(VerifyError {
                        kind: VerifyErrorKind::TornTail { offset, .. },
                        ..
                    }) => torn = reader.take_torn().map(|bytes| (offset, bytes)),
                    Err(error) => return Err(AuditError::Corrupt(error)),
                }
            }
            reader.finish().map_err(AuditError::Corrupt)?;
            let (read_tip, read_len) = (reader.tip(), reader.good_len());
            drop(reader);
            match unvouched {
                // A keyed writer never continues after entries no signature vouches for:
                // its next signature would vouch for them. They were never acknowledged
                // (a round's last entry is signed before it is), so they are set aside
                // like a torn line.
                Some((offset, tip)) if keyed => {
                    let mut rest = Vec::new();
                    {
                        let mut log = storage
                            .read_log()
                            .map_err(|e| io_error("read the log file", e))?;
                        io::copy(&mut (&mut log).take(offset), &mut io::sink())
                            .and_then(|_| log.read_to_end(&mut rest))
                            .map_err(|e| io_error("read the log's unsigned tail", e))?;
                    }
                    tracing::warn!(
                        offset,
                        last_signed_seq = tip.seq,
                        "audit log: entries after the last signed one, which no signature vouches for, were set aside"
                    );
                    (tip, offset, Some((offset, rest)))
                }
                _ => (read_tip, read_len, torn),
            }
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

        let inner = Inner {
            lines: GroupCommit::new(
                GatherOptions {
                    gather: options.gather,
                    max_batch: usize::MAX,
                },
                Chain {
                    tip,
                    durable: tip,
                    poisoned: None,
                    deferred: 0,
                    signer: writer.as_deref().map(SecretKey::public),
                },
            ),
            writer: Writer {
                file: Mutex::new(File {
                    storage,
                    durable_len: good_len,
                    head_file: tip,
                    head_file_at: Instant::now(),
                    poisoned: None,
                }),
                options,
                key: writer,
            },
            lingering: Mutex::new(Lingering::default()),
            wake: Condvar::new(),
        };
        Ok(AuditLog {
            inner: Arc::new(inner),
            flusher: Mutex::new(None),
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

    /// Appends `events` in order, like [`append_all`](Self::append_all), without
    /// waiting for their sync: they become durable with the next append's, or within
    /// [`AuditOptions::linger`]. For events that report what already happened and gate
    /// nothing. Should that sync fail, they are lost and the log refuses appends from
    /// then on ([`AuditError::Poisoned`]).
    pub fn append_deferred<T: Serialize>(&self, events: &[T]) -> Result<Vec<Receipt>, AuditError> {
        let bodies = events.iter().map(Body::of).collect::<Result<Vec<_>, _>>()?;
        let (ticket, receipts) = self.seal(bodies, true)?;
        if !ticket.is_empty() {
            self.linger(ticket);
        }
        Ok(receipts)
    }

    fn append_bodies(&self, bodies: Vec<Body>) -> Result<Vec<Receipt>, PartialAppend> {
        let (ticket, receipts) = self
            .seal(bodies, false)
            .map_err(|error| PartialAppend { appended: 0, error })?;
        self.inner.lines.flush(ticket, &self.inner.writer).map_err(
            |Partial { committed, error }| PartialAppend {
                appended: committed,
                error,
            },
        )?;
        Ok(receipts)
    }

    /// Seals `bodies` onto the chain's tip and queues them.
    fn seal(
        &self,
        bodies: Vec<Body>,
        deferred: bool,
    ) -> Result<(Ticket, Vec<Receipt>), AuditError> {
        let mut receipts = Vec::with_capacity(bodies.len());
        let seal = |chain: &mut Chain| {
            if let Some(error) = &chain.poisoned {
                return Err(AuditError::Poisoned(Box::new(error.clone())));
            }
            if chain.tip.seq + bodies.len() as u64 > MAX_SEQ {
                return Err(AuditError::Full);
            }
            // Sealed on a copy of the tip: a body that fails to seal queues nothing.
            let mut tip = chain.tip;
            let mut lines = Vec::with_capacity(bodies.len());
            for body in bodies {
                let seq = tip.seq + 1;
                let (bytes, hash) = body.seal_named(
                    seq,
                    crate::timestamp::now(),
                    &tip.hash,
                    chain.signer.as_ref(),
                )?;
                tip = Head { seq, hash };
                lines.push(Line { bytes, head: tip });
                receipts.push(Receipt { seq, hash });
            }
            chain.tip = tip;
            if deferred {
                chain.deferred = tip.seq;
            }
            Ok(lines)
        };
        // No one waits for deferred entries: they must not make the next writer wait
        // to gather a cohort as large as the round that carried them.
        let (ticket, sealed) = self.inner.lines.enqueue_waited_with(!deferred, seal);
        sealed?;
        Ok((ticket, receipts))
    }

    /// Hands `ticket` to the flusher thread, starting it if needed.
    fn linger(&self, ticket: Ticket) {
        let idle = {
            let mut lingering = lock(&self.inner.lingering);
            lingering.waiting.push_back((ticket, Instant::now()));
            lingering.waiting.len() == 1
        };
        // A flusher with entries in hand already sleeps until the oldest one's
        // deadline; waking it for each call would cost the caller a thread switch.
        if idle {
            self.inner.wake.notify_all();
        }
        let mut flusher = lock(&self.flusher);
        if flusher.is_none() {
            let inner = Arc::clone(&self.inner);
            match std::thread::Builder::new()
                .name("tooltrust-audit-flush".into())
                .spawn(move || inner.flush_lingering())
            {
                Ok(handle) => *flusher = Some(handle),
                Err(error) => {
                    // No thread: sync them now rather than leave them waiting.
                    tracing::warn!(%error, "audit log: cannot start the flusher thread");
                    drop(flusher);
                    if let Err(partial) = self.inner.flush_deferred() {
                        tracing::error!(error = %partial.error, "audit log: deferred entries were not made durable");
                    }
                }
            }
        }
    }

    /// Makes every deferred entry durable now.
    pub fn flush(&self) -> Result<(), AuditError> {
        self.inner.flush_deferred().map_err(|partial| partial.error)
    }

    /// The last acknowledged entry: what a host pins elsewhere.
    pub fn head(&self) -> Head {
        self.inner.lines.with_shared(|chain| chain.durable)
    }

    /// Rewrites the head file now if it lags, and returns the head it holds.
    pub fn sync_head(&self) -> Result<Head, AuditError> {
        let inner = &self.inner;
        inner.lines.with_turn(&inner.writer, |chain| {
            if let Some(error) = &chain.poisoned {
                return Err(AuditError::Poisoned(Box::new(error.clone())));
            }
            let mut file = inner.writer.lock();
            if file.head_file != chain.durable {
                file.write_head(chain.durable);
                if let Some(error) = &file.poisoned {
                    chain.poisoned = Some(error.clone());
                    return Err(error.clone());
                }
            }
            Ok(file.head_file)
        })
    }

    /// Brings the head file up to date and closes the log, reporting any failure
    /// (dropping the log does the same, silently).
    pub fn close(self) -> Result<Head, AuditError> {
        self.stop_flusher();
        self.flush()?;
        self.sync_head()
    }

    fn stop_flusher(&self) {
        lock(&self.inner.lingering).stop = true;
        self.inner.wake.notify_all();
        if let Some(handle) = lock(&self.flusher).take() {
            // The flusher reports its own failures; a panic there is already logged.
            let _ = handle.join();
        }
    }
}

impl Inner {
    /// The flusher thread: gives each deferred entry `linger` for an append to carry
    /// it, then syncs every deferred entry itself. Entries an append already carried
    /// are let go without a sync of their own, so a steady stream of calls costs one
    /// sync per decision and none here.
    fn flush_lingering(&self) {
        let mut lingering = lock(&self.lingering);
        loop {
            if lingering.stop {
                return;
            }
            while let Some((ticket, _)) = lingering.waiting.front() {
                if self.lines.outcome(*ticket).is_none() {
                    break;
                }
                lingering.waiting.pop_front();
            }
            let Some(&(_, appended)) = lingering.waiting.front() else {
                lingering = self
                    .wake
                    .wait(lingering)
                    .unwrap_or_else(PoisonError::into_inner);
                continue;
            };
            match (appended + self.writer.options.linger).checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => {
                    lingering = self
                        .wake
                        .wait_timeout(lingering, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
                _ => {
                    drop(lingering);
                    if let Err(partial) = self.flush_deferred() {
                        tracing::error!(error = %partial.error, "audit log: deferred entries were not made durable");
                    }
                    lingering = lock(&self.lingering);
                }
            }
        }
    }

    /// Syncs every deferred entry handed to the flusher, if any: the latest one's
    /// ticket covers those before it.
    fn flush_deferred(&self) -> Result<(), Partial<AuditError>> {
        let latest = {
            let mut lingering = lock(&self.lingering);
            let latest = lingering.waiting.back().map(|(ticket, _)| *ticket);
            lingering.waiting.clear();
            latest
        };
        match latest {
            Some(ticket) => self.lines.flush(ticket, &self.writer),
            None => Ok(()),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Writer {
    fn lock(&self) -> MutexGuard<'_, File> {
        // A panic in the storage leaves the file's state unknown: `settle` sees the
        // poisoned lock and refuses further appends.
        self.file.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl File {
    /// Writes and syncs `batch`; on failure cuts the file back to what was
    /// acknowledged, and poisons the log when its state is unknown.
    fn write_batch(&mut self, batch: &[Line], options: &AuditOptions) -> Result<(), AuditError> {
        if let Some(error) = &self.poisoned {
            return Err(AuditError::Poisoned(Box::new(error.clone())));
        }
        let bytes: Vec<u8> = batch.iter().flat_map(|line| &line.bytes).copied().collect();
        let outcome = match self.storage.append(&bytes) {
            Ok(()) => self
                .storage
                .sync()
                .map_err(|e| (io_error("sync the log file", e), SYNC_FAILED)),
            Err(e) => Err((io_error("write the log file", e), !SYNC_FAILED)),
        };
        match outcome {
            Ok(()) => {
                self.durable_len += bytes.len() as u64;
                let Some(tip) = batch.last().map(|line| line.head) else {
                    return Ok(());
                };
                let due = tip.seq.saturating_sub(self.head_file.seq) >= options.head_every
                    || self.head_file_at.elapsed() >= options.head_interval;
                if due && self.head_file != tip {
                    // The entries are durable whatever happens to the head file; a
                    // failure here poisons the log for the appends after them.
                    self.write_head(tip);
                }
                Ok(())
            }
            Err((error, sync_failed)) => {
                // After a failed write the file may hold part of the batch; after a
                // failed sync the kernel may have dropped the dirty pages. Cut back to
                // what was acknowledged.
                match self.storage.truncate(self.durable_len) {
                    Err(e) => {
                        self.poisoned = Some(io_error("cut the log back after a failed write", e));
                    }
                    Ok(()) if sync_failed => self.poisoned = Some(error.clone()),
                    Ok(()) => {}
                }
                Err(error)
            }
        }
    }

    /// Rewrites the head file to `head`; a failure poisons the log.
    fn write_head(&mut self, head: Head) {
        match self.storage.write_head(head.to_json().as_bytes()) {
            Ok(()) => {
                self.head_file = head;
                self.head_file_at = Instant::now();
            }
            Err(e) => self.poisoned = Some(io_error("write the head file", e)),
        }
    }
}

/// A round is one write and one sync; a failed round drops every line queued after
/// it too, since each was sealed on the one before.
impl Committer<Line, Chain> for Writer {
    type Error = AuditError;
    const ON_FAILURE: OnFailure = OnFailure::Discard;

    fn commit(
        &self,
        batch: &mut [Line],
    ) -> impl Future<Output = Result<(), Partial<AuditError>>> + Send {
        if let (Some(key), Some(last)) = (&self.key, batch.last_mut()) {
            match sign_line(&last.bytes, &last.head.hash, key) {
                Some(signed) => last.bytes = signed,
                // Never for a line this log sealed; verification would report it unsigned.
                None => {
                    tracing::warn!(seq = last.head.seq, "audit log: a line could not be signed")
                }
            }
        }
        let result = self
            .lock()
            .write_batch(batch, &self.options)
            .map_err(|error| Partial {
                committed: 0,
                error,
            });
        ready(result)
    }

    fn lost(&self) -> AuditError {
        io_error(
            "complete a storage operation",
            io::Error::other("the storage panicked"),
        )
    }

    fn settle(&self, chain: &mut Chain, batch: &[Line], committed: usize, failed: bool) {
        if let Some(line) = batch[..committed].last() {
            chain.durable = line.head;
        }
        if failed {
            // Everything not acknowledged is dropped: the chain goes back to its last
            // durable entry.
            chain.tip = chain.durable;
            if chain.deferred > chain.durable.seq && chain.poisoned.is_none() {
                // No one waits for a deferred entry to hear that it was lost.
                chain.poisoned = Some(io_error(
                    "make deferred entries durable",
                    io::Error::other("a failed write dropped them"),
                ));
            }
        }
        let poisoned = match self.file.lock() {
            Ok(file) => file.poisoned.clone(),
            Err(_) => Some(self.lost()),
        };
        if chain.poisoned.is_none() {
            chain.poisoned = poisoned;
        }
    }
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        self.stop_flusher();
        if let Err(partial) = self.inner.flush_deferred() {
            tracing::warn!(error = %partial.error, "audit log: deferred entries were not made durable on close");
        }
        let durable = self.head();
        let mut file = self.inner.writer.lock();
        if file.poisoned.is_some() || file.head_file == durable {
            return;
        }
        if let Err(error) = file.storage.write_head(durable.to_json().as_bytes()) {
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

/// The default [`AuditOptions::gather`], in microseconds: a fraction of one sync, so
/// that concurrent appenders join a batch without delaying a lone one much
/// (`benches/audit.rs` measures the trade-off).
const GATHER_MICROS: u64 = 100;

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

    /// Sealed now, synced by the next append or within [`AuditOptions::linger`].
    fn record_deferred(&self, events: &[Event]) -> Result<(), PartialRecord> {
        self.append_deferred(events)
            .map(|_| ())
            .map_err(|error| PartialRecord {
                recorded: 0,
                error: RecordError::new(error),
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
