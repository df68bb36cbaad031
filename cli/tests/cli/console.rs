//! `tooltrust console`: refuses to start where it would be unsafe, serves a store's queue
//! over HTTP on loopback to the holder of the token it writes, and makes argon2 hashes
//! for a credentials file.

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
    request(addr, path, "")
}

/// A GET of `path` with `headers` (each line ending in CRLF), as the raw response.
fn request(addr: &str, path: &str, headers: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// What a console for one reviewer says when it starts: its address, the address that
/// signs in (with the token), and the token's file.
struct Started {
    addr: String,
    sign_in: String,
    token_file: std::path::PathBuf,
}

fn started(stderr: std::process::ChildStderr) -> Started {
    let mut lines = BufReader::new(stderr).lines();
    let first = lines.next().unwrap().unwrap();
    let url = first
        .split("console is at ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no URL in {first:?}"))
        .to_owned();
    let second = lines.next().unwrap().unwrap();
    let sign_in = second
        .split("signs in at ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no sign-in address in {second:?}"))
        .to_owned();
    let token_file = second
        .split("the token is also in ")
        .nth(1)
        .and_then(|rest| rest.split(", readable").next())
        .unwrap_or_else(|| panic!("no token file in {second:?}"))
        .into();
    // Keep reading, so the console never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Started {
        addr: url
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned(),
        sign_in,
        token_file,
    }
}

/// Issue 38: a local user who could not read the store opened a loopback console's
/// call and approved it. The console now draws a token, writes it to a file only its
/// owner reads, prints the address that signs in with it, and serves nobody without it.
#[test]
fn serves_the_queue_and_the_chain_on_loopback_to_the_tokens_holder_only() {
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
    let Started {
        addr,
        sign_in,
        token_file,
    } = started(stderr);
    let port = addr.rsplit(':').next().unwrap();

    // The token: 64 hex characters in a file beside the store, its owner's only.
    assert_eq!(
        token_file,
        dir.path().join(format!("tooltrust-console-{port}.token"))
    );
    let token = std::fs::read_to_string(&token_file).unwrap();
    let token = token.trim_end();
    assert!(token.len() == 64 && token.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(sign_in, format!("http://{addr}/login?token={token}"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let mode = std::fs::metadata(&token_file).unwrap().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }

    // Without the token: the sign-in page, never the queue, the chain or live updates.
    for path in ["/", "/audit/verify"] {
        let refused = get(&addr, path);
        assert!(refused.starts_with("HTTP/1.1 303"), "{path}: {refused}");
        assert!(
            refused.to_lowercase().contains("location: /login"),
            "{refused}"
        );
    }
    assert!(get(&addr, "/events").starts_with("HTTP/1.1 401"));
    let wrong = format!("Authorization: Bearer {:0>64}\r\n", "1");
    assert!(request(&addr, "/", &wrong).starts_with("HTTP/1.1 303"));

    // With it, as a bearer token or exchanged for a session at the printed address.
    let bearer = format!("Authorization: Bearer {token}\r\n");
    let queue = request(&addr, "/", &bearer);
    assert!(queue.starts_with("HTTP/1.1 200"), "{queue}");
    assert!(queue.contains("Reviewing as <strong id=\"viewer\">alice</strong>"));
    assert!(
        queue
            .to_lowercase()
            .contains("content-security-policy: default-src 'self'")
    );
    let signed_in = get(&addr, &format!("/login?token={token}"));
    assert!(signed_in.starts_with("HTTP/1.1 303"), "{signed_in}");
    let cookie = signed_in
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(": ")?;
            name.eq_ignore_ascii_case("set-cookie")
                .then(|| value.split(';').next().unwrap().to_owned())
        })
        .unwrap_or_else(|| panic!("no cookie in {signed_in}"));
    let verified = request(&addr, "/audit/verify", &format!("Cookie: {cookie}\r\n"));
    assert!(verified.contains("ok: 1 entries"), "{verified}");

    // Stopped (as a service manager stops it), the console removes the token's file.
    #[cfg(unix)]
    {
        let mut running = running;
        let stopped = Command::new("kill")
            .args(["-TERM", &running.0.id().to_string()])
            .status()
            .unwrap();
        assert!(stopped.success());
        let status = running.0.wait().unwrap();
        assert!(status.success(), "{status}");
        assert!(!token_file.exists(), "the token's file is removed");
    }
    #[cfg(not(unix))]
    drop(running);
}

/// The token goes where --token-dir says, and a console that cannot write it does not
/// start.
#[test]
fn writes_the_token_where_it_is_told_or_does_not_start() {
    let dir = tempfile::tempdir().unwrap();
    let file = store(&dir);
    let tokens = tempfile::tempdir().unwrap();
    let mut child = tooltrust()
        .args(["console", "--sqlite", &file, "--reviewer", "alice"])
        .args(["--listen", "127.0.0.1:0", "--token-dir"])
        .arg(tokens.path())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let _running = Running(child);
    let started = started(stderr);
    assert_eq!(started.token_file.parent(), Some(tokens.path()));
    let token = std::fs::read_to_string(&started.token_file).unwrap();
    let queue = request(
        &started.addr,
        "/",
        &format!("Authorization: Bearer {}\r\n", token.trim_end()),
    );
    assert!(queue.starts_with("HTTP/1.1 200"), "{queue}");

    let output = tooltrust()
        .args(["console", "--sqlite", &file, "--reviewer", "alice"])
        .args(["--listen", "127.0.0.1:0", "--token-dir"])
        .arg(dir.path().join("missing"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot write the console's token") && stderr.contains("--token-dir"),
        "{stderr}"
    );
}

#[test]
fn refuses_to_start_where_it_would_be_unsafe() {
    let dir = tempfile::tempdir().unwrap();
    let file = store(&dir);
    let cases: [(&[&str], &str); 5] = [
        (
            &["--reviewer", "alice", "--listen", "0.0.0.0:0"],
            "needs --auth FILE",
        ),
        (
            &["--auth", "/nonexistent/reviewers", "--token-dir", "/tmp"],
            "cannot be used with",
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
