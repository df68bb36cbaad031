//! The OpenAI-compatible client against a real HTTP server on the loopback interface,
//! replaying the responses OpenAI documents: plain answers, tool calls, parallel and
//! streamed ones, refusals, cut-offs, rate limits, server errors and broken answers.

use crate::common;

use std::time::Duration;

use common::{Reply, Server, fast_http, fixture};
use tooltrust::agent::{ChatMessage, ModelRequest};
use tooltrust::{Model, ToolCall, tool, tools};
use tooltrust_providers::{
    ApiKey, ConfigError, HttpOptions, OpenAiClient, ProviderError, RefusalKind, RetryPolicy, Stop,
};

/// Get the current weather in a given location
#[tool(untrusted, read_only)]
fn get_current_weather(
    /// The city and state, e.g. San Francisco, CA
    location: String,
    unit: Option<String>,
) -> String {
    format!("{location} {unit:?}")
}

const KEY: &str = "sk-test-5f1d0c9e7a3b4d2e8f6a1c0b9d8e7f6a";

fn request() -> ModelRequest {
    ModelRequest {
        system: "You are a helpful assistant.".into(),
        messages: vec![ChatMessage::User {
            content: "What's the weather like in Boston and Paris?".into(),
        }],
        tools: tools![get_current_weather].unwrap().catalog().to_vec(),
    }
}

fn client(server: &Server) -> OpenAiClient {
    OpenAiClient::builder("gpt-4o-mini")
        .base_url(format!("{}/v1", server.base))
        .api_key(ApiKey::new(KEY))
        .http(fast_http())
        .build()
        .unwrap()
}

fn streaming_client(server: &Server) -> OpenAiClient {
    OpenAiClient::builder("gpt-4o-mini")
        .base_url(format!("{}/v1", server.base))
        .api_key(ApiKey::new(KEY))
        .http(fast_http())
        .stream(true)
        .build()
        .unwrap()
}

/// The provider's error behind a model error.
fn provider_error(error: tooltrust::agent::ModelError) -> ProviderError {
    let source = error.provider_error();
    let Some(error) = source.downcast_ref::<ProviderError>() else {
        panic!("not a provider error: {source}");
    };
    // `ProviderError` is not `Clone` (it holds reqwest's errors); rebuild what the tests
    // compare.
    match error {
        ProviderError::Refusal { kind, message } => ProviderError::Refusal {
            kind: *kind,
            message: message.clone(),
        },
        ProviderError::Length { content } => ProviderError::Length {
            content: content.clone(),
        },
        other => panic!("unexpected provider error: {other:?}"),
    }
}

#[tokio::test]
async fn a_plain_answer_is_posted_and_read() {
    let server = Server::start(vec![Reply::json(200, fixture("openai_response_text.json"))]).await;
    let client = client(&server);
    let message = client.respond(&request()).await.unwrap();
    assert_eq!(
        message.content.as_deref(),
        Some("\n\nHello there, how may I assist you today?")
    );
    assert!(message.tool_calls.is_empty());

    let received = server.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].uri, "/v1/chat/completions");
    assert_eq!(
        received[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(received[0].header("content-type"), Some("application/json"));
    let body = &received[0].body;
    assert_eq!(body["model"], "gpt-4o-mini");
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(body["tools"][0]["function"]["name"], "get_current_weather");
    assert!(body.get("stream").is_none());
    assert!(body["tools"][0]["function"].get("strict").is_none());
}

#[tokio::test]
async fn parallel_tool_calls_come_back_with_their_ids_and_argument_text() {
    let server = Server::start(vec![Reply::json(
        200,
        fixture("openai_response_tool_calls.json"),
    )])
    .await;
    let completion = client(&server).complete(&request()).await.unwrap();
    assert_eq!(completion.finish_reason.as_deref(), Some("tool_calls"));
    let message = completion.into_message().unwrap();
    let ids: Vec<_> = message
        .tool_calls
        .iter()
        .map(|call| call.id.as_str())
        .collect();
    assert_eq!(ids, ["call_abc123", "call_def456"]);
    assert_eq!(
        message.tool_calls[0].arguments,
        "{\n\"location\": \"Boston, MA\"\n}"
    );
    let calls: Vec<ToolCall> = message.calls().into_iter().map(Result::unwrap).collect();
    assert_eq!(
        calls[1].canonical(),
        r#"{"args":{"location":"Paris, France","unit":"celsius"},"tool":"get_current_weather"}"#
    );
}

#[tokio::test]
async fn strict_sends_strict_on_every_function_tool() {
    let server = Server::start(vec![Reply::json(200, fixture("openai_response_text.json"))]).await;
    let client = OpenAiClient::builder("gpt-4o-mini")
        .base_url(format!("{}/v1/", server.base))
        .strict(true)
        .http(fast_http())
        .build()
        .unwrap();
    client.respond(&request()).await.unwrap();
    let received = server.received();
    assert_eq!(
        received[0].uri, "/v1/chat/completions",
        "a trailing slash is fine"
    );
    assert_eq!(received[0].body["tools"][0]["function"]["strict"], true);
    assert_eq!(
        received[0].header("authorization"),
        None,
        "no key, no header"
    );
}

#[tokio::test]
async fn a_streamed_answer_is_assembled() {
    let server = Server::start(vec![Reply::sse(&fixture("openai_stream_text.sse"))]).await;
    let completion = streaming_client(&server)
        .complete(&request())
        .await
        .unwrap();
    assert_eq!(completion.stop, Stop::Complete);
    assert_eq!(completion.usage.input_tokens, Some(19));
    assert_eq!(completion.usage.output_tokens, Some(10));
    assert_eq!(completion.id.as_deref(), Some("chatcmpl-7f8b"));
    assert_eq!(
        completion.into_message().unwrap().content.as_deref(),
        Some("The kettle reviews are good.")
    );
    let body = &server.received()[0].body;
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
}

#[tokio::test]
async fn streamed_parallel_tool_call_deltas_are_assembled_by_index() {
    let server = Server::start(vec![
        Reply::sse(&fixture("openai_stream_tool_calls.sse")),
        Reply::json(200, fixture("openai_response_tool_calls.json")),
    ])
    .await;
    let streamed = streaming_client(&server).respond(&request()).await.unwrap();
    assert_eq!(streamed.content, None);
    let calls: Vec<_> = streamed
        .tool_calls
        .iter()
        .map(|call| {
            (
                call.id.as_str(),
                call.name.as_str(),
                call.arguments.as_str(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            (
                "call_DdmO9pD3xa9XTPNJ32zg2hcA",
                "get_current_weather",
                r#"{"location":"Boston, MA"}"#
            ),
            (
                "call_ABC0u7Ot6Ug0hQHj2BL3Cpo5",
                "get_current_weather",
                r#"{"unit": "celsius", "location": "Paris, France"}"#
            ),
        ]
    );
    // The same calls answered whole have the same checksums: streaming changes nothing
    // the gate sees.
    let whole = client(&server).respond(&request()).await.unwrap();
    let checksums = |message: &tooltrust::agent::AssistantMessage| -> Vec<String> {
        message
            .calls()
            .into_iter()
            .map(|call| call.unwrap().checksum().to_string())
            .collect()
    };
    assert_eq!(checksums(&streamed), checksums(&whole));
}

#[tokio::test]
async fn interleaved_fragments_and_repeated_ids_are_assembled() {
    // Two calls whose fragments alternate, the id and name repeated on every fragment
    // (as some OpenAI-compatible servers send them).
    let chunk = |index: u32, id: &str, name: &str, arguments: &str| {
        format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":{index},\"id\":\"{id}\",\"type\":\"function\",\"function\":{{\"name\":\"{name}\",\"arguments\":{arguments:?}}}}}]}},\"finish_reason\":null}}]}}\n\n"
        )
    };
    let stream = [
        chunk(0, "a", "get_current_weather", "{\"location\":"),
        chunk(1, "b", "get_current_weather", "{\"location\":"),
        chunk(1, "b", "get_current_weather", "\"Paris\"}"),
        chunk(0, "a", "get_current_weather", "\"Boston\"}"),
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n"
            .into(),
        "data: [DONE]\n\n".into(),
    ]
    .concat();
    let server = Server::start(vec![Reply::sse(&stream)]).await;
    let message = streaming_client(&server).respond(&request()).await.unwrap();
    let calls: Vec<_> = message
        .tool_calls
        .iter()
        .map(|call| (call.id.as_str(), call.arguments.as_str()))
        .collect();
    assert_eq!(
        calls,
        [
            ("a", r#"{"location":"Boston"}"#),
            ("b", r#"{"location":"Paris"}"#)
        ]
    );
}

#[tokio::test]
async fn a_fragment_that_changes_a_calls_id_is_refused() {
    let stream = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"get_current_weather\",\"arguments\":\"{}\"}}]},\"finish_reason\":null}]}\n\n\
                  data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"z\"}]},\"finish_reason\":\"tool_calls\"}]}\n\n\
                  data: [DONE]\n\n";
    let server = Server::start(vec![Reply::sse(stream)]).await;
    let error = streaming_client(&server)
        .complete(&request())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ProviderError::Shape { path, .. } if path.ends_with(".id")),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_server_that_ignores_stream_is_read_whole() {
    let server = Server::start(vec![Reply::json(200, fixture("openai_response_text.json"))]).await;
    let message = streaming_client(&server).respond(&request()).await.unwrap();
    assert!(message.content.unwrap().contains("Hello there"));
}

#[tokio::test]
async fn a_stream_that_ends_early_is_truncated_and_no_call_is_handed_over() {
    let server = Server::start(vec![Reply::sse(&fixture("openai_stream_truncated.sse"))]).await;
    let error = streaming_client(&server)
        .complete(&request())
        .await
        .unwrap_err();
    assert!(
        matches!(error, ProviderError::Truncated { source: None }),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_stream_whose_connection_is_cut_is_truncated() {
    let server = Server::start(vec![Reply::cut_sse(&fixture(
        "openai_stream_truncated.sse",
    ))])
    .await;
    let error = streaming_client(&server)
        .complete(&request())
        .await
        .unwrap_err();
    assert!(
        matches!(error, ProviderError::Truncated { source: Some(_) }),
        "{error:?}"
    );
    assert_eq!(server.received().len(), 1, "a broken answer is not retried");
}

#[tokio::test]
async fn an_error_inside_a_stream_is_typed() {
    let stream = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n\
                  data: {\"error\":{\"message\":\"The server had an error while processing your request.\",\"type\":\"server_error\",\"code\":null}}\n\n";
    let server = Server::start(vec![Reply::sse(stream)]).await;
    let error = streaming_client(&server)
        .complete(&request())
        .await
        .unwrap_err();
    let ProviderError::Stream(api) = error else {
        panic!("{error:?}");
    };
    assert_eq!(api.kind.as_deref(), Some("server_error"));
}

#[tokio::test]
async fn a_refusal_is_a_typed_error() {
    let server = Server::start(vec![
        Reply::json(200, fixture("openai_response_refusal.json")),
        Reply::sse(&fixture("openai_stream_refusal.sse")),
    ])
    .await;
    let expected = "I'm sorry, I cannot assist with that request.";
    let whole = client(&server).respond(&request()).await.unwrap_err();
    assert!(matches!(
        provider_error(whole),
        ProviderError::Refusal { kind: RefusalKind::Model, message: Some(message) } if message == expected
    ));
    let streamed = streaming_client(&server)
        .respond(&request())
        .await
        .unwrap_err();
    assert!(matches!(
        provider_error(streamed),
        ProviderError::Refusal { kind: RefusalKind::Model, message: Some(message) } if message == expected
    ));
}

#[tokio::test]
async fn a_content_filter_stop_is_a_refusal() {
    let server = Server::start(vec![Reply::json(
        200,
        fixture("openai_response_content_filter.json"),
    )])
    .await;
    let error = client(&server).respond(&request()).await.unwrap_err();
    assert!(matches!(
        provider_error(error),
        ProviderError::Refusal {
            kind: RefusalKind::ContentFilter,
            ..
        }
    ));
}

#[tokio::test]
async fn a_length_cut_off_is_a_typed_error_and_its_half_call_never_surfaces() {
    let server = Server::start(vec![Reply::json(
        200,
        fixture("openai_response_length.json"),
    )])
    .await;
    let completion = client(&server).complete(&request()).await.unwrap();
    assert_eq!(completion.stop, Stop::Length);
    assert!(matches!(
        completion.into_message(),
        Err(ProviderError::Length { content: None })
    ));
}

#[tokio::test]
async fn a_429_waits_as_long_as_retry_after_says() {
    let server = Server::start(vec![
        Reply::json(429, fixture("openai_error_rate_limit.json")).header("retry-after", "1"),
        Reply::json(200, fixture("openai_response_text.json")),
    ])
    .await;
    // The client's own backoff is at most 5 ms: only `Retry-After` explains a longer wait.
    let message = client(&server).respond(&request()).await.unwrap();
    assert!(message.content.is_some());
    let received = server.received();
    assert_eq!(received.len(), 2);
    let waited = received[1].at - received[0].at;
    assert!(waited >= Duration::from_secs(1), "waited {waited:?}");
}

#[tokio::test]
async fn retry_after_ms_is_preferred_to_retry_after() {
    let server = Server::start(vec![
        Reply::json(429, fixture("openai_error_rate_limit.json"))
            .header("retry-after-ms", "150")
            .header("retry-after", "30"),
        Reply::json(200, fixture("openai_response_text.json")),
    ])
    .await;
    client(&server).respond(&request()).await.unwrap();
    let received = server.received();
    let waited = received[1].at - received[0].at;
    assert!(
        waited >= Duration::from_millis(150) && waited < Duration::from_secs(30),
        "waited {waited:?}"
    );
}

#[tokio::test]
async fn a_wait_longer_than_the_limit_ends_the_request_with_the_wait() {
    let server = Server::start(vec![
        Reply::json(429, fixture("openai_error_rate_limit.json")).header("retry-after", "120"),
    ])
    .await;
    let error = client(&server).complete(&request()).await.unwrap_err();
    let ProviderError::Status {
        status,
        retry_after,
        error: Some(api),
        attempts,
    } = error
    else {
        panic!("{error:?}");
    };
    assert_eq!(
        (status, retry_after, attempts),
        (429, Some(Duration::from_secs(120)), 1)
    );
    assert_eq!(api.code.as_deref(), Some("rate_limit_exceeded"));
    assert_eq!(server.received().len(), 1);
}

#[tokio::test]
async fn server_errors_are_retried_with_backoff() {
    for status in [500, 502, 503, 504] {
        let server = Server::start(vec![
            Reply::json(status, fixture("openai_error_server.json")),
            Reply::json(status, fixture("openai_error_server.json")),
            Reply::json(200, fixture("openai_response_text.json")),
        ])
        .await;
        client(&server).respond(&request()).await.unwrap();
        assert_eq!(server.received().len(), 3, "{status}");
    }
}

#[tokio::test]
async fn retries_are_bounded() {
    let server = Server::start(vec![
        Reply::json(500, fixture("openai_error_server.json"));
        4
    ])
    .await;
    let error = client(&server).complete(&request()).await.unwrap_err();
    assert!(
        matches!(
            &error,
            ProviderError::Status { status: 500, attempts: 3, error: Some(api), .. }
                if api.kind.as_deref() == Some("server_error")
        ),
        "{error:?}"
    );
    assert_eq!(server.received().len(), 3, "two retries, then the error");
    assert!(error.to_string().contains("500"));

    let server = Server::start(vec![
        Reply::json(500, fixture("openai_error_server.json"));
        2
    ])
    .await;
    let client = OpenAiClient::builder("gpt-4o-mini")
        .base_url(format!("{}/v1", server.base))
        .http(HttpOptions::default().retry(RetryPolicy::none()))
        .build()
        .unwrap();
    client.complete(&request()).await.unwrap_err();
    assert_eq!(server.received().len(), 1, "no retries");
}

#[tokio::test]
async fn client_errors_are_never_retried_and_never_show_the_key() {
    for status in [400, 401, 403, 404] {
        let echo = format!(
            "{{\"error\":{{\"message\":\"Incorrect API key provided: {KEY}.\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"invalid_api_key\"}}}}"
        );
        let server = Server::start(vec![
            Reply::json(status, echo),
            Reply::json(200, fixture("openai_response_text.json")),
        ])
        .await;
        let error = client(&server).complete(&request()).await.unwrap_err();
        assert_eq!(server.received().len(), 1, "{status} is not retried");
        let ProviderError::Status {
            status: got,
            error: Some(api),
            attempts: 1,
            ..
        } = &error
        else {
            panic!("{error:?}");
        };
        assert_eq!(*got, status);
        assert_eq!(api.code.as_deref(), Some("invalid_api_key"));
        assert_eq!(
            api.message.as_deref(),
            Some("Incorrect API key provided: [redacted].")
        );
        assert!(!error.to_string().contains(KEY));
        assert!(!format!("{error:?}").contains(KEY));
    }
}

#[tokio::test]
async fn the_key_never_appears_in_debug() {
    let server = Server::start(Vec::new()).await;
    let client = client(&server);
    assert!(!format!("{client:?}").contains(KEY));
    assert!(format!("{client:?}").contains("[redacted]"));
    assert_eq!(format!("{:?}", ApiKey::new(KEY)), "ApiKey([redacted])");
}

#[tokio::test]
async fn malformed_json_is_a_typed_error() {
    let server = Server::start(vec![
        Reply::json(200, r#"{"choices": [{"index": 0, "message": {"#),
        Reply::json(
            200,
            r#"{"choices": [], "choices": [{"index": 0, "message": {"content": "x"}}]}"#,
        ),
        Reply::json(200, r#"{"object": "chat.completion"}"#),
        Reply::sse("data: {\"choices\": [\n\n"),
    ])
    .await;
    let http = HttpOptions::default().retry(RetryPolicy::none());
    let whole = OpenAiClient::builder("m")
        .base_url(&server.base)
        .http(http)
        .build()
        .unwrap();
    let errors = [
        whole.complete(&request()).await.unwrap_err(),
        whole.complete(&request()).await.unwrap_err(),
        whole.complete(&request()).await.unwrap_err(),
    ];
    assert!(
        matches!(errors[0], ProviderError::Json(_)),
        "{:?}",
        errors[0]
    );
    assert!(
        matches!(
            errors[1],
            ProviderError::Json(tooltrust::canonical::JsonError::DuplicateKey { .. })
        ),
        "{:?}",
        errors[1]
    );
    assert!(
        matches!(errors[2], ProviderError::Shape { .. }),
        "{:?}",
        errors[2]
    );
    let streamed = OpenAiClient::builder("m")
        .base_url(&server.base)
        .http(http)
        .stream(true)
        .build()
        .unwrap();
    let error = streamed.complete(&request()).await.unwrap_err();
    assert!(matches!(error, ProviderError::Json(_)), "{error:?}");
}

#[tokio::test]
async fn a_slow_answer_times_out_and_is_not_retried() {
    let server = Server::start(vec![
        Reply::json(200, fixture("openai_response_text.json")).delay(Duration::from_secs(5)),
    ])
    .await;
    let client = OpenAiClient::builder("gpt-4o-mini")
        .base_url(&server.base)
        .http(fast_http().timeout(Duration::from_secs(2)))
        .build()
        .unwrap();
    let error = client.complete(&request()).await.unwrap_err();
    // Long enough for the server to have logged the request on a loaded machine; the
    // answer comes only after 5 s.
    assert!(
        matches!(error, ProviderError::Timeout { after, .. } if after == Duration::from_secs(2)),
        "{error:?}"
    );
    assert_eq!(server.received().len(), 1);
}

#[tokio::test]
async fn connections_closed_before_an_answer_are_retried() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let accepted = tokio::spawn(async move {
        let mut count = 0;
        // Accepts and drops three connections without a byte of answer.
        while count < 3 {
            let (stream, _) = listener.accept().await.unwrap();
            drop(stream);
            count += 1;
        }
        count
    });
    let client = OpenAiClient::builder("gpt-4o-mini")
        .base_url(&base)
        .http(fast_http())
        .build()
        .unwrap();
    let error = client.complete(&request()).await.unwrap_err();
    assert!(
        matches!(error, ProviderError::Http { attempts: 3, .. }),
        "{error:?}"
    );
    assert_eq!(accepted.await.unwrap(), 3);
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let elsewhere =
        Server::start(vec![Reply::json(200, fixture("openai_response_text.json"))]).await;
    let server = Server::start(vec![Reply::json(307, "{}").header(
        "location",
        format!("{}/v1/chat/completions", elsewhere.base),
    )])
    .await;
    let error = client(&server).complete(&request()).await.unwrap_err();
    assert!(
        matches!(error, ProviderError::Status { status: 307, .. }),
        "{error:?}"
    );
    assert!(elsewhere.received().is_empty(), "the key went nowhere else");
}

#[tokio::test]
async fn azure_takes_the_key_in_api_key_and_the_version_in_the_query() {
    let server = Server::start(vec![Reply::json(200, fixture("openai_response_text.json"))]).await;
    let client = OpenAiClient::builder("gpt-4o")
        .base_url(format!("{}/openai/deployments/my-gpt-4o", server.base))
        .api_key(ApiKey::new(KEY))
        .azure("2024-10-21")
        .http(fast_http())
        .build()
        .unwrap();
    assert!(
        client
            .endpoint()
            .ends_with("/openai/deployments/my-gpt-4o/chat/completions?api-version=2024-10-21")
    );
    client.respond(&request()).await.unwrap();
    let received = &server.received()[0];
    assert_eq!(
        received.uri,
        "/openai/deployments/my-gpt-4o/chat/completions?api-version=2024-10-21"
    );
    assert_eq!(received.header("api-key"), Some(KEY));
    assert_eq!(received.header("authorization"), None);
}

#[test]
fn bad_configuration_is_a_typed_error() {
    let build = |url: &str| {
        OpenAiClient::builder("m")
            .base_url(url)
            .build()
            .unwrap_err()
    };
    assert!(matches!(build("not a url"), ConfigError::BaseUrl { .. }));
    assert!(matches!(
        build("ftp://127.0.0.1/v1"),
        ConfigError::Scheme { .. }
    ));
    assert!(matches!(
        build("mailto:ann@example.com"),
        ConfigError::Scheme { .. }
    ));
    let error = OpenAiClient::builder("m")
        .api_key(ApiKey::new("sk-line\nbreak"))
        .build()
        .unwrap_err();
    assert!(matches!(error, ConfigError::KeyHeader));
    assert!(!error.to_string().contains("sk-line"));
    assert!(matches!(
        ApiKey::from_env("TOOLTRUST_PROVIDERS_TEST_VARIABLE_NEVER_SET"),
        Err(ConfigError::MissingKey { var }) if var == "TOOLTRUST_PROVIDERS_TEST_VARIABLE_NEVER_SET"
    ));
}
