//! Scopes: one unit of agent work, with its own context, taint and lineage.
//!
//! A scope is `clean` until an untrusted block enters its context, then `tainted`.
//! Taint never propagates upward: a parent runs tainted work in a child scope and
//! receives only a quarantine handle for the child's output, never its bytes. Every
//! call goes through the gate; there is no other way to run a registry's tool.

use crate::block::{Block, Instruction, Origin};
use crate::call::ToolCall;
use crate::content::RetrievedRecord;
use crate::envelope::{RenderError, Rendered};
use crate::event::Event;
use crate::gate::{Decision, ScopeRole, Taint};
use crate::id::Id;
use crate::quarantine::{Exit, QuarantineHandle, QuarantineStatus, custodian};
use crate::record::{Memory, Message, Thought};
use crate::registry::{DispatchError, ToolOutput};
use crate::shared_text::SharedText;
use crate::tool::{OutputKind, Trust};

use super::state::{Claimed, Decided, Finished, Run};
use super::{Lineage, Session, SessionError};

/// A handle on one scope of a [`Session`]. Clones refer to the same scope.
#[derive(Clone)]
pub struct Scope {
    session: Session,
    id: Id,
}

/// What became of a call.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum CallOutcome {
    /// The gate (or a review) allowed it and the tool ran; its output is in the context
    /// as `block`.
    Ran {
        /// The tool's output, tagged with its trust.
        output: ToolOutput,
        /// The block holding the rendered output.
        block: Id,
        /// The blocks that influenced the call (the context when it was decided).
        lineage: Lineage,
        /// The decision that let it run: the default, a developer's rule, or a review.
        decision: Decision,
    },
    /// The gate denied it (or a review rejected it); nothing ran.
    Denied(Decision),
    /// The gate sent it to review; it runs only after a judge approves
    /// ([`Scope::run_pending`]).
    Pending {
        /// The held call's id, the subject of a review.
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
#[non_exhaustive]
pub enum Handoff {
    /// A clean scope's output, released as is.
    Released(String),
    /// A tainted scope's output, held in quarantine: only its handle crosses over.
    Quarantined(QuarantineHandle),
}

impl Scope {
    pub(super) fn new(session: Session, id: Id) -> Self {
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

    fn read<T>(&self, f: impl FnOnce(super::state::ScopeView<'_>) -> T) -> Result<T, SessionError> {
        let state = self.session.state();
        state.view(&self.id).map(f)
    }

    /// Who drives the scope.
    pub fn author(&self) -> Result<Id, SessionError> {
        self.read(|scope| scope.author().clone())
    }

    /// The scope's parent, if it is a child scope.
    pub fn parent(&self) -> Result<Option<Id>, SessionError> {
        self.read(|scope| scope.parent().cloned())
    }

    /// The scope's taint level now.
    pub fn taint(&self) -> Result<Taint, SessionError> {
        self.read(|scope| scope.taint())
    }

    /// What the scope is for.
    pub fn role(&self) -> Result<ScopeRole, SessionError> {
        self.read(|scope| scope.role())
    }

    /// Whether the scope has finished its work.
    pub fn is_finished(&self) -> Result<bool, SessionError> {
        self.read(|scope| scope.finished())
    }

    /// The blocks of the context, in order.
    pub fn blocks(&self) -> Result<Vec<Block>, SessionError> {
        self.read(|scope| scope.blocks().to_vec())
    }

    /// The rendered context: every block's envelope, separated by blank lines.
    pub fn context(&self) -> Result<String, SessionError> {
        self.read(|scope| scope.rendered().join("\n\n"))
    }

    /// The rendered envelope of each block, in order.
    pub fn rendered_blocks(&self) -> Result<Vec<String>, SessionError> {
        self.read(|scope| {
            scope
                .rendered()
                .iter()
                .map(|text| text.as_str().to_owned())
                .collect()
        })
    }

    /// The rendered envelopes of the blocks `select` picks, in order, each with what
    /// `select` said of it; only those are copied.
    pub(crate) fn rendered_where<T>(
        &self,
        mut select: impl FnMut(&Block) -> Option<T>,
    ) -> Result<Vec<(T, String)>, SessionError> {
        self.read(|scope| {
            scope
                .blocks()
                .iter()
                .zip(scope.rendered())
                .filter_map(|(block, rendered)| {
                    select(block).map(|tag| (tag, rendered.as_str().to_owned()))
                })
                .collect()
        })
    }

    /// The rendered envelope of block `id`, if the context holds it.
    pub fn rendered_of(&self, id: &Id) -> Result<Option<String>, SessionError> {
        self.read(|scope| {
            scope
                .blocks()
                .iter()
                // Asked for most often just after the call that made it.
                .rposition(|block| block.id() == id)
                .and_then(|at| {
                    scope
                        .rendered()
                        .get(at)
                        .map(|text| text.as_str().to_owned())
                })
        })
    }

    /// Supplies `value` to the scope's tools, as the `Context<T>` parameter of type `T`
    /// (the caller's identity, credentials, a connection): never shown to the model,
    /// never hashed, never recorded. Child scopes opened afterwards inherit it. A tool
    /// that asks for a context the scope lacks does not run.
    ///
    /// ```
    /// # let session = tooltrust::Session::builder(tooltrust::Registry::new([])?).build()?;
    /// struct User { id: String }
    /// let scope = session
    ///     .open_scope(tooltrust::Id::new("support")?)?
    ///     .with_context(User { id: "ann".into() });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_context<T: Send + Sync + 'static>(self, value: T) -> Self {
        // An unknown or finished scope takes no context; its calls fail anyway.
        let _ = self.session.state().supply(&self.id, value);
        self
    }

    /// Opens a child scope driven by `author`, with its own context: clean, and a review
    /// scope if this one is.
    pub fn child(&self, author: Id) -> Result<Scope, SessionError> {
        self.session
            .open(author, Some(self.id.clone()), ScopeRole::Agent)
    }

    /// Adds the developer's instruction (`<system_instructions kind="developer-rules">`).
    pub fn add_instruction(&self, instruction: Instruction) -> Result<Id, SessionError> {
        let id = Id::random()?;
        let text = self
            .session
            .renderer()
            .developer_policy(std::slice::from_ref(&instruction), None)?;
        let rendered = Rendered::trusted_text(text);
        self.push(Block::instruction(id, instruction), rendered, "instruction")
    }

    /// Adds a message: the principal's is trusted data; anyone else's is untrusted, so a
    /// clean scope becomes tainted.
    pub fn add_message(&self, message: &Message) -> Result<Id, SessionError> {
        let rendered = self.session.renderer().message(message)?;
        let block = Block::data_from(
            message.id.clone(),
            rendered.trust,
            message.content.clone(),
            Origin::Message(message.sender),
        );
        self.push(block, rendered, "message")
    }

    /// Adds retrieved records as one block: trusted data if every record is first-party,
    /// untrusted otherwise.
    pub fn add_retrieved(&self, records: &[RetrievedRecord]) -> Result<Id, SessionError> {
        let rendered = self.session.renderer().retrieved(records)?;
        let texts = records.iter().map(|record| record.content.as_str());
        self.push_joined(rendered, texts, Origin::Retrieved, "retrieved")
    }

    /// Adds memories as one untrusted block (memories may hold what outsiders once wrote).
    pub fn add_memories(&self, memories: &[Memory]) -> Result<Id, SessionError> {
        let rendered = self.session.renderer().memories(memories)?;
        let texts = memories.iter().map(|memory| memory.content.as_str());
        self.push_joined(rendered, texts, Origin::Memories, "memories")
    }

    /// Adds one data block holding `texts`, rendered together as `rendered`.
    fn push_joined<'a>(
        &self,
        rendered: Rendered,
        texts: impl Iterator<Item = &'a str>,
        origin: Origin,
        source: &str,
    ) -> Result<Id, SessionError> {
        let text = texts.collect::<Vec<_>>().join("\n\n");
        let block = Block::data_from(Id::random()?, rendered.trust, text, origin);
        self.push(block, rendered, source)
    }

    /// Adds a replayed reasoning trace, as untrusted data.
    pub fn add_thought(&self, thought: &Thought) -> Result<Id, SessionError> {
        let rendered = self.session.renderer().thought(thought)?;
        let block = Block::data(Id::random()?, rendered.trust, thought.content.clone());
        self.push(block, rendered, "thought")
    }

    /// Adds a child's quarantine handle: trusted data about the output (status, key,
    /// bytes, exit), never the output itself, so the scope stays clean.
    pub fn add_handle(&self, handle: &QuarantineHandle) -> Result<Id, SessionError> {
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
        self.push_data(Id::random()?, Trust::Trusted, "quarantine-handle", text)
    }

    /// Adds untrusted material (a review's subject, say) as data of `kind`.
    pub fn add_untrusted(&self, kind: &str, text: String) -> Result<Id, SessionError> {
        self.push_data(Id::random()?, Trust::Untrusted, kind, text)
    }

    /// Renders `text` as data of `trust` and `kind` and adds it as block `id`.
    fn push_data(
        &self,
        id: Id,
        trust: Trust,
        kind: &str,
        text: String,
    ) -> Result<Id, SessionError> {
        let rendered = self.session.renderer().data(trust, kind, &id, &text)?;
        self.push(Block::data(id, trust, text), rendered, kind)
    }

    /// Releases promoted output `key` into this scope as a vetted block (data that no
    /// longer taints). Only outputs a judge approved can be released.
    pub fn release(&self, key: &Id) -> Result<Id, SessionError> {
        let bytes = self.session.release_to(key, &self.id)?;
        let text = String::from_utf8_lossy(&bytes);
        let rendered =
            self.session
                .renderer()
                .data(Trust::Untrusted, "vetted-output", key, &text)?;
        let block = Block::data(key.clone(), Trust::Vetted, text.into_owned());
        self.push(block, rendered, "vetted-output")
    }

    /// Renders a note for the model that is not a block of the context: a gate decision,
    /// a refused call. Notes quote the model's own requests (tool names, argument values),
    /// so they are enveloped as data; they are not evidence about the world, so they taint
    /// nothing, but their nonces are live like any other.
    pub fn note(&self, kind: &str, text: &str) -> Result<String, SessionError> {
        let id = Id::random()?;
        let rendered = self
            .session
            .renderer()
            .data(Trust::Untrusted, kind, &id, text)?;
        let mode = self.session.renderer().mode();
        self.session
            .act(|state, events| state.note(events, mode, &self.id, &id, &rendered))?;
        Ok(rendered.text)
    }

    /// Puts `call` to the gate and acts on its decision: runs the tool, records the
    /// denial, or holds the call for review. The decision is recorded before anything
    /// runs; if it cannot be recorded, nothing runs.
    pub async fn call(&self, call: ToolCall) -> Result<CallOutcome, SessionError> {
        let session = &self.session;
        // Drawn before the lock: a held call gets its own id, since a provider's call id
        // need not be unique across scopes and a review must bind to exactly this call.
        let pending = Id::random()?;
        let (decided, ticket) = session.transition(|state, events| {
            state.decide(
                events,
                session.registry(),
                session.policy(),
                &self.id,
                &call,
                pending,
                session.holding(),
            )
        })?;
        // Names and decisions only: argument values may carry what outsiders wrote.
        let (ruling, rule) = match &decided {
            Decided::Run(run) => ("allow", run.decision.rule.as_str()),
            Decided::Deny(decision) => ("deny", decision.rule.as_str()),
            Decided::Held { decision, .. } => ("review", decision.rule.as_str()),
        };
        tracing::info!(
            gen_ai.operation.name = "gate",
            gen_ai.tool.name = call.tool(),
            gen_ai.tool.call.id = call.id().as_str(),
            tooltrust.scope = self.id.as_str(),
            tooltrust.ruling = ruling,
            tooltrust.rule = rule,
            "gate decision"
        );
        if let Err(error) = session.flush(ticket) {
            if matches!(decided, Decided::Run(_)) {
                session.state().abandon(&self.id, call.id(), None);
            }
            return Err(error);
        }
        match decided {
            Decided::Run(run) => self.execute(call, None, run).await,
            Decided::Deny(decision) => Ok(CallOutcome::Denied(decision)),
            Decided::Held { id, decision } => Ok(CallOutcome::Pending { id, decision }),
        }
    }

    /// Runs a call the gate sent to review, once a judge approved it: it is claimed,
    /// run and recorded once, and its output is never lost (if recording fails after it
    /// ran, the output is already in the context and the event is recorded next). A
    /// rejected call is denied; an unreviewed one is an error.
    pub async fn run_pending(&self, pending: &Id) -> Result<CallOutcome, SessionError> {
        let session = &self.session;
        let (claimed, ticket) = session.transition(|state, events| {
            state.claim(
                events,
                session.registry(),
                session.policy(),
                &self.id,
                pending,
            )
        })?;
        if let Err(error) = session.flush(ticket) {
            if let Claimed::Run { call, .. } = &claimed {
                session.state().abandon(&self.id, call.id(), Some(pending));
            }
            return Err(error);
        }
        match claimed {
            Claimed::Rejected(decision) => Ok(CallOutcome::Denied(decision)),
            Claimed::Run { call, run } => self.execute(*call, Some(pending), run).await,
        }
    }

    /// Runs a call whose id is reserved, and records its output as one transition.
    async fn execute(
        &self,
        call: ToolCall,
        pending: Option<&Id>,
        run: Run,
    ) -> Result<CallOutcome, SessionError> {
        let session = &self.session;
        let Run {
            decision,
            lineage,
            taint,
            contexts,
        } = run;
        let span = tracing::info_span!(
            "execute_tool",
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = call.tool(),
            gen_ai.tool.call.id = call.id().as_str(),
            tooltrust.scope = self.id.as_str(),
        );
        let run_tool = session.registry().run(&call, &contexts);
        // Whoever awaits this may drop it while the tool runs (a timeout, a client gone):
        // the guard then gives the call up, so the scope does not wait for it forever.
        let guard = Abandon {
            scope: self,
            call: &call,
            pending,
        };
        let ran = tracing::Instrument::instrument(run_tool, span).await;
        std::mem::forget(guard);
        let mut output = match ran {
            Ok(output) => output,
            Err(error) => {
                session
                    .state()
                    .complete_without_output(&self.id, call.id(), pending, false);
                let note = self.note("tool-error", &error.to_string())?;
                return Ok(CallOutcome::Invalid { error, note });
            }
        };
        // Instructions are selected, never written: once outsider text has entered the
        // scope, an instruction tool that takes free text could be echoing it.
        let downgraded = (taint == Taint::Tainted && output.output == OutputKind::Instruction)
            .then(|| session.registry().free_text_argument(&output.tool))
            .flatten()
            .map(|argument| Event::InstructionDowngraded {
                scope: self.id.clone(),
                call: call.id().clone(),
                tool: output.tool.clone(),
                argument: argument.to_owned(),
            });
        if downgraded.is_some() {
            output.output = OutputKind::Data;
        }
        let (mut rendered, quoted) = match session
            .renderer()
            .tool_output_quoting(session.registry(), &output)
        {
            Ok(rendered) => rendered,
            Err(error) => {
                session
                    .state()
                    .complete_without_output(&self.id, call.id(), pending, true);
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
        let executed = Event::CallExecuted {
            scope: self.id.clone(),
            call: call.id().clone(),
            tool: output.tool.clone(),
            checksum: output.checksum,
            trust: rendered.trust,
            failed: output.failed,
            // Filled in by the transition: only what is new since the scope's last call.
            lineage: Vec::new(),
            lineage_since: None,
        };
        let origin = Origin::ToolOutput {
            tool: output.tool.clone(),
            argument_values: string_values(call.args()),
        };
        // The scope keeps the block's text and its envelope: when the envelope quotes the
        // text unchanged, the block's text is that part of it, not a second copy.
        let envelope = SharedText::from(std::mem::take(&mut rendered.text));
        let text = quoted
            .and_then(|range| envelope.part(range))
            .unwrap_or_else(|| SharedText::from(output.content.to_text().into_owned()));
        let block = Block::data_shared(call.id().clone(), rendered.trust, text, origin);
        let source = format!("tool:{}", output.tool);
        let mode = session.renderer().mode();
        // The outcome gates nothing: the call's decision was durable before it ran, and
        // the next decision's sync carries this too.
        let block = session.act_deferred(|state, events| {
            events.extend(downgraded);
            state.complete(
                events,
                mode,
                &self.id,
                pending,
                executed,
                lineage.len(),
                block,
                envelope,
                &rendered,
                &source,
            )
        })?;
        Ok(CallOutcome::Ran {
            output,
            block,
            lineage,
            decision,
        })
    }

    /// Ends the scope's work: a clean scope's output is released; a tainted scope's is
    /// quarantined, and only its handle is returned. Either way the scope is finished:
    /// nothing more enters it, so a later promotion covers exactly what the reviewed
    /// output was made from. Reading the taint and finishing are one transition.
    pub fn finish(&self, output: &str, exit: Exit) -> Result<Handoff, SessionError> {
        let session = &self.session;
        let mut taint = self.taint()?;
        loop {
            let quarantined = match taint {
                Taint::Clean => None,
                Taint::Tainted => {
                    // Stored before the transition (I/O never runs under the lock); if
                    // the scope turns out clean after all, the copy is never granted.
                    let key = Id::random()?;
                    session.store_copy(&key, &self.id, &custodian(), output.as_bytes())?;
                    Some((key, output.len() as u64, exit))
                }
            };
            let expected = taint;
            let handle_key = quarantined.as_ref().map(|(key, ..)| key.clone());
            match session
                .act(|state, events| state.finish(events, &self.id, expected, quarantined))?
            {
                Finished::TaintChanged(now) => taint = now,
                Finished::Done => {
                    return Ok(match handle_key.and_then(|key| session.handle(&key)) {
                        Some(handle) => Handoff::Quarantined(handle),
                        None => Handoff::Released(output.to_owned()),
                    });
                }
            }
        }
    }

    /// Adds a rendered block to the context, recording what it changes first: its
    /// neutralisation findings, an unknown tool, and the taint it brings.
    fn push(&self, block: Block, rendered: Rendered, source: &str) -> Result<Id, SessionError> {
        let mode = self.session.renderer().mode();
        self.session
            .act(|state, events| state.add_block(events, mode, &self.id, block, rendered, source))
    }
}

/// Gives up a running call whose future was dropped before its tool returned: the call's
/// reservation is released and `call_abandoned` queued (recorded by the session's next
/// recording operation: a destructor cannot wait for a disk).
struct Abandon<'a> {
    scope: &'a Scope,
    call: &'a ToolCall,
    pending: Option<&'a Id>,
}

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        let session = &self.scope.session;
        let _queued = session.transition(|state, events| {
            state.abandoned(events, &self.scope.id, self.call, self.pending);
            Ok(())
        });
    }
}

/// Every string in `args`, keys included, at any depth.
fn string_values(args: &serde_json::Map<String, serde_json::Value>) -> Vec<String> {
    fn walk(value: &serde_json::Value, out: &mut Vec<String>) {
        match value {
            serde_json::Value::String(text) => out.push(text.clone()),
            // As canonical text: an output may echo a number or a boolean too.
            serde_json::Value::Number(_) | serde_json::Value::Bool(_) => {
                out.push(crate::canonical::canonical_json(value));
            }
            serde_json::Value::Array(items) => items.iter().for_each(|item| walk(item, out)),
            serde_json::Value::Object(map) => {
                for (key, item) in map {
                    out.push(key.clone());
                    walk(item, out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for (key, value) in args {
        out.push(key.clone());
        walk(value, &mut out);
    }
    out
}

impl std::fmt::Debug for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope").field("id", &self.id).finish()
    }
}
