//! The console's routes: the queue, one held call and its decision, the audit chain,
//! live updates, sign-in, and the guards every request passes (host, origin, CSRF,
//! rate limits, security headers).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Extension;
use axum::Router;
use axum::extract::{ConnectInfo, Form, Path, Query, Request, State};
use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use axum::http::{Method, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use futures_util::Stream;
use serde::Deserialize;
use tooltrust::Id;
use tooltrust::quarantine::Kek;
use tooltrust_store::{
    ChainError, DecideError, EntryFilter, HeldStatus, ListFilter, PendingCall, Store, StoreEvent,
};

use crate::access::Access;
use crate::context;
use crate::csrf::{CsrfKey, random_hex};
use crate::limits::Limiter;
use crate::pages::{self, AuditView, CallView, Decidable, Frame, Notice, Quarantined, QueueQuery};
use crate::sessions::{COOKIE, SESSION_TTL, Sessions, TLS_COOKIE};

/// Every response's Content-Security-Policy: scripts and styles only from the
/// console's own embedded files, nothing inline, nothing framed, forms only to itself.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
    img-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'";

/// How many queue entries and chain entries a page shows.
const PAGE: u32 = 200;

/// Sign-in attempts per reviewer name, and per address, per minute.
const LOGINS_PER_NAME: u32 = 10;
const LOGINS_IN_ALL: u32 = 60;

/// Wrong bearer tokens one address may send per minute; then none of its tokens is
/// checked (a correct one included) until the minute has passed.
const WRONG_BEARERS: u32 = 60;

/// Chain verifications (each reads the tenant's whole chain) per reviewer per minute.
const VERIFIES_PER_MINUTE: u32 = 10;

/// How long a request's body may take to arrive.
const BODY_WAIT: Duration = Duration::from_secs(10);

/// The longest a page waits for the queue's mark (it then goes without live updates).
const MARK_WAIT: Duration = Duration::from_secs(2);

/// What a client without a session is asked for.
const CHALLENGE: &str = "Bearer realm=\"tooltrust review console\"";

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
    fn cookie_name(&self) -> &'static str {
        if self.tls { TLS_COOKIE } else { COOKIE }
    }

    /// The queue's mark, read from the store at most once per poll interval (a failed
    /// or slow read too: `None`, logged, until the interval has passed), so that a
    /// struggling store is asked once per interval, not once per page and stream.
    async fn mark(&self) -> Option<String> {
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

/// The routes, behind the guards.
pub(crate) fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(queue))
        .route("/calls/{id}", get(show_call))
        .route("/calls/{id}/decide", post(decide))
        .route("/calls/{id}/decrypt", post(decrypt))
        .route("/audit", get(audit))
        .route("/audit/verify", get(verify))
        .route("/events", get(events))
        .route("/login", get(login_page).post(login))
        .route("/logout", post(logout))
        .route("/assets/console.css", get(css))
        .route("/assets/console.js", get(js))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(app.clone(), guard))
        // A body that does not arrive in time does not hold its connection.
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(BODY_WAIT))
        .with_state(app)
}

/// The address a request came from, as the limiters key it ("unknown" when the server
/// did not say).
#[derive(Debug, Clone)]
pub(crate) struct Client(pub(crate) String);

/// Who is looking, and what binds their CSRF token.
struct Viewer {
    id: Id,
    binding: String,
    session: bool,
    /// The tenants whose calls the viewer reaches; `None`: every tenant.
    tenants: Option<Vec<Id>>,
}

impl Viewer {
    /// Whether the viewer reaches `tenant`'s calls, outputs and chain.
    fn may(&self, tenant: &Id) -> bool {
        self.tenants
            .as_ref()
            .is_none_or(|tenants| tenants.contains(tenant))
    }
}

impl App {
    fn viewer(&self, headers: &HeaderMap) -> Option<Viewer> {
        match &self.access {
            Access::Reviewer(id) => Some(Viewer {
                id: id.clone(),
                binding: format!("reviewer:{id}"),
                session: false,
                tenants: None,
            }),
            Access::Credentials(credentials) => {
                if let Some(token) = bearer(headers) {
                    // A wrong token is not a session: no fallback to the cookie. (The
                    // guard has already refused an address with too many wrong ones.)
                    return credentials.token_holder(token).map(|id| Viewer {
                        id: id.clone(),
                        binding: format!("bearer:{id}"),
                        session: false,
                        tenants: credentials.tenants_of(id).map(<[Id]>::to_vec),
                    });
                }
                let session = cookie(headers, self.cookie_name())?;
                let id = self.sessions.reviewer(&session)?;
                Some(Viewer {
                    tenants: credentials.tenants_of(&id).map(<[Id]>::to_vec),
                    id,
                    binding: format!("session:{session}"),
                    session: true,
                })
            }
        }
    }

    /// The frame of a page the viewer sees; `live` is the page's own address, which
    /// live updates read again when the queue changes.
    async fn frame<'a>(
        &self,
        title: &'a str,
        viewer: &'a Viewer,
        csrf: &'a str,
        live: String,
    ) -> Frame<'a> {
        // The mark is read before the page's content, so a change in between shows
        // as a new mark, never as none.
        let mark = self.mark().await;
        Frame {
            title,
            viewer: Some(&viewer.id),
            csrf: Some(csrf),
            session: viewer.session,
            live: mark.map(|mark| (live, mark)),
        }
    }

    /// The viewer, or the response for a request without one: sign in for pages,
    /// 401 for anything else.
    fn require(&self, headers: &HeaderMap, page: bool) -> Result<Viewer, Box<Response>> {
        self.viewer(headers).ok_or_else(|| {
            Box::new(if page {
                Redirect::to("/login").into_response()
            } else {
                let mut response = refusal(
                    StatusCode::UNAUTHORIZED,
                    "sign in first (or send Authorization: Bearer TOKEN)",
                );
                if matches!(self.access, Access::Credentials(_)) {
                    response.headers_mut().insert(
                        header::WWW_AUTHENTICATE,
                        HeaderValue::from_static(CHALLENGE),
                    );
                }
                response
            })
        })
    }

    /// The viewer of a state-changing request, whose form must carry their CSRF token.
    fn require_post(
        &self,
        headers: &HeaderMap,
        token: Option<&str>,
    ) -> Result<Viewer, Box<Response>> {
        let viewer = self.require(headers, false)?;
        if self.csrf.check(&viewer.binding, token.unwrap_or("")) {
            Ok(viewer)
        } else {
            Err(Box::new(refusal(
                StatusCode::FORBIDDEN,
                "the form's CSRF token is missing or wrong: reload the page and try again",
            )))
        }
    }
}

fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.to_owned())
}

fn html(status: StatusCode, markup: maud::Markup) -> Response {
    (status, Html(markup.into_string())).into_response()
}

/// A refusal as a page of its own.
fn refusal(status: StatusCode, text: &str) -> Response {
    html(
        status,
        pages::page(&Frame::bare("Refused"), pages::problem(text)),
    )
}

async fn not_found() -> Response {
    refusal(StatusCode::NOT_FOUND, "no such page")
}

/// A store failure: logged whole for the operator, named only vaguely to the browser
/// (its text may hold a database's address or a row's contents).
fn store_failed(error: &dyn std::error::Error) -> Response {
    tracing::warn!(error = %error, "the console's store failed");
    refusal(
        StatusCode::SERVICE_UNAVAILABLE,
        "the store did not answer as expected; try again (the console's log says more)",
    )
}

/// The page's own address for live updates: its path and query only, whatever form
/// the request line took.
fn own_address(uri: &Uri) -> String {
    uri.path_and_query()
        .map_or_else(|| "/".to_owned(), |at| at.as_str().to_owned())
}

/// A 429 that says how long to wait (`{}` in `text` is the number of seconds), in its
/// text and in `Retry-After`.
fn too_many(wait: Duration, text: &str) -> Response {
    let seconds = wait.as_secs().max(1).to_string();
    let mut response = refusal(
        StatusCode::TOO_MANY_REQUESTS,
        &text.replacen("{}", &seconds, 1),
    );
    if let Ok(value) = HeaderValue::from_str(&seconds) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

/// An optional id from a form or query field (empty: none).
fn optional_id(text: &str, what: &str) -> Result<Option<Id>, Box<Response>> {
    if text.is_empty() {
        return Ok(None);
    }
    Id::new(text).map(Some).map_err(|e| {
        Box::new(refusal(
            StatusCode::BAD_REQUEST,
            &format!("{what} {text:?} is not an id: {e}"),
        ))
    })
}

async fn queue(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    uri: Uri,
    Query(query): Query<QueueQuery>,
) -> Response {
    let viewer = match app.require(&headers, true) {
        Ok(viewer) => viewer,
        Err(response) => return *response,
    };
    let status = match query.status.as_str() {
        "" => None,
        text => match text.parse::<HeldStatus>() {
            Ok(status) => Some(status),
            Err(e) => return refusal(StatusCode::BAD_REQUEST, &e.to_string()),
        },
    };
    let (scope, tenant, before) = match (
        optional_id(&query.scope, "scope"),
        optional_id(&query.tenant, "tenant"),
        optional_id(&query.before, "before"),
    ) {
        (Ok(scope), Ok(tenant), Ok(before)) => (scope, tenant, before),
        (Err(response), _, _) | (_, Err(response), _) | (_, _, Err(response)) => {
            return *response;
        }
    };
    if let Some(tenant) = &tenant
        && !viewer.may(tenant)
    {
        return refusal(
            StatusCode::FORBIDDEN,
            &format!("you do not review the calls of tenant {tenant}"),
        );
    }
    let csrf = app.csrf.token(&viewer.binding);
    let frame = app.frame("Queue", &viewer, &csrf, own_address(&uri)).await;
    let filter = ListFilter {
        status,
        tool: (!query.tool.is_empty()).then(|| query.tool.clone()),
        scope,
        tenant,
        tenants: viewer.tenants.clone(),
        before,
        limit: Some(PAGE),
    };
    let calls = match app.store.list(&filter).await {
        Ok(calls) => calls,
        Err(error) => return store_failed(&error),
    };
    let older = (calls.len() == PAGE as usize)
        .then(|| calls.last().map(|call| &call.id))
        .flatten();
    html(
        StatusCode::OK,
        pages::page(&frame, pages::queue(&query, &calls, older)),
    )
}

#[derive(Debug, Default, Deserialize)]
struct CallQuery {
    #[serde(default)]
    done: String,
}

async fn show_call(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(query): Query<CallQuery>,
) -> Response {
    let viewer = match app.require(&headers, true) {
        Ok(viewer) => viewer,
        Err(response) => return *response,
    };
    let extras = Extras {
        done: Some(query.done.as_str()),
        ..Extras::default()
    };
    call_page(&app, &viewer, &id, StatusCode::OK, extras).await
}

/// What a call page shows besides the call.
#[derive(Default)]
struct Extras<'a> {
    /// The decision the viewer was just redirected from (`?done=`): said only when the
    /// call is decided that way, by them.
    done: Option<&'a str>,
    /// What just happened, or why the last action was refused.
    notice: Option<Notice>,
    /// A quarantined output (key, reader) just opened, or why it did not open.
    opened: Option<(Id, Id, Result<String, String>)>,
}

/// The page of call `id`, with what else it shows.
async fn call_page(
    app: &App,
    viewer: &Viewer,
    id: &str,
    status: StatusCode,
    extras: Extras<'_>,
) -> Response {
    let Extras {
        done,
        mut notice,
        opened,
    } = extras;
    let Ok(id) = Id::new(id) else {
        return refusal(StatusCode::NOT_FOUND, "no held call has this id");
    };
    let csrf = app.csrf.token(&viewer.binding);
    let title = format!("Held call {id}");
    let frame = app
        .frame(&title, viewer, &csrf, format!("/calls/{id}"))
        .await;
    let call = match app.store.get(&id).await {
        // Another tenant's call reads as absent: its existence is not the viewer's to learn.
        Ok(Some(call)) if viewer.may(&call.tenant) => call,
        Ok(_) => return refusal(StatusCode::NOT_FOUND, &format!("no held call has id {id}")),
        Err(error) => return store_failed(&error),
    };
    // An approved call the agent has claimed since reads as approved here: the viewer's
    // decision is what the notice speaks of.
    let decision = match call.status {
        HeldStatus::Claimed | HeldStatus::Ran | HeldStatus::Failed => HeldStatus::Approved,
        status => status,
    };
    if let Some(done) = done
        && decision.as_str() == done
        && call.decided_by.as_ref() == Some(&viewer.id)
    {
        notice = Some(Notice {
            refused: false,
            text: format!("You {done} this call; your decision is recorded in the audit chain."),
        });
    }
    let mut quarantined = match quarantined_for(app, &call).await {
        Ok(outputs) => outputs,
        Err(error) => return store_failed(&error),
    };
    if let Some((key, reader, result)) = opened {
        for output in &mut quarantined {
            if output.key == key && output.reader == reader {
                output.opened = Some(result.clone());
            }
        }
    }
    let decidable = if call.status != HeldStatus::Held {
        Decidable::Decided
    } else if call.author == viewer.id {
        Decidable::Author
    } else {
        Decidable::Yes(&csrf)
    };
    let view = CallView {
        call: &call,
        decidable,
        notice,
        context: call.context.as_deref().map(context::show),
        quarantined,
        decrypt: app.kek.as_ref().map(|_| csrf.as_str()),
    };
    html(status, pages::page(&frame, pages::call(&view)))
}

/// The quarantined outputs a held call's reviewer may ask to decrypt: those of its
/// tenant produced by the scope that made it. (Never those its context names: the
/// context holds outsiders' text, which could name another scope's outputs.)
async fn quarantined_for(
    app: &App,
    call: &PendingCall,
) -> Result<Vec<Quarantined>, tooltrust_store::StoreError> {
    let store = app.store.for_tenant(call.tenant.clone());
    Ok(store
        .sealed_by(&call.scope)
        .await?
        .into_iter()
        .map(|(key, reader)| Quarantined {
            key,
            reader,
            target: call.scope.clone(),
            opened: None,
        })
        .collect())
}

#[derive(Debug, Default, Deserialize)]
struct DecideForm {
    csrf: Option<String>,
    verdict: Option<String>,
    reason: Option<String>,
}

async fn decide(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<DecideForm>,
) -> Response {
    let viewer = match app.require_post(&headers, form.csrf.as_deref()) {
        Ok(viewer) => viewer,
        Err(response) => return *response,
    };
    let Ok(call_id) = Id::new(id.as_str()) else {
        return refusal(StatusCode::NOT_FOUND, "no held call has this id");
    };
    let approve = match form.verdict.as_deref() {
        Some("approve") => true,
        Some("reject") => false,
        _ => {
            return refusal(StatusCode::UNPROCESSABLE_ENTITY, "choose approve or reject");
        }
    };
    match app.store.get(&call_id).await {
        Ok(Some(call)) if viewer.may(&call.tenant) => {}
        Ok(_) => return refusal(StatusCode::NOT_FOUND, "no held call has this id"),
        Err(error) => return store_failed(&error),
    }
    if let Err(wait) = app.decisions.take(viewer.id.as_str()) {
        return too_many(
            wait,
            "too many decisions in a minute; wait {} s and decide again",
        );
    }
    let reason = form.reason.unwrap_or_default();
    match app
        .store
        .decide(&call_id, &viewer.id, approve, reason.trim())
        .await
    {
        Ok(decided) => {
            Redirect::to(&format!("/calls/{}?done={}", decided.id, decided.status)).into_response()
        }
        Err(error) => {
            let status = match &error {
                DecideError::UnknownCall(_) => StatusCode::NOT_FOUND,
                DecideError::AlreadyDecided { .. } | DecideError::Expired { .. } => {
                    StatusCode::CONFLICT
                }
                DecideError::AuthorCannotDecide { .. } => StatusCode::FORBIDDEN,
                DecideError::NoReason | DecideError::ReasonTooLong { .. } => {
                    StatusCode::UNPROCESSABLE_ENTITY
                }
                DecideError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
            };
            let text = match &error {
                DecideError::AlreadyDecided { status, .. } => format!(
                    "Someone decided this call first: it is {status}. Your decision was not recorded."
                ),
                DecideError::Store(store) => {
                    tracing::warn!(error = %store, "the console's store failed");
                    "Your decision was not recorded: the store did not answer as expected; try again.".to_owned()
                }
                other => format!("Your decision was refused: {other}."),
            };
            let extras = Extras {
                notice: Some(Notice {
                    refused: true,
                    text,
                }),
                ..Extras::default()
            };
            call_page(&app, &viewer, &id, status, extras).await
        }
    }
}

#[derive(Debug, Default, Deserialize)]
struct DecryptForm {
    csrf: Option<String>,
    key: Option<String>,
    reader: Option<String>,
}

async fn decrypt(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<DecryptForm>,
) -> Response {
    let viewer = match app.require_post(&headers, form.csrf.as_deref()) {
        Ok(viewer) => viewer,
        Err(response) => return *response,
    };
    let Some(kek) = &app.kek else {
        return refusal(
            StatusCode::CONFLICT,
            "this console holds no key-encryption key: start it with --kek-file FILE",
        );
    };
    let (Ok(call_id), Some(Ok(key)), Some(Ok(reader))) = (
        Id::new(id.as_str()),
        form.key.as_deref().map(Id::new),
        form.reader.as_deref().map(Id::new),
    ) else {
        return refusal(StatusCode::NOT_FOUND, "no such quarantined output");
    };
    let call = match app.store.get(&call_id).await {
        Ok(Some(call)) if viewer.may(&call.tenant) => call,
        Ok(_) => return refusal(StatusCode::NOT_FOUND, "no held call has this id"),
        Err(error) => return store_failed(&error),
    };
    let listed = match quarantined_for(&app, &call).await {
        Ok(outputs) => outputs,
        Err(error) => return store_failed(&error),
    };
    let Some(output) = listed
        .into_iter()
        .find(|output| output.key == key && output.reader == reader)
    else {
        return refusal(
            StatusCode::NOT_FOUND,
            "no such quarantined output for this call",
        );
    };
    let store = app.store.for_tenant(call.tenant.clone());
    let copy = match store.get_sealed(&key, &reader).await {
        Ok(Some(copy)) => copy,
        Ok(None) => return refusal(StatusCode::NOT_FOUND, "no such quarantined output"),
        Err(error) => return store_failed(&error),
    };
    // Recorded before anything is shown: a decryption the chain does not hold never happens.
    let event = StoreEvent::QuarantineOpenedForReview {
        call: &call.id,
        key: &key,
        reader: &reader,
        target: &output.target,
        reviewer: &viewer.id,
    };
    if let Err(error) = store.append(&event).await {
        return store_failed(&error);
    }
    let opened =
        tooltrust::quarantine::open_sealed(kek, &copy.sealed, &key, &output.target, &reader)
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .map_err(|e| format!("cannot decrypt: {e}"));
    let extras = Extras {
        opened: Some((key, reader, opened)),
        ..Extras::default()
    };
    call_page(&app, &viewer, &id, StatusCode::OK, extras).await
}

#[derive(Debug, Default, Deserialize)]
struct AuditQuery {
    #[serde(default)]
    tenant: String,
    #[serde(default)]
    q: String,
    before: Option<u64>,
}

async fn audit(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    uri: Uri,
    Query(query): Query<AuditQuery>,
) -> Response {
    audit_page(&app, &headers, uri, &query, false).await
}

async fn verify(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    uri: Uri,
    Query(query): Query<AuditQuery>,
) -> Response {
    audit_page(&app, &headers, uri, &query, true).await
}

async fn audit_page(
    app: &App,
    headers: &HeaderMap,
    uri: Uri,
    query: &AuditQuery,
    verify: bool,
) -> Response {
    let viewer = match app.require(headers, true) {
        Ok(viewer) => viewer,
        Err(response) => return *response,
    };
    if verify && let Err(wait) = app.verifies.take(viewer.id.as_str()) {
        return too_many(
            wait,
            "too many chain verifications in a minute; wait {} s and verify again",
        );
    }
    let tenant = match optional_id(&query.tenant, "tenant") {
        Ok(tenant) => tenant.unwrap_or_else(|| app.store.tenant().clone()),
        Err(response) => return *response,
    };
    if !viewer.may(&tenant) {
        return refusal(
            StatusCode::FORBIDDEN,
            &format!("you do not review the calls of tenant {tenant}"),
        );
    }
    let store = app.store.for_tenant(tenant.clone());
    let verified = if verify {
        Some(match store.verify_chain(None).await {
            Ok(report) => Ok(report),
            Err(ChainError::Invalid(error)) => Err(format!("first bad entry: {error}")),
            Err(error) => {
                tracing::warn!(error = %error, "the console cannot verify the chain");
                Err(
                    "the chain cannot be verified: the store did not answer as expected; \
                     try again (the console's log says more)"
                        .to_owned(),
                )
            }
        })
    } else {
        None
    };
    let filter = EntryFilter {
        contains: (!query.q.is_empty()).then(|| query.q.clone()),
        before: query.before,
        limit: Some(PAGE),
    };
    let entries = match store.chain_entries(&filter).await {
        Ok(entries) => entries,
        Err(error) => return store_failed(&error),
    };
    let older = (entries.len() == PAGE as usize)
        .then(|| entries.last().map(|entry| entry.seq))
        .flatten();
    let view = AuditView {
        tenant: &tenant,
        search: &query.q,
        entries: &entries,
        verified,
        older,
    };
    let csrf = app.csrf.token(&viewer.binding);
    let frame = app
        .frame("Audit chain", &viewer, &csrf, own_address(&uri))
        .await;
    html(StatusCode::OK, pages::page(&frame, pages::audit(&view)))
}

/// Server-sent events: `queue` with the queue's mark, whenever it changes. The stream
/// ends when the viewer's session does.
async fn events(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let viewer = match app.require(&headers, false) {
        Ok(viewer) => viewer,
        Err(response) => return *response,
    };
    let session = viewer
        .session
        .then(|| cookie(&headers, app.cookie_name()))
        .flatten();
    Sse::new(marks(app, session))
        .keep_alive(KeepAlive::default())
        .into_response()
}

fn marks(app: Arc<App>, session: Option<String>) -> impl Stream<Item = Result<Event, Infallible>> {
    let start = (app, session, None::<String>);
    futures_util::stream::unfold(start, |(app, session, last)| async move {
        let mut first = last.is_none();
        loop {
            if !first {
                tokio::time::sleep(app.poll).await;
            }
            first = false;
            if let Some(session) = &session
                && app.sessions.reviewer(session).is_none()
            {
                return None;
            }
            if let Some(mark) = app.mark().await
                && last.as_deref() != Some(mark.as_str())
            {
                let event = Event::default().event("queue").data(mark.clone());
                return Some((Ok(event), (app, session, Some(mark))));
            }
        }
    })
}

#[derive(Debug, Default, Deserialize)]
struct LoginForm {
    reviewer: Option<String>,
    secret: Option<String>,
}

async fn login_page(State(app): State<Arc<App>>) -> Response {
    if matches!(app.access, Access::Reviewer(_)) {
        return Redirect::to("/").into_response();
    }
    let frame = Frame::bare("Sign in");
    html(StatusCode::OK, pages::page(&frame, pages::login(None)))
}

async fn login(
    State(app): State<Arc<App>>,
    Extension(client): Extension<Client>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    let Access::Credentials(credentials) = &app.access else {
        return Redirect::to("/").into_response();
    };
    let reviewer = form.reviewer.unwrap_or_default();
    let secret = form.secret.unwrap_or_default();
    let frame = Frame::bare("Sign in");
    // The address's window first, so the per-name window holds at most its attempts'
    // worth of names; a name that is no id names no reviewer and has none.
    let limited = app
        .logins_all
        .take(&client.0)
        .and_then(|()| match Id::new(&reviewer) {
            Ok(name) => app.logins.take(name.as_str()),
            Err(_) => Ok(()),
        });
    if let Err(wait) = limited {
        let text = format!(
            "too many sign-in attempts; wait {} s",
            wait.as_secs().max(1)
        );
        return html(
            StatusCode::TOO_MANY_REQUESTS,
            pages::page(&frame, pages::login(Some(&text))),
        );
    }
    let credentials = credentials.clone();
    let proved = tokio::task::spawn_blocking(move || credentials.verify(&reviewer, &secret))
        .await
        .ok()
        .flatten();
    let Some(id) = proved else {
        return html(
            StatusCode::UNAUTHORIZED,
            pages::page(
                &frame,
                pages::login(Some("unknown reviewer, or the wrong password or token")),
            ),
        );
    };
    let Ok(session) = random_hex() else {
        return refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "no randomness for a session",
        );
    };
    // Signing in again ends the session the browser had: one cookie, one session.
    if let Some(old) = cookie(&headers, app.cookie_name()) {
        app.sessions.close(&old);
    }
    app.sessions.open(session.clone(), id);
    let cookie = format!(
        "{}={session}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{}",
        app.cookie_name(),
        SESSION_TTL.as_secs(),
        if app.tls { "; Secure" } else { "" }
    );
    let mut response = Redirect::to("/").into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

#[derive(Debug, Default, Deserialize)]
struct LogoutForm {
    csrf: Option<String>,
}

async fn logout(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Form(form): Form<LogoutForm>,
) -> Response {
    if let Err(response) = app.require_post(&headers, form.csrf.as_deref()) {
        return *response;
    }
    if let Some(session) = cookie(&headers, app.cookie_name()) {
        app.sessions.close(&session);
    }
    let mut response = Redirect::to("/login").into_response();
    let expired = format!(
        "{}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{}",
        app.cookie_name(),
        if app.tls { "; Secure" } else { "" }
    );
    if let Ok(value) = HeaderValue::from_str(&expired) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

async fn css() -> Response {
    asset(
        "text/css; charset=utf-8",
        include_str!("../assets/console.css"),
    )
}

async fn js() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("../assets/console.js"),
    )
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// Every request: the Host a loopback console answers to, the origin of a
/// state-changing request; every response: the security headers.
async fn guard(State(app): State<Arc<App>>, mut request: Request, next: Next) -> Response {
    let client = Client(
        request
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map_or_else(|| "unknown".to_owned(), |info| info.0.ip().to_string()),
    );
    request.extensions_mut().insert(client.clone());
    let headers = request.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
        .to_owned();
    if let Some(hosts) = &app.hosts
        && !hosts
            .iter()
            .any(|allowed| allowed.eq_ignore_ascii_case(&host))
    {
        return secured(
            &app,
            refusal(
                StatusCode::MISDIRECTED_REQUEST,
                &format!(
                    "this console answers only to {}",
                    hosts
                        .first()
                        .map(String::as_str)
                        .unwrap_or("its own address")
                ),
            ),
        );
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let scheme = if app.tls { "https" } else { "http" };
        let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
        let cross_site = headers
            .get("sec-fetch-site")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|site| site != "same-origin" && site != "none");
        if origin.is_some_and(|origin| origin != format!("{scheme}://{host}")) || cross_site {
            return secured(
                &app,
                refusal(
                    StatusCode::FORBIDDEN,
                    "a request from another site is refused",
                ),
            );
        }
    }
    if let Access::Credentials(credentials) = &app.access
        && let Some(token) = bearer(headers)
    {
        if let Err(wait) = app.wrong_bearers.check(&client.0) {
            return secured(
                &app,
                too_many(wait, "too many wrong tokens from this address; wait {} s"),
            );
        }
        if credentials.token_holder(token).is_none() {
            let _ = app.wrong_bearers.take(&client.0);
        }
    }
    let response = next.run(request).await;
    secured(&app, response)
}

/// The bearer token a request carries, if any.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim)
}

fn secured(app: &App, mut response: Response) -> Response {
    let headers = response.headers_mut();
    let set = |headers: &mut HeaderMap, name: HeaderName, value: &'static str| {
        headers.insert(name, HeaderValue::from_static(value));
    };
    set(headers, header::CONTENT_SECURITY_POLICY, CSP);
    set(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(headers, header::REFERRER_POLICY, "same-origin");
    set(headers, header::X_FRAME_OPTIONS, "DENY");
    set(headers, header::CACHE_CONTROL, "no-store");
    if app.tls {
        set(
            headers,
            header::STRICT_TRANSPORT_SECURITY,
            "max-age=31536000",
        );
    }
    response
}
