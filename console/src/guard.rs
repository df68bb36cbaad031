//! The guard every request passes before its handler: the Host a loopback console
//! answers to, the origin of a state-changing request, the limit on wrong bearer
//! tokens; and the security headers on every response.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::Method;
use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::app::App;
use crate::error::ConsoleError;
use crate::viewer::bearer;

/// Every response's Content-Security-Policy: scripts and styles only from the
/// console's own embedded files, nothing inline, nothing framed, forms only to itself.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
    img-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'";

/// The address a request came from, as the limiters key it ("unknown" when the server
/// did not say).
#[derive(Debug, Clone)]
pub(crate) struct Client(pub(crate) String);

/// Every request: the Host a loopback console answers to, the origin of a
/// state-changing request; every response: the security headers.
pub(crate) async fn guard(
    State(app): State<Arc<App>>,
    mut request: Request,
    next: Next,
) -> Response {
    let client = Client(
        request
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map_or_else(|| "unknown".to_owned(), |info| info.0.ip().to_string()),
    );
    request.extensions_mut().insert(client.clone());
    let response = match admit(&app, &client, request.method(), request.headers()) {
        Ok(()) => next.run(request).await,
        Err(error) => error.into_response(),
    };
    secured(&app, response)
}

/// Whether the request may reach its handler.
fn admit(
    app: &App,
    client: &Client,
    method: &Method,
    headers: &HeaderMap,
) -> Result<(), ConsoleError> {
    let host = headers
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("");
    if let Some(hosts) = &app.hosts
        && !hosts
            .iter()
            .any(|allowed| allowed.eq_ignore_ascii_case(host))
    {
        return Err(ConsoleError::WrongHost(
            hosts
                .first()
                .map_or("its own address", String::as_str)
                .to_owned(),
        ));
    }
    if method != Method::GET && method != Method::HEAD {
        let scheme = if app.tls { "https" } else { "http" };
        let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
        let cross_site = headers
            .get("sec-fetch-site")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|site| site != "same-origin" && site != "none");
        if origin.is_some_and(|origin| origin != format!("{scheme}://{host}")) || cross_site {
            return Err(ConsoleError::CrossSite);
        }
    }
    // (Not for the token a console for one reviewer drew, which cannot be guessed: every
    // local user shares the loopback address, and could otherwise keep its reviewer out.)
    if let Some(token) = bearer(headers)
        && !app.single
    {
        if let Err(wait) = app.wrong_bearers.check(&client.0) {
            return Err(ConsoleError::TooMany {
                wait,
                text: "too many wrong tokens from this address; wait {} s",
            });
        }
        if app.credentials.token_holder(token).is_none() {
            let _ = app.wrong_bearers.take(&client.0);
        }
    }
    Ok(())
}

/// `response` with the security headers.
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
