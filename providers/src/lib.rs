//! HTTP clients for [tooltrust]: real models behind its [`Model`] trait.
//!
//! - [`OpenAiClient`]: any OpenAI-compatible Chat Completions endpoint (OpenAI, Azure
//!   OpenAI, vLLM, the llama.cpp server, Ollama), base URL configurable.
//! - [`AnthropicClient`]: Anthropic's Messages API.
//!
//! Both send the tools of the registry, read tool calls (parallel ones too), stream
//! when asked (server-sent events, tool-call fragments assembled; the gate still sees
//! only complete calls), time out, retry rate limits and server errors with backoff
//! honouring `Retry-After`, cap what they read ([`HttpOptions`]), and fail with a typed
//! [`ProviderError`] for every failure: an HTTP status, a malformed, truncated or
//! oversized answer, a refusal, a cut-off. Each request
//! runs in a `tracing` span named with the OpenTelemetry GenAI conventions, which never
//! records content.
//!
//! The wire formats ([`openai::wire`], [`anthropic::wire`]) are public for hosts that
//! send the bytes with their own HTTP client.
//!
//! The core crate stays free of an async runtime and a network stack; this one uses
//! reqwest with rustls on tokio.
//!
//! [`Model`]: tooltrust::Model
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod anthropic;
mod completion;
mod error;
mod http;
mod json;
pub mod openai;
mod retry;
mod secret;
mod sse;
mod telemetry;

pub use anthropic::{AnthropicBuilder, AnthropicClient};
pub use completion::{Completion, Stop, Usage};
pub use error::{ApiError, ConfigError, ProviderError, RefusalKind, SizeLimit};
pub use http::HttpOptions;
pub use openai::{OpenAiBuilder, OpenAiClient};
pub use retry::RetryPolicy;
pub use secret::ApiKey;
