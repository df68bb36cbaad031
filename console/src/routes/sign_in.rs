//! Signing in and out, for a console with credentials (a loopback console's reviewer
//! is named at start-up and never signs in).

use std::sync::Arc;

use axum::Extension;
use axum::extract::{Form, State};
use axum::http::StatusCode;
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use tooltrust::Id;

use crate::access::Access;
use crate::app::App;
use crate::csrf::random_hex;
use crate::error::ConsoleError;
use crate::guard::Client;
use crate::pages::{self, Frame};
use crate::sessions::SESSION_TTL;
use crate::viewer::{CsrfForm, Posted, cookie};

#[derive(Debug, Default, Deserialize)]
pub(super) struct LoginForm {
    reviewer: Option<String>,
    secret: Option<String>,
}

pub(super) async fn login_page(State(app): State<Arc<App>>) -> Response {
    if matches!(app.access, Access::Reviewer(_)) {
        return Redirect::to("/").into_response();
    }
    let frame = Frame::bare("Sign in");
    pages::response(StatusCode::OK, pages::page(&frame, pages::login(None)))
}

pub(super) async fn login(
    State(app): State<Arc<App>>,
    Extension(client): Extension<Client>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Result<Response, ConsoleError> {
    let Access::Credentials(credentials) = &app.access else {
        return Ok(Redirect::to("/").into_response());
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
        return Ok(pages::response(
            StatusCode::TOO_MANY_REQUESTS,
            pages::page(&frame, pages::login(Some(&text))),
        ));
    }
    let credentials = credentials.clone();
    let proved = tokio::task::spawn_blocking(move || credentials.verify(&reviewer, &secret))
        .await
        .ok()
        .flatten();
    let Some(id) = proved else {
        return Ok(pages::response(
            StatusCode::UNAUTHORIZED,
            pages::page(
                &frame,
                pages::login(Some("unknown reviewer, or the wrong password or token")),
            ),
        ));
    };
    let session = random_hex().map_err(|_| ConsoleError::NoRandomness)?;
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
    Ok(response)
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct LogoutForm {
    csrf: Option<String>,
}

impl Posted for LogoutForm {
    fn csrf(&self) -> Option<&str> {
        self.csrf.as_deref()
    }
}

pub(super) async fn logout(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    _: CsrfForm<LogoutForm>,
) -> Response {
    // The browser's session cookie ends, whichever credential proved the viewer.
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
