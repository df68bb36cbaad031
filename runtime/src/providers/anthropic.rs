//! Anthropic Messages: `tools` definitions, request bodies, `tool_use` blocks read from a
//! response, and `tool_result` blocks.

use serde_json::{Value, json};

use super::{ProviderError, array_at, string_at};
use crate::agent::{AssistantMessage, ChatMessage, ModelRequest, ModelToolCall};
use crate::canonical::{canonical_json, parse_strict};
use crate::registry::CatalogEntry;

/// The `tools` array: `{"name", "description", "input_schema"}` per tool.
pub fn tools(catalog: &[CatalogEntry]) -> Value {
    Value::Array(
        catalog
            .iter()
            .map(|entry| {
                json!({
                    "name": entry.name,
                    "description": entry.description,
                    "input_schema": entry.schema,
                })
            })
            .collect(),
    )
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

/// The whole request body for `POST /v1/messages`.
pub fn request_body(model: &str, max_tokens: u32, request: &ModelRequest) -> Value {
    let mut body = json!({
        "model": model,
        "max_tokens": max_tokens,
        "system": request.system,
        "messages": messages(request),
    });
    if !request.tools.is_empty() {
        body["tools"] = tools(&request.tools);
    }
    body
}

/// Reads a response body: its text blocks and its `tool_use` blocks. The `input` of each
/// is kept as canonical JSON text, so the call's checksum covers exactly what was sent.
pub fn parse_response(body: &str) -> Result<AssistantMessage, ProviderError> {
    let body = parse_strict(body)?;
    let mut text: Vec<&str> = Vec::new();
    let mut tool_calls = Vec::new();
    for (index, block) in array_at(&body, "content", "")?.iter().enumerate() {
        let path = format!(".content[{index}]");
        match string_at(block, "type", &path)? {
            "text" => text.push(string_at(block, "text", &path)?),
            "tool_use" => {
                let input = block
                    .get("input")
                    .filter(|input| input.is_object())
                    .ok_or_else(|| ProviderError::Shape {
                        path: format!("{path}.input"),
                        expected: "object",
                    })?;
                tool_calls.push(ModelToolCall {
                    id: string_at(block, "id", &path)?.to_owned(),
                    name: string_at(block, "name", &path)?.to_owned(),
                    arguments: canonical_json(input),
                });
            }
            // Thinking and other block kinds carry no call.
            _ => {}
        }
    }
    Ok(AssistantMessage {
        content: (!text.is_empty()).then(|| text.concat()),
        tool_calls,
    })
}

/// A `tool_result` block answering `tool_use_id` with `content`.
pub fn tool_result(tool_use_id: &str, content: &str) -> Value {
    json!({"type": "tool_result", "tool_use_id": tool_use_id, "content": content})
}
