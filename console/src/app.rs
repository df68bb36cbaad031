//! The console's state, shared by every request: the store, who may review, the CSRF
//! key, the signed-in sessions, the rate limits, and the queue's mark that live views
//! share.

use std::time::{Duration, Instant};

use tooltrust::quarantine::Kek;
use tooltrust_store::Store;

use crate::access::Access;
use crate::csrf::CsrfKey;
use crate::limits::Limiter;
use crate::sessions::{COOKIE, Sessions, TLS_COOKIE};

/// Sign-in attempts per reviewer name, and per address, per minute.
const LOGINS_PER_NAME: u32 = 10;
const LOGINS_IN_ALL: u32 = 60;

/// Wrong bearer tokens one address may send per minute; then none of its tokens is
/// checked (a correct one included) until the minute has passed.
const WRONG_BEARERS: u32 = 60;

/// Chain verifications (each reads the tenant's whole chain) per reviewer per minute.
const VERIFIES_PER_MINUTE: u32 = 10;

/// The longest a page waits for the queue's mark (it then goes without live updates).
const MARK_WAIT: Duration = Duration::from_secs(2);

/// The console's state, shared by every request.
pub(crate) struct App {
    pub(crate) store: Store,
    pub(crate) access: Access,
    pub(crate) csrf: CsrfKey,
    pub(crate) sessions: Sessions,
    pub(crate) decisions: Limiter,
    pub(crate) logins: Limiter,
    /// A second window per address, so many names cannot multiply its attempts.
    pub(crate) logins_all: Limiter,
    pub(crate) wrong_bearers: Limiter,
    pub(crate) verifies: Limiter,
    /// The Host headers a loopback console answers to (DNS rebinding); `None`: any.
    pub(crate) hosts: Option<Vec<String>>,
    /// Served over TLS (cookies are `Secure`, origins `https`).
    pub(crate) tls: bool,
    pub(crate) kek: Option<Kek>,
    /// How often live views look at the queue.
    pub(crate) poll: Duration,
    /// The queue's mark as last read, and when: every live view shares one read per poll.
    mark: tokio::sync::Mutex<Option<(Instant, Option<String>)>>,
}

impl App {
    pub(crate) fn new(
        store: Store,
        access: Access,
        decisions_per_minute: u32,
        tls: bool,
        kek: Option<Kek>,
    ) -> Result<App, getrandom::Error> {
        Ok(App {
            store,
            access,
            csrf: CsrfKey::generate()?,
            sessions: Sessions::default(),
            decisions: Limiter::new(decisions_per_minute),
            logins: Limiter::new(LOGINS_PER_NAME),
            logins_all: Limiter::new(LOGINS_IN_ALL),
            wrong_bearers: Limiter::new(WRONG_BEARERS),
            verifies: Limiter::new(VERIFIES_PER_MINUTE),
            hosts: None,
            tls,
            kek,
            poll: Duration::from_secs(1),
            mark: tokio::sync::Mutex::new(None),
        })
    }

    /// The session cookie's name: under TLS with the `__Host-` prefix, which browsers
    /// accept only from a secure origin, for the whole site, for this host alone.
    pub(crate) fn cookie_name(&self) -> &'static str {
        if self.tls { TLS_COOKIE } else { COOKIE }
    }

    /// The queue's mark, read from the store at most once per poll interval (a failed
    /// or slow read too: `None`, logged, until the interval has passed), so that a
    /// struggling store is asked once per interval, not once per page and stream.
    pub(crate) async fn mark(&self) -> Option<String> {
        let mut cached = self.mark.lock().await;
        if let Some((at, mark)) = cached.as_ref()
            && at.elapsed() < self.poll
        {
            return mark.clone();
        }
        let read = tokio::time::timeout(MARK_WAIT, self.store.queue_mark()).await;
        let mark = match read {
            Ok(Ok(mark)) => Some(mark),
            Ok(Err(error)) => {
                tracing::warn!(error = %error, "the console cannot read the queue");
                None
            }
            Err(_) => {
                tracing::warn!("the console's read of the queue timed out");
                None
            }
        };
        *cached = Some((Instant::now(), mark.clone()));
        mark
    }
}
