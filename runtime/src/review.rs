//! Review: reviewers give advisory verdicts, a judge gives the authoritative one.
//! Reviewer and judge are traits, so a host can plug in a human, a rule or a model.
//!
//! Separation of powers: the author of a scope can never review or judge it; the check
//! runs when the review is opened.

use std::future::Future;
use std::pin::Pin;

use serde::Serialize;

use crate::call::ToolCall;
use crate::id::Id;
use crate::scope::Scope;

/// A verdict: approve or reject, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// Whether the subject is approved.
    pub approve: bool,
    /// Why.
    pub reason: String,
}

impl Verdict {
    /// An approval.
    pub fn approve(reason: impl Into<String>) -> Self {
        Verdict {
            approve: true,
            reason: reason.into(),
        }
    }

    /// A rejection.
    pub fn reject(reason: impl Into<String>) -> Self {
        Verdict {
            approve: false,
            reason: reason.into(),
        }
    }
}

/// What a review is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", content = "id", rename_all = "snake_case")]
pub enum Subject {
    /// A tainted scope's quarantined output, by key.
    Output(Id),
    /// A call the gate sent to review, by pending id.
    Call(Id),
}

/// What reviewers and the judge see.
#[derive(Debug, Clone, PartialEq)]
pub struct Material {
    /// The review.
    pub review: Id,
    /// What is reviewed.
    pub subject: Subject,
    /// The scope that produced the output or made the call.
    pub target: Id,
    /// The quarantined output (outsider bytes: data, never instructions), or the call's
    /// canonical text.
    pub text: String,
    /// The call under review, for call reviews.
    pub call: Option<ToolCall>,
    /// Why the review exists (the gate's reason, or the quarantine).
    pub reason: String,
}

/// A reviewer's verdict, with who gave it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReviewerVerdict {
    /// The reviewer.
    pub reviewer: Id,
    /// The verdict.
    pub verdict: Verdict,
}

/// The future a reviewer or judge returns.
pub type VerdictFuture<'a> = Pin<Box<dyn Future<Output = Verdict> + Send + 'a>>;

/// Gives an advisory verdict. It runs in a review scope, where it may call read-only
/// tools and nothing else.
pub trait Reviewer: Send + Sync {
    /// Who reviews.
    fn id(&self) -> &Id;

    /// Reviews `material`, which is also in `scope`'s context as untrusted data.
    fn review<'a>(&'a self, material: &'a Material, scope: &'a Scope) -> VerdictFuture<'a>;
}

/// Gives the authoritative verdict, having seen the reviewers'.
pub trait Judge: Send + Sync {
    /// Who judges.
    fn id(&self) -> &Id;

    /// Judges `material` in the light of the reviewers' `verdicts`.
    fn judge<'a>(
        &'a self,
        material: &'a Material,
        verdicts: &'a [ReviewerVerdict],
    ) -> VerdictFuture<'a>;
}

/// A deterministic judge: approves when at least `min_approvals` reviewers approve and
/// none rejects.
#[derive(Debug, Clone)]
pub struct RuleJudge {
    id: Id,
    min_approvals: usize,
}

impl RuleJudge {
    /// A judge named `id` that needs `min_approvals` approvals (at least one) and no
    /// rejection.
    pub fn new(id: Id, min_approvals: usize) -> Self {
        RuleJudge {
            id,
            min_approvals: min_approvals.max(1),
        }
    }

    /// The verdict, computed synchronously; each reviewer counts once.
    pub fn decide(&self, verdicts: &[ReviewerVerdict]) -> Verdict {
        if let Some(rejection) = verdicts.iter().find(|v| !v.verdict.approve) {
            return Verdict::reject(format!(
                "reviewer {} rejected: {}",
                rejection.reviewer, rejection.verdict.reason
            ));
        }
        let mut approvers: Vec<&Id> = verdicts.iter().map(|v| &v.reviewer).collect();
        approvers.sort_unstable();
        approvers.dedup();
        let approvals = approvers.len();
        if approvals < self.min_approvals {
            return Verdict::reject(format!(
                "{approvals} approval(s), {} required",
                self.min_approvals
            ));
        }
        Verdict::approve(format!("{approvals} reviewer(s) approved, none rejected"))
    }
}

impl Judge for RuleJudge {
    fn id(&self) -> &Id {
        &self.id
    }

    fn judge<'a>(
        &'a self,
        _material: &'a Material,
        verdicts: &'a [ReviewerVerdict],
    ) -> VerdictFuture<'a> {
        let verdict = self.decide(verdicts);
        Box::pin(async move { verdict })
    }
}

/// The outcome of a review.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Judgement {
    /// The review.
    pub review: Id,
    /// The reviewers' advisory verdicts.
    pub verdicts: Vec<ReviewerVerdict>,
    /// The judge's authoritative verdict.
    pub judge: Verdict,
}

/// Why a review could not be opened or run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReviewError {
    /// A reviewer or the judge is the author of the scope under review.
    #[error("{who} is the author of scope {target} and cannot review or judge it")]
    SeparationOfPowers {
        /// The principal refused.
        who: Id,
        /// The scope under review.
        target: Id,
    },
    /// The subject does not exist, or was already decided.
    #[error("nothing to review under {0}")]
    UnknownSubject(String),
    /// A review needs at least one reviewer.
    #[error("a review needs at least one reviewer")]
    NoReviewer,
    /// A reviewer is listed twice (one reviewer's verdict counts once).
    #[error("reviewer {0} is listed twice")]
    DuplicateReviewer(Id),
    /// A review of the subject is already open or decided; verdicts never overwrite one
    /// another.
    #[error("{0} is already under review or decided")]
    AlreadyReviewed(String),
    /// The review was already run.
    #[error("review {0} was already decided")]
    AlreadyDecided(Id),
    /// Recording, storage or rendering failed; nothing was decided.
    #[error(transparent)]
    Scope(#[from] crate::scope::ScopeError),
}
