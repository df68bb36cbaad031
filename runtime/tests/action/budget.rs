//! A session's memory budget (`SessionBuilder::max_kept_bytes`): past it the oldest
//! blocks' text is let go of, each keeping its checksum, the scope its taint, and a copy
//! for reviewers; a forgotten block vouches for nothing, so decisions only get stricter.

use std::sync::Arc;

use tooltrust::call::Checksum;
use tooltrust::event::{Event, MemoryRecorder};
use tooltrust::gate::{ArgumentFromTrustedBlock, Ruling};
use tooltrust::{CallOutcome, Id, Policy, Registry, Scope, Session, Taint, ToolCall, tool};

fn call(scope: &Scope, tool: &str, args: &str) -> CallOutcome {
    pollster::block_on(scope.call(ToolCall::from_model(tool, args).unwrap())).unwrap()
}

/// Fetches a page of `bytes` bytes.
#[tool(untrusted, read_only)]
fn fetch_page(bytes: u32) -> String {
    "page ".repeat(bytes as usize / 5)
}

/// Looks up the account manager.
#[tool(trusted, read_only)]
fn account_manager() -> String {
    "Your account manager is alice@corp.example".into()
}

/// Sends an email.
#[tool(trusted)]
fn send_email(to: String, body: String) -> String {
    format!("sent to {to}: {body}")
}

fn session(budget: Option<usize>) -> (Session, Arc<MemoryRecorder>) {
    let recorder = Arc::new(MemoryRecorder::new());
    let registry = Registry::builder()
        .tool(FetchPage)
        .tool(AccountManager)
        .tool(SendEmail)
        .build()
        .unwrap();
    let mut builder = Session::builder(registry)
        .policy(Policy::new().with_rule(ArgumentFromTrustedBlock::new("send_email", "to")))
        .recorder(recorder.clone());
    if let Some(budget) = budget {
        builder = builder.max_kept_bytes(budget);
    }
    (builder.build().unwrap(), recorder)
}

fn ruling_of(outcome: &CallOutcome) -> Ruling {
    match outcome {
        CallOutcome::Ran { .. } => Ruling::Allow,
        CallOutcome::Pending { .. } => Ruling::NeedsReview,
        _ => Ruling::Deny,
    }
}

const PAGE: usize = 20_000;
const BUDGET: usize = 64 * 1024;

#[test]
fn a_scope_keeps_its_budget_plus_one_block_and_forgets_nothing_a_decision_needs() {
    let email = r#"{"to": "alice@corp.example", "body": "the report"}"#;
    for budget in [None, Some(BUDGET)] {
        let (session, recorder) = session(budget);
        let scope = session.open_scope(Id::new("agent").unwrap()).unwrap();
        let CallOutcome::Ran { block: manager, .. } = call(&scope, "account_manager", "{}") else {
            panic!("the lookup runs")
        };
        for _ in 0..12 {
            call(&scope, "fetch_page", &format!(r#"{{"bytes": {PAGE}}}"#));
        }
        let kept: usize = scope
            .rendered_blocks()
            .unwrap()
            .iter()
            .map(String::len)
            .sum();
        // Hashed, stored and recorded off the call's path: a recall waits for them.
        let recalled = session.forgotten_text(scope.id(), &manager);
        let forgotten: Vec<(Id, usize, Checksum)> = recorder
            .events()
            .into_iter()
            .filter_map(|event| match event {
                Event::BlockForgotten {
                    block,
                    bytes,
                    sha256,
                    ..
                } => Some((block, bytes, sha256)),
                _ => None,
            })
            .collect();
        assert_eq!(scope.taint().unwrap(), Taint::Tainted);
        let outcome = call(&scope, "send_email", email);
        match budget {
            None => {
                assert!(kept > 12 * PAGE, "{kept}");
                assert!(forgotten.is_empty());
                assert!(recalled.is_err(), "nothing was let go of");
                // The manager's block vouches for the address.
                assert_eq!(ruling_of(&outcome), Ruling::Allow, "{outcome:?}");
            }
            Some(budget) => {
                // Text and envelope of the newest page, beyond the budget, at most.
                assert!(kept <= budget + 2 * PAGE + 1024, "{kept} bytes kept");
                assert!(forgotten.len() >= 10, "{forgotten:?}");
                let (_, bytes, sha256) = forgotten
                    .iter()
                    .find(|(block, ..)| *block == manager)
                    .expect("the oldest block is let go of first");
                let text = recalled.unwrap();
                assert_eq!(text.len(), *bytes);
                assert_eq!(Checksum::of(text.as_bytes()), *sha256);
                assert!(text.contains("alice@corp.example"));
                // Forgotten, it vouches for nothing: the call is held, never let through.
                assert_eq!(ruling_of(&outcome), Ruling::NeedsReview, "{outcome:?}");
            }
        }
    }
}

#[test]
fn a_block_still_kept_cannot_be_recalled() {
    let (session, _) = session(Some(BUDGET));
    let scope = session.open_scope(Id::new("agent").unwrap()).unwrap();
    let CallOutcome::Ran { block, .. } = call(&scope, "account_manager", "{}") else {
        panic!("the lookup runs")
    };
    assert!(session.forgotten_text(scope.id(), &block).is_err());
}
