//! One sync per call: a call's decision is durable before the tool runs, and its outcome
//! joins the next decision's sync (or the log's flusher, after `linger`).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tooltrust::audit::{AuditLog, AuditOptions, FileStorage, LOG_FILE, verify};
use tooltrust::{Id, Registry, Session, ToolCall, tool};

use crate::audit::common::{CountingSyncs, event};

/// Looks a word up.
#[tool(trusted, read_only)]
fn lookup(word: String) -> String {
    format!("{word}: a word")
}

fn open_counting(dir: &Path, linger: Duration) -> (AuditLog, Arc<AtomicUsize>) {
    let syncs = Arc::new(AtomicUsize::new(0));
    let storage = CountingSyncs {
        inner: FileStorage::open(dir).unwrap(),
        syncs: syncs.clone(),
    };
    let options = AuditOptions {
        linger,
        ..AuditOptions::default()
    };
    (AuditLog::open_with(storage, options).unwrap(), syncs)
}

fn entries_named(dir: &Path, name: &str) -> usize {
    std::fs::read_to_string(dir.join(LOG_FILE))
        .unwrap()
        .lines()
        .filter(|line| line.contains(&format!("\"event\":\"{name}\"")))
        .count()
}

#[test]
fn a_call_costs_one_sync_its_decisions() {
    let dir = tempfile::tempdir().unwrap();
    // The flusher never fires during the test: only decisions sync.
    let (log, syncs) = open_counting(dir.path(), Duration::from_secs(3600));
    let log = Arc::new(log);
    let session = Session::builder(Registry::new([Box::new(Lookup) as _]).unwrap())
        .recorder(log.clone())
        .build()
        .unwrap();
    let scope = session.open_scope(Id::new("agent").unwrap()).unwrap();
    let before = syncs.load(Ordering::SeqCst);
    for word in ["ant", "bee", "cat"] {
        let call = ToolCall::from_model("lookup", &format!(r#"{{"word":"{word}"}}"#)).unwrap();
        let outcome = pollster::block_on(scope.call(call)).unwrap();
        assert!(
            matches!(outcome, tooltrust::CallOutcome::Ran { .. }),
            "{outcome:?}"
        );
    }
    assert_eq!(
        syncs.load(Ordering::SeqCst) - before,
        3,
        "three calls, three decisions synced; their outcomes rode along"
    );
    // Each outcome before the last was carried by the next decision's sync.
    assert_eq!(entries_named(dir.path(), "call_allowed"), 3);
    assert_eq!(entries_named(dir.path(), "call_executed"), 2);

    // Closing syncs the last one.
    drop(scope);
    drop(session);
    let log = Arc::into_inner(log).expect("the session let go of the log");
    log.close().unwrap();
    assert_eq!(entries_named(dir.path(), "call_executed"), 3);
    let report = verify(&dir.path().join(LOG_FILE), None).unwrap();
    assert_eq!(
        report.outcome_unknown,
        vec![],
        "every call's outcome is there"
    );
}

#[test]
fn a_lone_deferred_entry_is_synced_by_the_flusher() {
    let dir = tempfile::tempdir().unwrap();
    let (log, syncs) = open_counting(dir.path(), Duration::from_millis(1));
    let receipts = log.append_deferred(&[event(1)]).unwrap();
    assert_eq!(receipts[0].seq, 1);
    let deadline = Instant::now() + Duration::from_secs(60);
    while log.head().seq < 1 {
        assert!(Instant::now() < deadline, "the flusher never synced it");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(syncs.load(Ordering::SeqCst), 1);
    assert_eq!(verify(&dir.path().join(LOG_FILE), None).unwrap().entries, 1);
}

#[test]
fn deferred_entries_an_append_carries_cost_the_flusher_no_sync() {
    let dir = tempfile::tempdir().unwrap();
    let linger = Duration::from_millis(100);
    let (log, syncs) = open_counting(dir.path(), linger);
    // A stream of calls for several times `linger`: each outcome waits most of a
    // cycle for the next decision, well within `linger`, so the flusher, whose
    // deadline falls inside some outcome's wait, has nothing of its own to sync.
    let start = Instant::now();
    let mut decisions = 0;
    let mut seq = 0;
    while start.elapsed() < linger * 4 {
        seq += 1;
        log.append_deferred(&[event(seq)]).unwrap();
        std::thread::sleep(Duration::from_millis(9));
        seq += 1;
        log.append(&event(seq)).unwrap();
        decisions += 1;
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        syncs.load(Ordering::SeqCst),
        decisions,
        "one sync per decision; the outcomes rode along"
    );
    // A last outcome no append carries is still synced by the flusher.
    seq += 1;
    log.append_deferred(&[event(seq)]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while log.head().seq < seq {
        assert!(Instant::now() < deadline, "the flusher never synced it");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(syncs.load(Ordering::SeqCst), decisions + 1);
    drop(log);
    assert_eq!(
        verify(&dir.path().join(LOG_FILE), None).unwrap().entries,
        seq
    );
}

#[test]
fn an_append_after_deferred_entries_follows_them_in_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let (log, syncs) = open_counting(dir.path(), Duration::from_secs(3600));
    log.append_deferred(&[event(1), event(2)]).unwrap();
    let receipt = log.append(&event(3)).unwrap();
    assert_eq!(receipt.seq, 3);
    assert_eq!(syncs.load(Ordering::SeqCst), 1, "one sync for all three");
    assert_eq!(log.head().seq, 3);
    drop(log);
    assert_eq!(verify(&dir.path().join(LOG_FILE), None).unwrap().entries, 3);
}

#[test]
fn a_decision_without_its_outcome_is_reported_not_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log = AuditLog::open(dir.path()).unwrap();
    let allowed = |call: &str| {
        serde_json::json!({"event": "call_allowed", "scope": "s", "call": call, "tool": "lookup",
            "checksum": "00", "rule": "trusted", "reason": "r"})
    };
    log.append(&allowed("c1")).unwrap();
    log.append(&serde_json::json!({"event": "call_executed", "call": "c1"}))
        .unwrap();
    log.append(&allowed("c2")).unwrap();
    drop(log);
    let report = verify(&dir.path().join(LOG_FILE), None).unwrap();
    assert_eq!(report.entries, 3);
    assert_eq!(
        report.outcome_unknown,
        vec![tooltrust::audit::OutcomeUnknown {
            seq: 3,
            call: "c2".into()
        }]
    );
}
