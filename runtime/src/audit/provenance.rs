//! Provenance: whether the chain's held-call entries tell a possible story. A chain can be
//! intact (every hash right) and still record a claim that no decision approved, if
//! whoever wrote it went around the lifecycle: a row set to approved by hand, a decision on
//! a call that was never held. Verification reads the entries once more for that.
//!
//! It also notes each call let run whose outcome the chain does not hold: a call's
//! outcome is made durable after the call returns (with the next decision's sync), so a
//! crash in between leaves a decision without its outcome. That is reported as *outcome
//! unknown*, never as damage.
//!
//! Two vocabularies share a chain: the session's events (`call_sent_to_review` with the
//! held call's `pending` id, `call_decided` with `approve`, `call_allowed` by rule
//! `review`) and the store's (`call_held`, `call_decided` with `decision`,
//! `call_claimed`). Each is checked on its own terms.

use std::collections::HashMap;

use serde_json::Value;

use super::entry::Entry;
use super::verify::{VerifyError, VerifyErrorKind};

/// An entry whose story does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProvenanceFault {
    /// A decision on a call the chain never recorded as held (or held with another
    /// checksum).
    #[error(
        "seq {seq}: a decision on held call {call}, which the chain never recorded as held with that checksum"
    )]
    DecisionOnUnheld {
        /// The decision's entry.
        seq: u64,
        /// The held call.
        call: String,
    },
    /// A claim (or a run by review) with no approving decision before it for the same
    /// call and checksum.
    #[error(
        "seq {seq}: held call {call} was claimed to run with no approving decision before it for the same checksum"
    )]
    ClaimWithoutApproval {
        /// The claim's entry.
        seq: u64,
        /// The held call.
        call: String,
    },
}

impl ProvenanceFault {
    /// The entry where the story breaks.
    pub fn seq(&self) -> u64 {
        match self {
            ProvenanceFault::DecisionOnUnheld { seq, .. }
            | ProvenanceFault::ClaimWithoutApproval { seq, .. } => *seq,
        }
    }
}

/// A call the chain lets run (`call_allowed`, or the store's `call_claimed`) with no
/// outcome after it (`call_executed` or `call_abandoned`; `call_finished`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutcomeUnknown {
    /// The entry that let it run.
    pub seq: u64,
    /// The call's id (for the store's entries, the held call's).
    pub call: String,
}

/// Reads entries in order and collects the faults of their held-call story.
#[derive(Debug, Default)]
pub struct Provenance {
    /// Calls let run with no outcome yet, by vocabulary (`true`: the store's) and id,
    /// with the entry that let them run.
    running: HashMap<(bool, String), u64>,
    /// Held calls (by id) and their checksums.
    held: HashMap<String, String>,
    /// Approved calls not yet claimed, and their checksums.
    approved: HashMap<String, String>,
    faults: Vec<ProvenanceFault>,
    /// Calls a store upgrade recorded as decided before the store recorded holds.
    upgraded: std::collections::HashSet<String>,
}

impl Provenance {
    /// An empty story.
    pub fn new() -> Self {
        Provenance::default()
    }

    /// Reads the next entry of the chain.
    pub fn observe(&mut self, entry: &Entry) {
        let text = |name: &str| entry.fields.get(name).and_then(Value::as_str);
        if entry.event == "store_upgraded"
            && let Some(Value::Array(calls)) = entry.fields.get("decided_before_holds")
        {
            self.upgraded
                .extend(calls.iter().filter_map(Value::as_str).map(str::to_owned));
            return;
        }
        if let Some(call) = text("call") {
            let store = matches!(entry.event.as_str(), "call_claimed" | "call_finished");
            match entry.event.as_str() {
                "call_allowed" | "call_claimed" => {
                    self.running.insert((store, call.to_owned()), entry.seq);
                }
                "call_executed" | "call_abandoned" | "call_finished" => {
                    self.running.remove(&(store, call.to_owned()));
                }
                _ => {}
            }
        }
        let (Some(checksum), seq) = (text("checksum"), entry.seq) else {
            return;
        };
        let checksum = checksum.to_owned();
        match entry.event.as_str() {
            // The session: a held call has its own id, named `pending`.
            "call_sent_to_review" | "call_held" => {
                let id = text("pending")
                    .or_else(|| (entry.event == "call_held").then(|| text("call")).flatten());
                if let Some(id) = id {
                    self.held.insert(id.to_owned(), checksum);
                }
            }
            "call_decided" => {
                // The session's names the call `pending` and says `approve`; the store's
                // names it `call` and says `decision`.
                let (id, approved) = match (text("pending"), text("call")) {
                    (Some(id), _) => (id, entry.fields.get("approve") == Some(&Value::Bool(true))),
                    (None, Some(id)) => (id, text("decision") == Some("approved")),
                    (None, None) => return,
                };
                if self.held.get(id) != Some(&checksum) {
                    self.faults.push(ProvenanceFault::DecisionOnUnheld {
                        seq,
                        call: id.to_owned(),
                    });
                    return;
                }
                if approved {
                    self.approved.insert(id.to_owned(), checksum);
                }
            }
            "call_claimed" => self.spend(seq, text("call"), checksum),
            "call_allowed" if text("rule") == Some(crate::gate::rule::REVIEW) => {
                self.spend(seq, text("pending"), checksum)
            }
            _ => {}
        }
    }

    fn spend(&mut self, seq: u64, id: Option<&str>, checksum: String) {
        let call = id.unwrap_or_default().to_owned();
        match self.approved.remove(&call) {
            Some(approved) if approved == checksum => {}
            _ => self
                .faults
                .push(ProvenanceFault::ClaimWithoutApproval { seq, call }),
        }
    }

    /// What did not hold, in chain order.
    pub fn faults(self) -> Vec<ProvenanceFault> {
        let upgraded = self.upgraded;
        self.faults
            .into_iter()
            .filter(|fault| {
                // A decision the store made before it recorded holds, as its upgrade says.
                !matches!(fault, ProvenanceFault::DecisionOnUnheld { call, .. } if upgraded.contains(call))
            })
            .collect()
    }

    /// The first fault, as a verification error at its entry; without one, the calls
    /// whose outcome is unknown, in chain order.
    pub fn check(mut self) -> Result<Vec<OutcomeUnknown>, VerifyError> {
        let running = std::mem::take(&mut self.running);
        match self.faults().into_iter().next() {
            None => {
                let mut unknown: Vec<OutcomeUnknown> = running
                    .into_iter()
                    .map(|((_, call), seq)| OutcomeUnknown { seq, call })
                    .collect();
                unknown.sort_by_key(|outcome| outcome.seq);
                Ok(unknown)
            }
            Some(fault) => Err(VerifyError {
                seq: fault.seq(),
                kind: VerifyErrorKind::Provenance(fault),
            }),
        }
    }
}
