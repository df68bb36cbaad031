//! Quarantine: the output of a tainted scope is held away from its parent, which gets
//! only a handle (status, key, byte count, exit status), never the bytes. The bytes are
//! released only to an assigned reviewer, or to the parent once a judge has promoted
//! the scope; every release is a granted, recorded decryption.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use serde::Serialize;

use crate::id::Id;

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

/// Permission to read one quarantined output, minted only inside the crate: for the
/// custodian when copying for a reviewer, for an assigned reviewer, or for the parent
/// after promotion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub(crate) key: Id,
    pub(crate) reader: Id,
    pub(crate) reason: &'static str,
}

impl Grant {
    pub(crate) fn new(key: &Id, reader: &Id, reason: &'static str) -> Self {
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
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
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
    /// The storage failed.
    #[error("quarantine storage failed: {0}")]
    Storage(String),
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
