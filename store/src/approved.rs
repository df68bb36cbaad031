//! Running a call a person approved in the review queue, in the process that makes it
//! again: the one order in which every host (the MCP server, an agent resuming) spends an
//! approval. The gate decides the call again; only if it holds it for the rule the person
//! approved is the approval claimed (bound to this scope, tool, checksum and upstream);
//! then the call runs, and how it ended is recorded.

use tooltrust::held::Binding;
use tooltrust::review::Verdict;
use tooltrust::{CallOutcome, Scope, ToolCall};

use crate::error::ClaimError;
use crate::store::Store;
use crate::transition::PendingCall;

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
    Claim(#[from] ClaimError),
    /// The session refused (recording failed, say): nothing ran after the claim, which
    /// is recorded as failed.
    #[error(transparent)]
    Session(#[from] tooltrust::session::SessionError),
}

impl Store {
    /// Makes `approved` (a call of this store's queue that a person approved) in
    /// `scope` and runs it if the gate holds it again for the rule it was approved
    /// under, spending the approval exactly then.
    ///
    /// Returns the gate's own outcome when it does not hold the call this time (allowed,
    /// denied, or held for another rule): the approval stays unspent. `upstream` names the
    /// MCP upstream the tool belongs to, if any. The claim binds this store handle's
    /// tenant and `scope`'s id: an approval given to another scope or tenant is refused.
    pub async fn run_approved(
        &self,
        scope: &Scope,
        approved: &PendingCall,
        upstream: Option<&str>,
    ) -> Result<CallOutcome, RunApprovedError> {
        let call = ToolCall::from_model(&approved.tool, &approved.args)
            .ok()
            .filter(|call| call.checksum() == approved.checksum)
            .ok_or_else(|| RunApprovedError::ChecksumMismatch(approved.id.clone()))?;
        let outcome = scope.call(call.clone()).await?;
        let CallOutcome::Pending { id, decision } = &outcome else {
            return Ok(outcome);
        };
        if decision.rule != approved.rule {
            return Ok(outcome);
        }
        let binding = Binding {
            tenant: self.tenant().clone(),
            scope: scope.id().clone(),
            tool: call.tool().to_owned(),
            checksum: call.checksum(),
            upstream: upstream.map(str::to_owned),
        };
        let claimed = self.claim_to_run(&approved.id, &binding).await?;
        let ran = async {
            let reviewer = claimed
                .decided_by
                .clone()
                .ok_or_else(|| ClaimError::NoRecordedApproval(claimed.id.clone()))?;
            let reason = claimed.decision_reason.clone().unwrap_or_default();
            scope
                .session()
                .decide_call(id, reviewer, Verdict::approve(reason))?;
            Ok::<_, RunApprovedError>(scope.run_pending(id).await?)
        }
        .await;
        let finished = matches!(&ran, Ok(CallOutcome::Ran { output, .. }) if !output.failed);
        self.finish_claimed(&claimed.id, finished).await?;
        ran
    }
}
