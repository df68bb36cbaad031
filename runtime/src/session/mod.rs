//! Sessions and scopes: one state machine that every other part drives.
//!
//! A [`Session`] holds one registry, one renderer (and its key), one gate policy, one
//! recorder and one quarantine store, and the state of its scopes, held calls,
//! quarantined outputs and reviews. Every change of that state is a transition of the
//! private state machine: it checks and acts under the session's one lock and does no
//! I/O. Tools run, bytes are encrypted and events are recorded outside the lock.
//!
//! # Ordering and durability
//!
//! Each transition numbers the events it produces while it holds the lock, so the
//! recorder receives every event exactly once, in the order the transitions happened,
//! whichever thread hands them over. Operations wait for their own events to be
//! recorded before they act on the decision: a call runs only once its allowing
//! decision is durable, and if the recorder fails the operation returns
//! [`SessionError::Record`] and acts on nothing. The unrecorded events stay queued, in
//! order, and are recorded first by the next operation that records. Recording happens
//! outside the state lock, one batch at a time, so a slow disk delays only the callers
//! waiting for their own events (and lets them share one sync), never another scope's
//! transitions.
//!
//! A session's state grows with its scopes; [`Session::forget`] drops a finished
//! scope's context and held calls once the host no longer needs them.

mod error;
mod journal;
mod lineage;
mod scope;
mod spill;
mod state;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

pub use error::SessionError;
pub use lineage::Lineage;
pub use scope::{CallOutcome, Handoff, Scope};

use crate::envelope::{Mode, ParseError, ParsedBlock, Renderer, parse, parse_sealed};
use crate::event::{Event, MemoryRecorder, Recorder};
use crate::gate::{Policy, ScopeRole};
use crate::held::Approvals;
use crate::id::Id;
use crate::nonce::{KeyError, SessionKey};
use crate::quarantine::{MemoryStore, QuarantineHandle, QuarantineStore, custodian};
use crate::registry::Registry;
use journal::{Journal, Ticket};
use state::{Holding, State};
use std::time::Duration;

/// A session of one agent. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Session {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Registry,
    renderer: Renderer,
    policy: Policy,
    quarantine: Arc<dyn QuarantineStore>,
    state: Mutex<State>,
    journal: Arc<Journal>,
    holding: Holding,
    approvals: Option<Arc<dyn Approvals>>,
    /// Stores forgotten blocks' text, when the session has a memory budget.
    spill: Option<spill::Spill>,
}

/// Builds a [`Session`].
pub struct SessionBuilder {
    registry: Registry,
    key: Option<SessionKey>,
    mode: Mode,
    policy: Policy,
    recorder: Option<Arc<dyn Recorder>>,
    quarantine: Option<Arc<dyn QuarantineStore>>,
    tenant: Option<Id>,
    approval_ttl: Option<Duration>,
    approvals: Option<Arc<dyn Approvals>>,
    max_kept_bytes: Option<usize>,
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
        self.quarantine = Some(store);
        self
    }

    /// The tenant whose held calls this session makes (default: `default`, as a store's):
    /// an approval is bound to it.
    pub fn tenant(mut self, tenant: Id) -> Self {
        self.tenant = Some(tenant);
        self
    }

    /// How long a held call may wait to be approved and claimed (default:
    /// [`DEFAULT_APPROVAL_TTL`](crate::held::DEFAULT_APPROVAL_TTL)); `None`: forever.
    pub fn approval_ttl(mut self, ttl: Option<Duration>) -> Self {
        self.approval_ttl = ttl;
        self
    }

    /// The durable review queue whose approvals this session's held calls are spent from
    /// (a `tooltrust_store::Store`): with it, [`Agent::resume_decided`](crate::Agent::resume_decided)
    /// runs an approved call only by claiming it there, once, after the queue has checked
    /// the reviewer's signature ([`crate::spend::spend`]), so a retry or a conversation
    /// rolled back to an older copy cannot run an approval twice.
    pub fn approvals(mut self, approvals: Arc<dyn Approvals>) -> Self {
        self.approvals = Some(approvals);
        self
    }

    /// The bytes of block text and envelopes each scope keeps in memory (default: all).
    /// Past it, the oldest data blocks' text is let go of, never the newest block's:
    /// each keeps its id, trust, origin and length, its SHA-256 is recorded
    /// ([`Event::BlockForgotten`]), and its text goes to the quarantine store, where [`Session::forgotten_text`] reads it back for a
    /// reviewer. The scope's taint never changes, and a forgotten block vouches for no
    /// value, so a decision can only become stricter. With the default
    /// [`MemoryStore`] the text stays in memory: give a store on disk
    /// ([`quarantine_store`](Self::quarantine_store)) to bound memory.
    pub fn max_kept_bytes(mut self, bytes: usize) -> Self {
        self.max_kept_bytes = Some(bytes);
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
        let recorder = self
            .recorder
            .unwrap_or_else(|| Arc::new(MemoryRecorder::new()));
        let quarantine = self
            .quarantine
            .unwrap_or_else(|| Arc::new(MemoryStore::new()));
        let journal = Arc::new(Journal::new(recorder));
        Ok(Session {
            inner: Arc::new(Inner {
                registry: self.registry,
                renderer,
                policy: self.policy,
                spill: self
                    .max_kept_bytes
                    .map(|_| spill::Spill::new(Arc::clone(&quarantine), Arc::clone(&journal))),
                quarantine,
                state: Mutex::new(State::with_budget(self.max_kept_bytes)),
                journal,
                holding: Holding {
                    tenant: self.tenant.unwrap_or_else(|| Id::from_static("default")),
                    ttl: self.approval_ttl,
                },
                approvals: self.approvals,
            }),
        })
    }
}

/// How much a session holds now (see [`Session::forget`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Occupancy {
    /// Scopes, open or finished and not forgotten.
    pub scopes: usize,
    /// Held calls of those scopes.
    pub pending: usize,
    /// Quarantined outputs.
    pub outputs: usize,
    /// Reviews.
    pub reviews: usize,
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
            quarantine: None,
            tenant: None,
            approval_ttl: Some(crate::held::DEFAULT_APPROVAL_TTL),
            approvals: None,
            max_kept_bytes: None,
        }
    }

    /// The durable review queue approvals are spent from, if the session has one
    /// ([`SessionBuilder::approvals`]).
    pub fn approvals(&self) -> Option<&Arc<dyn Approvals>> {
        self.inner.approvals.as_ref()
    }

    /// The tenant whose held calls this session makes.
    pub fn tenant(&self) -> &Id {
        &self.inner.holding.tenant
    }

    /// How long a call this session holds may wait to be approved and claimed, as
    /// [`SessionBuilder::approval_ttl`] set it (default
    /// [`DEFAULT_APPROVAL_TTL`](crate::held::DEFAULT_APPROVAL_TTL)); `None`: forever.
    ///
    /// The session's own held calls expire by it. A host that also puts them in a
    /// durable review queue gives each row the same expiry, so that a call the session
    /// would no longer run is not approved and run from the queue either:
    ///
    /// ```
    /// use std::time::Duration;
    /// use tooltrust::held::DEFAULT_APPROVAL_TTL;
    /// use tooltrust::{Registry, Session};
    /// let default = Session::builder(Registry::builder().build()?).build()?;
    /// assert_eq!(default.approval_ttl(), Some(DEFAULT_APPROVAL_TTL));
    /// let forever = Session::builder(Registry::builder().build()?).approval_ttl(None).build()?;
    /// assert_eq!(forever.approval_ttl(), None);
    /// let session = Session::builder(Registry::builder().build()?)
    ///     .approval_ttl(Some(Duration::from_secs(15 * 60)))
    ///     .build()?;
    /// assert_eq!(session.approval_ttl(), Some(Duration::from_secs(15 * 60)));
    /// // What a row of the queue stores as its expiry (RFC 3339):
    /// let expires_at: Option<String> = session.approval_ttl().map(tooltrust::held::expiry_after);
    /// assert!(expires_at.is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn approval_ttl(&self) -> Option<Duration> {
        self.inner.holding.ttl
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
    pub fn open_scope(&self, author: Id) -> Result<Scope, SessionError> {
        self.open(author, None, ScopeRole::Agent)
    }

    /// Opens a root scope driven by `author` under the id `id` of an earlier one (a
    /// persisted conversation's, say), so that approvals bound to that scope can be spent
    /// in it. An id this session already holds is refused.
    pub fn continue_scope(&self, id: Id, author: Id) -> Result<Scope, SessionError> {
        self.act(|state, events| {
            state.open_scope(events, id.clone(), author, None, ScopeRole::Agent)
        })?;
        Ok(Scope::new(self.clone(), id))
    }

    /// Opens a review scope driven by `reviewer`: it may read, never act.
    pub fn open_review_scope(&self, reviewer: Id) -> Result<Scope, SessionError> {
        self.open(reviewer, None, ScopeRole::Review)
    }

    pub(crate) fn open(
        &self,
        author: Id,
        parent: Option<Id>,
        role: ScopeRole,
    ) -> Result<Scope, SessionError> {
        let id = Id::random()?;
        self.act(|state, events| state.open_scope(events, id.clone(), author, parent, role))?;
        Ok(Scope::new(self.clone(), id))
    }

    /// The handle of quarantined output `key`, as it stands now.
    pub fn handle(&self, key: &Id) -> Option<QuarantineHandle> {
        self.state().handle(key)
    }

    /// Where held call `id` stands, if the session holds it.
    pub fn pending_status(&self, id: &Id) -> Option<crate::held::HeldStatus> {
        self.state().pending_status(id)
    }

    /// Decides held call `id` on a person's verdict (from a console, an MCP host's
    /// elicitation, the review queue): the person acts as its judge. The author of the
    /// scope that made the call cannot decide it; a call already decided, or under
    /// review, is refused. The decision is recorded before it takes effect; run an
    /// approved call with [`Scope::run_pending`].
    pub fn decide_call(
        &self,
        id: &Id,
        reviewer: Id,
        verdict: crate::verdict::Verdict,
    ) -> Result<(), SessionError> {
        self.act(|state, events| state.decide_call(events, id, &reviewer, &verdict))
    }

    /// Parses `prompt` strictly, as this session renders: in sealed mode every nonce must
    /// be one the session's key derives and every body must be neutral; in compat mode the
    /// structure alone is checked. Hosts and proxies check what they are about to send.
    pub fn verify<'p>(&self, prompt: &'p str) -> Result<Vec<ParsedBlock<'p>>, ParseError> {
        match self.inner.renderer.key() {
            Some(key) => parse_sealed(prompt, key),
            None => parse(prompt),
        }
    }

    /// Drops finished scope `scope`'s context and held calls, and its rejected outputs,
    /// so that a long-lived session stays small. Outputs still pending or approved stay
    /// (a review or a release needs them). Afterwards the scope is unknown.
    pub fn forget(&self, scope: &Id) -> Result<(), SessionError> {
        self.state().forget(scope)
    }

    /// How much the session holds now.
    pub fn occupancy(&self) -> Occupancy {
        let [scopes, pending, outputs, reviews] = self.state().sizes();
        Occupancy {
            scopes,
            pending,
            outputs,
            reviews,
        }
    }

    /// Reads output `key` for `reader` under a grant, recording the decryption before
    /// anything is decrypted.
    pub(crate) fn open_output(
        &self,
        key: &Id,
        reader: &Id,
        reason: &'static str,
    ) -> Result<Vec<u8>, SessionError> {
        let (grant, target) = self.act(|state, events| state.grant(events, key, reader, reason))?;
        Ok(self.inner.quarantine.open(key, &target, reader, &grant)?)
    }

    /// The text of block `block` of scope `scope`, which the session let go of past its
    /// memory budget ([`SessionBuilder::max_kept_bytes`]), read back from the quarantine
    /// store for a reviewer (the decryption is recorded). Never give it to a model: it is
    /// the block's raw text, outside its envelope. Fails for a block the session still
    /// keeps, or whose copy could not be stored.
    pub fn forgotten_text(&self, scope: &Id, block: &Id) -> Result<String, SessionError> {
        if let Some(spill) = &self.inner.spill {
            spill.sync();
        }
        let grant = self.act(|state, events| state.recall(events, scope, block))?;
        let bytes = self
            .inner
            .quarantine
            .open(block, scope, &custodian(), &grant)?;
        String::from_utf8(bytes).map_err(|_| SessionError::UnknownOutput(block.clone()))
    }

    /// Stores a copy of output `key` of scope `target` for `reader`.
    pub(crate) fn store_copy(
        &self,
        key: &Id,
        target: &Id,
        reader: &Id,
        bytes: &[u8],
    ) -> Result<(), SessionError> {
        Ok(self.inner.quarantine.put(key, target, reader, bytes)?)
    }

    /// Copies approved output `key` out of quarantine for `reader`, and reads it.
    pub(crate) fn release_to(&self, key: &Id, reader: &Id) -> Result<Vec<u8>, SessionError> {
        let target = self.state().releasable(key)?;
        let bytes = self.open_output(key, &custodian(), "custodian copy for release")?;
        self.store_copy(key, &target, reader, &bytes)?;
        self.open_output(key, reader, "promoted")
    }

    /// Runs transition `f` under the lock and queues its events; the caller must flush
    /// the ticket before acting on the result.
    pub(crate) fn transition<T>(
        &self,
        f: impl FnOnce(&mut State, &mut Vec<Event>) -> Result<T, SessionError>,
    ) -> Result<(T, Ticket), SessionError> {
        self.transition_queued(f, Journal::enqueue)
    }

    fn transition_queued<T>(
        &self,
        f: impl FnOnce(&mut State, &mut Vec<Event>) -> Result<T, SessionError>,
        queue: impl FnOnce(&Journal, Vec<Event>) -> Ticket,
    ) -> Result<(T, Ticket), SessionError> {
        let mut state = self.state();
        let mut events = Vec::new();
        let result = f(&mut state, &mut events);
        // Queued while the lock is held, so the queue's order is the transitions'.
        let ticket = queue(&self.inner.journal, events);
        let let_go = state.take_let_go();
        drop(state);
        if let Some(spill) = &self.inner.spill {
            for (scope, block, text) in let_go {
                spill.put(scope, block, text);
            }
        }
        result.map(|value| (value, ticket))
    }

    /// Waits until every event up to `ticket` is recorded.
    pub(crate) fn flush(&self, ticket: Ticket) -> Result<(), SessionError> {
        Ok(self.inner.journal.flush(ticket)?)
    }

    /// Runs transition `f` and waits until its events are recorded.
    pub(crate) fn act<T>(
        &self,
        f: impl FnOnce(&mut State, &mut Vec<Event>) -> Result<T, SessionError>,
    ) -> Result<T, SessionError> {
        let (value, ticket) = self.transition(f)?;
        self.flush(ticket)?;
        Ok(value)
    }

    /// Runs transition `f`, whose events report what already happened and gate
    /// nothing (a call's outcome), and hands them to the recorder without waiting for
    /// their sync: they become durable with the next decision's, or on the recorder's
    /// timer. A call then costs one sync, its decision's.
    pub(crate) fn act_deferred<T>(
        &self,
        f: impl FnOnce(&mut State, &mut Vec<Event>) -> Result<T, SessionError>,
    ) -> Result<T, SessionError> {
        let (value, ticket) = self.transition_queued(f, Journal::enqueue_deferred)?;
        self.flush(ticket)?;
        Ok(value)
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        // Every transition checks before it acts, so a panic elsewhere while holding the
        // lock leaves consistent state; keep serving rather than poisoning the session.
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn policy(&self) -> &Policy {
        &self.inner.policy
    }

    pub(crate) fn holding(&self) -> &Holding {
        &self.inner.holding
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("registry", &self.inner.registry)
            .field("mode", &self.inner.renderer.mode())
            .finish_non_exhaustive()
    }
}
