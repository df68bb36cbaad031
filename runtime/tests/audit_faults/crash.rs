//! Crash test: a child process (this test binary, in child mode) appends from several
//! threads and prints every acknowledged entry; the parent kills it with SIGKILL at a
//! random moment, then checks that every acknowledged entry is in the log, that the
//! log verifies or ends in exactly one torn tail, and that it reopens and goes on.
//!
//! `TOOLTRUST_CRASH_KILLS` (default 30) and `TOOLTRUST_CRASH_SEED` change the run.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::json;
use tooltrust::audit::{
    AuditLog, AuditOptions, EntryReader, FileStorage, HEAD_FILE, Head, LOG_FILE, Storage,
    VerifyErrorKind, verify,
};

const TEST_NAME: &str = "crash::acknowledged_entries_survive_sigkill";
const CHILD_DIR: &str = "TOOLTRUST_CRASH_CHILD_DIR";
const CHILD_CHUNKED: &str = "TOOLTRUST_CRASH_CHILD_CHUNKED";
const CHILD_THREADS: u64 = 4;

#[test]
fn acknowledged_entries_survive_sigkill() {
    if let Ok(dir) = std::env::var(CHILD_DIR) {
        child(Path::new(&dir), std::env::var_os(CHILD_CHUNKED).is_some());
        return;
    }
    let kills: usize = env_number("TOOLTRUST_CRASH_KILLS", 30);
    let seed: u64 = env_number("TOOLTRUST_CRASH_SEED", 0xc4a5_4000);
    let mut rng = fastrand::Rng::with_seed(seed);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(LOG_FILE);
    let exe = std::env::current_exe().unwrap();

    // Every acknowledged entry so far: seq -> hash.
    let mut acknowledged: BTreeMap<u64, String> = BTreeMap::new();
    let (mut torn_tails, mut killed_before_first_ack) = (0, 0);
    for kill in 0..kills {
        let chunked = kill % 2 == 1;
        let mut command = Command::new(&exe);
        command
            .args([TEST_NAME, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_DIR, dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if chunked {
            command.env(CHILD_CHUNKED, "1");
        }
        let mut child = command.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, acks) = mpsc::channel();
        let reader = std::thread::spawn(move || read_acks(stdout, sender));
        if rng.usize(0..5) == 0 {
            // Sometimes while it opens (and repairs) the log.
            std::thread::sleep(Duration::from_millis(rng.u64(0..60)));
        } else {
            // Otherwise in the middle of appending.
            let first = acks.recv_timeout(Duration::from_secs(60));
            assert!(first.is_ok(), "kill {kill}: the child acknowledged nothing");
            std::thread::sleep(Duration::from_micros(rng.u64(0..40_000)));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        reader.join().unwrap();
        let acks: Vec<(u64, String)> = acks.try_iter().collect();
        if acks.is_empty() {
            killed_before_first_ack += 1;
        }

        // The log verifies, or ends in exactly one torn tail.
        let verified = verify(&path, None);
        let torn = match &verified {
            Ok(_) => None,
            Err(error) => match error.kind {
                VerifyErrorKind::TornTail { offset, len } => Some((offset, len)),
                _ => panic!("kill {kill}: the log does not verify: {error}"),
            },
        };
        // Every acknowledged entry is there, unchanged.
        let on_disk = entries_on_disk(&path);
        for (seq, hash) in acks {
            assert!(
                acknowledged.insert(seq, hash).is_none(),
                "kill {kill}: seq {seq} acknowledged twice"
            );
        }
        for (seq, hash) in &acknowledged {
            assert_eq!(
                on_disk.get(seq),
                Some(hash),
                "kill {kill}: acknowledged entry {seq} is missing or changed"
            );
        }
        // The head file never runs ahead of the log.
        let head_file = Head::read(dir.path().join(HEAD_FILE)).unwrap();
        assert!(head_file.seq <= on_disk.len() as u64, "kill {kill}");
        if head_file.seq > 0 {
            assert_eq!(
                on_disk[&head_file.seq],
                head_file.hash.to_hex(),
                "kill {kill}"
            );
        }

        // Reopening sets the torn tail aside exactly as verify reported it, and the
        // log goes on.
        let log = AuditLog::open(dir.path()).unwrap();
        let report = log.open_report().clone();
        assert_eq!(report.entries, on_disk.len() as u64, "kill {kill}");
        match (torn, &report.torn) {
            (None, None) => {}
            (Some((offset, len)), Some(set_aside)) => {
                assert_eq!(
                    (set_aside.offset, set_aside.len),
                    (offset, len),
                    "kill {kill}"
                );
                torn_tails += 1;
            }
            (expected, found) => panic!("kill {kill}: verify saw {expected:?}, open saw {found:?}"),
        }
        let receipt = log
            .append(&json!({"event": "reopened", "kill": kill}))
            .unwrap();
        assert_eq!(receipt.seq, report.entries + 1);
        acknowledged.insert(receipt.seq, receipt.hash.to_hex());
        let head = log.close().unwrap();
        assert_eq!(verify(&path, Some(&head)).unwrap().entries, receipt.seq);
    }
    println!(
        "crash test (seed {seed:#x}): {kills} SIGKILLs, {} acknowledged entries all present, \
         {torn_tails} torn tails set aside, {killed_before_first_ack} kills before the first ack",
        acknowledged.len()
    );
    assert!(!acknowledged.is_empty());
}

/// Appends from several threads until killed, printing `@ack <seq> <hash>` for every
/// acknowledged entry.
fn child(dir: &Path, chunked: bool) {
    let storage = FileStorage::open(dir).unwrap();
    let log = if chunked {
        AuditLog::open_with(Chunked(storage), AuditOptions::default())
    } else {
        AuditLog::open_with(storage, AuditOptions::default())
    }
    .unwrap();
    // The parent kills the child; the deadline only guards against an orphan.
    let deadline = Instant::now() + Duration::from_secs(30);
    std::thread::scope(|scope| {
        for thread in 0..CHILD_THREADS {
            let log = &log;
            scope.spawn(move || {
                let mut i = 0u64;
                while Instant::now() < deadline {
                    let event = json!({"event": "crash_probe", "thread": thread, "i": i, "pad": "x".repeat((i % 200) as usize)});
                    let receipt = log.append(&event).unwrap();
                    let mut out = io::stdout().lock();
                    if writeln!(out, "@ack {} {}", receipt.seq, receipt.hash)
                        .and_then(|()| out.flush())
                        .is_err()
                    {
                        return; // the parent is gone
                    }
                    i += 1;
                }
            });
        }
    });
}

/// Writes each batch in small, slow pieces, as a kernel may when a process is killed in
/// the middle of a large write, so that kills often leave torn tails.
struct Chunked(FileStorage);

impl Storage for Chunked {
    fn read_log(&mut self) -> io::Result<Box<dyn Read + '_>> {
        self.0.read_log()
    }
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        for piece in bytes.chunks(37) {
            self.0.append(piece)?;
            std::thread::sleep(Duration::from_micros(20));
        }
        Ok(())
    }
    fn sync(&mut self) -> io::Result<()> {
        self.0.sync()
    }
    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.0.truncate(len)
    }
    fn read_head(&mut self) -> io::Result<Option<Vec<u8>>> {
        self.0.read_head()
    }
    fn write_head(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.0.write_head(bytes)
    }
    fn save_torn(&mut self, offset: u64, bytes: &[u8]) -> io::Result<PathBuf> {
        self.0.save_torn(offset, bytes)
    }
}

/// Sends on every complete `@ack` line a child printed before it died.
fn read_acks(stdout: impl Read, acks: mpsc::Sender<(u64, String)>) {
    let mut reader = BufReader::new(stdout);
    let mut line = String::new();
    while reader.read_line(&mut line).unwrap_or(0) > 0 {
        // The test harness may print on the same line first. A line cut by the kill
        // has no newline: that ack was never fully printed.
        if let Some(at) = line.find("@ack ")
            && let Some(rest) = line.get(at + 5..)
            && let Some(rest) = rest.strip_suffix('\n')
            && let Some((seq, hash)) = rest.split_once(' ')
        {
            // The parent stops listening only after the child is dead.
            let _ = acks.send((seq.parse().unwrap(), hash.to_owned()));
        }
        line.clear();
    }
}

/// seq -> hash of every intact entry (stopping at a torn tail).
fn entries_on_disk(path: &Path) -> BTreeMap<u64, String> {
    let reader = EntryReader::new(BufReader::new(File::open(path).unwrap()), None);
    reader
        .map_while(Result::ok)
        .map(|entry| (entry.seq, entry.hash.to_hex()))
        .collect()
}

fn env_number<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}
