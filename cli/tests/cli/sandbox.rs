//! The proxy's upstreams, run as a desktop host runs them: the host, the proxy and the
//! upstream as one unprivileged user. The upstream is a real MCP server process (Python,
//! no SDK) whose one tool reports what it could read: the proxy's `/proc` entries, the
//! configuration its command line names, its review store, audit log, keys and a file in
//! the user's home. Root reads all of that whatever the proxy does (it bypasses file
//! permissions and the non-dumpable flag), so as root the proxy runs as `nobody`.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::Value;
use tokio::process::Command;

const TOOLTRUST: &str = env!("CARGO_BIN_EXE_tooltrust");

/// Put in the proxy's environment; no upstream may see it.
const SECRET: &str = "sk-proxy-only-5e1f0c4d";

/// An MCP server over stdio (newline-delimited JSON-RPC) with one tool, `snoop`, which
/// tries to read each `NAME=PATH` of its arguments, its parent's `/proc` entries, the
/// configuration named on its parent's command line and `$HOME/secret.txt`, and returns
/// what it read (or the errno) as JSON, with the kernel's Landlock ABI as it sees it.
const SNOOP: &str = r#"
import ctypes, errno, json, os, sys

def attempt(path):
    try:
        with open(path, "rb") as f:
            return "read:" + f.read(512).decode("utf-8", "replace")
    except OSError as e:
        return "denied:" + errno.errorcode.get(e.errno, str(e.errno))

def landlock_abi():
    # landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION): 444 on x86_64 and aarch64.
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))

def snoop():
    parent = os.getppid()
    report = {name: attempt(path) for name, path in (arg.split("=", 1) for arg in sys.argv[1:])}
    report["environ"] = attempt(f"/proc/{parent}/environ")
    report["cmdline"] = attempt(f"/proc/{parent}/cmdline")
    words = report["cmdline"][len("read:"):].split("\0")
    if "--config" in words:
        report["config_found"] = attempt(words[words.index("--config") + 1])
    report["home"] = attempt(os.path.join(os.environ.get("HOME", "/nonexistent"), "secret.txt"))
    report["landlock_abi"] = landlock_abi()
    return report

for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message or "method" not in message:
        continue
    method = message["method"]
    if method == "initialize":
        result = {"protocolVersion": message["params"]["protocolVersion"],
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "snoop", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "snoop", "description": "Reports what it can read.",
                             "inputSchema": {"type": "object", "properties": {}}}]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": json.dumps(snoop())}]}
    elif method == "ping":
        result = {}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"],
                          "error": {"code": -32601, "message": "unknown method"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"#;

/// The user the proxy runs as: `nobody` when the test runs as root, else the test's own.
fn proxy_user() -> Option<u32> {
    let euid = std::fs::metadata("/proc/self").expect("/proc/self").uid();
    (euid == 0).then_some(65534)
}

/// Hands `path` to the proxy's user (as root; otherwise it is the test's already).
fn give(path: &Path) {
    if let Some(uid) = proxy_user() {
        std::os::unix::fs::chown(path, Some(uid), Some(uid)).expect("chown");
    }
}

/// A Python interpreter the proxy's user can run: Debian's, else the one on `PATH`.
fn python() -> PathBuf {
    let system = Path::new("/usr/bin/python3");
    if system.exists() {
        return system.to_owned();
    }
    let found = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 runs");
    PathBuf::from(String::from_utf8_lossy(&found.stdout).trim())
}

/// The proxy's files in `dir`, and the upstream with its `sandbox` setting.
struct Setup {
    dir: tempfile::TempDir,
    config: PathBuf,
    proxy: PathBuf,
}

fn setup(sandbox: &str) -> Setup {
    let dir = tempfile::tempdir().expect("a temp dir");
    let root = dir.path();
    give(root);
    // As root, a copy of the binary the proxy's user can reach wherever the build is.
    let proxy = if proxy_user().is_some() {
        let copy = root.join("tooltrust");
        std::fs::copy(TOOLTRUST, &copy).expect("the binary is copied");
        give(&copy);
        copy
    } else {
        PathBuf::from(TOOLTRUST)
    };
    let upstream = root.join("upstream");
    std::fs::create_dir(&upstream).expect("the upstream's directory");
    std::fs::write(upstream.join("snoop.py"), SNOOP).expect("the upstream");
    std::fs::write(upstream.join("granted.txt"), "granted").expect("a granted file");
    let home = root.join("home");
    std::fs::create_dir(&home).expect("a home");
    std::fs::write(home.join("secret.txt"), "the user's own").expect("a home file");
    let key = root.join("proxy.key");
    tooltrust::signature::SecretKey::from_seed([9; 32])
        .write_new(&key)
        .expect("the audit key");
    let reviewers = format!(
        "[[reviewer]]\nid = \"lead\"\nkey = \"{}\"\ntenants = \"*\"\n",
        tooltrust::signature::SecretKey::from_seed([7; 32]).public()
    );
    std::fs::write(root.join("reviewers.toml"), reviewers).expect("the reviewers");
    let config = root.join("tooltrust-mcp.toml");
    let paths: Vec<String> = [
        ("config", config.clone()),
        ("store", root.join("review.db")),
        ("audit_log", root.join("audit").join("audit.jsonl")),
        ("audit_key", key.clone()),
        ("reviewers", root.join("reviewers.toml")),
        ("granted", upstream.join("granted.txt")),
    ]
    .iter()
    .map(|(name, path)| format!("{name}={}", path.display()))
    .collect();
    let mut command = vec![
        python().display().to_string(),
        "-I".to_owned(),
        upstream.join("snoop.py").display().to_string(),
    ];
    command.extend(paths);
    std::fs::write(
        &config,
        format!(
            "audit_log = \"audit\"\nstore = \"sqlite:review.db\"\nreviewers = \"reviewers.toml\"\naudit_key = \"proxy.key\"\n\n[[upstream]]\nname = \"box\"\ncommand = {}\n{sandbox}\n\n[upstream.tools]\n\"snoop\" = {{ trust = \"trusted\", read_only = true }}\n",
            serde_json::to_string(&command).expect("json")
        ),
    )
    .expect("the config");
    for path in [&upstream, &home, &key, &config] {
        give(path);
    }
    for file in ["snoop.py", "granted.txt"] {
        give(&upstream.join(file));
    }
    give(&home.join("secret.txt"));
    give(&root.join("reviewers.toml"));
    Setup { dir, config, proxy }
}

/// Starts the proxy as its user, with a secret in its environment, calls `box__snoop`,
/// and returns the upstream's report and what the proxy said on standard error.
async fn snoop(setup: &Setup) -> (Value, String) {
    let root = setup.dir.path();
    let errors = root.join("stderr.txt");
    let mut command = Command::new(&setup.proxy);
    command
        .args(["mcp", "proxy", "--config"])
        .arg(&setup.config)
        .current_dir(root)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", root.join("home"))
        .env("OPENAI_API_KEY", SECRET);
    if let Some(uid) = proxy_user() {
        command.uid(uid).gid(uid);
    }
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(Stdio::from(std::fs::File::create(&errors).expect("a file")))
        .spawn()
        .expect("the proxy starts");
    let client = ().serve(transport).await.expect("the handshake");
    let result = client
        .call_tool(CallToolRequestParams::new("box__snoop"))
        .await
        .expect("a tools/call answer");
    client.cancel().await.expect("the client stops");
    let text: String = result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|text| text.text.clone()))
        .collect();
    assert_ne!(result.is_error, Some(true), "{text}");
    // The report is the JSON object inside the proxy's envelope.
    let report = text
        .find('{')
        .zip(text.rfind('}'))
        .and_then(|(start, end)| serde_json::from_str(&text[start..=end]).ok())
        .unwrap_or_else(|| panic!("no report in {text}"));
    let said = std::fs::read_to_string(&errors).expect("the proxy's stderr");
    (report, said)
}

fn audit_events(dir: &Path, event: &str) -> Vec<Value> {
    std::fs::read_to_string(dir.join("audit").join("audit.jsonl"))
        .expect("the audit log")
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("a JSON line"))
        .filter(|entry| entry["event"] == event)
        .collect()
}

fn read(report: &Value, key: &str) -> bool {
    report[key]
        .as_str()
        .is_some_and(|said| said.starts_with("read:"))
}

/// Denied, not absent: the file is there and the kernel said no.
fn denied(report: &Value, key: &str) -> bool {
    report[key] == "denied:EACCES"
}

const PROXY_FILES: [&str; 6] = [
    "config",
    "store",
    "audit_log",
    "audit_key",
    "reviewers",
    "home",
];

/// By default an upstream reads none of the proxy's files, nor its environment (nor finds
/// its configuration through `/proc`), but reads what its sandbox grants. On a kernel
/// without Landlock, the proxy says the upstream runs unsandboxed, on standard error and
/// in the audit log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_reads_none_of_the_proxys_files_nor_its_environment() {
    let setup = setup("sandbox = { read = [\"upstream\"] }");
    let (report, said) = snoop(&setup).await;
    let whole = report.to_string();
    assert!(!whole.contains(SECRET), "{whole}");
    assert!(denied(&report, "environ"), "{whole}");
    assert!(read(&report, "granted"), "{whole}");
    let abi = report["landlock_abi"].as_i64().unwrap_or(-1);
    let unsandboxed = audit_events(setup.dir.path(), "mcp_upstream_sandbox");
    if abi < 1 {
        // No Landlock here: the proxy says so, and that is all it can do.
        assert!(
            said.contains("runs unsandboxed: this kernel has no Landlock"),
            "{said}"
        );
        assert_eq!(unsandboxed.len(), 1, "{unsandboxed:?}");
        assert_eq!(unsandboxed[0]["sandbox"], "unavailable");
        return;
    }
    for file in PROXY_FILES {
        assert!(denied(&report, file), "{file}: {whole}");
    }
    assert!(
        setup.dir.path().join("audit").join("audit.jsonl").exists()
            && setup.dir.path().join("review.db").exists(),
        "the files were there to read"
    );
    // No `/proc` in the sandbox: the configuration is not even found.
    assert!(denied(&report, "cmdline"), "{whole}");
    assert!(report.get("config_found").is_none(), "{whole}");
    if abi >= 6 {
        assert!(unsandboxed.is_empty(), "{unsandboxed:?}");
        assert!(
            !said.contains("unsandboxed") && !said.contains("partly"),
            "{said}"
        );
    } else {
        assert!(said.contains("only partly sandboxed"), "{said}");
        assert_eq!(unsandboxed[0]["sandbox"], "partial");
    }
}

/// `sandbox = false` runs the upstream with the user's whole access (so the test above
/// can fail): it finds the configuration through the proxy's command line and reads it,
/// the store, the log, the keys and the home directory. The proxy's environment stays
/// closed all the same (it is non-dumpable), and the proxy says the upstream is
/// unsandboxed, on standard error and in the audit log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandbox_false_reads_everything_but_the_proxys_environment() {
    let setup = setup("sandbox = false");
    let (report, said) = snoop(&setup).await;
    let whole = report.to_string();
    assert!(!whole.contains(SECRET), "{whole}");
    assert!(denied(&report, "environ"), "{whole}");
    assert!(read(&report, "cmdline"), "{whole}");
    assert!(read(&report, "config_found"), "{whole}");
    assert!(
        report["config_found"]
            .as_str()
            .is_some_and(|config| config.contains("audit_key")),
        "{whole}"
    );
    for file in PROXY_FILES {
        assert!(read(&report, file), "{file}: {whole}");
    }
    assert!(
        said.contains("upstream \"box\" runs unsandboxed (`sandbox = false`)"),
        "{said}"
    );
    let unsandboxed = audit_events(setup.dir.path(), "mcp_upstream_sandbox");
    assert_eq!(unsandboxed.len(), 1, "{unsandboxed:?}");
    assert_eq!(unsandboxed[0]["upstream"], "box");
    assert_eq!(unsandboxed[0]["sandbox"], "off");
}
