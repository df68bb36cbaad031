//! The store as the runtime's review queue for spending approvals
//! (`tooltrust::held::Approvals`), and running a call a person approved in the process that
//! makes it again, through the runtime's one spend order (`tooltrust::spend`): the
//! gate decides the call again; only if it holds it for the rule the person approved is
//! the approval claimed (bound to this scope, tool, checksum and upstream); then the call
//! runs, and how it ended is recorded.

use tooltrust::held::{Approval, ApprovalFuture, Approvals, Binding, ClaimRefused, HeldCall};
use tooltrust::spend::{SpendError, Spent, spend};
use tooltrust::{CallOutcome, Id, Scope, ToolCall};

use crate::error::ClaimError;
use crate::store::Store;

/// Why an approved call did not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunApprovedError {
    /// The queued call's arguments are not the ones its checksum names.
    #[error("held call {0}: its arguments do not match its checksum; refused")]
    ChecksumMismatch(tooltrust::Id),
    /// The claim was refused: nothing ran, and the approval is unspent (or was never
    /// valid).
    #[error(transparent)]
    Claim(#[from] ClaimRefused),
    /// The session refused (recording failed, say): nothing ran after the claim, which
    /// is recorded as failed.
    #[error(transparent)]
    Session(#[from] tooltrust::session::SessionError),
}

impl From<ClaimError> for ClaimRefused {
    fn from(error: ClaimError) -> ClaimRefused {
        match error {
            ClaimError::AlreadyClaimed { id, .. } => ClaimRefused::AlreadySpent(id),
            ClaimError::Store(store) => ClaimRefused::Queue(store.to_string()),
            ClaimError::UnknownCall(ref id)
            | ClaimError::NotApproved { ref id, .. }
            | ClaimError::BindingMismatch { ref id, .. }
            | ClaimError::Expired { ref id, .. }
            | ClaimError::NoRecordedApproval(ref id)
            | ClaimError::Unauthorized { ref id, .. }
            | ClaimError::Refused { ref id, .. } => ClaimRefused::Refused {
                id: id.clone(),
                reason: error.to_string(),
            },
        }
    }
}

impl Approvals for Store {
    fn tenant(&self) -> &Id {
        Store::tenant(self)
    }

    fn claim<'a>(
        &'a self,
        id: &'a Id,
        binding: &'a Binding,
    ) -> ApprovalFuture<'a, Result<Approval, ClaimRefused>> {
        Box::pin(async move {
            let claimed = self.claim_to_run(id, binding).await?;
            // The claim checked the signed decision in the chain; it names who and why.
            let (reviewer, reason) = match claimed.decision {
                Some(signed) => (signed.statement.reviewer, signed.statement.reason),
                None => (
                    claimed
                        .decided_by
                        .clone()
                        .ok_or_else(|| ClaimError::NoRecordedApproval(id.clone()))?,
                    claimed.decision_reason.clone().unwrap_or_default(),
                ),
            };
            Ok(Approval { reviewer, reason })
        })
    }

    fn finish<'a>(&'a self, id: &'a Id, ran: bool) -> ApprovalFuture<'a, Result<(), ClaimRefused>> {
        Box::pin(async move {
            self.finish_claimed(id, ran).await?;
            Ok(())
        })
    }

    fn abandon(&self, id: &Id) {
        let (store, id) = (self.clone(), id.clone());
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    if let Err(error) = store.finish_claimed(&id, false).await {
                        tracing::warn!(%id, %error, "an abandoned claim could not be recorded failed");
                    }
                });
            }
            Err(_) => {
                tracing::warn!(%id, "an abandoned claim outside a Tokio runtime stays claimed");
            }
        }
    }
}

impl Store {
    /// Makes `approved` (a call of this store's queue that a person approved) in
    /// `scope` and runs it if the gate holds it again for the rule it was approved
    /// under, spending the approval exactly then (`tooltrust::spend`).
    ///
    /// Returns the gate's own outcome when it does not hold the call this time (allowed,
    /// denied, or held for another rule): the approval stays unspent. `upstream` names the
    /// MCP upstream the tool belongs to, if any. The claim binds this store handle's
    /// tenant and `scope`'s id: an approval given to another scope or tenant is refused.
    /// If the returned future is dropped mid-run, the claim is recorded failed.
    pub async fn run_approved(
        &self,
        scope: &Scope,
        approved: &HeldCall,
        upstream: Option<&str>,
    ) -> Result<CallOutcome, RunApprovedError> {
        let call = ToolCall::from_model(&approved.tool, &approved.args)
            .ok()
            .filter(|call| call.checksum() == approved.checksum)
            .ok_or_else(|| RunApprovedError::ChecksumMismatch(approved.id.clone()))?;
        match spend(
            scope,
            self,
            &approved.id,
            Some(&approved.rule),
            call,
            upstream,
        )
        .await
        {
            Ok(Spent::NotHeld(outcome) | Spent::Ran(outcome)) => Ok(outcome),
            Err(SpendError::Claim(refused)) => Err(RunApprovedError::Claim(refused)),
            Err(SpendError::Session(error)) => Err(RunApprovedError::Session(error)),
        }
    }
}
