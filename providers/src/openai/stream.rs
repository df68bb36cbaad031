//! Streamed Chat Completions: chunks of `delta`s assembled into one answer. Tool calls
//! arrive in pieces keyed by `index` (the id and name once, the argument text in
//! fragments); a call is handed over only when the stream says the answer is complete.

use std::collections::BTreeMap;

use serde_json::Value;
use tooltrust::agent::{AssistantMessage, ModelToolCall};
use tooltrust::canonical::parse_strict;

use super::wire::{stop, usage};
use crate::completion::{Completion, Usage, non_empty};
use crate::error::{ApiError, ProviderError};
use crate::http::{Assembler, Flow};
use crate::json::{index_at, optional_string};
use crate::sse::Event;

/// The answer so far.
#[derive(Debug, Default)]
pub(crate) struct ChunkAssembler {
    content: String,
    refusal: String,
    calls: BTreeMap<u64, PartialCall>,
    finish_reason: Option<String>,
    usage: Usage,
    id: Option<String>,
    model: Option<String>,
}

#[derive(Debug, Default)]
struct PartialCall {
    id: Option<String>,
    name: Option<String>,
    arguments: String,
}

impl Assembler for ChunkAssembler {
    fn event(&mut self, event: &Event) -> Result<Flow, ProviderError> {
        if event.data == "[DONE]" {
            return Ok(Flow::Done);
        }
        let chunk = parse_strict(&event.data)?;
        if chunk.get("error").is_some_and(|error| !error.is_null()) {
            return Err(ProviderError::Stream(
                ApiError::from_body(&chunk, None).unwrap_or_default(),
            ));
        }
        if self.id.is_none() {
            self.id = optional_string(&chunk, "id", "chunk")?.map(str::to_owned);
        }
        if self.model.is_none() {
            self.model = optional_string(&chunk, "model", "chunk")?.map(str::to_owned);
        }
        if chunk.get("usage").is_some_and(Value::is_object) {
            self.usage = usage(&chunk);
        }
        let choices = match chunk.get("choices") {
            None | Some(Value::Null) => &[][..],
            Some(Value::Array(choices)) => choices.as_slice(),
            Some(_) => return Err(ProviderError::shape("chunk.choices", "array")),
        };
        // One choice is asked for; others (there should be none) are not this answer.
        for choice in choices
            .iter()
            .filter(|choice| choice.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
        {
            if let Some(delta) = choice.get("delta").filter(|delta| !delta.is_null()) {
                self.delta(delta)?;
            }
            if let Some(reason) = optional_string(choice, "finish_reason", "chunk.choices[0]")? {
                self.finish_reason = Some(reason.to_owned());
            }
        }
        Ok(Flow::Continue)
    }

    fn finish(self) -> Result<Completion, ProviderError> {
        // The finish reason comes after the last delta: without it, the last call's
        // arguments may be cut short.
        let Some(finish_reason) = self.finish_reason else {
            return Err(ProviderError::Truncated { source: None });
        };
        let tool_calls = self
            .calls
            .into_iter()
            .map(|(index, call)| {
                let path = format!("chunk.choices[0].delta.tool_calls[index {index}]");
                Ok(ModelToolCall {
                    id: call
                        .id
                        .ok_or_else(|| ProviderError::shape(format!("{path}.id"), "string"))?,
                    name: call.name.ok_or_else(|| {
                        ProviderError::shape(format!("{path}.function.name"), "string")
                    })?,
                    arguments: call.arguments,
                })
            })
            .collect::<Result<_, ProviderError>>()?;
        Ok(Completion {
            message: AssistantMessage {
                content: non_empty(self.content),
                tool_calls,
            },
            refusal: non_empty(self.refusal),
            stop: stop(Some(&finish_reason)),
            finish_reason: Some(finish_reason),
            usage: self.usage,
            id: self.id,
            model: self.model,
        })
    }
}

impl ChunkAssembler {
    fn delta(&mut self, delta: &Value) -> Result<(), ProviderError> {
        const PATH: &str = "chunk.choices[0].delta";
        if let Some(text) = optional_string(delta, "content", PATH)? {
            self.content.push_str(text);
        }
        if let Some(text) = optional_string(delta, "refusal", PATH)? {
            self.refusal.push_str(text);
        }
        let calls = match delta.get("tool_calls") {
            None | Some(Value::Null) => return Ok(()),
            Some(Value::Array(calls)) => calls,
            Some(_) => return Err(ProviderError::shape(format!("{PATH}.tool_calls"), "array")),
        };
        for (position, fragment) in calls.iter().enumerate() {
            let path = format!("{PATH}.tool_calls[{position}]");
            let call = self
                .calls
                .entry(index_at(fragment, "index", &path)?)
                .or_default();
            if let Some(id) = optional_string(fragment, "id", &path)? {
                set_once(&mut call.id, id, &format!("{path}.id"))?;
            }
            let function = match fragment.get("function") {
                None | Some(Value::Null) => continue,
                Some(function @ Value::Object(_)) => function,
                Some(_) => return Err(ProviderError::shape(format!("{path}.function"), "object")),
            };
            let path = format!("{path}.function");
            if let Some(name) = optional_string(function, "name", &path)? {
                set_once(&mut call.name, name, &format!("{path}.name"))?;
            }
            if let Some(arguments) = optional_string(function, "arguments", &path)? {
                call.arguments.push_str(arguments);
            }
        }
        Ok(())
    }
}

/// Keeps the first non-empty `value` of a field sent once per call (some servers repeat
/// it on every fragment); a different value later is refused rather than guessed at.
fn set_once(slot: &mut Option<String>, value: &str, path: &str) -> Result<(), ProviderError> {
    match slot {
        _ if value.is_empty() => Ok(()),
        None => {
            *slot = Some(value.to_owned());
            Ok(())
        }
        Some(first) if first == value => Ok(()),
        Some(_) => Err(ProviderError::shape(
            path.to_owned(),
            "the same id and name in every fragment of a call",
        )),
    }
}
