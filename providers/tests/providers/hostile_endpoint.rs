//! A hostile or mistyped endpoint against the clients, over a real HTTP server on the
//! loopback interface: answers that never end (one body, one event-stream line, one
//! event's data, a stream of small events) stop at the client's limits with a typed
//! error, and credentials in a base URL never show in `Debug` or an error message.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{Reply, Server};
use tooltrust::agent::{ChatMessage, ModelRequest};
use tooltrust_providers::{
    AnthropicClient, ApiKey, HttpOptions, OpenAiClient, ProviderError, SizeLimit,
};

const MIB: usize = 1 << 20;

/// Most a server can have sent past a limit before the client's refusal closes the
/// connection: the sockets' and the HTTP stacks' buffers, far below an endless body.
const SLACK: usize = 32 * MIB;

/// The tests' options: a short timeout, so that a client reading an endless body
/// without a limit fails (with the wrong error) before it holds gigabytes.
fn fast_http() -> HttpOptions {
    common::fast_http().timeout(Duration::from_secs(2))
}

fn request() -> ModelRequest {
    ModelRequest {
        system: "You are a helpful assistant.".into(),
        messages: vec![ChatMessage::User {
            content: "Hello".into(),
        }],
        tools: Vec::new(),
    }
}

fn openai(server: &Server, stream: bool, http: HttpOptions) -> OpenAiClient {
    OpenAiClient::builder("gpt-4o-mini")
        .base_url(format!("{}/v1", server.base))
        .api_key(ApiKey::new("sk-test"))
        .stream(stream)
        .http(http)
        .build()
        .unwrap()
}

/// The limit `error` reports, or a panic naming the error.
fn exceeded(error: ProviderError) -> (SizeLimit, usize) {
    match error {
        ProviderError::TooLarge { limit, bytes } => (limit, bytes),
        other => panic!("expected TooLarge, got {other:?}"),
    }
}

/// Asserts that the server stopped sending near `limit` bytes (the client hung up), not
/// after the whole endless body.
fn assert_stopped_near(sent: &Arc<AtomicUsize>, limit: usize) {
    let sent = sent.load(Ordering::Relaxed);
    assert!(
        sent <= limit + SLACK,
        "the server sent {sent} bytes for a {limit}-byte limit"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_json_answer_stops_at_the_body_limit() {
    let (reply, sent) = Reply::endless("application/json", "{\"id\":\"", "x".repeat(64 * 1024));
    let server = Server::start(vec![reply]).await;
    let client = openai(&server, false, fast_http().max_body(MIB));
    let error = client.complete(&request()).await.unwrap_err();
    assert_eq!(exceeded(error), (SizeLimit::Body, MIB));
    assert_stopped_near(&sent, MIB);
    assert_eq!(server.received().len(), 1, "a limit is not retried");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_body_limit_holds_without_configuration() {
    let (reply, sent) = Reply::endless("application/json", "[", "0,".repeat(32 * 1024));
    let server = Server::start(vec![reply]).await;
    // Only the timeout and retries of the tests; the limits are the defaults.
    let client = openai(&server, false, fast_http());
    let error = client.complete(&request()).await.unwrap_err();
    assert_eq!(
        exceeded(error),
        (SizeLimit::Body, HttpOptions::DEFAULT_MAX_BODY)
    );
    assert_stopped_near(&sent, HttpOptions::DEFAULT_MAX_BODY);
}

#[tokio::test]
async fn a_declared_length_over_the_limit_is_refused_before_the_body_is_read() {
    // The body stalls after its first bytes: a client that read it would time out.
    let server = Server::start(vec![
        Reply::stalled("application/json", "{").header("content-length", (512 * MIB).to_string()),
    ])
    .await;
    let client = openai(
        &server,
        false,
        fast_http().max_body(MIB).timeout(Duration::from_secs(30)),
    );
    let error = tokio::time::timeout(Duration::from_secs(10), client.complete(&request()))
        .await
        .expect("refused at the headers, not after a read")
        .unwrap_err();
    assert_eq!(exceeded(error), (SizeLimit::Body, MIB));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_event_stream_line_stops_at_the_line_limit() {
    let (reply, sent) = Reply::endless("text/event-stream", "data: ", "x".repeat(64 * 1024));
    let server = Server::start(vec![reply]).await;
    let client = openai(&server, true, fast_http().max_line(MIB));
    let error = client.complete(&request()).await.unwrap_err();
    assert_eq!(exceeded(error), (SizeLimit::Line, MIB));
    assert_stopped_near(&sent, MIB);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_line_limit_holds_without_configuration() {
    let (reply, sent) = Reply::endless("text/event-stream", "data: ", "x".repeat(64 * 1024));
    let server = Server::start(vec![reply]).await;
    let client = openai(&server, true, fast_http());
    let error = client.complete(&request()).await.unwrap_err();
    assert_eq!(
        exceeded(error),
        (SizeLimit::Line, HttpOptions::DEFAULT_MAX_LINE)
    );
    assert_stopped_near(&sent, HttpOptions::DEFAULT_MAX_LINE);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_of_endless_short_data_lines_stops_at_the_event_data_limit() {
    let line = format!("data: {}\n", "x".repeat(1000));
    let (reply, sent) = Reply::endless("text/event-stream", "", line.repeat(64));
    let server = Server::start(vec![reply]).await;
    let client = openai(&server, true, fast_http().max_event_data(MIB));
    let error = client.complete(&request()).await.unwrap_err();
    assert_eq!(exceeded(error), (SizeLimit::EventData, MIB));
    assert_stopped_near(&sent, MIB);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_stream_of_small_events_stops_at_the_body_limit() {
    // Each event is valid and adds text to the answer, which the client would keep.
    let event = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\
                 \"choices\":[{\"index\":0,\"delta\":{\"content\":\"more \"},\
                 \"finish_reason\":null}]}\n\n";
    let (reply, sent) = Reply::endless("text/event-stream", "", event.repeat(256));
    let server = Server::start(vec![reply]).await;
    let client = openai(&server, true, fast_http().max_body(2 * MIB));
    let error = client.complete(&request()).await.unwrap_err();
    assert_eq!(exceeded(error), (SizeLimit::Body, 2 * MIB));
    assert_stopped_near(&sent, 2 * MIB);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_anthropic_client_has_the_same_limits() {
    let (line, line_sent) = Reply::endless(
        "text/event-stream",
        "event: content_block_delta\ndata: ",
        "x".repeat(64 * 1024),
    );
    let (body, body_sent) = Reply::endless("application/json", "{", " ".repeat(64 * 1024));
    let server = Server::start(vec![line, body]).await;
    let client = |stream, http| {
        AnthropicClient::builder("claude-sonnet-4-5")
            .base_url(&server.base)
            .api_key(ApiKey::new("sk-ant-test"))
            .stream(stream)
            .http(http)
            .build()
            .unwrap()
    };
    let error = client(true, fast_http().max_line(MIB))
        .complete(&request())
        .await
        .unwrap_err();
    assert_eq!(exceeded(error), (SizeLimit::Line, MIB));
    assert_stopped_near(&line_sent, MIB);
    let error = client(false, fast_http().max_body(MIB))
        .complete(&request())
        .await
        .unwrap_err();
    assert_eq!(exceeded(error), (SizeLimit::Body, MIB));
    assert_stopped_near(&body_sent, MIB);
}

#[test]
fn credentials_in_a_base_url_are_redacted_from_debug() {
    let url = "http://alice:hunter2-secret@127.0.0.1:9/v1";
    let openai = OpenAiClient::builder("gpt-4o-mini").base_url(url);
    let anthropic = AnthropicClient::builder("claude-sonnet-4-5").base_url(url);
    let shown = [
        format!("{openai:?}"),
        format!("{:?}", openai.build().unwrap()),
        format!("{anthropic:?}"),
        format!("{:?}", anthropic.build().unwrap()),
    ];
    for shown in shown {
        assert!(!shown.contains("hunter2-secret"), "{shown}");
        assert!(!shown.contains("alice"), "{shown}");
        assert!(shown.contains("[redacted]@127.0.0.1:9"), "{shown}");
    }
    // A user name alone can be a token.
    let token = OpenAiClient::builder("gpt-4o-mini")
        .base_url("https://tok_abcdef@example.test/v1")
        .build()
        .unwrap();
    let shown = format!("{token:?}");
    assert!(!shown.contains("tok_abcdef"), "{shown}");
}

#[test]
fn credentials_in_a_refused_base_url_are_redacted_from_the_error() {
    for url in [
        "ftp://alice:hunter2-secret@example.test/v1",
        "http://alice:hunter2-secret@exa mple.test/v1",
    ] {
        let error = OpenAiClient::builder("gpt-4o-mini")
            .base_url(url)
            .build()
            .unwrap_err();
        for shown in [error.to_string(), format!("{error:?}")] {
            assert!(!shown.contains("hunter2-secret"), "{shown}");
            assert!(shown.contains("[redacted]@"), "{shown}");
        }
    }
}
