//! One held call: its page, the viewer's decision on it, and the decryption of its
//! quarantined outputs for review.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use tooltrust::Id;
use tooltrust_store::{DecideError, HeldCall, HeldStatus, StoreEvent};

use super::frame;
use crate::app::App;
use crate::context;
use crate::error::ConsoleError;
use crate::pages::{self, CallView, Decidable, Notice, Quarantined};
use crate::viewer::{CsrfForm, PageViewer, Posted, Viewer};

#[derive(Debug, Default, Deserialize)]
pub(super) struct CallQuery {
    #[serde(default)]
    done: String,
}

pub(super) async fn show_call(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    Query(query): Query<CallQuery>,
    PageViewer(viewer): PageViewer,
) -> Result<Response, ConsoleError> {
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
) -> Result<Response, ConsoleError> {
    let Extras {
        done,
        mut notice,
        opened,
    } = extras;
    let Ok(id) = Id::new(id) else {
        return Err(ConsoleError::not_found("no held call has this id"));
    };
    let csrf = viewer.csrf(app);
    let title = format!("Held call {id}");
    let frame = frame(app, &title, viewer, &csrf, format!("/calls/{id}")).await;
    let call = match app.store.get(&id).await? {
        // Another tenant's call reads as absent: its existence is not the viewer's to learn.
        Some(call) if viewer.may(&call.tenant) => call,
        _ => return Err(ConsoleError::not_found(format!("no held call has id {id}"))),
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
    let mut quarantined = quarantined_for(app, &call).await?;
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
    Ok(pages::response(
        status,
        pages::page(&frame, pages::call(&view)),
    ))
}

/// The quarantined outputs a held call's reviewer may ask to decrypt: those of its
/// tenant produced by the scope that made it. (Never those its context names: the
/// context holds outsiders' text, which could name another scope's outputs.)
async fn quarantined_for(
    app: &App,
    call: &HeldCall,
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
pub(super) struct DecideForm {
    csrf: Option<String>,
    verdict: Option<String>,
    reason: Option<String>,
}

impl Posted for DecideForm {
    fn csrf(&self) -> Option<&str> {
        self.csrf.as_deref()
    }
}

pub(super) async fn decide(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    CsrfForm { viewer, form }: CsrfForm<DecideForm>,
) -> Result<Response, ConsoleError> {
    let Ok(call_id) = Id::new(id.as_str()) else {
        return Err(ConsoleError::not_found("no held call has this id"));
    };
    let approve = match form.verdict.as_deref() {
        Some("approve") => true,
        Some("reject") => false,
        _ => return Err(ConsoleError::NoVerdict),
    };
    match app.store.get(&call_id).await? {
        Some(call) if viewer.may(&call.tenant) => {}
        _ => return Err(ConsoleError::not_found("no held call has this id")),
    }
    if let Err(wait) = app.decisions.take(viewer.id.as_str()) {
        return Err(ConsoleError::TooMany {
            wait,
            text: "too many decisions in a minute; wait {} s and decide again",
        });
    }
    let reason = form.reason.unwrap_or_default();
    let Some(key) = app.keys.get(&viewer.id) else {
        return Err(ConsoleError::NoKey(viewer.id.clone()));
    };
    let Some(call) = app.store.get(&call_id).await? else {
        return Err(ConsoleError::not_found("no held call has this id"));
    };
    let signed = call
        .statement(approve, reason.trim(), viewer.id.clone())
        .sign(key);
    match app.store.decide(&signed).await {
        Ok(decided) => Ok(
            Redirect::to(&format!("/calls/{}?done={}", decided.id, decided.status)).into_response(),
        ),
        Err(error) => {
            // A refused decision is said on the call's page, which shows what is now so.
            let status = match &error {
                DecideError::UnknownCall(_) => StatusCode::NOT_FOUND,
                DecideError::AlreadyDecided { .. } | DecideError::Expired { .. } => {
                    StatusCode::CONFLICT
                }
                DecideError::AuthorCannotDecide { .. }
                | DecideError::Unauthorized { .. }
                | DecideError::NeverHeld(_) => StatusCode::FORBIDDEN,
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
pub(super) struct DecryptForm {
    csrf: Option<String>,
    key: Option<String>,
    reader: Option<String>,
}

impl Posted for DecryptForm {
    fn csrf(&self) -> Option<&str> {
        self.csrf.as_deref()
    }
}

pub(super) async fn decrypt(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    CsrfForm { viewer, form }: CsrfForm<DecryptForm>,
) -> Result<Response, ConsoleError> {
    let Some(kek) = &app.kek else {
        return Err(ConsoleError::NoKek);
    };
    let (Ok(call_id), Some(Ok(key)), Some(Ok(reader))) = (
        Id::new(id.as_str()),
        form.key.as_deref().map(Id::new),
        form.reader.as_deref().map(Id::new),
    ) else {
        return Err(ConsoleError::not_found("no such quarantined output"));
    };
    let call = match app.store.get(&call_id).await? {
        Some(call) if viewer.may(&call.tenant) => call,
        _ => return Err(ConsoleError::not_found("no held call has this id")),
    };
    let Some(output) = quarantined_for(&app, &call)
        .await?
        .into_iter()
        .find(|output| output.key == key && output.reader == reader)
    else {
        return Err(ConsoleError::not_found(
            "no such quarantined output for this call",
        ));
    };
    let store = app.store.for_tenant(call.tenant.clone());
    let Some(copy) = store.get_sealed(&key, &reader).await? else {
        return Err(ConsoleError::not_found("no such quarantined output"));
    };
    // Recorded before anything is shown: a decryption the chain does not hold never happens.
    let event = StoreEvent::QuarantineOpenedForReview {
        call: &call.id,
        key: &key,
        reader: &reader,
        target: &output.target,
        reviewer: &viewer.id,
    };
    store.append(&event).await?;
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
