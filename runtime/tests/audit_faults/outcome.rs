//! A crash between a call's decision (synced before the tool runs) and its outcome
//! (deferred to the next sync): the child process appends both and is killed before the
//! outcome's sync; the log verifies, reports the call's outcome as unknown, and reopens.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;
use tooltrust::audit::{AuditLog, AuditOptions, FileStorage, LOG_FILE, OutcomeUnknown, verify};

const TEST_NAME: &str = "outcome::a_crash_before_the_outcomes_sync_leaves_it_unknown";
const CHILD_DIR: &str = "TOOLTRUST_OUTCOME_CHILD_DIR";

#[test]
fn a_crash_before_the_outcomes_sync_leaves_it_unknown() {
    if let Ok(dir) = std::env::var(CHILD_DIR) {
        return child(Path::new(&dir));
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([TEST_NAME, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    // The harness prints the test's name on the same line, before the marker.
    let said_ready = stdout
        .lines()
        .any(|line| line.unwrap().ends_with("outcome-deferred"));
    assert!(said_ready, "the child appended its outcome");
    child.kill().unwrap(); // SIGKILL: no destructor syncs the outcome
    child.wait().unwrap();

    let report = verify(&dir.path().join(LOG_FILE), None).unwrap();
    assert_eq!(
        report.entries, 1,
        "the decision is durable, the outcome is not"
    );
    assert_eq!(
        report.outcome_unknown,
        vec![OutcomeUnknown {
            seq: 1,
            call: "c1".into()
        }]
    );
    let log = AuditLog::open(dir.path()).unwrap();
    assert_eq!(
        log.append(&json!({"event": "call_abandoned", "call": "c1"}))
            .unwrap()
            .seq,
        2
    );
}

fn child(dir: &Path) {
    let options = AuditOptions {
        linger: Duration::from_secs(3600),
        ..AuditOptions::default()
    };
    let log = AuditLog::open_with(FileStorage::open(dir).unwrap(), options).unwrap();
    log.append(
        &json!({"event": "call_allowed", "scope": "s", "call": "c1", "tool": "lookup",
        "checksum": "00", "rule": "trusted", "reason": "r"}),
    )
    .unwrap();
    log.append_deferred(&[json!({"event": "call_executed", "call": "c1"})])
        .unwrap();
    println!("outcome-deferred");
    // Wait to be killed.
    std::thread::sleep(Duration::from_secs(600));
}
