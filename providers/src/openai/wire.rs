//! The Chat Completions wire format: `tools` definitions, request bodies, and answers
//! (their `tool_calls`, refusal, finish reason and usage).

use serde_json::{Value, json};
use tooltrust::agent::{AssistantMessage, ChatMessage, ModelRequest, ModelToolCall};
use tooltrust::canonical::parse_strict;
use tooltrust::registry::CatalogEntry;

use crate::completion::{Completion, Stop, Usage};
use crate::error::ProviderError;
use crate::json::{array_at, count_at, object_at, optional_string, string_at, tool_schema};

/// What a request body says besides the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestOptions {
    /// `model`: the model's name (on Azure, ignored in favour of the deployment).
    pub model: String,
    /// Sends `"strict": true` on every function tool.
    pub strict: bool,
    /// Asks for server-sent events (`"stream": true`).
    pub stream: bool,
    /// When streaming, asks for token counts in a last chunk
    /// (`"stream_options": {"include_usage": true}`).
    pub stream_usage: bool,
}

impl RequestOptions {
    /// Options for `model`: not strict, not streamed, usage asked for if streamed.
    pub fn new(model: impl Into<String>) -> Self {
        RequestOptions {
            model: model.into(),
            strict: false,
            stream: false,
            stream_usage: true,
        }
    }
}

/// The `tools` array: one `{"type": "function", "function": {…}}` per tool. When
/// `strict`, each carries `"strict": true` and the strict form of its schema
/// ([`CatalogEntry::strict_schema`]); a tool that has none is an error, and nothing is
/// sent (fail closed).
pub fn tools(catalog: &[CatalogEntry], strict: bool) -> Result<Value, ProviderError> {
    catalog
        .iter()
        .map(|entry| {
            let mut function = json!({
                "name": entry.name,
                "description": entry.description,
                "parameters": tool_schema(entry, strict)?,
            });
            if strict {
                function["strict"] = Value::Bool(true);
            }
            Ok(json!({"type": "function", "function": function}))
        })
        .collect()
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

/// The whole request body for `POST {base}/chat/completions`: the one place a
/// [`ModelRequest`] becomes JSON. An error (a tool with no strict schema, in strict
/// mode) means nothing may be sent.
pub fn request_body(
    request: &ModelRequest,
    options: &RequestOptions,
) -> Result<Value, ProviderError> {
    let mut body = json!({"model": options.model, "messages": messages(request)});
    if !request.tools.is_empty() {
        body["tools"] = tools(&request.tools, options.strict)?;
    }
    if options.stream {
        body["stream"] = Value::Bool(true);
        if options.stream_usage {
            body["stream_options"] = json!({"include_usage": true});
        }
    }
    Ok(body)
}

/// Reads a response body: `choices[0]` (its message, refusal and finish reason), the
/// usage, the id and the model.
pub fn parse_response(body: &str) -> Result<Completion, ProviderError> {
    let body = parse_strict(body)?;
    let choice = array_at(&body, "choices", "")?
        .first()
        .ok_or_else(|| ProviderError::shape(".choices[0]", "choice"))?;
    let message = object_at(choice, "message", ".choices[0]")?;
    let finish_reason = optional_string(choice, "finish_reason", ".choices[0]")?.map(str::to_owned);
    Ok(Completion {
        refusal: optional_string(message, "refusal", ".choices[0].message")?
            .filter(|text| !text.is_empty())
            .map(str::to_owned),
        message: parse_assistant_message(message)?,
        stop: stop(finish_reason.as_deref()),
        finish_reason,
        usage: usage(&body),
        id: optional_string(&body, "id", "")?.map(str::to_owned),
        model: optional_string(&body, "model", "")?.map(str::to_owned),
    })
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
                let function = object_at(call, "function", &path)?;
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

/// What a `finish_reason` means. Servers that omit it (some OpenAI-compatible ones do in
/// whole answers) are read as complete.
pub(crate) fn stop(finish_reason: Option<&str>) -> Stop {
    match finish_reason {
        None | Some("stop" | "tool_calls" | "function_call") => Stop::Complete,
        Some("length") => Stop::Length,
        Some("content_filter") => Stop::ContentFilter,
        Some(_) => Stop::Other,
    }
}

/// The token counts of a body's (or a last chunk's) `usage`.
pub(crate) fn usage(body: &Value) -> Usage {
    let usage = &body["usage"];
    Usage {
        input_tokens: count_at(usage, "prompt_tokens"),
        output_tokens: count_at(usage, "completion_tokens"),
    }
}
