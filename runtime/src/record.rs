//! What an agent's context holds besides tool output: messages, memories and thoughts.
//! Each is rendered into its own envelope tier.

use serde::{Deserialize, Serialize};

use crate::id::Id;

/// Who sent a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sender {
    /// The person the agent acts for, authenticated by the host (rendered
    /// `<message_…>` like any user; trusted data, so it does not taint the scope).
    Principal,
    /// Any other human user, such as a customer writing to a support agent (rendered
    /// `<message_…>`; untrusted).
    User,
    /// Another agent (rendered `<peer_agent_output_…>`).
    Peer,
}

/// A message from a person or a peer agent. Untrusted unless it comes from the
/// principal the agent acts for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// The message's id; it goes into tag names in compat mode.
    pub id: Id,
    /// Who sent it.
    pub sender: Sender,
    /// How the sender is shown (`from="…"`).
    pub from: String,
    /// When it was sent, as RFC 3339 text, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    /// The text.
    pub content: String,
}

/// A memory the agent recalls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    /// The memory's id.
    pub id: Id,
    /// The remembered text.
    pub content: String,
    /// Where it came from, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// When it was written, as RFC 3339 text, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    /// Its kind, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// A relevance score, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
}

/// Whose reasoning a thought is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ThoughtKind {
    /// The agent's own earlier reasoning.
    SelfReasoning,
    /// A peer agent's reasoning (wrapped in `<peer_agent_output_…>`).
    PeerReasoning,
    /// Reasoning the provider returned in a form no one can read (an encrypted or signed
    /// block a provider wants replayed). The prompt shows a fixed summary, never the
    /// payload, which goes back to the provider by a side channel.
    OpaqueReasoning,
}

impl ThoughtKind {
    /// The `kind="…"` text.
    pub fn as_str(self) -> &'static str {
        match self {
            ThoughtKind::SelfReasoning => "self-reasoning",
            ThoughtKind::PeerReasoning => "peer-reasoning",
            ThoughtKind::OpaqueReasoning => "opaque-reasoning",
        }
    }
}

/// A reasoning trace replayed into the context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thought {
    /// The thought's id.
    pub id: Id,
    /// Whose reasoning it is.
    pub kind: ThoughtKind,
    /// Who reasoned (`from="…"`).
    pub from: String,
    /// When, as RFC 3339 text, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    /// The reasoning text; for opaque reasoning, the payload kept for the provider
    /// (empty when there is none), which the prompt never shows.
    pub content: String,
    /// For opaque reasoning, the provider format the payload can be replayed to (say
    /// `anthropic-thinking`), shown as `replayCompatibility="…"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_compatibility: Option<String>,
}
