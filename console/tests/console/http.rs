//! Every route of the console and every refusal, over real HTTP against a console on a
//! port of its own, on a real SQLite store holding calls a real session held.

use crate::common;

use common::{AUTHOR, PAYLOAD, csrf, decide_as, hold, loopback, post, start};
use reqwest::StatusCode;
use tooltrust::Id;
use tooltrust_console::CSP;
use tooltrust_store::{EntryFilter, HeldStatus};

async fn text(response: reqwest::Response) -> String {
    response.text().await.unwrap()
}

/// The console's own markup may hold exactly one script element, its own file; every
/// `<` the store held arrives escaped.
fn assert_inert(page: &str) {
    assert_eq!(page.matches("<script").count(), 1, "{page}");
    assert!(page.contains("<script src=\"/assets/console.js\" defer></script>"));
    for forbidden in [
        "<img",
        "<svg",
        "onerror=\"",
        "onload=\"",
        "<system_instructions",
    ] {
        assert!(!page.contains(forbidden), "{forbidden} in {page}");
    }
}

/// The elements the console's own templates write; anything else in a page would be
/// markup that came from the store.
const OWN_ELEMENTS: &[&str] = &[
    "!DOCTYPE",
    "html",
    "head",
    "meta",
    "title",
    "link",
    "script",
    "body",
    "header",
    "a",
    "nav",
    "span",
    "strong",
    "form",
    "input",
    "button",
    "main",
    "h1",
    "h2",
    "h3",
    "p",
    "section",
    "dl",
    "dt",
    "dd",
    "code",
    "pre",
    "blockquote",
    "div",
    "mark",
    "q",
    "details",
    "summary",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "label",
    "select",
    "option",
    "textarea",
    "br",
];

/// Every tag in `page` is one of the console's own, and no attribute is an event handler.
fn assert_only_own_markup(page: &str) {
    for (at, _) in page.match_indices('<') {
        let name: String = page[at + 1..]
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '!')
            .collect();
        assert!(
            OWN_ELEMENTS.contains(&name.as_str()),
            "<{name} at byte {at}: {}",
            &page[at..(at + 80).min(page.len())]
        );
        let tag_end = page[at..].find('>').map_or(page.len(), |end| at + end);
        let tag = &page[at..tag_end];
        assert!(
            !tag.split_whitespace()
                .any(|attr| attr.to_ascii_lowercase().starts_with("on")),
            "an event handler in {tag}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_corpus_payload_is_shown_as_text_on_every_page() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(&dir).await;
    let corpus = common::corpus();
    let all = corpus.join("\n");
    let markup = common::corpus_markup();
    let in_context = hold(&store, &all, &markup).await;
    // Payloads where the store keeps short texts too: the principal's request, the reason.
    let mut call = hold(&store, &markup, "x").await;
    let mut cut = 16_000;
    while !markup.is_char_boundary(cut) {
        cut -= 1;
    }
    decide_as(&store, &call.id, "bob", false, &markup[..cut])
        .await
        .unwrap();
    call = store.get(&call.id).await.unwrap().unwrap();
    store
        .append(&serde_json::json!({"event": "note", "text": markup}))
        .await
        .unwrap();
    let console = start(loopback(&store, "alice")).await;
    let http = console.client();
    for path in [
        String::new(),
        format!("calls/{}", in_context.id),
        format!("calls/{}", call.id),
        "audit".into(),
        format!("audit?q={}", "%3Cscript%3E"),
    ] {
        let page = text(
            http.get(format!("{}{path}", console.url))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_only_own_markup(&page);
        assert_inert(&page);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_lists_held_calls_newest_first_and_filters_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(&dir).await;
    let first = hold(&store, PAYLOAD, "first").await;
    let second = hold(&store, "a plain page", "second <b>bold</b>").await;
    decide_as(&store, &first.id, "bob", false, "not the customer")
        .await
        .unwrap();
    let console = start(loopback(&store, "alice")).await;
    let http = console.client();

    let page = text(http.get(&console.url).send().await.unwrap()).await;
    let (at_first, at_second) = (
        page.find(first.id.as_str()).unwrap(),
        page.find(second.id.as_str()).unwrap(),
    );
    assert!(at_second < at_first, "newest first");
    assert!(page.contains("Reviewing as <strong id=\"viewer\">alice</strong>"));
    assert_inert(&page);

    let held = text(
        http.get(format!("{}?status=held", console.url))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(held.contains(second.id.as_str()) && !held.contains(first.id.as_str()));
    let rejected = text(
        http.get(format!("{}?status=rejected", console.url))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(rejected.contains(first.id.as_str()) && !rejected.contains(second.id.as_str()));
    let by_scope = text(
        http.get(format!("{}?scope={}", console.url, first.scope))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(by_scope.contains(first.id.as_str()) && !by_scope.contains(second.id.as_str()));
    let other_tool = text(
        http.get(format!("{}?tool=fetch_page&tenant=default", console.url))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(other_tool.contains("No held call matches."));

    for bad in [
        "status=maybe",
        "scope=a%20b",
        "tenant=%3Cx%3E",
        "before=%3Cx%3E",
    ] {
        let response = http
            .get(format!("{}?{bad}", console.url))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{bad}");
        assert_inert(&text(response).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_pages_back_through_older_calls() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(&dir).await;
    let held = hold(&store, PAYLOAD, "hello").await;
    // One page and one more: the oldest call is on the second page only.
    for i in 0..200 {
        let mut call = held.clone();
        call.id = Id::new(format!("later-{i:03}")).unwrap();
        store.hold(&call).await.unwrap();
    }
    let console = start(loopback(&store, "alice")).await;
    let http = console.client();
    let page = text(
        http.get(format!("{}?status=held", console.url))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(page.matches("<tr class=\"call\"").count(), 200);
    assert!(!page.contains(held.id.as_str()));
    let marker = "<a id=\"older\" href=\"";
    let at = page.find(marker).expect("a link to older calls") + marker.len();
    let href = page[at..].split('"').next().unwrap().replace("&amp;", "&");
    assert!(href.starts_with("/?status=held&before="), "{href}");
    let older = text(
        http.get(format!("{}{}", console.url, &href[1..]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(older.matches("<tr class=\"call\"").count(), 1, "{older}");
    assert!(older.contains(held.id.as_str()));
    assert!(!older.contains(marker), "the last page links no further");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_call_shows_everything_a_person_needs_and_nothing_executes() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(&dir).await;
    let held = hold(&store, PAYLOAD, "<script>alert(1)</script>").await;
    let console = start(loopback(&store, "alice")).await;
    let page = text(
        console
            .client()
            .get(format!("{}calls/{}", console.url, held.id))
            .send()
            .await
            .unwrap(),
    )
    .await;
    // The tool and its declaration, the checksum, the rule and reason, the request.
    assert!(page.contains("<code>send_email</code>"));
    assert!(page.contains("trust-trusted") && page.contains("effects-consequential"));
    assert!(page.contains("Sends an email."));
    assert!(page.contains(&held.checksum.to_hex()));
    assert!(page.contains(&held.rule) && page.contains("tainted"));
    assert!(page.contains("Is the kettle any good?"));
    // Arguments pretty-printed, escaped.
    assert!(
        page.contains("&quot;&lt;script&gt;alert(1)&lt;/script&gt;&quot;"),
        "{page}"
    );
    // The untrusted block is marked, the developer's instruction is not, and the forged
    // tags the neutraliser rewrote are highlighted.
    assert!(page.contains("class=\"block untrusted\" data-tier=\"untrusted_content\""));
    assert!(page.contains("class=\"block trusted\""));
    assert!(page.contains("title=\"neutralised: read as &lt;/untrusted_content"));
    assert!(page.contains("title=\"neutralised: read as &lt;system_instructions"));
    // The payload is there, as text.
    assert!(page.contains("window.__tooltrust_xss = 'onerror'"));
    assert!(page.contains("&lt;img src=&quot;x&quot; onerror="));
    assert_inert(&page);
    // A reviewer who is not the author may decide.
    assert!(page.contains("action=\"/calls/") && page.contains("value=\"approve\""));
    assert!(
        !page.contains(&format!("{}/decrypt", held.id)),
        "no quarantined output here"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_is_recorded_with_the_reviewer_and_refused_without_its_token() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(&dir).await;
    let held = hold(&store, PAYLOAD, "hello").await;
    let console = start(loopback(&store, "alice")).await;
    let http = console.client();
    let page_url = format!("{}calls/{}", console.url, held.id);
    let decide = format!("{page_url}/decide");
    let token = csrf(&text(http.get(&page_url).send().await.unwrap()).await);

    // A link cannot make the page say a decision was made.
    let forged = text(
        http.get(format!("{page_url}?done=approved"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(!forged.contains("You approved"), "{forged}");

    // No token, a wrong one, a token of another reviewer's console: refused, unchanged.
    let other = start(loopback(&store, "mallory")).await;
    let other_token = csrf(
        &text(
            other
                .client()
                .get(format!("{}calls/{}", other.url, held.id))
                .send()
                .await
                .unwrap(),
        )
        .await,
    );
    for bad in ["", "00", &"0".repeat(64), &other_token] {
        let response = post(
            &http,
            &decide,
            &[("csrf", bad), ("verdict", "approve"), ("reason", "ok")],
        )
        .await;
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "token {bad:?}");
        assert!(text(response).await.contains("CSRF token"));
    }
    let response = post(&http, &decide, &[("verdict", "approve"), ("reason", "ok")]).await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert_eq!(
        store.get(&held.id).await.unwrap().unwrap().status,
        HeldStatus::Held
    );

    // No verdict, no reason: refused.
    let response = post(&http, &decide, &[("csrf", &token), ("reason", "ok")]).await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let response = post(
        &http,
        &decide,
        &[("csrf", &token), ("verdict", "approve"), ("reason", "   ")],
    )
    .await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(text(response).await.contains("a decision needs a reason"));

    // A form field cannot choose who decides.
    let response = post(
        &http,
        &decide,
        &[
            ("csrf", &token),
            ("verdict", "approve"),
            ("reason", "the customer's own address"),
            ("reviewer", "someone-else"),
        ],
    )
    .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let location = response.headers()["location"].to_str().unwrap().to_owned();
    assert_eq!(location, format!("/calls/{}?done=approved", held.id));
    let decided = store.get(&held.id).await.unwrap().unwrap();
    assert_eq!(decided.status, HeldStatus::Approved);
    assert_eq!(decided.decided_by.as_ref().map(Id::as_str), Some("alice"));
    let page = text(
        http.get(format!("{}{}", console.url, &location[1..]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(page.contains("You approved this call"));
    assert!(page.contains("Approved by <strong>alice</strong>"));
    let elsewhere = text(
        other
            .client()
            .get(format!("{}{}", other.url, &location[1..]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(
        !elsewhere.contains("You approved")
            && elsewhere.contains("Approved by <strong>alice</strong>"),
        "mallory did not approve it"
    );

    let entries = store
        .chain_entries(&EntryFilter {
            contains: Some("call_decided".into()),
            ..EntryFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(entries.len(), 1);
    assert!(entries[0].line.contains("\"reviewer\":\"alice\""));
    assert!(entries[0].line.contains(held.id.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_author_is_refused_and_a_decision_made_elsewhere_first_wins() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(&dir).await;
    let held = hold(&store, PAYLOAD, "hello").await;

    // The scope's author sees why they may not decide, and a post is refused and recorded.
    let author = start(loopback(&store, AUTHOR)).await;
    let http = author.client();
    let page = text(
        http.get(format!("{}calls/{}", author.url, held.id))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(page.contains("id=\"author-refusal\""));
    assert!(!page.contains("value=\"approve\""));
    let token = csrf(&page);
    let response = post(
        &http,
        &format!("{}calls/{}/decide", author.url, held.id),
        &[("csrf", &token), ("verdict", "approve"), ("reason", "mine")],
    )
    .await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert!(text(response).await.contains("the author cannot decide"));
    assert_eq!(
        store.get(&held.id).await.unwrap().unwrap().status,
        HeldStatus::Held
    );
    let refused = store
        .chain_entries(&EntryFilter {
            contains: Some("call_decision_refused".into()),
            ..EntryFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(refused.len(), 1);

    // Alice opens the page; Bob rejects from a terminal first; Alice's approval loses.
    let alice = start(loopback(&store, "alice")).await;
    let http = alice.client();
    let page = text(
        http.get(format!("{}calls/{}", alice.url, held.id))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let token = csrf(&page);
    decide_as(&store, &held.id, "bob", false, "not the customer")
        .await
        .unwrap();
    let response = post(
        &http,
        &format!("{}calls/{}/decide", alice.url, held.id),
        &[("csrf", &token), ("verdict", "approve"), ("reason", "fine")],
    )
    .await;
    assert_eq!(response.status(), StatusCode::CONFLICT);
    let page = text(response).await;
    assert!(
        page.contains("Someone decided this call first: it is rejected"),
        "{page}"
    );
    assert!(page.contains("Rejected by <strong>bob</strong>"));
    let call = store.get(&held.id).await.unwrap().unwrap();
    assert_eq!(call.decided_by.as_ref().map(Id::as_str), Some("bob"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_are_rate_limited_per_reviewer() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(&dir).await;
    let first = hold(&store, PAYLOAD, "one").await;
    let second = hold(&store, PAYLOAD, "two").await;
    let mut config = loopback(&store, "alice");
    config.decisions_per_minute = 1;
    let console = start(config).await;
    let http = console.client();
    let token = csrf(
        &text(
            http.get(format!("{}calls/{}", console.url, first.id))
                .send()
                .await
                .unwrap(),
        )
        .await,
    );
    let decide = |id: &Id| format!("{}calls/{id}/decide", console.url);
    let fields = [
        ("csrf", token.as_str()),
        ("verdict", "reject"),
        ("reason", "no"),
    ];
    assert_eq!(
        post(&http, &decide(&first.id), &fields).await.status(),
        StatusCode::SEE_OTHER
    );
    let limited = post(&http, &decide(&second.id), &fields).await;
    assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = limited.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&wait));
    assert_eq!(
        store.get(&second.id).await.unwrap().unwrap().status,
        HeldStatus::Held
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_and_invalid_ids_other_hosts_and_other_origins_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(&dir).await;
    let held = hold(&store, PAYLOAD, "hello").await;
    let console = start(loopback(&store, "alice")).await;
    let http = console.client();
    let token = csrf(
        &text(
            http.get(format!("{}calls/{}", console.url, held.id))
                .send()
                .await
                .unwrap(),
        )
        .await,
    );

    for path in [
        "calls/0123456789abcdef",
        "calls/%3Cscript%3E",
        "nowhere",
        "calls/",
    ] {
        let response = http
            .get(format!("{}{path}", console.url))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{path}");
        assert_eq!(response.headers()["content-security-policy"], CSP);
        assert_inert(&text(response).await);
    }
    let response = post(
        &http,
        &format!("{}calls/unknown-id/decide", console.url),
        &[("csrf", &token), ("verdict", "approve"), ("reason", "ok")],
    )
    .await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);

    // A page of another site whose name was rebound to 127.0.0.1 sends its own Host.
    let response = http
        .get(&console.url)
        .header("host", format!("evil.example:{}", console.addr.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::MISDIRECTED_REQUEST);
    assert_eq!(response.headers()["content-security-policy"], CSP);
    let localhost = http
        .get(&console.url)
        .header("host", format!("localhost:{}", console.addr.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(localhost.status(), StatusCode::OK);

    // A form posted from another origin, or marked cross-site, is refused even with a token.
    let decide = format!("{}calls/{}/decide", console.url, held.id);
    let body = common::form(&[("csrf", &token), ("verdict", "approve"), ("reason", "ok")]);
    for (name, value) in [
        ("origin", "http://evil.example"),
        ("sec-fetch-site", "cross-site"),
    ] {
        let response = http
            .post(&decide)
            .header("content-type", "application/x-www-form-urlencoded")
            .header(name, value)
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{name}");
    }
    assert_eq!(
        store.get(&held.id).await.unwrap().unwrap().status,
        HeldStatus::Held
    );
    // The same form from the console's own origin goes through.
    let response = http
        .post(&decide)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("origin", console.url.trim_end_matches('/'))
        .header("sec-fetch-site", "same-origin")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_response_carries_the_security_headers_and_the_assets_are_embedded() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(&dir).await;
    let console = start(loopback(&store, "alice")).await;
    let http = console.client();
    for (path, kind) in [
        ("", "text/html"),
        ("audit", "text/html"),
        ("assets/console.css", "text/css"),
        ("assets/console.js", "text/javascript"),
        ("login", ""),
    ] {
        let response = http
            .get(format!("{}{path}", console.url))
            .send()
            .await
            .unwrap();
        let headers = response.headers();
        assert_eq!(headers["content-security-policy"], CSP, "{path}");
        assert_eq!(headers["x-content-type-options"], "nosniff");
        assert_eq!(headers["x-frame-options"], "DENY");
        assert_eq!(headers["referrer-policy"], "same-origin");
        if !kind.is_empty() {
            assert!(
                headers["content-type"].to_str().unwrap().starts_with(kind),
                "{path}"
            );
        }
    }
    // The policy allows no inline script, no eval, no other origin.
    for banned in ["'unsafe-inline'", "'unsafe-eval'", "data:", "*"] {
        assert!(!CSP.contains(banned), "{banned}");
    }
    assert!(CSP.contains("script-src 'self'"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_chain_is_searched_and_verified_and_a_bad_entry_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(&dir).await;
    for i in 0..3 {
        store
            .append(&serde_json::json!({"event": "call_denied", "tool": format!("tool_{i}"), "note": "<script>x</script>"}))
            .await
            .unwrap();
    }
    store
        .append(&serde_json::json!({"event": "neutralised", "tool": "fetch_page"}))
        .await
        .unwrap();
    let console = start(loopback(&store, "alice")).await;
    let http = console.client();

    let page = text(
        http.get(format!("{}audit", console.url))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(page.matches("<tr><td>").count(), 4);
    assert_inert(&page);
    let found = text(
        http.get(format!("{}audit?q=TOOL_1", console.url))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(found.matches("<tr><td>").count(), 1, "{found}");
    assert!(found.contains("tool_1"));
    let wildcard = text(
        http.get(format!("{}audit?q=%25", console.url))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(
        wildcard.contains("No entry matches."),
        "a % is searched for, not a wildcard"
    );

    let verified = text(
        http.get(format!("{}audit/verify", console.url))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let head = store.head().await.unwrap();
    assert!(
        verified.contains(&format!("ok: 4 entries, head <code>{}</code>", head.hash)),
        "{verified}"
    );
    let other_tenant = text(
        http.get(format!("{}audit/verify?tenant=acme", console.url))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(other_tenant.contains("ok: 0 entries"));

    // Someone edits entry 2 in the database: verification names it.
    let pool =
        sqlx::SqlitePool::connect(&format!("sqlite:{}", dir.path().join("store.db").display()))
            .await
            .unwrap();
    sqlx::query("UPDATE chain_entry SET line = replace(line, 'tool_1', 'tool_9') WHERE seq = 2")
        .execute(&pool)
        .await
        .unwrap();
    let broken = text(
        http.get(format!("{}audit/verify", console.url))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(broken.contains("first bad entry: seq 2:"), "{broken}");
    assert!(!broken.contains("ok: "));

    // Each verification reads the whole chain: a reviewer gets ten a minute.
    for _ in 0..7 {
        let response = http
            .get(format!("{}audit/verify", console.url))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }
    let response = http
        .get(format!("{}audit/verify", console.url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(response.headers().contains_key("retry-after"));
    assert!(
        text(response)
            .await
            .contains("too many chain verifications")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_updates_announce_a_call_held_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(&dir).await;
    let console = start(loopback(&store, "alice")).await;
    let client = || console.client();
    let response = client()
        .get(format!("{}events", console.url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let mut response = response;
    let mut seen = String::new();
    let mut next_event = async || loop {
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(10), response.chunk())
            .await
            .expect("an event within 10 s")
            .unwrap()
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
        if let Some(end) = seen.find("\n\n") {
            let event: String = seen.drain(..end + 2).collect();
            if event.contains("event: queue") {
                return event;
            }
        }
    };
    let before = next_event().await;
    hold(&store, PAYLOAD, "hello").await;
    let after = next_event().await;
    assert_ne!(before, after);
    assert!(after.starts_with("event: queue\ndata: 1/"), "{after}");

    // A page carries the mark it was made at, and the address live updates read again
    // (a call's own page, also when it answers a form).
    let mark = store.queue_mark().await.unwrap();
    let page = text(client().get(&console.url).send().await.unwrap()).await;
    assert!(
        page.contains(&format!("<meta name=\"live-mark\" content=\"{mark}\">")),
        "{page}"
    );
    assert!(page.contains("<meta name=\"live-url\" content=\"/\">"));
    let held = store
        .list(&tooltrust_store::ListFilter::default())
        .await
        .unwrap()
        .remove(0);
    let call_url = format!("{}calls/{}", console.url, held.id);
    let token = csrf(&text(client().get(&call_url).send().await.unwrap()).await);
    decide_as(&store, &held.id, "bob", true, "fine")
        .await
        .unwrap();
    let answered = post(
        &client(),
        &format!("{call_url}/decide"),
        &[("csrf", &token), ("verdict", "reject"), ("reason", "late")],
    )
    .await;
    assert_eq!(answered.status(), StatusCode::CONFLICT);
    assert!(text(answered).await.contains(&format!(
        "<meta name=\"live-url\" content=\"/calls/{}\">",
        held.id
    )));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_decides_on_a_postgres_store() {
    use sqlx::{Connection, Executor};
    let Ok(base) = std::env::var("TOOLTRUST_TEST_POSTGRES") else {
        // tooltrust-store's tests say once how to run the PostgreSQL tests.
        return;
    };
    let schema = format!("tt_console_{}", Id::random().unwrap());
    let options = tooltrust_store::StoreOptions {
        postgres_schema: Some(schema.clone()),
        ..common::store_options()
    };
    let location = tooltrust_store::Location::Postgres(base.clone());
    let store = tooltrust_store::Store::open(&location, options)
        .await
        .unwrap();
    let held = hold(&store, PAYLOAD, "hello").await;
    let console = start(loopback(&store, "alice")).await;
    let http = console.client();
    let page = text(
        http.get(format!("{}calls/{}", console.url, held.id))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(page.contains("class=\"block untrusted\""));
    assert_inert(&page);
    let response = post(
        &http,
        &format!("{}calls/{}/decide", console.url, held.id),
        &[
            ("csrf", &csrf(&page)),
            ("verdict", "approve"),
            ("reason", "checked"),
        ],
    )
    .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        store.get(&held.id).await.unwrap().unwrap().status,
        HeldStatus::Approved
    );
    let approved = text(
        http.get(format!("{}?status=approved", console.url))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(approved.contains(held.id.as_str()));
    let verified = text(
        http.get(format!("{}audit/verify", console.url))
            .send()
            .await
            .unwrap(),
    )
    .await;
    // The hold and the decision.
    assert!(verified.contains("ok: 2 entries"), "{verified}");
    drop(console);
    store.close().await;
    let mut conn = sqlx::PgConnection::connect(&base).await.unwrap();
    conn.execute(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .await
        .unwrap();
}
