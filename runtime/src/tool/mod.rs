//! What a tool is: its declared trust, output type and effects; the trait that `#[tool]`,
//! `#[toolbox]` and [`DynamicTool`] implement; the contexts a host supplies to it; and
//! the closed vocabularies an instruction tool selects from.

mod context;
pub(crate) mod declaration;
mod dynamic;
mod vocabulary;

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Map;
/// The JSON value a [`DynamicTool`]'s handler receives (serde_json's), so a crate that
/// depends on `tooltrust` alone can name it.
pub use serde_json::Value;

pub use context::{Context, Contexts};
pub use dynamic::{DynamicTool, DynamicToolBuilder};
pub use vocabulary::ClosedVocabulary;
#[doc(hidden)]
pub use vocabulary::VocabularyPattern;
pub(crate) use vocabulary::{check_arguments, free_text_argument};

use crate::call::ToolCall;

pub use crate::content::{
    ArtifactHandle, Content, InstructionText, IntoContent, Media, Retrieved, RetrievedRecord,
    SourceTier,
};
pub use crate::schema::{StrictSchemaError, args_schema, strict_schema};

/// How far a piece of content may be trusted.
///
/// Tools declare only [`DeclaredTrust`]; `Vetted` is what a judge's promotion makes of
/// untrusted content, and no declaration can claim it.
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

/// What a tool declares about its output: `#[tool(trusted)]` or `#[tool(untrusted)]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeclaredTrust {
    /// The developer vouches for every byte the tool returns.
    Trusted,
    /// Outsiders write the tool's output, in whole or in part.
    Untrusted,
}

impl From<DeclaredTrust> for Trust {
    fn from(trust: DeclaredTrust) -> Self {
        match trust {
            DeclaredTrust::Trusted => Trust::Trusted,
            DeclaredTrust::Untrusted => Trust::Untrusted,
        }
    }
}

impl fmt::Display for DeclaredTrust {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Trust::from(*self).fmt(f)
    }
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
/// about it, fixed at compile time by `#[tool]` (borrowed text) or at run time for tools
/// a server or a configuration defines (owned text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSpec {
    /// The name the model calls the tool by; matches `[A-Za-z0-9_-]{1,64}`.
    pub name: Cow<'static, str>,
    /// What the tool does, shown to the model.
    pub description: Cow<'static, str>,
    /// How far the tool's output may be trusted.
    pub trust: DeclaredTrust,
    /// Whether the tool's output is data or instruction.
    pub output: OutputKind,
    /// Whether the tool changes state outside the agent.
    pub effects: Effects,
}

/// Why a tool's arguments were refused before it ran.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ArgumentsError {
    /// The arguments do not deserialize into the tool's parameters.
    #[error("{}{source}", at_path(path))]
    Deserialize {
        /// Where in the arguments (`.` for the whole object).
        path: String,
        /// What the deserializer said.
        #[source]
        source: Arc<serde_json::Error>,
    },
    /// An argument of an instruction tool is outside its closed vocabulary.
    #[error("`{argument}` must be one of the tool's declared values; got {value}")]
    NotInVocabulary {
        /// The argument.
        argument: String,
        /// The value the model sent, as canonical JSON.
        value: String,
    },
    /// A hand-written tool refused its arguments.
    #[error("{0}")]
    Invalid(String),
}

fn at_path(path: &str) -> String {
    if path == "." || path.is_empty() {
        String::new()
    } else {
        format!("`{path}`: ")
    }
}

/// Why a tool did not run: its input did not fit it. Nothing ran.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The arguments were refused.
    #[error(transparent)]
    Arguments(#[from] ArgumentsError),
    /// The tool needs a context the scope was not given (fail closed: it did not run).
    #[error(
        "the tool needs a context of type `{type_name}`, which its scope was not given; the host supplies it with `Scope::with_context`"
    )]
    MissingContext {
        /// The type asked for.
        type_name: &'static str,
    },
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
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = Result<Outcome, ToolError>> + Send + 'a>>;

/// What a tool is given when it runs: the checksummed call and its scope's contexts.
#[derive(Debug, Clone, Copy)]
pub struct ToolInput<'a> {
    call: &'a ToolCall,
    contexts: &'a Contexts,
}

impl<'a> ToolInput<'a> {
    /// The input of `call` in a scope with `contexts`.
    pub fn new(call: &'a ToolCall, contexts: &'a Contexts) -> Self {
        ToolInput { call, contexts }
    }

    /// The call, checksummed before anything ran.
    pub fn call(&self) -> &'a ToolCall {
        self.call
    }

    /// The arguments, exactly as hashed.
    pub fn args(&self) -> &'a Map<String, Value> {
        self.call.args()
    }

    /// The arguments deserialized into `T` from the canonical text that was hashed, so
    /// the tool receives exactly what a reviewer reads; an error names the field at fault.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, ToolError> {
        let mut text = serde_json::Deserializer::from_str(self.call.canonical_args());
        serde_path_to_error::deserialize(&mut text).map_err(|error| {
            let path = error.path().to_string();
            ToolError::Arguments(ArgumentsError::Deserialize {
                path,
                source: Arc::new(error.into_inner()),
            })
        })
    }

    /// The context of type `T` the host gave the scope, or a typed error (the tool then
    /// does not run).
    pub fn context<T: Send + Sync + 'static>(&self) -> Result<Context<T>, ToolError> {
        self.contexts.get::<T>().ok_or(ToolError::MissingContext {
            type_name: std::any::type_name::<T>(),
        })
    }

    /// Every context of the scope.
    pub fn contexts(&self) -> &'a Contexts {
        self.contexts
    }
}

/// A tool an agent may call. `#[tool]` and `#[toolbox]` implement it, and
/// [`DynamicTool`] for tools known only at run time; implement it by hand only when
/// neither fits.
pub trait Tool: Send + Sync {
    /// The tool's declared metadata.
    fn spec(&self) -> ToolSpec;

    /// The JSON Schema of the tool's arguments, in the provider-safe shape of
    /// [`args_schema`].
    fn args_schema(&self) -> Value;

    /// Runs the tool on a call that the caller has already checksummed and gated.
    fn call<'a>(&'a self, input: ToolInput<'a>) -> ToolFuture<'a>;
}

/// Tools of one stateful value: `#[toolbox]` implements it for an `impl` block's
/// `#[tool]` methods, each a tool that holds the value.
pub trait Toolbox: Send + Sync + 'static {
    /// The value's tools.
    fn tools(self: Arc<Self>) -> Vec<Box<dyn Tool>>;
}

/// A boxed tool is a tool (so wrappers and registries compose).
impl<T: Tool + ?Sized> Tool for Box<T> {
    fn spec(&self) -> ToolSpec {
        (**self).spec()
    }

    fn args_schema(&self) -> Value {
        (**self).args_schema()
    }

    fn call<'a>(&'a self, input: ToolInput<'a>) -> ToolFuture<'a> {
        (**self).call(input)
    }
}
