//! The private keys of the reviewers a console serves: a decision made in the console is
//! signed with its reviewer's key, here, and counts only where the hosts' reviewers file
//! trusts that key. These keys live with the console, never with the agents.

use std::collections::HashMap;
use std::sync::Arc;

use tooltrust::Id;
use tooltrust::signature::SecretKey;

/// Each reviewer's signing key, by reviewer id.
#[derive(Debug, Clone, Default)]
pub struct ReviewerKeys {
    by_id: HashMap<Id, Arc<SecretKey>>,
}

impl ReviewerKeys {
    /// No keys: the console shows the queue, and refuses every decision.
    pub fn new() -> ReviewerKeys {
        ReviewerKeys::default()
    }

    /// Adds `reviewer`'s key (replacing any earlier one).
    pub fn insert(&mut self, reviewer: Id, key: SecretKey) {
        self.by_id.insert(reviewer, Arc::new(key));
    }

    /// `reviewer`'s key, if the console holds it.
    pub fn get(&self, reviewer: &Id) -> Option<&SecretKey> {
        self.by_id.get(reviewer).map(Arc::as_ref)
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}
