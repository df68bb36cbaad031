//! tooltrust: prompt injection cannot borrow the authority of your own instructions.
//!
//! Mark each tool with how far its output may be trusted, and the runtime enforces it:
//!
//! ```
//! use tooltrust::{tool, tools, CallOutcome, ClosedVocabulary, Id, Session, Taint, ToolCall, Trust};
//!
//! /// The products a policy exists for: the model selects one, it never writes one.
//! #[derive(ClosedVocabulary)]
//! enum Product {
//!     Kettle,
//!     Toaster,
//! }
//!
//! /// Returns the refund policy that support agents must follow.
//! #[tool(trusted, instruction, read_only)]
//! fn refund_policy(
//!     /// The product the customer bought.
//!     product: Product,
//! ) -> &'static str {
//!     match product {
//!         Product::Kettle => "Kettles: refunds within 30 days.",
//!         Product::Toaster => "Toasters: refunds within 14 days.",
//!     }
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

// The data flows one way, and the modules are declared in that order: each uses only
// those above it. call → checksum → gate → run → render → record.
pub mod agent;
mod atomic_write;
pub mod audit;
pub mod block;
pub mod call;
pub mod canonical;
mod const_str;
mod content;
pub mod envelope;
pub mod event;
pub mod gate;
pub mod group_commit;
pub mod held;
mod hex;
pub mod id;
mod nonce;
pub mod providers;
pub mod quarantine;
mod random;
pub mod record;
pub mod registry;
pub mod review;
mod schema;
pub mod session;
mod shared_text;
pub mod signature;
pub mod spend;
#[cfg(feature = "testing")]
pub mod testing;
mod timestamp;
pub mod tool;
mod verdict;

pub use agent::{Agent, Model};
pub use audit::AuditLog;
pub use block::Instruction;
pub use call::ToolCall;
pub use gate::{Policy, Taint};
pub use id::Id;
pub use record::{Message, Sender};
pub use registry::Registry;
pub use session::{CallOutcome, Scope, Session};
pub use tool::{ClosedVocabulary, Context, Trust};

/// Declares a tool: `#[tool(trusted | untrusted, [data | instruction], [read_only],
/// [name = "…"], [description = "…"])]` on a free `fn` or `async fn`.
///
/// It keeps the function as written and generates, for `fn fetch_page`, an arguments
/// struct `FetchPageArgs` (serde + schemars; parameter doc comments become field
/// descriptions, `Option<T>` parameters are optional) and a unit struct `FetchPage`
/// that implements [`tool::Tool`]. See the crate root for an example.
pub use tooltrust_macros::tool;

/// Turns the `#[tool]` methods of an inherent `impl` block into tools of one value:
/// `#[toolbox] impl Mailer { #[tool(trusted)] async fn send_email(&self, …) … }`. Each
/// method takes `&self`; the type implements [`tool::Toolbox`], so
/// `Registry::builder().toolbox(Arc::new(mailer))` adds its tools. `Context<T>`
/// parameters are filled by the host per scope, never by the model.
pub use tooltrust_macros::toolbox;

/// Derives [`ClosedVocabulary`](trait@ClosedVocabulary) (with `Deserialize` and
/// `JsonSchema`) for an enum of unit variants: the model selects a variant by name.
pub use tooltrust_macros::ClosedVocabulary;

/// Builds a [`Registry`] from `#[tool]` functions, rejecting duplicate names at compile
/// time: `tools![refund_policy, fetch_page]` returns
/// `Result<Registry, registry::RegistryError>`.
pub use tooltrust_macros::tools;

/// The README's code compiles and runs as a doctest, so the README cannot rot.
#[cfg(all(doctest, feature = "testing"))]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// What generated code names. Not a public API: it may change in any release.
#[doc(hidden)]
pub mod __private {
    use std::fmt::Display;

    pub use schemars;
    pub use serde;
    pub use serde_json;
    pub use std::borrow::Cow;

    use crate::content::{InstructionText, IntoContent};
    pub use crate::registry::Registry;
    pub use crate::schema::args_schema;
    use crate::tool::Outcome;
    pub use crate::tool::{
        ClosedVocabulary, Context, DeclaredTrust, Effects, OutputKind, Tool, ToolError, ToolFuture,
        ToolInput, ToolSpec, Toolbox, VocabularyPattern,
    };
    pub use std::sync::Arc;
    pub use tooltrust_internals::doc::{DocFragment, doc_join, doc_len, doc_str};

    /// Holds when `T` is a closed vocabulary; the bound's diagnostic says why an
    /// instruction tool's parameter must be one.
    pub const fn closed_vocabulary<T: ClosedVocabulary>() {}

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
                if crate::const_str::eq(names[i], names[j]) {
                    panic!(
                        "two tools in this registry have the same name; give one of them `name = \"…\"` in #[tool(...)]"
                    );
                }
                j += 1;
            }
            i += 1;
        }
    }
}
