//! The console's routes behind the guard, their handlers grouped by page: the queue,
//! one held call (shown, decided, its quarantined outputs decrypted), the audit chain,
//! live updates, sign-in, and the embedded assets.

mod assets;
mod audit;
mod call;
mod live;
mod queue;
mod sign_in;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::Uri;
use axum::middleware;
use axum::routing::{get, post};
use tooltrust::Id;

use crate::app::App;
use crate::error::ConsoleError;
use crate::guard::guard;
use crate::pages::Frame;
use crate::viewer::Viewer;

/// How many queue entries and chain entries a page shows.
const PAGE: u32 = 200;

/// How long a request's body may take to arrive.
const BODY_WAIT: Duration = Duration::from_secs(10);

/// The routes, behind the guards.
pub(crate) fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(queue::queue))
        .route("/calls/{id}", get(call::show_call))
        .route("/calls/{id}/decide", post(call::decide))
        .route("/calls/{id}/decrypt", post(call::decrypt))
        .route("/audit", get(audit::audit))
        .route("/audit/verify", get(audit::verify))
        .route("/events", get(live::events))
        .route("/login", get(sign_in::login_page).post(sign_in::login))
        .route("/logout", post(sign_in::logout))
        .route("/assets/console.css", get(assets::css))
        .route("/assets/console.js", get(assets::js))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(app.clone(), guard))
        // A body that does not arrive in time does not hold its connection.
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(BODY_WAIT))
        .with_state(app)
}

async fn not_found() -> ConsoleError {
    ConsoleError::not_found("no such page")
}

/// The frame of a page the viewer sees; `live` is the page's own address, which live
/// updates read again when the queue changes.
async fn frame<'a>(
    app: &App,
    title: &'a str,
    viewer: &'a Viewer,
    csrf: &'a str,
    live: String,
) -> Frame<'a> {
    // The mark is read before the page's content, so a change in between shows as a
    // new mark, never as none; it is the mark of the viewer's tenants only.
    let mark = app.mark(viewer.tenants.as_deref()).await;
    Frame {
        title,
        viewer: Some(&viewer.id),
        csrf: Some(csrf),
        session: viewer.session.is_some(),
        live: mark.map(|mark| (live, mark)),
    }
}

/// The page's own address for live updates: its path and query only, whatever form
/// the request line took.
fn own_address(uri: &Uri) -> String {
    uri.path_and_query()
        .map_or_else(|| "/".to_owned(), |at| at.as_str().to_owned())
}

/// An optional id from a form or query field (empty: none).
fn optional_id(text: &str, what: &str) -> Result<Option<Id>, ConsoleError> {
    if text.is_empty() {
        return Ok(None);
    }
    Id::new(text)
        .map(Some)
        .map_err(|e| ConsoleError::BadRequest(format!("{what} {text:?} is not an id: {e}")))
}

/// Refused unless the viewer reviews `tenant`.
fn may(viewer: &Viewer, tenant: &Id) -> Result<(), ConsoleError> {
    if viewer.may(tenant) {
        Ok(())
    } else {
        Err(ConsoleError::OtherTenant(tenant.clone()))
    }
}
