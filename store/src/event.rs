//! The entries the store itself writes to a tenant's chain, beside the runtime's events.

use serde::Serialize;
use tooltrust::Id;
use tooltrust::call::Checksum;

use tooltrust::held::HeldStatus;

/// An event the store records: serialized, like the runtime's events, with its type in
/// `"event"` and its fields beside it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum StoreEvent<'a> {
    /// The gate held a call and it entered the review queue (committed with its row).
    CallHeld {
        /// The call.
        call: &'a Id,
        /// Its tool.
        tool: &'a str,
        /// Its checksum.
        checksum: &'a Checksum,
        /// The scope that made it: an approval is bound to it.
        scope: &'a Id,
        /// That scope's author, who may not decide on it.
        author: &'a Id,
        /// The gate rule that held it.
        rule: &'a str,
        /// For a call to an MCP upstream, the upstream.
        #[serde(skip_serializing_if = "Option::is_none")]
        upstream: Option<&'a str>,
        /// When it expires, if it does.
        #[serde(skip_serializing_if = "Option::is_none")]
        expires_at: Option<&'a str>,
        /// Recorded late: the call was held before the store recorded holds, and this
        /// entry was written just before its decision.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        backfilled: bool,
    },
    /// A person decided on a held call (committed with the decision itself).
    CallDecided {
        /// The call.
        call: &'a Id,
        /// Its tool.
        tool: &'a str,
        /// Its checksum: the decision covers exactly these arguments.
        checksum: &'a Checksum,
        /// The scope that made it.
        scope: &'a Id,
        /// That scope's author.
        author: &'a Id,
        /// Who decided.
        reviewer: &'a Id,
        /// `approved` or `rejected`.
        decision: HeldStatus,
        /// Why.
        reason: &'a str,
        /// The reviewer's signed statement: what a claim checks.
        signed: &'a tooltrust::held::SignedDecision,
    },
    /// A decision was refused (the call was decided already, or the reviewer is the
    /// scope's author); nothing changed.
    CallDecisionRefused {
        /// The call.
        call: &'a Id,
        /// Who tried to decide.
        reviewer: &'a Id,
        /// Whether they tried to approve.
        approve: bool,
        /// Why it was refused.
        refusal: &'a str,
    },
    /// A reviewer had a quarantined output decrypted for review (recorded before the
    /// plaintext is shown).
    QuarantineOpenedForReview {
        /// The held call under review.
        call: &'a Id,
        /// The output's key.
        key: &'a Id,
        /// The copy's reader.
        reader: &'a Id,
        /// The scope that produced it.
        target: &'a Id,
        /// Who asked.
        reviewer: &'a Id,
    },
    /// An approved call was claimed to run (it runs once), by the scope it is bound to.
    CallClaimed {
        /// The call.
        call: &'a Id,
        /// Its tool.
        tool: &'a str,
        /// Its checksum.
        checksum: &'a Checksum,
        /// The scope that claimed it (the one that held it).
        scope: &'a Id,
        /// For a call to an MCP upstream, the upstream.
        #[serde(skip_serializing_if = "Option::is_none")]
        upstream: Option<&'a str>,
    },
    /// A claim was refused for a reason that says something is wrong: the row reads
    /// approved with no decision in the chain, the claim names another call than the
    /// approval, or the approval expired. Nothing ran.
    CallClaimRefused {
        /// The call.
        call: &'a Id,
        /// The checksum the claim named.
        checksum: &'a Checksum,
        /// The scope that claimed.
        scope: &'a Id,
        /// Why it was refused.
        refusal: &'a str,
    },
    /// A claimed call ended: `ran` or `failed`.
    CallFinished {
        /// The call.
        call: &'a Id,
        /// Its checksum.
        checksum: &'a Checksum,
        /// How it ended.
        outcome: HeldStatus,
    },
}

/// Whether `body` is one of the entries the review queue writes about a held call (the
/// session's own `call_decided`, which says `approve` rather than `decision`, is not).
pub(crate) fn is_lifecycle(body: &tooltrust::audit::Body) -> bool {
    match body.event() {
        "call_held"
        | "call_decision_refused"
        | "call_claimed"
        | "call_claim_refused"
        | "call_finished" => true,
        "call_decided" => body.field("decision").is_some(),
        _ => false,
    }
}
