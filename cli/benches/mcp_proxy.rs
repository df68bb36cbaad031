//! The guarding proxy's added latency per `tools/call` over stdio: an MCP client calls
//! `tooltrust mcp demo-server`'s `lorem` tool through `tooltrust mcp proxy` (declared
//! trusted and read-only, so every call runs: checksum, gate, upstream call, envelope,
//! audit append), against calling the same server directly, in the same run, for 1 KB
//! and 64 KB results. Goals: a median overhead under 1 ms, at most 1.5× the direct call
//! for 64 KB results, and, since a call's outcome joins the next decision's sync, a
//! median through the proxy at most the forwarding-only floor (below) plus one
//! `fdatasync` of the audit log's file system (measured in the same run) plus 0.3 ms.
//!
//! Beside them, the floor any proxy stands on: the same calls through a proxy that only
//! forwards (this bench, started again as an rmcp server whose tools call the upstream's,
//! with no tooltrust in it): what one more process and one more JSON-RPC hop cost.
//!
//! `cargo bench -p tooltrust-cli --bench mcp_proxy`

#[path = "../../runtime/benches/harness/mod.rs"]
mod harness;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use harness::Goal;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleClient, RoleServer, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::json;
use tokio::process::Command;

const TOOLTRUST: &str = env!("CARGO_BIN_EXE_tooltrust");
const SINGLE_CALLS: usize = 400;
/// Set for the copy of this bench that runs as the forwarding-only proxy.
const FORWARDER: &str = "TOOLTRUST_BENCH_FORWARDER";

fn tooltrust(args: &[&str], config: Option<&Path>) -> Command {
    let mut command = Command::new(TOOLTRUST);
    command.args(args);
    if let Some(config) = config {
        command.arg(config);
    }
    command
}

async fn client(command: Command) -> RunningService<RoleClient, ()> {
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the server starts");
    ().serve(transport).await.expect("the handshake")
}

/// An MCP server whose tools are the upstream's, each call passed on as it came and each
/// result passed back as it came.
struct Forwarder(RunningService<RoleClient, ()>);

impl ServerHandler for Forwarder {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.0
            .list_tools(request)
            .await
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.0
            .call_tool(request)
            .await
            .map(Into::into)
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))
    }
}

/// Runs as the forwarding-only proxy on stdin/stdout, on the same kind of runtime as
/// `tooltrust mcp proxy`.
fn forward() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let upstream = client(tooltrust(&["mcp", "demo-server"], None)).await;
        let server = Forwarder(upstream)
            .serve(rmcp::transport::stdio())
            .await
            .expect("the handshake");
        let _ = server.waiting().await;
    });
}

/// Appends a line to `file` and `fdatasync`s it: what one durable append of the audit
/// log costs at the least, on its file system.
fn durable_append(file: &mut std::fs::File) -> Duration {
    use std::io::Write;
    let start = Instant::now();
    file.write_all(&[b'x'; 255]).expect("a write");
    file.sync_data().expect("fdatasync");
    start.elapsed()
}

fn main() {
    if std::env::var_os(FORWARDER).is_some() {
        return forward();
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let dir = tempfile::tempdir().expect("a temp dir");
    let config = dir.path().join("tooltrust-mcp.toml");
    std::fs::write(
        &config,
        format!(
            "audit_log = \"audit\"\n\n[[upstream]]\nname = \"demo\"\ncommand = [{TOOLTRUST:?}, \"mcp\", \"demo-server\"]\n\n[upstream.tools]\n\"lorem\" = {{ trust = \"trusted\", read_only = true }}\n"
        ),
    )
    .expect("the config is written");
    // The same proxy with a writer key: every audit entry signed (Ed25519 over its hash).
    let signed_dir = dir.path().join("signed");
    std::fs::create_dir(&signed_dir).expect("a directory for the signed proxy");
    tooltrust::signature::SecretKey::generate()
        .expect("a key")
        .write_new(signed_dir.join("audit.key"))
        .expect("the key is written");
    let signed_config = signed_dir.join("tooltrust-mcp.toml");
    std::fs::write(
        &signed_config,
        std::fs::read_to_string(&config)
            .expect("the config")
            .replacen(
                "audit_log = \"audit\"\n",
                "audit_log = \"audit\"\naudit_key = \"audit.key\"\n",
                1,
            ),
    )
    .expect("the signed config is written");
    let mut forwarder = Command::new(std::env::current_exe().expect("this bench's path"));
    forwarder.env(FORWARDER, "1");
    let (direct, proxied, forwarded, signed) = runtime.block_on(async {
        (
            client(tooltrust(&["mcp", "demo-server"], None)).await,
            client(tooltrust(&["mcp", "proxy", "--config"], Some(&config))).await,
            client(forwarder).await,
            client(tooltrust(
                &["mcp", "proxy", "--config"],
                Some(&signed_config),
            ))
            .await,
        )
    });
    for (label, bytes) in [("1 KB", 1024u64), ("64 KB", 65536)] {
        let call = |client: &RunningService<RoleClient, ()>, name: &str| {
            let params = CallToolRequestParams::new(name.to_owned()).with_arguments(
                json!({"bytes": bytes})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            );
            let result = runtime
                .block_on(client.call_tool(params))
                .expect("an answer");
            assert_ne!(result.is_error, Some(true), "{result:?}");
            result
        };
        let goal = if bytes == 65536 {
            Goal::AtMost(1.5)
        } else {
            Goal::None
        };
        let row = harness::compare(
            &format!("mcp/proxy tools/call, {label} result"),
            "the upstream called directly",
            goal,
            || call(&direct, "lorem"),
            || call(&proxied, "demo__lorem"),
        );
        harness::compare(
            &format!("mcp/forwarding alone (rmcp, no tooltrust), {label} result"),
            "the upstream called directly",
            Goal::None,
            || call(&direct, "lorem"),
            || call(&forwarded, "lorem"),
        );
        harness::compare(
            &format!("mcp/proxy tools/call beside forwarding alone, {label} result"),
            "forwarding alone",
            Goal::None,
            || call(&forwarded, "lorem"),
            || call(&proxied, "demo__lorem"),
        );
        // Single calls, each side in turn, for the medians' difference and the p99s; and,
        // in the same turns (the disk's load varies), one durable append beside the log.
        let mut times = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut syncs = Vec::new();
        let mut probe = std::fs::File::create(dir.path().join(format!("probe-{bytes}")))
            .expect("a probe file beside the audit log");
        for _ in 0..SINGLE_CALLS {
            syncs.push(durable_append(&mut probe));
            let start = Instant::now();
            call(&direct, "lorem");
            times.0.push(start.elapsed());
            let start = Instant::now();
            call(&proxied, "demo__lorem");
            times.1.push(start.elapsed());
            let start = Instant::now();
            call(&forwarded, "lorem");
            times.2.push(start.elapsed());
            let start = Instant::now();
            call(&signed, "demo__lorem");
            times.3.push(start.elapsed());
        }
        let at = |times: &mut Vec<Duration>, q: f64| {
            times.sort();
            times[((times.len() - 1) as f64 * q) as usize]
        };
        let (direct_median, proxied_median) = (at(&mut times.0, 0.5), at(&mut times.1, 0.5));
        let floor = at(&mut times.2, 0.5);
        harness::note(&format!(
            "mcp/forwarding alone, {label}: single calls, median {floor:?} (p99 {:?})",
            at(&mut times.2, 0.99),
        ));
        let sync = at(&mut syncs, 0.5);
        let budget = floor + sync + Duration::from_micros(300);
        harness::note(&format!(
            "mcp/proxy, {label}: single calls, median {proxied_median:?} against the floor {floor:?} + one fdatasync {sync:?} + 0.3 ms = {budget:?} ({})",
            if proxied_median <= budget {
                "met"
            } else {
                "MISSED"
            },
        ));
        let signed_median = at(&mut times.3, 0.5);
        harness::note(&format!(
            "mcp/proxy with a signed audit log (audit_key), {label}: single calls, median {signed_median:?} against the same budget {budget:?} ({}); unsigned {proxied_median:?}",
            if signed_median <= budget {
                "met"
            } else {
                "MISSED"
            },
        ));
        let overhead = proxied_median.saturating_sub(direct_median);
        harness::note(&format!(
            "mcp/proxy, {label}: single calls, median {proxied_median:?} through the proxy against {direct_median:?} direct (overhead {overhead:?}, goal < 1 ms: {}); p99 {:?} against {:?}",
            if overhead < Duration::from_millis(1) {
                "met"
            } else {
                "MISSED"
            },
            at(&mut times.1, 0.99),
            at(&mut times.0, 0.99),
        ));
        if let Some(row) = row {
            harness::note(&format!(
                "mcp/proxy, {label}: batch medians {:.0} ns against {:.0} ns",
                row.subject.median, row.baseline.median
            ));
        }
    }
    runtime.block_on(async {
        let _ = direct.cancel().await;
        let _ = proxied.cancel().await;
        let _ = forwarded.cancel().await;
        let _ = signed.cancel().await;
    });
}
