//! Every boundary decision, as a typed event, and the one interface that records them.
//!
//! A decision that cannot be recorded is not taken: every operation that records returns
//! the recorder's error instead of acting.

use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;

use crate::call::Checksum;
use crate::envelope::Finding;
use crate::gate::ScopeRole;
use crate::id::Id;
use crate::tool::Trust;

/// A boundary decision or state change. Serialized with its type in `"event"` and its
/// fields beside it; never carries key material or quarantined plaintext.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// A scope was opened.
    ScopeOpened {
        /// The new scope.
        scope: Id,
        /// Its parent, if any.
        #[serde(skip_serializing_if = "Option::is_none")]
        parent: Option<Id>,
        /// Who drives it.
        author: Id,
        /// What the scope is for.
        kind: ScopeRole,
    },
    /// An untrusted block entered a clean scope, which is now tainted.
    TaintAssigned {
        /// The scope.
        scope: Id,
        /// The block that tainted it.
        block: Id,
        /// What the block is (`tool:fetch_page`, `message`…).
        source: String,
    },
    /// Neutralisation changed a body before it entered a scope's context.
    Neutralised {
        /// The scope.
        scope: Id,
        /// The block.
        block: Id,
        /// How many changes there were in all.
        total: usize,
        /// The first few of them (a body can hold any number; the event stays small).
        findings: Vec<Finding>,
    },
    /// A tool result named a tool the registry does not hold; it was rendered untrusted.
    UnknownToolRendered {
        /// The scope.
        scope: Id,
        /// The tool named.
        tool: String,
    },
    /// The gate allowed a call.
    CallAllowed(CallDecision),
    /// The gate denied a call (or a review rejected it).
    CallDenied(CallDecision),
    /// The gate sent a call to review; it runs only after approval.
    CallSentToReview(CallDecision),
    /// Observe mode: the gate would have held or denied the call (`would`), but it runs.
    CallObserved {
        /// The decision the gate would have enforced.
        #[serde(flatten)]
        decision: CallDecision,
        /// What the gate would have done.
        would: crate::gate::Ruling,
    },
    /// The agent left the oldest timeline messages out of the model's request to stay
    /// within the host's context budget (instructions are never left out).
    ContextTrimmed {
        /// The scope.
        scope: Id,
        /// How many chat messages were left out.
        messages: usize,
        /// How many bytes they held.
        bytes: usize,
        /// The budget, in bytes of message text.
        budget: usize,
    },
    /// The session let go of a block's text past its memory budget
    /// ([`SessionBuilder::max_kept_bytes`](crate::session::SessionBuilder::max_kept_bytes)):
    /// the block keeps its id, trust and origin, vouches for no value from now on, and
    /// its text is in the quarantine store.
    BlockForgotten {
        /// The scope.
        scope: Id,
        /// The block.
        block: Id,
        /// How many bytes its text held.
        bytes: usize,
        /// The SHA-256 of its text.
        sha256: Checksum,
    },
    /// A `trusted, instruction` tool's output was rendered as trusted data, not as an
    /// instruction: the scope was tainted and an argument of the tool is free text, so
    /// attacker text could have reached its output.
    InstructionDowngraded {
        /// The scope.
        scope: Id,
        /// The call.
        call: Id,
        /// The tool.
        tool: String,
        /// The free-text argument.
        argument: String,
    },
    /// An allowed call ran.
    CallExecuted {
        /// The scope.
        scope: Id,
        /// The call.
        call: Id,
        /// The tool.
        tool: String,
        /// The call's checksum.
        checksum: Checksum,
        /// The trust its output is rendered with.
        trust: Trust,
        /// Whether the tool returned an error.
        failed: bool,
        /// The ids of the blocks that influenced the call (the scope's context when it
        /// was decided), in order; when `lineage_since` is set, only those that
        /// entered after the lineage of that call, which this one extends. A scope's
        /// context only grows, so each entry records what is new, and a long session's
        /// entries stay small.
        lineage: Vec<Id>,
        /// The earlier call of the scope whose lineage is the first part of this one's
        /// (absent: `lineage` is whole).
        #[serde(skip_serializing_if = "Option::is_none")]
        lineage_since: Option<Id>,
    },
    /// A tainted scope's output was quarantined.
    OutputQuarantined {
        /// The scope that produced it.
        scope: Id,
        /// The output's key.
        key: Id,
        /// Its size.
        bytes: u64,
        /// Whether the scope's work succeeded.
        exit: String,
    },
    /// A review was opened.
    ReviewOpened {
        /// The review.
        review: Id,
        /// The scope under review (the one that produced the output or made the call).
        target: Id,
        /// What is reviewed: `output:<key>` or `call:<id>`.
        subject: String,
        /// The reviewers.
        reviewers: Vec<Id>,
        /// The judge.
        judge: Id,
    },
    /// A reviewer's advisory verdict.
    ReviewVerdict {
        /// The review.
        review: Id,
        /// The reviewer.
        reviewer: Id,
        /// Whether the reviewer approves.
        approve: bool,
        /// Why.
        reason: String,
    },
    /// The judge's authoritative verdict.
    JudgeVerdict {
        /// The review.
        review: Id,
        /// The judge.
        judge: Id,
        /// Whether the judge approves.
        approve: bool,
        /// Why.
        reason: String,
    },
    /// A person decided a held call directly (through a console, an MCP host's
    /// elicitation, or `tooltrust pending`), acting as its judge.
    CallDecided {
        /// The scope that made the call.
        scope: Id,
        /// The held call.
        pending: Id,
        /// The call's checksum: the decision binds to exactly these arguments.
        checksum: Checksum,
        /// Who decided.
        reviewer: Id,
        /// Whether the call may run.
        approve: bool,
        /// Why.
        reason: String,
    },
    /// A held call expired before it was decided or claimed; it never runs.
    CallExpired {
        /// The scope that made the call.
        scope: Id,
        /// The held call.
        pending: Id,
        /// The call's checksum.
        checksum: Checksum,
    },
    /// A running call was given up before its tool returned (its future was dropped):
    /// whether it had effects is unknown, and it counts as failed.
    CallAbandoned {
        /// The scope.
        scope: Id,
        /// The call.
        call: Id,
        /// Its tool.
        tool: String,
        /// Its checksum.
        checksum: Checksum,
    },
    /// A judge's approval promoted a scope to clean.
    Promoted {
        /// The promoted scope.
        scope: Id,
        /// The review that promoted it.
        review: Id,
    },
    /// Quarantined output was decrypted under a grant.
    DecryptionGranted {
        /// The output's key.
        key: Id,
        /// The scope that produced it.
        target: Id,
        /// Who may read it.
        reader: Id,
        /// Its size.
        bytes: u64,
        /// Why the grant holds (`assigned reviewer`, `promoted`).
        reason: String,
    },
    /// The key-encryption key was rotated and data keys rewrapped.
    KeyRotation {
        /// How many data keys were rewrapped.
        rewrapped: u64,
    },
}

/// How many findings a `Neutralised` event lists in full.
pub const MAX_LISTED_FINDINGS: usize = 16;

/// How much of a finding's matched text an event keeps.
const MAX_MATCHED_CHARS: usize = 80;

impl Event {
    /// The `Neutralised` event for `findings` in `block`: the count, and the first
    /// [`MAX_LISTED_FINDINGS`] with their matched text cut short, so that a page full of
    /// forged tags cannot make the event too large to record.
    pub fn neutralised(scope: &Id, block: &Id, findings: &[Finding]) -> Event {
        Event::Neutralised {
            scope: scope.clone(),
            block: block.clone(),
            total: findings.len(),
            findings: findings
                .iter()
                .take(MAX_LISTED_FINDINGS)
                .map(|finding| {
                    let mut finding = finding.clone();
                    if let Some((cut, _)) = finding.matched.char_indices().nth(MAX_MATCHED_CHARS) {
                        finding.matched.truncate(cut);
                        finding.matched.push('…');
                    }
                    finding
                })
                .collect(),
        }
    }
}

/// A gate decision on one call, as the three call events record it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CallDecision {
    /// The scope.
    pub scope: Id,
    /// The call.
    pub call: Id,
    /// The tool.
    pub tool: String,
    /// The call's checksum.
    pub checksum: Checksum,
    /// The rule that decided.
    pub rule: String,
    /// Why.
    pub reason: String,
    /// The held call's id, when the decision holds the call for review or lets a held
    /// call run on its approval (the chain's story of a held call follows this id).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending: Option<Id>,
}

/// Why an event could not be recorded. It keeps the recorder's own error (an
/// [`AuditError`](crate::audit::AuditError), a database error) as its
/// [`source`](std::error::Error::source).
#[derive(Debug, Clone, thiserror::Error)]
#[error("the event could not be recorded")]
pub struct RecordError {
    #[source]
    source: Arc<dyn std::error::Error + Send + Sync + 'static>,
}

impl RecordError {
    /// Wraps the recorder's error.
    pub fn new(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        RecordError {
            source: Arc::new(source),
        }
    }

    /// The recorder's error, to downcast.
    pub fn recorder_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.source
    }
}

/// A batch that was recorded only in part: the first `recorded` events are durable, the
/// rest are not.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{recorded} event(s) of the batch were recorded before the recorder failed")]
pub struct PartialRecord {
    /// How many events, from the start of the batch, are durable.
    pub recorded: usize,
    /// Why the next one is not.
    #[source]
    pub error: RecordError,
}

/// Where events go: the audit log, a database, or memory in tests.
///
/// A session hands events over in the order its transitions happened, one batch at a
/// time, never while holding its state lock; see [`Session`](crate::Session) for the
/// ordering guarantee. A recorder must not call back into the session that drives it
/// in a way that records (that would wait on itself).
pub trait Recorder: Send + Sync {
    /// Records `event` durably; an error means the decision must not be taken.
    fn record(&self, event: &Event) -> Result<(), RecordError>;

    /// Records `events` durably, in order. Override it to make the batch cost one
    /// sync (group commit); the default records them one by one.
    fn record_batch(&self, events: &[Event]) -> Result<(), PartialRecord> {
        for (recorded, event) in events.iter().enumerate() {
            self.record(event)
                .map_err(|error| PartialRecord { recorded, error })?;
        }
        Ok(())
    }

    /// Records `events` that report what already happened and gate nothing (a call's
    /// outcome, once its decision is durable): the recorder may make them durable with
    /// its next batch or after a short timer instead of before returning, so that a call
    /// costs one sync, not two. Events recorded later still follow them in order. The
    /// default records them at once, like [`record_batch`](Self::record_batch).
    ///
    /// A crash in between loses them; the chain then ends with a decision whose outcome
    /// is unknown, which verification reports as such, not as damage.
    fn record_deferred(&self, events: &[Event]) -> Result<(), PartialRecord> {
        self.record_batch(events)
    }
}

/// Keeps events in memory (tests, examples, hosts that forward them elsewhere).
#[derive(Debug, Default)]
pub struct MemoryRecorder {
    events: Mutex<Vec<Event>>,
}

impl MemoryRecorder {
    /// An empty recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// A copy of every event recorded so far, in order.
    pub fn events(&self) -> Vec<Event> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Recorder for MemoryRecorder {
    fn record(&self, event: &Event) -> Result<(), RecordError> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(event.clone());
        Ok(())
    }
}
