//! Disk errors: a full disk (a writer that fails part-way), failing syncs, cut-backs and
//! head writes, a panicking storage, and a read-only directory. Each gives a typed
//! error; no acknowledged entry is lost and the log is never left corrupt.

use crate::audit::common as audit_common;

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use audit_common::{assert_log_holds, event};
use tooltrust::audit::{
    AuditError, AuditLog, AuditOptions, FileStorage, HEAD_FILE, Head, LOG_FILE, Receipt, Storage,
    verify,
};

/// Which faults to inject; shared between the test and the storage it wraps.
#[derive(Clone, Default)]
struct Faults(Arc<Mutex<FaultState>>);

#[derive(Default)]
struct FaultState {
    /// Bytes that may still be written before the disk is full (`None`: no limit).
    write_budget: Option<usize>,
    /// Lift the limit after this many writes have failed for lack of space.
    free_space_after: Option<usize>,
    fail_sync: bool,
    fail_truncate: bool,
    fail_head: bool,
    panic_on_append: bool,
}

impl Faults {
    fn set(&self) -> MutexGuard<'_, FaultState> {
        self.0.lock().unwrap()
    }
}

struct Faulty {
    inner: FileStorage,
    faults: Faults,
}

fn injected(kind: io::ErrorKind) -> io::Error {
    io::Error::new(kind, "injected fault")
}

impl Storage for Faulty {
    fn read_log(&mut self) -> io::Result<Box<dyn Read + '_>> {
        self.inner.read_log()
    }
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.faults.set().panic_on_append {
            panic!("injected panic");
        }
        let allowed = {
            let mut faults = self.faults.set();
            match &mut faults.write_budget {
                None => bytes.len(),
                Some(budget) => {
                    let allowed = (*budget).min(bytes.len());
                    *budget -= allowed;
                    allowed
                }
            }
        };
        if allowed < bytes.len() {
            let mut faults = self.faults.set();
            if let Some(left) = &mut faults.free_space_after {
                *left = left.saturating_sub(1);
                if *left == 0 {
                    faults.write_budget = None;
                }
            }
        }
        // Like a real full disk: what fits is written, then the write fails.
        self.inner.append(&bytes[..allowed])?;
        if allowed < bytes.len() {
            return Err(injected(io::ErrorKind::StorageFull));
        }
        Ok(())
    }
    fn sync(&mut self) -> io::Result<()> {
        if self.faults.set().fail_sync {
            return Err(injected(io::ErrorKind::Other));
        }
        self.inner.sync()
    }
    fn truncate(&mut self, len: u64) -> io::Result<()> {
        if self.faults.set().fail_truncate {
            return Err(injected(io::ErrorKind::Other));
        }
        self.inner.truncate(len)
    }
    fn read_head(&mut self) -> io::Result<Option<Vec<u8>>> {
        self.inner.read_head()
    }
    fn write_head(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.faults.set().fail_head {
            return Err(injected(io::ErrorKind::StorageFull));
        }
        self.inner.write_head(bytes)
    }
    fn save_torn(&mut self, offset: u64, bytes: &[u8]) -> io::Result<PathBuf> {
        self.inner.save_torn(offset, bytes)
    }
}

fn open_faulty(dir: &Path, head_every: u64) -> (AuditLog, Faults) {
    let faults = Faults::default();
    let storage = Faulty {
        inner: FileStorage::open(dir).unwrap(),
        faults: faults.clone(),
    };
    let options = AuditOptions {
        head_every,
        head_interval: Duration::from_secs(3600),
        ..AuditOptions::default()
    };
    (AuditLog::open_with(storage, options).unwrap(), faults)
}

fn io_failure(result: Result<Receipt, AuditError>) -> (&'static str, io::ErrorKind) {
    match result {
        Err(AuditError::Io { op, source }) => (op, source.kind()),
        other => panic!("expected an I/O error, got {other:?}"),
    }
}

#[test]
fn a_full_disk_fails_the_append_cuts_back_and_the_log_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let (log, faults) = open_faulty(dir.path(), 1);
    let mut acknowledged: Vec<Receipt> = (1..=5).map(|i| log.append(&event(i)).unwrap()).collect();
    let len = std::fs::metadata(dir.path().join(LOG_FILE)).unwrap().len();

    faults.set().write_budget = Some(30); // part of the next entry fits
    assert_eq!(
        io_failure(log.append(&event(6))),
        ("write the log file", io::ErrorKind::StorageFull)
    );
    assert_eq!(
        std::fs::metadata(dir.path().join(LOG_FILE)).unwrap().len(),
        len
    );
    assert_log_holds(dir.path(), &acknowledged);
    assert_eq!(log.head(), Head::read(dir.path().join(HEAD_FILE)).unwrap());

    // Space is freed: the chain resumes after the last acknowledged entry.
    faults.set().write_budget = None;
    let receipt = log.append(&event(7)).unwrap();
    assert_eq!(receipt.seq, 6);
    acknowledged.push(receipt);
    assert_log_holds(dir.path(), &acknowledged);
    assert_eq!(
        verify(&dir.path().join(LOG_FILE), Some(&log.head()))
            .unwrap()
            .entries,
        6
    );
}

#[test]
fn a_failed_sync_refuses_appends_until_reopened() {
    let dir = tempfile::tempdir().unwrap();
    let (log, faults) = open_faulty(dir.path(), 1);
    let mut acknowledged: Vec<Receipt> = (1..=3).map(|i| log.append(&event(i)).unwrap()).collect();
    faults.set().fail_sync = true;
    assert_eq!(
        io_failure(log.append(&event(4))),
        ("sync the log file", io::ErrorKind::Other)
    );
    faults.set().fail_sync = false;
    // After a failed sync the kernel may have dropped the written pages: the state of
    // the file is unknown until it is read again.
    assert!(matches!(
        log.append(&event(5)),
        Err(AuditError::Poisoned(_))
    ));
    assert!(matches!(log.sync_head(), Err(AuditError::Poisoned(_))));
    drop(log);
    assert_log_holds(dir.path(), &acknowledged);

    let log = AuditLog::open(dir.path()).unwrap();
    assert_eq!(log.open_report().entries, 3);
    acknowledged.push(log.append(&event(6)).unwrap());
    assert_eq!(acknowledged[3].seq, 4);
    drop(log);
    assert_log_holds(dir.path(), &acknowledged);
}

#[test]
fn a_failed_cut_back_refuses_appends_and_reopening_sets_the_partial_entry_aside() {
    let dir = tempfile::tempdir().unwrap();
    let (log, faults) = open_faulty(dir.path(), 1);
    let acknowledged: Vec<Receipt> = (1..=3).map(|i| log.append(&event(i)).unwrap()).collect();
    let len = std::fs::metadata(dir.path().join(LOG_FILE)).unwrap().len();
    {
        let mut faults = faults.set();
        faults.write_budget = Some(25);
        faults.fail_truncate = true;
    }
    assert_eq!(io_failure(log.append(&event(4))).0, "write the log file");
    match log.append(&event(5)) {
        Err(AuditError::Poisoned(cause)) => assert!(
            matches!(*cause, AuditError::Io { op, .. } if op.starts_with("cut the log back")),
            "{cause}"
        ),
        other => panic!("{other:?}"),
    }
    drop(log);
    // The partial entry is still there; opening sets it aside as a torn tail.
    let log = AuditLog::open(dir.path()).unwrap();
    let torn = log.open_report().torn.clone().unwrap();
    assert_eq!((torn.offset, torn.len, torn.last_good_seq), (len, 25, 3));
    drop(log);
    assert_log_holds(dir.path(), &acknowledged);
}

#[test]
fn a_failed_head_write_keeps_the_entry_and_refuses_further_appends() {
    let dir = tempfile::tempdir().unwrap();
    let (log, faults) = open_faulty(dir.path(), 1);
    let mut acknowledged: Vec<Receipt> = (1..=2).map(|i| log.append(&event(i)).unwrap()).collect();
    faults.set().fail_head = true;
    // The entry itself is durable before the head is written.
    acknowledged.push(log.append(&event(3)).unwrap());
    assert!(matches!(
        log.append(&event(4)),
        Err(AuditError::Poisoned(_))
    ));
    drop(log);
    assert_eq!(Head::read(dir.path().join(HEAD_FILE)).unwrap().seq, 2);
    assert_log_holds(dir.path(), &acknowledged);
    // Reopening verifies against the older head and brings it up to date.
    let log = AuditLog::open(dir.path()).unwrap();
    assert_eq!(Head::read(dir.path().join(HEAD_FILE)).unwrap(), log.head());
}

#[test]
fn concurrent_appenders_through_a_full_disk_lose_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let (log, faults) = open_faulty(dir.path(), 64);
    {
        let mut faults = faults.set();
        faults.write_budget = Some(20_000);
        faults.free_space_after = Some(10);
    }
    let log = Arc::new(log);
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let log = log.clone();
            std::thread::spawn(move || {
                let mut outcomes = Vec::new();
                for i in 0..120 {
                    outcomes.push(log.append(&event(t * 1000 + i)));
                }
                outcomes
            })
        })
        .collect();
    let mut acknowledged = Vec::new();
    let mut failed = 0;
    for thread in threads {
        for outcome in thread.join().unwrap() {
            match outcome {
                Ok(receipt) => acknowledged.push(receipt),
                Err(AuditError::Io { op, source }) => {
                    assert_eq!(
                        (op, source.kind()),
                        ("write the log file", io::ErrorKind::StorageFull)
                    );
                    failed += 1;
                }
                Err(other) => panic!("{other}"),
            }
        }
    }
    acknowledged.sort_by_key(|r| r.seq);
    println!(
        "{} appends acknowledged, {failed} refused by the full disk",
        acknowledged.len()
    );
    assert!(failed > 0);
    // Appends succeeded before the disk filled and after space was freed.
    assert!(acknowledged.len() > 60 && acknowledged.len() + failed == 8 * 120);
    // Exactly the acknowledged entries are in the log, numbered without gaps.
    assert!(
        acknowledged
            .iter()
            .enumerate()
            .all(|(i, r)| r.seq == i as u64 + 1)
    );
    assert_log_holds(dir.path(), &acknowledged);
}

#[test]
fn a_panicking_storage_poisons_the_log_instead_of_hanging_it() {
    let dir = tempfile::tempdir().unwrap();
    let (log, faults) = open_faulty(dir.path(), 1);
    let acknowledged = vec![log.append(&event(1)).unwrap()];
    faults.set().panic_on_append = true;
    let log = Arc::new(log);
    let panicked = {
        let log = log.clone();
        std::thread::spawn(move || log.append(&event(2))).join()
    };
    assert!(panicked.is_err());
    faults.set().panic_on_append = false;
    assert!(matches!(
        log.append(&event(3)),
        Err(AuditError::Poisoned(_))
    ));
    drop(log);
    assert_log_holds(dir.path(), &acknowledged);
}

#[test]
fn a_write_failure_that_drops_deferred_entries_poisons_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let (log, faults) = open_faulty(dir.path(), 1);
    log.append(&event(1)).unwrap();
    log.append_deferred(&[event(2)]).unwrap();
    faults.set().write_budget = Some(0);
    // The round carrying the deferred entry fails: no one waiting on it hears why, so
    // the log refuses everything after.
    assert!(matches!(log.append(&event(3)), Err(AuditError::Io { .. })));
    faults.set().write_budget = None;
    assert!(matches!(
        log.append(&event(4)),
        Err(AuditError::Poisoned(_))
    ));
    drop(log);
    assert_eq!(verify(&dir.path().join(LOG_FILE), None).unwrap().entries, 1);
}
