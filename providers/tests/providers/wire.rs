//! The wire formats against the shapes the providers document (fixtures in
//! `tests/data/providers`, with the documentation each follows). Moved here from the
//! core's `tests/providers/` with the formats themselves.

use crate::common;
#[path = "../../../runtime/tests/providers/shape.rs"]
mod shape;

use common::{fixture, fixture_json};
use serde_json::json;
use shape::assert_same_shape;
use tooltrust::agent::{AssistantMessage, ChatMessage, ModelRequest, ModelToolCall};
use tooltrust::call::CallErrorReason;
use tooltrust::canonical::JsonError;
use tooltrust::tool::StrictSchemaError;
use tooltrust::{ToolCall, tool, tools};
use tooltrust_providers::{ProviderError, Stop, anthropic, openai};

/// Get the current weather in a given location
#[tool(untrusted, read_only)]
fn get_current_weather(
    /// The city and state, e.g. San Francisco, CA
    location: String,
    unit: Option<String>,
) -> String {
    format!("{location} {unit:?}")
}

/// Get the current weather in a given location
#[tool(untrusted, read_only)]
fn get_weather(
    /// The city and state, e.g. San Francisco, CA
    location: String,
) -> String {
    location
}

fn weather_conversation(
    system: &str,
    user: &str,
    call: ModelToolCall,
    content: Option<&str>,
    answer: &str,
) -> ModelRequest {
    ModelRequest {
        system: system.into(),
        messages: vec![
            ChatMessage::User {
                content: user.into(),
            },
            ChatMessage::Assistant {
                content: content.map(str::to_owned),
                tool_calls: vec![call.clone()],
            },
            ChatMessage::Tool {
                call_id: call.id,
                name: call.name,
                content: answer.into(),
            },
        ],
        tools: Vec::new(),
    }
}

#[test]
fn openai_request_matches_the_documented_shape() {
    let documented = fixture_json("openai_request.json");
    let request = weather_conversation(
        "You are a helpful assistant.",
        "What's the weather like in Boston today?",
        ModelToolCall {
            id: "call_abc123".into(),
            name: "get_current_weather".into(),
            arguments: "{\"location\":\"Boston, MA\"}".into(),
        },
        None,
        "22 degrees",
    );
    assert_eq!(openai::messages(&request), documented["messages"]);

    let registry = tools![get_current_weather].unwrap();
    let request = ModelRequest {
        tools: registry.catalog().to_vec(),
        ..request
    };
    let body = openai::request_body(&request, &openai::RequestOptions::new("gpt-4o")).unwrap();
    assert_same_shape(&documented, &body, "");
    assert_eq!(body["tools"][0]["function"]["name"], "get_current_weather");
    assert_eq!(
        body["tools"][0]["function"]["description"],
        documented["tools"][0]["function"]["description"]
    );
    assert_eq!(
        body["tools"][0]["function"]["parameters"]["required"],
        json!(["location"])
    );
    assert!(body["tools"][0]["function"].get("strict").is_none());
    assert!(body.get("stream").is_none() && body.get("stream_options").is_none());
}

#[test]
fn openai_strict_and_stream_options_reach_the_body() {
    let registry = tools![get_current_weather, get_weather].unwrap();
    let request = ModelRequest {
        system: String::new(),
        messages: Vec::new(),
        tools: registry.catalog().to_vec(),
    };
    let mut options = openai::RequestOptions::new("gpt-4o");
    options.strict = true;
    options.stream = true;
    let body = openai::request_body(&request, &options).unwrap();
    for tool in body["tools"].as_array().unwrap() {
        assert_eq!(tool["function"]["strict"], true, "{tool}");
    }
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    options.stream_usage = false;
    assert!(
        openai::request_body(&request, &options)
            .unwrap()
            .get("stream_options")
            .is_none()
    );
}

/// Tags pages: its arguments hold a map, which strict mode cannot express.
#[tool(untrusted, read_only)]
fn tag_pages(tags: std::collections::HashMap<String, String>) -> String {
    format!("{} tags", tags.len())
}

#[test]
fn strict_mode_sends_the_strict_schema() {
    let registry = tools![get_current_weather].unwrap();
    let request = ModelRequest {
        system: String::new(),
        messages: Vec::new(),
        tools: registry.catalog().to_vec(),
    };
    let mut openai_options = openai::RequestOptions::new("gpt-4o");
    openai_options.strict = true;
    let mut anthropic_options = anthropic::RequestOptions::new("claude-sonnet-4-5");
    anthropic_options.strict = true;
    let openai_body = openai::request_body(&request, &openai_options).unwrap();
    let anthropic_body = anthropic::request_body(&request, &anthropic_options).unwrap();
    for schema in [
        &openai_body["tools"][0]["function"]["parameters"],
        &anthropic_body["tools"][0]["input_schema"],
    ] {
        // The optional `unit` is required and nullable; no other key is allowed.
        assert_eq!(schema["required"], json!(["location", "unit"]), "{schema}");
        assert_eq!(schema["additionalProperties"], json!(false), "{schema}");
        assert_eq!(
            schema["properties"]["unit"]["type"],
            json!(["string", "null"]),
            "{schema}"
        );
        assert_eq!(schema["properties"]["location"]["type"], "string");
    }
    // Not strict: the schema as the catalog holds it, `unit` optional.
    let loose = openai::request_body(&request, &openai::RequestOptions::new("gpt-4o")).unwrap();
    assert_eq!(
        loose["tools"][0]["function"]["parameters"]["required"],
        json!(["location"])
    );
}

#[test]
fn a_tool_without_a_strict_schema_fails_a_strict_request_before_anything_is_sent() {
    let registry = tools![get_weather, tag_pages].unwrap();
    let request = ModelRequest {
        system: String::new(),
        messages: Vec::new(),
        tools: registry.catalog().to_vec(),
    };
    let mut openai_options = openai::RequestOptions::new("gpt-4o");
    let mut anthropic_options = anthropic::RequestOptions::new("claude-sonnet-4-5");
    // Without strict mode the map is sent as the catalog holds it.
    let loose = openai::request_body(&request, &openai_options).unwrap();
    assert_eq!(
        loose["tools"][1]["function"]["parameters"]["properties"]["tags"]["additionalProperties"],
        json!({"type": "string"})
    );
    assert!(anthropic::request_body(&request, &anthropic_options).is_ok());

    openai_options.strict = true;
    anthropic_options.strict = true;
    for error in [
        openai::request_body(&request, &openai_options).unwrap_err(),
        anthropic::request_body(&request, &anthropic_options).unwrap_err(),
        openai::tools(&request.tools, true).unwrap_err(),
    ] {
        match &error {
            ProviderError::StrictSchema { tool, source } => {
                assert_eq!(tool, "tag_pages");
                assert!(matches!(source, StrictSchemaError::Map(at) if at == "arguments.tags"));
            }
            other => panic!("expected a strict-schema error, got {other:?}"),
        }
        assert_eq!(error.kind(), "strict_schema");
        assert!(error.to_string().contains("`tag_pages`"), "{error}");
    }
}

#[test]
fn openai_tool_calls_are_checksummed_as_written() {
    let completion = openai::parse_response(&fixture("openai_response_tool_calls.json")).unwrap();
    assert_eq!(completion.stop, Stop::Complete);
    assert_eq!(completion.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(completion.usage.input_tokens, Some(82));
    assert_eq!(completion.usage.output_tokens, Some(17));
    assert_eq!(completion.id.as_deref(), Some("chatcmpl-abc123"));
    let message = completion.into_message().unwrap();
    assert_eq!(message.content, None);
    assert_eq!(message.tool_calls.len(), 2);
    assert_eq!(message.tool_calls[0].id, "call_abc123");
    let calls: Vec<ToolCall> = message.calls().into_iter().map(Result::unwrap).collect();
    assert_eq!(
        calls[0].canonical(),
        r#"{"args":{"location":"Boston, MA"},"tool":"get_current_weather"}"#
    );
    assert_eq!(
        calls[1].canonical(),
        r#"{"args":{"location":"Paris, France","unit":"celsius"},"tool":"get_current_weather"}"#
    );
    // The provider's id stays on the message for the answer; the call gets a fresh one, so
    // ids a provider reuses across runs never collide in the audit log.
    assert_ne!(calls[0].id().as_str(), "call_abc123");
    assert_ne!(calls[0].id(), calls[1].id());
    assert_eq!(
        calls[0].checksum(),
        ToolCall::from_model("get_current_weather", r#"{"location":"Boston, MA"}"#)
            .unwrap()
            .checksum()
    );
}

#[test]
fn openai_bad_arguments_are_error_calls() {
    let message = openai::parse_response(&fixture("openai_response_bad_arguments.json"))
        .unwrap()
        .into_message()
        .unwrap();
    let calls = message.calls();
    assert!(
        matches!(&calls[0], Err(error) if matches!(error.reason, CallErrorReason::Json(JsonError::Syntax { .. })))
    );
    assert!(
        matches!(&calls[1], Err(error) if matches!(error.reason, CallErrorReason::Json(JsonError::DuplicateKey { .. })))
    );
    assert_eq!(
        calls[2].as_ref().unwrap().canonical(),
        r#"{"args":{},"tool":"get_current_weather"}"#,
        "empty text is {{}}"
    );
}

#[test]
fn malformed_provider_answers_are_typed_errors() {
    for parse in [
        openai::parse_response as fn(&str) -> _,
        anthropic::parse_response,
    ] {
        assert!(matches!(parse("not json"), Err(ProviderError::Json(_))));
        assert!(matches!(
            parse(r#"{"content":[],"content":[]}"#),
            Err(ProviderError::Json(JsonError::DuplicateKey { .. }))
        ));
        assert!(matches!(parse("{}"), Err(ProviderError::Shape { .. })));
    }
    assert!(matches!(
        openai::parse_response(r#"{"choices":[]}"#),
        Err(ProviderError::Shape { .. })
    ));
    assert!(matches!(
        openai::parse_response(r#"{"choices":[{"message":{"tool_calls":[{"id":"c","function":{"name":"x"}}]}}]}"#),
        Err(ProviderError::Shape { path, .. }) if path.contains("arguments")
    ));
    assert!(matches!(
        anthropic::parse_response(
            r#"{"content":[{"type":"tool_use","id":"t","name":"x","input":[1]}]}"#
        ),
        Err(ProviderError::Shape { .. })
    ));
}

#[test]
fn anthropic_request_matches_the_documented_shape() {
    let documented = fixture_json("anthropic_request.json");
    let request = weather_conversation(
        "You are a helpful assistant.",
        "What is the weather like in San Francisco?",
        ModelToolCall {
            id: "toolu_01A09q90qw90lq917835lq9".into(),
            name: "get_weather".into(),
            arguments: r#"{"location": "San Francisco, CA"}"#.into(),
        },
        Some("I'll check the weather."),
        "15 degrees",
    );
    assert_eq!(anthropic::messages(&request), documented["messages"]);
    let registry = tools![get_weather].unwrap();
    let request = ModelRequest {
        tools: registry.catalog().to_vec(),
        ..request
    };
    let mut options = anthropic::RequestOptions::new("claude-sonnet-4-5");
    options.max_tokens = 1024;
    let body = anthropic::request_body(&request, &options).unwrap();
    assert_same_shape(&documented, &body, "");
    assert_eq!(body["system"], "You are a helpful assistant.");
    assert_eq!(body["max_tokens"], 1024);
    assert_eq!(
        body["tools"][0]["input_schema"]["required"],
        json!(["location"])
    );
    assert!(body["tools"][0].get("strict").is_none());
    options.strict = true;
    options.stream = true;
    let body = anthropic::request_body(&request, &options).unwrap();
    assert_eq!(body["tools"][0]["strict"], true);
    assert_eq!(body["stream"], true);
}

#[test]
fn consecutive_tool_answers_share_one_user_message() {
    let call = |id: &str| ModelToolCall {
        id: id.into(),
        name: "get_weather".into(),
        arguments: "{}".into(),
    };
    let request = ModelRequest {
        system: String::new(),
        messages: vec![
            ChatMessage::Assistant {
                content: None,
                tool_calls: vec![call("a"), call("b")],
            },
            ChatMessage::Tool {
                call_id: "a".into(),
                name: "get_weather".into(),
                content: "1".into(),
            },
            ChatMessage::Tool {
                call_id: "b".into(),
                name: "get_weather".into(),
                content: "2".into(),
            },
        ],
        tools: Vec::new(),
    };
    let messages = anthropic::messages(&request);
    assert_eq!(messages.as_array().unwrap().len(), 2);
    assert_eq!(messages[1]["content"].as_array().unwrap().len(), 2);
}

#[test]
fn anthropic_tool_use_is_checksummed() {
    let completion =
        anthropic::parse_response(&fixture("anthropic_response_tool_use.json")).unwrap();
    assert_eq!(completion.finish_reason.as_deref(), Some("tool_use"));
    assert_eq!(completion.usage.input_tokens, Some(384));
    assert_eq!(completion.usage.output_tokens, Some(92));
    let message = completion.into_message().unwrap();
    assert_eq!(
        message.content.as_deref(),
        Some("I'll check the current weather in San Francisco for you.")
    );
    let calls: Vec<ToolCall> = message.calls().into_iter().map(Result::unwrap).collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(message.tool_calls[0].id, "toolu_01A09q90qw90lq917835lq9");
    assert_ne!(calls[0].id().as_str(), "toolu_01A09q90qw90lq917835lq9");
    assert_eq!(
        calls[0].canonical(),
        r#"{"args":{"location":"San Francisco, CA","unit":"celsius"},"tool":"get_weather"}"#
    );
    assert_eq!(
        message,
        AssistantMessage {
            content: message.content.clone(),
            tool_calls: vec![ModelToolCall {
                id: "toolu_01A09q90qw90lq917835lq9".into(),
                name: "get_weather".into(),
                arguments: r#"{"location":"San Francisco, CA","unit":"celsius"}"#.into(),
            }],
        }
    );
}
