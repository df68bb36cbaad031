//! What can go wrong, by operation. Every error keeps its cause; none is a bare string.

use std::sync::Arc;

use tooltrust::Id;
use tooltrust::audit::{EventError, VerifyError};

use crate::location::LocationError;
use tooltrust::held::HeldStatus;

/// Why the store could not do what was asked. Nothing that was acknowledged before is
/// lost by any of these; an operation that failed left no trace, except where the
/// variant says its outcome is unknown ([`StoreError::CommitUnknown`]).
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The location does not name a store.
    #[error(transparent)]
    Location(#[from] LocationError),
    /// The SQLite file does not exist and the store was opened without creating it.
    #[error("no store at {0}: the SQLite file does not exist")]
    NotFound(std::path::PathBuf),
    /// A file of the store (the SQLite file or a journal beside it) belongs to another
    /// user than this process's. Its owner can read and change it whatever its mode, so
    /// the store does not open it: open the store as its owner, or give the file to this
    /// user (`chown`).
    #[error(
        "{} belongs to uid {owner}, not to this process's user (uid {user}): open the store as uid {owner}, or give the file to uid {user} (chown) and make it owner-only (chmod 600)",
        path.display()
    )]
    NotOwned {
        /// The file.
        path: std::path::PathBuf,
        /// The uid that owns it.
        owner: u32,
        /// This process's (effective) uid.
        user: u32,
    },
    /// A file of the store (the SQLite file or a journal beside it) is open to others
    /// than its owner, and the store could not make it owner-only: nothing was opened.
    /// Its owner makes it owner-only (`chmod 600`).
    #[error(
        "{} has mode {mode:04o}, open to others than its owner, and the store cannot make it owner-only: run `chmod 600` on it as its owner",
        path.display()
    )]
    NotOwnerOnly {
        /// The file.
        path: std::path::PathBuf,
        /// Its mode (permission bits).
        mode: u32,
        /// Why its mode could not be changed.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// An option has a value the store cannot use.
    #[error("store option {option}: {reason}")]
    BadOption {
        /// The option.
        option: &'static str,
        /// What is wrong with its value.
        reason: String,
    },
    /// The database holds a newer schema than this build knows: an older binary must not
    /// write to it. Upgrade tooltrust-store.
    #[error(
        "the store's schema is version {found}, newer than the version {supported} this build knows; upgrade tooltrust"
    )]
    SchemaTooNew {
        /// The newest version the database holds.
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },
    /// A migration recorded as applied differs from the one this build carries: the
    /// schema was changed by hand or by a different build.
    #[error(
        "schema version {version} in the database was applied from different SQL than this build's (recorded {recorded}, expected {expected})"
    )]
    SchemaAltered {
        /// The version whose record differs.
        version: i64,
        /// The checksum recorded in the database.
        recorded: String,
        /// The checksum of this build's migration.
        expected: String,
    },
    /// The database (or the disk under it) is full; the operation was not recorded.
    #[error("the database is full: cannot {op}")]
    Full {
        /// What the store was doing.
        op: &'static str,
        /// The database's error.
        #[source]
        source: Arc<sqlx::Error>,
    },
    /// Another writer held the database for longer than the busy timeout (SQLite).
    #[error("the database stayed locked by another writer: cannot {op}")]
    Busy {
        /// What the store was doing.
        op: &'static str,
        /// The database's error.
        #[source]
        source: Arc<sqlx::Error>,
    },
    /// The database cannot be reached (connection refused or lost, pool timed out).
    /// Nothing was committed; the next operation reconnects.
    #[error("cannot reach the database: cannot {op}")]
    Unavailable {
        /// What the store was doing.
        op: &'static str,
        /// The connection's error.
        #[source]
        source: Arc<sqlx::Error>,
    },
    /// The connection failed while committing: the transaction may or may not have
    /// been committed. Its entries, if committed, are well-formed and chained; check the
    /// chain before acting again (retrying blindly could record the event twice).
    #[error("the connection failed while committing ({op}): the outcome is unknown")]
    CommitUnknown {
        /// What the store was doing.
        op: &'static str,
        /// The connection's error.
        #[source]
        source: Arc<sqlx::Error>,
    },
    /// Any other database error.
    #[error("database error: cannot {op}")]
    Database {
        /// What the store was doing.
        op: &'static str,
        /// The database's error.
        #[source]
        source: Arc<sqlx::Error>,
    },
    /// A row read back is not something the store wrote (edited by hand, or damaged).
    #[error("{table} row {key}: {reason}")]
    CorruptRow {
        /// The table.
        table: &'static str,
        /// The row's key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A tenant's chain does not end where its head row says: an entry was deleted or
    /// edited, or the head row was. Appends to it are refused until it is repaired;
    /// `tooltrust audit verify` names the first bad entry.
    #[error("the audit chain of tenant {tenant} is damaged at seq {seq}: {reason}")]
    ChainDamaged {
        /// The tenant.
        tenant: Id,
        /// The seq where the damage shows.
        seq: u64,
        /// What is wrong.
        reason: String,
    },
    /// The chain holds 2^53 entries, the most that canonical JSON numbers count exactly.
    #[error("the audit chain of tenant {0} is full (seq 2^53)")]
    ChainFull(Id),
    /// The event was refused; nothing was written.
    #[error("audit event refused: {0}")]
    Event(#[from] EventError),
    /// The event is one the review queue writes itself, in the transaction that changes
    /// the call: appended by hand it could vouch for an approval no one gave.
    #[error("audit event refused: `{0}` entries are written by the review queue alone")]
    ReservedEvent(String),
    /// The store's background task is gone (its runtime was shut down).
    #[error("the store is closed")]
    Closed,
    /// The store could not start its own thread or runtime.
    #[error("cannot {op}")]
    Io {
        /// What failed.
        op: &'static str,
        /// The operating system's error.
        #[source]
        source: Arc<std::io::Error>,
    },
}

/// Why a call could not be held.
#[derive(Debug, Clone, thiserror::Error)]
pub enum HoldError {
    /// A call with this id is already held.
    #[error("a call with id {0} is already held")]
    Duplicate(Id),
    /// The record is not a fresh held call (its status or decision fields are set):
    /// a call enters the queue undecided.
    #[error("call {0} is not a fresh held call: hold it with status held and no decision")]
    NotHeld(Id),
    /// `args` is not the canonical JSON text of an object.
    #[error("call {id}: args must be the RFC 8785 canonical text of a JSON object: {reason}")]
    BadArgs {
        /// The call.
        id: Id,
        /// What is wrong.
        reason: String,
    },
    /// `checksum` is not the checksum of `{"args": args, "tool": tool}`.
    #[error("call {id}: its checksum does not match its tool and arguments (computed {computed})")]
    ChecksumMismatch {
        /// The call.
        id: Id,
        /// The checksum of the tool and arguments.
        computed: String,
    },
    /// `declaration` is given but is not the JSON text of an object.
    #[error("call {0}: its declaration must be the JSON text of an object")]
    BadDeclaration(Id),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why a decision was refused. A refused decision changes nothing.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DecideError {
    /// No call has this id.
    #[error("no held call has id {0}")]
    UnknownCall(Id),
    /// The call was decided already (or has run).
    #[error("call {id} was already decided: it is {status}")]
    AlreadyDecided {
        /// The call.
        id: Id,
        /// Its status.
        status: HeldStatus,
    },
    /// The reviewer is the author of the scope that made the call (separation of
    /// powers: the author can never decide on its own scope's calls).
    #[error(
        "{reviewer} is the author of scope {scope}, which made call {id}: the author cannot decide"
    )]
    AuthorCannotDecide {
        /// The call.
        id: Id,
        /// The scope that made it.
        scope: Id,
        /// The reviewer, who is its author.
        reviewer: Id,
    },
    /// The call expired before anyone decided it: it never runs.
    #[error("call {id} expired at {expired_at} before it was decided: it never runs")]
    Expired {
        /// The call.
        id: Id,
        /// When it expired.
        expired_at: String,
    },
    /// The decision is not one a known reviewer signed for this call and tenant: without
    /// a reviewer's private key, nothing is decided.
    #[error("the decision on call {id} does not count: {reason}")]
    Unauthorized {
        /// The call.
        id: Id,
        /// Why the signature or statement was refused.
        reason: tooltrust::held::DecisionError,
    },
    /// The call's row exists, but the audit chain holds no record of its hold: the row
    /// was written outside the review queue.
    #[error("call {0} was never recorded as held in the audit chain: refused")]
    NeverHeld(Id),
    /// A decision needs a reason.
    #[error("a decision needs a reason")]
    NoReason,
    /// The reason is longer than the chain keeps.
    #[error("the reason is {len} bytes; a decision's reason is at most {max} bytes")]
    ReasonTooLong {
        /// Its length.
        len: usize,
        /// [`MAX_REASON_BYTES`](crate::MAX_REASON_BYTES).
        max: usize,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why a call could not be claimed to run (or its end recorded). A refused claim
/// spends nothing.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ClaimError {
    /// No call has this id.
    #[error("no held call has id {0}")]
    UnknownCall(Id),
    /// The call is not approved (still held, or rejected).
    #[error("call {id} is {status}, not approved: it may not run")]
    NotApproved {
        /// The call.
        id: Id,
        /// Its status.
        status: HeldStatus,
    },
    /// The call was claimed before: it runs once.
    #[error("call {id} is {status}: it was already claimed to run")]
    AlreadyClaimed {
        /// The call.
        id: Id,
        /// Its status.
        status: HeldStatus,
    },
    /// The approval is bound to another tenant, scope, tool, checksum or upstream than
    /// the call about to run.
    #[error(
        "the approval of call {id} is bound to another {field}: it cannot be spent on this call"
    )]
    BindingMismatch {
        /// The call.
        id: Id,
        /// The first field that differs.
        field: &'static str,
    },
    /// The approval expired before it was claimed: the call never runs.
    #[error("the approval of call {id} expired at {expired_at}: it never runs")]
    Expired {
        /// The call.
        id: Id,
        /// When it expired.
        expired_at: String,
    },
    /// The row says approved, but the chain holds no decision that approved this call
    /// with this checksum: the row was changed outside the store. Refused and recorded.
    #[error(
        "call {0} reads approved, but the audit chain holds no decision approving it: the row was changed outside the review queue; refused"
    )]
    NoRecordedApproval(Id),
    /// The approving decision in the chain does not carry a signature of a reviewer
    /// this host trusts for the call's tenant, or does not match the call's hold.
    #[error("the approval of call {id} does not count: {reason}")]
    Unauthorized {
        /// The call.
        id: Id,
        /// Why the signed decision was refused.
        reason: tooltrust::held::DecisionError,
    },
    /// Another transition of the lifecycle was refused.
    #[error("call {id}: {reason}")]
    Refused {
        /// The call.
        id: Id,
        /// Why.
        reason: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why waiting for a decision ended without one.
#[derive(Debug, Clone, thiserror::Error)]
pub enum WaitError {
    /// No call has this id.
    #[error("no held call has id {0}")]
    UnknownCall(Id),
    /// The call was still held, undecided, when the wait's time ran out.
    #[error("call {0} is still held, undecided")]
    TimedOut(Id),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why a conversation could not be saved.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ConversationError {
    /// Someone else saved the conversation since the revision the caller expected.
    #[error(
        "conversation {id} is at revision {found}, not {expected}: reload it and continue from there"
    )]
    RevisionConflict {
        /// The conversation.
        id: Id,
        /// The revision the caller expected (0: a new conversation).
        expected: u64,
        /// The revision the store holds.
        found: u64,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why a chain did not verify, or could not be read.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ChainError {
    /// The chain is not intact: the first bad entry and why.
    #[error("{0}")]
    Invalid(#[source] VerifyError),
    /// The chain holds entries but no head row.
    #[error("the chain of tenant {0} has entries but no head row")]
    HeadMissing(Id),
    /// The chain holds entries past its head row (which every append moves in the same
    /// transaction): the head row was set back.
    #[error(
        "the chain of tenant {tenant} holds entries up to seq {last}, past its head row at seq {head}"
    )]
    PastHead {
        /// The tenant.
        tenant: Id,
        /// The head row's seq.
        head: u64,
        /// The last entry's seq.
        last: u64,
    },
    /// A held call's row stands where the chain never took it (set to approved, ran or
    /// claimed by hand, say): it was written around the review queue.
    #[error(
        "held call {call} of tenant {tenant} is {row} in its row, which the chain does not explain (the chain leaves it {})",
        chain.map_or("unrecorded".to_owned(), |status| status.to_string())
    )]
    RowUnexplained {
        /// The tenant.
        tenant: Id,
        /// The held call.
        call: String,
        /// Its row's status.
        row: String,
        /// Where the chain leaves it, if anywhere.
        chain: Option<HeldStatus>,
    },
    /// A held call's row binds another scope, tool, checksum, upstream or expiry than the
    /// chain recorded when it was held: it was rewritten around the review queue.
    #[error(
        "held call {call} of tenant {tenant}: its row's {field} is not what the chain recorded when it was held"
    )]
    RowRebound {
        /// The tenant.
        tenant: Id,
        /// The held call.
        call: String,
        /// The first field that differs.
        field: &'static str,
    },
    /// The store failed while reading.
    #[error(transparent)]
    Store(#[from] StoreError),
}
