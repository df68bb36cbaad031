//! The tamper-evident audit log: every boundary decision, as a hash chain of JSON
//! lines in a directory the host chooses.
//!
//! - [`AuditLog`] appends events durably (with group commit), keeps a head record and
//!   recovers from a crash without losing or inventing an acknowledged entry.
//! - [`verify`] checks a log file, alone or against a pinned [`Head`], and names the
//!   first bad `seq`.
//! - [`EntryReader`] reads entries back, checked, one by one.
//! - [`Storage`] is the I/O the log performs; [`FileStorage`] is the real one.
//!
//! The log stores what it is given: events must never carry keys or quarantined
//! plaintext.

mod entry;
mod head;
mod log;
mod provenance;
mod storage;
mod verify;

pub use entry::{
    Body, CHAIN_DOMAIN, Entry, EventError, GENESIS, MAX_LINE_BYTES, MAX_SEQ, RESERVED_FIELDS,
    sign_line, signature_verifies,
};
pub use head::{Head, HeadError};
pub use log::{AuditError, AuditLog, AuditOptions, OpenReport, PartialAppend, Receipt, TornTail};
pub use provenance::{OutcomeUnknown, Provenance, ProvenanceFault};
pub use storage::{FileStorage, HEAD_FILE, LOG_FILE, Storage};
pub use verify::{
    EntryReader, VerifyError, VerifyErrorKind, VerifyReport, Writers, verify, verify_signed,
};
