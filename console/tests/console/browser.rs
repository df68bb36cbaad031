//! The console in a real headless Chromium driven over WebDriver (Debian's `chromium` and
//! `chromium-driver`): a reviewer approves a call the `injection_defense` example held and
//! the waiting agent process resumes; a rejection; the author refused; live updates; and
//! injection payloads written as HTML and JavaScript shown as text, none executed.
//!
//! Without `chromium` and `chromedriver` on the PATH these tests say so in one line and
//! do not run, unless `TOOLTRUST_TEST_BROWSER=required` (as `.ci/run` sets), which makes
//! that a failure. Screenshots go to the test's output directory,
//! `target/tmp/console-screenshots/`.

use crate::common;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};

const REQUIRED_ENV: &str = "TOOLTRUST_TEST_BROWSER";

/// The browser and its driver, or `None` (with one line saying how to run these tests).
fn tools() -> Option<(PathBuf, PathBuf)> {
    let find = |name: &str| {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(name))
                .find(|path| path.is_file())
        })
    };
    match (find("chromium"), find("chromedriver")) {
        (Some(browser), Some(driver)) => Some((browser, driver)),
        _ if std::env::var(REQUIRED_ENV).as_deref() == Ok("required") => {
            panic!("{REQUIRED_ENV}=required but chromium or chromedriver is not on the PATH")
        }
        _ => {
            static NOTE: std::sync::Once = std::sync::Once::new();
            NOTE.call_once(|| {
                use std::io::Write;
                // Written past the test harness's capture, so that it shows.
                let _ = writeln!(
                    std::io::stderr(),
                    "note: the console's browser tests were not run: install chromium and chromium-driver (apt-get install -y chromium chromium-driver; .ci/run does) to run them"
                );
            });
            None
        }
    }
}

/// A chromedriver on a port it chose, and a headless Chromium session through it.
struct Browser {
    client: Client,
    _driver: Child,
}

async fn browser(chromium: &PathBuf, chromedriver: &PathBuf) -> Browser {
    let mut driver = Command::new(chromedriver)
        .arg("--port=0")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(driver.stdout.take().unwrap()).lines();
    let port = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(rest) = line.split("started successfully on port ").nth(1) {
                return rest.trim_end_matches('.').trim().parse::<u16>().unwrap();
            }
        }
        panic!("chromedriver ended without saying its port");
    })
    .await
    .expect("chromedriver starts within 30 s");
    // Keep reading its output, so it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let capabilities = serde_json::json!({
        "browserName": "chrome",
        "goog:chromeOptions": {
            "binary": chromium,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,1000", "--lang=en-US"]
        }
    });
    let serde_json::Value::Object(capabilities) = capabilities else {
        unreachable!()
    };
    let client = ClientBuilder::rustls()
        .unwrap()
        .capabilities(capabilities)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .unwrap();
    Browser {
        client,
        _driver: driver,
    }
}

impl Browser {
    async fn find(&self, css: &str) -> fantoccini::elements::Element {
        self.client
            .wait()
            .at_most(Duration::from_secs(20))
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("{css}: {e}"))
    }

    async fn text(&self, css: &str) -> String {
        // A live update may replace the element between finding and reading it: find it
        // again.
        let mut tries = 0;
        loop {
            match self.find(css).await.text().await {
                Ok(text) => return text,
                Err(error) if tries < 10 => {
                    tries += 1;
                    eprintln!("{css}: {error}; reading it again");
                }
                Err(error) => panic!("{css}: {error}"),
            }
        }
    }

    /// Whether anything the store held ran as script: the payloads set this variable,
    /// and the corpus's call `alert`.
    async fn assert_nothing_ran(&self) {
        let xss = self
            .client
            .execute("return typeof window.__tooltrust_xss;", vec![])
            .await
            .unwrap();
        assert_eq!(xss, "undefined", "a payload ran");
        assert!(
            self.client.get_alert_text().await.is_err(),
            "an alert opened"
        );
    }

    async fn screenshot(&self, name: &str) -> PathBuf {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, self.client.screenshot().await.unwrap()).unwrap();
        path
    }
}

/// The `injection_defense` example's binary, which `cargo test --workspace` builds.
fn example() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|profile| profile.join("examples").join("injection_defense"))
        .unwrap();
    assert!(
        path.exists(),
        "{} is not built: run `cargo test --workspace` (or `cargo build -p tooltrust-store --example injection_defense`)",
        path.display()
    );
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reviewer_approves_the_injection_scenario_and_the_agent_resumes() {
    let Some((chromium, chromedriver)) = tools() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("agent.db");
    let file_arg = file.to_str().unwrap();

    // The agent runs, is fooled, and its email waits in the store.
    let run = Command::new(example())
        .args(["--sqlite", file_arg])
        .output()
        .await
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    // A second agent process waits for the decision; it trusts alice's public key only.
    let reviewers = dir.path().join("reviewers.toml");
    std::fs::write(
        &reviewers,
        format!(
            "[[reviewer]]\nid = \"alice\"\nkey = \"{}\"\ntenants = \"*\"\n",
            common::reviewer_key("alice").public()
        ),
    )
    .unwrap();
    let mut resumed = Command::new(example())
        .args(["--sqlite", file_arg, "--resume", "--wait", "120"])
        .arg("--reviewers")
        .arg(&reviewers)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();

    let location = tooltrust_store::Location::Sqlite(file.clone());
    let store = tooltrust_store::Store::open(&location, common::store_options())
        .await
        .unwrap();
    let console = common::start(common::loopback(&store, "alice")).await;
    let browser = browser(&chromium, &chromedriver).await;
    let client = &browser.client;

    // The address the console printed signs alice in and goes on to the queue.
    client.goto(&console.sign_in).await.unwrap();
    assert!(browser.text("td.tool").await.contains("send_email"));
    browser.screenshot("queue.png").await;
    browser.find("a.open").await.click().await.unwrap();

    // The page: the untrusted blocks marked, the forged tags highlighted, the payload inert.
    assert!(browser.text("h1").await.starts_with("Held call"));
    let untrusted = client
        .find_all(Locator::Css(".block.untrusted .untrusted-label"))
        .await
        .unwrap();
    assert!(untrusted.len() >= 2, "the page and the email");
    assert!(untrusted[0].is_displayed().await.unwrap());
    let marks = client
        .find_all(Locator::Css("mark.neutralised"))
        .await
        .unwrap();
    assert!(
        marks.len() >= 3,
        "the forged closer, the system tag, the chat tokens"
    );
    let context = browser.text("section.context").await;
    assert!(
        context.contains("<script>window.__tooltrust_xss"),
        "shown as text"
    );
    assert!(context.contains("onerror=\"window.__tooltrust_xss = 'onerror'\""));
    assert!(browser.text("pre.args").await.contains("onerror="));
    browser.assert_nothing_ran().await;
    // Tall enough for the context below the call.
    client.set_window_size(1280, 2000).await.unwrap();
    browser.screenshot("held-call.png").await;
    client.set_window_size(1280, 1000).await.unwrap();

    browser
        .find("#reason")
        .await
        .send_keys("Checked with the customer: approved for the demo")
        .await
        .unwrap();
    browser.find("button.approve").await.click().await.unwrap();
    assert!(
        browser
            .text("#notice")
            .await
            .contains("You approved this call")
    );
    assert!(browser.text("#status").await.contains("alice"));
    browser.assert_nothing_ran().await;

    // The agent process picks the approval up, runs the call once and exits.
    let status = tokio::time::timeout(Duration::from_secs(120), resumed.wait())
        .await
        .expect("the agent resumes within 120 s")
        .unwrap();
    let mut out = String::new();
    resumed
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .await
        .unwrap();
    assert!(status.success(), "{out}");
    assert!(out.contains("approved by alice"), "{out}");
    assert!(out.contains("ran: sent to jay@google.com"), "{out}");

    // The chain, verified from the page.
    client.goto(&format!("{}audit", console.url)).await.unwrap();
    browser.find("#verify").await.click().await.unwrap();
    assert!(browser.text("#verified").await.starts_with("ok: "));
    client.clone().close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejection_the_author_refused_live_updates_and_the_corpus_as_text() {
    let Some((chromium, chromedriver)) = tools() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(&dir).await;
    let console = common::start(common::loopback(&store, "alice")).await;
    let browser = browser(&chromium, &chromedriver).await;
    let client = &browser.client;

    // Without the token: the sign-in page, which asks for it.
    client.goto(&console.url).await.unwrap();
    assert_eq!(browser.text("h1").await, "Sign in");
    assert!(
        client
            .find_all(Locator::Css("#queue"))
            .await
            .unwrap()
            .is_empty()
    );
    browser
        .find("input[name=token]")
        .await
        .send_keys(console.token.as_deref().unwrap())
        .await
        .unwrap();
    browser
        .find("form.login button")
        .await
        .click()
        .await
        .unwrap();

    // Live: a call held while the queue is open appears without a reload.
    assert!(
        browser
            .text("#queue")
            .await
            .contains("No held call matches.")
    );
    let corpus = common::corpus_markup();
    let held = common::hold(&store, &corpus, "<img src=x onerror=alert(1)>").await;
    let row = browser
        .find(&format!("tr.call[data-id=\"{}\"]", held.id))
        .await;
    assert!(row.text().await.unwrap().contains("send_email"));

    // Every HTML and JavaScript payload of the corpus, shown as text.
    row.find(Locator::Css("a.open"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let context = browser.text("section.context").await;
    assert!(context.contains("<script>alert(1)</script>"));
    browser.assert_nothing_ran().await;

    // A rejection.
    browser
        .find("#reason")
        .await
        .send_keys("The ticket's customer is not jay@evil.example")
        .await
        .unwrap();
    browser.find("button.reject").await.click().await.unwrap();
    assert!(
        browser
            .text("#notice")
            .await
            .contains("You rejected this call")
    );
    let call = store.get(&held.id).await.unwrap().unwrap();
    assert_eq!(call.status, tooltrust_store::HeldStatus::Rejected);

    // The author of the scope sees the refusal and no way to decide.
    let other = common::hold(&store, common::PAYLOAD, "again").await;
    let author = common::start(common::loopback(&store, common::AUTHOR)).await;
    client.goto(&author.sign_in).await.unwrap();
    client
        .goto(&format!("{}calls/{}", author.url, other.id))
        .await
        .unwrap();
    assert!(
        browser
            .text("#author-refusal")
            .await
            .contains("the author of scope")
    );
    assert!(
        client
            .find_all(Locator::Css("button.approve"))
            .await
            .unwrap()
            .is_empty()
    );
    browser.assert_nothing_ran().await;
    client.clone().close().await.unwrap();
}
