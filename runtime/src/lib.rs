//! tooltrust: prompt injection cannot borrow the authority of your own instructions.
//!
//! Mark each tool with how far its output may be trusted, and the runtime enforces it:
//!
//! ```
//! use tooltrust::{tool, tools, CallOutcome, Id, Session, Taint, ToolCall, Trust};
//!
//! /// Returns the refund policy that support agents must follow.
//! #[tool(trusted, instruction, read_only)]
//! fn refund_policy(
//!     /// The product the customer bought.
//!     product: String,
//! ) -> String {
//!     format!("Refunds for {product} are granted within 30 days.")
//! }
//!
//! /// Fetches a web page.
//! #[tool(untrusted, read_only)]
//! async fn fetch_page(url: String) -> Result<String, std::io::Error> {
//!     Ok(format!("<html>page at {url}</html>"))
//! }
//!
//! let registry = tools![refund_policy, fetch_page]?;
//! assert_eq!(registry.names().collect::<Vec<_>>(), ["fetch_page", "refund_policy"]);
//!
//! // A session holds the registry, the gate's policy and the recorder; a scope is one
//! // unit of agent work. Every call is checksummed, then gated, then run and rendered.
//! let session = Session::builder(registry).build()?;
//! let scope = session.open_scope(Id::new("support-agent")?)?;
//! let call = ToolCall::from_model("fetch_page", r#"{"url": "https://example.com"}"#)?;
//! let CallOutcome::Ran { output, .. } = pollster::block_on(scope.call(call))? else {
//!     unreachable!("a read-only call in a clean scope is allowed");
//! };
//! assert_eq!(output.trust, Trust::Untrusted);
//! assert_eq!(scope.taint()?, Taint::Tainted); // untrusted content entered the scope
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod agent;
pub mod audit;
pub mod block;
pub mod call;
pub mod canonical;
pub mod conformance;
pub mod content;
pub mod envelope;
pub mod event;
pub mod gate;
pub mod id;
pub mod nonce;
pub mod providers;
pub mod quarantine;
pub mod record;
pub mod registry;
pub mod review;
pub mod schema;
pub mod scope;
pub mod session;
pub mod tool;

pub use agent::{
    Agent, AgentError, AssistantMessage, CallResult, ChatMessage, Model, ModelError, ModelFuture,
    ModelRequest, ModelToolCall, ScriptedModel, Transcript,
};
pub use block::{Block, Instruction};
pub use call::{CallError, CallErrorReason, Checksum, ToolCall};
pub use canonical::{JsonError, canonical_json, parse_strict};
pub use content::{
    ArtifactHandle, Content, InstructionText, IntoContent, Media, Retrieved, RetrievedRecord,
    SourceTier,
};
pub use envelope::{Mode, RenderError, Rendered, Renderer, STANDING_EXPLANATION};
pub use event::{CallDecision, Event, MemoryRecorder, RecordError, Recorder};
pub use gate::{ArgumentFromTrustedBlock, Decision, GateContext, Policy, Rule, Ruling, Taint};
pub use id::{Id, IdError};
pub use nonce::{KeyError, SessionKey};
pub use quarantine::{Exit, QuarantineHandle, QuarantineStatus};
pub use record::{Memory, Message, Sender, Thought, ThoughtKind};
pub use registry::{CatalogEntry, DispatchError, Registry, RegistryError, ToolOutput};
pub use review::{Judge, Judgement, Material, ReviewError, Reviewer, RuleJudge, Subject, Verdict};
pub use scope::{CallOutcome, Handoff, Scope, ScopeError};
pub use session::{Review, Session, SessionBuilder};
pub use tool::{ArgumentsError, Effects, Outcome, OutputKind, Tool, ToolFuture, ToolSpec, Trust};

/// Declares a tool: `#[tool(trusted | untrusted, [data | instruction], [read_only],
/// [name = "…"], [description = "…"])]` on a free `fn` or `async fn`.
///
/// It keeps the function as written and generates, for `fn fetch_page`, an arguments
/// struct `FetchPageArgs` (serde + schemars; parameter doc comments become field
/// descriptions, `Option<T>` parameters are optional) and a unit struct `FetchPage`
/// that implements [`Tool`]. See the crate root for an example.
pub use tooltrust_macros::tool;

/// Builds a [`Registry`] from `#[tool]` functions, rejecting duplicate names at compile
/// time: `tools![refund_policy, fetch_page]` returns `Result<Registry, RegistryError>`.
pub use tooltrust_macros::tools;

/// The README's code compiles and runs as a doctest, so the README cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// What generated code names. Not a public API: it may change in any release.
#[doc(hidden)]
pub mod __private {
    use std::fmt::Display;

    pub use schemars;
    pub use serde;
    pub use serde_json;

    use crate::content::{InstructionText, IntoContent};
    pub use crate::schema::args_schema;
    use crate::tool::{ArgumentsError, Outcome};

    /// Deserializes a tool's arguments.
    pub fn parse_args<T: serde::de::DeserializeOwned>(
        args: serde_json::Value,
    ) -> Result<T, ArgumentsError> {
        serde_path_to_error::deserialize(args).map_err(|error| {
            let path = error.path().to_string();
            let inner = error.into_inner();
            ArgumentsError {
                message: if path == "." {
                    inner.to_string()
                } else {
                    format!("`{path}`: {inner}")
                },
            }
        })
    }

    /// The outcome of a tool that returns a plain value.
    pub fn outcome_of_value<T: IntoContent>(value: T) -> Outcome {
        match value.into_content() {
            Ok(content) => Outcome::Output(content),
            Err(message) => Outcome::Failed(message),
        }
    }

    /// The outcome of a tool that returns a `Result`.
    pub fn outcome_of_result<T: IntoContent, E: Display>(result: Result<T, E>) -> Outcome {
        match result {
            Ok(value) => outcome_of_value(value),
            Err(error) => Outcome::Failed(error.to_string()),
        }
    }

    /// Like [`outcome_of_value`], for `trusted, instruction` tools: only text compiles.
    pub fn instruction_outcome_of_value<T: InstructionText>(value: T) -> Outcome {
        outcome_of_value(value)
    }

    /// Like [`outcome_of_result`], for `trusted, instruction` tools: only text compiles.
    pub fn instruction_outcome_of_result<T: InstructionText, E: Display>(
        result: Result<T, E>,
    ) -> Outcome {
        outcome_of_result(result)
    }

    /// Fails constant evaluation when two names are equal.
    pub const fn assert_unique_names(names: &[&str]) {
        let mut i = 0;
        while i < names.len() {
            let mut j = i + 1;
            while j < names.len() {
                if str_eq(names[i], names[j]) {
                    panic!(
                        "two tools in this registry have the same name; give one of them `name = \"…\"` in #[tool(...)]"
                    );
                }
                j += 1;
            }
            i += 1;
        }
    }

    const fn str_eq(a: &str, b: &str) -> bool {
        let (a, b) = (a.as_bytes(), b.as_bytes());
        if a.len() != b.len() {
            return false;
        }
        let mut i = 0;
        while i < a.len() {
            if a[i] != b[i] {
                return false;
            }
            i += 1;
        }
        true
    }
}
