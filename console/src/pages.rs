//! The console's pages, as templates checked at compile time. Every value from the
//! store is interpolated through maud, which escapes it: the store holds text that
//! attackers wrote, and none of it may become markup.

use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};
use serde_json::Value;
use tooltrust::Id;
use tooltrust::audit::VerifyReport;
use tooltrust::envelope::confusable_note;
use tooltrust_store::{ChainEntry, HeldCall, HeldStatus};

use crate::context::{Block, Piece, Shown};

/// What every page's frame needs.
pub(crate) struct Frame<'a> {
    pub(crate) title: &'a str,
    /// Who is looking (`None` on the sign-in page).
    pub(crate) viewer: Option<&'a Id>,
    /// The viewer's CSRF token, for the forms on the page.
    pub(crate) csrf: Option<&'a str>,
    /// Whether the viewer signed in (and can sign out).
    pub(crate) session: bool,
    /// For live updates: the page's own address (read again when the queue changes)
    /// and the queue's mark when the page was made.
    pub(crate) live: Option<(String, String)>,
}

impl Frame<'_> {
    /// The frame of a page without a viewer (sign-in, refusals).
    pub(crate) fn bare(title: &str) -> Frame<'_> {
        Frame {
            title,
            viewer: None,
            csrf: None,
            session: false,
            live: None,
        }
    }
}

/// A page as the response, with `status`.
pub(crate) fn response(status: StatusCode, markup: Markup) -> Response {
    (status, Html(markup.into_string())).into_response()
}

/// The page around `body`.
pub(crate) fn page(frame: &Frame<'_>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                @if let Some(csrf) = frame.csrf { meta name="csrf" content=(csrf); }
                @if let Some((url, mark)) = &frame.live {
                    meta name="live-url" content=(url);
                    meta name="live-mark" content=(mark);
                }
                title { (frame.title) " · tooltrust review console" }
                link rel="stylesheet" href="/assets/console.css";
                script src="/assets/console.js" defer {}
            }
            body {
                header {
                    a.brand href="/" { "tooltrust review console" }
                    nav {
                        a href="/" { "Queue" }
                        a href="/audit" { "Audit chain" }
                    }
                    @if let Some(viewer) = frame.viewer {
                        span.viewer { "Reviewing as " strong #viewer { (viewer) } }
                        @if frame.session {
                            form.inline method="post" action="/logout" {
                                input type="hidden" name="csrf" value=[frame.csrf];
                                button type="submit" { "Sign out" }
                            }
                        }
                    }
                }
                main { (body) }
            }
        }
    }
}

/// The queue's filters, as the form shows them.
#[derive(Debug, Default, Clone, serde::Deserialize)]
pub(crate) struct QueueQuery {
    #[serde(default)]
    pub(crate) status: String,
    #[serde(default)]
    pub(crate) tool: String,
    #[serde(default)]
    pub(crate) scope: String,
    #[serde(default)]
    pub(crate) tenant: String,
    /// Page back from this call (its id).
    #[serde(default)]
    pub(crate) before: String,
}

const STATUSES: [&str; 7] = [
    "held", "approved", "rejected", "expired", "claimed", "ran", "failed",
];

/// The review queue: filters, and every held call that matches, newest first, a page
/// at a time (`older`: the last call shown, when there may be more).
pub(crate) fn queue(query: &QueueQuery, calls: &[HeldCall], older: Option<&Id>) -> Markup {
    html! {
        h1 { "Held calls" }
        form.filters method="get" action="/" {
            label { "Status "
                select name="status" {
                    option value="" selected[query.status.is_empty()] { "any" }
                    @for status in STATUSES {
                        option value=(status) selected[query.status == status] { (status) }
                    }
                }
            }
            label { "Tool " input name="tool" value=(query.tool); }
            label { "Scope " input name="scope" value=(query.scope); }
            label { "Tenant " input name="tenant" value=(query.tenant); }
            button type="submit" { "Filter" }
        }
        section #queue data-live-part {
            @if calls.is_empty() {
                p.empty { "No held call matches." }
            } @else {
                table.queue {
                    thead { tr { th { "Held at" } th { "Status" } th { "Tool" } th { "Scope (author)" } th { "Tenant" } th { "Held by" } th {} } }
                    tbody {
                        @for call in calls {
                            tr.call data-id=(call.id) {
                                td { (call.created_at) }
                                td { (status(call.status)) }
                                td.tool { (call.tool) }
                                td { (call.scope) " (" (call.author) ")" }
                                td { (call.tenant) }
                                td { span.rule { (call.rule) } ": " (fold_text(&call.reason, 160)) }
                                td { a.open href={ "/calls/" (call.id) } { "Open" } }
                            }
                        }
                    }
                }
            }
        }
        @if let Some(last) = older {
            p.older {
                a #older href={ "/?" (query_string(&[
                    ("status", query.status.as_str()),
                    ("tool", query.tool.as_str()),
                    ("scope", query.scope.as_str()),
                    ("tenant", query.tenant.as_str()),
                    ("before", last.as_str()),
                ])) } { "Older calls" }
            }
        }
    }
}

fn status(status: HeldStatus) -> Markup {
    html! { span class={ "status status-" (status.as_str()) } { (status.as_str()) } }
}

/// What the viewer may do about a held call.
pub(crate) enum Decidable<'a> {
    /// Decide it, with this CSRF token.
    Yes(&'a str),
    /// Not: the viewer is the author of the scope that made it.
    Author,
    /// Not: it is decided.
    Decided,
}

/// A quarantined output the page can offer to decrypt.
pub(crate) struct Quarantined {
    pub(crate) key: Id,
    pub(crate) reader: Id,
    pub(crate) target: Id,
    /// Its plaintext, once a "decrypt for review" action opened it; `Err` says why not.
    pub(crate) opened: Option<Result<String, String>>,
}

/// One held call: everything a person needs to decide it.
pub(crate) struct CallView<'a> {
    pub(crate) call: &'a HeldCall,
    pub(crate) decidable: Decidable<'a>,
    /// A notice at the top: what just happened, or why the last action was refused.
    pub(crate) notice: Option<Notice>,
    pub(crate) context: Option<Shown>,
    pub(crate) quarantined: Vec<Quarantined>,
    /// The CSRF token for the decrypt action (when the console holds a key).
    pub(crate) decrypt: Option<&'a str>,
}

/// A message above a page's content.
pub(crate) struct Notice {
    pub(crate) refused: bool,
    pub(crate) text: String,
}

pub(crate) fn call(view: &CallView<'_>) -> Markup {
    let call = view.call;
    html! {
        h1 { "Held call " code { (call.id) } }
        @if let Some(notice) = &view.notice {
            p class={ "notice" @if notice.refused { " refused" } } role="alert" #notice { (notice.text) }
        }
        section #status data-live-part {
            p { "Status: " (status(call.status)) }
            @if let Some(by) = &call.decided_by {
                p.decided {
                    @match call.status {
                        HeldStatus::Approved => "Approved",
                        HeldStatus::Rejected => "Rejected",
                        HeldStatus::Claimed => "Approved (and it is running)",
                        HeldStatus::Ran => "Approved (and it has run)",
                        HeldStatus::Failed => "Approved (it was claimed, and failed)",
                        HeldStatus::Expired | HeldStatus::Held => "Decided",
                    }
                    " by " strong { (by) }
                    @if let Some(at) = &call.decided_at { " at " (at) }
                    @if let Some(reason) = &call.decision_reason { ": " q { (reason) } }
                }
            }
        }
        section.facts {
            h2 { "The call" }
            dl {
                dt { "Tool" } dd.tool { code { (call.tool) } }
                dt { "Declaration" } dd { (declaration(call.declaration.as_deref())) }
                dt { "Checksum" } dd { code.checksum { (call.checksum.to_hex()) } }
                dt { "Held by rule" } dd { code { (call.rule) } }
                dt { "Why" } dd { (call.reason) }
                dt { "Scope" } dd { code { (call.scope) } " (author " code { (call.author) } ", who may not decide)" }
                dt { "Tenant" } dd { code { (call.tenant) } }
                dt { "Held at" } dd { (call.created_at) }
            }
            h3 { "Arguments (canonical)" }
            pre.args { (arguments(&call.args)) }
            (confusables(&call.args))
        }
        section.request {
            h2 { "What the principal asked for" }
            @match &call.principal_request {
                Some(request) => blockquote { (request) },
                None => p.empty { "Not recorded by the host." },
            }
        }
        section.context {
            h2 { "The context that led to it" }
            p.legend {
                span.untrusted-label { "UNTRUSTED" } " blocks were written by outsiders: read them as data, never as orders. "
                mark.neutralised { "Highlighted" } " spans read as forged tags or chat tokens; their bracket is escaped, so they are inert (the neutraliser rewrote them, or the outsider wrote them escaped)."
            }
            @match &view.context {
                None => p.empty { "Not recorded by the host." },
                Some(Shown::Blocks(blocks)) => { @for block in blocks { (context_block(block)) } },
                Some(Shown::Unparsed { why, body }) => {
                    div.block.untrusted {
                        p.block-head { span.untrusted-label { "UNTRUSTED" } " context that is not a well-formed rendering (" (why) ")" }
                        pre.body { (body_pieces(body)) }
                    }
                },
            }
        }
        @if !view.quarantined.is_empty() {
            section.quarantine {
                h2 { "Quarantined outputs" }
                p { "Shown only after you decrypt them; each decryption is recorded in the audit chain with your name." }
                @for output in &view.quarantined {
                    div.block.untrusted {
                        p.block-head { span.untrusted-label { "QUARANTINED" } " output " code { (output.key) } " of scope " code { (output.target) } ", copy for " code { (output.reader) } }
                        @match &output.opened {
                            Some(Ok(text)) => pre.body { (text) },
                            Some(Err(why)) => p.refused { (why) },
                            None => @if let Some(csrf) = view.decrypt {
                                form method="post" action={ "/calls/" (call.id) "/decrypt" } {
                                    input type="hidden" name="csrf" value=(csrf);
                                    input type="hidden" name="key" value=(output.key);
                                    input type="hidden" name="reader" value=(output.reader);
                                    button type="submit" { "Decrypt for review" }
                                }
                            } @else {
                                p.empty { "This console holds no key-encryption key (start it with --kek-file FILE to decrypt for review)." }
                            },
                        }
                    }
                }
            }
        }
        section #decision data-live-part {
            h2 { "Decision" }
            @match view.decidable {
                Decidable::Yes(csrf) => {
                    form.decide method="post" action={ "/calls/" (call.id) "/decide" } {
                        input type="hidden" name="csrf" value=(csrf);
                        label for="reason" { "Reason (recorded in the audit chain with your name)" }
                        textarea #reason name="reason" required rows="3" maxlength="16384" {}
                        div.buttons {
                            button.approve type="submit" name="verdict" value="approve" { "Approve" }
                            button.reject type="submit" name="verdict" value="reject" { "Reject" }
                        }
                    }
                },
                Decidable::Author => {
                    p.refused #author-refusal { "You are " code { (call.author) } ", the author of scope " code { (call.scope) } ", which made this call: the author may not decide on it. Ask another reviewer." }
                },
                Decidable::Decided => { p { "This call is decided; nothing more to do." } },
            }
        }
    }
}

fn declaration(text: Option<&str>) -> Markup {
    let Some(text) = text else {
        return html! { span.empty { "not recorded by the host" } };
    };
    let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(text) else {
        return html! { code { (text) } };
    };
    let word = |name: &str| {
        fields
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_owned()
    };
    html! {
        span class={ "trust trust-" (word("trust")) } { (word("trust")) } ", "
        span class={ "effects effects-" (word("effects")) } { (word("effects")) } ", output "
        (word("output"))
        @if let Some(description) = fields.get("description").and_then(Value::as_str) {
            br; span.description { (description) }
        }
    }
}

fn context_block(block: &Block) -> Markup {
    html! {
        div class={ "block " @if block.trusted { "trusted" } @else { "untrusted" } } data-tier=(block.tier) {
            p.block-head {
                @if block.trusted { span.trusted-label { "TRUSTED" } } @else { span.untrusted-label { "UNTRUSTED" } }
                " " code { (block.tier) }
                @for (name, value) in &block.attrs { " " span.attr { (name) "=" q { (value) } } }
            }
            @if !block.body.is_empty() { pre.body { (body_pieces(&block.body)) } }
            @for child in &block.children { (context_block(child)) }
        }
    }
}

fn body_pieces(pieces: &[Piece]) -> Markup {
    html! {
        @for piece in pieces {
            @match piece {
                Piece::Text(text) => (text),
                Piece::Neutralised { text, matched } => mark.neutralised title={ "neutralised: read as " (matched) } { (text) },
            }
        }
    }
}

/// Strings longer than this are folded behind a summary.
const FOLD_CHARS: usize = 240;

/// The canonical arguments, pretty-printed, long strings folded.
fn arguments(args: &str) -> Markup {
    match serde_json::from_str::<Value>(args) {
        Ok(value) => json(&value, 0),
        Err(_) => html! { (args) },
    }
}

fn json(value: &Value, depth: usize) -> Markup {
    let pad = "  ".repeat(depth + 1);
    let close = "  ".repeat(depth);
    html! {
        @match value {
            Value::Object(fields) if !fields.is_empty() => {
                "{\n"
                @for (i, (name, field)) in fields.iter().enumerate() {
                    (pad) (flag(name)) span.key { (quoted(name)) } ": " (json(field, depth + 1))
                    @if i + 1 < fields.len() { "," } "\n"
                }
                (close) "}"
            },
            Value::Array(items) if !items.is_empty() => {
                "[\n"
                @for (i, item) in items.iter().enumerate() {
                    (pad) (json(item, depth + 1))
                    @if i + 1 < items.len() { "," } "\n"
                }
                (close) "]"
            },
            Value::String(text) => { (flag(text)) (fold_text(&quoted(text), FOLD_CHARS)) },
            other => (other.to_string()),
        }
    }
}

/// A flag before a key or string that holds characters a person may take for others,
/// the note naming them as its title; nothing otherwise.
fn flag(text: &str) -> Markup {
    match confusable_note(text) {
        Some(note) => html! { mark.confusable title=(note) { "⚠" } " " },
        None => html! {},
    }
}

/// How many keys and strings with confusable characters a call's page names.
const SHOWN_CONFUSABLE_PLACES: usize = 32;

/// Below the arguments: each key and string of them that holds characters a person may
/// take for others (`exаmple` with a Cyrillic `а`), where it is and the runtime's note
/// naming the characters; nothing when there is none.
fn confusables(args: &str) -> Markup {
    fn walk(value: &Value, path: &str, places: &mut Vec<(String, String)>) {
        match value {
            Value::Object(fields) => {
                for (name, field) in fields {
                    let at = format!("{path}/{}", name.replace('~', "~0").replace('/', "~1"));
                    if let Some(note) = confusable_note(name) {
                        places.push((format!("key {} at {at}", quoted(name)), note));
                    }
                    walk(field, &at, places);
                }
            }
            Value::Array(items) => {
                for (index, item) in items.iter().enumerate() {
                    walk(item, &format!("{path}/{index}"), places);
                }
            }
            Value::String(text) => {
                if let Some(note) = confusable_note(text) {
                    places.push((format!("value at {path}"), note));
                }
            }
            _ => {}
        }
    }
    let mut places = Vec::new();
    if let Ok(value) = serde_json::from_str::<Value>(args) {
        walk(&value, "", &mut places);
    }
    if places.is_empty() {
        return html! {};
    }
    let more = places.len().saturating_sub(SHOWN_CONFUSABLE_PLACES);
    places.truncate(SHOWN_CONFUSABLE_PLACES);
    html! {
        div.notice.refused #confusables role="note" {
            p { strong { "Look twice:" } " these keys and values hold characters that mix scripts, look like others or are invisible (flagged ⚠ above)." }
            @for (place, note) in &places {
                p.confusable { code { (place) } ": " (note) }
            }
            @if more > 0 { p { "And " (more) " more key(s) or value(s) like these." } }
        }
    }
}

fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

/// `text`, or its first `limit` characters with the rest behind a disclosure.
fn fold_text(text: &str, limit: usize) -> Markup {
    let count = text.chars().count();
    if count <= limit {
        return html! { (text) };
    }
    let cut = text
        .char_indices()
        .nth(limit * 2 / 3)
        .map_or(text.len(), |(i, _)| i);
    html! {
        details.fold {
            summary { (&text[..cut]) "… (" (count) " characters)" }
            span.full { (text) }
        }
    }
}

/// The audit chain page's state.
pub(crate) struct AuditView<'a> {
    pub(crate) tenant: &'a Id,
    pub(crate) search: &'a str,
    pub(crate) entries: &'a [ChainEntry],
    /// The verification's result, when asked for.
    pub(crate) verified: Option<Result<VerifyReport, String>>,
    /// The sequence number to page back from, when there may be older entries.
    pub(crate) older: Option<u64>,
}

pub(crate) fn audit(view: &AuditView<'_>) -> Markup {
    html! {
        h1 { "Audit chain of tenant " code { (view.tenant) } }
        div.audit-actions {
            form.filters method="get" action="/audit" {
                input type="hidden" name="tenant" value=(view.tenant);
                label { "Search " input type="search" name="q" value=(view.search); }
                button type="submit" { "Search" }
            }
            form method="get" action="/audit/verify" {
                input type="hidden" name="tenant" value=(view.tenant);
                button #verify type="submit" { "Verify chain" }
            }
        }
        @if let Some(verified) = &view.verified {
            @match verified {
                Ok(report) => p.notice.ok #verified { "ok: " (report.entries) " entries, head " code { (report.head.hash) } },
                Err(why) => p.notice.refused #verified role="alert" { (why) },
            }
        }
        @if view.entries.is_empty() {
            p.empty { "No entry matches." }
        } @else {
            table.entries {
                thead { tr { th { "Seq" } th { "Event" } th { "Entry" } } }
                tbody {
                    @for entry in view.entries {
                        tr {
                            td { (entry.seq) }
                            td { code { (event_name(&entry.line)) } }
                            td { pre.entry { (fold_text(&entry.line, 600)) } }
                        }
                    }
                }
            }
            @if let Some(before) = view.older {
                p { a href={ "/audit?" (query_string(&[
                    ("tenant", view.tenant.as_str()),
                    ("q", view.search),
                    ("before", &before.to_string()),
                ])) } { "Older entries" } }
            }
        }
    }
}

fn event_name(line: &str) -> String {
    serde_json::from_str::<Value>(line)
        .ok()
        .and_then(|value| {
            value
                .get("event")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "?".to_owned())
}

/// A query string of the non-empty fields, percent-encoded.
fn query_string(fields: &[(&str, &str)]) -> String {
    let present: Vec<_> = fields
        .iter()
        .filter(|(_, value)| !value.is_empty())
        .collect();
    serde_urlencoded::to_string(present).unwrap_or_default()
}

/// The sign-in page: a reviewer's name and password or token, or (`single`: a console
/// for one reviewer) the token the console drew.
pub(crate) fn login(error: Option<&str>, single: bool) -> Markup {
    html! {
        h1 { "Sign in" }
        @if let Some(error) = error { p.notice.refused role="alert" { (error) } }
        @if single {
            p { "This console asks for the token it drew when it started: open the address it printed then, or paste the token from its token file (readable by the user who started it only)." }
            form.login method="post" action="/login" {
                label { "Token " input type="password" name="token" autocomplete="off" required; }
                button type="submit" { "Sign in" }
            }
        } @else {
            form.login method="post" action="/login" {
                label { "Reviewer " input name="reviewer" autocomplete="username" required; }
                label { "Password or token " input type="password" name="secret" autocomplete="current-password" required; }
                button type="submit" { "Sign in" }
            }
        }
    }
}

/// A refusal or failure, with where to go next.
pub(crate) fn problem(text: &str) -> Markup {
    html! {
        h1 { "Refused" }
        p.notice.refused role="alert" #problem { (text) }
        p { a href="/" { "Back to the queue" } }
    }
}
