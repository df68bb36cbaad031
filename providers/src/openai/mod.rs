//! OpenAI-compatible Chat Completions: the wire format ([`wire`]) and a client
//! ([`OpenAiClient`]) for OpenAI, Azure OpenAI, vLLM, the llama.cpp server, Ollama and
//! any other server that speaks it.

mod client;
mod stream;
pub mod wire;

pub use client::{OpenAiBuilder, OpenAiClient};
pub use wire::{
    RequestOptions, messages, parse_assistant_message, parse_response, request_body,
    system_message, tool_message, tools,
};
