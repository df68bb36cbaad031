//! Scopes: one unit of agent work, with its own context, taint and lineage.
//!
//! A scope is `clean` until an untrusted block enters its context, then `tainted`.
//! Taint never propagates upward: a parent runs tainted work in a child scope and
//! receives only a quarantine handle for the child's output, never its bytes. Every
//! call goes through the gate; there is no other way to run a registry's tool.

use crate::block::{Block, Instruction};
use crate::call::ToolCall;
use crate::content::RetrievedRecord;
use crate::envelope::{Mode, RenderError, Rendered};
use crate::event::{CallDecision, Event, RecordError};
use crate::gate::{Decision, GateContext, Ruling, Taint};
use crate::id::Id;
use crate::quarantine::{Exit, QuarantineError, QuarantineHandle, QuarantineStatus};
use crate::record::{Memory, Message, Thought};
use crate::registry::{DispatchError, ToolOutput};
use crate::review::Material;
use crate::session::{OutputState, Pending, PendingStatus, ScopeState, Session, State, custodian};
use crate::tool::Trust;

/// A handle on one scope of a [`Session`]. Clones refer to the same scope.
#[derive(Clone)]
pub struct Scope {
    session: Session,
    id: Id,
}

/// What became of a call.
#[derive(Debug, Clone, PartialEq)]
pub enum CallOutcome {
    /// The gate allowed it and the tool ran; its output is in the context as `block`.
    Ran {
        /// The tool's output, tagged with its trust.
        output: ToolOutput,
        /// The block holding the rendered output.
        block: Id,
        /// The blocks that influenced the call (the context when it was decided).
        lineage: Vec<Id>,
    },
    /// The gate denied it (or a review rejected it); nothing ran.
    Denied(Decision),
    /// The gate sent it to review; it runs only after a judge approves
    /// ([`Scope::run_pending`]).
    Pending {
        /// The pending call's id, the subject of a review.
        id: Id,
        /// Why it needs review.
        decision: Decision,
    },
    /// The gate allowed it but its arguments did not match the tool's schema; nothing ran.
    Invalid {
        /// What was wrong.
        error: DispatchError,
        /// The error as the model is shown it: an envelope (it quotes the model's values).
        note: String,
    },
    /// The tool ran but its output was withheld: it holds its own envelope's live closer
    /// (so the nonce leaked to whoever wrote it), and rendering it would end the block.
    Withheld {
        /// The tool's output, as it came back.
        output: ToolOutput,
        /// Why it was withheld.
        error: RenderError,
        /// What the model is shown instead: an envelope saying so.
        note: String,
    },
}

/// What a finished scope hands to its parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handoff {
    /// A clean scope's output, released as is.
    Released(String),
    /// A tainted scope's output, held in quarantine: only its handle crosses over.
    Quarantined(QuarantineHandle),
}

/// Why a scope operation failed; nothing was decided or changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    /// The event could not be recorded.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// The content could not be rendered.
    #[error(transparent)]
    Render(#[from] RenderError),
    /// Quarantine storage failed.
    #[error(transparent)]
    Quarantine(#[from] QuarantineError),
    /// The scope does not belong to this session.
    #[error("unknown scope {0}")]
    UnknownScope(Id),
    /// The context already holds a block with this id.
    #[error("the context already holds block {0}")]
    DuplicateBlock(Id),
    /// No pending call has this id in this scope.
    #[error("no pending call {0} in this scope")]
    UnknownPending(Id),
    /// The pending call has not been reviewed yet.
    #[error("pending call {0} has not been reviewed")]
    NotReviewed(Id),
    /// The pending call already ran.
    #[error("pending call {0} already ran")]
    AlreadyRan(Id),
    /// The output is not promoted (or unknown), so it cannot be released.
    #[error("quarantined output {0} is not approved for release")]
    NotReleasable(Id),
    /// The scope has finished its work: nothing more enters it or runs in it.
    #[error("scope {0} has finished")]
    Finished(Id),
}

impl Scope {
    pub(crate) fn new(session: Session, id: Id) -> Self {
        Scope { session, id }
    }

    /// The scope's id.
    pub fn id(&self) -> &Id {
        &self.id
    }

    /// The session the scope belongs to.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The scope's parent, if it is a child scope.
    pub fn parent(&self) -> Result<Option<Id>, ScopeError> {
        self.with_state(|scope| scope.parent.clone())
    }

    /// The scope's taint level now.
    pub fn taint(&self) -> Result<Taint, ScopeError> {
        self.with_state(|scope| scope.taint)
    }

    /// The blocks of the context, in order.
    pub fn blocks(&self) -> Result<Vec<Block>, ScopeError> {
        self.with_state(|scope| scope.blocks.clone())
    }

    /// The rendered context: every block's envelope, separated by blank lines.
    pub fn context(&self) -> Result<String, ScopeError> {
        self.with_state(|scope| scope.rendered.join("\n\n"))
    }

    /// The rendered envelope of each block, in order.
    pub fn rendered_blocks(&self) -> Result<Vec<String>, ScopeError> {
        self.with_state(|scope| scope.rendered.clone())
    }

    /// The rendered envelope of block `id`, if the context holds it.
    pub fn rendered_of(&self, id: &Id) -> Result<Option<String>, ScopeError> {
        self.with_state(|scope| {
            scope
                .blocks
                .iter()
                .position(|block| block.id() == id)
                .and_then(|at| scope.rendered.get(at).cloned())
        })
    }

    /// Opens a child scope driven by `author`, with its own context: clean, except that
    /// a review scope's children are review scopes too.
    pub fn child(&self, author: Id) -> Result<Scope, ScopeError> {
        let taint = self.with_open_state(|scope| match scope.taint {
            Taint::Review => Taint::Review,
            Taint::Clean | Taint::Tainted => Taint::Clean,
        })?;
        self.session.open(author, Some(self.id.clone()), taint)
    }

    /// Adds the developer's instruction (`<system_instructions kind="developer-rules">`).
    pub fn add_instruction(&self, instruction: Instruction) -> Result<Id, ScopeError> {
        let id = Id::random();
        let text = self
            .session
            .renderer()
            .developer_policy(std::slice::from_ref(&instruction), None)?;
        let rendered = Rendered {
            text,
            nonces: Vec::new(),
            findings: Vec::new(),
            unknown_tool: None,
            trust: Trust::Trusted,
        };
        self.push(Block::instruction(id, instruction), rendered, "instruction")
    }

    /// Adds a message: the principal's is trusted data; anyone else's is untrusted, so a
    /// clean scope becomes tainted.
    pub fn add_message(&self, message: &Message) -> Result<Id, ScopeError> {
        let rendered = self.session.renderer().message(message)?;
        let id = Id::new(message.id.as_str()).map_err(|error| RenderError::InvalidId {
            what: "message",
            error,
        })?;
        let block = Block::data(id, rendered.trust, message.content.clone());
        self.push(block, rendered, "message")
    }

    /// Adds retrieved records as one block: trusted data if every record is first-party,
    /// untrusted otherwise.
    pub fn add_retrieved(&self, records: &[RetrievedRecord]) -> Result<Id, ScopeError> {
        let rendered = self.session.renderer().retrieved(records)?;
        let texts = records.iter().map(|record| record.content.as_str());
        self.push_joined(rendered, texts, "retrieved")
    }

    /// Adds memories as one untrusted block (memories may hold what outsiders once wrote).
    pub fn add_memories(&self, memories: &[Memory]) -> Result<Id, ScopeError> {
        let rendered = self.session.renderer().memories(memories)?;
        let texts = memories.iter().map(|memory| memory.content.as_str());
        self.push_joined(rendered, texts, "memories")
    }

    /// Adds one data block holding `texts`, rendered together as `rendered`.
    fn push_joined<'a>(
        &self,
        rendered: Rendered,
        texts: impl Iterator<Item = &'a str>,
        source: &str,
    ) -> Result<Id, ScopeError> {
        let text = texts.collect::<Vec<_>>().join("\n\n");
        let block = Block::data(Id::random(), rendered.trust, text);
        self.push(block, rendered, source)
    }

    /// Adds a replayed reasoning trace, as untrusted data.
    pub fn add_thought(&self, thought: &Thought) -> Result<Id, ScopeError> {
        let rendered = self.session.renderer().thought(thought)?;
        let block = Block::data(Id::random(), rendered.trust, thought.content.clone());
        self.push(block, rendered, "thought")
    }

    /// Adds a child's quarantine handle: trusted data about the output (status, key,
    /// bytes, exit), never the output itself, so the scope stays clean.
    pub fn add_handle(&self, handle: &QuarantineHandle) -> Result<Id, ScopeError> {
        let text = format!(
            "Quarantined output {} of scope {}: {} bytes, exit {}, status {}. Its content is withheld until a review approves it.",
            handle.key,
            handle.target,
            handle.bytes,
            handle.exit.as_str(),
            match handle.status {
                QuarantineStatus::Pending => "pending review",
                QuarantineStatus::Approved => "approved",
                QuarantineStatus::Rejected => "rejected",
            }
        );
        self.push_data(Id::random(), Trust::Trusted, "quarantine-handle", text)
    }

    pub(crate) fn add_review_material(&self, material: &Material) -> Result<Id, ScopeError> {
        self.push_data(
            Id::random(),
            Trust::Untrusted,
            "review-material",
            material.text.clone(),
        )
    }

    /// Renders `text` as data of `trust` and `kind` and adds it as block `id`.
    pub(crate) fn push_data(
        &self,
        id: Id,
        trust: Trust,
        kind: &str,
        text: String,
    ) -> Result<Id, ScopeError> {
        let rendered = self.session.renderer().data(trust, kind, &id, &text)?;
        self.push(Block::data(id, trust, text), rendered, kind)
    }

    /// Renders a note for the model that is not a block of the context: a gate decision,
    /// a refused call. Notes quote the model's own requests (tool names, argument values),
    /// so they are enveloped as data; they are not evidence about the world, so they taint
    /// nothing, but their nonces are live like any other.
    pub(crate) fn note(&self, kind: &str, text: &str) -> Result<String, ScopeError> {
        let rendered = self
            .session
            .renderer()
            .data(Trust::Untrusted, kind, &Id::random(), text)?;
        let mut state = self.session.state();
        let scope = state
            .scopes
            .get_mut(&self.id)
            .ok_or_else(|| ScopeError::UnknownScope(self.id.clone()))?;
        if !rendered.findings.is_empty() {
            self.session.inner.recorder.record(&Event::neutralised(
                &self.id,
                &Id::random(),
                &rendered.findings,
            ))?;
        }
        self.register_nonces(scope, &rendered.nonces);
        Ok(rendered.text)
    }

    /// Puts `call` to the gate and acts on its decision: runs the tool, records the
    /// denial, or holds the call for review. The decision is recorded before anything
    /// runs; if it cannot be recorded, nothing runs.
    pub async fn call(&self, call: ToolCall) -> Result<CallOutcome, ScopeError> {
        let (decision, lineage) = {
            let state = self.session.state();
            let scope = open_scope(&state, &self.id)?;
            // The output will be block `call.id()`: a reused id is refused before the
            // tool runs, not after.
            if scope.blocks.iter().any(|block| block.id() == call.id()) {
                return Err(ScopeError::DuplicateBlock(call.id().clone()));
            }
            let cx = GateContext {
                call: &call,
                registry: self.session.registry(),
                scope: &self.id,
                taint: scope.taint,
                is_child: scope.parent.is_some(),
                blocks: &scope.blocks,
            };
            let decision = self.session.inner.policy.decide(&cx, &scope.nonces);
            (decision, lineage_of(scope))
        };
        self.record_decision(&call, &decision)?;
        match decision.ruling {
            Ruling::Allow => self.execute(call, lineage).await,
            Ruling::Deny => Ok(CallOutcome::Denied(decision)),
            Ruling::NeedsReview => {
                // Pending calls get their own id: a provider's call id need not be unique
                // across scopes, and a review must bind to exactly this call.
                let id = Id::random();
                self.session.state().pending.insert(
                    id.clone(),
                    Pending {
                        scope: self.id.clone(),
                        call,
                        decision: decision.clone(),
                        status: PendingStatus::Waiting,
                        under_review: false,
                    },
                );
                Ok(CallOutcome::Pending { id, decision })
            }
        }
    }

    /// Runs a call the gate sent to review, once a judge approved it; a rejected call is
    /// denied, and an unreviewed one is an error. An approved call runs once.
    pub async fn run_pending(&self, pending: &Id) -> Result<CallOutcome, ScopeError> {
        let (call, status, decision) = {
            let mut state = self.session.state();
            open_scope(&state, &self.id)?;
            let entry = state
                .pending
                .get_mut(pending)
                .filter(|entry| entry.scope == self.id)
                .ok_or_else(|| ScopeError::UnknownPending(pending.clone()))?;
            let status = entry.status;
            if status == PendingStatus::Approved {
                entry.status = PendingStatus::Ran;
            }
            (entry.call.clone(), status, entry.decision.clone())
        };
        match status {
            PendingStatus::Waiting => Err(ScopeError::NotReviewed(pending.clone())),
            PendingStatus::Ran => Err(ScopeError::AlreadyRan(pending.clone())),
            PendingStatus::Rejected => {
                let decision = Decision::deny(
                    "review",
                    format!("a review rejected the call ({})", decision.reason),
                );
                self.record_decision(&call, &decision)?;
                Ok(CallOutcome::Denied(decision))
            }
            PendingStatus::Approved => {
                let approval = Decision::allow("review", "a judge approved the call");
                self.record_decision(&call, &approval)?;
                let lineage = self.with_state(lineage_of)?;
                self.execute(call, lineage).await
            }
        }
    }

    /// Records a decision on `call` as the event of its ruling.
    fn record_decision(&self, call: &ToolCall, decision: &Decision) -> Result<(), ScopeError> {
        let record = CallDecision {
            scope: self.id.clone(),
            call: call.id().clone(),
            tool: call.tool().to_owned(),
            checksum: call.checksum(),
            rule: decision.rule.clone(),
            reason: decision.reason.clone(),
        };
        self.session.record(&match decision.ruling {
            Ruling::Allow => Event::CallAllowed(record),
            Ruling::Deny => Event::CallDenied(record),
            Ruling::NeedsReview => Event::CallSentToReview(record),
        })
    }

    /// Runs an allowed call and adds its rendered output to the context.
    async fn execute(&self, call: ToolCall, lineage: Vec<Id>) -> Result<CallOutcome, ScopeError> {
        let session = &self.session;
        let output = match session.registry().run(&call).await {
            Ok(output) => output,
            Err(error) => {
                let note = self.note("tool-error", &error.to_string())?;
                return Ok(CallOutcome::Invalid { error, note });
            }
        };
        let rendered = match session.renderer().tool_output(session.registry(), &output) {
            Ok(rendered) => rendered,
            Err(error) => {
                let note = self.note(
                    "output-withheld",
                    &format!("The output of `{}` was withheld: {error}", output.tool),
                )?;
                return Ok(CallOutcome::Withheld {
                    output,
                    error,
                    note,
                });
            }
        };
        session.record(&Event::CallExecuted {
            scope: self.id.clone(),
            call: call.id().clone(),
            tool: output.tool.clone(),
            checksum: output.checksum,
            trust: rendered.trust,
            failed: output.failed,
            lineage: lineage.clone(),
        })?;
        let block = Block::data(call.id().clone(), rendered.trust, output.content.to_text());
        let source = format!("tool:{}", output.tool);
        let block = self.push(block, rendered, &source)?;
        Ok(CallOutcome::Ran {
            output,
            block,
            lineage,
        })
    }

    /// Ends the scope's work: a clean scope's output is released; a tainted (or review)
    /// scope's is quarantined, and only its handle is returned. Either way the scope is
    /// finished: nothing more enters it, so a later promotion covers exactly what the
    /// reviewed output was made from.
    pub fn finish(&self, output: &str, exit: Exit) -> Result<Handoff, ScopeError> {
        let taint = self.with_open_state(|scope| scope.taint)?;
        if taint == Taint::Clean {
            self.mark_finished()?;
            return Ok(Handoff::Released(output.to_owned()));
        }
        let key = Id::random();
        let bytes = output.len() as u64;
        self.session
            .inner
            .store
            .put(&key, &self.id, &custodian(), output.as_bytes())?;
        self.session.record(&Event::OutputQuarantined {
            scope: self.id.clone(),
            key: key.clone(),
            bytes,
            exit: exit.as_str().to_owned(),
        })?;
        self.mark_finished()?;
        self.session.state().outputs.insert(
            key.clone(),
            OutputState {
                target: self.id.clone(),
                status: QuarantineStatus::Pending,
                bytes,
                exit,
                readers: Vec::new(),
                under_review: false,
            },
        );
        Ok(Handoff::Quarantined(QuarantineHandle {
            key,
            target: self.id.clone(),
            status: QuarantineStatus::Pending,
            bytes,
            exit,
        }))
    }

    fn mark_finished(&self) -> Result<(), ScopeError> {
        let mut state = self.session.state();
        let scope = state
            .scopes
            .get_mut(&self.id)
            .ok_or_else(|| ScopeError::UnknownScope(self.id.clone()))?;
        scope.finished = true;
        Ok(())
    }

    /// Adds a rendered block to the context, recording what it changes first: its
    /// neutralisation findings, an unknown tool, and the taint it brings.
    pub(crate) fn push(
        &self,
        block: Block,
        rendered: Rendered,
        source: &str,
    ) -> Result<Id, ScopeError> {
        let mut state = self.session.state();
        let scope = state
            .scopes
            .get_mut(&self.id)
            .ok_or_else(|| ScopeError::UnknownScope(self.id.clone()))?;
        if scope.finished {
            return Err(ScopeError::Finished(self.id.clone()));
        }
        if scope
            .blocks
            .iter()
            .any(|existing| existing.id() == block.id())
        {
            return Err(ScopeError::DuplicateBlock(block.id().clone()));
        }
        let recorder = &self.session.inner.recorder;
        if !rendered.findings.is_empty() {
            recorder.record(&Event::neutralised(
                &self.id,
                block.id(),
                &rendered.findings,
            ))?;
        }
        if let Some(tool) = &rendered.unknown_tool {
            recorder.record(&Event::UnknownToolRendered {
                scope: self.id.clone(),
                tool: tool.clone(),
            })?;
        }
        let taints = block.trust() == Trust::Untrusted && scope.taint == Taint::Clean;
        if taints {
            recorder.record(&Event::TaintAssigned {
                scope: self.id.clone(),
                block: block.id().clone(),
                source: source.to_owned(),
            })?;
            scope.taint = Taint::Tainted;
        }
        self.register_nonces(scope, &rendered.nonces);
        scope.rendered.push(rendered.text);
        let id = block.id().clone();
        scope.blocks.push(block);
        Ok(id)
    }

    /// Makes `nonces` live for the gate's leak check. Compat nonces are public (checksums
    /// and ids anyone can compute), so only sealed nonces are secrets worth guarding.
    fn register_nonces(&self, scope: &mut ScopeState, nonces: &[String]) {
        if self.session.renderer().mode() == Mode::Sealed {
            scope.nonces.extend(nonces);
        }
    }

    fn with_state<T>(&self, read: impl FnOnce(&ScopeState) -> T) -> Result<T, ScopeError> {
        let state = self.session.state();
        state
            .scopes
            .get(&self.id)
            .map(read)
            .ok_or_else(|| ScopeError::UnknownScope(self.id.clone()))
    }

    /// Like `with_state`, for operations a finished scope refuses.
    fn with_open_state<T>(&self, read: impl FnOnce(&ScopeState) -> T) -> Result<T, ScopeError> {
        let state = self.session.state();
        open_scope(&state, &self.id).map(read)
    }
}

/// The scope `id` of `state`, if it exists and has not finished.
fn open_scope<'a>(state: &'a State, id: &Id) -> Result<&'a ScopeState, ScopeError> {
    match state.scopes.get(id) {
        Some(scope) if scope.finished => Err(ScopeError::Finished(id.clone())),
        Some(scope) => Ok(scope),
        None => Err(ScopeError::UnknownScope(id.clone())),
    }
}

/// The ids of a scope's blocks: what influenced anything decided in it now.
fn lineage_of(scope: &ScopeState) -> Vec<Id> {
    scope
        .blocks
        .iter()
        .map(|block| block.id().clone())
        .collect()
}

impl std::fmt::Debug for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope").field("id", &self.id).finish()
    }
}
