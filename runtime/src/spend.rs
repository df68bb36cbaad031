//! Spending an approval: the one order in which every host runs a call a reviewer approved
//! in a durable review queue — the gate decides the call again, the approval is claimed
//! (exactly once, in the queue), the call runs, and how it ended is recorded — with a guard
//! that records a claimed call whose run was abandoned as failed.
//!
//! The queue is behind [`Approvals`] (tooltrust-store implements it); the proxy, the agent
//! loop's resume and the store's own helper all spend through [`spend()`], so each checks
//! the same rules in the same order. The lifecycle it follows is [`crate::held`]'s.

use crate::call::ToolCall;
use crate::held::{Approvals, Binding, ClaimRefused};
use crate::id::Id;
use crate::session::{CallOutcome, Scope, SessionError};
use crate::verdict::Verdict;

/// What spending did.
#[derive(Debug)]
pub enum Spent {
    /// The gate, deciding the call again, did not hold it for the rule that was approved
    /// (it allowed, denied, or held it for another rule): its own outcome; the approval
    /// is unspent.
    NotHeld(CallOutcome),
    /// The approval was claimed and the call run: its outcome (a tool that failed ran,
    /// and is recorded failed).
    Ran(CallOutcome),
}

/// Why spending failed.
#[derive(Debug, thiserror::Error)]
pub enum SpendError {
    /// The claim was refused: nothing ran.
    #[error(transparent)]
    Claim(#[from] ClaimRefused),
    /// The session refused (recording failed, say); after a claim, the call is recorded
    /// failed.
    #[error(transparent)]
    Session(#[from] SessionError),
}

/// Spends the approval of held call `approved` (a reviewer approved it when the gate held
/// it for `rule`; `None`: for whatever rule holds it) on `call` in `scope`: the gate decides
/// `call` again; only if it holds it (for `rule`) is the approval claimed in `approvals`, bound to this tenant, scope, tool,
/// checksum and `upstream`; then the call runs once, and how it ended is recorded. If the
/// returned future is dropped after the claim, the claim is recorded failed.
pub async fn spend(
    scope: &Scope,
    approvals: &dyn Approvals,
    approved: &Id,
    rule: Option<&str>,
    call: ToolCall,
    upstream: Option<&str>,
) -> Result<Spent, SpendError> {
    let binding = Binding {
        tenant: approvals.tenant().clone(),
        scope: scope.id().clone(),
        tool: call.tool().to_owned(),
        checksum: call.checksum(),
        upstream: upstream.map(str::to_owned),
    };
    let outcome = scope.call(call).await?;
    let CallOutcome::Pending { id, decision } = &outcome else {
        return Ok(Spent::NotHeld(outcome));
    };
    if rule.is_some_and(|rule| decision.rule != rule) {
        return Ok(Spent::NotHeld(outcome));
    }
    let approval = approvals.claim(approved, &binding).await?;
    let mut guard = Unfinished {
        approvals,
        id: approved,
        armed: true,
    };
    let ran = async {
        scope
            .session()
            .decide_call(id, approval.reviewer, Verdict::approve(approval.reason))?;
        scope.run_pending(id).await
    }
    .await;
    guard.armed = false;
    let finished = matches!(&ran, Ok(CallOutcome::Ran { output, .. }) if !output.failed);
    let recorded = approvals.finish(approved, finished).await;
    let outcome = ran?;
    recorded?;
    Ok(Spent::Ran(outcome))
}

/// Records a claim whose run never reached its end as failed.
struct Unfinished<'a> {
    approvals: &'a dyn Approvals,
    id: &'a Id,
    armed: bool,
}

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.approvals.abandon(self.id);
        }
    }
}
