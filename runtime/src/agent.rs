//! A small agent loop over any model: model → tool calls → checksum → gate → run →
//! render → record → model, until the model answers.
//!
//! The library has no HTTP client: a host implements [`Model`] over its own client
//! (OpenAI, Anthropic, a local model), or uses `tooltrust-providers`; tests and examples
//! use `testing::ScriptedModel` (feature `testing`).

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};

use crate::block::{Block, Instruction, Origin};
use crate::call::{CallError, Checksum, ToolCall};
use crate::envelope::STANDING_EXPLANATION;
use crate::held::HeldStatus;
use crate::id::Id;
use crate::record::Message;
use crate::registry::CatalogEntry;
use crate::session::{CallOutcome, Scope, SessionError};

/// One message of a provider-neutral chat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum ChatMessage {
    /// Text the host sends as the user: an enveloped message.
    User {
        /// The rendered text.
        content: String,
    },
    /// What the model said and asked for.
    Assistant {
        /// Its text, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<String>,
        /// The calls it asked for.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ModelToolCall>,
    },
    /// The answer to one tool call: an envelope, or the gate's decision.
    Tool {
        /// The provider's id of the call answered.
        call_id: String,
        /// The tool named.
        name: String,
        /// The rendered answer.
        content: String,
    },
}

/// A tool call as the model wrote it: the arguments are the model's raw JSON text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelToolCall {
    /// The provider's id for the call.
    pub id: String,
    /// The tool named.
    pub name: String,
    /// The argument text, unparsed.
    pub arguments: String,
}

impl ModelToolCall {
    /// The checksummed call, under a fresh id of its own: providers restart their ids
    /// every turn, so the provider's id answers the call on the wire and names nothing
    /// in the context. Arguments that are not an acceptable JSON object make an error
    /// call, never a panic.
    pub fn to_call(&self) -> Result<ToolCall, CallError> {
        ToolCall::from_model(self.name.as_str(), &self.arguments)
    }
}

/// What the model answers.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AssistantMessage {
    /// Its text, if any.
    pub content: Option<String>,
    /// The calls it asks for; none means the model has answered.
    pub tool_calls: Vec<ModelToolCall>,
}

impl AssistantMessage {
    /// The calls it asks for, checksummed, in order.
    pub fn calls(&self) -> Vec<Result<ToolCall, CallError>> {
        self.tool_calls.iter().map(ModelToolCall::to_call).collect()
    }
}

/// What the model is given each turn.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    /// The system text: the standing explanation and the developer's policy.
    pub system: String,
    /// The conversation so far.
    pub messages: Vec<ChatMessage>,
    /// The tools it may call.
    pub tools: Vec<CatalogEntry>,
}

/// Why the model gave no answer. It keeps the provider's own error as its
/// [`source`](std::error::Error::source), so a host can downcast it (to an HTTP status, a
/// refusal, a cut-off) and decide whether to retry.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the model failed: {source}")]
pub struct ModelError {
    #[source]
    source: std::sync::Arc<dyn std::error::Error + Send + Sync + 'static>,
}

impl ModelError {
    /// Wraps the provider's error.
    pub fn new(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        ModelError {
            source: std::sync::Arc::new(source),
        }
    }

    /// A model error described by `message` alone (a scripted model's, say).
    pub fn msg(message: impl Into<String>) -> Self {
        #[derive(Debug, thiserror::Error)]
        #[error("{0}")]
        struct Message(String);
        Self::new(Message(message.into()))
    }

    /// The provider's error, to downcast.
    pub fn provider_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.source
    }
}

/// The future a model returns.
pub type ModelFuture<'a> =
    Pin<Box<dyn Future<Output = Result<AssistantMessage, ModelError>> + Send + 'a>>;

/// A chat model: messages and tools in, one assistant message out.
pub trait Model: Send + Sync {
    /// Answers `request`.
    fn respond<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a>;
}

/// What one run of the loop did.
#[derive(Debug, Clone)]
pub struct Transcript {
    /// The model's final text, if it answered.
    pub answer: Option<String>,
    /// The conversation, as the model saw it.
    pub messages: Vec<ChatMessage>,
    /// Every call the model asked for, with what became of it.
    pub calls: Vec<(ModelToolCall, CallResult)>,
}

/// What became of one call the model asked for.
#[derive(Debug, Clone)]
#[non_exhaustive]
#[allow(
    clippy::large_enum_variant,
    reason = "one per call, and matching through a box would burden every caller"
)]
pub enum CallResult {
    /// Refused before anything ran: the arguments were not an acceptable JSON object.
    Malformed(String),
    /// What the gate and the tool made of it.
    Outcome(CallOutcome),
    /// A review rejected it (see [`Agent::resume_decided`]); it never ran.
    Rejected {
        /// Who decided.
        reviewer: Id,
        /// Why.
        reason: String,
    },
}

impl Transcript {
    /// The ids of the calls the gate sent to review.
    pub fn pending(&self) -> Vec<Id> {
        self.calls
            .iter()
            .filter_map(|(_, result)| match result {
                CallResult::Outcome(CallOutcome::Pending { id, .. }) => Some(id.clone()),
                _ => None,
            })
            .collect()
    }
}

/// Why the loop stopped without an answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The model failed.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// Recording or rendering failed; the call it concerned did not run.
    #[error(transparent)]
    Scope(#[from] SessionError),
    /// The model kept calling tools past the turn limit.
    #[error("no answer after {0} turns")]
    TurnLimit(usize),
    /// A persisted conversation was refused: nothing of it was used.
    #[error(transparent)]
    Conversation(#[from] ConversationError),
    /// A decision names another call than the one held under its id: it approves other
    /// arguments (or another tool) than the conversation's, so nothing runs.
    #[error(
        "the decision on held call {id} approves checksum {approved}, but the held call is {held}: refused"
    )]
    DecisionMismatch {
        /// The held call.
        id: Id,
        /// The checksum the decision names.
        approved: Checksum,
        /// The checksum of the call the conversation holds under that id.
        held: Checksum,
    },
}

/// Why a persisted conversation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConversationError {
    /// It carries no MAC, or one that does not match what it says: it was edited (its
    /// taint, its held calls, any message) or saved under another session key.
    #[error(
        "the conversation is not authenticated by this session's key: it was edited, or saved by a session with another key"
    )]
    Unauthenticated,
    /// It was saved by another scope; continue it in a scope opened with
    /// [`Session::continue_scope`](crate::Session::continue_scope) under that id.
    #[error("the conversation belongs to scope {saved}, not to this agent's scope {scope}")]
    OtherScope {
        /// The scope that saved it.
        saved: Id,
        /// This agent's scope.
        scope: Id,
    },
}

/// What an agent and its model have said so far: the chat messages the model was shown,
/// and which of the scope's timeline blocks they already hold. A second run continues it;
/// persist it (serde) and load it with [`Agent::with_conversation`] to continue in another
/// process (with a session built on the same key, the prompt is byte for byte the same).
///
/// A persisted conversation is input: whoever can write where it is kept could un-taint
/// it or swap a held call's arguments. So [`Agent::conversation`] authenticates it with a
/// MAC under a key derived from the session key (sealed mode), and
/// [`Agent::with_conversation`] refuses one that does not verify.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conversation {
    /// The timeline as chat messages, oldest first.
    pub messages: Vec<ChatMessage>,
    /// The scope's blocks the messages already show.
    pub shown: Vec<Id>,
    /// Whether the scope held untrusted content when the conversation was last saved: a
    /// scope continuing it starts tainted too, since its messages still hold that content.
    #[serde(default)]
    pub tainted: bool,
    /// Calls the gate held for review that the model has not yet heard the end of.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<HeldRequest>,
    /// The scope that saved it: its held calls, and the approvals of them, belong there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Id>,
    /// The MAC over everything above, under the session key (set when the agent hands the
    /// conversation out; absent in compat mode, which has no key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

/// The MAC tier of persisted conversations.
const CONVERSATION_TIER: &str = "conversation";

impl Conversation {
    /// The canonical text the MAC covers: everything but the MAC.
    fn authenticated_text(&self) -> String {
        let unsigned = Conversation {
            mac: None,
            ..self.clone()
        };
        serde_json::to_value(&unsigned)
            .map(|value| crate::canonical::canonical_json(&value))
            .unwrap_or_default()
    }
}

/// A call held for review, as the conversation remembers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldRequest {
    /// The held call's id in the session that held it (the review's subject).
    pub id: Id,
    /// The call as the model wrote it.
    pub requested: ModelToolCall,
}

/// A person's (or a review's) decision on a held call, for [`Agent::resume_decided`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    /// The held call's id, as in [`HeldRequest::id`].
    pub id: Id,
    /// The checksum of the call the decision is about: a decision covers exactly these
    /// arguments, and a held call with any other is refused.
    pub checksum: Checksum,
    /// Who decided.
    pub reviewer: Id,
    /// The decision.
    pub verdict: crate::verdict::Verdict,
}

/// Where a block goes in the prompt: the reference's bucket order (instructions,
/// memories, retrieved records, then the timeline as chat messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bucket {
    Instructions,
    Memories,
    Retrieved,
    Timeline,
}

fn bucket(block: &Block) -> Bucket {
    match block.origin() {
        None => Bucket::Instructions,
        Some(Origin::Memories) => Bucket::Memories,
        Some(Origin::Retrieved) => Bucket::Retrieved,
        Some(_) => Bucket::Timeline,
    }
}

/// What a [`ContextPolicy`] leaves out of a request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Trim {
    /// How many of the oldest chat messages to leave out.
    pub drop: usize,
    /// A summary of what was left out, shown to the model in their place as a note
    /// (enveloped as data), if the policy writes one.
    pub summary: Option<String>,
}

/// Decides what to leave out of a request whose timeline is over the host's budget.
/// Only the timeline can be trimmed: the system text (instructions, memories, retrieved
/// records) always goes whole, and every trim is recorded as
/// [`Event::ContextTrimmed`](crate::event::Event::ContextTrimmed).
pub trait ContextPolicy: Send + Sync {
    /// What to leave out of `messages` (oldest first) so the rest fits `budget` bytes.
    fn trim(&self, messages: &[ChatMessage], budget: usize) -> Trim;
}

/// Leaves out the oldest whole exchanges: the request starts at a user message, so a
/// tool answer is never separated from the call it answers. If even the newest exchange
/// is over the budget, it goes alone.
#[derive(Debug, Clone, Copy, Default)]
pub struct DropOldest;

impl ContextPolicy for DropOldest {
    fn trim(&self, messages: &[ChatMessage], budget: usize) -> Trim {
        let mut suffix: usize = messages.iter().map(message_bytes).sum();
        let mut newest_start = 0;
        for (at, message) in messages.iter().enumerate() {
            if matches!(message, ChatMessage::User { .. }) {
                newest_start = at;
                if suffix <= budget {
                    break;
                }
            }
            suffix -= message_bytes(message);
        }
        Trim {
            drop: newest_start,
            summary: None,
        }
    }
}

/// The bytes of text a message puts in a request.
pub fn message_bytes(message: &ChatMessage) -> usize {
    match message {
        ChatMessage::User { content } => content.len(),
        ChatMessage::Assistant {
            content,
            tool_calls,
        } => {
            content.as_ref().map_or(0, String::len)
                + tool_calls
                    .iter()
                    .map(|call| call.id.len() + call.name.len() + call.arguments.len())
                    .sum::<usize>()
        }
        ChatMessage::Tool {
            call_id,
            name,
            content,
        } => call_id.len() + name.len() + content.len(),
    }
}

/// Drives a model in one scope.
///
/// Every request is built from the scope's context in the reference's bucket order: the
/// system text holds the standing explanation and the developer's policy, then the
/// scope's instructions, its memories and its retrieved records (each bucket that is not
/// empty, joined by blank lines); the timeline — messages, thoughts, the model's own
/// turns, tool results and gate notes — becomes the chat messages. Everything in it is
/// enveloped except the model's own turns, which come back as the model wrote them,
/// neutralised ([`Renderer::own_turn`](crate::envelope::Renderer::own_turn)). Run it once
/// at a time.
pub struct Agent {
    scope: Scope,
    policy: Vec<Instruction>,
    max_turns: usize,
    conversation: Mutex<Conversation>,
    budget: Option<(usize, Arc<dyn ContextPolicy>)>,
}

impl Agent {
    /// An agent working in `scope`, with the developer's `policy`.
    pub fn new(scope: Scope, policy: Vec<Instruction>) -> Self {
        Agent {
            scope,
            policy,
            max_turns: 16,
            conversation: Mutex::new(Conversation::default()),
            budget: None,
        }
    }

    /// Keeps each request's timeline within `bytes` of message text, leaving out the
    /// oldest exchanges ([`DropOldest`]).
    pub fn context_budget(self, bytes: usize) -> Self {
        self.context_policy(bytes, Arc::new(DropOldest))
    }

    /// Keeps each request's timeline within `bytes` of message text by `policy`.
    pub fn context_policy(mut self, bytes: usize, policy: Arc<dyn ContextPolicy>) -> Self {
        self.budget = Some((bytes, policy));
        self
    }

    /// The timeline a request carries: the whole conversation, or what the budget's
    /// policy keeps of it (recorded).
    fn timeline(&self, messages: &[ChatMessage]) -> Result<Vec<ChatMessage>, SessionError> {
        let Some((budget, policy)) = &self.budget else {
            return Ok(messages.to_vec());
        };
        let total: usize = messages.iter().map(message_bytes).sum();
        if total <= *budget {
            return Ok(messages.to_vec());
        }
        let Trim { drop, summary } = policy.trim(messages, *budget);
        let drop = drop.min(messages.len());
        if drop == 0 {
            return Ok(messages.to_vec());
        }
        let bytes = messages[..drop].iter().map(message_bytes).sum();
        let (scope, budget) = (self.scope.id(), *budget);
        self.scope
            .session()
            .act(|state, events| state.context_trimmed(events, scope, drop, bytes, budget))?;
        let mut kept = Vec::with_capacity(messages.len() - drop + 1);
        if let Some(summary) = summary {
            let content = self.scope.note("context-summary", &summary)?;
            kept.push(ChatMessage::User { content });
        }
        kept.extend_from_slice(&messages[drop..]);
        Ok(kept)
    }

    /// Continues `conversation` (one persisted from an earlier agent on this scope, or
    /// on a scope continued under its id, in a session on the same key) instead of
    /// starting afresh. In sealed mode a conversation whose MAC does not verify is
    /// refused; in compat mode (no key to verify with) it is taken as tainted.
    pub fn with_conversation(self, conversation: Conversation) -> Result<Self, AgentError> {
        let mut conversation = conversation;
        match self.scope.session().renderer().key() {
            Some(key) => {
                let text = conversation.authenticated_text();
                let authentic = conversation
                    .mac
                    .as_deref()
                    .is_some_and(|mac| key.verify_authenticated(CONVERSATION_TIER, &text, mac));
                if !authentic {
                    return Err(ConversationError::Unauthenticated.into());
                }
            }
            None => conversation.tainted = true,
        }
        if let Some(saved) = &conversation.scope
            && saved != self.scope.id()
        {
            return Err(ConversationError::OtherScope {
                saved: saved.clone(),
                scope: self.scope.id().clone(),
            }
            .into());
        }
        *self
            .conversation
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = conversation;
        Ok(self)
    }

    /// The conversation so far, to persist, authenticated under the session key.
    pub fn conversation(&self) -> Conversation {
        let mut conversation = self
            .conversation
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        conversation.scope = Some(self.scope.id().clone());
        conversation.mac = None;
        if let Some(key) = self.scope.session().renderer().key() {
            let text = conversation.authenticated_text();
            conversation.mac = Some(key.authenticate(CONVERSATION_TIER, &text));
        }
        conversation
    }

    /// Stops after `turns` model turns without an answer (default 16).
    pub fn max_turns(mut self, turns: usize) -> Self {
        self.max_turns = turns;
        self
    }

    /// The scope the agent works in.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// The system text: the standing explanation, then the developer's policy.
    pub fn system(&self) -> Result<String, SessionError> {
        let policy = self
            .scope
            .session()
            .renderer()
            .developer_policy(&self.policy, None)?;
        Ok(if policy.is_empty() {
            STANDING_EXPLANATION.to_owned()
        } else {
            format!("{STANDING_EXPLANATION}\n\n{policy}")
        })
    }

    /// The system text of a request: [`Agent::system`], then the scope's instructions,
    /// memories and retrieved records, each bucket that is not empty, joined by blank lines.
    pub fn prompt_system(&self) -> Result<String, SessionError> {
        let buckets = self
            .scope
            .rendered_where(|block| Some(bucket(block)).filter(|b| *b != Bucket::Timeline))?;
        let mut parts = vec![self.system()?];
        for wanted in [Bucket::Instructions, Bucket::Memories, Bucket::Retrieved] {
            let texts: Vec<&str> = buckets
                .iter()
                .filter(|(bucket, _)| *bucket == wanted)
                .map(|(_, text)| text.as_str())
                .collect();
            if !texts.is_empty() {
                parts.push(texts.join("\n\n"));
            }
        }
        Ok(parts.join("\n\n"))
    }

    /// The request the model would be sent next: a pure function of the scope's context
    /// and the conversation (the scope's timeline blocks not yet in the conversation
    /// count as new user messages). Hosts log or inspect it; `run` sends it.
    pub fn request(&self) -> Result<ModelRequest, SessionError> {
        let mut conversation = self.conversation();
        self.catch_up(&mut conversation)?;
        self.request_for(&conversation, self.scope.session().registry().catalog())
    }

    fn request_for(
        &self,
        conversation: &Conversation,
        tools: &[CatalogEntry],
    ) -> Result<ModelRequest, SessionError> {
        Ok(ModelRequest {
            system: self.prompt_system()?,
            messages: self.timeline(&conversation.messages)?,
            tools: tools.to_vec(),
        })
    }

    /// Adds to the conversation, as user messages, the scope's timeline blocks it does not
    /// show yet (the new message, and whatever the host added since the last run).
    fn catch_up(&self, conversation: &mut Conversation) -> Result<(), SessionError> {
        let shown: HashSet<&Id> = conversation.shown.iter().collect();
        let new = self.scope.rendered_where(|block| {
            (bucket(block) == Bucket::Timeline && !shown.contains(block.id()))
                .then(|| block.id().clone())
        })?;
        for (id, content) in new {
            conversation.messages.push(ChatMessage::User { content });
            conversation.shown.push(id);
        }
        Ok(())
    }

    /// Runs the loop for one user message until the model answers, continuing the
    /// conversation of earlier runs.
    pub async fn run(
        &self,
        model: &dyn Model,
        message: &Message,
    ) -> Result<Transcript, AgentError> {
        self.scope.add_message(message)?;
        let mut conversation = self.conversation();
        let result = self.turns(model, &mut conversation).await;
        self.keep(conversation);
        result
    }

    /// Continues after reviews: each held call that a review decided is settled — an
    /// approved one runs and the model is shown its enveloped result, a rejected one is
    /// reported to the model as a gate note — and the loop goes on until the model
    /// answers. Calls still undecided stay held.
    pub async fn resume(&self, model: &dyn Model) -> Result<Transcript, AgentError> {
        self.resume_decided(model, &[]).await
    }

    /// Like [`Agent::resume`], in a process whose session did not hold the calls (the
    /// conversation was persisted, the decisions came from a review queue): a call
    /// approved in `decisions` is put to this session's gate again, exactly as the model
    /// wrote it, and decided by the person's verdict if the gate holds it; a rejected one
    /// never runs.
    pub async fn resume_decided(
        &self,
        model: &dyn Model,
        decisions: &[Decided],
    ) -> Result<Transcript, AgentError> {
        let mut conversation = self.conversation();
        let result = async {
            self.inherit_taint(&mut conversation)?;
            let mut calls = Vec::new();
            for held in std::mem::take(&mut conversation.held) {
                let decided = decisions.iter().find(|decided| decided.id == held.id);
                match self.settle(&held, decided).await? {
                    Some((result, content)) => {
                        if let CallResult::Outcome(CallOutcome::Ran { block, .. }) = &result {
                            conversation.shown.push(block.clone());
                        }
                        conversation.messages.push(ChatMessage::User { content });
                        calls.push((held.requested, result));
                    }
                    None => conversation.held.push(held),
                }
            }
            let mut transcript = self.turns(model, &mut conversation).await?;
            calls.append(&mut transcript.calls);
            transcript.calls = calls;
            Ok(transcript)
        }
        .await;
        self.keep(conversation);
        result
    }

    /// Keeps what the model was shown, even if the loop failed, with the scope's taint.
    fn keep(&self, mut conversation: Conversation) {
        conversation.tainted |= self
            .scope
            .taint()
            .is_ok_and(|taint| taint == crate::gate::Taint::Tainted);
        *self
            .conversation
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = conversation;
    }

    /// A conversation that held untrusted content taints the scope continuing it, before
    /// anything is decided in it.
    fn inherit_taint(&self, conversation: &mut Conversation) -> Result<(), SessionError> {
        if conversation.tainted && self.scope.taint()? != crate::gate::Taint::Tainted {
            let block = self.scope.add_untrusted(
                "restored-conversation",
                "The conversation so far, restored, holds untrusted content.".to_owned(),
            )?;
            conversation.shown.push(block);
        }
        Ok(())
    }

    /// Settles one held call, if it has been decided: what became of it, and the text the
    /// model is shown (a gate note, then the result's envelope if it ran).
    async fn settle(
        &self,
        held: &HeldRequest,
        decided: Option<&Decided>,
    ) -> Result<Option<(CallResult, String)>, AgentError> {
        let session = self.scope.session();
        if let Some(decided) = decided {
            // What runs is what was approved: the same tool, the same canonical arguments.
            let held_checksum = held.requested.to_call().ok().map(|call| call.checksum());
            if held_checksum != Some(decided.checksum) {
                return Err(AgentError::DecisionMismatch {
                    id: held.id.clone(),
                    approved: decided.checksum,
                    held: held_checksum.unwrap_or_else(|| Checksum::of(b"")),
                });
            }
        }
        let id = match (session.pending_status(&held.id), decided) {
            (Some(HeldStatus::Approved | HeldStatus::Rejected | HeldStatus::Expired), _) => {
                held.id.clone()
            }
            (None, Some(decided)) if !decided.verdict.approve => {
                let note = self.scope.note(
                    "review-decision",
                    &format!(
                        "The held call {} ({}) was rejected by {}: {}. It did not run.",
                        held.id, held.requested.name, decided.reviewer, decided.verdict.reason
                    ),
                )?;
                let result = CallResult::Rejected {
                    reviewer: decided.reviewer.clone(),
                    reason: decided.verdict.reason.clone(),
                };
                return Ok(Some((result, note)));
            }
            (None, Some(_)) if session.approvals().is_some() => {
                return self.spend_held(held).await.map(Some);
            }
            (None, Some(decided)) => match self.answer(&held.requested).await? {
                (CallResult::Outcome(CallOutcome::Pending { id, .. }), _) => {
                    let verdict = decided.verdict.clone();
                    session.decide_call(&id, decided.reviewer.clone(), verdict)?;
                    id
                }
                // Not held this time (a clean scope): the gate's own decision stands.
                settled => return Ok(Some(settled)),
            },
            _ => return Ok(None),
        };
        let outcome = self.scope.run_pending(&id).await?;
        let verdict = match &outcome {
            CallOutcome::Ran { .. } => "approved by review; it ran and its result follows",
            _ => "rejected by review; it did not run",
        };
        Ok(Some(self.reviewed(held, verdict, outcome)?))
    }

    /// What the model is shown for a held call a review settled: a note saying what
    /// became of it, then the outcome itself.
    fn reviewed(
        &self,
        held: &HeldRequest,
        verdict: &str,
        outcome: CallOutcome,
    ) -> Result<(CallResult, String), SessionError> {
        let note = self.scope.note(
            "review-decision",
            &format!(
                "The held call {} ({}) was {verdict}.",
                held.id, held.requested.name
            ),
        )?;
        let content = format!("{note}\n\n{}", self.shown(&outcome)?);
        Ok((CallResult::Outcome(outcome), content))
    }

    /// Runs an approved held call by spending its approval from the session's durable
    /// queue ([`crate::spend::spend`]): the queue, not the caller's `Decided`, says whether
    /// and by whom it was approved, and it is claimed there once, so a retry after a crash
    /// or a conversation rolled back cannot run it again.
    async fn spend_held(&self, held: &HeldRequest) -> Result<(CallResult, String), AgentError> {
        let Some(approvals) = self.scope.session().approvals().cloned() else {
            return Ok(self.answer(&held.requested).await?);
        };
        let Ok(call) = held.requested.to_call() else {
            return Ok(self.answer(&held.requested).await?);
        };
        let spent =
            crate::spend::spend(&self.scope, approvals.as_ref(), &held.id, None, call, None).await;
        let (outcome, verdict) = match spent {
            Ok(crate::spend::Spent::NotHeld(outcome)) => {
                let shown = self.shown(&outcome)?;
                return Ok((CallResult::Outcome(outcome), shown));
            }
            Ok(crate::spend::Spent::Ran(outcome)) => (
                outcome,
                "approved by review; it ran and its result follows".to_owned(),
            ),
            Err(crate::spend::SpendError::Claim(refused)) => (
                CallOutcome::Denied(crate::gate::Decision::deny(
                    crate::gate::rule::REVIEW,
                    refused.to_string(),
                )),
                format!("not run: {refused}"),
            ),
            Err(crate::spend::SpendError::Session(error)) => return Err(error.into()),
        };
        Ok(self.reviewed(held, &verdict, outcome)?)
    }

    async fn turns(
        &self,
        model: &dyn Model,
        conversation: &mut Conversation,
    ) -> Result<Transcript, AgentError> {
        let session = self.scope.session();
        self.inherit_taint(conversation)?;
        self.catch_up(conversation)?;
        let mut calls = Vec::new();
        let tools = session.registry().catalog();
        for _ in 0..self.max_turns {
            let request = self.request_for(conversation, tools)?;
            let span = tracing::info_span!(
                "chat",
                gen_ai.operation.name = "chat",
                tooltrust.scope = self.scope.id().as_str(),
                tooltrust.messages = request.messages.len(),
            );
            let reply = tracing::Instrument::instrument(model.respond(&request), span).await?;
            // The model's own turn comes back without an envelope, neutralised.
            let renderer = session.renderer();
            conversation.messages.push(ChatMessage::Assistant {
                content: reply
                    .content
                    .as_deref()
                    .map(|text| renderer.own_turn(text).into_owned()),
                tool_calls: reply.tool_calls.clone(),
            });
            if reply.tool_calls.is_empty() {
                return Ok(Transcript {
                    answer: reply.content,
                    messages: conversation.messages.clone(),
                    calls,
                });
            }
            for requested in reply.tool_calls {
                let (result, content) = self.answer(&requested).await?;
                match &result {
                    CallResult::Outcome(CallOutcome::Ran { block, .. }) => {
                        conversation.shown.push(block.clone());
                    }
                    CallResult::Outcome(CallOutcome::Pending { id, .. }) => {
                        conversation.held.push(HeldRequest {
                            id: id.clone(),
                            requested: requested.clone(),
                        });
                    }
                    _ => {}
                }
                conversation.messages.push(ChatMessage::Tool {
                    call_id: requested.id.clone(),
                    name: requested.name.clone(),
                    content,
                });
                calls.push((requested, result));
            }
        }
        Err(AgentError::TurnLimit(self.max_turns))
    }

    /// Checksums, gates and runs one requested call; returns what became of it and the
    /// text the model is shown.
    async fn answer(
        &self,
        requested: &ModelToolCall,
    ) -> Result<(CallResult, String), SessionError> {
        let parsed = requested.to_call();
        let call = match parsed {
            Ok(call) => call,
            Err(error) => {
                let text = error.to_string();
                let shown = self.scope.note("call-refused", &text)?;
                return Ok((CallResult::Malformed(text), shown));
            }
        };
        let outcome = self.scope.call(call).await?;
        let shown = self.shown(&outcome)?;
        Ok((CallResult::Outcome(outcome), shown))
    }

    /// The text the model is shown for what became of a call.
    fn shown(&self, outcome: &CallOutcome) -> Result<String, SessionError> {
        Ok(match outcome {
            CallOutcome::Ran { block, .. } => self.scope.rendered_of(block)?.unwrap_or_default(),
            CallOutcome::Invalid { note, .. } | CallOutcome::Withheld { note, .. } => note.clone(),
            CallOutcome::Denied(decision) => self.scope.note(
                "gate-decision",
                &format!(
                    "The call was denied by the gate ({}): {}",
                    decision.rule, decision.reason
                ),
            )?,
            CallOutcome::Pending { id, decision } => self.scope.note(
                "gate-decision",
                &format!(
                    "The call is held for review as {id} ({}): {}. It runs only if a reviewer approves it; do not retry it.",
                    decision.rule, decision.reason
                ),
            )?,
        })
    }
}
