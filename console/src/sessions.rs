//! Signed-in reviewers of a console with credentials: a random session id in an
//! HttpOnly, SameSite=Strict cookie, mapped in memory to the reviewer it proves.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use tooltrust::Id;

/// How long a session lasts without being renewed.
pub(crate) const SESSION_TTL: Duration = Duration::from_secs(8 * 60 * 60);

/// The cookie's name on plain HTTP (a loopback console).
pub(crate) const COOKIE: &str = "tooltrust_console";

/// The cookie's name under TLS.
pub(crate) const TLS_COOKIE: &str = "__Host-tooltrust_console";

#[derive(Default)]
pub(crate) struct Sessions {
    live: Mutex<HashMap<String, (Id, Instant)>>,
}

impl Sessions {
    pub(crate) fn open(&self, id: String, reviewer: Id) {
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        live.retain(|_, (_, expires)| *expires > now);
        live.insert(id, (reviewer, now + SESSION_TTL));
    }

    /// The reviewer a live session proves.
    pub(crate) fn reviewer(&self, id: &str) -> Option<Id> {
        let live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        live.get(id)
            .filter(|(_, expires)| *expires > Instant::now())
            .map(|(reviewer, _)| reviewer.clone())
    }

    pub(crate) fn close(&self, id: &str) {
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }
}
