//! Quarantine: the output of a tainted scope is held away from its parent, which gets
//! only a handle (status, key, byte count, exit status), never the bytes. The bytes are
//! released only to an assigned reviewer, or to the parent once a judge has promoted
//! the scope; every release is a granted, recorded decryption.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use serde::Serialize;

use crate::event::RecordError;
use crate::id::Id;
use crate::random::RandomError;

#[cfg(feature = "encryption")]
mod store;

#[cfg(feature = "encryption")]
pub use store::{EncryptedStore, Kek, open_sealed, seal};

/// Where a quarantined output stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum QuarantineStatus {
    /// Waiting for a review.
    Pending,
    /// A judge approved it; the scope was promoted.
    Approved,
    /// A judge rejected it; it is never released.
    Rejected,
}

/// How the scope's work ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Exit {
    /// The work completed.
    Success,
    /// The work failed.
    Failure,
}

impl Exit {
    /// `success` or `failure`.
    pub fn as_str(self) -> &'static str {
        match self {
            Exit::Success => "success",
            Exit::Failure => "failure",
        }
    }
}

/// What a parent receives for a tainted child's output: never the bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QuarantineHandle {
    /// The output's key.
    pub key: Id,
    /// The scope that produced it.
    pub target: Id,
    /// Where it stands.
    pub status: QuarantineStatus,
    /// Its size in bytes.
    pub bytes: u64,
    /// How the scope's work ended.
    pub exit: Exit,
}

/// The principal that holds every quarantined output until a review copies it out.
pub(crate) fn custodian() -> Id {
    Id::from_static("quarantine-custodian")
}

/// What the session knows of one quarantined output (never its bytes).
#[derive(Debug, Clone)]
pub(crate) struct Output {
    pub(crate) target: Id,
    pub(crate) status: QuarantineStatus,
    pub(crate) bytes: u64,
    pub(crate) exit: Exit,
    /// Reviewers assigned to it, who may read their copy while it is pending.
    pub(crate) readers: Vec<Id>,
    /// A review is open on it: one at a time, so no verdict overwrites another.
    pub(crate) under_review: bool,
}

impl Output {
    /// A freshly quarantined output of `target`, waiting for review.
    pub(crate) fn pending(target: Id, bytes: u64, exit: Exit) -> Self {
        Output {
            target,
            status: QuarantineStatus::Pending,
            bytes,
            exit,
            readers: Vec::new(),
            under_review: false,
        }
    }

    /// The handle a parent or a host sees for output `key`.
    pub(crate) fn handle(&self, key: &Id) -> QuarantineHandle {
        QuarantineHandle {
            key: key.clone(),
            target: self.target.clone(),
            status: self.status,
            bytes: self.bytes,
            exit: self.exit,
        }
    }

    /// A grant for `reader` to read output `key`, if one holds: for the custodian
    /// (copying for a review or a release), for a reviewer assigned while the output is
    /// pending, and for anyone once it is approved. Nothing else is ever granted.
    pub(crate) fn grant(
        &self,
        key: &Id,
        reader: &Id,
        reason: &'static str,
    ) -> Result<Grant, QuarantineError> {
        let granted = *reader == custodian()
            || self.status == QuarantineStatus::Approved
            || (self.status == QuarantineStatus::Pending && self.readers.contains(reader));
        if granted {
            Ok(Grant::new(key, reader, reason))
        } else {
            Err(QuarantineError::NoGrant {
                key: key.clone(),
                reader: reader.clone(),
            })
        }
    }
}

/// Permission to read one quarantined output, minted only inside the crate (by
/// the rule of `Output::grant`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub(crate) key: Id,
    pub(crate) reader: Id,
    pub(crate) reason: &'static str,
}

impl Grant {
    /// The custodian's grant to read back a block the session let go of.
    pub(crate) fn forgotten(key: &Id) -> Self {
        Grant::new(key, &custodian(), "forgotten block recalled")
    }

    fn new(key: &Id, reader: &Id, reason: &'static str) -> Self {
        Grant {
            key: key.clone(),
            reader: reader.clone(),
            reason,
        }
    }

    /// Why the grant holds.
    pub fn reason(&self) -> &'static str {
        self.reason
    }
}

/// Why quarantine storage failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QuarantineError {
    /// No output is stored under this key for this reader.
    #[error("no quarantined output {key} for reader {reader}")]
    NotFound {
        /// The output's key.
        key: Id,
        /// The reader asked for.
        reader: Id,
    },
    /// The grant is for another output or reader.
    #[error("the grant does not cover output {key} for reader {reader}")]
    GrantMismatch {
        /// The output's key.
        key: Id,
        /// The reader asked for.
        reader: Id,
    },
    /// Nothing grants this reader access: not an assigned reviewer of a pending
    /// output, and the output is not approved.
    #[error("no grant lets {reader} read quarantined output {key}")]
    NoGrant {
        /// The output's key.
        key: Id,
        /// The reader refused.
        reader: Id,
    },
    /// No output is quarantined under this key.
    #[error("no quarantined output {0}")]
    UnknownOutput(Id),
    /// A file operation failed.
    #[error("cannot {op} {}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or directory.
        path: std::path::PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A file in the store's directory is not one the store wrote.
    #[error("{}: not a quarantine store file", .0.display())]
    NotAStoreFile(std::path::PathBuf),
    /// Fresh key material could not be drawn.
    #[error(transparent)]
    Random(#[from] RandomError),
    /// Encryption failed (the cipher refuses only inputs beyond its size limit).
    #[cfg(feature = "encryption")]
    #[error("encryption failed")]
    Encrypt(#[source] chacha20poly1305::Error),
    /// The event that must accompany the operation could not be recorded.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// A store of the host's own (a database, an object store) failed.
    #[error("the quarantine store failed")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
    /// The stored copy is wrapped under another key-encryption key.
    #[error("quarantined output {key} for reader {reader} is under another key-encryption key")]
    WrongKek {
        /// The output's key.
        key: Id,
        /// The reader asked for.
        reader: Id,
    },
    /// The stored copy fails authentication: it was changed, or it belongs to another
    /// output, target scope or reader.
    #[error(
        "quarantined output {key} for reader {reader} fails authentication (changed, or not this output's, target's or reader's copy)"
    )]
    Tampered {
        /// The output's key.
        key: Id,
        /// The reader asked for.
        reader: Id,
    },
}

/// Where quarantined bytes are kept: one copy per (output, reader).
pub trait QuarantineStore: Send + Sync {
    /// Stores `bytes` of output `key` (produced by scope `target`) for `reader`.
    fn put(&self, key: &Id, target: &Id, reader: &Id, bytes: &[u8]) -> Result<(), QuarantineError>;

    /// Reads output `key` for `reader`, under `grant`.
    fn open(
        &self,
        key: &Id,
        target: &Id,
        reader: &Id,
        grant: &Grant,
    ) -> Result<Vec<u8>, QuarantineError>;
}

/// Keeps quarantined bytes in memory (nothing at rest).
#[derive(Debug, Default)]
pub struct MemoryStore {
    copies: Mutex<HashMap<(Id, Id), Vec<u8>>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

impl QuarantineStore for MemoryStore {
    fn put(
        &self,
        key: &Id,
        _target: &Id,
        reader: &Id,
        bytes: &[u8],
    ) -> Result<(), QuarantineError> {
        self.copies
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((key.clone(), reader.clone()), bytes.to_vec());
        Ok(())
    }

    fn open(
        &self,
        key: &Id,
        _target: &Id,
        reader: &Id,
        grant: &Grant,
    ) -> Result<Vec<u8>, QuarantineError> {
        check_grant(key, reader, grant)?;
        self.copies
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(key.clone(), reader.clone()))
            .cloned()
            .ok_or_else(|| QuarantineError::NotFound {
                key: key.clone(),
                reader: reader.clone(),
            })
    }
}

/// Checks that `grant` covers `key` for `reader`.
pub(crate) fn check_grant(key: &Id, reader: &Id, grant: &Grant) -> Result<(), QuarantineError> {
    if grant.key == *key && grant.reader == *reader {
        Ok(())
    } else {
        Err(QuarantineError::GrantMismatch {
            key: key.clone(),
            reader: reader.clone(),
        })
    }
}
