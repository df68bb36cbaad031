//! Live updates: the queue's mark as server-sent events, which the pages' script
//! answers by reading the page again.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use tooltrust::Id;

use crate::app::App;
use crate::viewer::Viewer;

/// Server-sent events: `queue` with the mark of the calls the viewer reviews (their
/// tenants' only), whenever it changes. The stream ends when the viewer's session does.
pub(super) async fn events(State(app): State<Arc<App>>, viewer: Viewer) -> Response {
    Sse::new(marks(app, viewer.session, viewer.tenants))
        .keep_alive(KeepAlive::default())
        .into_response()
}

fn marks(
    app: Arc<App>,
    session: Option<String>,
    tenants: Option<Vec<Id>>,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let start = (app, session, tenants, None::<String>);
    futures_util::stream::unfold(start, |(app, session, tenants, last)| async move {
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
            if let Some(mark) = app.mark(tenants.as_deref()).await
                && last.as_deref() != Some(mark.as_str())
            {
                let event = Event::default().event("queue").data(mark.clone());
                return Some((Ok(event), (app, session, tenants, Some(mark))));
            }
        }
    })
}
