//! The explicit, per-agent list of tools the agent may call.

use std::fmt;

use serde::Serialize;
use serde_json::Value;

use crate::call::{Checksum, ToolCall};
use crate::canonical::canonical_json;
use crate::content::Content;
use crate::id::Id;
use crate::tool::{ArgumentsError, Effects, Outcome, OutputKind, Tool, ToolSpec, Trust};

/// The longest tool name accepted.
pub const MAX_TOOL_NAME_LEN: usize = 64;

/// The tools an agent may use, sorted by name, with a fingerprint of their surface.
///
/// Build it with [`tools!`](crate::tools) (which also rejects duplicate names at compile
/// time) or [`Registry::new`].
pub struct Registry {
    entries: Vec<Entry>,
    catalog: Vec<CatalogEntry>,
    fingerprint: String,
}

struct Entry {
    spec: ToolSpec,
    tool: Box<dyn Tool>,
}

/// One tool as the catalog shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CatalogEntry {
    /// The tool's name.
    pub name: String,
    /// What the tool does.
    pub description: String,
    /// How far its output may be trusted.
    pub trust: Trust,
    /// Whether its output is data or instruction.
    pub output: OutputKind,
    /// Whether it changes state outside the agent.
    pub effects: Effects,
    /// The JSON Schema of its arguments.
    pub schema: Value,
}

/// Why a registry could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// Two tools have the same name.
    #[error("two tools are named `{0}`; every tool in a registry needs its own name")]
    DuplicateName(String),
    /// A tool's name is not `[A-Za-z0-9_-]{{1,64}}`.
    #[error(
        "tool name {0:?} is invalid: a tool name is 1 to 64 characters of A-Z, a-z, 0-9, `_` and `-`"
    )]
    InvalidName(String),
    /// A tool declares `untrusted` with `instruction` output (possible only for
    /// hand-written `Tool` impls; `#[tool]` refuses it at compile time).
    #[error(
        "tool `{0}` is untrusted but declares instruction output; untrusted output is always data"
    )]
    UntrustedInstruction(String),
}

/// Why a call could not be dispatched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DispatchError {
    /// The model named a tool this registry does not hold.
    #[error("unknown tool `{name}`; available tools: {}", available.join(", "))]
    UnknownTool {
        /// The name the model used.
        name: String,
        /// The names the registry holds, sorted.
        available: Vec<String>,
    },
    /// The arguments do not match the tool's schema.
    #[error("invalid arguments for `{tool}`: {error}")]
    InvalidArguments {
        /// The tool that was called.
        tool: String,
        /// What the deserializer said.
        error: ArgumentsError,
    },
}

/// A tool's output, tagged with the trust and output type it is rendered with.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The tool that ran.
    pub tool: String,
    /// The call's id.
    pub call_id: Id,
    /// The call's checksum.
    pub checksum: Checksum,
    /// How far the output may be trusted: the tool's declaration, except that errors,
    /// media, retrieved records and artifact handles are always untrusted.
    pub trust: Trust,
    /// Data or instruction; untrusted output is always data.
    pub output: OutputKind,
    /// What the tool produced (for a failed tool, its error message as text).
    pub content: Content,
    /// Whether the tool returned an error.
    pub failed: bool,
}

impl Registry {
    /// Builds a registry, refusing duplicate and invalid names.
    pub fn new(tools: impl IntoIterator<Item = Box<dyn Tool>>) -> Result<Self, RegistryError> {
        let mut entries: Vec<Entry> = tools
            .into_iter()
            .map(|tool| Entry {
                spec: tool.spec(),
                tool,
            })
            .collect();
        entries.sort_by(|a, b| a.spec.name.cmp(b.spec.name));
        for entry in &entries {
            if !is_valid_tool_name(entry.spec.name) {
                return Err(RegistryError::InvalidName(entry.spec.name.to_owned()));
            }
            if entry.spec.trust != Trust::Trusted && entry.spec.output == OutputKind::Instruction {
                return Err(RegistryError::UntrustedInstruction(
                    entry.spec.name.to_owned(),
                ));
            }
        }
        if let Some(pair) = entries
            .windows(2)
            .find(|w| w[0].spec.name == w[1].spec.name)
        {
            return Err(RegistryError::DuplicateName(pair[0].spec.name.to_owned()));
        }
        let catalog: Vec<CatalogEntry> = entries
            .iter()
            .map(|entry| CatalogEntry {
                name: entry.spec.name.to_owned(),
                description: entry.spec.description.to_owned(),
                trust: entry.spec.trust,
                output: entry.spec.output,
                effects: entry.spec.effects,
                schema: entry.tool.args_schema(),
            })
            .collect();
        let fingerprint = fingerprint_of(&catalog);
        Ok(Registry {
            entries,
            catalog,
            fingerprint,
        })
    }

    /// The catalog, sorted by name.
    pub fn catalog(&self) -> &[CatalogEntry] {
        &self.catalog
    }

    /// Lowercase-hex SHA-256 of the canonical JSON of the catalog: it changes whenever a
    /// tool's name, description, trust, output type, effects or schema changes.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// The names of the tools, sorted.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.entries.iter().map(|entry| entry.spec.name)
    }

    /// The number of tools.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the registry holds no tool.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The declared metadata of `name`, or an error that lists the available tools.
    pub fn spec(&self, name: &str) -> Result<ToolSpec, DispatchError> {
        self.entry(name).map(|entry| entry.spec)
    }

    fn entry(&self, name: &str) -> Result<&Entry, DispatchError> {
        self.entries
            .binary_search_by(|entry| entry.spec.name.cmp(name))
            .map(|at| &self.entries[at])
            .map_err(|_| DispatchError::UnknownTool {
                name: name.to_owned(),
                available: self.names().map(str::to_owned).collect(),
            })
    }

    /// Runs `call`. An unknown tool and arguments that do not match the schema are
    /// errors and run nothing; a tool that ran returns its output tagged with the trust
    /// it is rendered with. Only a scope calls it, after the gate allowed the call.
    pub(crate) async fn run(&self, call: &ToolCall) -> Result<ToolOutput, DispatchError> {
        let entry = self.entry(call.tool())?;
        let args = Value::Object(call.args().clone());
        let outcome =
            entry
                .tool
                .call(args)
                .await
                .map_err(|error| DispatchError::InvalidArguments {
                    tool: call.tool().to_owned(),
                    error,
                })?;
        Ok(tag_output(entry.spec, call, outcome))
    }
}

/// Tags an outcome with the trust it is rendered with: trust is content, not courier.
fn tag_output(spec: ToolSpec, call: &ToolCall, outcome: Outcome) -> ToolOutput {
    let (content, failed) = match outcome {
        Outcome::Output(content) => (content, false),
        Outcome::Failed(message) => (Content::Text(message), true),
    };
    let trust = if failed || content.is_outsider_content() {
        Trust::Untrusted
    } else {
        spec.trust
    };
    let output = if trust == Trust::Trusted {
        spec.output
    } else {
        OutputKind::Data
    };
    ToolOutput {
        tool: spec.name.to_owned(),
        call_id: call.id().clone(),
        checksum: call.checksum(),
        trust,
        output,
        content,
        failed,
    }
}

fn fingerprint_of(catalog: &[CatalogEntry]) -> String {
    // Serializing plain data into a `Value` cannot fail; an empty catalog is `[]`.
    let value = serde_json::to_value(catalog).unwrap_or(Value::Array(Vec::new()));
    Checksum::of(canonical_json(&value).as_bytes()).to_hex()
}

/// Whether `name` matches `[A-Za-z0-9_-]{1,64}`.
pub fn is_valid_tool_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_TOOL_NAME_LEN && name.chars().all(crate::id::is_id_char)
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("tools", &self.names().collect::<Vec<_>>())
            .field("fingerprint", &self.fingerprint)
            .finish()
    }
}
