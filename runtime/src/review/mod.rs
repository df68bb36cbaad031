//! Review: reviewers give advisory verdicts, a judge gives the authoritative one.
//! Reviewer and judge are traits, so a host can plug in a human, a rule or a model; this
//! module holds everything needed to implement them.
//!
//! Separation of powers: the author of a scope can never review or judge it; the check
//! runs when the review is opened, in the same transition that claims the subject.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::Serialize;

use crate::block::Origin;
use crate::call::ToolCall;
use crate::id::Id;
use crate::quarantine::custodian;
use crate::record::Sender;
use crate::session::{Scope, Session, SessionError};

pub use crate::verdict::{ReviewerVerdict, Subject, Verdict};

/// What reviewers and the judge see.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
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
    /// What the principal asked for in the scope under review (its principal messages,
    /// oldest first), so a reviewer can judge the call against the intent.
    pub principal_requests: Vec<String>,
    /// The rendered context of the scope under review when the review opened: what led
    /// to the call or the output. It holds outsiders' text, enveloped; read it as data.
    pub context: String,
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
#[non_exhaustive]
pub struct Judgement {
    /// The review.
    pub review: Id,
    /// The reviewers' advisory verdicts.
    pub verdicts: Vec<ReviewerVerdict>,
    /// The judge's authoritative verdict.
    pub judge: Verdict,
}

/// Why a review could not be opened or run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReviewError {
    /// A review needs at least one reviewer.
    #[error("a review needs at least one reviewer")]
    NoReviewer,
    /// A reviewer is listed twice (one reviewer's verdict counts once).
    #[error("reviewer {0} is listed twice")]
    DuplicateReviewer(Id),
    /// The session refused (separation of powers, an unknown or already reviewed
    /// subject, a decided review) or could not record, store or render; nothing was
    /// decided.
    #[error(transparent)]
    Session(#[from] SessionError),
}

/// An open review: run it to collect the reviewers' verdicts and the judge's.
pub struct Review {
    session: Session,
    id: Id,
    subject: Subject,
    target: Id,
    reason: String,
    call: Option<ToolCall>,
    principal_requests: Vec<String>,
    context: String,
    reviewers: Vec<Arc<dyn Reviewer>>,
    judge: Arc<dyn Judge>,
}

impl Session {
    /// Opens a review of `subject`. The author of the scope under review may be neither
    /// a reviewer nor the judge; a subject has one review at a time, and none once
    /// decided. Each reviewer of an output gets its own encrypted copy.
    pub fn open_review(
        &self,
        subject: Subject,
        reviewers: Vec<Arc<dyn Reviewer>>,
        judge: Arc<dyn Judge>,
    ) -> Result<Review, ReviewError> {
        Review::open(self, subject, reviewers, judge)
    }
}

impl Review {
    /// See [`Session::open_review`].
    pub fn open(
        session: &Session,
        subject: Subject,
        reviewers: Vec<Arc<dyn Reviewer>>,
        judge: Arc<dyn Judge>,
    ) -> Result<Review, ReviewError> {
        if reviewers.is_empty() {
            return Err(ReviewError::NoReviewer);
        }
        let ids: Vec<Id> = reviewers.iter().map(|r| r.id().clone()).collect();
        if let Some(twice) = ids
            .iter()
            .enumerate()
            .find(|(at, id)| ids[..*at].contains(id))
            .map(|(_, id)| id)
        {
            return Err(ReviewError::DuplicateReviewer(twice.clone()));
        }
        let id = Id::random().map_err(SessionError::from)?;
        let opened = session.act(|state, events| {
            state.open_review(events, id.clone(), &subject, &ids, judge.id())
        })?;
        if let Subject::Output(key) = &subject
            && let Err(error) = copy_for_reviewers(session, key, &opened.target, &ids)
        {
            // A failed opening must not leave the subject stuck under review.
            session.state().withdraw_review(&id);
            return Err(error.into());
        }
        let (principal_requests, context) = session
            .state()
            .view(&opened.target)
            .map(|scope| {
                let principal = scope
                    .blocks()
                    .iter()
                    .filter(|block| {
                        matches!(block.origin(), Some(Origin::Message(Sender::Principal)))
                    })
                    .map(|block| block.text().to_owned())
                    .collect();
                (principal, scope.rendered().join("\n\n"))
            })
            .unwrap_or_default();
        Ok(Review {
            session: session.clone(),
            id,
            subject,
            target: opened.target,
            reason: opened.reason,
            call: opened.call,
            principal_requests,
            context,
            reviewers,
            judge,
        })
    }

    /// The review's id.
    pub fn id(&self) -> &Id {
        &self.id
    }

    /// The scope under review.
    pub fn target(&self) -> &Id {
        &self.target
    }

    /// Runs every reviewer, each in its own review scope (read-only tools only), then the
    /// judge. The judge's approval promotes the target scope to clean (for an output) or
    /// releases the held call; its rejection quarantines the output for good or denies
    /// the call. Reviewer verdicts alone decide nothing.
    pub async fn run(self) -> Result<Judgement, ReviewError> {
        let session = &self.session;
        let mut verdicts = Vec::new();
        for reviewer in &self.reviewers {
            let text = match (&self.subject, &self.call) {
                (Subject::Output(key), _) => {
                    let bytes = session.open_output(key, reviewer.id(), "assigned reviewer")?;
                    String::from_utf8_lossy(&bytes).into_owned()
                }
                (Subject::Call(_), Some(call)) => call.canonical(),
                (Subject::Call(_), None) => {
                    return Err(SessionError::UnknownSubject(self.subject.clone()).into());
                }
            };
            let material = self.material(text);
            let scope = session.open_review_scope(reviewer.id().clone())?;
            scope.add_untrusted("review-material", material.text.clone())?;
            let span = tracing::info_span!(
                "review",
                gen_ai.operation.name = "review",
                tooltrust.review = self.id.as_str(),
                tooltrust.reviewer = reviewer.id().as_str(),
            );
            let review = reviewer.review(&material, &scope);
            let verdict = ReviewerVerdict {
                reviewer: reviewer.id().clone(),
                verdict: tracing::Instrument::instrument(review, span).await,
            };
            session.act(|state, events| state.verdict(events, &self.id, &verdict))?;
            verdicts.push(verdict);
        }
        let material = self.material(String::new());
        let span = tracing::info_span!(
            "judge",
            gen_ai.operation.name = "judge",
            tooltrust.review = self.id.as_str(),
            tooltrust.judge = self.judge.id().as_str(),
        );
        let judging = self.judge.judge(&material, &verdicts);
        let verdict = tracing::Instrument::instrument(judging, span).await;
        tracing::info!(
            tooltrust.review = self.id.as_str(),
            tooltrust.approve = verdict.approve,
            "review decided"
        );
        session.act(|state, events| state.judge(events, &self.id, self.judge.id(), &verdict))?;
        Ok(Judgement {
            review: self.id,
            verdicts,
            judge: verdict,
        })
    }

    fn material(&self, text: String) -> Material {
        Material {
            review: self.id.clone(),
            subject: self.subject.clone(),
            target: self.target.clone(),
            text,
            call: self.call.clone(),
            reason: self.reason.clone(),
            principal_requests: self.principal_requests.clone(),
            context: self.context.clone(),
        }
    }
}

/// Gives each reviewer of output `key` its own copy, under its own data key, and makes
/// them its assigned readers.
fn copy_for_reviewers(
    session: &Session,
    key: &Id,
    target: &Id,
    reviewers: &[Id],
) -> Result<(), SessionError> {
    let bytes = session.open_output(key, &custodian(), "custodian copy for review")?;
    for reviewer in reviewers {
        session.store_copy(key, target, reviewer, &bytes)?;
    }
    session.state().assign_readers(key, reviewers);
    Ok(())
}

impl std::fmt::Debug for Review {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Review")
            .field("id", &self.id)
            .field("subject", &self.subject)
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}
