//! The Messages wire format: `tools` definitions, request bodies, `tool_result` blocks,
//! and answers (their `tool_use` blocks, stop reason and usage).

use serde_json::{Value, json};
use tooltrust::agent::{AssistantMessage, ChatMessage, ModelRequest, ModelToolCall};
use tooltrust::canonical::{canonical_json, parse_strict};
use tooltrust::registry::CatalogEntry;

use crate::completion::{Completion, Stop, Usage};
use crate::error::ProviderError;
use crate::json::{array_at, count_at, optional_string, string_at, tool_schema};

/// What a request body says besides the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestOptions {
    /// `model`: the model's name.
    pub model: String,
    /// `max_tokens`: the most the model may write (the format requires it).
    pub max_tokens: u32,
    /// Sends `"strict": true` on every tool.
    pub strict: bool,
    /// Asks for server-sent events (`"stream": true`).
    pub stream: bool,
}

impl RequestOptions {
    /// The default `max_tokens`.
    pub const DEFAULT_MAX_TOKENS: u32 = 4096;

    /// Options for `model`: [`DEFAULT_MAX_TOKENS`](Self::DEFAULT_MAX_TOKENS), not strict,
    /// not streamed.
    pub fn new(model: impl Into<String>) -> Self {
        RequestOptions {
            model: model.into(),
            max_tokens: Self::DEFAULT_MAX_TOKENS,
            strict: false,
            stream: false,
        }
    }
}

/// The `tools` array: `{"name", "description", "input_schema"}` per tool. When
/// `strict`, each carries `"strict": true` and the strict form of its schema
/// ([`CatalogEntry::strict_schema`]: every object closed with `additionalProperties:
/// false`, as strict tool use requires); a tool that has none is an error, and nothing
/// is sent (fail closed).
pub fn tools(catalog: &[CatalogEntry], strict: bool) -> Result<Value, ProviderError> {
    catalog
        .iter()
        .map(|entry| {
            let mut tool = json!({
                "name": entry.name,
                "description": entry.description,
                "input_schema": tool_schema(entry, strict)?,
            });
            if strict {
                tool["strict"] = Value::Bool(true);
            }
            Ok(tool)
        })
        .collect()
}

/// The `messages` array. Tool answers become `tool_result` blocks of one user message
/// per run of consecutive answers, as the format requires.
pub fn messages(request: &ModelRequest) -> Value {
    let mut messages: Vec<Value> = Vec::new();
    for message in &request.messages {
        match message {
            ChatMessage::User { content } => messages.push(json!({
                "role": "user",
                "content": [{"type": "text", "text": content}],
            })),
            ChatMessage::Assistant {
                content,
                tool_calls,
            } => {
                let mut blocks: Vec<Value> = content
                    .iter()
                    .filter(|text| !text.is_empty())
                    .map(|text| json!({"type": "text", "text": text}))
                    .collect();
                blocks.extend(tool_calls.iter().map(|call| {
                    // `input` must be an object; arguments that were not one were refused
                    // as calls, and are echoed back as an empty input.
                    let input = match parse_strict(&call.arguments) {
                        Ok(Value::Object(input)) => Value::Object(input),
                        _ => json!({}),
                    };
                    json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input})
                }));
                messages.push(json!({"role": "assistant", "content": blocks}));
            }
            ChatMessage::Tool {
                call_id, content, ..
            } => {
                let block = tool_result(call_id, content);
                match messages.last_mut() {
                    Some(last) if is_tool_results(last) => {
                        if let Some(blocks) = last["content"].as_array_mut() {
                            blocks.push(block);
                        }
                    }
                    _ => messages.push(json!({"role": "user", "content": [block]})),
                }
            }
        }
    }
    Value::Array(messages)
}

fn is_tool_results(message: &Value) -> bool {
    message["role"] == "user"
        && message["content"]
            .as_array()
            .is_some_and(|blocks| blocks.iter().all(|b| b["type"] == "tool_result"))
}

/// The whole request body for `POST {base}/v1/messages`: the one place a
/// [`ModelRequest`] becomes JSON. An error (a tool with no strict schema, in strict
/// mode) means nothing may be sent.
pub fn request_body(
    request: &ModelRequest,
    options: &RequestOptions,
) -> Result<Value, ProviderError> {
    let mut body = json!({
        "model": options.model,
        "max_tokens": options.max_tokens,
        "system": request.system,
        "messages": messages(request),
    });
    if !request.tools.is_empty() {
        body["tools"] = tools(&request.tools, options.strict)?;
    }
    if options.stream {
        body["stream"] = Value::Bool(true);
    }
    Ok(body)
}

/// Reads a response body: its text blocks and its `tool_use` blocks, its stop reason,
/// usage, id and model. The `input` of each call is kept as canonical JSON text, so the
/// call's checksum covers exactly what was sent.
pub fn parse_response(body: &str) -> Result<Completion, ProviderError> {
    let body = parse_strict(body)?;
    let mut text: Vec<&str> = Vec::new();
    let mut tool_calls = Vec::new();
    for (index, block) in array_at(&body, "content", "")?.iter().enumerate() {
        let path = format!(".content[{index}]");
        match string_at(block, "type", &path)? {
            "text" => text.push(string_at(block, "text", &path)?),
            "tool_use" => tool_calls.push(ModelToolCall {
                id: string_at(block, "id", &path)?.to_owned(),
                name: string_at(block, "name", &path)?.to_owned(),
                arguments: arguments(block.get("input"), &format!("{path}.input"))?,
            }),
            // Thinking and other block kinds carry no call.
            _ => {}
        }
    }
    let stop_reason = optional_string(&body, "stop_reason", "")?.map(str::to_owned);
    Ok(Completion {
        message: AssistantMessage {
            content: (!text.is_empty()).then(|| text.concat()),
            tool_calls,
        },
        refusal: None,
        stop: stop(stop_reason.as_deref()),
        finish_reason: stop_reason,
        usage: usage(&body["usage"]),
        id: optional_string(&body, "id", "")?.map(str::to_owned),
        model: optional_string(&body, "model", "")?.map(str::to_owned),
    })
}

/// A `tool_result` block answering `tool_use_id` with `content`.
pub fn tool_result(tool_use_id: &str, content: &str) -> Value {
    json!({"type": "tool_result", "tool_use_id": tool_use_id, "content": content})
}

/// A `tool_use` block's `input` as the call's argument text: canonical JSON of an
/// object, or a shape error naming `path`.
pub(crate) fn arguments(input: Option<&Value>, path: &str) -> Result<String, ProviderError> {
    input
        .filter(|input| input.is_object())
        .map(canonical_json)
        .ok_or_else(|| ProviderError::shape(path.to_owned(), "object"))
}

/// What a `stop_reason` means.
pub(crate) fn stop(stop_reason: Option<&str>) -> Stop {
    match stop_reason {
        None | Some("end_turn" | "tool_use" | "stop_sequence") => Stop::Complete,
        Some("max_tokens" | "model_context_window_exceeded") => Stop::Length,
        Some("refusal") => Stop::Refusal,
        // `pause_turn` (a server tool paused) and anything newer.
        Some(_) => Stop::Other,
    }
}

/// The token counts of a `usage` object; the input count includes the tokens read from
/// and written to the prompt cache, which Anthropic counts apart.
pub(crate) fn usage(usage: &Value) -> Usage {
    let input = [
        "input_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
    ]
    .iter()
    .filter_map(|key| count_at(usage, key))
    .reduce(u64::saturating_add);
    Usage {
        input_tokens: input,
        output_tokens: count_at(usage, "output_tokens"),
    }
}
