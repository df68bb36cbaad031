//! The rules every tool's declaration obeys, from `#[tool]`, `#[toolbox]` or
//! [`DynamicTool`](super::DynamicTool): checked when a registry is built and when a tool
//! is defined at run time, with the compile errors' wording.

use serde_json::Value;
use tooltrust_internals::is_valid_tool_name;

use super::{DeclaredTrust, OutputKind, ToolSpec};

/// Why a registry (or a tool defined at run time) could not be built. The wording of
/// each declaration error is the compile error's, for tools `#[tool]` declares.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// Two tools have the same name.
    #[error("two tools are named `{0}`; every tool in a registry needs its own name")]
    DuplicateName(String),
    /// A tool's name is not `[A-Za-z0-9_-]{{1,64}}`.
    #[error("tool name {0:?} is invalid: a tool name is {rule}", rule = tooltrust_internals::TOOL_NAME_RULE)]
    InvalidName(String),
    /// A tool declares `untrusted` with `instruction` output.
    #[error("tool `{0}`: {reason}", reason = tooltrust_internals::UNTRUSTED_INSTRUCTION)]
    UntrustedInstruction(String),
    /// A tool has no description, so the model cannot know when to call it.
    #[error(
        "tool `{0}` has no description: say what the tool does, so that the model knows when to call it"
    )]
    MissingDescription(String),
    /// A tool's arguments schema is not an object schema.
    #[error(
        "tool `{0}`: the arguments schema must be a JSON object schema (`\"type\": \"object\"`)"
    )]
    NotAnObjectSchema(String),
    /// A tool defined at run time declares no trust (trust is mandatory).
    #[error("tool `{0}` declares no trust: say whether its output is trusted or untrusted")]
    MissingTrust(String),
    /// A tool defined at run time has nothing to run.
    #[error("tool `{0}` has no handler")]
    MissingHandler(String),
}

/// Checks one tool's declaration against its arguments `schema`: the name rule, trust
/// and output, a description, an object schema. (An instruction tool that takes free
/// text is accepted; its output is rendered as data once the scope is tainted.)
pub(crate) fn validate_tool(spec: &ToolSpec, schema: &Value) -> Result<(), RegistryError> {
    let name = || spec.name.to_string();
    if !is_valid_tool_name(&spec.name) {
        return Err(RegistryError::InvalidName(name()));
    }
    if spec.description.trim().is_empty() {
        return Err(RegistryError::MissingDescription(name()));
    }
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err(RegistryError::NotAnObjectSchema(name()));
    }
    if spec.output == OutputKind::Instruction && spec.trust == DeclaredTrust::Untrusted {
        return Err(RegistryError::UntrustedInstruction(name()));
    }
    Ok(())
}
