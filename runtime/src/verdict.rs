//! What a review is about and what it concludes: the vocabulary shared by the session's
//! state machine, which acts on verdicts, and by reviewers and judges, which give them.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::id::Id;

/// A verdict: approve or reject, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

/// A reviewer's verdict, with who gave it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewerVerdict {
    /// The reviewer.
    pub reviewer: Id,
    /// The verdict.
    pub verdict: Verdict,
}

/// What a review is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", content = "id", rename_all = "snake_case")]
pub enum Subject {
    /// A tainted scope's quarantined output, by key.
    Output(Id),
    /// A call the gate held for review, by its id.
    Call(Id),
}

/// `output:<key>` or `call:<id>`, as the audit log records it.
impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Subject::Output(key) => write!(f, "output:{key}"),
            Subject::Call(id) => write!(f, "call:{id}"),
        }
    }
}
