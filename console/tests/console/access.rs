//! Who may use the console: a console off loopback refuses to start without
//! authentication and TLS; with credentials the identity comes from the sign-in or the
//! bearer token only; TLS serves; quarantined outputs open only on a recorded request.

use crate::common;

use common::{PAYLOAD, client, credentials, csrf, decide_as, hold, keys, loopback, post, start};
use reqwest::StatusCode;
use tooltrust::Id;
use tooltrust::quarantine::{Kek, seal};
use tooltrust_console::{Config, Console, StartError, TlsFiles, hash_password};
use tooltrust_store::{EntryFilter, HeldStatus, SealedCopy};

const TOKEN: &str = "0f3c9a61d2b84e7f5a0c1d9e8b7a6f5e4d3c2b1a";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_off_loopback_needs_authentication_and_tls() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(&dir).await;
    let mut open = loopback(&store, "alice");
    open.listen = "0.0.0.0:0".parse().unwrap();
    let error = Console::bind(open).await.err().expect("refused");
    assert!(matches!(error, StartError::NeedsAuth(_)), "{error}");
    assert!(error.to_string().contains("--auth FILE"));

    let mut no_tls = loopback(&store, "alice");
    no_tls.listen = "0.0.0.0:0".parse().unwrap();
    no_tls.access = credentials(&dir, &format!("alice token {TOKEN}\n"));
    let error = Console::bind(no_tls).await.err().expect("refused");
    assert!(matches!(error, StartError::NeedsTls(_)), "{error}");
    assert!(error.to_string().contains("--tls-cert"));

    let mut bad_files = loopback(&store, "alice");
    bad_files.listen = "0.0.0.0:0".parse().unwrap();
    bad_files.access = credentials(&dir, &format!("alice token {TOKEN}\n"));
    bad_files.tls = Some(TlsFiles {
        cert: dir.path().join("missing.pem"),
        key: dir.path().join("missing.key"),
    });
    let error = Console::bind(bad_files).await.err().expect("refused");
    assert!(matches!(error, StartError::Tls(_)), "{error}");

    let mut none = loopback(&store, "alice");
    none.decisions_per_minute = 0;
    assert!(matches!(
        Console::bind(none).await.err(),
        Some(StartError::NoDecisions)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_credentials_the_identity_comes_from_the_sign_in_only() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(&dir).await;
    let held = hold(&store, PAYLOAD, "hello").await;
    let phc = hash_password("correct horse battery staple").unwrap();
    let mut config = loopback(&store, "unused");
    config.access = credentials(&dir, &format!("alice argon2 {phc}\nbob token {TOKEN}\n"));
    let console = start(config).await;
    let http = client();

    // Nobody signed in: pages send to the sign-in page, everything else is refused.
    let response = http.get(&console.url).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(response.headers()["location"], "/login");
    let decide = format!("{}calls/{}/decide", console.url, held.id);
    let response = post(
        &http,
        &decide,
        &[
            ("verdict", "approve"),
            ("reason", "x"),
            ("reviewer", "alice"),
        ],
    )
    .await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    let response = http
        .get(format!("{}events", console.url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        response.headers()["www-authenticate"],
        "Bearer realm=\"tooltrust review console\""
    );

    // A wrong password, an unknown reviewer, a token for the wrong name: refused.
    let login = format!("{}login", console.url);
    for (reviewer, secret) in [
        ("alice", "wrong"),
        ("carol", "correct horse battery staple"),
        ("alice", TOKEN),
    ] {
        let response = post(&http, &login, &[("reviewer", reviewer), ("secret", secret)]).await;
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{reviewer}");
        assert!(response.headers().get("set-cookie").is_none());
    }

    // Alice signs in with her password; the cookie is HttpOnly and SameSite=Strict.
    let response = post(
        &http,
        &login,
        &[
            ("reviewer", "alice"),
            ("secret", "correct horse battery staple"),
        ],
    )
    .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let cookie = response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let session = cookie.split(';').next().unwrap().to_owned();
    let page = http
        .get(format!("{}calls/{}", console.url, held.id))
        .header("cookie", &session)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("Reviewing as <strong id=\"viewer\">alice</strong>"));
    let token = csrf(&page);

    // A forged session, and Alice's token with another cookie, are refused.
    let forged = http
        .get(&console.url)
        .header("cookie", "tooltrust_console=00")
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::SEE_OTHER);

    // Her decision is hers, whatever a form field says.
    let response = http
        .post(&decide)
        .header("cookie", &session)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(common::form(&[
            ("csrf", &token),
            ("verdict", "reject"),
            ("reason", "not the customer"),
            ("reviewer", "bob"),
        ]))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let decided = store.get(&held.id).await.unwrap().unwrap();
    assert_eq!(decided.status, HeldStatus::Rejected);
    assert_eq!(decided.decided_by.as_ref().map(Id::as_str), Some("alice"));

    // Bob, by bearer token (a client without a browser); a wrong token is not him.
    let page = http
        .get(&console.url)
        .header("authorization", format!("Bearer {TOKEN}"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("Reviewing as <strong id=\"viewer\">bob</strong>"));
    let wrong = http
        .get(format!("{}events", console.url))
        .header("authorization", format!("Bearer {TOKEN}x"))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(
        wrong.status(),
        StatusCode::UNAUTHORIZED,
        "a wrong token never falls back to the cookie"
    );

    // Signing out ends the session, and the live updates it had open.
    let mut live = http
        .get(format!("{}events", console.url))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(live.status(), StatusCode::OK);
    let response = http
        .post(format!("{}logout", console.url))
        .header("cookie", &session)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(common::form(&[("csrf", &token)]))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let after = http
        .get(&console.url)
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), StatusCode::SEE_OTHER);
    let ended = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while live.chunk().await.ok().flatten().is_some() {}
    })
    .await;
    assert!(ended.is_ok(), "the event stream ends with the session");

    // Signing in again from a browser that has a session ends that session.
    let sign_in = |cookie: Option<String>| {
        let mut request = http
            .post(&login)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(common::form(&[
                ("reviewer", "alice"),
                ("secret", "correct horse battery staple"),
            ]));
        if let Some(cookie) = cookie {
            request = request.header("cookie", cookie);
        }
        async move {
            let response = request.send().await.unwrap();
            let cookie = response.headers()["set-cookie"].to_str().unwrap();
            cookie.split(';').next().unwrap().to_owned()
        }
    };
    let first = sign_in(None).await;
    let second = sign_in(Some(first.clone())).await;
    let status = |cookie: String| {
        let request = http.get(&console.url).header("cookie", cookie);
        async move { request.send().await.unwrap().status() }
    };
    assert_eq!(status(second).await, StatusCode::OK);
    assert_eq!(status(first).await, StatusCode::SEE_OTHER);
}

/// A loopback console for Bob, who holds [`TOKEN`], on a store in `dir`.
async fn bobs_console(dir: &tempfile::TempDir) -> common::Running {
    let store = common::store(dir).await;
    let mut config = loopback(&store, "unused");
    config.access = credentials(dir, &format!("bob token {TOKEN}\n"));
    start(config).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_guesses_are_limited_and_a_loopback_console_answers_to_its_names_only() {
    let dir = tempfile::tempdir().unwrap();
    let console = bobs_console(&dir).await;
    let http = client();
    let as_bob = |token: String| {
        let request = http
            .get(&console.url)
            .header("authorization", format!("Bearer {token}"));
        async move { request.send().await.unwrap().status() }
    };
    assert_eq!(as_bob(TOKEN.to_owned()).await, StatusCode::OK);

    // DNS rebinding: another name for the loopback address is refused, with
    // credentials as without.
    let rebound = http
        .get(&console.url)
        .header("host", format!("evil.example:{}", console.addr.port()))
        .header("authorization", format!("Bearer {TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), StatusCode::MISDIRECTED_REQUEST);
    let named = http
        .get(format!("http://localhost:{}/", console.addr.port()))
        .header("authorization", format!("Bearer {TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(named.status(), StatusCode::OK);

    // A minute of wrong guesses from one address, and then not even the right token
    // is checked from there.
    for guess in 0..60 {
        let status = as_bob(format!("{guess:0>40}")).await;
        assert_eq!(status, StatusCode::SEE_OTHER, "guess {guess}");
    }
    assert_eq!(
        as_bob(TOKEN.to_owned()).await,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_attempts_are_rate_limited() {
    let dir = tempfile::tempdir().unwrap();
    let console = bobs_console(&dir).await;
    let http = client();
    let login = format!("{}login", console.url);
    let mut statuses = Vec::new();
    for _ in 0..11 {
        let response = post(&http, &login, &[("reviewer", "bob"), ("secret", "guess")]).await;
        statuses.push(response.status());
    }
    assert!(
        statuses[..10]
            .iter()
            .all(|s| *s == StatusCode::UNAUTHORIZED)
    );
    assert_eq!(statuses[10], StatusCode::TOO_MANY_REQUESTS);
    // Even the right token waits out the minute.
    let response = post(&http, &login, &[("reviewer", "bob"), ("secret", TOKEN)]).await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_on_every_interface_serves_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(&dir).await;
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let (cert_path, key_path) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_path, cert.cert.pem()).unwrap();
    std::fs::write(&key_path, cert.signing_key.serialize_pem()).unwrap();
    let config = Config {
        store: store.clone(),
        listen: "0.0.0.0:0".parse().unwrap(),
        access: credentials(&dir, &format!("bob token {TOKEN}\n")),
        tls: Some(TlsFiles {
            cert: cert_path,
            key: key_path,
        }),
        decisions_per_minute: 30,
        kek: None,
        keys: keys(),
    };
    let console = start(config).await;
    assert!(console.url.starts_with("https://"));
    let https = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(cert.cert.pem().as_bytes()).unwrap())
        .resolve("localhost", ([127, 0, 0, 1], console.addr.port()).into())
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let url = format!("https://localhost:{}/", console.addr.port());
    let response = https
        .get(&url)
        .header("authorization", format!("Bearer {TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers().contains_key("strict-transport-security"));
    let login = https
        .post(format!("{url}login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(common::form(&[("reviewer", "bob"), ("secret", TOKEN)]))
        .send()
        .await
        .unwrap();
    let cookie = login.headers()["set-cookie"].to_str().unwrap();
    assert!(
        cookie.starts_with("__Host-tooltrust_console=") && cookie.contains("Secure"),
        "{cookie}"
    );
    // Plain HTTP to the TLS port gets no page.
    let plain = client()
        .get(format!("http://127.0.0.1:{}/", console.addr.port()))
        .send()
        .await;
    assert!(plain.is_err() || !plain.unwrap().status().is_success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quarantined_output_opens_only_on_a_recorded_request() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(&dir).await;
    let held = hold(&store, PAYLOAD, "hello").await;
    let key_bytes = [7u8; 32];
    let (key, reader) = (
        Id::new("output-1").unwrap(),
        Id::new("reviewer-copy").unwrap(),
    );
    let sealed = seal(
        &Kek::from_bytes(key_bytes),
        b"child said: <img src=x onerror=alert(1)>",
        &key,
        &held.scope,
        &reader,
    )
    .unwrap();
    store
        .put_sealed(&SealedCopy {
            key: key.clone(),
            reader: reader.clone(),
            target: held.scope.clone(),
            sealed,
        })
        .await
        .unwrap();
    // Another scope's output is never offered, though the outsider's text names it.
    let elsewhere = Id::new("kettle").unwrap();
    assert!(held.context.as_deref().unwrap().contains("kettle"));
    store
        .put_sealed(&SealedCopy {
            key: elsewhere.clone(),
            reader: reader.clone(),
            target: Id::new("another-scope").unwrap(),
            sealed: vec![0; 64],
        })
        .await
        .unwrap();
    // Without the KEK the page says the output exists, never its bytes.
    let keyless = start(loopback(&store, "alice")).await;
    let http = keyless.client();
    let page = http
        .get(format!("{}calls/{}", keyless.url, held.id))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("output-1") && page.contains("--kek-file"));
    assert!(!page.contains("child said"));
    let token = csrf(&page);
    let response = post(
        &http,
        &format!("{}calls/{}/decrypt", keyless.url, held.id),
        &[
            ("csrf", &token),
            ("key", "output-1"),
            ("reader", "reviewer-copy"),
        ],
    )
    .await;
    assert_eq!(response.status(), StatusCode::CONFLICT);

    // With it: shown only after the explicit action, which the chain records first.
    let mut config = loopback(&store, "alice");
    config.kek = Some(Kek::from_bytes(key_bytes));
    let console = start(config).await;
    let http = console.client();
    let url = format!("{}calls/{}", console.url, held.id);
    let page = http.get(&url).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("Decrypt for review") && !page.contains("child said"));
    assert!(!page.contains("another-scope"));
    let token = csrf(&page);
    let decrypt = format!("{url}/decrypt");
    let response = post(
        &http,
        &decrypt,
        &[("key", "output-1"), ("reader", "reviewer-copy")],
    )
    .await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN, "no CSRF token");
    let response = post(
        &http,
        &decrypt,
        &[
            ("csrf", &token),
            ("key", "output-2"),
            ("reader", "reviewer-copy"),
        ],
    )
    .await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let response = post(
        &http,
        &decrypt,
        &[
            ("csrf", &token),
            ("key", "kettle"),
            ("reader", "reviewer-copy"),
        ],
    )
    .await;
    assert_eq!(
        response.status(),
        StatusCode::NOT_FOUND,
        "another scope's output"
    );
    let opened = |entries: &[tooltrust_store::ChainEntry]| entries.len();
    let recorded = EntryFilter {
        contains: Some("quarantine_opened_for_review".into()),
        ..EntryFilter::default()
    };
    assert_eq!(opened(&store.chain_entries(&recorded).await.unwrap()), 0);
    let response = post(
        &http,
        &decrypt,
        &[
            ("csrf", &token),
            ("key", "output-1"),
            ("reader", "reviewer-copy"),
        ],
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    let page = response.text().await.unwrap();
    assert!(
        page.contains("child said: &lt;img src=x onerror=alert(1)&gt;"),
        "{page}"
    );
    let entries = store.chain_entries(&recorded).await.unwrap();
    assert_eq!(entries.len(), 1);
    assert!(entries[0].line.contains("\"reviewer\":\"alice\""));
    assert!(entries[0].line.contains(held.id.as_str()));

    // A copy sealed under another KEK does not open, and says so.
    let mut other = loopback(&store, "alice");
    other.kek = Some(Kek::from_bytes([8u8; 32]));
    let other = start(other).await;
    let http = other.client();
    let url = format!("{}calls/{}", other.url, held.id);
    let token = csrf(&http.get(&url).send().await.unwrap().text().await.unwrap());
    let page = post(
        &http,
        &format!("{url}/decrypt"),
        &[
            ("csrf", &token),
            ("key", "output-1"),
            ("reader", "reviewer-copy"),
        ],
    )
    .await
    .text()
    .await
    .unwrap();
    assert!(
        page.contains("cannot decrypt") && page.contains("another key-encryption key"),
        "{page}"
    );
}

/// A client that sends a request's headers and never its body is refused (4xx) once
/// the body's time is up, and its connection let go, instead of holding it forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_never_arrives_does_not_hold_the_connection() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let console = bobs_console(&dir).await;
    let mut tcp = tokio::net::TcpStream::connect(console.addr).await.unwrap();
    let head = format!(
        "POST /login HTTP/1.1\r\nHost: {}\r\ncontent-type: application/x-www-form-urlencoded\r\ncontent-length: 100\r\n\r\nreviewer=bob",
        console.addr
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        tcp.read_to_end(&mut answer),
    )
    .await;
    assert!(read.is_ok(), "the connection is let go");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 4"), "{answer}");
}

/// A reviewer whose credentials name their tenants lists, opens, decides and audits
/// only those: another tenant's call reads as absent, its chain as forbidden, whatever
/// the query asks for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reviewer_reaches_only_the_tenants_their_line_names() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(&dir).await;
    let ours = hold(&store, PAYLOAD, "ours").await;
    let globex = store.for_tenant(Id::new("globex").unwrap());
    let theirs = hold(&globex, PAYLOAD, "theirs").await;
    let mut config = loopback(&store, "unused");
    config.access = credentials(&dir, &format!("bob token {TOKEN} tenants=default\n"));
    let console = start(config).await;
    let http = client();
    let get = |path: String| {
        let request = http
            .get(format!("{}{path}", console.url))
            .header("authorization", format!("Bearer {TOKEN}"));
        async move {
            let response = request.send().await.unwrap();
            (response.status(), response.text().await.unwrap())
        }
    };

    let (status, queue) = get(String::new()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(queue.contains(ours.id.as_str()), "{queue}");
    assert!(!queue.contains(theirs.id.as_str()), "{queue}");
    let (status, _) = get("?tenant=globex".into()).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, page) = get(format!("calls/{}", theirs.id)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(!page.contains("theirs"), "{page}");
    let (status, _) = get("audit?tenant=globex".into()).await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // A decision on the other tenant's call, with a valid CSRF token, is refused.
    let (_, page) = get(format!("calls/{}", ours.id)).await;
    let token = csrf(&page);
    let response = http
        .post(format!("{}calls/{}/decide", console.url, theirs.id))
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(common::form(&[
            ("csrf", &token),
            ("verdict", "approve"),
            ("reason", "mine now"),
        ]))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        globex.get(&theirs.id).await.unwrap().unwrap().status,
        HeldStatus::Held
    );
}

/// The next `queue` event of a live stream, or `None` if none comes within `wait`.
async fn next_mark(
    stream: &mut reqwest::Response,
    seen: &mut String,
    wait: std::time::Duration,
) -> Option<String> {
    tokio::time::timeout(wait, async {
        loop {
            if let Some(end) = seen.find("\n\n") {
                let event: String = seen.drain(..end + 2).collect();
                if let Some(data) = event
                    .strip_prefix("event: queue\ndata: ")
                    .map(|rest| rest.trim_end().to_owned())
                {
                    return data;
                }
                continue;
            }
            let chunk = stream.chunk().await.unwrap().expect("the stream goes on");
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    })
    .await
    .ok()
}

/// The live mark a page carries.
fn page_mark(page: &str) -> String {
    let marker = "<meta name=\"live-mark\" content=\"";
    let at = page.find(marker).expect("a page with a live mark") + marker.len();
    page[at..].split('"').next().unwrap().to_owned()
}

/// Issue 38: a local user who could not read the store opened a loopback console's
/// call and approved it as the configured reviewer. The console for one reviewer now
/// draws a token and serves nobody without it; the token signs in (as a bearer token,
/// or exchanged for a session cookie), and a wrong one is refused like none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_console_serves_nobody_without_its_token() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(&dir).await;
    let held = hold(&store, PAYLOAD, "hello").await;
    let console = start(loopback(&store, "alice")).await;
    let token = console
        .token
        .clone()
        .expect("a console for one reviewer has a token");
    assert_eq!(token.len(), 64, "256 bits, as hex");
    assert_eq!(
        console.sign_in,
        format!("{}login?token={token}", console.url)
    );
    let http = client();

    // Another local user, without the token: the sign-in page, never the queue or a call.
    for path in [
        String::new(),
        format!("calls/{}", held.id),
        "audit".into(),
        "audit/verify".into(),
    ] {
        let response = http
            .get(format!("{}{path}", console.url))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::SEE_OTHER, "/{path}");
        assert_eq!(response.headers()["location"], "/login", "/{path}");
        assert!(!response.text().await.unwrap().contains("send_email"));
    }
    let response = http
        .get(format!("{}events", console.url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    // The login page asks for the token alone.
    let page = http
        .get(format!("{}login", console.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("name=\"token\"") && !page.contains("name=\"reviewer\""));

    // Their decision, however it is dressed up, is refused and changes nothing.
    let decide = format!("{}calls/{}/decide", console.url, held.id);
    let fields = [
        ("verdict", "approve"),
        ("reason", "mine now"),
        ("reviewer", "alice"),
    ];
    assert_eq!(
        post(&http, &decide, &fields).await.status(),
        StatusCode::UNAUTHORIZED
    );
    // A wrong token, as a bearer, in the sign-in address or in the form: refused.
    let wrong = format!("{:0>64}", "1");
    let response = http
        .get(&console.url)
        .header("authorization", format!("Bearer {wrong}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    for response in [
        http.get(format!("{}login?token={wrong}", console.url))
            .send()
            .await
            .unwrap(),
        http.get(format!("{}login?token=", console.url))
            .send()
            .await
            .unwrap(),
        post(
            &http,
            &format!("{}login", console.url),
            &[("token", &wrong)],
        )
        .await,
        post(
            &http,
            &format!("{}login", console.url),
            &[("reviewer", "alice"), ("secret", &wrong)],
        )
        .await,
    ] {
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert!(response.headers().get("set-cookie").is_none());
    }
    assert_eq!(
        store.get(&held.id).await.unwrap().unwrap().status,
        HeldStatus::Held
    );

    // With the token as a bearer: the queue, as alice.
    let page = http
        .get(&console.url)
        .header("authorization", format!("Bearer {token}"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("Reviewing as <strong id=\"viewer\">alice</strong>"));
    assert!(page.contains(held.id.as_str()));

    // The printed address exchanges the token for a session cookie (named for this
    // console's port) and goes on to the queue.
    let response = http.get(&console.sign_in).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(response.headers()["location"], "/");
    let cookie = response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        cookie.starts_with(&format!("tooltrust_console_{}=", console.addr.port()))
            && cookie.contains("HttpOnly")
            && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let session = cookie.split(';').next().unwrap().to_owned();
    let page = http
        .get(format!("{}calls/{}", console.url, held.id))
        .header("cookie", &session)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("Reviewing as <strong id=\"viewer\">alice</strong>"));
    let response = http
        .post(&decide)
        .header("cookie", &session)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(common::form(&[
            ("csrf", &csrf(&page)),
            ("verdict", "approve"),
            ("reason", "checked with the customer"),
        ]))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let decided = store.get(&held.id).await.unwrap().unwrap();
    assert_eq!(decided.status, HeldStatus::Approved);
    assert_eq!(decided.decided_by.as_ref().map(Id::as_str), Some("alice"));

    // The sign-in form takes the token too.
    let response = post(
        &http,
        &format!("{}login", console.url),
        &[("token", &token)],
    )
    .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert!(response.headers().contains_key("set-cookie"));

    // Each console draws its own token: this one's opens no other.
    let other = start(loopback(&store, "alice")).await;
    let response = http
        .get(&other.url)
        .header("authorization", format!("Bearer {token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_ne!(other.token.as_deref(), Some(token.as_str()));
}

/// Issue 38: a reviewer limited to some tenants learned another tenant's call ids from
/// the queue's `before=` cursor (keyset paging on them listed their own calls older
/// than it). Another tenant's id now pages exactly as an unknown id does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tenants_id_pages_as_an_unknown_id_does() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(&dir).await;
    let older = hold(&store, PAYLOAD, "ours, older").await;
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let globex = store.for_tenant(Id::new("globex").unwrap());
    let theirs = hold(&globex, PAYLOAD, "theirs").await;
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let newer = hold(&store, PAYLOAD, "ours, newer").await;
    let mut config = loopback(&store, "unused");
    config.access = credentials(&dir, &format!("bob token {TOKEN} tenants=default\n"));
    let console = start(config).await;
    let http = client();
    let get = |query: String| {
        let request = http
            .get(format!("{}?{query}", console.url))
            .header("authorization", format!("Bearer {TOKEN}"));
        async move {
            let response = request.send().await.unwrap();
            (response.status(), response.text().await.unwrap())
        }
    };

    // The calls a page lists.
    let listed = |page: &str| {
        let at = page.find("<section id=\"queue\"").expect("the queue");
        let end = at + page[at..].find("</section>").unwrap();
        page[at..end].to_owned()
    };

    // Their own cursor pages as ever.
    let (status, page) = get(format!("before={}", newer.id)).await;
    assert_eq!(status, StatusCode::OK);
    let calls = listed(&page);
    assert!(calls.contains(older.id.as_str()) && !calls.contains(newer.id.as_str()));

    // Another tenant's id, an unknown one: the same answer, byte for byte (but for the
    // page's own address, which names the cursor it was asked for).
    let unknown = Id::new("0123456789abcdef0123456789abcdef").unwrap();
    for filters in ["", "status=held&", "tenant=default&"] {
        let (status, theirs_page) = get(format!("{filters}before={}", theirs.id)).await;
        let (unknown_status, unknown_page) = get(format!("{filters}before={unknown}")).await;
        assert_eq!(status, unknown_status, "{filters}");
        assert_eq!(
            theirs_page.replace(theirs.id.as_str(), "CURSOR"),
            unknown_page.replace(unknown.as_str(), "CURSOR"),
            "{filters}"
        );
        assert!(
            !listed(&theirs_page).contains(older.id.as_str()),
            "{theirs_page}"
        );
        assert!(theirs_page.contains("No held call matches."));
    }
    // A reviewer of every tenant pages from any call, as before.
    let all = start(loopback(&store, "alice")).await;
    let page = all
        .client()
        .get(format!("{}?before={}", all.url, theirs.id))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(listed(&page).contains(older.id.as_str()));
}

/// Issue 38: a reviewer limited to some tenants saw other tenants' activity in the live
/// mark (pages and event stream). Their mark now changes with their own tenants' calls
/// only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_mark_moves_with_the_reviewers_own_tenants_only() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(&dir).await;
    let globex = store.for_tenant(Id::new("globex").unwrap());
    let mut config = loopback(&store, "unused");
    config.access = credentials(&dir, &format!("bob token {TOKEN} tenants=default\n"));
    let console = start(config).await;
    let http = client();
    let page = || {
        let request = http
            .get(&console.url)
            .header("authorization", format!("Bearer {TOKEN}"));
        async move { page_mark(&request.send().await.unwrap().text().await.unwrap()) }
    };
    let mut stream = http
        .get(format!("{}events", console.url))
        .header("authorization", format!("Bearer {TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    let mut seen = String::new();
    let wait = std::time::Duration::from_secs(10);
    let first = next_mark(&mut stream, &mut seen, wait)
        .await
        .expect("a first mark");
    assert_eq!(page().await, first);
    let whole = store.queue_mark().await.unwrap();
    assert_ne!(first, whole, "not the whole queue's mark");

    // Another tenant's call is held, approved, claimed and run: nothing moves for bob.
    let theirs = hold(&globex, PAYLOAD, "theirs").await;
    decide_as(&globex, &theirs.id, "carol", true, "fine")
        .await
        .unwrap();
    let quiet = std::time::Duration::from_millis(600);
    assert_eq!(next_mark(&mut stream, &mut seen, quiet).await, None);
    assert_eq!(page().await, first);
    let another = hold(&globex, PAYLOAD, "theirs again").await;
    decide_as(&globex, &another.id, "carol", false, "no")
        .await
        .unwrap();
    assert_eq!(next_mark(&mut stream, &mut seen, quiet).await, None);
    assert_eq!(page().await, first);
    assert_ne!(
        store.queue_mark().await.unwrap(),
        whole,
        "the whole queue moved"
    );

    // One of bob's: held, then decided; each moves his mark.
    let ours = hold(&store, PAYLOAD, "ours").await;
    let held = next_mark(&mut stream, &mut seen, wait)
        .await
        .expect("a hold of bob's");
    assert_ne!(held, first);
    assert_eq!(page().await, held);
    decide_as(&store, &ours.id, "carol", false, "no")
        .await
        .unwrap();
    let decided = next_mark(&mut stream, &mut seen, wait)
        .await
        .expect("a decision on bob's");
    assert_ne!(decided, held);
    assert_eq!(page().await, decided);
}

/// Every local user shares the loopback address: wrong tokens from it do not keep the
/// reviewer of a console for one reviewer out (its token cannot be guessed), as they do
/// with a credentials file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_tokens_from_other_local_users_do_not_lock_the_reviewer_out() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(&dir).await;
    let console = start(loopback(&store, "alice")).await;
    let http = client();
    for guess in 0..70 {
        let guess = format!("{guess:0>64}");
        let response = http
            .get(&console.url)
            .header("authorization", format!("Bearer {guess}"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::SEE_OTHER);
        let response = http
            .get(format!("{}login?token={guess}", console.url))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    }
    let page = console.client().get(&console.url).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let response = http.get(&console.sign_in).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert!(response.headers().contains_key("set-cookie"));
}
