//! A durable review queue's side of spending an approval: the claim that spends it once,
//! and the record of how the call ended. tooltrust-store implements it; [`spend`](crate::spend::spend)
//! drives it.

use std::future::Future;
use std::pin::Pin;

use super::Binding;
use crate::id::Id;

/// A boxed future, as [`Approvals`] returns.
pub type ApprovalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A durable review queue's side of spending an approval.
pub trait Approvals: Send + Sync {
    /// The tenant whose queue this is: part of every claim's binding.
    fn tenant(&self) -> &Id;

    /// Claims the approval of held call `id` for the call `binding` names: approved →
    /// claimed, once across every process sharing the queue, only if a reviewer the host
    /// trusts signed an approval of exactly that call, before its expiry, and no one
    /// claimed it yet. Returns who approved it and why.
    fn claim<'a>(
        &'a self,
        id: &'a Id,
        binding: &'a Binding,
    ) -> ApprovalFuture<'a, Result<Approval, ClaimRefused>>;

    /// Records how a claimed call ended: ran (`true`) or failed.
    fn finish<'a>(&'a self, id: &'a Id, ran: bool) -> ApprovalFuture<'a, Result<(), ClaimRefused>>;

    /// Records, without waiting, that a claimed call's run was abandoned (its future was
    /// dropped mid-run): it ends failed, never claimed for ever. Called from a drop guard,
    /// so it must not block.
    fn abandon(&self, id: &Id);
}

/// Who approved a claimed call, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    /// The reviewer whose signed decision approved it.
    pub reviewer: Id,
    /// Their reason.
    pub reason: String,
}

/// Why an approval could not be spent; nothing ran.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClaimRefused {
    /// The approval was spent already (by this process or another): a call runs once.
    #[error("held call {0} was claimed already: an approval runs once")]
    AlreadySpent(Id),
    /// The queue refused the claim (not approved, expired, bound to another call, not
    /// signed by a trusted reviewer).
    #[error("the approval of held call {id} cannot be spent: {reason}")]
    Refused {
        /// The held call.
        id: Id,
        /// The queue's reason.
        reason: String,
    },
    /// The queue could not be reached or failed.
    #[error("the review queue failed: {0}")]
    Queue(String),
}
