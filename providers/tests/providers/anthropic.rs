//! The Anthropic client against a real HTTP server on the loopback interface, replaying
//! the responses Anthropic documents: plain answers, tool use (parallel and streamed),
//! refusals, cut-offs, overload and broken answers.

use crate::common;

use std::time::Duration;

use common::{Reply, Server, fast_http, fixture};
use tooltrust::agent::{ChatMessage, ModelRequest};
use tooltrust::{Model, ToolCall, tool, tools};
use tooltrust_providers::{AnthropicClient, ApiKey, ProviderError, RefusalKind, Stop};

/// Get the current weather in a given location
#[tool(untrusted, read_only)]
fn get_weather(
    /// The city and state, e.g. San Francisco, CA
    location: String,
    unit: Option<String>,
) -> String {
    format!("{location} {unit:?}")
}

const KEY: &str = "sk-ant-test-0f9e8d7c6b5a4f3e2d1c0b9a";

fn request() -> ModelRequest {
    ModelRequest {
        system: "You are a helpful assistant.".into(),
        messages: vec![ChatMessage::User {
            content: "What is the weather like in San Francisco and Paris?".into(),
        }],
        tools: tools![get_weather].unwrap().catalog().to_vec(),
    }
}

fn client(server: &Server, stream: bool) -> AnthropicClient {
    AnthropicClient::builder("claude-sonnet-4-5")
        .base_url(&server.base)
        .api_key(ApiKey::new(KEY))
        .max_tokens(1024)
        .stream(stream)
        .http(fast_http())
        .build()
        .unwrap()
}

fn canonical_calls(message: &tooltrust::agent::AssistantMessage) -> Vec<String> {
    message
        .calls()
        .into_iter()
        .map(|call| {
            call.map(|call: ToolCall| call.canonical().to_owned())
                .unwrap()
        })
        .collect()
}

#[tokio::test]
async fn a_plain_answer_is_posted_and_read() {
    let server = Server::start(vec![Reply::json(
        200,
        fixture("anthropic_response_text.json"),
    )])
    .await;
    let completion = client(&server, false).complete(&request()).await.unwrap();
    assert_eq!(
        completion.usage.input_tokens,
        Some(2195),
        "cache reads count as input"
    );
    assert_eq!(completion.usage.output_tokens, Some(503));
    assert_eq!(completion.model.as_deref(), Some("claude-sonnet-4-5"));
    let message = completion.into_message().unwrap();
    assert_eq!(message.content.as_deref(), Some("Hi! My name is Claude."));

    let received = &server.received()[0];
    assert_eq!(received.uri, "/v1/messages");
    assert_eq!(received.header("x-api-key"), Some(KEY));
    assert_eq!(received.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(received.header("authorization"), None);
    assert_eq!(received.body["max_tokens"], 1024);
    assert_eq!(received.body["system"], "You are a helpful assistant.");
    assert_eq!(received.body["tools"][0]["name"], "get_weather");
    assert!(received.body.get("stream").is_none());
}

#[tokio::test]
async fn parallel_tool_use_is_read_as_canonical_calls() {
    let server = Server::start(vec![Reply::json(
        200,
        fixture("anthropic_response_parallel_tool_use.json"),
    )])
    .await;
    let message = client(&server, false).respond(&request()).await.unwrap();
    assert_eq!(message.content.as_deref(), Some("I'll check both cities."));
    let ids: Vec<_> = message
        .tool_calls
        .iter()
        .map(|call| call.id.as_str())
        .collect();
    assert_eq!(ids, ["toolu_01", "toolu_02"]);
    assert_eq!(
        canonical_calls(&message),
        [
            r#"{"args":{"location":"San Francisco, CA"},"tool":"get_weather"}"#,
            r#"{"args":{"location":"Paris, France","unit":"celsius"},"tool":"get_weather"}"#,
        ]
    );
}

#[tokio::test]
async fn streamed_tool_use_is_assembled_from_json_fragments() {
    let server = Server::start(vec![Reply::sse(&fixture("anthropic_stream_tool_use.sse"))]).await;
    let client = AnthropicClient::builder("claude-sonnet-4-5")
        .base_url(&server.base)
        .stream(true)
        .strict(true)
        .http(fast_http())
        .build()
        .unwrap();
    let completion = client.complete(&request()).await.unwrap();
    assert_eq!(completion.stop, Stop::Complete);
    assert_eq!(completion.finish_reason.as_deref(), Some("tool_use"));
    assert_eq!(completion.usage.input_tokens, Some(472));
    assert_eq!(completion.usage.output_tokens, Some(89));
    assert_eq!(
        completion.id.as_deref(),
        Some("msg_014p7gG3wDgGV9EUtLvnow3U")
    );
    let message = completion.into_message().unwrap();
    assert_eq!(
        message.content.as_deref(),
        Some("Okay, let's check the weather for San Francisco and Paris:")
    );
    let ids: Vec<_> = message
        .tool_calls
        .iter()
        .map(|call| call.id.as_str())
        .collect();
    assert_eq!(
        ids,
        [
            "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            "toolu_02Xq8Jt1Y2Zt3Wd4Ve5Uf6Tg"
        ]
    );
    // The fragments' input, canonical, exactly as a whole answer's input is kept.
    assert_eq!(
        message.tool_calls[0].arguments,
        r#"{"location":"San Francisco, CA","unit":"fahrenheit"}"#
    );
    assert_eq!(
        canonical_calls(&message)[1],
        r#"{"args":{"location":"Paris, France","unit":"celsius"},"tool":"get_weather"}"#
    );
    let body = &server.received()[0].body;
    assert_eq!(body["stream"], true);
    assert_eq!(body["tools"][0]["strict"], true);
}

#[tokio::test]
async fn a_stream_that_ends_early_is_truncated() {
    let server = Server::start(vec![
        Reply::sse(&fixture("anthropic_stream_truncated.sse")),
        Reply::cut_sse(&fixture("anthropic_stream_truncated.sse")),
    ])
    .await;
    let client = client(&server, true);
    let ended = client.complete(&request()).await.unwrap_err();
    assert!(
        matches!(ended, ProviderError::Truncated { source: None }),
        "{ended:?}"
    );
    let cut = client.complete(&request()).await.unwrap_err();
    assert!(
        matches!(cut, ProviderError::Truncated { source: Some(_) }),
        "{cut:?}"
    );
}

#[tokio::test]
async fn an_error_event_inside_a_stream_is_typed() {
    let server = Server::start(vec![Reply::sse(&fixture("anthropic_stream_error.sse"))]).await;
    let error = client(&server, true)
        .complete(&request())
        .await
        .unwrap_err();
    let ProviderError::Stream(api) = error else {
        panic!("{error:?}");
    };
    assert_eq!(api.kind.as_deref(), Some("overloaded_error"));
    assert_eq!(api.message.as_deref(), Some("Overloaded"));
}

#[tokio::test]
async fn streamed_input_that_is_not_acceptable_json_is_refused() {
    let stream = fixture("anthropic_stream_tool_use.sse").replace(
        r#""partial_json":"\"location\": \"Paris, France\"}""#,
        r#""partial_json":"\"unit\": \"kelvin\"}""#,
    );
    let server = Server::start(vec![Reply::sse(&stream)]).await;
    let error = client(&server, true)
        .complete(&request())
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            ProviderError::Json(tooltrust::canonical::JsonError::DuplicateKey { .. })
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_refusal_and_a_max_tokens_stop_are_typed_errors() {
    let server = Server::start(vec![
        Reply::json(200, fixture("anthropic_response_refusal.json")),
        Reply::json(200, fixture("anthropic_response_max_tokens.json")),
    ])
    .await;
    let client = client(&server, false);
    let refusal = client
        .complete(&request())
        .await
        .unwrap()
        .into_message()
        .unwrap_err();
    assert!(
        matches!(
            &refusal,
            ProviderError::Refusal { kind: RefusalKind::Model, message: Some(text) }
                if text == "I can't help with"
        ),
        "{refusal:?}"
    );
    assert!(
        !refusal.to_string().contains("help"),
        "no model text in Display"
    );
    let error = client.respond(&request()).await.unwrap_err();
    assert!(matches!(
        error.provider_error().downcast_ref::<ProviderError>(),
        Some(ProviderError::Length { content: Some(text) }) if text == "The kettle reviews say that"
    ));
}

#[tokio::test]
async fn overload_is_retried_and_honours_retry_after() {
    let server = Server::start(vec![
        Reply::json(529, fixture("anthropic_error_overloaded.json")).header("retry-after", "1"),
        Reply::json(200, fixture("anthropic_response_text.json")),
    ])
    .await;
    client(&server, false).respond(&request()).await.unwrap();
    let received = server.received();
    assert_eq!(received.len(), 2);
    let waited = received[1].at - received[0].at;
    assert!(waited >= Duration::from_secs(1), "waited {waited:?}");
}

#[tokio::test]
async fn an_unexpected_stop_reason_is_refused() {
    let body = fixture("anthropic_response_text.json").replace("end_turn", "pause_turn");
    let server = Server::start(vec![Reply::json(200, body)]).await;
    let error = client(&server, false)
        .respond(&request())
        .await
        .unwrap_err();
    assert!(matches!(
        error.provider_error().downcast_ref::<ProviderError>(),
        Some(ProviderError::UnexpectedStop { reason }) if reason == "pause_turn"
    ));
}

#[tokio::test]
async fn an_error_body_is_shown_with_its_type_and_message() {
    let server = Server::start(vec![
        Reply::json(400, r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}"#),
    ])
    .await;
    let error = client(&server, false)
        .complete(&request())
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "the provider answered HTTP 400 (invalid_request_error): max_tokens: Field required"
    );
}
