//! The held-call lifecycle, once for every part that keeps held calls: the session's state
//! machine, the durable store, the console and the MCP server.
//!
//! ```text
//! held ──► approved ──► claimed ──► ran
//!   │  └─► rejected        │    └─► failed
//!   └─────► expired ◄──────┘ (an approval not claimed in time)
//! ```
//!
//! Every transition is a method of [`Lifecycle`] that checks its rules and changes the
//! record only when they hold; none does I/O, so a store applies exactly the transition the
//! runtime applies, inside its own transaction. The rules:
//! - separation of powers: the author of the scope that made the call never decides it;
//! - an approval is bound to exactly what it approves ([`Binding`]): the tenant, the scope
//!   that held the call, the tool, the canonical checksum and, for calls to an MCP
//!   upstream, the upstream. Only a claim that names the same binding spends it;
//! - an approval expires: past [`Lifecycle::expires_at`] it can neither be given nor
//!   claimed;
//! - a claim happens once: approved → claimed, and only then the call runs; its end is
//!   recorded as ran or failed.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::call::Checksum;
use crate::id::Id;
use crate::timestamp;

mod approvals;
mod call;
mod decision;

pub use approvals::{Approval, ApprovalFuture, Approvals, ClaimRefused};
pub use call::HeldCall;
pub use decision::{
    AllTenants, DECISION_DOMAIN, DecisionError, DecisionStatement, DuplicateReviewer, Reviewer,
    Reviewers, SignedDecision, Tenants,
};

/// How long an approval may wait to be claimed, unless the host says otherwise.
pub const DEFAULT_APPROVAL_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// Where a held call stands. One vocabulary across the runtime, the store, the CLI and the
/// console.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeldStatus {
    /// The gate held it; waiting for a person's decision.
    Held,
    /// Approved; the same call, in the same scope, may run once.
    Approved,
    /// Rejected; it never runs.
    Rejected,
    /// Not decided, or not claimed, before its expiry; it never runs.
    Expired,
    /// Claimed to run after the gate decided it again: it is running now.
    Claimed,
    /// It ran.
    Ran,
    /// It was claimed but did not run to the end (the tool failed, or the run was
    /// abandoned).
    Failed,
}

impl HeldStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [HeldStatus; 7] = [
        HeldStatus::Held,
        HeldStatus::Approved,
        HeldStatus::Rejected,
        HeldStatus::Expired,
        HeldStatus::Claimed,
        HeldStatus::Ran,
        HeldStatus::Failed,
    ];

    /// `held`, `approved`, `rejected`, `expired`, `claimed`, `ran` or `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            HeldStatus::Held => "held",
            HeldStatus::Approved => "approved",
            HeldStatus::Rejected => "rejected",
            HeldStatus::Expired => "expired",
            HeldStatus::Claimed => "claimed",
            HeldStatus::Ran => "ran",
            HeldStatus::Failed => "failed",
        }
    }

    /// Whether the status is final: nothing more happens to the call.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            HeldStatus::Rejected | HeldStatus::Expired | HeldStatus::Ran | HeldStatus::Failed
        )
    }
}

impl fmt::Display for HeldStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The text is not a status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a status: use held, approved, rejected, expired, claimed, ran or failed")]
pub struct StatusParseError(String);

impl FromStr for HeldStatus {
    type Err = StatusParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        HeldStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == text)
            .ok_or_else(|| StatusParseError(text.to_owned()))
    }
}

/// What an approval is bound to: only a claim naming all of it spends the approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    /// The tenant whose queue and chain hold the call.
    pub tenant: Id,
    /// The scope that held the call (a continued conversation keeps its scope's id).
    pub scope: Id,
    /// The tool the call names.
    pub tool: String,
    /// The canonical checksum of the call: exactly these arguments.
    pub checksum: Checksum,
    /// For a call to an MCP upstream, the upstream's name.
    pub upstream: Option<String>,
}

impl Binding {
    /// The first field in which `other` differs from this binding, if any.
    pub fn mismatch(&self, other: &Binding) -> Option<&'static str> {
        if self.tenant != other.tenant {
            Some("tenant")
        } else if self.scope != other.scope {
            Some("scope")
        } else if self.tool != other.tool {
            Some("tool")
        } else if self.checksum != other.checksum {
            Some("checksum")
        } else if self.upstream != other.upstream {
            Some("upstream")
        } else {
            None
        }
    }
}

/// Why a transition of the lifecycle was refused; the record did not change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LifecycleError {
    /// Only a held call can be decided.
    #[error("the call is {0}, not held: it cannot be decided")]
    NotHeld(HeldStatus),
    /// The author of the scope that made the call cannot decide it.
    #[error("{0} is the author of the scope that made the call and cannot decide it")]
    AuthorCannotDecide(Id),
    /// The call expired (at the time given) before this transition.
    #[error("the call expired at {0}")]
    Expired(String),
    /// Only an approved call can be claimed.
    #[error("the call is {0}, not approved: it cannot be claimed")]
    NotApproved(HeldStatus),
    /// The claim names another call than the one approved.
    #[error("the approval is bound to another {0}: it cannot be spent on this call")]
    BindingMismatch(&'static str),
    /// Only a claimed call can end as ran or failed.
    #[error("the call is {0}, not claimed: it cannot end")]
    NotClaimed(HeldStatus),
}

/// A held call as the lifecycle sees it: its status, what it is bound to, who may not
/// decide it, who did, and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lifecycle {
    /// Where it stands.
    pub status: HeldStatus,
    /// What an approval of it is bound to.
    pub binding: Binding,
    /// The author of the scope that made it, who may not decide it.
    pub author: Id,
    /// Who decided it, once decided.
    pub reviewer: Option<Id>,
    /// After this moment (RFC 3339) it can be neither decided nor claimed; `None`: never.
    pub expires_at: Option<String>,
}

impl Lifecycle {
    /// A call just held, expiring `ttl` from now.
    pub fn held(binding: Binding, author: Id, ttl: Option<Duration>) -> Lifecycle {
        Lifecycle {
            status: HeldStatus::Held,
            binding,
            author,
            reviewer: None,
            expires_at: ttl.map(expiry_after),
        }
    }

    /// Whether the call has expired at `now` (RFC 3339). An expiry that is not a
    /// timestamp counts as past: a record that cannot say until when holds no longer.
    pub fn expired_at(&self, now: &str) -> bool {
        let Some(expires_at) = &self.expires_at else {
            return false;
        };
        match (
            timestamp::unix_millis(expires_at),
            timestamp::unix_millis(now),
        ) {
            (Some(expires), Some(now)) => now >= expires,
            _ => true,
        }
    }

    /// Marks a held or approved call expired if it is past its expiry at `now`; returns
    /// whether it did.
    pub fn expire(&mut self, now: &str) -> bool {
        if matches!(self.status, HeldStatus::Held | HeldStatus::Approved) && self.expired_at(now) {
            self.status = HeldStatus::Expired;
            true
        } else {
            false
        }
    }

    /// held → approved | rejected, by `reviewer` at `now`.
    pub fn decide(
        &mut self,
        reviewer: &Id,
        approve: bool,
        now: &str,
    ) -> Result<(), LifecycleError> {
        if self.status != HeldStatus::Held {
            return Err(LifecycleError::NotHeld(self.status));
        }
        if *reviewer == self.author {
            return Err(LifecycleError::AuthorCannotDecide(reviewer.clone()));
        }
        if self.expired_at(now) {
            return Err(self.expired());
        }
        self.status = if approve {
            HeldStatus::Approved
        } else {
            HeldStatus::Rejected
        };
        self.reviewer = Some(reviewer.clone());
        Ok(())
    }

    /// approved → claimed, for the call `claim` names, at `now`. Claim only after the gate
    /// has decided that same call again: a refusal here leaves the approval unspent.
    pub fn claim(&mut self, claim: &Binding, now: &str) -> Result<(), LifecycleError> {
        if self.status != HeldStatus::Approved {
            return Err(LifecycleError::NotApproved(self.status));
        }
        if let Some(field) = self.binding.mismatch(claim) {
            return Err(LifecycleError::BindingMismatch(field));
        }
        if self.expired_at(now) {
            return Err(self.expired());
        }
        self.status = HeldStatus::Claimed;
        Ok(())
    }

    /// claimed → ran (`ran`) or failed.
    pub fn finish(&mut self, ran: bool) -> Result<(), LifecycleError> {
        if self.status != HeldStatus::Claimed {
            return Err(LifecycleError::NotClaimed(self.status));
        }
        self.status = if ran {
            HeldStatus::Ran
        } else {
            HeldStatus::Failed
        };
        Ok(())
    }

    /// claimed → approved: undoes a claim that was never recorded (the process could not
    /// record it, so nothing ran on it). A durable store records its claims in the same
    /// transaction and never needs this.
    pub fn unclaim(&mut self) {
        if self.status == HeldStatus::Claimed {
            self.status = HeldStatus::Approved;
        }
    }

    fn expired(&self) -> LifecycleError {
        LifecycleError::Expired(self.expires_at.clone().unwrap_or_default())
    }
}

/// Now, as the lifecycle's timestamps read it (RFC 3339, UTC).
pub fn now() -> String {
    timestamp::now()
}

/// The moment `ttl` from now, as an RFC 3339 timestamp.
pub fn expiry_after(ttl: Duration) -> String {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .saturating_add(ttl);
    timestamp::format(i128::from(since.as_secs()), since.subsec_nanos())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(text: &str) -> Id {
        Id::new(text).unwrap()
    }

    fn binding() -> Binding {
        Binding {
            tenant: id("t"),
            scope: id("s"),
            tool: "send_email".into(),
            checksum: Checksum::of(b"call"),
            upstream: None,
        }
    }

    const BEFORE: &str = "2026-01-01T00:00:00Z";
    const AFTER: &str = "2026-01-03T00:00:00Z";

    fn held() -> Lifecycle {
        let mut call = Lifecycle::held(binding(), id("agent"), None);
        call.expires_at = Some("2026-01-02T00:00:00Z".into());
        call
    }

    #[test]
    fn a_call_runs_through_its_lifecycle_once() {
        let mut call = held();
        call.decide(&id("ann"), true, BEFORE).unwrap();
        assert_eq!(call.status, HeldStatus::Approved);
        assert_eq!(
            call.decide(&id("bob"), false, BEFORE),
            Err(LifecycleError::NotHeld(HeldStatus::Approved))
        );
        call.claim(&binding(), BEFORE).unwrap();
        assert_eq!(
            call.claim(&binding(), BEFORE),
            Err(LifecycleError::NotApproved(HeldStatus::Claimed))
        );
        call.finish(true).unwrap();
        assert_eq!(call.status, HeldStatus::Ran);
        assert_eq!(
            call.finish(false),
            Err(LifecycleError::NotClaimed(HeldStatus::Ran))
        );
    }

    #[test]
    fn the_author_never_decides() {
        let mut call = held();
        assert_eq!(
            call.decide(&id("agent"), true, BEFORE),
            Err(LifecycleError::AuthorCannotDecide(id("agent")))
        );
        assert_eq!(call.status, HeldStatus::Held);
    }

    #[test]
    fn an_approval_is_spent_only_on_what_it_binds() {
        let mut call = held();
        call.decide(&id("ann"), true, BEFORE).unwrap();
        let others = [
            (
                "tenant",
                Binding {
                    tenant: id("u"),
                    ..binding()
                },
            ),
            (
                "scope",
                Binding {
                    scope: id("other"),
                    ..binding()
                },
            ),
            (
                "tool",
                Binding {
                    tool: "delete".into(),
                    ..binding()
                },
            ),
            (
                "checksum",
                Binding {
                    checksum: Checksum::of(b"x"),
                    ..binding()
                },
            ),
            (
                "upstream",
                Binding {
                    upstream: Some("mail".into()),
                    ..binding()
                },
            ),
        ];
        for (field, other) in others {
            assert_eq!(
                call.claim(&other, BEFORE),
                Err(LifecycleError::BindingMismatch(field))
            );
            assert_eq!(call.status, HeldStatus::Approved, "{field}: left unspent");
        }
        call.claim(&binding(), BEFORE).unwrap();
    }

    #[test]
    fn expired_calls_are_neither_decided_nor_claimed() {
        let mut call = held();
        assert!(matches!(
            call.decide(&id("ann"), true, AFTER),
            Err(LifecycleError::Expired(_))
        ));
        call.decide(&id("ann"), true, BEFORE).unwrap();
        assert!(matches!(
            call.claim(&binding(), AFTER),
            Err(LifecycleError::Expired(_))
        ));
        assert!(call.expire(AFTER));
        assert_eq!(call.status, HeldStatus::Expired);
        // An expiry that is not a timestamp is past.
        let mut bad = held();
        bad.expires_at = Some("soon".into());
        assert!(bad.expired_at(BEFORE));
    }

    #[test]
    fn statuses_read_back() {
        for status in HeldStatus::ALL {
            assert_eq!(status.as_str().parse::<HeldStatus>(), Ok(status));
        }
        assert!("pending".parse::<HeldStatus>().is_err());
    }
}
