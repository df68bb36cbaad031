//! The session's state and every transition of it.
//!
//! Each transition is one method of [`State`]: it checks, then acts, under the session's
//! one lock, and does no I/O. What it decides leaves as events, pushed to `events` in the
//! order they happened; the session hands them to the recorder after the lock is released
//! (see `journal`). A transition that refuses emits nothing and changes nothing.

use std::collections::{HashMap, HashSet};

use crate::block::Block;
use crate::call::{Checksum, ToolCall};
use crate::envelope::{Mode, Rendered};
use crate::event::{CallDecision, Event};
use crate::gate::{Decision, GateContext, NonceIndex, Policy, Ruling, ScopeRole, Taint};
use crate::held::{Binding, HeldStatus, Lifecycle, LifecycleError};
use crate::id::Id;
use crate::quarantine::{Exit, Grant, Output, QuarantineHandle, QuarantineStatus};
use crate::registry::Registry;
use crate::shared_text::SharedText;
use crate::tool::{Contexts, Trust};
use crate::verdict::{ReviewerVerdict, Subject, Verdict};

use super::error::SessionError;
use super::lineage::{Ids, Lineage};

/// Everything about a session that changes.
#[derive(Default)]
pub(crate) struct State {
    scopes: HashMap<Id, ScopeState>,
    pending: HashMap<Id, HeldState>,
    outputs: HashMap<Id, Output>,
    reviews: HashMap<Id, ReviewState>,
    /// The bytes of block text and envelopes one scope keeps; `None`: all of them.
    max_kept_bytes: Option<usize>,
    /// Texts let go of since the session last took them: (scope, block, text), for the
    /// quarantine.
    let_go: Vec<(Id, Id, SharedText)>,
}

pub(crate) struct ScopeState {
    author: Id,
    parent: Option<Id>,
    role: ScopeRole,
    taint: Taint,
    /// Set by `finish`: nothing more enters the scope or runs in it.
    finished: bool,
    blocks: Vec<Block>,
    /// The bytes of text and envelopes its blocks hold now.
    kept: usize,
    /// Blocks before this one are forgotten already, or instructions.
    forget_from: usize,
    /// The ids of `blocks`, to tell at once whether one is taken.
    block_ids: HashSet<Id>,
    /// The same, in order, for the lineages of calls.
    lineage_ids: Ids,
    /// The envelope of each of `blocks`; a block's text may be part of its envelope.
    rendered: Vec<SharedText>,
    nonces: NonceIndex,
    /// Ids of allowed calls that are running: their output will be the block of that id,
    /// so no other call or block may take it meanwhile.
    running: HashSet<Id>,
    /// The scope's held calls and its quarantined output, so that forgetting the scope
    /// touches only what is its own.
    held: Vec<Id>,
    output: Option<Id>,
    /// What the host supplied for the scope's tools (never model-visible).
    contexts: Contexts,
    /// How many times each call (by checksum) ran, for the loop breaker.
    ran: HashMap<Checksum, u32>,
    /// The recorded call with the longest lineage, and its length: the next call's
    /// `CallExecuted` records only the blocks after it.
    lineage_mark: Option<(Id, usize)>,
}

/// A call the gate held for review.
struct HeldState {
    call: ToolCall,
    decision: Decision,
    /// Where it stands, and what an approval of it is bound to (its scope among them).
    lifecycle: Lifecycle,
    /// A review is open on it: one at a time, so no verdict overwrites another.
    under_review: bool,
    /// The review that decided (or is deciding) it.
    review: Option<Id>,
}

impl HeldState {
    fn scope(&self) -> &Id {
        &self.lifecycle.binding.scope
    }
}

/// What a held call's lifecycle starts with in this session: the tenant it belongs to and
/// how long an approval of it holds.
#[derive(Debug, Clone)]
pub(crate) struct Holding {
    pub(crate) tenant: Id,
    pub(crate) ttl: Option<std::time::Duration>,
}

/// An open review; a decided one is dropped (a second verdict then finds no review).
struct ReviewState {
    subject: Subject,
    target: Id,
}

/// A scope as a reader sees it at one moment.
pub(crate) struct ScopeView<'a> {
    pub(crate) scope: &'a ScopeState,
}

impl ScopeView<'_> {
    pub(crate) fn author(&self) -> &Id {
        &self.scope.author
    }
    pub(crate) fn parent(&self) -> Option<&Id> {
        self.scope.parent.as_ref()
    }
    pub(crate) fn role(&self) -> ScopeRole {
        self.scope.role
    }
    pub(crate) fn taint(&self) -> Taint {
        self.scope.taint
    }
    pub(crate) fn finished(&self) -> bool {
        self.scope.finished
    }
    pub(crate) fn blocks(&self) -> &[Block] {
        &self.scope.blocks
    }
    pub(crate) fn rendered(&self) -> &[SharedText] {
        &self.scope.rendered
    }
}

/// What an allowed or claimed call runs with.
pub(crate) struct Run {
    pub(crate) decision: Decision,
    /// The blocks that influenced the call.
    pub(crate) lineage: Lineage,
    /// The scope's taint when the call was decided.
    pub(crate) taint: Taint,
    pub(crate) contexts: Contexts,
}

/// What the gate made of a call.
pub(crate) enum Decided {
    /// Allowed: the call id is reserved for its output; run it, then `complete`.
    Run(Run),
    /// Denied: nothing runs.
    Deny(Decision),
    /// Held for review as held call `id`.
    Held { id: Id, decision: Decision },
}

/// What claiming a held call gives.
pub(crate) enum Claimed {
    /// Approved and now running: run `call`, then `complete`.
    Run { call: Box<ToolCall>, run: Run },
    /// Rejected by its review: it never runs.
    Rejected(Decision),
}

/// Whether the scope's taint was as the caller expected when finishing it.
pub(crate) enum Finished {
    /// The scope is finished; its output is released or quarantined under the key given.
    Done,
    /// The taint changed since the caller looked: look again, and finish with that.
    TaintChanged(Taint),
}

/// What a review needs to run, once opened.
pub(crate) struct Opened {
    pub(crate) target: Id,
    pub(crate) reason: String,
    pub(crate) call: Option<ToolCall>,
}

impl State {
    fn scope(&self, id: &Id) -> Result<&ScopeState, SessionError> {
        self.scopes
            .get(id)
            .ok_or_else(|| SessionError::UnknownScope(id.clone()))
    }

    fn open_scope_mut(&mut self, id: &Id) -> Result<&mut ScopeState, SessionError> {
        match self.scopes.get_mut(id) {
            Some(scope) if scope.finished => Err(SessionError::Finished(id.clone())),
            Some(scope) => Ok(scope),
            None => Err(SessionError::UnknownScope(id.clone())),
        }
    }

    /// Reads scope `id`.
    pub(crate) fn view(&self, id: &Id) -> Result<ScopeView<'_>, SessionError> {
        self.scope(id).map(|scope| ScopeView { scope })
    }

    /// The handle of quarantined output `key`, as it stands now.
    pub(crate) fn handle(&self, key: &Id) -> Option<QuarantineHandle> {
        self.outputs.get(key).map(|output| output.handle(key))
    }

    /// Where held call `id` stands.
    pub(crate) fn pending_status(&self, id: &Id) -> Option<HeldStatus> {
        self.pending.get(id).map(|pending| pending.lifecycle.status)
    }

    /// How many scopes, held calls, outputs and reviews the state holds.
    pub(crate) fn sizes(&self) -> [usize; 4] {
        [
            self.scopes.len(),
            self.pending.len(),
            self.outputs.len(),
            self.reviews.len(),
        ]
    }

    // ---- scopes ------------------------------------------------------------------------

    /// Opens scope `id`, a child of `parent` if given. A review scope's children are
    /// review scopes.
    pub(crate) fn open_scope(
        &mut self,
        events: &mut Vec<Event>,
        id: Id,
        author: Id,
        parent: Option<Id>,
        role: ScopeRole,
    ) -> Result<(), SessionError> {
        // A child inherits its parent's role (a review scope's children review too) and
        // contexts (it works for the same principal).
        let (role, contexts) = match &parent {
            Some(parent) => {
                let parent = self.open_scope_mut(parent)?;
                let role = match parent.role {
                    ScopeRole::Review => ScopeRole::Review,
                    ScopeRole::Agent => role,
                };
                (role, parent.contexts.clone())
            }
            None => (role, Contexts::new()),
        };
        if self.scopes.contains_key(&id) {
            return Err(SessionError::DuplicateScope(id));
        }
        events.push(Event::ScopeOpened {
            scope: id.clone(),
            parent: parent.clone(),
            author: author.clone(),
            kind: role,
        });
        self.scopes.insert(
            id,
            ScopeState {
                author,
                parent,
                role,
                taint: Taint::Clean,
                finished: false,
                blocks: Vec::new(),
                kept: 0,
                forget_from: 0,
                block_ids: HashSet::new(),
                lineage_ids: Ids::default(),
                rendered: Vec::new(),
                nonces: NonceIndex::default(),
                running: HashSet::new(),
                held: Vec::new(),
                output: None,
                contexts,
                ran: HashMap::new(),
                lineage_mark: None,
            },
        );
        Ok(())
    }

    /// Adds a rendered block to scope `scope`, recording what it changes: its
    /// neutralisation findings, an unknown tool, and the taint it brings.
    pub(crate) fn add_block(
        &mut self,
        events: &mut Vec<Event>,
        mode: Mode,
        scope_id: &Id,
        block: Block,
        mut rendered: Rendered,
        source: &str,
    ) -> Result<Id, SessionError> {
        let scope = self.open_scope_mut(scope_id)?;
        if scope.holds(block.id()) {
            return Err(SessionError::DuplicateBlock(block.id().clone()));
        }
        let envelope = SharedText::from(std::mem::take(&mut rendered.text));
        let id = push_block(
            events, mode, scope_id, scope, block, envelope, &rendered, source,
        )?;
        self.forget_past_budget(scope_id);
        Ok(id)
    }

    /// A new state whose scopes each keep at most `max_kept_bytes` of block text and
    /// envelopes (`None`: all).
    pub(crate) fn with_budget(max_kept_bytes: Option<usize>) -> State {
        State {
            max_kept_bytes,
            ..State::default()
        }
    }

    /// The texts let go of since the last call, with their scope and block.
    pub(crate) fn take_let_go(&mut self) -> Vec<(Id, Id, SharedText)> {
        std::mem::take(&mut self.let_go)
    }

    /// Lets go of the text of scope `scope`'s oldest data blocks while it keeps more
    /// than the budget, never its newest block: each keeps its id, trust, origin and
    /// length (and vouches for nothing), its envelope becomes a note of that, and its text
    /// goes to the quarantine, which records its checksum. Taint never changes: it is the
    /// scope's.
    fn forget_past_budget(&mut self, scope_id: &Id) {
        let (Some(budget), Some(scope)) = (self.max_kept_bytes, self.scopes.get_mut(scope_id))
        else {
            return;
        };
        let newest = scope.blocks.len().saturating_sub(1);
        while scope.kept > budget && scope.forget_from < newest {
            let at = scope.forget_from;
            scope.forget_from += 1;
            let block = &mut scope.blocks[at];
            let Some(text) = block.forget() else {
                continue;
            };
            let note = SharedText::from(format!(
                "[tooltrust: block {} ({} bytes) was let go of past this session's memory budget]",
                block.id(),
                text.as_str().len(),
            ));
            let envelope = std::mem::replace(&mut scope.rendered[at], note);
            scope.kept = scope
                .kept
                .saturating_sub(text.as_str().len() + envelope.as_str().len())
                + scope.rendered[at].as_str().len();
            self.let_go
                .push((scope_id.clone(), block.id().clone(), text));
        }
    }

    /// Makes a note's nonces live in scope `scope` (a note is shown to the model but is
    /// not a block of the context), recording what neutralisation changed in it.
    /// Records that a scope's agent left its oldest messages out of a request.
    pub(crate) fn context_trimmed(
        &self,
        events: &mut Vec<Event>,
        scope_id: &Id,
        messages: usize,
        bytes: usize,
        budget: usize,
    ) -> Result<(), SessionError> {
        self.scope(scope_id)?;
        events.push(Event::ContextTrimmed {
            scope: scope_id.clone(),
            messages,
            bytes,
            budget,
        });
        Ok(())
    }

    pub(crate) fn note(
        &mut self,
        events: &mut Vec<Event>,
        mode: Mode,
        scope_id: &Id,
        note: &Id,
        rendered: &Rendered,
    ) -> Result<(), SessionError> {
        let scope = self.open_scope_mut(scope_id)?;
        if !rendered.findings.is_empty() {
            events.push(Event::neutralised(scope_id, note, &rendered.findings));
        }
        register_nonces(mode, scope, &rendered.nonces);
        Ok(())
    }

    /// Finishes scope `scope` if its taint is still `expected`: a tainted scope's
    /// output is quarantined under `key` (its bytes already stored by the caller).
    pub(crate) fn finish(
        &mut self,
        events: &mut Vec<Event>,
        scope_id: &Id,
        expected: Taint,
        output: Option<(Id, u64, Exit)>,
    ) -> Result<Finished, SessionError> {
        let scope = self.open_scope_mut(scope_id)?;
        if scope.taint != expected {
            return Ok(Finished::TaintChanged(scope.taint));
        }
        if let Some(running) = scope.running.iter().next() {
            return Err(SessionError::CallRunning(running.clone()));
        }
        scope.finished = true;
        if let (Taint::Tainted, Some((key, bytes, exit))) = (expected, output) {
            scope.output = Some(key.clone());
            events.push(Event::OutputQuarantined {
                scope: scope_id.clone(),
                key: key.clone(),
                bytes,
                exit: exit.as_str().to_owned(),
            });
            self.outputs
                .insert(key, Output::pending(scope_id.clone(), bytes, exit));
        }
        Ok(Finished::Done)
    }

    /// Supplies `value` to scope `scope`'s tools as their `Context<T>`.
    pub(crate) fn supply<T: Send + Sync + 'static>(
        &mut self,
        scope_id: &Id,
        value: T,
    ) -> Result<(), SessionError> {
        self.open_scope_mut(scope_id)?.contexts.insert(value);
        Ok(())
    }

    /// Drops a finished scope's context and its held calls; keeps its quarantined
    /// outputs that are still pending or approved (a review or a release needs them).
    pub(crate) fn forget(&mut self, scope_id: &Id) -> Result<(), SessionError> {
        if !self.scope(scope_id)?.finished {
            return Err(SessionError::NotFinished(scope_id.clone()));
        }
        let Some(scope) = self.scopes.remove(scope_id) else {
            return Err(SessionError::UnknownScope(scope_id.clone()));
        };
        let mut reviews = Vec::new();
        for id in &scope.held {
            if let Some(pending) = self.pending.remove(id) {
                reviews.extend(pending.review);
            }
        }
        if let Some(key) = &scope.output
            && self
                .outputs
                .get(key)
                .is_some_and(|output| output.status == QuarantineStatus::Rejected)
        {
            self.outputs.remove(key);
        }
        for review in reviews {
            self.reviews.remove(&review);
        }
        Ok(())
    }

    // ---- calls -------------------------------------------------------------------------

    /// Puts `call` to the gate in scope `scope` and records the decision. An allowed
    /// call's id is reserved for its output; a held call is kept as `pending_id`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn decide(
        &mut self,
        events: &mut Vec<Event>,
        registry: &Registry,
        policy: &Policy,
        scope_id: &Id,
        call: &ToolCall,
        pending_id: Id,
        holding: &Holding,
    ) -> Result<Decided, SessionError> {
        let scope = self.open_scope_mut(scope_id)?;
        // The output will be block `call.id()`: a reused id is refused before the tool
        // runs, not after.
        if scope.holds(call.id()) {
            return Err(SessionError::DuplicateBlock(call.id().clone()));
        }
        let mut decision = scope.gate(registry, policy, scope_id, call);
        if policy.observes()
            && decision.ruling != Ruling::Allow
            && decision.rule != crate::gate::rule::UNKNOWN_TOOL
        {
            // Recorded as what the gate would have done, then let through.
            events.push(Event::CallObserved {
                decision: call_decision(scope_id, call, &decision, None),
                would: decision.ruling,
            });
            decision = Decision::allow(
                crate::gate::rule::OBSERVE,
                format!(
                    "observe mode: the gate would have {} this call ({}: {})",
                    match decision.ruling {
                        Ruling::Deny => "denied",
                        _ => "held for review",
                    },
                    decision.rule,
                    decision.reason
                ),
            );
        }
        let held = (decision.ruling == Ruling::NeedsReview).then_some(&pending_id);
        events.push(decision_event(scope_id, call, &decision, held));
        Ok(match decision.ruling {
            Ruling::Allow => {
                scope.running.insert(call.id().clone());
                Decided::Run(scope.run(decision))
            }
            Ruling::Deny => Decided::Deny(decision),
            Ruling::NeedsReview => {
                scope.held.push(pending_id.clone());
                let author = scope.author.clone();
                let binding = Binding {
                    tenant: holding.tenant.clone(),
                    scope: scope_id.clone(),
                    tool: call.tool().to_owned(),
                    checksum: call.checksum(),
                    upstream: None,
                };
                self.pending.insert(
                    pending_id.clone(),
                    HeldState {
                        call: call.clone(),
                        decision: decision.clone(),
                        lifecycle: Lifecycle::held(binding, author, holding.ttl),
                        under_review: false,
                        review: None,
                    },
                );
                Decided::Held {
                    id: pending_id,
                    decision,
                }
            }
        })
    }

    /// Claims held call `pending` of scope `scope`. The gate decides the call again
    /// first: only if it would still hold it for the same rule (or would allow it) is
    /// the approval spent and the call marked claimed (so it runs once); a denial now
    /// leaves the approval unspent. A rejected call is denied again.
    pub(crate) fn claim(
        &mut self,
        events: &mut Vec<Event>,
        registry: &Registry,
        policy: &Policy,
        scope_id: &Id,
        pending_id: &Id,
    ) -> Result<Claimed, SessionError> {
        let scope = match self.scopes.get_mut(scope_id) {
            Some(scope) if scope.finished => return Err(SessionError::Finished(scope_id.clone())),
            Some(scope) => scope,
            None => return Err(SessionError::UnknownScope(scope_id.clone())),
        };
        let pending = self
            .pending
            .get_mut(pending_id)
            .filter(|pending| pending.scope() == scope_id)
            .ok_or_else(|| SessionError::UnknownHeld(pending_id.clone()))?;
        let now = crate::held::now();
        if pending.lifecycle.expire(&now) {
            events.push(Event::CallExpired {
                scope: scope_id.clone(),
                pending: pending_id.clone(),
                checksum: pending.call.checksum(),
            });
        }
        match pending.lifecycle.status {
            HeldStatus::Held => return Err(SessionError::NotReviewed(pending_id.clone())),
            HeldStatus::Claimed | HeldStatus::Ran | HeldStatus::Failed => {
                return Err(SessionError::AlreadyRan(pending_id.clone()));
            }
            HeldStatus::Rejected | HeldStatus::Expired => {
                let why = match pending.lifecycle.status {
                    HeldStatus::Rejected => "a review rejected the call",
                    _ => "the call expired before it was approved and claimed",
                };
                let decision = Decision::deny(
                    crate::gate::rule::REVIEW,
                    format!("{why} ({})", pending.decision.reason),
                );
                return Ok(refused(
                    events,
                    scope_id,
                    &pending.call,
                    pending_id,
                    decision,
                ));
            }
            HeldStatus::Approved => {}
        }
        if scope.holds(pending.call.id()) {
            return Err(SessionError::DuplicateBlock(pending.call.id().clone()));
        }
        let again = scope.gate(registry, policy, scope_id, &pending.call);
        let holds_again = match again.ruling {
            Ruling::Allow => true,
            Ruling::NeedsReview => again.rule == pending.decision.rule,
            Ruling::Deny => false,
        };
        if !holds_again {
            // The approval covered the call as it was held; the gate now says otherwise.
            let decision = Decision::deny(
                again.rule.clone(),
                format!(
                    "the gate decided the approved call again and would not hold it for the \
                     rule it was approved under ({}); the approval stays unspent: {}",
                    pending.decision.rule, again.reason
                ),
            );
            return Ok(refused(
                events,
                scope_id,
                &pending.call,
                pending_id,
                decision,
            ));
        }
        pending
            .lifecycle
            .claim(&pending.lifecycle.binding.clone(), &now)
            .map_err(|error| SessionError::Lifecycle {
                id: pending_id.clone(),
                error,
            })?;
        let decision = Decision::allow(crate::gate::rule::REVIEW, "a judge approved the call");
        events.push(decision_event(
            scope_id,
            &pending.call,
            &decision,
            Some(pending_id),
        ));
        scope.running.insert(pending.call.id().clone());
        Ok(Claimed::Run {
            call: Box::new(pending.call.clone()),
            run: scope.run(decision),
        })
    }

    /// Releases the reservation of a call that will not run after all (its decision
    /// could not be recorded); a claimed held call goes back to approved, since its
    /// claim was never recorded.
    pub(crate) fn abandon(&mut self, scope_id: &Id, call: &Id, pending: Option<&Id>) {
        if let Some(scope) = self.scopes.get_mut(scope_id) {
            scope.running.remove(call);
        }
        if let Some(pending) = pending.and_then(|id| self.pending.get_mut(id)) {
            pending.lifecycle.unclaim();
        }
    }

    /// Records that a running call was given up while its tool ran (its future was
    /// dropped: a timeout, a client that went away): the reservation is released, so the
    /// scope stays usable, and a claimed held call ends failed.
    pub(crate) fn abandoned(
        &mut self,
        events: &mut Vec<Event>,
        scope_id: &Id,
        call: &ToolCall,
        pending: Option<&Id>,
    ) {
        let Some(scope) = self.scopes.get_mut(scope_id) else {
            return;
        };
        if !scope.running.remove(call.id()) {
            return;
        }
        events.push(Event::CallAbandoned {
            scope: scope_id.clone(),
            call: call.id().clone(),
            tool: call.tool().to_owned(),
            checksum: call.checksum(),
        });
        if let Some(pending) = pending.and_then(|id| self.pending.get_mut(id)) {
            let _ = pending.lifecycle.finish(false);
        }
    }

    /// Records that a running call ran and adds its rendered output as block
    /// `call.id()`, with `envelope` (the text of `rendered`, taken out of it so that the
    /// block's text can be part of it). The scope may have no other block of that id:
    /// the id was reserved when the call was allowed or claimed.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn complete(
        &mut self,
        events: &mut Vec<Event>,
        mode: Mode,
        scope_id: &Id,
        pending: Option<&Id>,
        executed: Event,
        lineage_len: usize,
        block: Block,
        envelope: SharedText,
        rendered: &Rendered,
        source: &str,
    ) -> Result<Id, SessionError> {
        // Not `open_scope_mut`: `finish` waits for running calls, so the scope is open.
        let scope = self
            .scopes
            .get_mut(scope_id)
            .ok_or_else(|| SessionError::UnknownScope(scope_id.clone()))?;
        if !scope.running.remove(block.id()) {
            return Err(SessionError::NotRunning(block.id().clone()));
        }
        let mut executed = executed;
        if let Event::CallExecuted {
            checksum,
            call,
            lineage,
            lineage_since,
            ..
        } = &mut executed
        {
            *scope.ran.entry(*checksum).or_default() += 1;
            let (since, from, mark) = lineage_start(scope.lineage_mark.take(), call, lineage_len);
            // The call's lineage was the first `lineage_len` blocks, which stay put.
            *lineage = scope
                .blocks
                .get(from..lineage_len)
                .unwrap_or_default()
                .iter()
                .map(|block| block.id().clone())
                .collect();
            *lineage_since = since;
            scope.lineage_mark = mark;
        }
        events.push(executed);
        let id = push_block(
            events, mode, scope_id, scope, block, envelope, rendered, source,
        )?;
        self.forget_past_budget(scope_id);
        if let Some(pending) = pending.and_then(|pending| self.pending.get_mut(pending)) {
            // Claimed when it started; `finish` refuses nothing else.
            let _ = pending.lifecycle.finish(true);
        }
        Ok(id)
    }

    /// Records that a running call ended without output: the reservation is released,
    /// and a held call ends ran (`ran`: its output was withheld) or failed (the tool
    /// failed, or its arguments did not match).
    pub(crate) fn complete_without_output(
        &mut self,
        scope_id: &Id,
        call: &Id,
        pending: Option<&Id>,
        ran: bool,
    ) {
        if let Some(scope) = self.scopes.get_mut(scope_id) {
            scope.running.remove(call);
        }
        if let Some(pending) = pending.and_then(|pending| self.pending.get_mut(pending)) {
            let _ = pending.lifecycle.finish(ran);
        }
    }

    // ---- quarantine --------------------------------------------------------------------

    /// Grants `reader` the decryption of output `key`, recording it; the grant holds
    /// only if the quarantine's rule says so.
    pub(crate) fn grant(
        &mut self,
        events: &mut Vec<Event>,
        key: &Id,
        reader: &Id,
        reason: &'static str,
    ) -> Result<(Grant, Id), SessionError> {
        let output = self
            .outputs
            .get(key)
            .ok_or_else(|| SessionError::UnknownOutput(key.clone()))?;
        let grant = output.grant(key, reader, reason)?;
        events.push(Event::DecryptionGranted {
            key: key.clone(),
            target: output.target.clone(),
            reader: reader.clone(),
            bytes: output.bytes,
            reason: reason.to_owned(),
        });
        Ok((grant, output.target.clone()))
    }

    /// The custodian's grant to read back block `block` of scope `scope`, which the
    /// session let go of, recording the decryption.
    pub(crate) fn recall(
        &self,
        events: &mut Vec<Event>,
        scope_id: &Id,
        block: &Id,
    ) -> Result<Grant, SessionError> {
        let forgotten = self
            .scope(scope_id)?
            .blocks
            .iter()
            .find(|candidate| candidate.id() == block)
            .and_then(Block::forgotten)
            .ok_or_else(|| SessionError::UnknownOutput(block.clone()))?;
        let grant = Grant::forgotten(block);
        events.push(Event::DecryptionGranted {
            key: block.clone(),
            target: scope_id.clone(),
            reader: crate::quarantine::custodian(),
            bytes: forgotten.bytes as u64,
            reason: grant.reason().to_owned(),
        });
        Ok(grant)
    }

    /// The scope that produced output `key`, if the output is approved for release.
    pub(crate) fn releasable(&self, key: &Id) -> Result<Id, SessionError> {
        match self.outputs.get(key) {
            Some(output) if output.status == QuarantineStatus::Approved => {
                Ok(output.target.clone())
            }
            _ => Err(SessionError::NotReleasable(key.clone())),
        }
    }

    // ---- reviews -----------------------------------------------------------------------

    /// Opens review `review` of `subject`: claims the subject (one review at a time, and
    /// none once decided) and checks separation of powers: the author of the scope
    /// under review may be neither a reviewer nor the judge.
    pub(crate) fn open_review(
        &mut self,
        events: &mut Vec<Event>,
        review: Id,
        subject: &Subject,
        reviewers: &[Id],
        judge: &Id,
    ) -> Result<Opened, SessionError> {
        let (target, reason, call) = match subject {
            Subject::Output(key) => match self.outputs.get(key) {
                Some(output)
                    if output.status == QuarantineStatus::Pending && !output.under_review =>
                {
                    (
                        output.target.clone(),
                        "the output of a tainted scope is quarantined".to_owned(),
                        None,
                    )
                }
                Some(_) => return Err(SessionError::AlreadyReviewed(subject.clone())),
                None => return Err(SessionError::UnknownSubject(subject.clone())),
            },
            Subject::Call(id) => match self.pending.get(id) {
                Some(pending)
                    if pending.lifecycle.status == HeldStatus::Held && !pending.under_review =>
                {
                    (
                        pending.scope().clone(),
                        pending.decision.reason.clone(),
                        Some(pending.call.clone()),
                    )
                }
                Some(_) => return Err(SessionError::AlreadyReviewed(subject.clone())),
                None => return Err(SessionError::UnknownSubject(subject.clone())),
            },
        };
        let author = &self.scope(&target)?.author;
        if let Some(who) = reviewers.iter().chain([judge]).find(|who| *who == author) {
            return Err(SessionError::SeparationOfPowers {
                who: who.clone(),
                target,
            });
        }
        match subject {
            Subject::Output(key) => {
                if let Some(output) = self.outputs.get_mut(key) {
                    output.under_review = true;
                }
            }
            Subject::Call(id) => {
                if let Some(pending) = self.pending.get_mut(id) {
                    pending.under_review = true;
                    pending.review = Some(review.clone());
                }
            }
        }
        events.push(Event::ReviewOpened {
            review: review.clone(),
            target: target.clone(),
            subject: subject.to_string(),
            reviewers: reviewers.to_vec(),
            judge: judge.clone(),
        });
        self.reviews.insert(
            review,
            ReviewState {
                subject: subject.clone(),
                target: target.clone(),
            },
        );
        Ok(Opened {
            target,
            reason,
            call,
        })
    }

    /// Makes `readers` the assigned readers of output `key` (their copies are stored).
    pub(crate) fn assign_readers(&mut self, key: &Id, readers: &[Id]) {
        if let Some(output) = self.outputs.get_mut(key) {
            output.readers.extend(readers.iter().cloned());
        }
    }

    /// Withdraws review `review` before any verdict (its opening failed part-way): the
    /// subject can be reviewed again.
    pub(crate) fn withdraw_review(&mut self, review: &Id) {
        let Some(state) = self.reviews.remove(review) else {
            return;
        };
        match &state.subject {
            Subject::Output(key) => {
                if let Some(output) = self.outputs.get_mut(key) {
                    output.under_review = false;
                    output.readers.clear();
                }
            }
            Subject::Call(id) => {
                if let Some(pending) = self.pending.get_mut(id) {
                    pending.under_review = false;
                    pending.review = None;
                }
            }
        }
    }

    fn open_review_state(&self, review: &Id) -> Result<&ReviewState, SessionError> {
        self.reviews
            .get(review)
            .ok_or_else(|| SessionError::ReviewDecided(review.clone()))
    }

    /// Decides held call `pending` on a person's verdict: only a waiting call with no
    /// review open, and never by the author of the scope that made it.
    pub(crate) fn decide_call(
        &mut self,
        events: &mut Vec<Event>,
        pending_id: &Id,
        reviewer: &Id,
        verdict: &Verdict,
    ) -> Result<(), SessionError> {
        let subject = || Subject::Call(pending_id.clone());
        let pending = self
            .pending
            .get_mut(pending_id)
            .ok_or_else(|| SessionError::UnknownSubject(subject()))?;
        if pending.under_review {
            return Err(SessionError::AlreadyReviewed(subject()));
        }
        let mut decided = pending.lifecycle.clone();
        decided
            .decide(reviewer, verdict.approve, &crate::held::now())
            .map_err(|error| held_error(pending_id, &decided, error))?;
        events.push(Event::CallDecided {
            scope: pending.scope().clone(),
            pending: pending_id.clone(),
            checksum: pending.call.checksum(),
            reviewer: reviewer.clone(),
            approve: verdict.approve,
            reason: verdict.reason.clone(),
        });
        pending.lifecycle = decided;
        Ok(())
    }

    /// Records a reviewer's advisory verdict in review `review`.
    pub(crate) fn verdict(
        &mut self,
        events: &mut Vec<Event>,
        review: &Id,
        verdict: &ReviewerVerdict,
    ) -> Result<(), SessionError> {
        self.open_review_state(review)?;
        events.push(Event::ReviewVerdict {
            review: review.clone(),
            reviewer: verdict.reviewer.clone(),
            approve: verdict.verdict.approve,
            reason: verdict.verdict.reason.clone(),
        });
        Ok(())
    }

    /// Records the judge's verdict and acts on it: an approved output is promoted (its
    /// scope, and only its scope, becomes clean), a rejected one is never released; an
    /// approved call may run, a rejected one never does.
    pub(crate) fn judge(
        &mut self,
        events: &mut Vec<Event>,
        review: &Id,
        judge: &Id,
        verdict: &Verdict,
    ) -> Result<(), SessionError> {
        let state = self.open_review_state(review)?;
        let (subject, target) = (state.subject.clone(), state.target.clone());
        events.push(Event::JudgeVerdict {
            review: review.clone(),
            judge: judge.clone(),
            approve: verdict.approve,
            reason: verdict.reason.clone(),
        });
        match &subject {
            Subject::Output(key) => {
                if let Some(output) = self
                    .outputs
                    .get_mut(key)
                    .filter(|output| output.status == QuarantineStatus::Pending)
                {
                    output.under_review = false;
                    output.status = if verdict.approve {
                        QuarantineStatus::Approved
                    } else {
                        QuarantineStatus::Rejected
                    };
                }
                if verdict.approve {
                    events.push(Event::Promoted {
                        scope: target.clone(),
                        review: review.clone(),
                    });
                    if let Some(scope) = self.scopes.get_mut(&target) {
                        scope.taint = Taint::Clean;
                    }
                }
            }
            Subject::Call(id) => {
                if let Some(pending) = self.pending.get_mut(id) {
                    pending.under_review = false;
                    // Separation of powers was checked when the review opened; an
                    // expired call stays held, and claiming it finds it expired.
                    let _ = pending
                        .lifecycle
                        .decide(judge, verdict.approve, &crate::held::now());
                }
            }
        }
        self.reviews.remove(review);
        Ok(())
    }
}

/// A claim refused by `decision`: recorded as a denial of the held call; nothing runs.
fn refused(
    events: &mut Vec<Event>,
    scope: &Id,
    call: &ToolCall,
    pending: &Id,
    decision: Decision,
) -> Claimed {
    events.push(decision_event(scope, call, &decision, Some(pending)));
    Claimed::Rejected(decision)
}

/// A lifecycle refusal as the session's error: deciding a decided call, or one's own.
fn held_error(id: &Id, held: &Lifecycle, error: LifecycleError) -> SessionError {
    match error {
        LifecycleError::NotHeld(_) => SessionError::AlreadyReviewed(Subject::Call(id.clone())),
        LifecycleError::AuthorCannotDecide(who) => SessionError::SeparationOfPowers {
            who,
            target: held.binding.scope.clone(),
        },
        error => SessionError::Lifecycle {
            id: id.clone(),
            error,
        },
    }
}

impl ScopeState {
    /// What the gate decides of `call` in this scope now.
    fn gate(
        &self,
        registry: &Registry,
        policy: &Policy,
        scope_id: &Id,
        call: &ToolCall,
    ) -> Decision {
        let cx = GateContext {
            call,
            registry,
            scope: scope_id,
            taint: self.taint,
            role: self.role,
            is_child: self.parent.is_some(),
            blocks: &self.blocks,
            repeats: self.ran.get(&call.checksum()).copied().unwrap_or(0),
        };
        policy.decide(&cx, &self.nonces)
    }

    /// Whether block id `id` is taken: by a block of the context or a running call.
    fn holds(&self, id: &Id) -> bool {
        self.running.contains(id) || self.block_ids.contains(id)
    }

    /// What a call allowed by `decision` runs with now.
    fn run(&self, decision: Decision) -> Run {
        Run {
            decision,
            lineage: self.lineage_ids.lineage(),
            taint: self.taint,
            contexts: self.contexts.clone(),
        }
    }
}

/// Where the recorded lineage of `call` (its first `len` blocks) starts: after the
/// lineage of the scope's recorded call `mark` (the one with the longest lineage so
/// far, and its length), which it then names. Blocks only ever join a scope's context,
/// so every lineage is a prefix of the context, and the shorter of two is a prefix of
/// the longer. A call decided before `mark` ran (a shorter lineage) records its lineage
/// whole. Returns the call it extends, the first block to record, and the new mark.
fn lineage_start(
    mark: Option<(Id, usize)>,
    call: &Id,
    len: usize,
) -> (Option<Id>, usize, Option<(Id, usize)>) {
    match mark {
        Some((since, marked)) if marked <= len => (Some(since), marked, Some((call.clone(), len))),
        Some(longer) => (None, 0, Some(longer)),
        None => (None, 0, Some((call.clone(), len))),
    }
}

/// Adds `block` to `scope` with `envelope`, its rendered text; the rest of `rendered`
/// (its text taken out) says what else the rendering brought.
#[allow(clippy::too_many_arguments)]
fn push_block(
    events: &mut Vec<Event>,
    mode: Mode,
    scope_id: &Id,
    scope: &mut ScopeState,
    block: Block,
    envelope: SharedText,
    rendered: &Rendered,
    source: &str,
) -> Result<Id, SessionError> {
    if !rendered.findings.is_empty() {
        events.push(Event::neutralised(scope_id, block.id(), &rendered.findings));
    }
    if let Some(tool) = &rendered.unknown_tool {
        events.push(Event::UnknownToolRendered {
            scope: scope_id.clone(),
            tool: tool.clone(),
        });
    }
    if block.trust() == Trust::Untrusted && scope.taint == Taint::Clean {
        events.push(Event::TaintAssigned {
            scope: scope_id.clone(),
            block: block.id().clone(),
            source: source.to_owned(),
        });
        scope.taint = Taint::Tainted;
    }
    register_nonces(mode, scope, &rendered.nonces);
    scope.kept += block.text().len() + envelope.as_str().len();
    scope.rendered.push(envelope);
    let id = block.id().clone();
    scope.block_ids.insert(id.clone());
    scope.lineage_ids.push(id.clone());
    scope.blocks.push(block);
    Ok(id)
}

/// Makes `nonces` live for the gate's leak check. Compat nonces are public (checksums
/// and ids anyone can compute), so only sealed nonces are secrets worth guarding.
fn register_nonces(mode: Mode, scope: &mut ScopeState, nonces: &[String]) {
    if mode == Mode::Sealed {
        scope.nonces.extend(nonces);
    }
}

/// The record of `decision` on `call`.
fn call_decision(
    scope: &Id,
    call: &ToolCall,
    decision: &Decision,
    pending: Option<&Id>,
) -> CallDecision {
    CallDecision {
        scope: scope.clone(),
        call: call.id().clone(),
        tool: call.tool().to_owned(),
        checksum: call.checksum(),
        rule: decision.rule.clone(),
        reason: decision.reason.clone(),
        pending: pending.cloned(),
    }
}

/// The event that records `decision` on `call`.
fn decision_event(scope: &Id, call: &ToolCall, decision: &Decision, pending: Option<&Id>) -> Event {
    let record = call_decision(scope, call, decision, pending);
    match decision.ruling {
        Ruling::Allow => Event::CallAllowed(record),
        Ruling::Deny => Event::CallDenied(record),
        Ruling::NeedsReview => Event::CallSentToReview(record),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(names: &[&str]) -> Vec<Id> {
        names.iter().map(|name| Id::new(*name).unwrap()).collect()
    }

    #[test]
    fn a_lineage_shorter_than_the_mark_is_recorded_whole() {
        let [a, b, c] = [ids(&["a"]), ids(&["b"]), ids(&["c"])].map(|mut v| v.remove(0));
        // The first call records all of its lineage (two blocks).
        let (since, from, mark) = lineage_start(None, &a, 2);
        assert_eq!((since, from), (None, 0));
        // A later one (three blocks) records what is new since it: the third.
        let (since, from, mark) = lineage_start(mark, &b, 3);
        assert_eq!((since.as_ref(), from), (Some(&a), 2));
        // One decided before that ran (one block) is whole, and the mark stays.
        let (since, from, kept) = lineage_start(mark.clone(), &c, 1);
        assert_eq!((since, from), (None, 0));
        assert_eq!(kept, mark);
        assert_eq!(kept, Some((b.clone(), 3)));
    }
}
