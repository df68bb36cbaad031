//! Why a session operation failed.

use crate::envelope::RenderError;
use crate::event::RecordError;
use crate::id::Id;
use crate::quarantine::QuarantineError;
use crate::random::RandomError;
use crate::verdict::Subject;

/// Why a session or scope operation failed; nothing was decided or changed, unless the
/// variant says otherwise.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The decision was taken but could not be recorded, so it was not acted on: a call
    /// was not run, a review not opened. The event stays queued and is recorded, in
    /// order, by the next operation that records.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// The content could not be rendered.
    #[error(transparent)]
    Render(#[from] RenderError),
    /// Quarantine storage failed.
    #[error(transparent)]
    Quarantine(#[from] QuarantineError),
    /// No fresh id could be drawn.
    #[error(transparent)]
    Random(#[from] RandomError),
    /// The scope does not belong to this session (or was forgotten).
    #[error("unknown scope {0}")]
    UnknownScope(Id),
    /// A scope with this id is already open.
    #[error("scope {0} already exists")]
    DuplicateScope(Id),
    /// The context already holds a block (or a running call) with this id.
    #[error("the context already holds block {0}")]
    DuplicateBlock(Id),
    /// No held call has this id in this scope.
    #[error("no held call {0} in this scope")]
    UnknownHeld(Id),
    /// The held call has not been reviewed yet.
    #[error("held call {0} has not been reviewed")]
    NotReviewed(Id),
    /// The held call already ran (or is running).
    #[error("held call {0} already ran")]
    AlreadyRan(Id),
    /// A running call has no reservation (it was never allowed, or already completed).
    #[error("call {0} is not running")]
    NotRunning(Id),
    /// The scope still has a call running; finish it once the call has completed.
    #[error("call {0} is still running in this scope")]
    CallRunning(Id),
    /// No output is quarantined under this key.
    #[error("no quarantined output {0}")]
    UnknownOutput(Id),
    /// The output is not approved (or unknown), so it cannot be released.
    #[error("quarantined output {0} is not approved for release")]
    NotReleasable(Id),
    /// The scope has finished its work: nothing more enters it or runs in it.
    #[error("scope {0} has finished")]
    Finished(Id),
    /// Only a finished scope can be forgotten.
    #[error("scope {0} has not finished")]
    NotFinished(Id),
    /// A reviewer or the judge is the author of the scope under review.
    #[error("{who} is the author of scope {target} and cannot review or judge it")]
    SeparationOfPowers {
        /// The principal refused.
        who: Id,
        /// The scope under review.
        target: Id,
    },
    /// Nothing to review under this subject.
    #[error("nothing to review under {0}")]
    UnknownSubject(Subject),
    /// A review of the subject is already open or decided; verdicts never overwrite one
    /// another.
    #[error("{0} is already under review or decided")]
    AlreadyReviewed(Subject),
    /// The held call's lifecycle refused the transition (it expired, say).
    #[error("held call {id}: {error}")]
    Lifecycle {
        /// The held call.
        id: Id,
        /// Why.
        error: crate::held::LifecycleError,
    },
    /// The review was already decided (or withdrawn).
    #[error("review {0} was already decided")]
    ReviewDecided(Id),
}
