//! Running the `tooltrust` binary in tests.

#![allow(dead_code, reason = "each test file uses a part")]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The project's copy of the shared vectors.
pub fn vectors(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../runtime/tests/data/vectors")
        .join(path)
}

/// What one run of the binary did.
pub struct Run {
    pub code: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Run {
    pub fn stdout_text(&self) -> String {
        String::from_utf8(self.stdout.clone()).unwrap()
    }
}

/// Runs `tooltrust ARGS`, feeding `stdin`.
pub fn tooltrust(args: &[&str], stdin: &[u8]) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tooltrust"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_vec();
    // A separate writer, so that a child that answers as it reads never blocks on a full
    // pipe; a child that exits without reading closes the pipe, which is not an error here.
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&stdin);
    });
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap();
    Run {
        code: output.status.code(),
        stdout: output.stdout,
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

/// The tool-call vectors, parsed.
pub fn tool_call_vectors() -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(vectors("adk-tool-calls.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Whether a vector is flagged as a call that must be refused.
pub fn flagged(entry: &serde_json::Value) -> bool {
    !matches!(
        entry.get("args_unrepresentable"),
        None | Some(serde_json::Value::Null | serde_json::Value::Bool(false))
    )
}
