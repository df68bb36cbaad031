//! The queue: the held calls the viewer reviews, newest first, filtered and paged.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use tooltrust_store::{HeldStatus, ListFilter};

use super::{PAGE, frame, may, optional_id, own_address};
use crate::app::App;
use crate::error::ConsoleError;
use crate::pages::{self, QueueQuery};
use crate::viewer::PageViewer;

pub(super) async fn queue(
    State(app): State<Arc<App>>,
    uri: Uri,
    Query(query): Query<QueueQuery>,
    PageViewer(viewer): PageViewer,
) -> Result<Response, ConsoleError> {
    let status = match query.status.as_str() {
        "" => None,
        text => Some(
            text.parse::<HeldStatus>()
                .map_err(|e| ConsoleError::BadRequest(e.to_string()))?,
        ),
    };
    let scope = optional_id(&query.scope, "scope")?;
    let tenant = optional_id(&query.tenant, "tenant")?;
    let before = optional_id(&query.before, "before")?;
    if let Some(tenant) = &tenant {
        may(&viewer, tenant)?;
    }
    let csrf = viewer.csrf(&app);
    let frame = frame(&app, "Queue", &viewer, &csrf, own_address(&uri)).await;
    let filter = ListFilter {
        status,
        tool: (!query.tool.is_empty()).then(|| query.tool.clone()),
        scope,
        tenant,
        tenants: viewer.tenants.clone(),
        before,
        limit: Some(PAGE),
    };
    // The cursor must be a call the viewer reviews: another tenant's id pages to
    // nothing, exactly as an unknown id does, so that paging tells nothing of whether
    // (or when) another tenant's call exists.
    let cursor_seen = match &filter.before {
        None => true,
        Some(before) => app
            .store
            .get(before)
            .await?
            .is_some_and(|call| viewer.may(&call.tenant)),
    };
    let calls = if cursor_seen {
        app.store.list(&filter).await?
    } else {
        Vec::new()
    };
    let older = (calls.len() == PAGE as usize)
        .then(|| calls.last().map(|call| &call.id))
        .flatten();
    Ok(pages::response(
        StatusCode::OK,
        pages::page(&frame, pages::queue(&query, &calls, older)),
    ))
}
