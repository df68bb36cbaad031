//! Anthropic Messages: the wire format ([`wire`]) and a client ([`AnthropicClient`]).

mod client;
mod stream;
pub mod wire;

pub use client::{AnthropicBuilder, AnthropicClient};
pub use wire::{RequestOptions, messages, parse_response, request_body, tool_result, tools};
