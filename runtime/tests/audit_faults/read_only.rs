//! A directory the process may not write to (its test starts a child process).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use std::io;

use crate::common::{assert_log_holds, event};
use tooltrust::audit::{AuditError, AuditLog, HEAD_FILE, LOG_FILE, Receipt, verify};

const READ_ONLY_CHILD: &str = "TOOLTRUST_READ_ONLY_CHILD_DIR";

/// A directory the process may not write to: opening a new log there, or an existing
/// log, fails with a typed error and changes nothing; the log still verifies.
///
/// Root ignores permission bits, so as root the checks run in a copy of this test
/// binary started as the unprivileged user 65534.
#[test]
fn a_read_only_directory_gives_a_typed_error() {
    if let Ok(dir) = std::env::var(READ_ONLY_CHILD) {
        read_only_checks(Path::new(&dir));
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let existing = root.path().join("existing");
    let acknowledged: Vec<Receipt> = {
        let log = AuditLog::open(&existing).unwrap();
        (1..=3).map(|i| log.append(&event(i)).unwrap()).collect()
    };
    std::fs::create_dir(root.path().join("empty")).unwrap();
    let before = std::fs::read(existing.join(LOG_FILE)).unwrap();

    let is_root = std::fs::metadata(root.path()).unwrap().uid() == 0;
    if is_root {
        // Readable and searchable by everyone; writable by root alone. (The log's
        // directory, the log and its head are created readable by their owner only:
        // opened up to be read here.)
        set_mode(root.path(), 0o755);
        set_mode(&existing, 0o755);
        for path in [existing.join(LOG_FILE), existing.join(HEAD_FILE)] {
            set_mode(&path, 0o644);
        }
        let exe = root.path().join("audit_disk");
        std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
        set_mode(&exe, 0o755);
        let run = || {
            Command::new(&exe)
                .args([
                    "read_only::a_read_only_directory_gives_a_typed_error",
                    "--exact",
                    "--nocapture",
                ])
                .env(READ_ONLY_CHILD, root.path())
                .current_dir(root.path())
                .uid(65534)
                .gid(65534)
                .output()
        };
        // A process another test forks while the copy is written holds its descriptor
        // until it starts its own program; until then the copy cannot be run.
        let mut output = run();
        for _ in 0..100 {
            match &output {
                Err(error) if error.kind() == io::ErrorKind::ExecutableFileBusy => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    output = run();
                }
                _ => break,
            }
        }
        let output = output.expect("cannot start the test as user 65534");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && stdout.contains("test result: ok. 1 passed"),
            "read-only checks failed as user 65534:\n{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
    } else {
        for path in [existing.join(LOG_FILE), existing.join(HEAD_FILE)] {
            set_mode(&path, 0o444);
        }
        for dir in [existing.as_path(), &root.path().join("empty")] {
            set_mode(dir, 0o555);
        }
        read_only_checks(root.path());
        for dir in [existing.as_path(), &root.path().join("empty")] {
            set_mode(dir, 0o755);
        }
    }
    assert_eq!(std::fs::read(existing.join(LOG_FILE)).unwrap(), before);
    assert_log_holds(&existing, &acknowledged);
}

fn read_only_checks(root: &Path) {
    let empty = root.join("empty");
    match AuditLog::open(&empty) {
        Err(AuditError::Io { op, source }) => {
            assert_eq!(op, "open the log file");
            assert_eq!(source.kind(), io::ErrorKind::PermissionDenied);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        std::fs::read_dir(&empty).unwrap().count(),
        0,
        "nothing created"
    );

    let existing = root.join("existing");
    match AuditLog::open(&existing) {
        Err(AuditError::Io { source, .. }) => {
            assert_eq!(source.kind(), io::ErrorKind::PermissionDenied);
        }
        other => panic!("{other:?}"),
    }
    // Reading needs no write access.
    assert_eq!(verify(&existing.join(LOG_FILE), None).unwrap().entries, 3);
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}
