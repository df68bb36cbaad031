//! Helpers shared by the audit tests.
#![allow(dead_code)]

use std::path::Path;

use serde_json::{Value, json};

/// A small event whose fields vary with `i`.
pub fn event(i: u64) -> Value {
    json!({"event": "call_denied", "tool": "send_email", "n": i, "reason": format!("rule {i}")})
}

/// The log file's lines, each with its newline.
pub fn lines(path: &Path) -> Vec<Vec<u8>> {
    let bytes = std::fs::read(path).unwrap();
    bytes
        .split_inclusive(|&b| b == b'\n')
        .map(<[u8]>::to_vec)
        .collect()
}

/// The `seq` and `hash` of every line of a log that verifies.
pub fn receipts(path: &Path) -> Vec<(u64, String)> {
    lines(path)
        .iter()
        .map(|line| {
            let value: Value = serde_json::from_slice(line).unwrap();
            (
                value["seq"].as_u64().unwrap(),
                value["hash"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The log in `dir` holds exactly these entries, and verifies.
pub fn assert_log_holds(dir: &Path, acknowledged: &[tooltrust::audit::Receipt]) {
    let path = dir.join(tooltrust::audit::LOG_FILE);
    let report = tooltrust::audit::verify(&path, None).unwrap();
    assert_eq!(report.entries, acknowledged.len() as u64);
    let on_disk = receipts(&path);
    for receipt in acknowledged {
        assert_eq!(
            on_disk[receipt.seq as usize - 1],
            (receipt.seq, receipt.hash.to_hex())
        );
    }
}

/// Counts the syncs of the file storage it wraps.
pub struct CountingSyncs {
    pub inner: tooltrust::audit::FileStorage,
    pub syncs: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl tooltrust::audit::Storage for CountingSyncs {
    fn read_log(&mut self) -> std::io::Result<Box<dyn std::io::Read + '_>> {
        self.inner.read_log()
    }
    fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.inner.append(bytes)
    }
    fn sync(&mut self) -> std::io::Result<()> {
        self.syncs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.sync()
    }
    fn truncate(&mut self, len: u64) -> std::io::Result<()> {
        self.inner.truncate(len)
    }
    fn read_head(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        self.inner.read_head()
    }
    fn write_head(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.inner.write_head(bytes)
    }
    fn save_torn(&mut self, offset: u64, bytes: &[u8]) -> std::io::Result<std::path::PathBuf> {
        self.inner.save_torn(offset, bytes)
    }
}
