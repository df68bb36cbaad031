//! Signing in and out: with a reviewer's name and password or token (a console with
//! credentials), or with a token alone, which names its holder (the address a console
//! for one reviewer prints, `/login?token=…`, signs in at once). Either way the browser
//! gets a session cookie.

use std::sync::Arc;

use axum::Extension;
use axum::extract::{Form, Query, State};
use axum::http::StatusCode;
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use tooltrust::Id;

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
    /// A token alone (it names its holder), as the sign-in page of a console for one
    /// reviewer asks for it.
    token: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct LoginQuery {
    token: Option<String>,
}

/// What a sign-in presents.
enum Proof {
    /// A bearer token, which names its holder.
    Token(String),
    /// A reviewer's name and their password or token.
    Secret { reviewer: String, secret: String },
}

/// The sign-in page; with `?token=…` (the address a console for one reviewer prints at
/// start-up), the token is exchanged for a session at once.
pub(super) async fn login_page(
    State(app): State<Arc<App>>,
    Extension(client): Extension<Client>,
    headers: HeaderMap,
    Query(query): Query<LoginQuery>,
) -> Result<Response, ConsoleError> {
    match query.token {
        Some(token) => sign_in(&app, &client, &headers, Proof::Token(token)).await,
        None => Ok(login_form(&app, StatusCode::OK, None)),
    }
}

pub(super) async fn login(
    State(app): State<Arc<App>>,
    Extension(client): Extension<Client>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Result<Response, ConsoleError> {
    let proof = match form.token {
        Some(token) => Proof::Token(token),
        None => Proof::Secret {
            reviewer: form.reviewer.unwrap_or_default(),
            secret: form.secret.unwrap_or_default(),
        },
    };
    sign_in(&app, &client, &headers, proof).await
}

/// The sign-in page, with `error` when an attempt failed.
fn login_form(app: &App, status: StatusCode, error: Option<&str>) -> Response {
    let frame = Frame::bare("Sign in");
    pages::response(status, pages::page(&frame, pages::login(error, app.single)))
}

/// Checks `proof` and, if it proves a reviewer, opens their session (the cookie) and
/// sends them to the queue.
async fn sign_in(
    app: &App,
    client: &Client,
    headers: &HeaderMap,
    proof: Proof,
) -> Result<Response, ConsoleError> {
    // The address's window first, so the per-name window holds at most its attempts'
    // worth of names; a name that is no id names no reviewer and has none. The token a
    // console for one reviewer drew (256 bits) cannot be guessed, and its sign-in is not
    // limited: every local user shares the loopback address, and could otherwise keep
    // the reviewer out by filling its window.
    let limited = match &proof {
        Proof::Token(_) if app.single => Ok(()),
        _ => app.logins_all.take(&client.0).and_then(|()| match &proof {
            Proof::Secret { reviewer, .. } => match Id::new(reviewer) {
                Ok(name) => app.logins.take(name.as_str()),
                Err(_) => Ok(()),
            },
            Proof::Token(_) => Ok(()),
        }),
    };
    if let Err(wait) = limited {
        let text = format!(
            "too many sign-in attempts; wait {} s",
            wait.as_secs().max(1)
        );
        return Ok(login_form(app, StatusCode::TOO_MANY_REQUESTS, Some(&text)));
    }
    let proved = match proof {
        // Compared in constant time, with every reviewer's token.
        Proof::Token(token) => app.credentials.token_holder(&token).cloned(),
        Proof::Secret { reviewer, secret } => {
            let credentials = app.credentials.clone();
            tokio::task::spawn_blocking(move || credentials.verify(&reviewer, &secret))
                .await
                .ok()
                .flatten()
        }
    };
    let Some(id) = proved else {
        let text = if app.single {
            "wrong token: open the address the console printed when it started"
        } else {
            "unknown reviewer, or the wrong password or token"
        };
        return Ok(login_form(app, StatusCode::UNAUTHORIZED, Some(text)));
    };
    let session = random_hex().map_err(|_| ConsoleError::NoRandomness)?;
    // Signing in again ends the session the browser had: one cookie, one session.
    let name = app.cookie_name();
    if let Some(old) = cookie(headers, &name) {
        app.sessions.close(&old);
    }
    app.sessions.open(session.clone(), id);
    let cookie = format!(
        "{name}={session}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{}",
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
    if let Some(session) = cookie(&headers, &app.cookie_name()) {
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
