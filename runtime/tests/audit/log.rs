//! The audit log's behaviour: chaining, durability bookkeeping, group commit, the head
//! file and recovery when opening.

use crate::audit::common as audit_common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use audit_common::{CountingSyncs, event, lines, receipts};
use serde_json::{Value, json};
use tooltrust::Id;
use tooltrust::audit::{
    AuditError, AuditLog, AuditOptions, EventError, FileStorage, GENESIS, HEAD_FILE, Head,
    LOG_FILE, VerifyErrorKind, verify,
};
use tooltrust::event::{Event, Recorder};

fn every_batch() -> AuditOptions {
    AuditOptions {
        head_every: 1,
        head_interval: Duration::from_secs(3600),
        ..AuditOptions::default()
    }
}

#[test]
fn entries_chain_and_verify() {
    let dir = tempfile::tempdir().unwrap();
    let log = AuditLog::open(dir.path()).unwrap();
    let mut hashes = Vec::new();
    for i in 1..=3 {
        let receipt = log.append(&event(i)).unwrap();
        assert_eq!(receipt.seq, i);
        hashes.push(receipt.hash);
    }
    assert_eq!(
        log.head(),
        Head {
            seq: 3,
            hash: hashes[2]
        }
    );
    let path = dir.path().join(LOG_FILE);
    let report = verify(&path, Some(&log.head())).unwrap();
    assert_eq!(report.entries, 3);
    assert_eq!(report.head, log.head());

    let lines = lines(&path);
    assert_eq!(lines.len(), 3);
    let mut prev = GENESIS.to_hex();
    for (i, line) in lines.iter().enumerate() {
        let text = std::str::from_utf8(line).unwrap();
        let value = tooltrust::canonical::parse_strict(text.trim_end_matches('\n')).unwrap();
        // Each line is exactly the canonical form of its entry.
        assert_eq!(
            format!("{}\n", tooltrust::canonical::canonical_json(&value)),
            text
        );
        assert_eq!(value["prev"], json!(prev));
        assert_eq!(value["hash"], json!(hashes[i].to_hex()));
        assert_eq!(value["event"], json!("call_denied"));
        assert_eq!(value["n"], json!(i + 1));
        let ts = value["ts"].as_str().unwrap();
        let parsed =
            time::OffsetDateTime::parse(ts, &time::format_description::well_known::Rfc3339)
                .unwrap();
        assert_eq!(parsed.offset(), time::UtcOffset::UTC);
        assert!(ts.ends_with('Z'), "{ts}");
        prev = hashes[i].to_hex();
    }
}

#[test]
fn reopening_continues_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let first = {
        let log = AuditLog::open(dir.path()).unwrap();
        log.append(&event(1)).unwrap();
        log.append(&event(2)).unwrap();
        log.head()
    };
    let log = AuditLog::open(dir.path()).unwrap();
    assert_eq!(log.open_report().entries, 2);
    assert_eq!(log.open_report().head, first);
    assert_eq!(log.open_report().torn, None);
    let receipt = log.append(&event(3)).unwrap();
    assert_eq!(receipt.seq, 3);
    drop(log);
    let path = dir.path().join(LOG_FILE);
    // The old head still pins the first two entries of the longer log.
    assert_eq!(verify(&path, Some(&first)).unwrap().entries, 3);
    assert_eq!(
        verify(&path, None).unwrap().head,
        Head {
            seq: 3,
            hash: receipt.hash
        }
    );
}

#[test]
fn refused_events_write_nothing_and_take_no_seq() {
    let dir = tempfile::tempdir().unwrap();
    let log = AuditLog::open(dir.path()).unwrap();
    log.append(&event(1)).unwrap();
    let before = std::fs::read(dir.path().join(LOG_FILE)).unwrap();
    type Check = fn(&EventError) -> bool;
    let refused: [(Value, Check); 5] = [
        (json!("text"), |e| matches!(e, EventError::NotAnObject(_))),
        (json!({"tool": "x"}), |e| {
            matches!(e, EventError::MissingType)
        }),
        (json!({"event": ["x"]}), |e| {
            matches!(e, EventError::TypeNotAString(_))
        }),
        (json!({"event": "x", "seq": 9}), |e| {
            matches!(e, EventError::ReservedField("seq"))
        }),
        (json!({"event": "x", "hash": "h"}), |e| {
            matches!(e, EventError::ReservedField("hash"))
        }),
    ];
    for (bad, expected) in refused {
        match log.append(&bad) {
            Err(AuditError::Event(error)) => assert!(expected(&error), "{bad}: {error}"),
            other => panic!("{bad}: {other:?}"),
        }
    }
    assert_eq!(std::fs::read(dir.path().join(LOG_FILE)).unwrap(), before);
    assert_eq!(log.append(&event(2)).unwrap().seq, 2);
}

#[test]
fn concurrent_appends_are_batched_ordered_and_all_acknowledged() {
    const THREADS: u64 = 8;
    const EACH: u64 = 150;
    let dir = tempfile::tempdir().unwrap();
    let syncs = Arc::new(AtomicUsize::new(0));
    let storage = CountingSyncs {
        inner: FileStorage::open(dir.path()).unwrap(),
        syncs: syncs.clone(),
    };
    let log = Arc::new(AuditLog::open_with(storage, AuditOptions::default()).unwrap());
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let log = log.clone();
            std::thread::spawn(move || {
                (0..EACH)
                    .map(|i| {
                        let receipt = log.append(&event(t * 1000 + i)).unwrap();
                        // Acknowledged means covered by a completed sync.
                        assert!(log.head().seq >= receipt.seq);
                        receipt
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut acknowledged = Vec::new();
    for handle in handles {
        let receipts = handle.join().unwrap();
        // One thread's appends take increasing seqs.
        assert!(receipts.windows(2).all(|w| w[0].seq < w[1].seq));
        acknowledged.extend(receipts);
    }
    let total = THREADS * EACH;
    let seqs: BTreeSet<u64> = acknowledged.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, (1..=total).collect());
    let path = dir.path().join(LOG_FILE);
    assert_eq!(verify(&path, Some(&log.head())).unwrap().entries, total);
    let on_disk = receipts(&path);
    for receipt in &acknowledged {
        assert_eq!(on_disk[receipt.seq as usize - 1].1, receipt.hash.to_hex());
    }
    let syncs = syncs.load(Ordering::SeqCst);
    println!("{total} appends from {THREADS} threads took {syncs} syncs");
    assert!(syncs < total as usize, "no batching: {syncs} syncs");
}

#[test]
fn the_head_file_follows_the_policy_and_is_current_after_close() {
    let dir = tempfile::tempdir().unwrap();
    let head_file = dir.path().join(HEAD_FILE);
    {
        let log =
            AuditLog::open_with(FileStorage::open(dir.path()).unwrap(), every_batch()).unwrap();
        assert_eq!(Head::read(&head_file).unwrap(), Head::EMPTY);
        for i in 1..=3 {
            log.append(&event(i)).unwrap();
            assert_eq!(Head::read(&head_file).unwrap(), log.head());
        }
    }
    let lazy = AuditOptions {
        head_every: 5,
        head_interval: Duration::from_secs(3600),
        ..AuditOptions::default()
    };
    let log = AuditLog::open_with(FileStorage::open(dir.path()).unwrap(), lazy).unwrap();
    for i in 4..=7 {
        log.append(&event(i)).unwrap();
    }
    assert_eq!(
        Head::read(&head_file).unwrap().seq,
        3,
        "4 entries < head_every"
    );
    log.append(&event(8)).unwrap();
    assert_eq!(Head::read(&head_file).unwrap().seq, 8);
    log.append(&event(9)).unwrap();
    assert_eq!(Head::read(&head_file).unwrap().seq, 8);
    assert_eq!(log.sync_head().unwrap().seq, 9);
    assert_eq!(Head::read(&head_file).unwrap(), log.head());
    log.append(&event(10)).unwrap();
    let head = log.head();
    assert_eq!(log.close().unwrap(), head);
    assert_eq!(Head::read(&head_file).unwrap(), head);
}

#[test]
fn a_torn_tail_is_reported_and_set_aside_when_opening() {
    for torn in [
        &b"{\"event\":\"call_den"[..],
        b"garbage",
        b"{\"event\":\"x\"} ",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOG_FILE);
        let head = {
            let log = AuditLog::open(dir.path()).unwrap();
            for i in 1..=3 {
                log.append(&event(i)).unwrap();
            }
            log.head()
        };
        let good_len = std::fs::metadata(&path).unwrap().len();
        append_bytes(&path, torn);
        let error = verify(&path, Some(&head)).unwrap_err();
        assert_eq!(error.seq, 4);
        assert!(
            matches!(error.kind, VerifyErrorKind::TornTail { offset, len }
                if offset == good_len && len == torn.len() as u64),
            "{error}"
        );

        let log = AuditLog::open(dir.path()).unwrap();
        let report = log.open_report().clone();
        assert_eq!(report.entries, 3);
        let set_aside = report.torn.expect("torn tail reported");
        assert_eq!(set_aside.offset, good_len);
        assert_eq!(set_aside.len, torn.len() as u64);
        assert_eq!(set_aside.last_good_seq, 3);
        assert_eq!(std::fs::read(&set_aside.saved_to).unwrap(), torn);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), good_len);
        assert_eq!(log.append(&event(4)).unwrap().seq, 4);
        drop(log);
        assert_eq!(verify(&path, Some(&head)).unwrap().entries, 4);
    }
}

/// A crash cuts a write short; it never completes a line with other bytes. So a complete
/// bad last line is damage, not a crash's leftover, and is never set aside quietly.
#[test]
fn a_complete_bad_last_line_is_damage_not_a_torn_tail() {
    for bad in [&b"garbage\n"[..], b"\n", b"{\"event\":\"x\"} \n"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOG_FILE);
        let head = {
            let log = AuditLog::open(dir.path()).unwrap();
            for i in 1..=3 {
                log.append(&event(i)).unwrap();
            }
            log.close().unwrap()
        };
        append_bytes(&path, bad);
        let error = verify(&path, Some(&head)).unwrap_err();
        assert_eq!(error.seq, 4);
        assert!(
            !matches!(error.kind, VerifyErrorKind::TornTail { .. }),
            "{:?}",
            error.kind
        );
        assert!(
            AuditLog::open(dir.path()).is_err(),
            "a damaged log refuses to open"
        );
    }
    // A tampered last entry (complete, canonical shape, wrong hash or bytes) likewise.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(LOG_FILE);
    let log = AuditLog::open(dir.path()).unwrap();
    for i in 1..=3 {
        log.append(&event(i)).unwrap();
    }
    drop(log);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replacen("\"n\":3", "\"n\":4", 1)).unwrap();
    assert!(AuditLog::open(dir.path()).is_err());
    assert!(!matches!(
        verify(&path, None).unwrap_err().kind,
        VerifyErrorKind::TornTail { .. }
    ));
}

#[test]
fn a_torn_tail_twice_at_the_same_offset_keeps_both_copies() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(LOG_FILE);
    drop(AuditLog::open(dir.path()).unwrap());
    append_bytes(&path, b"first");
    let first = AuditLog::open(dir.path()).unwrap().open_report().clone();
    append_bytes(&path, b"second");
    let second = AuditLog::open(dir.path()).unwrap().open_report().clone();
    let (first, second) = (first.torn.unwrap(), second.torn.unwrap());
    assert_eq!((first.offset, second.offset), (0, 0));
    assert_ne!(first.saved_to, second.saved_to);
    assert_eq!(std::fs::read(first.saved_to).unwrap(), b"first");
    assert_eq!(std::fs::read(second.saved_to).unwrap(), b"second");
}

#[test]
fn a_bad_entry_that_a_crash_cannot_explain_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(LOG_FILE);
    drop(write_entries(dir.path(), 5));
    let original = lines(&path);

    // A changed entry before the tail.
    let mut changed = original.clone();
    changed[1] = String::from_utf8(changed[1].clone())
        .unwrap()
        .replace("rule 2", "rule X")
        .into_bytes();
    std::fs::write(&path, changed.concat()).unwrap();
    let error = AuditLog::open(dir.path()).unwrap_err();
    assert!(
        matches!(&error, AuditError::Corrupt(e) if e.seq == 2 && matches!(e.kind, VerifyErrorKind::HashMismatch { .. })),
        "{error}"
    );

    // A changed last entry that is still canonical JSON: not a torn write.
    let mut changed = original.clone();
    changed[4] = String::from_utf8(changed[4].clone())
        .unwrap()
        .replace("rule 5", "rule X")
        .into_bytes();
    std::fs::write(&path, changed.concat()).unwrap();
    let error = AuditLog::open(dir.path()).unwrap_err();
    assert!(
        matches!(&error, AuditError::Corrupt(e) if e.seq == 5),
        "{error}"
    );

    // A garbage line followed by more lines.
    let mut changed = original.clone();
    changed.insert(3, b"garbage\n".to_vec());
    std::fs::write(&path, changed.concat()).unwrap();
    let error = AuditLog::open(dir.path()).unwrap_err();
    assert!(
        matches!(&error, AuditError::Corrupt(e) if e.seq == 4 && matches!(e.kind, VerifyErrorKind::Malformed { .. })),
        "{error}"
    );
    // Nothing was set aside or cut.
    assert_eq!(std::fs::read(&path).unwrap(), changed.concat());
}

#[test]
fn a_log_shorter_than_its_head_file_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(LOG_FILE);
    let head = write_entries(dir.path(), 5).close().unwrap();
    let kept = lines(&path)[..3].concat();
    std::fs::write(&path, &kept).unwrap();
    let error = AuditLog::open(dir.path()).unwrap_err();
    assert!(
        matches!(&error, AuditError::Corrupt(e) if e.seq == 4
            && matches!(e.kind, VerifyErrorKind::Truncated { last: 3, head_seq } if head_seq == head.seq)),
        "{error}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), kept);
}

#[test]
fn a_log_without_its_head_file_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    drop(write_entries(dir.path(), 2));
    std::fs::remove_file(dir.path().join(HEAD_FILE)).unwrap();
    assert!(matches!(
        AuditLog::open(dir.path()),
        Err(AuditError::HeadMissing)
    ));
    std::fs::write(dir.path().join(HEAD_FILE), "not a head").unwrap();
    assert!(matches!(
        AuditLog::open(dir.path()),
        Err(AuditError::Head(_))
    ));
}

#[test]
fn a_second_handle_on_the_same_log_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log = AuditLog::open(dir.path()).unwrap();
    assert!(matches!(
        AuditLog::open(dir.path()),
        Err(AuditError::Locked(_))
    ));
    drop(log);
    assert!(AuditLog::open(dir.path()).is_ok());
}

#[test]
fn the_log_records_session_events() {
    let dir = tempfile::tempdir().unwrap();
    let log = AuditLog::open(dir.path()).unwrap();
    let scope = Id::new("scope-1").unwrap();
    let events = [
        Event::TaintAssigned {
            scope: scope.clone(),
            block: Id::new("block-1").unwrap(),
            source: "tool:fetch_page".to_owned(),
        },
        Event::OutputQuarantined {
            scope,
            key: Id::new("out-1").unwrap(),
            bytes: 42,
            exit: "success".to_owned(),
        },
        Event::KeyRotation { rewrapped: 3 },
    ];
    for event in &events {
        log.record(event).unwrap();
    }
    let path = dir.path().join(LOG_FILE);
    assert_eq!(verify(&path, Some(&log.head())).unwrap().entries, 3);
    let kinds: Vec<String> = lines(&path)
        .iter()
        .map(|line| {
            serde_json::from_slice::<Value>(line).unwrap()["event"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        kinds,
        ["taint_assigned", "output_quarantined", "key_rotation"]
    );
}

fn write_entries(dir: &std::path::Path, n: u64) -> AuditLog {
    let log = AuditLog::open_with(FileStorage::open(dir).unwrap(), every_batch()).unwrap();
    for i in 1..=n {
        log.append(&event(i)).unwrap();
    }
    log
}

fn append_bytes(path: &std::path::Path, bytes: &[u8]) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    file.write_all(bytes).unwrap();
}

#[test]
fn the_log_is_shared_across_threads() {
    fn shareable<T: Send + Sync>() {}
    shareable::<AuditLog>();
    let dir = tempfile::tempdir().unwrap();
    let log: Arc<dyn Recorder> = Arc::new(AuditLog::open(dir.path()).unwrap());
    log.record(&Event::KeyRotation { rewrapped: 0 }).unwrap();
}

/// The log and its head hold what only their owner should read: both are created with
/// mode 0600, whatever the process's umask lets through.
#[cfg(unix)]
#[test]
fn the_log_and_its_head_are_readable_by_their_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let log = AuditLog::open_with(FileStorage::open(dir.path()).unwrap(), every_batch()).unwrap();
    log.append(&event(1)).unwrap();
    drop(log);
    for name in [LOG_FILE, HEAD_FILE] {
        let mode = std::fs::metadata(dir.path().join(name))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{name}: {mode:o}");
    }
}
