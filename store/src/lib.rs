//! tooltrust-store: the durable review queue, quarantine, conversations and audit chain
//! of tooltrust, on SQLite (embedded, one file, zero setup) or PostgreSQL (a fleet of
//! agent processes on many hosts sharing one queue and one chain per tenant).
//!
//! - [`Store`] opens either engine from a [`Location`] (`sqlite:PATH` or a
//!   `postgres://` URL, as `TOOLTRUST_STORE` names it), applies the embedded schema
//!   migrations, and offers every operation, async.
//! - The audit chain ([`Store::append`], [`Store::verify_chain`]) holds entries in the
//!   file log's exact format (`tooltrust::audit`), one chain per tenant, serialised by
//!   the database and group-committed within a process. [`StoreRecorder`] records the
//!   runtime's events into it from synchronous code; [`Store::chain_entries`] reads it
//!   back, newest first, searched.
//! - The review queue ([`Store::hold`], [`Store::list`], [`Store::decide`],
//!   [`Store::claim_to_run`], [`Store::wait_decision`]) holds calls for a person,
//!   enforces separation of powers, records every decision in the chain, and lets an
//!   approved call run exactly once.
//! - Quarantine ([`Store::put_sealed`], [`Store::get_sealed`]) keeps the runtime's
//!   sealed bytes, never plaintext; conversations ([`Store::save_conversation`],
//!   [`Store::load_conversation`]) keep the agent's JSON with a revision.
//!
//! Both engines run through one code path (sqlx's `Any` driver), so every behaviour is
//! written and tested once.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod appender;
mod approved;
mod chain;
mod clock;
mod conversation;
mod engine;
mod entries;
mod error;
mod event;
mod location;
mod options;
mod pending;
mod quarantine;
mod recorder;
mod reviewers;
mod schema;
mod store;
mod transition;

pub use approved::RunApprovedError;
pub use conversation::Conversation;
pub use engine::Engine;
pub use entries::{ChainEntry, EntryFilter};
pub use error::{
    ChainError, ClaimError, ConversationError, DecideError, HoldError, StoreError, WaitError,
};
pub use event::StoreEvent;
pub use location::{Location, LocationError, STORE_ENV};
pub use options::{StoreOptions, default_tenant};
pub use pending::{ListFilter, MAX_REASON_BYTES, WaitOptions};
pub use quarantine::SealedCopy;
pub use recorder::StoreRecorder;
pub use reviewers::{REVIEWERS_ENV, ReviewersFileError, parse_reviewers, read_reviewers};
pub use schema::SCHEMA_VERSION;
pub use store::Store;
pub use tooltrust::held::{Binding, HeldCall, HeldStatus, StatusParseError};
