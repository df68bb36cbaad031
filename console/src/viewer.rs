//! Who is looking, as extractors: [`Viewer`] (a bearer token's holder or a signed-in
//! session; never whoever connects from the loopback address), [`PageViewer`] for
//! pages, and [`CsrfForm`], a form post whose CSRF token must be its viewer's.

use std::sync::Arc;

use axum::extract::{Form, FromRequest, FromRequestParts, Request};
use axum::http::header::{self, HeaderMap};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use tooltrust::Id;

use crate::app::App;
use crate::error::ConsoleError;

/// Who is looking, and what binds their CSRF token. As an extractor it refuses a
/// request without a viewer with 401 (a form's post, live updates).
pub(crate) struct Viewer {
    pub(crate) id: Id,
    /// What identifies the viewer's credential; their CSRF token is bound to it.
    pub(crate) binding: String,
    /// The session that signed the viewer in (`None`: a bearer token, which cannot
    /// sign out).
    pub(crate) session: Option<String>,
    /// The tenants whose calls the viewer reaches; `None`: every tenant.
    pub(crate) tenants: Option<Vec<Id>>,
}

impl Viewer {
    /// The viewer a request's headers prove, if any.
    fn of(app: &App, headers: &HeaderMap) -> Option<Viewer> {
        let credentials = &app.credentials;
        if let Some(token) = bearer(headers) {
            // A wrong token is not a session: no fallback to the cookie. (The guard has
            // already refused an address with too many wrong ones.)
            return credentials.token_holder(token).map(|id| Viewer {
                id: id.clone(),
                binding: format!("bearer:{id}"),
                session: None,
                tenants: credentials.tenants_of(id).map(<[Id]>::to_vec),
            });
        }
        let session = cookie(headers, &app.cookie_name())?;
        let id = app.sessions.reviewer(&session)?;
        Some(Viewer {
            tenants: credentials.tenants_of(&id).map(<[Id]>::to_vec),
            id,
            binding: format!("session:{session}"),
            session: Some(session),
        })
    }

    /// The viewer of `headers`, or the 401 for a request without one.
    fn require(app: &App, headers: &HeaderMap) -> Result<Viewer, ConsoleError> {
        Viewer::of(app, headers).ok_or(ConsoleError::Unauthenticated)
    }

    /// Whether the viewer reaches `tenant`'s calls, outputs and chain.
    pub(crate) fn may(&self, tenant: &Id) -> bool {
        self.tenants
            .as_ref()
            .is_none_or(|tenants| tenants.contains(tenant))
    }

    /// The viewer's CSRF token, for the forms of the page they are shown.
    pub(crate) fn csrf(&self, app: &App) -> String {
        app.csrf.token(&self.binding)
    }
}

impl FromRequestParts<Arc<App>> for Viewer {
    type Rejection = ConsoleError;

    async fn from_request_parts(
        parts: &mut Parts,
        app: &Arc<App>,
    ) -> Result<Self, Self::Rejection> {
        Viewer::require(app, &parts.headers)
    }
}

/// The viewer of a page: someone not signed in is sent to sign in instead.
pub(crate) struct PageViewer(pub(crate) Viewer);

impl FromRequestParts<Arc<App>> for PageViewer {
    type Rejection = ConsoleError;

    async fn from_request_parts(
        parts: &mut Parts,
        app: &Arc<App>,
    ) -> Result<Self, Self::Rejection> {
        Viewer::of(app, &parts.headers)
            .map(PageViewer)
            .ok_or(ConsoleError::SignIn)
    }
}

/// A form that changes something: it carries its viewer's CSRF token.
pub(crate) trait Posted: DeserializeOwned {
    /// The form's `csrf` field.
    fn csrf(&self) -> Option<&str>;
}

/// A state-changing form post and its viewer. The body is read first (a body axum
/// cannot read gets axum's answer), then the viewer is required (401), then the form's
/// CSRF token must be theirs (403).
pub(crate) struct CsrfForm<T> {
    pub(crate) viewer: Viewer,
    pub(crate) form: T,
}

impl<T: Posted + Send> FromRequest<Arc<App>> for CsrfForm<T> {
    type Rejection = ConsoleError;

    async fn from_request(request: Request, app: &Arc<App>) -> Result<Self, Self::Rejection> {
        let headers = request.headers().clone();
        let Form(form) = Form::<T>::from_request(request, app)
            .await
            .map_err(ConsoleError::Form)?;
        let viewer = Viewer::require(app, &headers)?;
        if app.csrf.check(&viewer.binding, form.csrf().unwrap_or("")) {
            Ok(CsrfForm { viewer, form })
        } else {
            Err(ConsoleError::Csrf)
        }
    }
}

/// The bearer token a request carries, if any.
pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim)
}

/// The value of the cookie `name`, if the request carries it.
pub(crate) fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.to_owned())
}
