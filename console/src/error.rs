//! Every refusal the console answers with, as one type: a handler, an extractor or
//! the guard returns a [`ConsoleError`], and its response (status, page, headers) is
//! made here alone.

use std::time::Duration;

use axum::extract::rejection::FormRejection;
use axum::http::StatusCode;
use axum::http::header::{self, HeaderValue};
use axum::response::{IntoResponse, Redirect, Response};
use tooltrust::Id;
use tooltrust_store::StoreError;

use crate::pages::{self, Frame};

/// What a client without a session is asked for.
const CHALLENGE: &str = "Bearer realm=\"tooltrust review console\"";

/// Why a request is refused.
#[derive(Debug)]
pub(crate) enum ConsoleError {
    /// A page asked for by someone not signed in: they are sent to sign in.
    SignIn,
    /// Anything else asked for by someone not signed in (a form's post, live updates):
    /// 401, asking for a bearer token.
    Unauthenticated,
    /// A form whose CSRF token is missing or not the viewer's.
    Csrf,
    /// A state-changing request from another site.
    CrossSite,
    /// A Host the loopback console does not answer to (DNS rebinding); the name it does
    /// answer to.
    WrongHost(String),
    /// A tenant the viewer does not review.
    OtherTenant(Id),
    /// Nothing here, or nothing the viewer may learn of.
    NotFound(String),
    /// A query or form field the console cannot read.
    BadRequest(String),
    /// A decision that is neither approve nor reject.
    NoVerdict,
    /// A decryption asked of a console without a key-encryption key.
    NoKek,
    /// A decision by a reviewer whose signing key the console does not hold.
    NoKey(Id),
    /// Too many of something in a minute: how long to wait, and the text saying so
    /// (`{}` is the number of seconds).
    TooMany { wait: Duration, text: &'static str },
    /// The store failed.
    Store(StoreError),
    /// The OS gave no randomness for a session id.
    NoRandomness,
    /// A form body axum could not read (its own answer).
    Form(FormRejection),
}

impl ConsoleError {
    /// Refused: nothing at this address, or nothing the viewer may see there.
    pub(crate) fn not_found(text: impl Into<String>) -> ConsoleError {
        ConsoleError::NotFound(text.into())
    }
}

impl From<StoreError> for ConsoleError {
    fn from(error: StoreError) -> ConsoleError {
        ConsoleError::Store(error)
    }
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        match self {
            ConsoleError::SignIn => Redirect::to("/login").into_response(),
            ConsoleError::Unauthenticated => {
                let mut response = refusal(
                    StatusCode::UNAUTHORIZED,
                    "sign in first (or send Authorization: Bearer TOKEN)",
                );
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static(CHALLENGE),
                );
                response
            }
            ConsoleError::Csrf => refusal(
                StatusCode::FORBIDDEN,
                "the form's CSRF token is missing or wrong: reload the page and try again",
            ),
            ConsoleError::CrossSite => refusal(
                StatusCode::FORBIDDEN,
                "a request from another site is refused",
            ),
            ConsoleError::WrongHost(host) => refusal(
                StatusCode::MISDIRECTED_REQUEST,
                &format!("this console answers only to {host}"),
            ),
            ConsoleError::OtherTenant(tenant) => refusal(
                StatusCode::FORBIDDEN,
                &format!("you do not review the calls of tenant {tenant}"),
            ),
            ConsoleError::NotFound(text) => refusal(StatusCode::NOT_FOUND, &text),
            ConsoleError::BadRequest(text) => refusal(StatusCode::BAD_REQUEST, &text),
            ConsoleError::NoVerdict => {
                refusal(StatusCode::UNPROCESSABLE_ENTITY, "choose approve or reject")
            }
            ConsoleError::NoKey(reviewer) => refusal(
                StatusCode::CONFLICT,
                &format!(
                    "this console holds no signing key for {reviewer}: a decision counts only signed with its reviewer's key; start the console with --key FILE (or --keys DIR)"
                ),
            ),
            ConsoleError::NoKek => refusal(
                StatusCode::CONFLICT,
                "this console holds no key-encryption key: start it with --kek-file FILE",
            ),
            ConsoleError::TooMany { wait, text } => {
                // Said in the text and in `Retry-After`.
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
            ConsoleError::Store(error) => {
                // Logged whole for the operator, named only vaguely to the browser (its
                // text may hold a database's address or a row's contents).
                tracing::warn!(error = %error, "the console's store failed");
                refusal(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the store did not answer as expected; try again (the console's log says more)",
                )
            }
            ConsoleError::NoRandomness => refusal(
                StatusCode::SERVICE_UNAVAILABLE,
                "no randomness for a session",
            ),
            ConsoleError::Form(rejection) => rejection.into_response(),
        }
    }
}

/// A refusal as a page of its own.
fn refusal(status: StatusCode, text: &str) -> Response {
    pages::response(
        status,
        pages::page(&Frame::bare("Refused"), pages::problem(text)),
    )
}
