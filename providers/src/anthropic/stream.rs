//! Streamed Messages: `message_start`, then each content block's start, deltas and stop,
//! then `message_delta` (the stop reason) and `message_stop`. A `tool_use` block's input
//! arrives as fragments of JSON text; it is parsed, strictly, only once the stream says
//! the answer is complete.

use std::collections::BTreeMap;

use serde_json::Value;
use tooltrust::agent::{AssistantMessage, ModelToolCall};
use tooltrust::canonical::parse_strict;

use super::wire::{arguments, stop, usage};
use crate::completion::{Completion, Usage, non_empty};
use crate::error::{ApiError, ProviderError};
use crate::http::{Assembler, Flow};
use crate::json::{index_at, object_at, optional_string, string_at};
use crate::sse::Event;

/// The answer so far.
#[derive(Debug, Default)]
pub(crate) struct EventAssembler {
    blocks: BTreeMap<u64, Block>,
    stop_reason: Option<String>,
    usage: Usage,
    id: Option<String>,
    model: Option<String>,
    stopped: bool,
}

#[derive(Debug)]
enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        /// The block's `input` at its start (`{}` when deltas follow).
        input: Option<Value>,
        /// The `partial_json` fragments, joined.
        json: String,
    },
    /// Thinking and other blocks carry no call.
    Other,
}

impl Assembler for EventAssembler {
    fn event(&mut self, event: &Event) -> Result<Flow, ProviderError> {
        let data = parse_strict(&event.data)?;
        let kind = string_at(&data, "type", "event")?;
        match kind {
            "message_start" => {
                let message = object_at(&data, "message", kind)?;
                let path = format!("{kind}.message");
                self.id = optional_string(message, "id", &path)?.map(str::to_owned);
                self.model = optional_string(message, "model", &path)?.map(str::to_owned);
                self.usage.input_tokens = usage(&message["usage"]).input_tokens;
            }
            "content_block_start" => {
                let index = index_at(&data, "index", kind)?;
                let block = object_at(&data, "content_block", kind)?;
                let path = format!("{kind}.content_block");
                let block = match string_at(block, "type", &path)? {
                    "text" => Block::Text(
                        optional_string(block, "text", &path)?
                            .unwrap_or_default()
                            .to_owned(),
                    ),
                    "tool_use" => Block::ToolUse {
                        id: string_at(block, "id", &path)?.to_owned(),
                        name: string_at(block, "name", &path)?.to_owned(),
                        input: block.get("input").cloned(),
                        json: String::new(),
                    },
                    _ => Block::Other,
                };
                if self.blocks.insert(index, block).is_some() {
                    return Err(ProviderError::shape(
                        format!("{kind}.index"),
                        "the index of a block not yet started",
                    ));
                }
            }
            "content_block_delta" => {
                let index = index_at(&data, "index", kind)?;
                let block = self.blocks.get_mut(&index).ok_or_else(|| {
                    ProviderError::shape(format!("{kind}.index"), "the index of a started block")
                })?;
                let delta = object_at(&data, "delta", kind)?;
                let path = format!("{kind}.delta");
                match (string_at(delta, "type", &path)?, block) {
                    ("text_delta", Block::Text(text)) => {
                        text.push_str(string_at(delta, "text", &path)?);
                    }
                    ("input_json_delta", Block::ToolUse { json, .. }) => {
                        json.push_str(string_at(delta, "partial_json", &path)?);
                    }
                    ("text_delta" | "input_json_delta", _) => {
                        return Err(ProviderError::shape(
                            format!("{path}.type"),
                            "a delta of the block's own kind",
                        ));
                    }
                    // Thinking, signatures, citations.
                    _ => {}
                }
            }
            "message_delta" => {
                let delta = object_at(&data, "delta", kind)?;
                if let Some(reason) = optional_string(delta, "stop_reason", kind)? {
                    self.stop_reason = Some(reason.to_owned());
                }
                // Counts here are cumulative.
                let counts = usage(&data["usage"]);
                self.usage.input_tokens = counts.input_tokens.or(self.usage.input_tokens);
                self.usage.output_tokens = counts.output_tokens.or(self.usage.output_tokens);
            }
            "message_stop" => {
                self.stopped = true;
                return Ok(Flow::Done);
            }
            "error" => {
                return Err(ProviderError::Stream(
                    ApiError::from_body(&data, None).unwrap_or_default(),
                ));
            }
            // `ping`, `content_block_stop`, and event kinds added later.
            _ => {}
        }
        Ok(Flow::Continue)
    }

    fn finish(self) -> Result<Completion, ProviderError> {
        if !self.stopped {
            return Err(ProviderError::Truncated { source: None });
        }
        let mut text = String::new();
        let mut tool_calls = Vec::new();
        for (index, block) in self.blocks {
            match block {
                Block::Text(part) => text.push_str(&part),
                Block::ToolUse {
                    id,
                    name,
                    input,
                    json,
                } => {
                    let path = format!("content_block[{index}].input");
                    let arguments = if json.is_empty() {
                        arguments(
                            Some(&input.unwrap_or_else(|| Value::Object(Default::default()))),
                            &path,
                        )?
                    } else {
                        arguments(Some(&parse_strict(&json)?), &path)?
                    };
                    tool_calls.push(ModelToolCall {
                        id,
                        name,
                        arguments,
                    });
                }
                Block::Other => {}
            }
        }
        Ok(Completion {
            message: AssistantMessage {
                content: non_empty(text),
                tool_calls,
            },
            refusal: None,
            stop: stop(self.stop_reason.as_deref()),
            finish_reason: self.stop_reason,
            usage: self.usage,
            id: self.id,
            model: self.model,
        })
    }
}
