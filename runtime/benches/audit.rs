//! Audit log throughput with durability.
//!
//! 1. One writer: `AuditLog::append` (each returns after its fdatasync) against raw
//!    `write` + `fdatasync` of the very same lines, in the same directory, in the same
//!    run (alternating, median of the rounds). Goal: at most 1.2x the raw time.
//! 2. The head-file policy: rewritten after every batch, the default, only on close.
//! 3. Group commit: 8 (and more) concurrent writers against one. Each writer waits for
//!    its own sync, so with W writers one sync can cover at most W entries.
//!
//! `cargo bench -p tooltrust --bench audit`; `TOOLTRUST_BENCH_ENTRIES` (default 2000)
//! sets the entries per measurement.

use std::fs::OpenOptions;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tooltrust::audit::{AuditLog, AuditOptions, FileStorage, LOG_FILE, Storage};

const ROUNDS: usize = 5;

fn main() {
    let entries: u64 = std::env::var("TOOLTRUST_BENCH_ENTRIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let root = tempfile::tempdir().unwrap();
    println!(
        "audit log benchmark: {entries} entries per measurement, in {}",
        root.path().display()
    );

    // 0. The CPU cost of an append, without I/O.
    let mut cpu = Vec::new();
    for _ in 0..ROUNDS {
        let log = AuditLog::open_with(NoIo, AuditOptions::default()).unwrap();
        let event = sample_event();
        let start = Instant::now();
        for _ in 0..entries * 10 {
            log.append(&event).unwrap();
        }
        cpu.push(start.elapsed().as_secs_f64() * 1e6 / (entries * 10) as f64);
    }
    println!("CPU per append without I/O: {:.2} us", median(&mut cpu));

    // 1. One writer against raw write + fdatasync of the same bytes.
    let mut log_rates = Vec::new();
    let mut raw_rates = Vec::new();
    for round in 0..ROUNDS {
        let dir = root.path().join(format!("single-{round}"));
        let (elapsed, _) = run_log(&dir, AuditOptions::default(), 1, entries);
        log_rates.push(rate(entries, elapsed));
        let lines = lines_of(&dir.join(LOG_FILE));
        raw_rates.push(rate(
            entries,
            run_raw(&root.path().join(format!("raw-{round}")), &lines),
        ));
    }
    let (log_rate, raw_rate) = (median(&mut log_rates), median(&mut raw_rates));
    println!(
        "single writer: append {log_rate:.0} entries/s, raw write+fdatasync {raw_rate:.0} entries/s, \
         time ratio {:.3}x (goal <= 1.2x)",
        raw_rate / log_rate
    );

    // 2. The head policy: after every batch, the default, and only on close.
    for (policy, (name, options)) in [
        (
            "head file after every batch",
            AuditOptions {
                head_every: 1,
                ..AuditOptions::default()
            },
        ),
        (
            "head file only on close",
            AuditOptions {
                head_every: u64::MAX,
                head_interval: Duration::MAX,
                ..AuditOptions::default()
            },
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let mut rates = Vec::new();
        for round in 0..ROUNDS {
            let dir = root.path().join(format!("head-{policy}-{round}"));
            rates.push(rate(entries, run_log(&dir, options, 1, entries).0));
        }
        let rate = median(&mut rates);
        println!(
            "{name}: {rate:.0} entries/s (the default, head_every = {}, head_interval = {:?}, \
             is {:.2}x as fast)",
            AuditOptions::default().head_every,
            AuditOptions::default().head_interval,
            log_rate / rate
        );
    }

    // 3. Group commit: configurations interleaved round by round, each compared with a
    //    single writer measured in the same round.
    let no_gather = AuditOptions {
        gather: Duration::ZERO,
        ..AuditOptions::default()
    };
    let configs = [
        ("8 writers, no gathering", 8, no_gather),
        ("8 writers", 8, AuditOptions::default()),
        ("16 writers", 16, AuditOptions::default()),
        ("64 writers", 64, AuditOptions::default()),
    ];
    let mut results = vec![(Vec::new(), Vec::new(), Vec::new()); configs.len()];
    for round in 0..ROUNDS {
        let dir = root.path().join(format!("group-1-{round}"));
        let single = rate(
            entries,
            run_log(&dir, AuditOptions::default(), 1, entries).0,
        );
        for (index, (_, writers, options)) in configs.iter().enumerate() {
            let dir = root.path().join(format!("group-{index}-{round}"));
            let (elapsed, syncs) = run_log(&dir, *options, *writers, entries);
            let (rates, ratios, per_sync) = &mut results[index];
            rates.push(rate(entries, elapsed));
            ratios.push(rate(entries, elapsed) / single);
            per_sync.push(entries as f64 / syncs as f64);
        }
    }
    for ((name, _, _), (rates, ratios, per_sync)) in configs.iter().zip(&mut results) {
        println!(
            "{name}: {:.0} entries/s, {:.1} entries per sync, {:.2}x the single writer{}",
            median(rates),
            median(per_sync),
            median(ratios),
            if *name == "8 writers" {
                " (goal >= 10x; at most 8x: each writer waits for its own sync)"
            } else {
                ""
            }
        );
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

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
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
