//! Instruction text: the only text that carries the developer's authority.

use std::borrow::Cow;

use crate::registry::ToolOutput;
use crate::tool::{OutputKind, Trust};

/// Text that carries the developer's authority. It can only come from the developer's
/// own code (a `&'static str`) or from a tool declared `trusted, instruction`; there is
/// no way to make one from run-time text of any other origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instruction(Cow<'static, str>);

impl Instruction {
    /// Instruction text written in the developer's code.
    pub const fn new(text: &'static str) -> Self {
        Instruction(Cow::Borrowed(text))
    }

    /// Instruction text the developer vouches for at run time (a policy file the
    /// developer ships, say). This is a declaration of authorship: never pass text that
    /// any outsider wrote or could have changed.
    pub fn developer_authored(text: impl Into<String>) -> Self {
        Instruction(Cow::Owned(text.into()))
    }

    /// The output of a `trusted, instruction` tool, or `None` for any other output
    /// (untrusted, data, failed, or outsider content).
    pub fn from_tool_output(output: &ToolOutput) -> Option<Self> {
        if output.trust != Trust::Trusted
            || output.output != OutputKind::Instruction
            || output.failed
        {
            return None;
        }
        match &output.content {
            crate::content::Content::Text(text) => Some(Instruction(Cow::Owned(text.clone()))),
            _ => None,
        }
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&'static str> for Instruction {
    fn from(text: &'static str) -> Self {
        Instruction::new(text)
    }
}
