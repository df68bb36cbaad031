//! The span around each model request: the OpenTelemetry GenAI attribute names, the
//! response's values recorded, and no content (prompt, answer, arguments, key) anywhere.
//!
//! A binary of its own (the other client tests share `tests/providers/`): each test runs
//! its requests under a subscriber of its own, and tracing caches each callsite's interest
//! process-wide, so a test on another thread meeting the same callsites could leave them
//! disabled for it.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use common::{Reply, Server, fast_http, fixture};
use tooltrust::agent::{ChatMessage, ModelRequest};
use tooltrust::{Model, tool, tools};
use tooltrust_providers::{AnthropicClient, ApiKey, OpenAiClient};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Registry;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// Get the current weather in a given location
#[tool(untrusted, read_only)]
fn get_current_weather(location: String) -> String {
    location
}

const KEY: &str = "sk-test-telemetry-3c2b1a09f8e7d6c5";
const PROMPT: &str = "PROMPT-CANARY-41d7: what is the weather in Boston?";
const SYSTEM: &str = "SYSTEM-CANARY-9a2e: be brief.";

/// A captured span or event: its name, level and fields.
#[derive(Debug, Clone)]
struct Captured {
    name: String,
    level: Level,
    fields: BTreeMap<String, String>,
}

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Captured>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: Subscriber> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, _id: &Id, _ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().push(Captured {
            name: attrs.metadata().name().to_owned(),
            level: *attrs.metadata().level(),
            fields,
        });
    }

    fn on_record(&self, _id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        // One span per request in these tests: the latest span is the one recorded.
        let mut captured = self.0.lock().unwrap();
        if let Some(span) = captured.iter_mut().rev().find(|c| c.name == "gen_ai.chat") {
            values.record(&mut Fields(&mut span.fields));
        }
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().push(Captured {
            name: event.metadata().name().to_owned(),
            level: *event.metadata().level(),
            fields,
        });
    }
}

fn request() -> ModelRequest {
    ModelRequest {
        system: SYSTEM.into(),
        messages: vec![ChatMessage::User {
            content: PROMPT.into(),
        }],
        tools: tools![get_current_weather].unwrap().catalog().to_vec(),
    }
}

/// Runs `run` under a subscriber of its own and returns what it captured.
async fn capture<F: Future<Output = ()>>(run: F) -> Vec<Captured> {
    use tracing::instrument::WithSubscriber;
    let capture = Capture::default();
    let subscriber = Registry::default().with(capture.clone());
    run.with_subscriber(subscriber).await;
    capture.0.lock().unwrap().clone()
}

fn assert_no_content(captured: &[Captured], secrets: &[&str]) {
    for item in captured {
        for (name, value) in &item.fields {
            for secret in secrets {
                assert!(
                    !value.contains(secret),
                    "{} field {name} ({}) holds {secret:?}: {value}",
                    item.name,
                    item.level
                );
            }
        }
    }
}

#[tokio::test]
async fn a_request_span_carries_the_genai_attributes_and_no_content() {
    let server = Server::start(vec![
        Reply::json(500, fixture("openai_error_server.json")),
        Reply::sse(&fixture("openai_stream_tool_calls.sse")),
    ])
    .await;
    let client = OpenAiClient::builder("gpt-4o-mini")
        .base_url(format!("{}/v1", server.base))
        .api_key(ApiKey::new(KEY))
        .stream(true)
        .http(fast_http())
        .build()
        .unwrap();
    let captured = capture(async {
        client.respond(&request()).await.unwrap();
    })
    .await;

    let span = captured
        .iter()
        .find(|c| c.name == "gen_ai.chat")
        .expect("a span per request");
    assert_eq!(span.level, Level::INFO);
    let field = |name: &str| span.fields.get(name).map(String::as_str);
    assert_eq!(field("gen_ai.operation.name"), Some("chat"));
    assert_eq!(field("gen_ai.provider.name"), Some("openai"));
    assert_eq!(field("gen_ai.system"), Some("openai"));
    assert_eq!(field("gen_ai.request.model"), Some("gpt-4o-mini"));
    assert_eq!(field("server.address"), Some("127.0.0.1"));
    assert_eq!(field("gen_ai.response.id"), Some("chatcmpl-7f8b"));
    assert_eq!(field("gen_ai.response.model"), Some("gpt-4o-mini"));
    assert_eq!(
        field("gen_ai.response.finish_reasons"),
        Some(r#"["tool_calls"]"#)
    );
    assert_eq!(field("gen_ai.usage.input_tokens"), Some("82"));
    assert_eq!(field("gen_ai.usage.output_tokens"), Some("35"));
    assert_eq!(field("error.type"), None);

    let retry = captured
        .iter()
        .find(|c| c.fields.contains_key("http.request.resend_count"))
        .expect("the retry is an event");
    assert_eq!(retry.fields["http.response.status_code"], "500");

    // Neither the prompt, the system text, the streamed arguments nor the key.
    assert_no_content(
        &captured,
        &[
            PROMPT,
            SYSTEM,
            "Boston, MA",
            "Paris",
            KEY,
            "PROMPT-CANARY",
            "SYSTEM-CANARY",
        ],
    );
}

#[tokio::test]
async fn a_failed_request_records_its_error_type_only() {
    let server = Server::start(vec![Reply::json(
        200,
        fixture("anthropic_response_refusal.json"),
    )])
    .await;
    let client = AnthropicClient::builder("claude-sonnet-4-5")
        .base_url(&server.base)
        .api_key(ApiKey::new(KEY))
        .max_tokens(512)
        .http(fast_http())
        .build()
        .unwrap();
    let captured = capture(async {
        client.respond(&request()).await.unwrap_err();
    })
    .await;
    let span = captured.iter().find(|c| c.name == "gen_ai.chat").unwrap();
    assert_eq!(span.fields["gen_ai.provider.name"], "anthropic");
    assert_eq!(span.fields["gen_ai.request.max_tokens"], "512");
    assert_eq!(
        span.fields["gen_ai.response.finish_reasons"],
        r#"["refusal"]"#
    );

    let server = Server::start(vec![Reply::json(
        401,
        r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
    )])
    .await;
    let client = AnthropicClient::builder("claude-sonnet-4-5")
        .base_url(&server.base)
        .api_key(ApiKey::new(KEY))
        .http(fast_http())
        .build()
        .unwrap();
    let captured = capture(async {
        client.respond(&request()).await.unwrap_err();
    })
    .await;
    let span = captured.iter().find(|c| c.name == "gen_ai.chat").unwrap();
    assert_eq!(span.fields["error.type"], "status");
    assert_eq!(span.fields["otel.status_code"], "ERROR");
    assert_no_content(
        &captured,
        &[PROMPT, SYSTEM, KEY, "I can't help", "invalid x-api-key"],
    );
}
