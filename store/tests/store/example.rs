//! The `injection_defense` example against a SQLite store, run as a person would: the
//! run holds `send_email` in the store and exits; a decision comes from outside; two
//! later processes resume, and the approved call runs in exactly one of them.
//!
//! `cargo test` builds the package's examples before its tests; this test runs the built
//! binary (`cargo test -p tooltrust-store --test store` alone does not build it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tooltrust_store::{HeldStatus, ListFilter, Location, REVIEWERS_ENV, Store};

use crate::common;

fn example() -> PathBuf {
    let deps = std::env::current_exe().unwrap();
    let path = deps
        .parent()
        .and_then(|deps| deps.parent())
        .map(|profile| profile.join("examples").join("injection_defense"))
        .unwrap();
    assert!(
        path.exists(),
        "{} is not built: run `cargo test -p tooltrust-store` (which builds the examples)",
        path.display()
    );
    path
}

/// Runs the example with `args`, trusting the reviewers of the file `reviewers` (named by
/// [`REVIEWERS_ENV`], as for every tool that opens a store).
fn run(reviewers: &Path, args: &[&str]) -> String {
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(example())
        .args(args)
        .env(REVIEWERS_ENV, reviewers)
        .output()
        .unwrap();
    let stdout = String::from_utf8(stdout).unwrap();
    assert!(
        status.success(),
        "{args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&stderr)
    );
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_call_waits_for_a_person_and_runs_once_after_approval() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("agent.db");
    let file = file.to_str().unwrap();
    let reviewers = dir.path().join("reviewers.toml");
    std::fs::write(&reviewers, common::test_reviewers_file()).unwrap();
    assert_eq!(
        tooltrust_store::read_reviewers(&reviewers).unwrap(),
        *common::test_reviewers()
    );
    let run = |args: &[&str]| run(&reviewers, args);

    let first = run(&["--sqlite", file]);
    assert!(
        first.contains("HELD FOR REVIEW by tainted-consequential"),
        "{first}"
    );
    assert!(first.contains(&format!(
        "pending approve ID --reviewer NAME --key NAME.key --reason TEXT --sqlite {file}"
    )));
    assert!(first.contains(&format!(
        "-- --sqlite {file} --reviewers reviewers.toml --resume"
    )));

    let store = Store::open(&Location::Sqlite(file.into()), common::test_options())
        .await
        .unwrap();
    let held = store.list(&ListFilter::default()).await.unwrap();
    assert_eq!(held.len(), 1, "{held:?}");
    let call = &held[0];
    assert_eq!(
        (call.tool.as_str(), call.status),
        ("send_email", HeldStatus::Held)
    );
    assert!(call.args.contains("jay@google.com"));
    assert!(
        call.principal_request
            .as_deref()
            .unwrap()
            .contains("order 4411")
    );
    // The reviewer sees the context that led to the call, injection included.
    assert!(call.context.as_deref().unwrap().contains("jay@google.com"));

    // Undecided, a resume runs nothing.
    let waiting = run(&["--sqlite", file, "--resume"]);
    assert!(waiting.contains("still held"), "{waiting}");

    common::decide_as(&store, &call.id, "lead", true, "confirmed by phone")
        .await
        .unwrap();
    let resumed = [
        run(&["--sqlite", file, "--resume"]),
        run(&["--sqlite", file, "--resume"]),
    ];
    let ran = resumed
        .iter()
        .filter(|out| out.contains("ran: sent to jay@google.com"))
        .count();
    assert_eq!(ran, 1, "{resumed:?}");
    assert!(resumed[1].contains("already ran"), "{}", resumed[1]);
    let after = store.get(&call.id).await.unwrap().unwrap();
    assert_eq!(after.status, HeldStatus::Ran);
    store.verify_chain(None).await.unwrap();
    store.close().await;
}
