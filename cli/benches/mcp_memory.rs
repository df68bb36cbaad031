//! The guarding proxy's peak resident memory (Linux's `VmHWM`) under hostile upstreams:
//! for each misbehaviour of `tooltrust mcp demo-server --misbehave`, a `tooltrust mcp
//! proxy` fronting that upstream beside the good demo upstream, driven as a host drives
//! it, against the good upstream alone; and under a stream of twelve 15 MB results, with
//! `max_kept_result_bytes` at 16 MiB and at 1 TiB (no budget in effect). Goal for the
//! stream: the peak is bounded by the configured budget plus one result (over the
//! baseline's).
//!
//! Each scenario runs in a proxy of its own, one after the other. Linux only (`/proc`).
//!
//! `cargo bench -p tooltrust-cli --bench mcp_memory`

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::json;
use tempfile::TempDir;
use tokio::process::Command;

const TOOLTRUST: &str = env!("CARGO_BIN_EXE_tooltrust");
/// The size of each result of the stream.
const RESULT: u64 = 15_000_000;
/// The budget the bounded stream runs with (16 MiB).
const BUDGET: u64 = 16 << 20;
/// A budget no stream of this bench reaches (1 TiB).
const UNBOUNDED: u64 = 1 << 40;
/// How long the host may wait, at the most, for the proxy to answer `tools/list`; it
/// only ends a failing run (the proxy's own limit is `upstream_timeout_ms`).
const HOST_PATIENCE: Duration = Duration::from_secs(120);

/// A proxy under measure: its client, its process id and the directory of its config,
/// audit log and quarantine.
struct Proxy {
    client: RunningService<RoleClient, ()>,
    pid: u32,
    _dir: TempDir,
}

/// The good demo upstream `mail`: `send_email` trusted and consequential,
/// `lookup_policy` trusted and read-only, `lorem` read-only with untrusted output.
fn mail(outbox: &Path) -> String {
    format!(
        "\n[[upstream]]\nname = \"mail\"\ncommand = [{TOOLTRUST:?}, \"mcp\", \"demo-server\"]\nenv = {{ TOOLTRUST_DEMO_OUTBOX = {outbox:?} }}\n\n[upstream.tools]\n\"send_*\" = {{ trust = \"trusted\" }}\n\"lookup_policy\" = {{ trust = \"trusted\", read_only = true }}\n\"lorem\" = {{ trust = \"untrusted\", read_only = true }}\n"
    )
}

/// An upstream attacking the proxy with `attack`, its tools declared untrusted.
fn attacker(attack: &str) -> String {
    format!(
        "\n[[upstream]]\nname = \"{attack}\"\ncommand = [{TOOLTRUST:?}, \"mcp\", \"demo-server\", \"--misbehave\", \"{attack}\"]\n\n[upstream.tools]\n\"*\" = {{ trust = \"untrusted\", read_only = true }}\n"
    )
}

/// Starts a proxy fronting the good upstream (and `attack`, if any), with `settings`
/// among the config's top-level keys, and lists its tools as a host does: returns the
/// proxy and how long the host waited from the start to the listing.
async fn start(attack: Option<&str>, settings: &str) -> (Proxy, Duration) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let config = dir.path().join("tooltrust-mcp.toml");
    let upstreams = format!(
        "{}{}",
        attack.map(attacker).unwrap_or_default(),
        mail(&dir.path().join("outbox.txt"))
    );
    std::fs::write(
        &config,
        format!("audit_log = \"audit\"\nupstream_timeout_ms = 2000\n{settings}\n{upstreams}"),
    )
    .expect("the config is written");
    let mut command = Command::new(TOOLTRUST);
    command.args(["mcp", "proxy", "--config"]).arg(&config);
    let started = Instant::now();
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(Stdio::null())
        .spawn()
        .expect("the proxy starts");
    let pid = transport.id().expect("the proxy's pid");
    let client = tokio::time::timeout(HOST_PATIENCE, async {
        let client = ().serve(transport).await.expect("the handshake");
        client.list_all_tools().await.expect("tools/list");
        client
    })
    .await
    .expect("the host is answered");
    let waited = started.elapsed();
    (
        Proxy {
            client,
            pid,
            _dir: dir,
        },
        waited,
    )
}

async fn call(proxy: &Proxy, name: &str, args: serde_json::Value) -> CallToolResult {
    let params = CallToolRequestParams::new(name.to_owned())
        .with_arguments(args.as_object().cloned().unwrap_or_default());
    let result = tokio::time::timeout(HOST_PATIENCE, proxy.client.call_tool(params))
        .await
        .expect("an answer in time")
        .expect("a tools/call answer");
    assert_ne!(result.is_error, Some(true), "{name}: {result:?}");
    result
}

/// The proxy's peak and current resident memory, in bytes (`VmHWM`, `VmRSS`).
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("its status");
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .map(|kb: u64| kb * 1024)
            .unwrap_or_else(|| panic!("{name} in /proc/{pid}/status"))
    };
    (field("VmHWM:"), field("VmRSS:"))
}

fn mb(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / 1e6)
}

fn row(scenario: &str, (peak, resident): (u64, u64), baseline_peak: u64, waited: &str) {
    println!(
        "| {scenario} | {} | {} | {} | {waited} |",
        mb(peak),
        mb(resident),
        format_args!("{:+.1}", (peak as f64 - baseline_peak as f64) / 1e6),
    );
}

/// Twelve 15 MB results through a proxy with `budget` as `max_kept_result_bytes`: a row
/// after 1, 4 and 12 of them, and for the budget that is in effect, the goal's verdict.
async fn stream(label: &str, budget: u64, baseline_peak: u64) {
    let (proxy, _) = start(None, &format!("max_kept_result_bytes = {budget}")).await;
    let mut peaks = Vec::new();
    for n in 1..=12 {
        call(&proxy, "mail__lorem", json!({"bytes": RESULT})).await;
        if [1, 4, 12].contains(&n) {
            let measured = memory(proxy.pid);
            peaks.push(measured.0);
            let scenario = format!("15 MB results, max_kept_result_bytes = {label}: after {n}");
            row(&scenario, measured, baseline_peak, "—");
        }
    }
    stop(proxy).await;
    let (first, last) = (peaks[0], peaks[peaks.len() - 1]);
    if budget < UNBOUNDED {
        let over = last.saturating_sub(baseline_peak);
        let goal = budget + RESULT;
        println!(
            "note: mcp/memory, 12 × 15 MB results with max_kept_result_bytes = {label}: the peak {} MB over the baseline's against the budget plus one result, {} MB ({}); from 1 to 12 results it grew {} MB",
            mb(over),
            mb(goal),
            if over <= goal { "met" } else { "MISSED" },
            mb(last.saturating_sub(first)),
        );
    }
}

async fn stop(proxy: Proxy) {
    let _ = proxy.client.cancel().await;
}

fn main() {
    if !Path::new("/proc/self/status").exists() {
        println!("note: mcp_memory reads /proc/<pid>/status; this system has none");
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        println!(
            "| scenario | peak (VmHWM, MB) | resident at the end (VmRSS, MB) | peak over the baseline (MB) | tools/list answered after |"
        );
        println!("|---|---:|---:|---:|---:|");
        let (proxy, waited) = start(None, "").await;
        call(&proxy, "mail__lookup_policy", json!({})).await;
        let baseline = memory(proxy.pid);
        row(
            "baseline: the good upstream alone",
            baseline,
            baseline.0,
            &format!("{waited:.2?}"),
        );
        stop(proxy).await;

        for attack in [
            "silent-start",
            "silent-list",
            "deep-list",
            "endless-pages",
            "poisoned",
            "poisoned-keys",
        ] {
            let (proxy, waited) = start(Some(attack), "").await;
            call(&proxy, "mail__lookup_policy", json!({})).await;
            row(
                &format!("{attack} + the good upstream"),
                memory(proxy.pid),
                baseline.0,
                &format!("{waited:.2?}"),
            );
            stop(proxy).await;
        }

        let (proxy, waited) = start(Some("list-storm"), "").await;
        tokio::time::sleep(Duration::from_secs(10)).await;
        call(&proxy, "mail__lookup_policy", json!({})).await;
        row(
            "list-storm + the good upstream, after 10 s of storm",
            memory(proxy.pid),
            baseline.0,
            &format!("{waited:.2?}"),
        );
        stop(proxy).await;

        for (label, budget) in [("16 MiB", BUDGET), ("1 TiB (none in effect)", UNBOUNDED)] {
            stream(label, budget, baseline.0).await;
        }
    });
}
