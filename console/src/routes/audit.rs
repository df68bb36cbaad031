//! The audit chain of a tenant: its entries, searched and paged, and its verification.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use serde::Deserialize;
use tooltrust_store::{ChainError, EntryFilter};

use super::{PAGE, frame, may, optional_id, own_address};
use crate::app::App;
use crate::error::ConsoleError;
use crate::pages::{self, AuditView};
use crate::viewer::{PageViewer, Viewer};

#[derive(Debug, Default, Deserialize)]
pub(super) struct AuditQuery {
    #[serde(default)]
    tenant: String,
    #[serde(default)]
    q: String,
    before: Option<u64>,
}

pub(super) async fn audit(
    State(app): State<Arc<App>>,
    uri: Uri,
    Query(query): Query<AuditQuery>,
    PageViewer(viewer): PageViewer,
) -> Result<Response, ConsoleError> {
    audit_page(&app, &viewer, uri, &query, false).await
}

pub(super) async fn verify(
    State(app): State<Arc<App>>,
    uri: Uri,
    Query(query): Query<AuditQuery>,
    PageViewer(viewer): PageViewer,
) -> Result<Response, ConsoleError> {
    audit_page(&app, &viewer, uri, &query, true).await
}

async fn audit_page(
    app: &App,
    viewer: &Viewer,
    uri: Uri,
    query: &AuditQuery,
    verify: bool,
) -> Result<Response, ConsoleError> {
    if verify && let Err(wait) = app.verifies.take(viewer.id.as_str()) {
        return Err(ConsoleError::TooMany {
            wait,
            text: "too many chain verifications in a minute; wait {} s and verify again",
        });
    }
    let tenant =
        optional_id(&query.tenant, "tenant")?.unwrap_or_else(|| app.store.tenant().clone());
    may(viewer, &tenant)?;
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
    let entries = store.chain_entries(&filter).await?;
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
    let csrf = viewer.csrf(app);
    let frame = frame(app, "Audit chain", viewer, &csrf, own_address(&uri)).await;
    Ok(pages::response(
        StatusCode::OK,
        pages::page(&frame, pages::audit(&view)),
    ))
}
