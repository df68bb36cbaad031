//! The console's state, shared by every request: the store, who may review, the CSRF
//! key, the signed-in sessions, the rate limits, and the queue's marks that live views
//! share (the whole queue's, and each restricted reviewer's tenants').

use std::collections::HashMap;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tooltrust::Id;
use tooltrust::quarantine::Kek;
use tooltrust_store::{HeldStatus, ListFilter, Store, StoreError};

use crate::access::Credentials;
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

/// How many calls of each open status a restricted reviewer's mark reads (a transition
/// of an older one goes unannounced until the next one that is seen).
const MARK_CALLS: u32 = 200;

/// The statuses a call leaves by a transition: every change of a call's status is one
/// of these sets losing it (a hold adds to `held`).
const OPEN: [HeldStatus; 3] = [HeldStatus::Held, HeldStatus::Approved, HeldStatus::Claimed];

/// A restricted reviewer's mark, and the whole queue's mark it was read under.
struct TenantsMark {
    whole: String,
    at: Instant,
    mark: Option<String>,
}

/// The console's state, shared by every request.
pub(crate) struct App {
    pub(crate) store: Store,
    /// Who may review: the credentials file's reviewers, or the one reviewer and the
    /// token the console drew for them.
    pub(crate) credentials: Credentials,
    /// A console for one reviewer, who signs in with its token only.
    pub(crate) single: bool,
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
    /// The port it listens on (its cookie's name on plain HTTP, where a browser shares
    /// cookies between every port of a host).
    pub(crate) port: u16,
    pub(crate) kek: Option<Kek>,
    /// The reviewers' signing keys.
    pub(crate) keys: crate::keys::ReviewerKeys,
    /// How often live views look at the queue.
    pub(crate) poll: Duration,
    /// The queue's mark as last read, and when: every live view shares one read per poll.
    mark: tokio::sync::Mutex<Option<(Instant, Option<String>)>>,
    /// Each restricted reviewer's mark, by their tenants (sorted): read again only when
    /// the whole queue's mark has changed.
    tenant_marks: tokio::sync::Mutex<HashMap<Vec<Id>, TenantsMark>>,
}

impl App {
    pub(crate) fn new(
        store: Store,
        credentials: Credentials,
        single: bool,
        decisions_per_minute: u32,
        tls: bool,
        kek: Option<Kek>,
    ) -> Result<App, getrandom::Error> {
        Ok(App {
            store,
            credentials,
            single,
            csrf: CsrfKey::generate()?,
            sessions: Sessions::default(),
            decisions: Limiter::new(decisions_per_minute),
            logins: Limiter::new(LOGINS_PER_NAME),
            logins_all: Limiter::new(LOGINS_IN_ALL),
            wrong_bearers: Limiter::new(WRONG_BEARERS),
            verifies: Limiter::new(VERIFIES_PER_MINUTE),
            hosts: None,
            tls,
            port: 0,
            kek,
            keys: crate::keys::ReviewerKeys::new(),
            poll: Duration::from_secs(1),
            mark: tokio::sync::Mutex::new(None),
            tenant_marks: tokio::sync::Mutex::new(HashMap::new()),
        })
    }

    /// The session cookie's name: under TLS with the `__Host-` prefix, which browsers
    /// accept only from a secure origin, for the whole site, for this host alone; on
    /// plain HTTP with the port, so that two consoles on one host do not sign each other
    /// out.
    pub(crate) fn cookie_name(&self) -> String {
        if self.tls {
            TLS_COOKIE.to_owned()
        } else {
            format!("{COOKIE}_{}", self.port)
        }
    }

    /// The mark of the calls a viewer of `tenants` (`None`: every tenant) reviews: it
    /// changes when one of their calls is held or changes status, and only then. A
    /// reviewer limited to some tenants learns nothing of the others' activity from it.
    pub(crate) async fn mark(&self, tenants: Option<&[Id]>) -> Option<String> {
        let whole = self.whole_mark().await?;
        let Some(tenants) = tenants else {
            return Some(whole);
        };
        let mut key = tenants.to_vec();
        key.sort();
        key.dedup();
        let mut marks = self.tenant_marks.lock().await;
        // Nothing changed anywhere, nothing changed for them. (A failed read is tried
        // again after a poll interval, not once per page.)
        if let Some(known) = marks.get(&key)
            && known.whole == whole
            && (known.mark.is_some() || known.at.elapsed() < self.poll)
        {
            return known.mark.clone();
        }
        let read = tokio::time::timeout(MARK_WAIT, self.tenants_mark(&key)).await;
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
        marks.insert(
            key,
            TenantsMark {
                whole,
                at: Instant::now(),
                mark: mark.clone(),
            },
        );
        mark
    }

    /// A digest of the calls of `tenants` alone: the newest, and the ids in each status
    /// a transition leaves (held, approved, claimed). A hold adds the newest call (and a
    /// held one); every decision, expiry, claim and run takes a call out of one of the
    /// sets. Read with the store's listing, restricted to `tenants` as the queue is.
    async fn tenants_mark(&self, tenants: &[Id]) -> Result<String, StoreError> {
        let filter = |status: Option<HeldStatus>, limit: u32| ListFilter {
            status,
            tenants: Some(tenants.to_vec()),
            limit: Some(limit),
            ..ListFilter::default()
        };
        let mut digest = Sha256::new();
        digest.update(b"tooltrust/console/mark/v1\0");
        for call in self.store.list(&filter(None, 1)).await? {
            digest.update(format!("newest {} {}\0", call.id, call.created_at).as_bytes());
        }
        for status in OPEN {
            digest.update(format!("{}\0", status.as_str()).as_bytes());
            for call in self.store.list(&filter(Some(status), MARK_CALLS)).await? {
                digest.update(format!("{}\0", call.id).as_bytes());
            }
        }
        let bytes = digest.finalize();
        Ok(bytes[..16].iter().map(|b| format!("{b:02x}")).collect())
    }

    /// The whole queue's mark, read from the store at most once per poll interval (a
    /// failed or slow read too: `None`, logged, until the interval has passed), so that
    /// a struggling store is asked once per interval, not once per page and stream.
    async fn whole_mark(&self) -> Option<String> {
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
