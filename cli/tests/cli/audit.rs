//! `tooltrust audit verify` and `tooltrust audit show`, run as a user would.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::json;
use tooltrust::audit::{AuditLog, HEAD_FILE, Head, LOG_FILE};

fn tooltrust(args: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tooltrust"))
        .args(args)
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

/// A log of three entries; returns its head.
fn make_log(dir: &Path) -> Head {
    let log = AuditLog::open(dir).unwrap();
    log.append(&json!({"event": "call_allowed", "tool": "fetch_page", "reason": "read-only"}))
        .unwrap();
    log.append(&json!({"event": "call_denied", "tool": "send_email", "reason": "tainted scope"}))
        .unwrap();
    log.append(&json!({"event": "output_quarantined", "key": "out-1", "bytes": 42}))
        .unwrap();
    log.close().unwrap()
}

#[test]
fn verify_reports_an_intact_log() {
    let dir = tempfile::tempdir().unwrap();
    let head = make_log(dir.path());
    let file = dir.path().join(LOG_FILE);
    let expected = format!("ok: 3 entries, head {}\n", head.hash);

    let output = tooltrust(&["audit".as_ref(), "verify".as_ref(), &file]);
    assert!(output.status.success());
    assert_eq!(stdout(&output), expected);

    let head_file = dir.path().join(HEAD_FILE);
    let output = tooltrust(&[
        "audit".as_ref(),
        "verify".as_ref(),
        &file,
        "--head".as_ref(),
        &head_file,
    ]);
    assert!(output.status.success());
    assert_eq!(stdout(&output), expected);
}

#[test]
fn verify_names_the_first_bad_seq() {
    let dir = tempfile::tempdir().unwrap();
    make_log(dir.path());
    let file = dir.path().join(LOG_FILE);
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replace("tainted scope", "tainted scopf")).unwrap();

    let output = tooltrust(&["audit".as_ref(), "verify".as_ref(), &file]);
    assert_eq!(output.status.code(), Some(1));
    let printed = stdout(&output);
    assert!(
        printed.starts_with("FAILED: first bad seq 2: "),
        "{printed}"
    );
    assert!(printed.contains("was changed"), "{printed}");
}

#[test]
fn verify_detects_truncation_against_the_head_beside_the_log_or_a_pinned_one() {
    let dir = tempfile::tempdir().unwrap();
    make_log(dir.path());
    let file = dir.path().join(LOG_FILE);
    let beside = dir.path().join(HEAD_FILE);
    let pinned = dir.path().join("pinned.head");
    std::fs::copy(&beside, &pinned).unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    let two_lines: String = text.split_inclusive('\n').take(2).collect();
    std::fs::write(&file, two_lines).unwrap();

    // The head the log keeps beside it catches the cut without any flag.
    let alone = tooltrust(&["audit".as_ref(), "verify".as_ref(), &file]);
    assert_eq!(alone.status.code(), Some(1));
    assert!(
        stdout(&alone).starts_with("FAILED: first bad seq 3: truncated"),
        "{}",
        stdout(&alone)
    );
    let shown = tooltrust(&["audit".as_ref(), "show".as_ref(), &file]);
    assert_eq!(shown.status.code(), Some(1));
    assert!(stdout(&shown).contains("FAILED: first bad seq 3: truncated"));

    // An attacker who also removes the head file leaves a valid shorter log: only a
    // head pinned elsewhere still catches it.
    std::fs::remove_file(&beside).unwrap();
    let alone = tooltrust(&["audit".as_ref(), "verify".as_ref(), &file]);
    assert!(alone.status.success());
    assert!(stdout(&alone).starts_with("ok: 2 entries"));
    let pinned = tooltrust(&[
        "audit".as_ref(),
        "verify".as_ref(),
        &file,
        "--head".as_ref(),
        &pinned,
    ]);
    assert_eq!(pinned.status.code(), Some(1));
    assert!(
        stdout(&pinned).starts_with("FAILED: first bad seq 3: truncated"),
        "{}",
        stdout(&pinned)
    );
}

#[test]
fn verify_checks_both_the_pinned_head_and_the_one_beside_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = AuditLog::open(dir.path()).unwrap();
    log.append(&json!({"event": "call_allowed", "tool": "fetch_page"}))
        .unwrap();
    let early = dir.path().join("early.head");
    std::fs::copy(dir.path().join(HEAD_FILE), &early).unwrap();
    log.append(&json!({"event": "call_denied", "tool": "send_email"}))
        .unwrap();
    log.close().unwrap();
    let file = dir.path().join(LOG_FILE);
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.split_inclusive('\n').next().unwrap()).unwrap();

    // The early pinned head still holds; the head beside the log does not.
    let output = tooltrust(&[
        "audit".as_ref(),
        "verify".as_ref(),
        &file,
        "--head".as_ref(),
        &early,
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    assert!(stdout(&output).starts_with("FAILED: first bad seq 2: truncated"));
}

#[test]
fn verify_refuses_a_missing_log_or_a_bad_head_file() {
    let dir = tempfile::tempdir().unwrap();
    make_log(dir.path());
    let missing = dir.path().join("nope.jsonl");
    let output = tooltrust(&["audit".as_ref(), "verify".as_ref(), &missing]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("cannot read"));

    let bad_head = dir.path().join("bad.head");
    std::fs::write(&bad_head, "seq 3").unwrap();
    let file = dir.path().join(LOG_FILE);
    let output = tooltrust(&[
        "audit".as_ref(),
        "verify".as_ref(),
        &file,
        "--head".as_ref(),
        &bad_head,
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("not a head record"));
}

#[test]
fn show_prints_entries_for_a_human_with_outsider_text_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let head = {
        let log = AuditLog::open(dir.path()).unwrap();
        log.append(&json!({"event": "call_denied", "tool": "send_email", "reason": "tainted"}))
            .unwrap();
        log.append(
            &json!({"event": "unknown_tool_rendered", "tool": "x\u{1b}[2J\u{9b}31m\u{202e}"}),
        )
        .unwrap();
        log.close().unwrap()
    };
    let file = dir.path().join(LOG_FILE);
    let output = tooltrust(&["audit".as_ref(), "show".as_ref(), &file]);
    assert!(output.status.success());
    let printed = stdout(&output);
    assert!(printed.contains("#1  "), "{printed}");
    assert!(printed.contains("call_denied\n"), "{printed}");
    assert!(printed.contains("    reason  \"tainted\"\n"), "{printed}");
    assert!(printed.contains("#2  "), "{printed}");
    assert!(
        printed.contains(r#""x\u001b[2J\u009b31m\u202e""#),
        "{printed}"
    );
    assert!(
        !printed.contains(['\u{1b}', '\u{9b}', '\u{202e}']),
        "{printed}"
    );
    assert!(
        printed.ends_with(&format!("ok: 2 entries, head {}\n", head.hash)),
        "{printed}"
    );

    // A damaged log shows what is intact, then why it stops.
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, &text[..text.len() - 5]).unwrap();
    let output = tooltrust(&["audit".as_ref(), "show".as_ref(), &file]);
    assert_eq!(output.status.code(), Some(1));
    let printed = stdout(&output);
    assert!(
        printed.contains("#1  ") && !printed.contains("#2  "),
        "{printed}"
    );
    assert!(
        printed.contains("FAILED: first bad seq 2: torn tail"),
        "{printed}"
    );
}
