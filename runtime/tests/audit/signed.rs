//! A signed chain: whoever can write the log's file, but lacks the writer's key, cannot
//! edit, insert or delete an entry and re-hash the rest so that a verifier holding the
//! writer's public key accepts it, with or without a pinned head.

use std::sync::Arc;

use serde_json::{Value, json};
use tooltrust::audit::{
    AuditLog, AuditOptions, Body, FileStorage, GENESIS, LOG_FILE, VerifyErrorKind, Writers, verify,
    verify_signed,
};
use tooltrust::call::Checksum;
use tooltrust::signature::SecretKey;

use crate::audit::common::lines;

fn signed_log(dir: &std::path::Path, key: &Arc<SecretKey>, n: usize) -> Vec<Vec<u8>> {
    let log = AuditLog::open_signed(
        FileStorage::open(dir).unwrap(),
        AuditOptions::default(),
        key.clone(),
    )
    .unwrap();
    for i in 0..n {
        log.append(&json!({"event": "call_allowed", "i": i}))
            .unwrap();
    }
    log.close().unwrap();
    lines(&dir.join(LOG_FILE))
}

/// Re-seals every line from `from` on after the previous line's hash, as someone who can
/// write the file (but holds no writer key) would after editing: `edit` changes fields.
fn reseal(lines: &mut [Vec<u8>], from: usize, key: Option<&SecretKey>, edit: impl Fn(&mut Value)) {
    let mut prev = match from {
        0 => GENESIS,
        _ => hash_of(&lines[from - 1]),
    };
    for line in &mut lines[from..] {
        let mut value: Value = serde_json::from_slice(&line[..line.len() - 1]).unwrap();
        let fields = value.as_object_mut().unwrap();
        let seq = fields["seq"].as_u64().unwrap();
        let ts = fields["ts"].as_str().unwrap().to_owned();
        for reserved in ["seq", "ts", "prev", "hash", "signer", "sig"] {
            fields.remove(reserved);
        }
        edit(&mut value);
        let (sealed, hash) = Body::of(&value)
            .unwrap()
            .seal_signed(seq, ts, &prev, key)
            .unwrap();
        *line = sealed;
        prev = hash;
    }
}

fn hash_of(line: &[u8]) -> Checksum {
    let value: Value = serde_json::from_slice(&line[..line.len() - 1]).unwrap();
    value["hash"].as_str().unwrap().parse().unwrap()
}

#[test]
fn a_rehashed_forgery_fails_against_the_writers_key() {
    let dir = tempfile::tempdir().unwrap();
    let key = Arc::new(SecretKey::generate().unwrap());
    let original = signed_log(&dir.path().join("log"), &key, 6);
    let writers = Writers::new([key.public()]);
    let path = dir.path().join("forged.jsonl");

    std::fs::write(&path, original.concat()).unwrap();
    let report = verify_signed(&path, None, Some(&writers)).unwrap();
    assert_eq!(report.entries, 6);

    let attacker = SecretKey::generate().unwrap();
    // Edited and re-hashed without a key, then with the attacker's own key.
    for key in [None, Some(&attacker)] {
        let mut lines = original.clone();
        reseal(&mut lines, 2, key, |value| value["i"] = json!(99));
        std::fs::write(&path, lines.concat()).unwrap();
        // The hash chain alone cannot tell: the tail was re-hashed.
        assert!(verify(&path, None).is_ok());
        let error = verify_signed(&path, None, Some(&writers)).unwrap_err();
        assert_eq!(error.seq, 3);
        assert!(
            matches!(
                (&error.kind, key),
                (VerifyErrorKind::Unsigned { .. }, None)
                    | (VerifyErrorKind::UnknownSigner { .. }, Some(_))
            ),
            "{error}"
        );
    }

    // Deleting an entry and re-hashing the rest (signatures copied) fails too.
    let mut lines = original.clone();
    lines.remove(1);
    let copied: Vec<Value> = lines[1..]
        .iter()
        .map(|line| serde_json::from_slice(&line[..line.len() - 1]).unwrap())
        .collect();
    let mut prev = hash_of(&lines[0]);
    for (i, mut value) in copied.into_iter().enumerate() {
        let fields = value.as_object_mut().unwrap();
        let sig = fields.remove("sig").unwrap();
        let signer = fields.remove("signer").unwrap();
        let ts = fields.remove("ts").unwrap();
        for reserved in ["seq", "prev", "hash"] {
            fields.remove(reserved);
        }
        let (line, hash) = Body::of(&value)
            .unwrap()
            .seal(i as u64 + 2, ts.as_str().unwrap().to_owned(), &prev)
            .unwrap();
        let mut entry: Value = serde_json::from_slice(&line[..line.len() - 1]).unwrap();
        // The attacker can name the writer and copy its old signature, but the signer is
        // inside the hashed content and the signature covers the old hash.
        entry["sig"] = sig;
        entry["signer"] = signer;
        lines[i + 1] = format!("{}\n", tooltrust::canonical::canonical_json(&entry)).into_bytes();
        prev = hash;
    }
    std::fs::write(&path, lines.concat()).unwrap();
    assert!(verify_signed(&path, None, Some(&writers)).is_err());
}

#[test]
fn a_signature_copied_onto_another_entry_does_not_verify() {
    let dir = tempfile::tempdir().unwrap();
    let key = Arc::new(SecretKey::generate().unwrap());
    let original = signed_log(&dir.path().join("log"), &key, 3);
    let mut lines = original.clone();
    let sig_of = |line: &[u8]| -> Value {
        serde_json::from_slice::<Value>(&line[..line.len() - 1]).unwrap()["sig"].clone()
    };
    let mut last: Value = serde_json::from_slice(&lines[2][..lines[2].len() - 1]).unwrap();
    last["sig"] = sig_of(&lines[1]);
    lines[2] = format!("{}\n", tooltrust::canonical::canonical_json(&last)).into_bytes();
    let path = dir.path().join("copied.jsonl");
    std::fs::write(&path, lines.concat()).unwrap();
    let error = verify_signed(&path, None, Some(&Writers::new([key.public()]))).unwrap_err();
    assert_eq!(error.seq, 3);
    assert!(
        matches!(error.kind, VerifyErrorKind::BadSignature { .. }),
        "{error}"
    );
}

#[test]
fn a_batch_is_signed_once_and_its_last_signature_vouches_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let key = Arc::new(SecretKey::generate().unwrap());
    let log_dir = dir.path().join("log");
    let log = AuditLog::open_signed(
        FileStorage::open(&log_dir).unwrap(),
        AuditOptions::default(),
        key.clone(),
    )
    .unwrap();
    let events: Vec<Value> = (0..4)
        .map(|i| json!({"event": "call_allowed", "i": i}))
        .collect();
    log.append_all(&events).unwrap();
    log.close().unwrap();
    let original = lines(&log_dir.join(LOG_FILE));
    let signed: Vec<bool> = original
        .iter()
        .map(|line| {
            let value: Value = serde_json::from_slice(&line[..line.len() - 1]).unwrap();
            assert!(
                value.get("signer").is_some(),
                "every entry names its writer"
            );
            value.get("sig").is_some()
        })
        .collect();
    assert_eq!(
        signed,
        [false, false, false, true],
        "one signature per durable batch"
    );
    let writers = Writers::new([key.public()]);
    let path = dir.path().join("copy.jsonl");
    std::fs::write(&path, original.concat()).unwrap();
    assert_eq!(
        verify_signed(&path, None, Some(&writers)).unwrap().entries,
        4
    );
    // Cut the signed entry off the end: what is left, no signature vouches for.
    std::fs::write(&path, original[..3].concat()).unwrap();
    assert!(verify(&path, None).is_ok());
    let error = verify_signed(&path, None, Some(&writers)).unwrap_err();
    assert_eq!(error.seq, 1);
    assert!(
        matches!(error.kind, VerifyErrorKind::Unsigned { .. }),
        "{error}"
    );
}

/// Entries appended while the writer was away, naming it but unsigned (anyone can name a
/// public key): a keyed writer that opens the log sets them aside instead of continuing
/// after them, so its next signature does not vouch for them.
#[test]
fn a_reopened_writer_does_not_vouch_for_an_unsigned_tail() {
    let dir = tempfile::tempdir().unwrap();
    let key = Arc::new(SecretKey::generate().unwrap());
    let log_dir = dir.path().join("log");
    let original = signed_log(&log_dir, &key, 3);
    let (forged, hash) = Body::of(&json!({"event": "call_decided", "forged": true}))
        .unwrap()
        .seal_named(
            4,
            "2026-11-29T00:00:00Z".to_owned(),
            &hash_of(&original[2]),
            Some(&key.public()),
        )
        .unwrap();
    std::fs::write(log_dir.join(LOG_FILE), [original.concat(), forged].concat()).unwrap();
    std::fs::write(
        log_dir.join(tooltrust::audit::HEAD_FILE),
        tooltrust::audit::Head { seq: 4, hash }.to_json(),
    )
    .unwrap();

    let log = AuditLog::open_signed(
        FileStorage::open(&log_dir).unwrap(),
        AuditOptions::default(),
        key.clone(),
    )
    .unwrap();
    let set_aside = log
        .open_report()
        .torn
        .clone()
        .expect("the tail is set aside");
    assert_eq!(set_aside.last_good_seq, 3);
    log.append(&json!({"event": "call_allowed", "after": true}))
        .unwrap();
    log.close().unwrap();
    let now = lines(&log_dir.join(LOG_FILE));
    assert_eq!(now.len(), 4);
    assert!(
        now.iter()
            .all(|line| !String::from_utf8_lossy(line).contains("forged")),
        "the forged entry is no longer in the log"
    );
    let writers = Writers::new([key.public()]);
    assert_eq!(
        verify_signed(&log_dir.join(LOG_FILE), None, Some(&writers))
            .unwrap()
            .entries,
        4
    );
}
