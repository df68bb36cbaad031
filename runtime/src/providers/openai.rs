//! OpenAI Chat Completions: `tools` definitions, request bodies, and `tool_calls` read
//! from an assistant message.

use serde_json::{Value, json};

use super::{ProviderError, array_at, string_at};
use crate::agent::{AssistantMessage, ChatMessage, ModelRequest, ModelToolCall};
use crate::canonical::parse_strict;
use crate::registry::CatalogEntry;

/// The `tools` array: one `{"type": "function", "function": {…}}` per tool.
pub fn tools(catalog: &[CatalogEntry]) -> Value {
    Value::Array(
        catalog
            .iter()
            .map(|entry| {
                json!({
                    "type": "function",
                    "function": {
                        "name": entry.name,
                        "description": entry.description,
                        "parameters": entry.schema,
                    }
                })
            })
            .collect(),
    )
}

/// The `messages` array: the system message (standing explanation and developer
/// policy) first, then the conversation.
pub fn messages(request: &ModelRequest) -> Value {
    let mut messages = vec![system_message(&request.system)];
    messages.extend(request.messages.iter().map(|message| match message {
        ChatMessage::User { content } => json!({"role": "user", "content": content}),
        ChatMessage::Assistant {
            content,
            tool_calls,
        } => {
            let mut message = json!({"role": "assistant", "content": content});
            if !tool_calls.is_empty() {
                message["tool_calls"] = tool_calls
                    .iter()
                    .map(|call| {
                        json!({
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments},
                        })
                    })
                    .collect();
            }
            message
        }
        ChatMessage::Tool {
            call_id, content, ..
        } => tool_message(call_id, content),
    }));
    Value::Array(messages)
}

/// The whole request body for `POST /v1/chat/completions`.
pub fn request_body(model: &str, request: &ModelRequest) -> Value {
    let mut body = json!({"model": model, "messages": messages(request)});
    if !request.tools.is_empty() {
        body["tools"] = tools(&request.tools);
    }
    body
}

/// Reads `choices[0].message` of a response body.
pub fn parse_response(body: &str) -> Result<AssistantMessage, ProviderError> {
    let body = parse_strict(body)?;
    let choice = array_at(&body, "choices", "")?
        .first()
        .ok_or(ProviderError::Shape {
            path: ".choices[0]".into(),
            expected: "choice",
        })?;
    let message = choice.get("message").ok_or(ProviderError::Shape {
        path: ".choices[0].message".into(),
        expected: "object",
    })?;
    parse_assistant_message(message)
}

/// Reads an assistant message: its text and its `tool_calls`, with their argument text
/// kept exactly as the model wrote it.
pub fn parse_assistant_message(message: &Value) -> Result<AssistantMessage, ProviderError> {
    let content = message
        .get("content")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let tool_calls = match message.get("tool_calls") {
        None | Some(Value::Null) => Vec::new(),
        Some(_) => array_at(message, "tool_calls", ".message")?
            .iter()
            .enumerate()
            .map(|(index, call)| {
                let path = format!(".message.tool_calls[{index}]");
                let function = call.get("function").ok_or_else(|| ProviderError::Shape {
                    path: format!("{path}.function"),
                    expected: "object",
                })?;
                Ok(ModelToolCall {
                    id: string_at(call, "id", &path)?.to_owned(),
                    name: string_at(function, "name", &format!("{path}.function"))?.to_owned(),
                    arguments: string_at(function, "arguments", &format!("{path}.function"))?
                        .to_owned(),
                })
            })
            .collect::<Result<_, ProviderError>>()?,
    };
    Ok(AssistantMessage {
        content,
        tool_calls,
    })
}

/// A `tool` role message answering `call_id` with `content` (an envelope, or the gate's
/// decision).
pub fn tool_message(call_id: &str, content: &str) -> Value {
    json!({"role": "tool", "tool_call_id": call_id, "content": content})
}

/// The `system` message holding `system` text.
pub fn system_message(system: &str) -> Value {
    json!({"role": "system", "content": system})
}
