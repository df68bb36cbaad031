//! The explicit, per-agent list of tools the agent may call.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::call::{Checksum, ToolCall};
use crate::canonical::canonical_json;
use crate::content::Content;
use crate::id::Id;
use crate::schema::{StrictSchemaError, strict_schema};
pub use crate::tool::declaration::RegistryError;
use crate::tool::declaration::validate_tool;
use crate::tool::{
    ArgumentsError, Contexts, DeclaredTrust, Effects, Outcome, OutputKind, Tool, ToolError,
    ToolInput, ToolSpec, Toolbox, Trust, check_arguments, free_text_argument,
};

pub use tooltrust_internals::{MAX_TOOL_NAME_LEN, is_valid_tool_name};

/// The tools an agent may use, sorted by name, with a fingerprint of their surface.
///
/// Build it with [`tools!`](crate::tools) (which also rejects duplicate names at compile
/// time), [`Registry::builder`] (free functions, toolboxes and tools defined at run time
/// together) or [`Registry::new`].
pub struct Registry {
    entries: Vec<Entry>,
    catalog: Vec<CatalogEntry>,
    fingerprint: String,
}

struct Entry {
    spec: ToolSpec,
    tool: Box<dyn Tool>,
    /// The arguments schema, read once.
    schema: Value,
    /// The first argument that is free text rather than a closed vocabulary, if any.
    free_text: Option<String>,
}

/// One tool as the catalog shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CatalogEntry {
    /// The tool's name.
    pub name: String,
    /// What the tool does.
    pub description: String,
    /// How far its output may be trusted.
    pub trust: DeclaredTrust,
    /// Whether its output is data or instruction.
    pub output: OutputKind,
    /// Whether it changes state outside the agent.
    pub effects: Effects,
    /// The JSON Schema of its arguments.
    pub schema: Value,
    /// The same schema in the form OpenAI's strict structured outputs accept (every
    /// property required, optional ones nullable, no additional properties, no
    /// unsupported keywords), or why it has none (a map's keys cannot be listed).
    #[serde(skip)]
    pub strict_schema: Result<Value, StrictSchemaError>,
}

impl CatalogEntry {
    /// The tool's declaration in the words MCP's `_meta.tooltrust` uses:
    /// `{"effects", "output", "trust"}` (`read_only`/`consequential`, `data`/`instruction`,
    /// `trusted`/`untrusted`).
    pub(crate) fn declaration(&self) -> Value {
        let read_only = self.effects == Effects::ReadOnly;
        let untrusted = self.trust == DeclaredTrust::Untrusted;
        serde_json::json!({
            "trust": if untrusted { "untrusted" } else { "trusted" },
            "effects": if read_only { "read_only" } else { "consequential" },
            "output": if self.output == OutputKind::Instruction { "instruction" } else { "data" },
        })
    }
}

/// Why a call could not be dispatched; nothing ran.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum DispatchError {
    /// The model named a tool this registry does not hold.
    #[error("unknown tool `{name}`; available tools: {}", available.join(", "))]
    UnknownTool {
        /// The name the model used.
        name: String,
        /// The names the registry holds, sorted.
        available: Vec<String>,
    },
    /// The tool refused its input (arguments that do not match its schema, a missing
    /// context).
    #[error("call to `{tool}` refused: {error}")]
    Refused {
        /// The tool that was called.
        tool: String,
        /// Why.
        #[source]
        error: ToolError,
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

/// Builds a [`Registry`] from tools of every kind.
///
/// ```
/// use std::sync::Arc;
///
/// struct Mailer;
///
/// #[tooltrust::toolbox]
/// impl Mailer {
///     /// Reads the user's inbox.
///     #[tool(untrusted, read_only)]
///     fn read_inbox(&self) -> String {
///         "no mail".into()
///     }
/// }
///
/// /// Fetches a web page.
/// #[tooltrust::tool(untrusted, read_only)]
/// fn fetch_page(url: String) -> String {
///     url
/// }
///
/// let registry = tooltrust::Registry::builder()
///     .tools(tooltrust::tools![fetch_page])
///     .toolbox(Arc::new(Mailer))
///     .build()?; // duplicate names across all sources: a typed error
/// assert_eq!(registry.names().collect::<Vec<_>>(), ["fetch_page", "read_inbox"]);
/// # Ok::<(), tooltrust::registry::RegistryError>(())
/// ```
#[derive(Default)]
pub struct RegistryBuilder {
    tools: Vec<Box<dyn Tool>>,
    error: Option<RegistryError>,
}

impl RegistryBuilder {
    /// Adds one tool.
    pub fn tool(mut self, tool: impl Tool + 'static) -> Self {
        self.tools.push(Box::new(tool));
        self
    }

    /// Adds tools: a registry (what `tools![…]` builds), or any list of boxed tools. An
    /// error `tools![…]` returned is reported by [`build`](Self::build).
    pub fn tools(mut self, tools: impl IntoTools) -> Self {
        match tools.into_tools() {
            Ok(tools) => self.tools.extend(tools),
            Err(error) => {
                self.error.get_or_insert(error);
            }
        }
        self
    }

    /// Adds the tools of a `#[toolbox]` value.
    pub fn toolbox<T: Toolbox>(mut self, toolbox: Arc<T>) -> Self {
        self.tools.extend(toolbox.tools());
        self
    }

    /// Builds the registry, refusing duplicate names across all sources and any invalid
    /// declaration.
    pub fn build(self) -> Result<Registry, RegistryError> {
        match self.error {
            Some(error) => Err(error),
            None => Registry::new(self.tools),
        }
    }
}

/// What [`RegistryBuilder::tools`] takes.
pub trait IntoTools {
    /// The tools, or why they could not be listed.
    fn into_tools(self) -> Result<Vec<Box<dyn Tool>>, RegistryError>;
}

impl IntoTools for Registry {
    fn into_tools(self) -> Result<Vec<Box<dyn Tool>>, RegistryError> {
        Ok(self.entries.into_iter().map(|entry| entry.tool).collect())
    }
}

impl IntoTools for Result<Registry, RegistryError> {
    fn into_tools(self) -> Result<Vec<Box<dyn Tool>>, RegistryError> {
        self?.into_tools()
    }
}

impl IntoTools for Vec<Box<dyn Tool>> {
    fn into_tools(self) -> Result<Vec<Box<dyn Tool>>, RegistryError> {
        Ok(self)
    }
}

impl Registry {
    /// Starts a registry of tools from every source.
    pub fn builder() -> RegistryBuilder {
        RegistryBuilder::default()
    }

    /// Builds a registry, refusing duplicate names and invalid declarations.
    pub fn new(tools: impl IntoIterator<Item = Box<dyn Tool>>) -> Result<Self, RegistryError> {
        let mut entries = Vec::new();
        for tool in tools {
            let spec = tool.spec();
            let schema = tool.args_schema();
            validate_tool(&spec, &schema)?;
            entries.push(Entry {
                free_text: free_text_argument(&schema),
                spec,
                tool,
                schema,
            });
        }
        entries.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
        if let Some(pair) = entries
            .windows(2)
            .find(|w| w[0].spec.name == w[1].spec.name)
        {
            return Err(RegistryError::DuplicateName(pair[0].spec.name.to_string()));
        }
        let catalog: Vec<CatalogEntry> = entries
            .iter()
            .map(|entry| CatalogEntry {
                name: entry.spec.name.to_string(),
                description: entry.spec.description.trim().to_owned(),
                trust: entry.spec.trust,
                output: entry.spec.output,
                effects: entry.spec.effects,
                strict_schema: strict_schema(&entry.schema),
                schema: entry.schema.clone(),
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
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.entries.iter().map(|entry| &*entry.spec.name)
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
    pub fn spec(&self, name: &str) -> Result<&ToolSpec, DispatchError> {
        self.entry(name).map(|entry| &entry.spec)
    }

    /// The first argument of tool `name` that is free text rather than a closed
    /// vocabulary, if it has one (and the tool exists).
    pub fn free_text_argument(&self, name: &str) -> Option<&str> {
        self.entry(name).ok()?.free_text.as_deref()
    }

    fn entry(&self, name: &str) -> Result<&Entry, DispatchError> {
        self.entries
            .binary_search_by(|entry| (*entry.spec.name).cmp(name))
            .map(|at| &self.entries[at])
            .map_err(|_| DispatchError::UnknownTool {
                name: name.to_owned(),
                available: self.names().map(str::to_owned).collect(),
            })
    }

    /// Runs `call` with the scope's `contexts`. An unknown tool, arguments that do not
    /// fit (for an instruction tool, anything outside its closed vocabulary) and a
    /// missing context are errors and run nothing; a tool that ran returns its output
    /// tagged with the trust it is rendered with. Only a scope calls it, after the gate
    /// allowed the call.
    pub(crate) async fn run(
        &self,
        call: &ToolCall,
        contexts: &Contexts,
    ) -> Result<ToolOutput, DispatchError> {
        let entry = self.entry(call.tool())?;
        let refused = |error: ToolError| DispatchError::Refused {
            tool: call.tool().to_owned(),
            error,
        };
        if entry.spec.output == OutputKind::Instruction {
            // The second line of defence behind the compile-time bound, for tools that
            // declare a vocabulary without enforcing it.
            check_arguments(&entry.schema, call.args())
                .map_err(|error: ArgumentsError| refused(error.into()))?;
        }
        let outcome = entry
            .tool
            .call(ToolInput::new(call, contexts))
            .await
            .map_err(refused)?;
        Ok(tag_output(&entry.spec, call, outcome))
    }
}

/// Tags an outcome with the trust it is rendered with: trust is content, not courier.
fn tag_output(spec: &ToolSpec, call: &ToolCall, outcome: Outcome) -> ToolOutput {
    let (content, failed) = match outcome {
        Outcome::Output(content) => (content, false),
        Outcome::Failed(message) => (Content::Text(message), true),
    };
    let trust = if failed || content.is_outsider_content() {
        Trust::Untrusted
    } else {
        spec.trust.into()
    };
    let output = if trust == Trust::Trusted {
        spec.output
    } else {
        OutputKind::Data
    };
    ToolOutput {
        tool: spec.name.to_string(),
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

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("tools", &self.names().collect::<Vec<_>>())
            .field("fingerprint", &self.fingerprint)
            .finish()
    }
}
