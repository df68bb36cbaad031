use std::path::Path;

use super::*;
use crate::audit::{AuditLog, LOG_FILE, verify};
use crate::event::MemoryRecorder;

fn id(text: &str) -> Id {
    Id::new(text).unwrap()
}

fn grant(key: &Id, reader: &Id) -> Grant {
    Grant::new(key, reader, "assigned reviewer")
}

/// Recognisable text followed by random bytes, so that any fragment is unique.
fn secret_output() -> Vec<u8> {
    let mut bytes =
        b"CONFIDENTIAL: wire 9,000 EUR to IBAN DE89 3704 0044 0532 0130 00. ".repeat(20);
    let mut random = [0u8; 1024];
    getrandom::fill(&mut random).unwrap();
    bytes.extend_from_slice(&random);
    bytes
}

/// Every file under `dir`, recursively.
fn all_files(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(all_files(&path));
        } else {
            let bytes = std::fs::read(&path).unwrap();
            out.push((path, bytes));
        }
    }
    out
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

#[test]
fn copies_round_trip_under_a_grant() {
    for durable in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let kek = Kek::generate().unwrap();
        let store = match durable {
            true => EncryptedStore::new(dir.path(), kek),
            false => EncryptedStore::scratch(dir.path(), kek),
        };
        round_trip(&store.unwrap());
    }
}

fn round_trip(store: &EncryptedStore) {
    let (key, target, reader) = (id("out-1"), id("scope-1"), id("reviewer-a"));
    let plaintext = secret_output();
    store.put(&key, &target, &reader, &plaintext).unwrap();
    assert_eq!(
        store
            .open(&key, &target, &reader, &grant(&key, &reader))
            .unwrap(),
        plaintext
    );
    // An empty output is stored too.
    store.put(&key, &target, &id("reviewer-b"), b"").unwrap();
    let empty = store.open(
        &key,
        &target,
        &id("reviewer-b"),
        &grant(&key, &id("reviewer-b")),
    );
    assert_eq!(empty.unwrap(), b"");
}

#[test]
fn no_key_material_or_plaintext_is_written_anywhere() {
    let root = tempfile::tempdir().unwrap();
    let (store_dir, audit_dir) = (root.path().join("store"), root.path().join("audit"));
    let old_kek = [0x5au8; 32].map(|b| b ^ 0x33);
    let new_kek = {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).unwrap();
        bytes
    };
    let store = EncryptedStore::new(&store_dir, Kek::from_bytes(old_kek)).unwrap();
    let log = AuditLog::open(&audit_dir).unwrap();
    let (key, target) = (id("out-7"), id("scope-7"));
    let readers = [
        id("quarantine-custodian"),
        id("reviewer-a"),
        id("reviewer-b"),
    ];
    let plaintext = secret_output();
    let mut data_keys = Vec::new();
    for reader in &readers {
        store.put(&key, &target, reader, &plaintext).unwrap();
        data_keys.push(*store.data_key(&key, &target, reader).unwrap());
        let opened = store
            .open(&key, &target, reader, &grant(&key, reader))
            .unwrap();
        // What the session records for every decryption.
        log.record(&Event::DecryptionGranted {
            key: key.clone(),
            target: target.clone(),
            reader: reader.clone(),
            bytes: opened.len() as u64,
            reason: "assigned reviewer".to_owned(),
        })
        .unwrap();
    }
    assert_eq!(store.rotate_kek(Kek::from_bytes(new_kek), &log).unwrap(), 3);
    for (reader, old) in readers.iter().zip(&data_keys) {
        // Rotation rewraps; the data key itself is unchanged.
        assert_eq!(*store.data_key(&key, &target, reader).unwrap(), *old);
    }
    drop(log);
    assert_eq!(verify(&audit_dir.join(LOG_FILE), None).unwrap().entries, 4);

    let mut secrets: Vec<(String, Vec<u8>)> = vec![
        ("the old KEK".into(), old_kek.to_vec()),
        (
            "the old KEK in hex".into(),
            crate::hex::encode(&old_kek).into_bytes(),
        ),
        ("the new KEK".into(), new_kek.to_vec()),
        (
            "the new KEK in hex".into(),
            crate::hex::encode(&new_kek).into_bytes(),
        ),
    ];
    for (i, data_key) in data_keys.iter().enumerate() {
        secrets.push((format!("data key {i}"), data_key.to_vec()));
        secrets.push((
            format!("data key {i} in hex"),
            crate::hex::encode(data_key).into_bytes(),
        ));
    }
    for (i, chunk) in plaintext.chunks(16).enumerate() {
        secrets.push((format!("plaintext bytes {}..", i * 16), chunk.to_vec()));
    }
    let files = [all_files(&store_dir), all_files(&audit_dir)].concat();
    assert!(files.len() >= 5, "{files:?}");
    for (path, bytes) in &files {
        for (what, secret) in &secrets {
            assert!(!contains(bytes, secret), "{} holds {what}", path.display());
        }
    }
    // The log does hold what it should: ids, sizes and reasons.
    let log_text = std::fs::read_to_string(audit_dir.join(LOG_FILE)).unwrap();
    assert!(log_text.contains(&format!("\"bytes\":{}", plaintext.len())));
    assert!(log_text.contains("\"event\":\"key_rotation\""));
}

#[test]
fn a_copy_opens_only_for_its_own_output_target_reader_and_kek() {
    let dir = tempfile::tempdir().unwrap();
    let kek = [7u8; 32];
    let store = EncryptedStore::new(dir.path(), Kek::from_bytes(kek)).unwrap();
    let (key, target) = (id("out-1"), id("scope-1"));
    let (a, b) = (id("reviewer-a"), id("reviewer-b"));
    store.put(&key, &target, &a, b"for a").unwrap();
    store.put(&key, &target, &b, b"for b").unwrap();

    // A grant for another reader or output does not open this copy.
    assert!(matches!(
        store.open(&key, &target, &a, &grant(&key, &b)),
        Err(QuarantineError::GrantMismatch { .. })
    ));
    assert!(matches!(
        store.open(&key, &target, &a, &grant(&id("out-2"), &a)),
        Err(QuarantineError::GrantMismatch { .. })
    ));
    // Claiming another target scope fails authentication.
    assert!(matches!(
        store.open(&key, &id("scope-2"), &a, &grant(&key, &a)),
        Err(QuarantineError::Tampered { key: k, reader: r }) if k == key && r == a
    ));
    // A's copy moved into B's place does not open for B.
    let path_a = store.path_of(&key, &a);
    let path_b = store.path_of(&key, &b);
    std::fs::copy(&path_a, &path_b).unwrap();
    assert!(matches!(
        store.open(&key, &target, &b, &grant(&key, &b)),
        Err(QuarantineError::Tampered { key: k, reader: r }) if k == key && r == b
    ));
    // Nor under another output key.
    let other = id("out-2");
    std::fs::create_dir_all(dir.path().join("out-2")).unwrap();
    std::fs::copy(&path_a, store.path_of(&other, &a)).unwrap();
    assert!(matches!(
        store.open(&other, &target, &a, &grant(&other, &a)),
        Err(QuarantineError::Tampered { .. })
    ));
    // Another KEK cannot open it, and says so.
    let elsewhere = EncryptedStore::new(dir.path(), Kek::from_bytes([8u8; 32])).unwrap();
    assert!(matches!(
        elsewhere.open(&key, &target, &a, &grant(&key, &a)),
        Err(QuarantineError::WrongKek { key: k, reader: r }) if k == key && r == a
    ));
    // A copy that was never stored.
    assert!(matches!(
        store.open(
            &key,
            &target,
            &id("reviewer-c"),
            &grant(&key, &id("reviewer-c"))
        ),
        Err(QuarantineError::NotFound { .. })
    ));
    assert_eq!(
        store.open(&key, &target, &a, &grant(&key, &a)).unwrap(),
        b"for a"
    );
}

#[test]
fn any_changed_byte_fails_authentication() {
    let dir = tempfile::tempdir().unwrap();
    let store = EncryptedStore::new(dir.path(), Kek::generate().unwrap()).unwrap();
    let (key, target, reader) = (id("out-1"), id("scope-1"), id("reviewer-a"));
    store
        .put(&key, &target, &reader, b"quarantined text")
        .unwrap();
    let path = store.path_of(&key, &reader);
    let original = std::fs::read(&path).unwrap();
    let kek_id = MAGIC.len()..MAGIC.len() + KEK_ID_LEN;
    for at in 0..original.len() {
        let mut changed = original.clone();
        changed[at] ^= 0x01;
        std::fs::write(&path, &changed).unwrap();
        let expected = if kek_id.contains(&at) {
            QuarantineError::WrongKek {
                key: key.clone(),
                reader: reader.clone(),
            }
        } else {
            QuarantineError::Tampered {
                key: key.clone(),
                reader: reader.clone(),
            }
        };
        // The error holds no I/O error here, so its `Debug` form identifies it.
        assert_eq!(
            format!(
                "{:?}",
                store.open(&key, &target, &reader, &grant(&key, &reader))
            ),
            format!("{:?}", Err::<Vec<u8>, _>(expected)),
            "byte {at}"
        );
    }
    for len in [0, 3, 20, original.len() - 1] {
        std::fs::write(&path, &original[..len]).unwrap();
        assert!(matches!(
            store.open(&key, &target, &reader, &grant(&key, &reader)),
            Err(QuarantineError::Tampered { .. })
        ));
    }
}

#[test]
fn rotation_rewraps_every_copy_records_it_and_can_be_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = ([1u8; 32], [2u8; 32]);
    let store = EncryptedStore::new(dir.path(), Kek::from_bytes(old)).unwrap();
    let target = id("scope-1");
    let copies = [
        (id("out-1"), id("r1")),
        (id("out-1"), id("r2")),
        (id("out-2"), id("r1")),
    ];
    for (key, reader) in &copies {
        store
            .put(key, &target, reader, format!("{key}/{reader}").as_bytes())
            .unwrap();
    }
    let recorder = MemoryRecorder::new();
    assert_eq!(
        store.rotate_kek(Kek::from_bytes(new), &recorder).unwrap(),
        3
    );
    assert_eq!(recorder.events(), [Event::KeyRotation { rewrapped: 3 }]);
    for (key, reader) in &copies {
        let opened = store
            .open(key, &target, reader, &grant(key, reader))
            .unwrap();
        assert_eq!(opened, format!("{key}/{reader}").as_bytes());
    }
    // A store still holding the old KEK can no longer read, and resuming the rotation
    // there skips what is already done.
    let stale = EncryptedStore::new(dir.path(), Kek::from_bytes(old)).unwrap();
    let (key, reader) = &copies[0];
    assert!(matches!(
        stale.open(key, &target, reader, &grant(key, reader)),
        Err(QuarantineError::WrongKek { .. })
    ));
    assert_eq!(
        stale.rotate_kek(Kek::from_bytes(new), &recorder).unwrap(),
        0
    );
    assert!(
        stale
            .open(key, &target, reader, &grant(key, reader))
            .is_ok()
    );
    // A copy under a KEK that is neither stops the rotation with a typed error.
    let third = EncryptedStore::new(dir.path(), Kek::from_bytes([3u8; 32])).unwrap();
    third.put(&id("out-3"), &target, &id("r1"), b"x").unwrap();
    assert!(matches!(
        store.rotate_kek(Kek::from_bytes([4u8; 32]), &recorder),
        Err(QuarantineError::WrongKek { .. })
    ));
}

#[test]
fn a_kek_never_shows_in_debug_output() {
    let kek = Kek::from_bytes([0xab; 32]);
    let text = format!("{kek:?}");
    assert_eq!(text, "Kek(<redacted>)");
    let store = EncryptedStore::new(tempfile::tempdir().unwrap().path(), kek).unwrap();
    // The key whole, in any case and with or without separators (a temporary
    // directory's random name could spell a short piece of it).
    let shown = format!("{store:?}").to_lowercase();
    assert!(!shown.contains(&"ab".repeat(32)));
    assert!(!shown.contains(&["ab"; 32].join(", ")));
    assert!(!shown.contains(&["171"; 32].join(", ")));
}
