//! Audit log throughput with durability: every append acknowledged only once it is on disk.
//!
//! 1. One writer: `AuditLog::append` (each returns after its fdatasync) against raw
//!    `write` + `fdatasync` of the very same lines, in the same directory, in the same
//!    round. Goal: at most 1.2x the raw time per entry.
//! 2. The head-file policy: rewritten after every batch, and only on close, against the
//!    default (every 256 entries or one second).
//! 3. Group commit: 8 (and more) concurrent writers against one writer. Each writer
//!    waits for its own sync, so with W writers one sync can cover at most W entries.
//!
//! Every configuration is measured once per round, so all of a round's figures share
//! the machine's state; rows pair them round by round.
//!
//! `cargo bench -p tooltrust --bench audit [-- FILTER]`; `TOOLTRUST_BENCH_ROUNDS`
//! (default 5) sets the rounds and `TOOLTRUST_BENCH_ENTRIES` (default 2000) the entries
//! per measurement.

mod harness;

use std::fs::OpenOptions;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use harness::Goal;
use serde_json::{Value, json};
use tooltrust::audit::{AuditLog, AuditOptions, FileStorage, LOG_FILE, Storage};

/// The head-file policies compared with the default.
fn head_policies() -> [(&'static str, AuditOptions); 2] {
    [
        (
            "audit/append, head file after every batch",
            AuditOptions {
                head_every: 1,
                ..AuditOptions::default()
            },
        ),
        (
            "audit/append, head file only on close",
            AuditOptions {
                head_every: u64::MAX,
                head_interval: Duration::MAX,
                ..AuditOptions::default()
            },
        ),
    ]
}

/// The group-commit configurations compared with one writer, and their goals.
fn group_configs() -> [(&'static str, u64, AuditOptions, Goal); 4] {
    let no_gather = AuditOptions {
        gather: Duration::ZERO,
        ..AuditOptions::default()
    };
    [
        (
            "audit/group commit, 8 writers, no gathering",
            8,
            no_gather,
            Goal::None,
        ),
        (
            "audit/group commit, 8 writers",
            8,
            AuditOptions::default(),
            Goal::AtLeast(10.0),
        ),
        (
            "audit/group commit, 16 writers",
            16,
            AuditOptions::default(),
            Goal::None,
        ),
        (
            "audit/group commit, 64 writers",
            64,
            AuditOptions::default(),
            Goal::None,
        ),
    ]
}

const SINGLE: &str = "audit/append, durable, 1 writer";

fn main() {
    let entries: u64 = std::env::var("TOOLTRUST_BENCH_ENTRIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let rounds = harness::rounds(5);
    let heads: Vec<_> = head_policies()
        .into_iter()
        .filter(|(name, _)| harness::selected(name))
        .collect();
    let groups: Vec<_> = group_configs()
        .into_iter()
        .filter(|(name, ..)| harness::selected(name))
        .collect();
    if !harness::selected(SINGLE) && heads.is_empty() && groups.is_empty() {
        return;
    }
    let root = tempfile::tempdir().unwrap();

    // The CPU cost of an append, without I/O.
    let mut cpu = Vec::new();
    for _ in 0..rounds {
        let log = AuditLog::open_with(NoIo, AuditOptions::default()).unwrap();
        let event = sample_event();
        let start = Instant::now();
        for _ in 0..entries * 10 {
            log.append(&event).unwrap();
        }
        cpu.push(start.elapsed().as_secs_f64() * 1e6 / (entries * 10) as f64);
    }
    cpu.sort_by(f64::total_cmp);
    harness::note(&format!(
        "audit: {entries} entries per measurement, {rounds} rounds; CPU per append without I/O: {:.2} µs (median)",
        cpu[cpu.len() / 2]
    ));
    // The same with a writer key: each entry's hash signed (Ed25519).
    let writer = std::sync::Arc::new(tooltrust::signature::SecretKey::generate().unwrap());
    let mut signed = Vec::new();
    for _ in 0..rounds {
        let log = AuditLog::open_signed(NoIo, AuditOptions::default(), writer.clone()).unwrap();
        let event = sample_event();
        let start = Instant::now();
        for _ in 0..entries * 10 {
            log.append(&event).unwrap();
        }
        signed.push(start.elapsed().as_secs_f64() * 1e6 / (entries * 10) as f64);
    }
    signed.sort_by(f64::total_cmp);
    harness::note(&format!(
        "audit: CPU per signed append without I/O: {:.2} µs (median), {:.2}x the unsigned append",
        signed[signed.len() / 2],
        signed[signed.len() / 2] / cpu[cpu.len() / 2]
    ));

    // Per round: one writer, raw write + fdatasync of its lines, each head policy and
    // each group-commit configuration.
    let mut single_us = Vec::new();
    let mut raw_us = Vec::new();
    let mut single_rates = Vec::new();
    let mut head_rates = vec![Vec::new(); heads.len()];
    let mut group_rates = vec![Vec::new(); groups.len()];
    let mut per_sync = vec![Vec::new(); groups.len()];
    let lines = {
        let dir = root.path().join("lines");
        run_log(&dir, AuditOptions::default(), 1, entries);
        lines_of(&dir.join(LOG_FILE))
    };
    for round in 0..rounds {
        // The log and the raw writes take turns going first.
        let raw_path = root.path().join(format!("raw-{round}"));
        let raw_first = round % 2 == 1;
        let raw = raw_first.then(|| run_raw(&raw_path, &lines));
        let dir = root.path().join(format!("single-{round}"));
        let (elapsed, _) = run_log(&dir, AuditOptions::default(), 1, entries);
        single_us.push(per_entry_us(entries, elapsed));
        single_rates.push(rate(entries, elapsed));
        let raw = raw.unwrap_or_else(|| run_raw(&raw_path, &lines));
        raw_us.push(per_entry_us(entries, raw));
        for (index, (_, options)) in heads.iter().enumerate() {
            let dir = root.path().join(format!("head-{index}-{round}"));
            head_rates[index].push(rate(entries, run_log(&dir, *options, 1, entries).0));
        }
        for (index, (_, writers, options, _)) in groups.iter().enumerate() {
            let dir = root.path().join(format!("group-{index}-{round}"));
            let (elapsed, syncs) = run_log(&dir, *options, *writers, entries);
            group_rates[index].push(rate(entries, elapsed));
            per_sync[index].push(entries as f64 / syncs.max(1) as f64);
        }
    }

    if harness::selected(SINGLE) {
        harness::times(
            SINGLE,
            "write + fdatasync of the same lines",
            "µs/entry",
            Goal::AtMost(1.2),
            &raw_us,
            &single_us,
        )
        .print();
    }
    let default_head = format!(
        "default head policy (every {} entries or {:?})",
        AuditOptions::default().head_every,
        AuditOptions::default().head_interval
    );
    for ((name, _), rates) in heads.iter().zip(&head_rates) {
        harness::throughput(
            name,
            &default_head,
            "entries/s",
            Goal::None,
            &single_rates,
            rates,
        )
        .print();
    }
    for (((name, writers, _, goal), rates), per_sync) in
        groups.iter().zip(&group_rates).zip(&mut per_sync)
    {
        harness::throughput(name, "1 writer", "entries/s", *goal, &single_rates, rates).print();
        per_sync.sort_by(f64::total_cmp);
        harness::note(&format!(
            "{name}: {:.1} entries per sync (median); each writer waits for its own sync, so one sync covers at most {writers}",
            per_sync[per_sync.len() / 2]
        ));
    }
}

/// Appends `entries` events from `writers` threads; returns the time and the syncs.
fn run_log(dir: &Path, options: AuditOptions, writers: u64, entries: u64) -> (Duration, u64) {
    let syncs = Arc::new(AtomicU64::new(0));
    let storage = CountingSyncs {
        inner: FileStorage::open(dir).unwrap(),
        syncs: syncs.clone(),
    };
    let log = AuditLog::open_with(storage, options).unwrap();
    let event = sample_event();
    let start = Instant::now();
    std::thread::scope(|scope| {
        for writer in 0..writers {
            let (log, event) = (&log, &event);
            scope.spawn(move || {
                let mine = entries / writers + u64::from(writer < entries % writers);
                for _ in 0..mine {
                    log.append(event).unwrap();
                }
            });
        }
    });
    let elapsed = start.elapsed();
    drop(log);
    (elapsed, syncs.load(Ordering::Relaxed))
}

/// Writes each line and fdatasyncs it, as the log does for one writer.
fn run_raw(path: &Path, lines: &[Vec<u8>]) -> Duration {
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    let start = Instant::now();
    for line in lines {
        file.write_all(line).unwrap();
        file.sync_data().unwrap();
    }
    start.elapsed()
}

fn sample_event() -> Value {
    json!({
        "event": "call_denied",
        "scope": "4f1c2a9e8b7d6c5f4e3d2c1b0a998877",
        "call": "call_0aF-9c81e2d4b6a8f0e2",
        "tool": "send_email",
        "checksum": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "rule": "tainted-consequential",
        "reason": "a tainted scope may not call a consequential tool without review",
    })
}

fn lines_of(path: &Path) -> Vec<Vec<u8>> {
    let bytes = std::fs::read(path).unwrap();
    bytes
        .split_inclusive(|&b| b == b'\n')
        .map(<[u8]>::to_vec)
        .collect()
}

fn rate(entries: u64, elapsed: Duration) -> f64 {
    entries as f64 / elapsed.as_secs_f64()
}

fn per_entry_us(entries: u64, elapsed: Duration) -> f64 {
    elapsed.as_secs_f64() * 1e6 / entries as f64
}

struct CountingSyncs {
    inner: FileStorage,
    syncs: Arc<AtomicU64>,
}

impl Storage for CountingSyncs {
    fn read_log(&mut self) -> io::Result<Box<dyn Read + '_>> {
        self.inner.read_log()
    }
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.inner.append(bytes)
    }
    fn sync(&mut self) -> io::Result<()> {
        self.syncs.fetch_add(1, Ordering::Relaxed);
        self.inner.sync()
    }
    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.inner.truncate(len)
    }
    fn read_head(&mut self) -> io::Result<Option<Vec<u8>>> {
        self.inner.read_head()
    }
    fn write_head(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.inner.write_head(bytes)
    }
    fn save_torn(&mut self, offset: u64, bytes: &[u8]) -> io::Result<PathBuf> {
        self.inner.save_torn(offset, bytes)
    }
}

/// Storage that keeps nothing: measures the log's own work.
struct NoIo;

impl Storage for NoIo {
    fn read_log(&mut self) -> io::Result<Box<dyn Read + '_>> {
        Ok(Box::new(io::empty()))
    }
    fn append(&mut self, _bytes: &[u8]) -> io::Result<()> {
        Ok(())
    }
    fn sync(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn truncate(&mut self, _len: u64) -> io::Result<()> {
        Ok(())
    }
    fn read_head(&mut self) -> io::Result<Option<Vec<u8>>> {
        Ok(None)
    }
    fn write_head(&mut self, _bytes: &[u8]) -> io::Result<()> {
        Ok(())
    }
    fn save_torn(&mut self, _offset: u64, _bytes: &[u8]) -> io::Result<PathBuf> {
        Ok(PathBuf::new())
    }
}
