//! A session: one registry, one renderer (and its key), one gate policy, one recorder,
//! one quarantine store, and the scopes, pending calls and reviews that use them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::block::Block;
use crate::call::ToolCall;
use crate::envelope::{Mode, Renderer};
use crate::event::{Event, MemoryRecorder, Recorder};
use crate::gate::{Decision, NonceIndex, Policy, Taint};
use crate::id::Id;
use crate::nonce::{KeyError, SessionKey};
use crate::quarantine::{
    Exit, Grant, MemoryStore, QuarantineError, QuarantineHandle, QuarantineStatus, QuarantineStore,
};
use crate::registry::Registry;
use crate::review::{Judge, Judgement, Material, ReviewError, Reviewer, ReviewerVerdict, Subject};
use crate::scope::{Scope, ScopeError};
use crate::tool::Trust;

/// The principal that holds every quarantined output until a review copies it out.
pub(crate) fn custodian() -> Id {
    Id::from_static("quarantine-custodian")
}

/// A session of one agent. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Session {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) registry: Registry,
    pub(crate) renderer: Renderer,
    pub(crate) policy: Policy,
    pub(crate) recorder: Arc<dyn Recorder>,
    pub(crate) store: Arc<dyn QuarantineStore>,
    pub(crate) state: Mutex<State>,
}

/// Everything that changes, under one lock so that decisions see one consistent state.
#[derive(Default)]
pub(crate) struct State {
    pub(crate) scopes: HashMap<Id, ScopeState>,
    pub(crate) pending: HashMap<Id, Pending>,
    pub(crate) outputs: HashMap<Id, OutputState>,
    pub(crate) reviews: HashMap<Id, ReviewState>,
}

pub(crate) struct ScopeState {
    pub(crate) author: Id,
    pub(crate) parent: Option<Id>,
    pub(crate) taint: Taint,
    /// Set by `finish`: nothing more enters the scope or runs in it.
    pub(crate) finished: bool,
    pub(crate) blocks: Vec<Block>,
    pub(crate) rendered: Vec<String>,
    pub(crate) nonces: NonceIndex,
}

pub(crate) struct Pending {
    pub(crate) scope: Id,
    pub(crate) call: ToolCall,
    pub(crate) decision: Decision,
    pub(crate) status: PendingStatus,
    /// A review is open on it: one at a time, so no verdict overwrites another.
    pub(crate) under_review: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PendingStatus {
    Waiting,
    Approved,
    Rejected,
    Ran,
}

pub(crate) struct OutputState {
    pub(crate) target: Id,
    pub(crate) status: QuarantineStatus,
    pub(crate) bytes: u64,
    pub(crate) exit: Exit,
    /// Reviewers assigned to it, who may read their copy.
    pub(crate) readers: Vec<Id>,
    /// A review is open on it: one at a time, so no verdict overwrites another.
    pub(crate) under_review: bool,
}

pub(crate) struct ReviewState {
    pub(crate) decided: bool,
}

/// Builds a [`Session`].
pub struct SessionBuilder {
    registry: Registry,
    key: Option<SessionKey>,
    mode: Mode,
    policy: Policy,
    recorder: Option<Arc<dyn Recorder>>,
    store: Option<Arc<dyn QuarantineStore>>,
}

impl SessionBuilder {
    /// Renders in compat mode (public nonces, the reference's bytes) instead of sealed.
    pub fn compat(mut self) -> Self {
        self.mode = Mode::Compat;
        self
    }

    /// Uses `key` for sealed nonces instead of a fresh one.
    pub fn key(mut self, key: SessionKey) -> Self {
        self.key = Some(key);
        self
    }

    /// The gate's policy (default: [`Policy::new`]).
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// Where events go (default: a [`MemoryRecorder`]).
    pub fn recorder(mut self, recorder: Arc<dyn Recorder>) -> Self {
        self.recorder = Some(recorder);
        self
    }

    /// Where quarantined output is kept (default: a [`MemoryStore`]).
    pub fn quarantine_store(mut self, store: Arc<dyn QuarantineStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Builds the session; in sealed mode without a key, draws one from the OS CSPRNG.
    pub fn build(self) -> Result<Session, KeyError> {
        let renderer = match self.mode {
            Mode::Compat => Renderer::compat(),
            Mode::Sealed => Renderer::sealed(match self.key {
                Some(key) => key,
                None => SessionKey::generate()?,
            }),
        };
        Ok(Session {
            inner: Arc::new(Inner {
                registry: self.registry,
                renderer,
                policy: self.policy,
                recorder: self
                    .recorder
                    .unwrap_or_else(|| Arc::new(MemoryRecorder::new())),
                store: self.store.unwrap_or_else(|| Arc::new(MemoryStore::new())),
                state: Mutex::new(State::default()),
            }),
        })
    }
}

impl Session {
    /// Starts building a session over `registry`.
    pub fn builder(registry: Registry) -> SessionBuilder {
        SessionBuilder {
            registry,
            key: None,
            mode: Mode::Sealed,
            policy: Policy::new(),
            recorder: None,
            store: None,
        }
    }

    /// The tools of this session.
    pub fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    /// The renderer (and, in sealed mode, the session key it holds).
    pub fn renderer(&self) -> &Renderer {
        &self.inner.renderer
    }

    /// Opens a root scope driven by `author`.
    pub fn open_scope(&self, author: Id) -> Result<Scope, ScopeError> {
        self.open(author, None, Taint::Clean)
    }

    pub(crate) fn open(
        &self,
        author: Id,
        parent: Option<Id>,
        taint: Taint,
    ) -> Result<Scope, ScopeError> {
        let id = Id::random();
        self.record(&Event::ScopeOpened {
            scope: id.clone(),
            parent: parent.clone(),
            author: author.clone(),
            kind: if taint == Taint::Review {
                "review"
            } else {
                "agent"
            },
        })?;
        self.state().scopes.insert(
            id.clone(),
            ScopeState {
                author,
                parent,
                taint,
                finished: false,
                blocks: Vec::new(),
                rendered: Vec::new(),
                nonces: NonceIndex::default(),
            },
        );
        Ok(Scope::new(self.clone(), id))
    }

    /// The handle of quarantined output `key`, as it stands now.
    pub fn handle(&self, key: &Id) -> Option<QuarantineHandle> {
        self.state()
            .outputs
            .get(key)
            .map(|output| QuarantineHandle {
                key: key.clone(),
                target: output.target.clone(),
                status: output.status,
                bytes: output.bytes,
                exit: output.exit,
            })
    }

    /// Opens a review of `subject`. The author of the scope under review may be neither
    /// a reviewer nor the judge.
    pub fn open_review(
        &self,
        subject: Subject,
        reviewers: Vec<Arc<dyn Reviewer>>,
        judge: Arc<dyn Judge>,
    ) -> Result<Review, ReviewError> {
        if reviewers.is_empty() {
            return Err(ReviewError::NoReviewer);
        }
        if let Some((_, reviewer)) = reviewers
            .iter()
            .enumerate()
            .find(|(at, r)| reviewers[..*at].iter().any(|other| other.id() == r.id()))
        {
            return Err(ReviewError::DuplicateReviewer(reviewer.id().clone()));
        }
        // Claim the subject under the lock, so that no second review can be opened on it.
        let (target, reason) = {
            let mut state = self.state();
            match &subject {
                Subject::Output(key) => match state.outputs.get_mut(key) {
                    Some(output)
                        if output.status == QuarantineStatus::Pending && !output.under_review =>
                    {
                        output.under_review = true;
                        (
                            output.target.clone(),
                            "the output of a tainted scope is quarantined".to_owned(),
                        )
                    }
                    Some(_) => return Err(ReviewError::AlreadyReviewed(format!("output {key}"))),
                    None => return Err(ReviewError::UnknownSubject(format!("output {key}"))),
                },
                Subject::Call(id) => match state.pending.get_mut(id) {
                    Some(pending)
                        if pending.status == PendingStatus::Waiting && !pending.under_review =>
                    {
                        pending.under_review = true;
                        (pending.scope.clone(), pending.decision.reason.clone())
                    }
                    Some(_) => return Err(ReviewError::AlreadyReviewed(format!("call {id}"))),
                    None => return Err(ReviewError::UnknownSubject(format!("call {id}"))),
                },
            }
        };
        let opened = self.assign_review(&subject, &target, &reviewers, judge.as_ref());
        let id = match opened {
            Ok(id) => id,
            Err(error) => {
                // Release the claim: a failed opening must not leave the subject stuck.
                let mut state = self.state();
                match &subject {
                    Subject::Output(key) => {
                        if let Some(output) = state.outputs.get_mut(key) {
                            output.under_review = false;
                        }
                    }
                    Subject::Call(call) => {
                        if let Some(pending) = state.pending.get_mut(call) {
                            pending.under_review = false;
                        }
                    }
                }
                return Err(error);
            }
        };
        Ok(Review {
            session: self.clone(),
            id,
            subject,
            target,
            reason,
            reviewers,
            judge,
        })
    }

    /// Checks separation of powers, records the opening and gives each reviewer of an
    /// output its own copy; returns the review's id.
    fn assign_review(
        &self,
        subject: &Subject,
        target: &Id,
        reviewers: &[Arc<dyn Reviewer>],
        judge: &dyn Judge,
    ) -> Result<Id, ReviewError> {
        let author = self.scope_author(target)?;
        if let Some(who) = reviewers
            .iter()
            .map(|reviewer| reviewer.id())
            .chain([judge.id()])
            .find(|who| **who == author)
        {
            return Err(ReviewError::SeparationOfPowers {
                who: who.clone(),
                target: target.clone(),
            });
        }
        let id = Id::random();
        self.record(&Event::ReviewOpened {
            review: id.clone(),
            target: target.clone(),
            subject: match subject {
                Subject::Output(key) => format!("output:{key}"),
                Subject::Call(call) => format!("call:{call}"),
            },
            reviewers: reviewers.iter().map(|r| r.id().clone()).collect(),
            judge: judge.id().clone(),
        })?;
        if let Subject::Output(key) = subject {
            // Each reviewer gets its own copy, under its own data key.
            let bytes = self.open_output(key, target, &custodian(), "custodian copy for review")?;
            for reviewer in reviewers {
                self.inner
                    .store
                    .put(key, target, reviewer.id(), &bytes)
                    .map_err(ScopeError::from)?;
            }
            if let Some(output) = self.state().outputs.get_mut(key) {
                output
                    .readers
                    .extend(reviewers.iter().map(|r| r.id().clone()));
            }
        }
        self.state()
            .reviews
            .insert(id.clone(), ReviewState { decided: false });
        Ok(id)
    }

    /// Releases promoted output `key` into `to` as a vetted block (data that no longer
    /// taints). Only outputs a judge approved can be released.
    pub fn release(&self, key: &Id, to: &Scope) -> Result<Id, ScopeError> {
        let target = {
            let state = self.state();
            match state.outputs.get(key) {
                Some(output) if output.status == QuarantineStatus::Approved => {
                    output.target.clone()
                }
                _ => return Err(ScopeError::NotReleasable(key.clone())),
            }
        };
        let bytes = self.open_output(key, &target, &custodian(), "custodian copy for release")?;
        self.inner
            .store
            .put(key, &target, to.id(), &bytes)
            .map_err(ScopeError::from)?;
        let bytes = self.open_output(key, &target, to.id(), "promoted")?;
        let text = String::from_utf8_lossy(&bytes);
        let rendered = self
            .renderer()
            .data(Trust::Untrusted, "vetted-output", key, &text)
            .map_err(ScopeError::from)?;
        let block = Block::data(key.clone(), Trust::Vetted, text.into_owned());
        to.push(block, rendered, "vetted-output")
    }

    /// Reads output `key` for `reader` under a grant, recording the decryption. A grant
    /// holds for the custodian (copying for a review or a release), for a reviewer
    /// assigned to the output while it is pending, and for anyone once it is approved.
    pub(crate) fn open_output(
        &self,
        key: &Id,
        target: &Id,
        reader: &Id,
        reason: &'static str,
    ) -> Result<Vec<u8>, ScopeError> {
        let granted = {
            let state = self.state();
            state.outputs.get(key).is_some_and(|output| {
                *reader == custodian()
                    || output.status == QuarantineStatus::Approved
                    || (output.status == QuarantineStatus::Pending
                        && output.readers.contains(reader))
            })
        };
        if !granted {
            return Err(QuarantineError::NoGrant {
                key: key.clone(),
                reader: reader.clone(),
            }
            .into());
        }
        let grant = Grant::new(key, reader, reason);
        let bytes = self.inner.store.open(key, target, reader, &grant)?;
        self.record(&Event::DecryptionGranted {
            key: key.clone(),
            target: target.clone(),
            reader: reader.clone(),
            bytes: bytes.len() as u64,
            reason: reason.to_owned(),
        })?;
        Ok(bytes)
    }

    pub(crate) fn scope_author(&self, scope: &Id) -> Result<Id, ScopeError> {
        self.state()
            .scopes
            .get(scope)
            .map(|scope| scope.author.clone())
            .ok_or_else(|| ScopeError::UnknownScope(scope.clone()))
    }

    pub(crate) fn record(&self, event: &Event) -> Result<(), ScopeError> {
        self.inner.recorder.record(event).map_err(ScopeError::from)
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere while holding the lock leaves state that every operation
        // re-validates; keep serving rather than poisoning the session.
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// An open review: run it to collect the reviewers' verdicts and the judge's.
pub struct Review {
    session: Session,
    id: Id,
    subject: Subject,
    target: Id,
    reason: String,
    reviewers: Vec<Arc<dyn Reviewer>>,
    judge: Arc<dyn Judge>,
}

impl Review {
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
    /// releases the pending call; its rejection quarantines the output for good or denies
    /// the call. Reviewer verdicts alone decide nothing.
    pub async fn run(self) -> Result<Judgement, ReviewError> {
        let session = &self.session;
        if session
            .state()
            .reviews
            .get(&self.id)
            .is_none_or(|review| review.decided)
        {
            return Err(ReviewError::AlreadyDecided(self.id.clone()));
        }
        let call = match &self.subject {
            Subject::Call(id) => session.state().pending.get(id).map(|p| p.call.clone()),
            Subject::Output(_) => None,
        };
        let mut verdicts = Vec::new();
        for reviewer in &self.reviewers {
            let text = match (&self.subject, &call) {
                (Subject::Output(key), _) => {
                    let bytes = session.open_output(
                        key,
                        &self.target,
                        reviewer.id(),
                        "assigned reviewer",
                    )?;
                    String::from_utf8_lossy(&bytes).into_owned()
                }
                (Subject::Call(_), Some(call)) => call.canonical(),
                (Subject::Call(id), None) => {
                    return Err(ReviewError::UnknownSubject(format!("call {id}")));
                }
            };
            let material = Material {
                review: self.id.clone(),
                subject: self.subject.clone(),
                target: self.target.clone(),
                text,
                call: call.clone(),
                reason: self.reason.clone(),
            };
            let scope = session.open(reviewer.id().clone(), None, Taint::Review)?;
            scope.add_review_material(&material)?;
            let verdict = reviewer.review(&material, &scope).await;
            session.record(&crate::event::Event::ReviewVerdict {
                review: self.id.clone(),
                reviewer: reviewer.id().clone(),
                approve: verdict.approve,
                reason: verdict.reason.clone(),
            })?;
            verdicts.push(ReviewerVerdict {
                reviewer: reviewer.id().clone(),
                verdict,
            });
        }
        let material = Material {
            review: self.id.clone(),
            subject: self.subject.clone(),
            target: self.target.clone(),
            text: String::new(),
            call,
            reason: self.reason.clone(),
        };
        let verdict = self.judge.judge(&material, &verdicts).await;
        session.record(&Event::JudgeVerdict {
            review: self.id.clone(),
            judge: self.judge.id().clone(),
            approve: verdict.approve,
            reason: verdict.reason.clone(),
        })?;
        if verdict.approve && matches!(self.subject, Subject::Output(_)) {
            session.record(&Event::Promoted {
                scope: self.target.clone(),
                review: self.id.clone(),
            })?;
        }
        let mut state = session.state();
        if let Some(review) = state.reviews.get_mut(&self.id) {
            review.decided = true;
        }
        match &self.subject {
            Subject::Output(key) => {
                // Only a pending output moves; a decided one never changes again.
                if let Some(output) = state
                    .outputs
                    .get_mut(key)
                    .filter(|output| output.status == QuarantineStatus::Pending)
                {
                    output.under_review = false;
                    output.status = if verdict.approve {
                        QuarantineStatus::Approved
                    } else {
                        QuarantineStatus::Rejected
                    };
                }
                if verdict.approve
                    && let Some(scope) = state.scopes.get_mut(&self.target)
                {
                    // Promotion reaches the target scope only, never its parent.
                    scope.taint = Taint::Clean;
                }
            }
            Subject::Call(id) => {
                if let Some(pending) = state
                    .pending
                    .get_mut(id)
                    .filter(|pending| pending.status == PendingStatus::Waiting)
                {
                    pending.under_review = false;
                    pending.status = if verdict.approve {
                        PendingStatus::Approved
                    } else {
                        PendingStatus::Rejected
                    };
                }
            }
        }
        Ok(Judgement {
            review: self.id,
            verdicts,
            judge: verdict,
        })
    }
}
