//! `tooltrust console`: refuses to start where it would be unsafe, serves a store's queue
//! over HTTP on loopback, and makes argon2 hashes for a credentials file.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

fn tooltrust() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tooltrust"))
}

/// A console process, killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn store(dir: &tempfile::TempDir) -> String {
    let path = dir.path().join("store.db");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = tooltrust_store::Store::open_sqlite(&path).await.unwrap();
        store
            .append(&serde_json::json!({"event": "call_denied", "tool": "send_email"}))
            .await
            .unwrap();
        store.close().await;
    });
    path.to_str().unwrap().to_owned()
}

fn get(addr: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

#[test]
fn serves_the_queue_and_the_chain_on_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let file = store(&dir);
    let mut child = tooltrust()
        .args([
            "console",
            "--sqlite",
            &file,
            "--reviewer",
            "alice",
            "--listen",
            "127.0.0.1:0",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let running = Running(child);
    let mut line = String::new();
    BufReader::new(stderr).read_line(&mut line).unwrap();
    let url = line
        .split("console is at ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no URL in {line:?}"));
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let queue = get(addr, "/");
    assert!(queue.starts_with("HTTP/1.1 200"), "{queue}");
    assert!(queue.contains("Reviewing as <strong id=\"viewer\">alice</strong>"));
    assert!(
        queue
            .to_lowercase()
            .contains("content-security-policy: default-src 'self'")
    );
    let verified = get(addr, "/audit/verify");
    assert!(verified.contains("ok: 1 entries"), "{verified}");
    drop(running);
}

#[test]
fn refuses_to_start_where_it_would_be_unsafe() {
    let dir = tempfile::tempdir().unwrap();
    let file = store(&dir);
    let cases: [(&[&str], &str); 4] = [
        (
            &["--reviewer", "alice", "--listen", "0.0.0.0:0"],
            "needs --auth FILE",
        ),
        (&[], "--reviewer NAME"),
        (&["--reviewer", "bad name"], "invalid value"),
        (
            &["--auth", "/nonexistent/reviewers"],
            "cannot read the credentials file",
        ),
    ];
    for (args, expected) in cases {
        let output = tooltrust()
            .args(["console", "--sqlite", &file])
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?} started");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    let missing = tooltrust()
        .args([
            "console",
            "--sqlite",
            "/nonexistent/store.db",
            "--reviewer",
            "alice",
        ])
        .output()
        .unwrap();
    assert!(!missing.status.success(), "a mistyped store is not created");
}

#[test]
fn hashes_a_password_for_a_credentials_file() {
    let mut child = tooltrust()
        .args(["console", "--hash-password"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"correct horse battery staple\n")
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    let phc = String::from_utf8(output.stdout).unwrap();
    assert!(phc.starts_with("$argon2id$"), "{phc}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("reviewers");
    std::fs::write(&path, format!("alice argon2 {phc}")).unwrap();
    let credentials = tooltrust_console::Credentials::load(&path).unwrap();
    assert_eq!(
        credentials
            .verify("alice", "correct horse battery staple")
            .map(|id| id.to_string()),
        Some("alice".to_owned())
    );
}
