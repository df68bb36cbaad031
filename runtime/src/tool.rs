//! What a tool is: its declared trust, output type and effects, and the trait that
//! `#[tool]` implements.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::content::Content;

/// How far a piece of content may be trusted.
///
/// Tools declare `Trusted` or `Untrusted`; `Vetted` is reserved for content a judge has
/// promoted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trust {
    /// Written by the developer, or by a tool the developer vouches for.
    Trusted,
    /// Untrusted content that a judge has reviewed and promoted.
    Vetted,
    /// Written, in whole or in part, by an outsider.
    Untrusted,
}

/// Whether content may steer the agent (`Instruction`) or is only material (`Data`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputKind {
    /// Material to read, never to obey. The default.
    Data,
    /// Text that carries the developer's authority. Only `trusted` tools may declare it.
    Instruction,
}

/// What running a tool does to the world outside the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effects {
    /// Changes nothing outside the agent; declared with `read_only`.
    ReadOnly,
    /// May change state outside the agent. The default, so that forgetting `read_only`
    /// makes the gate stricter, never looser.
    Consequential,
}

impl fmt::Display for Trust {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Trust::Trusted => "trusted",
            Trust::Vetted => "vetted",
            Trust::Untrusted => "untrusted",
        })
    }
}

impl fmt::Display for OutputKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OutputKind::Data => "data",
            OutputKind::Instruction => "instruction",
        })
    }
}

impl fmt::Display for Effects {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Effects::ReadOnly => "read_only",
            Effects::Consequential => "consequential",
        })
    }
}

/// The declared metadata of a tool: everything the gate and the renderer need to know
/// about it, fixed at compile time by `#[tool]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolSpec {
    /// The name the model calls the tool by; matches `[A-Za-z0-9_-]{1,64}`.
    pub name: &'static str,
    /// What the tool does, shown to the model.
    pub description: &'static str,
    /// How far the tool's output may be trusted.
    pub trust: Trust,
    /// Whether the tool's output is data or instruction.
    pub output: OutputKind,
    /// Whether the tool changes state outside the agent.
    pub effects: Effects,
}

/// Why a tool could not run: its arguments did not match its schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ArgumentsError {
    /// What the deserializer said, naming the field at fault.
    pub message: String,
}

/// What a tool that ran produced: its content, or its own error.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The tool returned a value.
    Output(Content),
    /// The tool returned an error; its message is rendered as untrusted data, since an
    /// error message can carry outsider bytes.
    Failed(String),
}

/// The future a tool call returns.
pub type ToolFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Outcome, ArgumentsError>> + Send + 'a>>;

/// A tool an agent may call. `#[tool]` implements it; implement it by hand only for
/// tools whose surface is known at run time (a remote MCP server, say).
pub trait Tool: Send + Sync {
    /// The tool's declared metadata.
    fn spec(&self) -> ToolSpec;

    /// The JSON Schema of the tool's arguments, in the provider-safe shape of
    /// [`args_schema`](crate::schema::args_schema).
    fn args_schema(&self) -> Value;

    /// Runs the tool on arguments that the caller has already parsed and checksummed.
    fn call(&self, args: Value) -> ToolFuture<'_>;
}
