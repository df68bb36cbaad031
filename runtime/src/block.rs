//! Blocks of context, and instruction text: the only text that carries the developer's
//! authority.
//!
//! A block is trusted, vetted or untrusted, and instruction or data. An untrusted
//! instruction block cannot be constructed: an instruction block can only be made from
//! an [`Instruction`], which is always trusted, and a data block can never become an
//! instruction.

use std::borrow::Cow;

use crate::id::Id;
use crate::record::Sender;
use crate::shared_text::SharedText;
use crate::tool::{OutputKind, Trust};

/// Text that carries the developer's authority. It can only come from the developer's
/// own code (a `&'static str`, e.g. a literal or `include_str!`); there is no way to make
/// one from run-time text. (A `trusted, instruction` tool's output carries its authority
/// in its own envelope, `output="instruction"`, rendered from the registry's declaration.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instruction(Cow<'static, str>);

impl Instruction {
    /// Instruction text written in the developer's code.
    pub const fn new(text: &'static str) -> Self {
        Instruction(Cow::Borrowed(text))
    }

    /// Instruction text from reference vectors, which are the developer's own test data.
    #[cfg(feature = "testing")]
    pub(crate) fn developer_authored(text: impl Into<String>) -> Self {
        Instruction(Cow::Owned(text.into()))
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

/// One block of a scope's context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    id: Id,
    body: Body,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Body {
    /// Always trusted: the type has no trust to choose.
    Instruction(Instruction),
    Data {
        trust: Trust,
        /// Shared: a tool output's text may be the body of its envelope, which the scope
        /// keeps too. Empty once forgotten.
        text: SharedText,
        origin: Origin,
        forgotten: Option<Forgotten>,
    },
}

/// What a block whose text the session let go of (past its memory budget) still says of
/// it: a forgotten block keeps its id, trust and origin, and vouches for no value. The
/// text's SHA-256 is in the session's record
/// ([`Event::BlockForgotten`](crate::event::Event::BlockForgotten)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Forgotten {
    /// How many bytes its text held.
    pub bytes: usize,
}

/// Where a data block came from, for rules that ask whether a value in a call was
/// vouched for, or merely echoed back.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Origin {
    /// A tool's output; the scalar values of the call's arguments (an output may echo
    /// them, so they vouch for nothing).
    ToolOutput {
        /// The tool.
        tool: String,
        /// Every key and scalar in the call's arguments: strings as they are, numbers and
        /// booleans as canonical JSON text.
        argument_values: Vec<String>,
    },
    /// A message.
    Message(Sender),
    /// The scope's memories, rendered together.
    Memories,
    /// Records retrieved from a corpus, rendered together.
    Retrieved,
    /// Anything else (a handle, a thought, a note of the runtime).
    Other,
}

impl Block {
    /// An instruction block; always trusted.
    pub fn instruction(id: Id, instruction: Instruction) -> Self {
        Block {
            id,
            body: Body::Instruction(instruction),
        }
    }

    /// A data block of the given trust.
    pub fn data(id: Id, trust: Trust, text: impl Into<String>) -> Self {
        Self::data_from(id, trust, text, Origin::Other)
    }

    /// A data block of the given trust and origin.
    pub fn data_from(id: Id, trust: Trust, text: impl Into<String>, origin: Origin) -> Self {
        Self::data_shared(id, trust, SharedText::from(text.into()), origin)
    }

    /// A data block whose text is shared with another holder of it (its envelope).
    pub(crate) fn data_shared(id: Id, trust: Trust, text: SharedText, origin: Origin) -> Self {
        Block {
            id,
            body: Body::Data {
                trust,
                text,
                origin,
                forgotten: None,
            },
        }
    }

    /// Where the block came from; `None` for the developer's instruction.
    pub fn origin(&self) -> Option<&Origin> {
        match &self.body {
            Body::Instruction(_) => None,
            Body::Data { origin, .. } => Some(origin),
        }
    }

    /// The block's id.
    pub fn id(&self) -> &Id {
        &self.id
    }

    /// How far the block may be trusted.
    pub fn trust(&self) -> Trust {
        match &self.body {
            Body::Instruction(_) => Trust::Trusted,
            Body::Data { trust, .. } => *trust,
        }
    }

    /// Instruction or data.
    pub fn kind(&self) -> OutputKind {
        match &self.body {
            Body::Instruction(_) => OutputKind::Instruction,
            Body::Data { .. } => OutputKind::Data,
        }
    }

    /// What the block still says of its text once the session let go of it; `None`
    /// while it keeps the text.
    pub fn forgotten(&self) -> Option<&Forgotten> {
        match &self.body {
            Body::Data { forgotten, .. } => forgotten.as_ref(),
            Body::Instruction(_) => None,
        }
    }

    /// Lets go of a data block's text, keeping its length; returns the text. An instruction, or a block already forgotten, is kept as it is.
    pub(crate) fn forget(&mut self) -> Option<SharedText> {
        match &mut self.body {
            Body::Data {
                text,
                forgotten: forgotten @ None,
                ..
            } => {
                *forgotten = Some(Forgotten {
                    bytes: text.as_str().len(),
                });
                Some(std::mem::replace(text, SharedText::from(String::new())))
            }
            _ => None,
        }
    }

    /// The block's text (before rendering); empty once forgotten.
    pub fn text(&self) -> &str {
        match &self.body {
            Body::Instruction(instruction) => instruction.as_str(),
            Body::Data { text, .. } => text.as_str(),
        }
    }
}
