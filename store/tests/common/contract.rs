//! The behaviour both engines must show, each case a function over a fresh [`TestDb`];
//! `tests/store/sqlite.rs` and `tests/store/postgres.rs` run every one.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use sqlx::Row;
use tooltrust::Id;
use tooltrust::audit::{Body, GENESIS, Head, ProvenanceFault, VerifyErrorKind, Writers};
use tooltrust::call::Checksum;
use tooltrust::canonical::canonical_json;
use tooltrust::event::{Event, Recorder};
use tooltrust::held::{DecisionError, SignedDecision};
use tooltrust_store::{
    ChainError, ClaimError, ConversationError, DecideError, EntryFilter, HeldCall, HeldStatus,
    HoldError, ListFilter, SCHEMA_VERSION, SealedCopy, Store, StoreError, StoreOptions,
    StoreRecorder, WaitError, WaitOptions,
};

use super::{TestDb, decide_as, held, id, numbered, sign_as, test_key};

/// The lines of a tenant's chain, in seq order, read with a plain connection.
pub async fn chain_lines(db: &TestDb, tenant: &str) -> Vec<String> {
    let pool = db.raw().await;
    let rows = sqlx::query("SELECT line FROM chain_entry WHERE tenant = $1 ORDER BY seq")
        .bind(tenant)
        .fetch_all(&pool)
        .await
        .unwrap();
    pool.close().await;
    rows.iter().map(|row| row.get::<String, _>(0)).collect()
}

/// The entries of a tenant's chain as JSON objects.
pub async fn chain_entries(db: &TestDb, tenant: &str) -> Vec<Value> {
    chain_lines(db, tenant)
        .await
        .iter()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Holds a call to `send_email` with `args`, made by scope `support` of author `ann`.
async fn hold(store: &Store, args: &str) -> tooltrust_store::HeldCall {
    store
        .hold(&held("send_email", args, "default", "support", "ann"))
        .await
        .unwrap()
}

pub async fn hold_list_get(db: &TestDb) {
    let store = db.open().await;
    let first = hold(&store, r#"{"to":"eve@evil.example","body":"hi"}"#).await;
    let second = store
        .hold(&held(
            "wire_money",
            r#"{"amount": 1e3, "to": "eve"}"#,
            "default",
            "billing",
            "bob",
        ))
        .await
        .unwrap();
    let third = store
        .hold(&held(
            "send_email",
            r#"{"to":"carl"}"#,
            "acme",
            "support",
            "ann",
        ))
        .await
        .unwrap();
    // Stored as given, the arguments canonical, the time set by the store.
    assert_eq!(second.args, r#"{"amount":1000,"to":"eve"}"#);
    assert_eq!(second.status, HeldStatus::Held);
    assert!(first.created_at <= second.created_at && second.created_at <= third.created_at);
    assert_eq!(store.get(&first.id).await.unwrap(), Some(first.clone()));
    assert_eq!(store.get(&id("nope")).await.unwrap(), None);

    let ids =
        |calls: Vec<tooltrust_store::HeldCall>| calls.into_iter().map(|c| c.id).collect::<Vec<_>>();
    let all = store.list(&ListFilter::default()).await.unwrap();
    assert_eq!(
        ids(all),
        [third.id.clone(), second.id.clone(), first.id.clone()]
    );
    let filter = ListFilter {
        tool: Some("send_email".to_owned()),
        ..ListFilter::default()
    };
    assert_eq!(
        ids(store.list(&filter).await.unwrap()),
        [third.id.clone(), first.id.clone()]
    );
    let filter = ListFilter {
        tenant: Some(id("default")),
        scope: Some(id("support")),
        ..ListFilter::default()
    };
    assert_eq!(
        ids(store.list(&filter).await.unwrap()),
        std::slice::from_ref(&first.id)
    );
    let filter = ListFilter {
        limit: Some(1),
        ..ListFilter::default()
    };
    assert_eq!(
        ids(store.list(&filter).await.unwrap()),
        std::slice::from_ref(&third.id)
    );
    // Paging: each page starts after the last call of the one before, in the same order.
    let mut paged = Vec::new();
    let mut before = None;
    loop {
        let filter = ListFilter {
            before: before.clone(),
            limit: Some(1),
            ..ListFilter::default()
        };
        let page = ids(store.list(&filter).await.unwrap());
        let Some(last) = page.last().cloned() else {
            break;
        };
        paged.extend(page);
        before = Some(last);
    }
    assert_eq!(
        paged,
        [third.id.clone(), second.id.clone(), first.id.clone()]
    );
    let filter = ListFilter {
        tool: Some("send_email".to_owned()),
        before: Some(third.id.clone()),
        ..ListFilter::default()
    };
    assert_eq!(
        ids(store.list(&filter).await.unwrap()),
        std::slice::from_ref(&first.id)
    );
    let filter = ListFilter {
        before: Some(id("nope")),
        ..ListFilter::default()
    };
    assert!(store.list(&filter).await.unwrap().is_empty());
    let filter = ListFilter {
        status: Some(HeldStatus::Approved),
        ..ListFilter::default()
    };
    assert!(store.list(&filter).await.unwrap().is_empty());

    // What cannot be held.
    assert!(matches!(store.hold(&first).await, Err(HoldError::Duplicate(d)) if d == first.id));
    let mut decided = held("send_email", "{}", "default", "s", "a");
    decided.status = HeldStatus::Approved;
    assert!(matches!(
        store.hold(&decided).await,
        Err(HoldError::NotHeld(_))
    ));
    let mut spaced = held("send_email", r#"{"to":"x"}"#, "default", "s", "a");
    spaced.args = r#"{"to": "x"}"#.to_owned();
    assert!(matches!(
        store.hold(&spaced).await,
        Err(HoldError::BadArgs { .. })
    ));
    let mut array = held("send_email", "{}", "default", "s", "a");
    array.args = "[]".to_owned();
    assert!(matches!(
        store.hold(&array).await,
        Err(HoldError::BadArgs { .. })
    ));
    let mut forged = held("send_email", r#"{"to":"x"}"#, "default", "s", "a");
    forged.args = r#"{"to":"eve"}"#.to_owned();
    assert!(matches!(
        store.hold(&forged).await,
        Err(HoldError::ChecksumMismatch { .. })
    ));
    assert_eq!(store.list(&ListFilter::default()).await.unwrap().len(), 3);
}

pub async fn decisions_follow_the_rules(db: &TestDb) {
    let store = db.open().await;
    let call = hold(&store, r#"{"to":"eve"}"#).await;
    let other = hold(&store, r#"{"to":"bob"}"#).await;

    // The scope's author cannot decide; a decision needs a reason; unknown ids are errors.
    let refused = decide_as(&store, &call.id, "ann", true, "looks fine").await;
    assert!(
        matches!(&refused, Err(DecideError::AuthorCannotDecide { reviewer, .. }) if reviewer.as_str() == "ann"),
        "{refused:?}"
    );
    assert!(matches!(
        decide_as(&store, &call.id, "rita", true, "  ").await,
        Err(DecideError::NoReason)
    ));
    assert!(matches!(
        decide_as(&store, &id("unknown"), "rita", true, "ok").await,
        Err(DecideError::UnknownCall(_))
    ));
    assert_eq!(
        store.get(&call.id).await.unwrap().unwrap().status,
        HeldStatus::Held
    );

    let approved = decide_as(&store, &call.id, "rita", true, "the principal asked for it")
        .await
        .unwrap();
    assert_eq!(approved.status, HeldStatus::Approved);
    assert_eq!(approved.decided_by, Some(id("rita")));
    assert_eq!(
        approved.decision_reason.as_deref(),
        Some("the principal asked for it")
    );
    assert_eq!(store.get(&call.id).await.unwrap(), Some(approved.clone()));

    // A second decision, either way, changes nothing.
    let again = decide_as(&store, &call.id, "sam", false, "no").await;
    assert!(
        matches!(
            again,
            Err(DecideError::AlreadyDecided {
                status: HeldStatus::Approved,
                ..
            })
        ),
        "{again:?}"
    );
    assert_eq!(store.get(&call.id).await.unwrap(), Some(approved));

    let rejected = decide_as(&store, &other.id, "sam", false, "exfiltration")
        .await
        .unwrap();
    assert_eq!(rejected.status, HeldStatus::Rejected);

    // The chain holds the holds, the decisions and the refusals, in order, and verifies.
    let entries = chain_entries(db, "default").await;
    let kinds: Vec<_> = entries
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "call_held",
            "call_held",
            "call_decision_refused",
            "call_decided",
            "call_decision_refused",
            "call_decided"
        ]
    );
    assert_eq!(entries[0]["call"], json!(call.id));
    assert_eq!(entries[0]["scope"], json!(call.scope));
    assert_eq!(entries[3]["call"], json!(call.id));
    assert_eq!(entries[3]["checksum"], json!(call.checksum));
    assert_eq!(entries[3]["reviewer"], json!("rita"));
    assert_eq!(entries[3]["decision"], json!("approved"));
    // The entry carries the reviewer's signed statement: what a claim checks.
    let signed = &entries[3]["signed"];
    assert_eq!(signed["statement"]["call"], json!(call.id));
    assert_eq!(signed["statement"]["reviewer"], json!("rita"));
    assert_eq!(signed["statement"]["decision"], json!("approved"));
    assert_eq!(signed["statement"]["scope"], json!(call.scope));
    assert_eq!(signed["statement"]["checksum"], json!(call.checksum));
    assert_eq!(signed["statement"]["expires_at"], json!(call.expires_at));
    assert_eq!(signed["signature"].as_str().map(str::len), Some(128));
    let signed: tooltrust::held::SignedDecision = serde_json::from_value(signed.clone()).unwrap();
    assert_eq!(
        store.get(&call.id).await.unwrap().unwrap().decision,
        Some(signed)
    );
    assert_eq!(entries[5]["decision"], json!("rejected"));
    assert_eq!(entries[5]["signed"]["statement"]["reviewer"], json!("sam"));
    assert_eq!(entries[2]["refusal"], json!("the author cannot decide"));
    assert_eq!(entries[4]["refusal"], json!("already approved"));
    assert_eq!(store.verify_chain(None).await.unwrap().entries, 6);
}

pub async fn claims_run_a_call_once(db: &TestDb) {
    let store = db.open().await;
    let call = hold(&store, r#"{"to":"eve"}"#).await;
    assert!(matches!(
        store.claim_to_run(&call.id, &call.binding()).await,
        Err(ClaimError::NotApproved {
            status: HeldStatus::Held,
            ..
        })
    ));
    decide_as(&store, &call.id, "rita", true, "fine")
        .await
        .unwrap();
    let claimed = store.claim_to_run(&call.id, &call.binding()).await.unwrap();
    assert_eq!(claimed.status, HeldStatus::Claimed);
    assert!(matches!(
        store.claim_to_run(&call.id, &call.binding()).await,
        Err(ClaimError::AlreadyClaimed { .. })
    ));
    let ran = store.finish_claimed(&call.id, true).await.unwrap();
    assert_eq!(ran.status, HeldStatus::Ran);
    assert!(store.finish_claimed(&call.id, false).await.is_err());
    assert!(matches!(
        store.claim_to_run(&id("unknown"), &call.binding()).await,
        Err(ClaimError::UnknownCall(_))
    ));
    let rejected = hold(&store, r#"{"to":"bob"}"#).await;
    decide_as(&store, &rejected.id, "rita", false, "no")
        .await
        .unwrap();
    assert!(matches!(
        store.claim_to_run(&rejected.id, &rejected.binding()).await,
        Err(ClaimError::NotApproved {
            status: HeldStatus::Rejected,
            ..
        })
    ));
    let kinds: Vec<_> = chain_entries(db, "default")
        .await
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        kinds,
        [
            "call_held",
            "call_decided",
            "call_claimed",
            "call_finished",
            "call_held",
            "call_decided"
        ]
    );
}

/// An approval is spent only by the call it binds: another scope (another session of the
/// same host, say), another tenant, tool, checksum or upstream is refused, recorded, and
/// leaves the approval unspent for its own scope.
pub async fn approvals_are_bound_to_their_scope_and_call(db: &TestDb) {
    let store = db.open().await;
    let call = hold(&store, r#"{"to":"eve"}"#).await;
    decide_as(&store, &call.id, "rita", true, "fine")
        .await
        .unwrap();
    let bound = call.binding();
    let others = [
        (
            "scope",
            tooltrust_store::Binding {
                scope: id("another-session"),
                ..bound.clone()
            },
        ),
        (
            "tenant",
            tooltrust_store::Binding {
                tenant: id("acme"),
                ..bound.clone()
            },
        ),
        (
            "tool",
            tooltrust_store::Binding {
                tool: "wire_money".into(),
                ..bound.clone()
            },
        ),
        (
            "checksum",
            tooltrust_store::Binding {
                checksum: tooltrust::call::Checksum::of(b"other"),
                ..bound.clone()
            },
        ),
        (
            "upstream",
            tooltrust_store::Binding {
                upstream: Some("mail".into()),
                ..bound.clone()
            },
        ),
    ];
    for (field, other) in others {
        match store.claim_to_run(&call.id, &other).await {
            Err(ClaimError::BindingMismatch { field: named, .. }) => assert_eq!(named, field),
            other => panic!("{field}: {other:?}"),
        }
    }
    assert_eq!(
        store.get(&call.id).await.unwrap().unwrap().status,
        HeldStatus::Approved
    );
    store.claim_to_run(&call.id, &bound).await.unwrap();
    let refused = chain_entries(db, "default")
        .await
        .iter()
        .filter(|e| e["event"] == "call_claim_refused")
        .count();
    assert_eq!(refused, 5);
    assert_eq!(store.verify_chain(None).await.unwrap().entries, 8);
}

/// A row set to approved by a hand on the database, with no decision in the chain, runs
/// nothing: the claim is refused and the refusal recorded. So is an expired approval.
pub async fn approvals_need_their_decision_in_the_chain_and_expire(db: &TestDb) {
    let store = db.open().await;
    let call = hold(&store, r#"{"to":"eve"}"#).await;
    db.tamper(&format!(
        "UPDATE pending_call SET status = 'approved', decided_by = 'rita' WHERE id = '{}'",
        call.id
    ))
    .await;
    assert!(matches!(
        store.claim_to_run(&call.id, &call.binding()).await,
        Err(ClaimError::NoRecordedApproval(_))
    ));
    // A decision on another call does not vouch for this one either.
    let other = hold(&store, r#"{"to":"bob"}"#).await;
    decide_as(&store, &other.id, "rita", true, "fine")
        .await
        .unwrap();
    assert!(matches!(
        store.claim_to_run(&call.id, &call.binding()).await,
        Err(ClaimError::NoRecordedApproval(_))
    ));
    let kinds: Vec<_> = chain_entries(db, "default")
        .await
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        kinds,
        [
            "call_held",
            "call_claim_refused",
            "call_held",
            "call_decided",
            "call_claim_refused"
        ]
    );

    // Expiry: a call past its expiry can be neither decided nor claimed.
    let mut short = held(
        "send_email",
        r#"{"to":"carol"}"#,
        "default",
        "support",
        "ann",
    );
    short.expires_at = Some("2000-01-01T00:00:00Z".into());
    let short = store.hold(&short).await.unwrap();
    let late = decide_as(&store, &short.id, "rita", true, "late").await;
    assert!(matches!(late, Err(DecideError::Expired { .. })), "{late:?}");
    assert_eq!(
        store.get(&short.id).await.unwrap().unwrap().status,
        HeldStatus::Expired
    );
    let approved = hold(&store, r#"{"to":"dave"}"#).await;
    decide_as(&store, &approved.id, "rita", true, "fine")
        .await
        .unwrap();
    db.tamper(&format!(
        "UPDATE pending_call SET expires_at = '2000-01-01T00:00:00Z' WHERE id = '{}'",
        approved.id
    ))
    .await;
    assert!(matches!(
        store.claim_to_run(&approved.id, &approved.binding()).await,
        Err(ClaimError::Expired { .. })
    ));
    assert_eq!(
        store.get(&approved.id).await.unwrap().unwrap().status,
        HeldStatus::Expired
    );
}

/// Eight deciders (each with a pool of its own, as separate processes would have) race
/// on every call, then eight claimers do: each call is decided once and runs once.
pub async fn concurrent_deciders_decide_once(db: &TestDb) {
    let store = db.open().await;
    let mut ids = Vec::new();
    for n in 0..24 {
        ids.push(store.hold(&numbered(n, "ann")).await.unwrap().id);
    }
    let ids = Arc::new(ids);
    let race = |claim: bool| {
        let ids = ids.clone();
        async move {
            let mut tasks = Vec::new();
            for worker in 0..8 {
                let store = Store::open(&db.location, db.options.clone()).await.unwrap();
                let ids = ids.clone();
                tasks.push(tokio::spawn(async move {
                    let mut won = Vec::new();
                    for (i, call) in ids
                        .iter()
                        .enumerate()
                        .cycle()
                        .skip(worker * 3)
                        .take(ids.len())
                    {
                        let reviewer = id(&format!("reviewer-{worker}"));
                        let outcome = if claim {
                            let binding = store.get(call).await.unwrap().unwrap().binding();
                            match store.claim_to_run(call, &binding).await {
                                Ok(_) => true,
                                Err(ClaimError::AlreadyClaimed { .. }) => false,
                                Err(ClaimError::NotApproved {
                                    status: HeldStatus::Rejected,
                                    ..
                                }) => false,
                                Err(other) => panic!("claim {i}: {other}"),
                            }
                        } else {
                            match decide_as(&store, call, reviewer.as_str(), i % 3 != 0, "race")
                                .await
                            {
                                Ok(_) => true,
                                Err(DecideError::AlreadyDecided { .. }) => false,
                                Err(other) => panic!("decide {i}: {other}"),
                            }
                        };
                        if outcome {
                            won.push(call.clone());
                        }
                    }
                    store.close().await;
                    won
                }));
            }
            let mut won = Vec::new();
            for task in tasks {
                won.extend(task.await.unwrap());
            }
            won
        }
    };
    let decided = race(false).await;
    assert_eq!(decided.len(), ids.len(), "every call decided exactly once");
    assert_eq!(decided.iter().collect::<HashSet<_>>().len(), ids.len());
    let claimed = race(true).await;
    let approved: HashSet<_> = ids
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 3 != 0)
        .map(|(_, c)| c.clone())
        .collect();
    assert_eq!(
        claimed.len(),
        approved.len(),
        "every approved call claimed exactly once"
    );
    assert_eq!(claimed.into_iter().collect::<HashSet<_>>(), approved);

    let entries = chain_entries(db, "default").await;
    let count = |kind: &str| {
        let mut per_call: BTreeMap<String, usize> = BTreeMap::new();
        for entry in entries.iter().filter(|e| e["event"] == kind) {
            *per_call
                .entry(entry["call"].as_str().unwrap().to_owned())
                .or_default() += 1;
        }
        per_call
    };
    assert_eq!(count("call_decided").len(), ids.len());
    assert!(count("call_decided").values().all(|&n| n == 1));
    assert_eq!(count("call_claimed").len(), approved.len());
    assert!(count("call_claimed").values().all(|&n| n == 1));
    store.verify_chain(None).await.unwrap();
}

pub async fn waiting_sees_a_decision_from_elsewhere(db: &TestDb) {
    let store = db.open().await;
    let call = hold(&store, r#"{"to":"eve"}"#).await;
    let quick = WaitOptions {
        timeout: Some(Duration::from_millis(200)),
        min_poll: Duration::from_millis(10),
        max_poll: Duration::from_millis(50),
    };
    assert!(matches!(
        store.wait_decision(&call.id, quick).await,
        Err(WaitError::TimedOut(_))
    ));
    assert!(matches!(
        store.wait_decision(&id("unknown"), quick).await,
        Err(WaitError::UnknownCall(_))
    ));
    // Another handle (another pool) decides while this one waits, with long pauses: on
    // PostgreSQL the notification ends the pause, on SQLite the first pause is short.
    let reviewer = Store::open(&db.location, db.options.clone()).await.unwrap();
    let decider = {
        let call = call.id.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            decide_as(&reviewer, &call, "rita", true, "ok")
                .await
                .unwrap();
        })
    };
    let waiting = WaitOptions {
        timeout: Some(Duration::from_secs(20)),
        min_poll: Duration::from_millis(20),
        max_poll: Duration::from_secs(10),
    };
    let decided = store.wait_decision(&call.id, waiting).await.unwrap();
    decider.await.unwrap();
    assert_eq!(decided.status, HeldStatus::Approved);
}

/// The chain's rows are the file log's lines: written to a file, they verify with the
/// file verifier to the same head.
pub async fn appends_chain_like_the_file_log(db: &TestDb) {
    let store = db.open().await;
    let mut tasks = Vec::new();
    for writer in 0..32 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut receipts = Vec::new();
            for n in 0..10 {
                let event = json!({"event": "tool_ran", "writer": writer, "n": n, "text": "ünïcode \u{2028}"});
                receipts.push(store.append(&event).await.unwrap());
            }
            receipts
        }));
    }
    let mut receipts = Vec::new();
    for task in tasks {
        receipts.extend(task.await.unwrap());
    }
    let batch = store
        .append_all(&[json!({"event": "a"}), json!({"event": "b"})])
        .await
        .unwrap();
    assert_eq!(batch[1].seq, batch[0].seq + 1);
    receipts.extend(batch);
    receipts.sort_by_key(|r| r.seq);
    assert_eq!(
        receipts.iter().map(|r| r.seq).collect::<Vec<_>>(),
        (1..=322).collect::<Vec<_>>(),
        "every acknowledged append has its own seq, none missing"
    );
    let report = store.verify_chain(None).await.unwrap();
    assert_eq!(report.entries, 322);
    assert_eq!(report.head.hash, receipts[321].hash);
    assert_eq!(store.head().await.unwrap(), report.head);

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("audit.jsonl");
    let text: String = chain_lines(db, "default")
        .await
        .iter()
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&file, text).unwrap();
    let from_file = tooltrust::audit::verify(&file, Some(&report.head)).unwrap();
    assert_eq!(from_file, report);

    // Events of the wrong shape are refused before anything is written.
    assert!(matches!(
        store.append(&json!({"seq": 1})).await,
        Err(StoreError::Event(_))
    ));
    assert!(matches!(
        store.append(&json!({"event": "x", "hash": "y"})).await,
        Err(StoreError::Event(_))
    ));
    // Tenants have chains of their own.
    let acme = store.for_tenant(id("acme"));
    assert_eq!(acme.append(&json!({"event": "x"})).await.unwrap().seq, 1);
    assert_eq!(acme.verify_chain(None).await.unwrap().entries, 1);
    assert_eq!(store.verify_chain(None).await.unwrap().entries, 322);
    // A pinned head the chain still holds verifies; one it does not is named.
    assert!(
        store
            .verify_chain(Some(receipts[99].into_head()))
            .await
            .is_ok()
    );
    let stranger = Head {
        seq: 100,
        hash: GENESIS,
    };
    assert!(matches!(
        store.verify_chain(Some(stranger)).await,
        Err(ChainError::Invalid(e)) if matches!(e.kind, VerifyErrorKind::HeadMismatch { .. })
    ));
    let beyond = Head {
        seq: 400,
        hash: GENESIS,
    };
    assert!(matches!(
        store.verify_chain(Some(beyond)).await,
        Err(ChainError::Invalid(e)) if matches!(e.kind, VerifyErrorKind::Truncated { .. })
    ));
}

trait IntoHead {
    fn into_head(self) -> Head;
}

impl IntoHead for tooltrust::audit::Receipt {
    fn into_head(self) -> Head {
        Head {
            seq: self.seq,
            hash: self.hash,
        }
    }
}

/// The recorder commits from plain threads and from inside async code alike.
pub async fn the_recorder_records_from_any_context(db: &TestDb) {
    let (location, options) = (db.location.clone(), db.options.clone());
    let recorder = tokio::task::spawn_blocking(move || StoreRecorder::open(location, options))
        .await
        .unwrap()
        .unwrap();
    let recorder = Arc::new(recorder);
    let event = |n: usize| Event::TaintAssigned {
        scope: id("support"),
        block: id(&format!("b{n}")),
        source: "tool:fetch_page".to_owned(),
    };
    // From synchronous threads, concurrently.
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let recorder = recorder.clone();
            std::thread::spawn(move || {
                for n in 0..5 {
                    recorder.record(&event(t * 10 + n)).unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    // From inside a current-thread runtime (this test's own runtime may be either).
    let inner = recorder.clone();
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(async { inner.record(&event(99)).unwrap() })
    })
    .join()
    .unwrap();
    let batch = recorder.append_all(&[event(100), event(101)]).unwrap();
    assert_eq!(batch.len(), 2);
    drop(recorder);
    let store = db.open().await;
    assert_eq!(store.verify_chain(None).await.unwrap().entries, 43);
    let entries = chain_entries(db, "default").await;
    assert!(entries.iter().all(|e| e["event"] == "taint_assigned"));
    assert_eq!(entries.iter().filter(|e| e["block"] == "b99").count(), 1);
}

/// Damage to the chain's rows is found by verification and refused by appends.
pub async fn damaged_chains_are_found(db: &TestDb) {
    let store = db.open().await;
    for n in 0..6 {
        store.append(&json!({"event": "e", "n": n})).await.unwrap();
    }
    let lines = chain_lines(db, "default").await;
    let first_bad = |result: Result<_, ChainError>| match result {
        Err(ChainError::Invalid(error)) => (error.seq, error.kind),
        other => panic!("expected a bad entry, got {other:?}"),
    };
    let set_line = |seq: u64, line: &str| {
        format!(
            "UPDATE chain_entry SET line = '{}' WHERE tenant = 'default' AND seq = {seq}",
            line.replace('\'', "''")
        )
    };

    // One byte of an entry edited.
    db.tamper(&set_line(3, &lines[2].replace("\"n\":2", "\"n\":7")))
        .await;
    let (seq, kind) = first_bad(store.verify_chain(None).await);
    assert_eq!(seq, 3);
    assert!(
        matches!(kind, VerifyErrorKind::HashMismatch { .. }),
        "{kind:?}"
    );
    db.tamper(&set_line(3, &lines[2])).await;
    assert_eq!(store.verify_chain(None).await.unwrap().entries, 6);

    // An entry re-sealed, validly, after the wrong previous entry (a swapped prev).
    let entry: Value = serde_json::from_str(&lines[3]).unwrap();
    let before_last: Value = serde_json::from_str(&lines[1]).unwrap();
    let wrong_prev: tooltrust::call::Checksum =
        before_last["hash"].as_str().unwrap().parse().unwrap();
    let (forged, _) = Body::of(&json!({"event": "e", "n": 3}))
        .unwrap()
        .seal(4, entry["ts"].as_str().unwrap().to_owned(), &wrong_prev)
        .unwrap();
    db.tamper(&set_line(
        4,
        std::str::from_utf8(&forged[..forged.len() - 1]).unwrap(),
    ))
    .await;
    let (seq, kind) = first_bad(store.verify_chain(None).await);
    assert_eq!(seq, 4);
    assert!(
        matches!(kind, VerifyErrorKind::ChainBroken { .. }),
        "{kind:?}"
    );
    db.tamper(&set_line(4, &lines[3])).await;

    // A middle entry deleted.
    db.tamper("DELETE FROM chain_entry WHERE tenant = 'default' AND seq = 2")
        .await;
    let (seq, kind) = first_bad(store.verify_chain(None).await);
    assert_eq!(seq, 2);
    assert!(
        matches!(kind, VerifyErrorKind::SeqMismatch { found: 3, .. }),
        "{kind:?}"
    );
    db.tamper(&format!(
        "INSERT INTO chain_entry (tenant, seq, line) VALUES ('default', 2, '{}')",
        lines[1].replace('\'', "''")
    ))
    .await;

    // The last entry deleted: the chain is short of its head row, and appends refuse
    // to continue it.
    db.tamper("DELETE FROM chain_entry WHERE tenant = 'default' AND seq = 6")
        .await;
    let (seq, kind) = first_bad(store.verify_chain(None).await);
    assert_eq!(seq, 6);
    assert!(
        matches!(
            kind,
            VerifyErrorKind::Truncated {
                last: 5,
                head_seq: 6
            }
        ),
        "{kind:?}"
    );
    let refused = store.append(&json!({"event": "after"})).await;
    assert!(
        matches!(refused, Err(StoreError::ChainDamaged { seq: 6, .. })),
        "{refused:?}"
    );
    db.tamper(&format!(
        "INSERT INTO chain_entry (tenant, seq, line) VALUES ('default', 6, '{}')",
        lines[5].replace('\'', "''")
    ))
    .await;

    // The head row set back, or deleted.
    db.tamper("UPDATE chain_head SET seq = 5 WHERE tenant = 'default'")
        .await;
    assert!(matches!(
        store.verify_chain(None).await,
        Err(ChainError::Invalid(e)) if matches!(e.kind, VerifyErrorKind::HeadMismatch { .. })
    ));
    assert!(matches!(
        store.append(&json!({"event": "after"})).await,
        Err(StoreError::ChainDamaged { .. })
    ));
    let head = serde_json::from_str::<Value>(&lines[4]).unwrap()["hash"].clone();
    db.tamper(&format!(
        "UPDATE chain_head SET hash = '{}' WHERE tenant = 'default'",
        head.as_str().unwrap()
    ))
    .await;
    assert!(matches!(
        store.verify_chain(None).await,
        Err(ChainError::PastHead {
            head: 5,
            last: 6,
            ..
        })
    ));
    db.tamper("DELETE FROM chain_head WHERE tenant = 'default'")
        .await;
    assert!(matches!(
        store.verify_chain(None).await,
        Err(ChainError::HeadMissing(_))
    ));
    assert!(matches!(
        store.append(&json!({"event": "after"})).await,
        Err(StoreError::ChainDamaged { .. })
    ));
    assert_eq!(
        chain_lines(db, "default").await,
        lines,
        "nothing was lost or added"
    );
}

/// A pending row edited into something the store never writes is refused on reading.
pub async fn damaged_calls_are_refused(db: &TestDb) {
    let store = db.open().await;
    let call = hold(&store, r#"{"to":"eve"}"#).await;
    db.tamper(&format!(
        "UPDATE pending_call SET author = 'a b' WHERE id = '{}'",
        call.id
    ))
    .await;
    assert!(matches!(
        store.get(&call.id).await,
        Err(StoreError::CorruptRow { .. })
    ));
    assert!(matches!(
        decide_as(&store, &call.id, "rita", true, "ok").await,
        Err(DecideError::Store(StoreError::CorruptRow { .. }))
    ));
    // The schema's own check keeps statuses to the four the store knows.
    let pool = db.raw().await;
    let edited = sqlx::query("UPDATE pending_call SET status = 'maybe' WHERE id = $1")
        .bind(call.id.as_str())
        .execute(&pool)
        .await;
    assert!(edited.is_err());
    pool.close().await;
}

pub async fn quarantine_and_conversations_round_trip(db: &TestDb) {
    let store = db.open().await;
    let copy = SealedCopy {
        key: id("out-1"),
        reader: id("judge"),
        target: id("child"),
        sealed: (0..=255u8).chain(0..=255).collect(),
    };
    store.put_sealed(&copy).await.unwrap();
    assert_eq!(
        store.get_sealed(&copy.key, &copy.reader).await.unwrap(),
        Some(copy.clone())
    );
    let rewrapped = SealedCopy {
        sealed: vec![7; 80],
        ..copy.clone()
    };
    store.put_sealed(&rewrapped).await.unwrap();
    assert_eq!(
        store.get_sealed(&copy.key, &copy.reader).await.unwrap(),
        Some(rewrapped)
    );
    assert_eq!(
        store.list_sealed().await.unwrap(),
        [(id("out-1"), id("judge"))]
    );
    let other = SealedCopy {
        key: id("out-2"),
        target: id("sibling"),
        ..copy.clone()
    };
    store.put_sealed(&other).await.unwrap();
    assert_eq!(
        store.sealed_by(&id("child")).await.unwrap(),
        [(id("out-1"), id("judge"))]
    );
    assert_eq!(
        store.sealed_by(&id("sibling")).await.unwrap(),
        [(id("out-2"), id("judge"))]
    );
    assert_eq!(store.list_sealed().await.unwrap().len(), 2);
    let acme = store.for_tenant(id("acme"));
    assert_eq!(
        acme.get_sealed(&copy.key, &copy.reader).await.unwrap(),
        None
    );

    let conversation = id("conv-1");
    let body = json!({"version": 1, "messages": [{"role": "user", "content": "héllo", "n": 0.1}]});
    assert_eq!(store.load_conversation(&conversation).await.unwrap(), None);
    assert_eq!(
        store
            .save_conversation_if(&conversation, &body, 0)
            .await
            .unwrap(),
        1
    );
    let loaded = store
        .load_conversation(&conversation)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((loaded.revision, &loaded.body), (1, &body));
    let conflict = store
        .save_conversation_if(&conversation, &json!({}), 0)
        .await;
    assert!(matches!(
        conflict,
        Err(ConversationError::RevisionConflict {
            expected: 0,
            found: 1,
            ..
        })
    ));
    assert_eq!(
        store
            .save_conversation(&conversation, &json!({"v": 2}))
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        store
            .save_conversation_if(&conversation, &json!({"v": 3}), 2)
            .await
            .unwrap(),
        3
    );
    assert_eq!(
        store
            .load_conversation(&conversation)
            .await
            .unwrap()
            .unwrap()
            .body,
        json!({"v": 3})
    );
    assert_eq!(acme.load_conversation(&conversation).await.unwrap(), None);

    // Two first saves at once: one wins, the other is told.
    let other = id("conv-2");
    let second = Store::open(&db.location, db.options.clone()).await.unwrap();
    let (first_body, second_body) = (json!("a"), json!("b"));
    let (a, b) = tokio::join!(
        store.save_conversation_if(&other, &first_body, 0),
        second.save_conversation_if(&other, &second_body, 0)
    );
    assert!(a.is_ok() != b.is_ok(), "{a:?} {b:?}");
}

/// A newer schema is refused by this build; an altered one too.
pub async fn declarations_entries_and_marks_read_back(db: &TestDb) {
    let store = db.open().await;
    let empty = store.queue_mark().await.unwrap();

    // A declaration is kept as given; one that is not a JSON object is refused.
    let mut call = held("send_email", r#"{"to":"eve"}"#, "default", "support", "ann");
    call.declaration = Some(r#"{"effects":"consequential","trust":"trusted"}"#.into());
    let stored = store.hold(&call).await.unwrap();
    assert_eq!(
        store.get(&stored.id).await.unwrap().unwrap().declaration,
        call.declaration
    );
    let mut bad = held("send_email", r#"{"to":"bob"}"#, "default", "support", "ann");
    bad.declaration = Some("[1]".into());
    assert!(matches!(
        store.hold(&bad).await,
        Err(HoldError::BadDeclaration(_))
    ));

    // The mark moves when a call is held and when one is decided.
    let held_mark = store.queue_mark().await.unwrap();
    assert_ne!(held_mark, empty);
    decide_as(&store, &stored.id, "rita", false, "no")
        .await
        .unwrap();
    let decided_mark = store.queue_mark().await.unwrap();
    assert_ne!(decided_mark, held_mark);
    assert_eq!(store.queue_mark().await.unwrap(), decided_mark);

    // Entries come back newest first, searched without regard to ASCII case, with LIKE's
    // wildcards taken literally, paged by `before`.
    for text in ["Alpha 100%", "beta_1", "gamma"] {
        store
            .append(&json!({"event": "note", "text": text}))
            .await
            .unwrap();
    }
    let all = store.chain_entries(&EntryFilter::default()).await.unwrap();
    // The hold and the decision came first.
    assert_eq!(
        all.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [5, 4, 3, 2, 1]
    );
    assert_eq!(all[0].line, chain_lines(db, "default").await[4]);
    let search = |text: &str| EntryFilter {
        contains: Some(text.into()),
        ..EntryFilter::default()
    };
    let seqs = |entries: Vec<tooltrust_store::ChainEntry>| {
        entries.iter().map(|e| e.seq).collect::<Vec<_>>()
    };
    assert_eq!(
        seqs(store.chain_entries(&search("ALPHA")).await.unwrap()),
        [3]
    );
    assert_eq!(
        seqs(store.chain_entries(&search("100%")).await.unwrap()),
        [3]
    );
    assert_eq!(
        seqs(store.chain_entries(&search("a_1")).await.unwrap()),
        [4]
    );
    assert_eq!(seqs(store.chain_entries(&search("%")).await.unwrap()), [3]);
    assert_eq!(
        seqs(store.chain_entries(&search("_")).await.unwrap()),
        [4, 2, 1]
    );
    let page = EntryFilter {
        before: Some(4),
        limit: Some(1),
        ..EntryFilter::default()
    };
    assert_eq!(seqs(store.chain_entries(&page).await.unwrap()), [3]);
    // Another tenant's chain is its own.
    assert!(
        store
            .for_tenant(id("acme"))
            .chain_entries(&EntryFilter::default())
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn schemas_from_the_future_are_refused(db: &TestDb) {
    db.open().await.close().await;
    db.tamper("INSERT INTO tooltrust_schema (version, checksum, applied_at) VALUES (99, 'x', 'y')")
        .await;
    let opened = Store::open(&db.location, db.options.clone()).await;
    assert!(
        matches!(
            opened,
            Err(StoreError::SchemaTooNew {
                found: 99,
                supported: SCHEMA_VERSION
            })
        ),
        "{opened:?}"
    );
    db.tamper("DELETE FROM tooltrust_schema WHERE version = 99")
        .await;
    db.tamper("UPDATE tooltrust_schema SET checksum = 'edited' WHERE version = 1")
        .await;
    let opened = Store::open(&db.location, db.options.clone()).await;
    assert!(
        matches!(opened, Err(StoreError::SchemaAltered { version: 1, .. })),
        "{opened:?}"
    );
}

/// Many handles opening a fresh database at once apply the schema once.
pub async fn concurrent_opens_migrate_once(db: &TestDb) {
    let opens: Vec<_> = (0..6)
        .map(|_| {
            let (location, options) = (db.location.clone(), db.options.clone());
            tokio::spawn(async move { Store::open(&location, options).await })
        })
        .collect();
    for open in opens {
        open.await.unwrap().unwrap().close().await;
    }
    let pool = db.raw().await;
    let versions: i64 = sqlx::query("SELECT count(*) FROM tooltrust_schema")
        .fetch_one(&pool)
        .await
        .unwrap()
        .get(0);
    assert_eq!(versions, SCHEMA_VERSION);
    pool.close().await;
}

/// A store made by version 1 of the schema (before held calls recorded declarations)
/// is brought up to date in place, its calls and chain intact.
pub async fn a_version_1_store_is_upgraded_in_place(db: &TestDb) {
    let postgres = matches!(db.location, tooltrust_store::Location::Postgres(_));
    let v1 = if postgres {
        include_str!("../../migrations/postgres/0001_initial.sql")
    } else {
        include_str!("../../migrations/sqlite/0001_initial.sql")
    };
    if let tooltrust_store::Location::Sqlite(path) = &db.location {
        std::fs::File::create(path).unwrap();
    }
    let pool = db.raw().await;
    sqlx::raw_sql(v1).execute(&pool).await.unwrap();
    sqlx::query(
        "CREATE TABLE tooltrust_schema (version BIGINT PRIMARY KEY, checksum TEXT NOT NULL, applied_at TEXT NOT NULL)",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("INSERT INTO tooltrust_schema VALUES (1, $1, '2026-01-01T00:00:00Z')")
        .bind(tooltrust::call::Checksum::of(v1.as_bytes()).to_hex())
        .execute(&pool)
        .await
        .unwrap();
    let call = held("send_email", r#"{"to":"eve"}"#, "default", "support", "ann");
    sqlx::query(
        "INSERT INTO pending_call (id, tenant, tool, args, checksum, rule, reason, scope, author, status, created_at) \
         VALUES ($1, 'default', 'send_email', $2, $3, 'r', 'why', 'support', 'ann', 'pending', '2026-01-01T00:00:00Z')",
    )
    .bind(call.id.as_str())
    .bind(call.args.as_str())
    .bind(call.checksum.to_hex())
    .execute(&pool)
    .await
    .unwrap();
    // Two entries of its chain: one that names the call, one that names none.
    let mut prev = GENESIS;
    for (seq, event) in [
        (1u64, json!({"event": "note", "call": call.id})),
        (2, json!({"event": "note"})),
    ] {
        let (line, hash) = Body::of(&event)
            .unwrap()
            .seal(seq, "2026-01-01T00:00:00Z".to_owned(), &prev)
            .unwrap();
        sqlx::query("INSERT INTO chain_entry (tenant, seq, line) VALUES ('default', $1, $2)")
            .bind(seq as i64)
            .bind(String::from_utf8(line).unwrap().trim_end())
            .execute(&pool)
            .await
            .unwrap();
        prev = hash;
    }
    sqlx::query("INSERT INTO chain_head (tenant, seq, hash) VALUES ('default', 2, $1)")
        .bind(prev.to_hex())
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;

    let store = db.open().await;
    // Version 4 indexed the entries already there by the call their line names.
    let pool = db.raw().await;
    let indexed: Vec<Option<String>> =
        sqlx::query("SELECT call FROM chain_entry WHERE tenant = 'default' ORDER BY seq")
            .fetch_all(&pool)
            .await
            .unwrap()
            .iter()
            .map(|row| row.get::<Option<String>, _>(0))
            .collect();
    pool.close().await;
    assert_eq!(indexed, [Some(call.id.to_string()), None]);
    let kept = store.get(&call.id).await.unwrap().unwrap();
    assert_eq!(
        (kept.args.as_str(), kept.declaration),
        (call.args.as_str(), None)
    );
    decide_as(&store, &call.id, "rita", true, "fine")
        .await
        .unwrap();
    // Held before holds were recorded: its hold is recorded with its decision, marked.
    assert_eq!(store.verify_chain(None).await.unwrap().entries, 4);
    let entries = chain_entries(db, "default").await;
    assert_eq!(entries[2]["event"], json!("call_held"));
    assert_eq!(entries[2]["backfilled"], json!(true));
    assert_eq!(entries[3]["event"], json!("call_decided"));
    assert_eq!(
        store.get(&call.id).await.unwrap().unwrap().status,
        HeldStatus::Approved
    );
    // The approval of a call held before the upgrade is spent like any other, once.
    let binding = store.get(&call.id).await.unwrap().unwrap().binding();
    store.claim_to_run(&call.id, &binding).await.unwrap();
    assert!(matches!(
        store.claim_to_run(&call.id, &binding).await,
        Err(ClaimError::AlreadyClaimed { .. })
    ));
    store.verify_chain(None).await.unwrap();
    let pool = db.raw().await;
    let versions: i64 = sqlx::query("SELECT max(version) FROM tooltrust_schema")
        .fetch_one(&pool)
        .await
        .unwrap()
        .get(0);
    assert_eq!(versions, SCHEMA_VERSION);
    pool.close().await;
}

/// Two processes (each a store handle with its own pool) interleave every transition of
/// the lifecycle at random on the same calls: holds, decisions (the author's among them),
/// claims naming the right binding or another scope's or checksum's, ends that ran or
/// failed, approvals expiring and rows forged to approved. Whatever the order: each call
/// is claimed at most once, only with its own binding, only after an approving decision,
/// never once rejected or expired, and the chain (provenance included) verifies.
pub async fn random_interleavings_keep_the_lifecycle(db: &TestDb) {
    const CALLS: usize = 12;
    const STEPS: usize = 300;
    let calls: Arc<Vec<tooltrust_store::HeldCall>> = Arc::new(
        (0..CALLS)
            .map(|n| {
                held(
                    "send_email",
                    &format!(r#"{{"to":"x{n}@example.com"}}"#),
                    "default",
                    &format!("scope-{}", n % 3),
                    "ann",
                )
            })
            .collect(),
    );
    let mut workers = Vec::new();
    for worker in 0..2u64 {
        let store = Store::open(&db.location, db.options.clone()).await.unwrap();
        let calls = calls.clone();
        let raw_url = db.raw_url.clone();
        workers.push(tokio::spawn(async move {
            let mut rng = fastrand::Rng::with_seed(0x5eed_0000 + worker);
            let raw = sqlx::AnyPool::connect(&raw_url).await.unwrap();
            // (call, what happened): claims that succeeded, with the binding they named.
            let mut claimed = Vec::new();
            for _ in 0..STEPS {
                let n = rng.usize(..CALLS);
                let call = &calls[n];
                // Weighted so that calls get through the lifecycle as well as off it.
                match rng.u8(..40) {
                    0..5 => {
                        let _ = store.hold(call).await;
                    }
                    5..15 => {
                        let reviewer = if rng.u8(..5) == 0 { "ann" } else { "rita" };
                        let _ = decide_as(&store, &call.id, reviewer, rng.bool(), "r").await;
                    }
                    15..27 => {
                        let mut binding = call.binding();
                        match rng.u8(..4) {
                            0 => binding.scope = id("another-session"),
                            1 => binding.checksum = tooltrust::call::Checksum::of(b"other"),
                            _ => {}
                        }
                        if let Ok(got) = store.claim_to_run(&call.id, &binding).await {
                            claimed.push((n, binding, got.status));
                        }
                    }
                    27..35 => {
                        let _ = store.finish_claimed(&call.id, rng.bool()).await;
                    }
                    35..37 => {
                        // Time passes for one call: its approval, if any, expires.
                        sqlx::query(
                            "UPDATE pending_call SET expires_at = '2000-01-01T00:00:00Z' \
                             WHERE id = $1",
                        )
                        .bind(call.id.as_str())
                        .execute(&raw)
                        .await
                        .unwrap();
                    }
                    _ => {
                        // A hand on the database approves a held call outright.
                        sqlx::query(
                            "UPDATE pending_call SET status = 'approved', decided_by = 'rita' \
                             WHERE id = $1 AND status = 'held'",
                        )
                        .bind(call.id.as_str())
                        .execute(&raw)
                        .await
                        .unwrap();
                    }
                }
            }
            raw.close().await;
            store.close().await;
            claimed
        }));
    }
    let mut claimed = Vec::new();
    for worker in workers {
        claimed.extend(worker.await.unwrap());
    }
    let store = db.open().await;
    let entries = chain_entries(db, "default").await;
    let mut claims_of = BTreeMap::new();
    for (n, binding, status) in &claimed {
        let call = &calls[*n];
        assert_eq!(
            *binding,
            call.binding(),
            "a claim spent another call's approval"
        );
        assert_eq!(*status, HeldStatus::Claimed);
        *claims_of.entry(*n).or_insert(0) += 1;
    }
    for (n, count) in &claims_of {
        assert_eq!(*count, 1, "call {n} was claimed {count} times");
        let call = &calls[*n];
        // Its approving decision is in the chain, before its claim.
        let decided = entries.iter().position(|e| {
            e["event"] == "call_decided"
                && e["call"] == json!(call.id)
                && e["decision"] == "approved"
        });
        let claim = entries
            .iter()
            .position(|e| e["event"] == "call_claimed" && e["call"] == json!(call.id));
        assert!(
            decided.is_some() && decided < claim,
            "call {n}: {decided:?} {claim:?}"
        );
        let now = store.get(&call.id).await.unwrap().unwrap().status;
        assert!(
            matches!(
                now,
                HeldStatus::Claimed | HeldStatus::Ran | HeldStatus::Failed
            ),
            "call {n} is {now} after its claim"
        );
    }
    for (n, call) in calls.iter().enumerate() {
        let Some(now) = store.get(&call.id).await.unwrap() else {
            continue;
        };
        if matches!(
            now.status,
            HeldStatus::Rejected | HeldStatus::Expired | HeldStatus::Held
        ) {
            assert!(
                !claims_of.contains_key(&n),
                "call {n} is {} yet ran",
                now.status
            );
        }
    }
    assert!(
        !claims_of.is_empty(),
        "the schedule claimed nothing: it tests nothing"
    );
    // The chain is intact; the only thing verification may report is a row a hand set to
    // approved, which the chain leaves held (and which never ran).
    match store.verify_chain(None).await {
        Ok(_) => {}
        // A row whose expiry a hand set to the past: the chain's hold says otherwise.
        Err(ChainError::RowRebound {
            field: "expires_at",
            ..
        }) => {}
        Err(ChainError::RowUnexplained {
            row,
            chain: Some(HeldStatus::Held),
            call,
            ..
        }) if row == "approved" => {
            let n = calls
                .iter()
                .position(|held| held.id.as_str() == call)
                .expect("one of the schedule's calls");
            assert!(!claims_of.contains_key(&n), "a forged approval ran");
        }
        Err(other) => panic!("{other:?}"),
    }
}

// ---------------------------------------------------------------------------------------
// The attacks of issue 38, each as it worked before decisions were signed: an attacker
// with write access to the database (raw SQL through `TestDb::tamper` and the helpers
// below) but no reviewer's or writer's private key.
// ---------------------------------------------------------------------------------------

/// A tenant's head row, read with a plain connection.
async fn head_row(db: &TestDb, tenant: &str) -> (u64, Checksum) {
    let pool = db.raw().await;
    let row = sqlx::query("SELECT seq, hash FROM chain_head WHERE tenant = $1")
        .bind(tenant)
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    let seq: i64 = row.get(0);
    let hash: String = row.get(1);
    (seq as u64, hash.parse().unwrap())
}

/// Appends `event` to `tenant`'s chain as an attacker with database access would: sealed
/// after the head with a correct hash (the chain has no key to stop them), inserted with
/// its `call` index, and the head row moved. Returns the entry's seq.
pub async fn forge_entry(db: &TestDb, tenant: &str, event: Value) -> u64 {
    let (seq, prev) = head_row(db, tenant).await;
    let ts = chain_entries(db, tenant)
        .await
        .last()
        .map(|last| last["ts"].as_str().unwrap().to_owned())
        .unwrap_or_else(|| "2026-01-01T00:00:00Z".to_owned());
    let (line, hash) = Body::of(&event).unwrap().seal(seq + 1, ts, &prev).unwrap();
    let line = String::from_utf8(line).unwrap();
    let pool = db.raw().await;
    sqlx::query("INSERT INTO chain_entry (tenant, seq, line) VALUES ($1, $2, $3)")
        .bind(tenant)
        .bind((seq + 1) as i64)
        .bind(line.trim_end())
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("UPDATE chain_head SET seq = $1, hash = $2 WHERE tenant = $3")
        .bind((seq + 1) as i64)
        .bind(hash.to_hex())
        .bind(tenant)
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    seq + 1
}

/// What [`rewrite_chain`] does to one entry.
enum Rewrite {
    /// Leave it (re-sealed all the same if an entry before it changed).
    Keep,
    /// It was edited in place.
    Edited,
    /// Drop it; the entries after it move up one seq.
    Delete,
}

/// How [`rewrite_chain`] seals the entries it has to rewrite.
#[derive(Clone, Copy)]
enum Reseal {
    /// As `Body::seal` does: unsigned (the attacker has no writer key).
    Unsigned,
    /// Keeping each entry's `signer` in the hashed content and its old `sig` beside the
    /// new hash: a copied signature.
    CopySignatures,
    /// Signed with the attacker's own key.
    SignedBy(&'static str),
}

/// Rewrites `tenant`'s chain as an attacker with database access would: `edit` sees each
/// entry's fields (without `seq`, `ts`, `prev`, `hash`, `signer`, `sig`) and may change or
/// drop it; every entry from the first one changed on is re-sealed after its new
/// predecessor with a correct hash, the rows replaced (their `call` index kept in step)
/// and the head row moved. Unchanged entries before the first edit keep their bytes.
async fn rewrite_chain(
    db: &TestDb,
    tenant: &str,
    reseal: Reseal,
    mut edit: impl FnMut(&mut serde_json::Map<String, Value>) -> Rewrite,
) {
    let mut prev = GENESIS;
    let mut dirty = false;
    let mut rows: Vec<(String, Option<String>)> = Vec::new();
    for line in chain_lines(db, tenant).await {
        let Value::Object(mut fields) = serde_json::from_str::<Value>(&line).unwrap() else {
            panic!("not an entry: {line}");
        };
        let ts = fields.remove("ts").unwrap();
        let signer = fields.remove("signer");
        let sig = fields.remove("sig");
        let hash = fields.remove("hash").unwrap();
        for reserved in ["seq", "prev"] {
            fields.remove(reserved);
        }
        match edit(&mut fields) {
            Rewrite::Keep => {}
            Rewrite::Edited => dirty = true,
            Rewrite::Delete => {
                dirty = true;
                continue;
            }
        }
        let call = fields
            .get("call")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if !dirty {
            prev = hash.as_str().unwrap().parse().unwrap();
            rows.push((line, call));
            continue;
        }
        let seq = rows.len() as u64 + 1;
        let ts = ts.as_str().unwrap().to_owned();
        let (line, hash) = match reseal {
            Reseal::Unsigned => Body::of(&fields).unwrap().seal(seq, ts, &prev).unwrap(),
            Reseal::SignedBy(attacker) => Body::of(&fields)
                .unwrap()
                .seal_signed(seq, ts, &prev, Some(&test_key(attacker)))
                .unwrap(),
            Reseal::CopySignatures => {
                // The hash covers `prev`'s hex and the entry without `hash` and `sig`.
                fields.insert("seq".into(), json!(seq));
                fields.insert("ts".into(), json!(ts));
                fields.insert("prev".into(), json!(prev.to_hex()));
                if let Some(signer) = signer {
                    fields.insert("signer".into(), signer);
                }
                let hashed = canonical_json(&Value::Object(fields.clone()));
                let hash = Checksum::of(format!("{}{hashed}", prev.to_hex()).as_bytes());
                fields.insert("hash".into(), json!(hash.to_hex()));
                if let Some(sig) = sig {
                    fields.insert("sig".into(), sig);
                }
                (canonical_json(&Value::Object(fields)).into_bytes(), hash)
            }
        };
        let line = String::from_utf8(line).unwrap().trim_end().to_owned();
        rows.push((line, call));
        prev = hash;
    }
    let pool = db.raw().await;
    sqlx::query("DELETE FROM chain_entry WHERE tenant = $1")
        .bind(tenant)
        .execute(&pool)
        .await
        .unwrap();
    for (n, (line, _)) in rows.iter().enumerate() {
        sqlx::query("INSERT INTO chain_entry (tenant, seq, line) VALUES ($1, $2, $3)")
            .bind(tenant)
            .bind(n as i64 + 1)
            .bind(line.as_str())
            .execute(&pool)
            .await
            .unwrap();
    }
    sqlx::query("UPDATE chain_head SET seq = $1, hash = $2 WHERE tenant = $3")
        .bind(rows.len() as i64)
        .bind(prev.to_hex())
        .bind(tenant)
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
}

/// The events of `tenant`'s chain about `call`, in order.
async fn events_of(db: &TestDb, tenant: &str, call: &Id) -> Vec<String> {
    chain_entries(db, tenant)
        .await
        .iter()
        .filter(|e| e["call"] == json!(call))
        .map(|e| e["event"].as_str().unwrap().to_owned())
        .collect()
}

/// How many `call_claimed` entries `tenant`'s chain holds for `call`.
async fn claims_in_chain(db: &TestDb, tenant: &str, call: &Id) -> usize {
    events_of(db, tenant, call)
        .await
        .iter()
        .filter(|e| *e == "call_claimed")
        .count()
}

/// The `call_decided` entry the store itself wrote before decisions were signed.
fn unsigned_decision(call: &HeldCall, reviewer: &str) -> Value {
    json!({
        "event": "call_decided",
        "call": call.id,
        "tool": call.tool,
        "checksum": call.checksum,
        "scope": call.scope,
        "author": call.author,
        "reviewer": reviewer,
        "decision": "approved",
        "reason": "looks fine",
    })
}

/// [`unsigned_decision`] with a `signed` statement beside it.
fn decision_entry(call: &HeldCall, signed: &SignedDecision) -> Value {
    let mut entry = unsigned_decision(call, signed.statement.reviewer.as_str());
    entry["signed"] = serde_json::to_value(signed).unwrap();
    entry
}

/// Sets a call's row to approved by `reviewer`, with `signed` as its decision, as one
/// UPDATE would.
async fn approve_row(db: &TestDb, call: &Id, reviewer: &str, signed: Option<&SignedDecision>) {
    let decision = signed
        .map(|signed| format!("'{}'", serde_json::to_string(signed).unwrap()))
        .unwrap_or_else(|| "NULL".to_owned());
    db.tamper(&format!(
        "UPDATE pending_call SET status = 'approved', decided_by = '{reviewer}', \
         decision_reason = 'looks fine', decided_at = '2026-01-01T00:00:00Z', \
         decision = {decision} WHERE id = '{call}'"
    ))
    .await;
}

/// Reproduction 1 of issue 38, the two-step forgery: the row set to approved and a
/// `call_decided` entry appended with a correct hash and the head moved. Unsigned, or
/// signed by a key the store does not trust, it approves nothing; nor does a decision
/// handed to `decide` without the reviewer's key (`pending approve --reviewer NAME`).
pub async fn a_forged_decision_approves_nothing(db: &TestDb) {
    let store = db.open().await;
    let call = hold(&store, r#"{"to":"eve@evil.example"}"#).await;
    approve_row(db, &call.id, "rita", None).await;
    forge_entry(db, "default", unsigned_decision(&call, "rita")).await;
    let refused = store.claim_to_run(&call.id, &call.binding()).await;
    assert!(
        matches!(
            refused,
            Err(ClaimError::NoRecordedApproval(_) | ClaimError::Unauthorized { .. })
        ),
        "{refused:?}"
    );

    // Signed, but by eve, whom the store does not know; or in rita's name with eve's key.
    let by_eve = sign_as(&call, "eve", true, "looks fine");
    approve_row(db, &call.id, "eve", Some(&by_eve)).await;
    forge_entry(db, "default", decision_entry(&call, &by_eve)).await;
    let refused = store.claim_to_run(&call.id, &call.binding()).await;
    assert!(
        matches!(
            &refused,
            Err(ClaimError::Unauthorized {
                reason: DecisionError::UnknownReviewer(who),
                ..
            }) if who.as_str() == "eve"
        ),
        "{refused:?}"
    );
    let as_rita = call
        .statement(true, "looks fine", id("rita"))
        .sign(&test_key("eve"));
    approve_row(db, &call.id, "rita", Some(&as_rita)).await;
    forge_entry(db, "default", decision_entry(&call, &as_rita)).await;
    let refused = store.claim_to_run(&call.id, &call.binding()).await;
    assert!(
        matches!(
            &refused,
            Err(ClaimError::Unauthorized {
                reason: DecisionError::BadSignature(who),
                ..
            }) if who.as_str() == "rita"
        ),
        "{refused:?}"
    );
    // A genuine signature over another statement (rita rejected; the verdict edited).
    let mut edited = sign_as(&call, "rita", false, "looks fine");
    edited.statement.decision = HeldStatus::Approved;
    approve_row(db, &call.id, "rita", Some(&edited)).await;
    forge_entry(db, "default", decision_entry(&call, &edited)).await;
    let refused = store.claim_to_run(&call.id, &call.binding()).await;
    assert!(
        matches!(
            refused,
            Err(ClaimError::Unauthorized {
                reason: DecisionError::BadSignature(_),
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(claims_in_chain(db, "default", &call.id).await, 0);
    assert_eq!(
        store.get(&call.id).await.unwrap().unwrap().status,
        HeldStatus::Approved,
        "the forged row stays as the attacker left it: nothing claimed it"
    );
    assert_eq!(
        events_of(db, "default", &call.id).await,
        [
            "call_held",
            "call_decided",
            "call_claim_refused",
            "call_decided",
            "call_claim_refused",
            "call_decided",
            "call_claim_refused",
            "call_decided",
            "call_claim_refused",
        ]
    );

    // Deciding without the reviewer's key: a statement in rita's name signed by eve, and
    // one in eve's own name.
    let other = hold(&store, r#"{"to":"mallory@evil.example"}"#).await;
    let read = store.get(&other.id).await.unwrap().unwrap();
    let forged = read
        .statement(true, "approve it", id("rita"))
        .sign(&test_key("eve"));
    let refused = store.decide(&forged).await;
    assert!(
        matches!(
            &refused,
            Err(DecideError::Unauthorized {
                reason: DecisionError::BadSignature(_),
                ..
            })
        ),
        "{refused:?}"
    );
    let refused = store
        .decide(&sign_as(&read, "eve", true, "approve it"))
        .await;
    assert!(
        matches!(
            &refused,
            Err(DecideError::Unauthorized {
                reason: DecisionError::UnknownReviewer(_),
                ..
            })
        ),
        "{refused:?}"
    );
    let now = store.get(&other.id).await.unwrap().unwrap();
    assert_eq!(
        (now.status, now.decided_by, now.decision),
        (HeldStatus::Held, None, None)
    );
    assert_eq!(
        events_of(db, "default", &other.id).await,
        [
            "call_held",
            "call_decision_refused",
            "call_decision_refused"
        ]
    );
    // A row written outside the queue, never held in the chain, cannot be decided.
    db.tamper(&format!(
        "INSERT INTO pending_call (id, tenant, tool, args, checksum, rule, reason, scope, \
         author, status, created_at, expires_at) SELECT 'planted', tenant, tool, args, checksum, \
         rule, reason, scope, author, 'held', '2999-01-01T00:00:00Z', expires_at \
         FROM pending_call WHERE id = '{}'",
        other.id
    ))
    .await;
    let refused = decide_as(&store, &id("planted"), "rita", true, "ok").await;
    assert!(
        matches!(&refused, Err(DecideError::NeverHeld(planted)) if planted.as_str() == "planted"),
        "{refused:?}"
    );
}

/// Reproduction 2 of issue 38, the replay: a call that ran (or failed, or was claimed and
/// never finished), its row set back to approved, is not claimed again: the chain holds
/// its claim.
pub async fn a_spent_approval_is_not_spent_again(db: &TestDb) {
    let store = db.open().await;
    for (n, finish) in [Some(true), Some(false), None].into_iter().enumerate() {
        let call = hold(&store, &format!(r#"{{"to":"x{n}@example.com"}}"#)).await;
        decide_as(&store, &call.id, "rita", true, "fine")
            .await
            .unwrap();
        store.claim_to_run(&call.id, &call.binding()).await.unwrap();
        if let Some(ran) = finish {
            store.finish_claimed(&call.id, ran).await.unwrap();
        }
        db.tamper(&format!(
            "UPDATE pending_call SET status = 'approved' WHERE id = '{}'",
            call.id
        ))
        .await;
        let replay = store.claim_to_run(&call.id, &call.binding()).await;
        assert!(
            matches!(
                replay,
                Err(ClaimError::AlreadyClaimed {
                    status: HeldStatus::Approved,
                    ..
                })
            ),
            "{finish:?}: {replay:?}"
        );
        assert_eq!(claims_in_chain(db, "default", &call.id).await, 1);
        // The replay is recorded.
        assert_eq!(
            events_of(db, "default", &call.id)
                .await
                .last()
                .map(String::as_str),
            Some("call_claim_refused")
        );
    }
    // The chain is intact, but verification reports the rows it does not explain: each
    // was set back to approved after the chain left it claimed, ran or failed.
    let verified = store.verify_chain(None).await;
    assert!(
        matches!(
            &verified,
            Err(ChainError::RowUnexplained { row, chain: Some(_), .. }) if row == "approved"
        ),
        "{verified:?}"
    );

    // The claim finds a call's entries through the `call` index, which the database
    // derives from each entry's line: it cannot be cleared to hide a claim, and with the
    // row set back to approved the spent approval is still refused.
    let call = hold(&store, r#"{"to":"again@example.com"}"#).await;
    decide_as(&store, &call.id, "rita", true, "fine")
        .await
        .unwrap();
    store.claim_to_run(&call.id, &call.binding()).await.unwrap();
    store.finish_claimed(&call.id, true).await.unwrap();
    let cleared = db
        .try_tamper(&format!(
            "UPDATE chain_entry SET call = NULL WHERE call = '{0}'",
            call.id
        ))
        .await;
    assert!(
        cleared.is_err(),
        "the index is the line's, not the writer's"
    );
    db.tamper(&format!(
        "UPDATE pending_call SET status = 'approved' WHERE id = '{}'",
        call.id
    ))
    .await;
    assert!(matches!(
        store.claim_to_run(&call.id, &call.binding()).await,
        Err(ClaimError::AlreadyClaimed { .. })
    ));
    assert_eq!(claims_in_chain(db, "default", &call.id).await, 1);
}

/// Reproduction 2 of issue 38, the un-expiry: an approval past the expiry its hold
/// recorded, its row set to approved with no expiry, is refused; so is one whose
/// `call_held` entry was rewritten without its expiry (the signed statement binds it).
pub async fn an_expired_approval_stays_expired(db: &TestDb) {
    let store = db.open().await;
    let mut short = held(
        "send_email",
        r#"{"to":"carol@example.com"}"#,
        "default",
        "support",
        "ann",
    );
    let ttl = Duration::from_millis(1500);
    short.expires_at = Some(tooltrust::held::expiry_after(ttl));
    let started = std::time::Instant::now();
    let call = store.hold(&short).await.unwrap();
    decide_as(&store, &call.id, "rita", true, "fine")
        .await
        .unwrap();
    assert!(
        started.elapsed() < ttl,
        "the machine is too slow: the decision came after the expiry"
    );
    tokio::time::sleep(ttl.saturating_sub(started.elapsed()) + Duration::from_millis(100)).await;

    // Past the expiry, the row intact: refused, and the row says expired.
    let late = store.claim_to_run(&call.id, &call.binding()).await;
    assert!(matches!(late, Err(ClaimError::Expired { .. })), "{late:?}");
    assert_eq!(
        store.get(&call.id).await.unwrap().unwrap().status,
        HeldStatus::Expired
    );
    // The row set back to approved, never expiring, or expiring in a thousand years.
    for expiry in ["NULL", "'2999-01-01T00:00:00Z'"] {
        db.tamper(&format!(
            "UPDATE pending_call SET status = 'approved', expires_at = {expiry} WHERE id = '{}'",
            call.id
        ))
        .await;
        let refused = store.claim_to_run(&call.id, &call.binding()).await;
        assert!(
            matches!(refused, Err(ClaimError::Expired { .. })),
            "{expiry}: {refused:?}"
        );
    }
    // The hold's own record rewritten without an expiry (and the chain re-hashed).
    db.tamper(&format!(
        "UPDATE pending_call SET status = 'approved', expires_at = NULL WHERE id = '{}'",
        call.id
    ))
    .await;
    rewrite_chain(db, "default", Reseal::Unsigned, |entry| {
        if entry["event"] == "call_held" && entry["call"] == json!(call.id) {
            entry.remove("expires_at");
            Rewrite::Edited
        } else {
            Rewrite::Keep
        }
    })
    .await;
    let refused = store.claim_to_run(&call.id, &call.binding()).await;
    assert!(
        matches!(
            refused,
            Err(ClaimError::Unauthorized {
                reason: DecisionError::Mismatch("expiry"),
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(claims_in_chain(db, "default", &call.id).await, 0);
}

/// Reproduction 3 of issue 38, the scope rebind: the row's scope (or upstream) changed by
/// one UPDATE does not move the approval. A claim in the new scope is refused, the
/// approval is spent nowhere while the row lies, and once the row is put back it runs in
/// its own scope, once. Rewriting the chain's `call_held` too does not help: the reviewer
/// signed the scope.
pub async fn an_approval_stays_in_its_scope_and_upstream(db: &TestDb) {
    let store = db.open().await;
    let mut mail = held(
        "send_email",
        r#"{"to":"eve@evil.example"}"#,
        "default",
        "support",
        "ann",
    );
    mail.upstream = Some("mail".into());
    let call = store.hold(&mail).await.unwrap();
    decide_as(&store, &call.id, "rita", true, "fine")
        .await
        .unwrap();
    let own = call.binding();
    let refused_with = |field: &'static str| {
        move |result: Result<HeldCall, ClaimError>| {
            assert!(
                matches!(&result, Err(ClaimError::BindingMismatch { field: f, .. }) if *f == field),
                "{field}: {result:?}"
            );
        }
    };

    db.tamper(&format!(
        "UPDATE pending_call SET scope = 'proxy-b' WHERE id = '{}'",
        call.id
    ))
    .await;
    let moved = store.get(&call.id).await.unwrap().unwrap().binding();
    assert_eq!(moved.scope, id("proxy-b"));
    // Scope B, as the row now says: the reviewer approved scope A.
    refused_with("scope")(store.claim_to_run(&call.id, &moved).await);
    // Scope A: the row says B, so the store refuses this too until the row is right.
    refused_with("scope")(store.claim_to_run(&call.id, &own).await);

    for upstream in ["'evil'", "NULL"] {
        db.tamper(&format!(
            "UPDATE pending_call SET scope = 'support', upstream = {upstream} WHERE id = '{}'",
            call.id
        ))
        .await;
        let rebound = store.get(&call.id).await.unwrap().unwrap().binding();
        refused_with("upstream")(store.claim_to_run(&call.id, &rebound).await);
    }
    assert_eq!(claims_in_chain(db, "default", &call.id).await, 0);
    assert_eq!(
        store.get(&call.id).await.unwrap().unwrap().status,
        HeldStatus::Approved
    );

    // The row put back: the approval was never spent, and runs in scope A, once.
    db.tamper(&format!(
        "UPDATE pending_call SET upstream = 'mail' WHERE id = '{}'",
        call.id
    ))
    .await;
    store.claim_to_run(&call.id, &own).await.unwrap();
    assert!(matches!(
        store.claim_to_run(&call.id, &moved).await,
        Err(ClaimError::AlreadyClaimed { .. })
    ));
    let claims: Vec<_> = chain_entries(db, "default")
        .await
        .into_iter()
        .filter(|e| e["event"] == "call_claimed")
        .collect();
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0]["scope"], json!("support"));
    assert_eq!(claims[0]["upstream"], json!("mail"));

    // The row and the chain's record of the hold both moved to scope B.
    let other = hold(&store, r#"{"to":"bob@example.com"}"#).await;
    decide_as(&store, &other.id, "rita", true, "fine")
        .await
        .unwrap();
    db.tamper(&format!(
        "UPDATE pending_call SET scope = 'proxy-b' WHERE id = '{}'",
        other.id
    ))
    .await;
    rewrite_chain(db, "default", Reseal::Unsigned, |entry| {
        if entry["event"] == "call_held" && entry["call"] == json!(other.id) {
            entry.insert("scope".into(), json!("proxy-b"));
            Rewrite::Edited
        } else {
            Rewrite::Keep
        }
    })
    .await;
    let in_b = store.get(&other.id).await.unwrap().unwrap().binding();
    let refused = store.claim_to_run(&other.id, &in_b).await;
    assert!(
        matches!(
            refused,
            Err(ClaimError::Unauthorized {
                reason: DecisionError::Mismatch("scope"),
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(claims_in_chain(db, "default", &other.id).await, 0);
}

/// A reviewer who may decide for tenant acme only cannot decide a call of another
/// tenant; nor does their genuine signature, planted in the other tenant's chain, approve
/// it there.
pub async fn reviewers_decide_only_for_their_tenants(db: &TestDb) {
    let store = db.open().await;
    let theirs = hold(&store, r#"{"to":"eve@evil.example"}"#).await;
    let refused = decide_as(&store, &theirs.id, super::ACME_ONLY, true, "fine").await;
    assert!(
        matches!(
            &refused,
            Err(DecideError::Unauthorized {
                reason: DecisionError::TenantNotAllowed { .. },
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(
        store.get(&theirs.id).await.unwrap().unwrap().status,
        HeldStatus::Held
    );

    // Planted by someone with database access: refused at the claim as well.
    let signed = sign_as(&theirs, super::ACME_ONLY, true, "fine");
    approve_row(db, &theirs.id, super::ACME_ONLY, Some(&signed)).await;
    forge_entry(db, "default", decision_entry(&theirs, &signed)).await;
    let refused = store.claim_to_run(&theirs.id, &theirs.binding()).await;
    assert!(
        matches!(
            &refused,
            Err(ClaimError::Unauthorized {
                reason: DecisionError::TenantNotAllowed { .. },
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(claims_in_chain(db, "default", &theirs.id).await, 0);

    // Their own tenant's calls they decide, and those run.
    let own = store
        .hold(&held(
            "send_email",
            r#"{"to":"carl@acme.example"}"#,
            super::ACME,
            "support",
            "ann",
        ))
        .await
        .unwrap();
    let approved = decide_as(&store, &own.id, super::ACME_ONLY, true, "fine")
        .await
        .unwrap();
    assert_eq!(approved.status, HeldStatus::Approved);
    store.claim_to_run(&own.id, &own.binding()).await.unwrap();
    assert_eq!(claims_in_chain(db, super::ACME, &own.id).await, 1);
}

/// A trusted reviewer's genuine approval of call 1, copied into call 2's row and chain
/// (with the same tool, arguments and scope), does not approve call 2: the statement names
/// its call. Nor does call 1's own `call_decided` line, indexed under call 2.
pub async fn an_approval_does_not_move_to_another_call(db: &TestDb) {
    let store = db.open().await;
    let first = hold(&store, r#"{"to":"eve@evil.example"}"#).await;
    let second = hold(&store, r#"{"to":"eve@evil.example"}"#).await;
    assert_ne!(first.id, second.id);
    assert_eq!(first.binding(), second.binding());
    let approved = decide_as(&store, &first.id, "rita", true, "fine")
        .await
        .unwrap();
    let signed = approved.decision.clone().unwrap();

    // The signed decision copied as it is.
    approve_row(db, &second.id, "rita", Some(&signed)).await;
    forge_entry(db, "default", decision_entry(&second, &signed)).await;
    let refused = store.claim_to_run(&second.id, &second.binding()).await;
    assert!(
        matches!(
            refused,
            Err(ClaimError::Unauthorized {
                reason: DecisionError::Mismatch("call"),
                ..
            })
        ),
        "{refused:?}"
    );
    // Its statement edited to name call 2.
    let mut renamed = signed.clone();
    renamed.statement.call = second.id.clone();
    forge_entry(db, "default", decision_entry(&second, &renamed)).await;
    let refused = store.claim_to_run(&second.id, &second.binding()).await;
    assert!(
        matches!(
            refused,
            Err(ClaimError::Unauthorized {
                reason: DecisionError::BadSignature(_),
                ..
            })
        ),
        "{refused:?}"
    );
    // Call 1's own entry, appended again with call 2's index value.
    let line = chain_entries(db, "default")
        .await
        .into_iter()
        .find(|e| e["event"] == "call_decided" && e["call"] == json!(first.id))
        .unwrap();
    let mut copied = line.as_object().unwrap().clone();
    for reserved in ["seq", "ts", "prev", "hash", "signer", "sig"] {
        copied.remove(reserved);
    }
    let seq = forge_entry(db, "default", Value::Object(copied)).await;
    let moved = db
        .try_tamper(&format!(
            "UPDATE chain_entry SET call = '{}' WHERE tenant = 'default' AND seq = {seq}",
            second.id
        ))
        .await;
    assert!(moved.is_err(), "the index is the line's, not the writer's");
    let refused = store.claim_to_run(&second.id, &second.binding()).await;
    assert!(
        matches!(
            refused,
            Err(ClaimError::Unauthorized { .. } | ClaimError::NoRecordedApproval(_))
        ),
        "{refused:?}"
    );
    assert_eq!(claims_in_chain(db, "default", &second.id).await, 0);

    // Call 1's approval is untouched: it runs, once.
    store
        .claim_to_run(&first.id, &first.binding())
        .await
        .unwrap();
    assert!(matches!(
        store.claim_to_run(&first.id, &first.binding()).await,
        Err(ClaimError::AlreadyClaimed { .. })
    ));
}

/// With a writer key, every entry the store writes is signed by it, and a verifier that
/// holds its public key accepts the chain, file or database alike; an attacker who edits
/// an entry (or deletes one, as the replay of a spent approval needs) and re-hashes the
/// rest is found, whether the entries are left unsigned, keep their old signatures or
/// are signed with the attacker's own key.
pub async fn a_signed_chain_shows_every_rewrite(db: &TestDb) {
    let writer = test_key("writer");
    let writers = Writers::new([writer.public()]);
    let store = Store::open(
        &db.location,
        StoreOptions {
            writer: Some(Arc::new(test_key("writer"))),
            ..db.options.clone()
        },
    )
    .await
    .unwrap();
    let call = hold(&store, r#"{"to":"eve@evil.example"}"#).await;
    assert!(
        decide_as(&store, &call.id, "ann", true, "mine")
            .await
            .is_err()
    );
    decide_as(&store, &call.id, "rita", true, "fine")
        .await
        .unwrap();
    let mut elsewhere = call.binding();
    elsewhere.scope = id("another-session");
    assert!(store.claim_to_run(&call.id, &elsewhere).await.is_err());
    store.claim_to_run(&call.id, &call.binding()).await.unwrap();
    store.finish_claimed(&call.id, true).await.unwrap();
    store.append(&json!({"event": "note"})).await.unwrap();
    let rejected = hold(&store, r#"{"to":"bob@example.com"}"#).await;
    decide_as(&store, &rejected.id, "sam", false, "no")
        .await
        .unwrap();

    let lines = chain_lines(db, "default").await;
    let kinds: Vec<_> = chain_entries(db, "default")
        .await
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        kinds,
        [
            "call_held",
            "call_decision_refused",
            "call_decided",
            "call_claim_refused",
            "call_claimed",
            "call_finished",
            "note",
            "call_held",
            "call_decided"
        ]
    );
    for entry in chain_entries(db, "default").await {
        assert_eq!(
            entry["signer"],
            json!(writer.public().to_string()),
            "{entry}"
        );
        assert_eq!(entry["sig"].as_str().map(str::len), Some(128), "{entry}");
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("audit.jsonl");
    let verify_file = |lines: &[String], writers: Option<&Writers>| {
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(&file, text).unwrap();
        tooltrust::audit::verify_signed(&file, None, writers)
    };
    assert_eq!(
        verify_file(&lines, Some(&writers)).unwrap().entries,
        lines.len() as u64
    );
    let stranger = Writers::new([test_key("eve").public()]);
    let foreign = verify_file(&lines, Some(&stranger));
    assert!(
        matches!(
            &foreign,
            Err(e) if e.seq == 1 && matches!(e.kind, VerifyErrorKind::UnknownSigner { .. })
        ),
        "{foreign:?}"
    );
    assert_eq!(
        store
            .verify_chain_signed(None, &writers)
            .await
            .unwrap()
            .entries,
        lines.len() as u64
    );

    let restore = async || {
        let pool = db.raw().await;
        for (n, line) in lines.iter().enumerate() {
            sqlx::query("UPDATE chain_entry SET line = $1 WHERE tenant = 'default' AND seq = $2")
                .bind(line.as_str())
                .bind(n as i64 + 1)
                .execute(&pool)
                .await
                .unwrap();
        }
        let last: Value = serde_json::from_str(lines.last().unwrap()).unwrap();
        sqlx::query("UPDATE chain_head SET seq = $1, hash = $2 WHERE tenant = 'default'")
            .bind(lines.len() as i64)
            .bind(last["hash"].as_str().unwrap())
            .execute(&pool)
            .await
            .unwrap();
        pool.close().await;
    };
    // The call_decided entry's reason edited (seq 3), the rest re-hashed, three ways.
    let edit_reason = |entry: &mut serde_json::Map<String, Value>| {
        if entry["event"] == "call_decided" && entry["call"] == json!(call.id) {
            entry.insert("reason".into(), json!("the attacker's reason"));
            Rewrite::Edited
        } else {
            Rewrite::Keep
        }
    };
    for (reseal, what) in [
        (Reseal::Unsigned, "unsigned"),
        (Reseal::CopySignatures, "copied signatures"),
        (Reseal::SignedBy("eve"), "the attacker's key"),
    ] {
        rewrite_chain(db, "default", reseal, edit_reason).await;
        let rewritten = chain_lines(db, "default").await;
        assert_ne!(rewritten[2], lines[2]);
        assert_eq!(rewritten[..2], lines[..2]);
        // Without the writer's key, the rewrite is a valid hash chain…
        assert_eq!(
            verify_file(&rewritten, None).unwrap().entries,
            lines.len() as u64,
            "{what}"
        );
        // …which the writer's public key refuses, at the first rewritten entry.
        let refused = verify_file(&rewritten, Some(&writers));
        let kind_fits = |kind: &VerifyErrorKind| match reseal {
            Reseal::Unsigned => matches!(kind, VerifyErrorKind::Unsigned { .. }),
            Reseal::CopySignatures => matches!(kind, VerifyErrorKind::BadSignature { .. }),
            Reseal::SignedBy(_) => matches!(kind, VerifyErrorKind::UnknownSigner { .. }),
        };
        assert!(
            matches!(&refused, Err(e) if e.seq == 3 && kind_fits(&e.kind)),
            "{what}: {refused:?}"
        );
        let refused = store.verify_chain_signed(None, &writers).await;
        assert!(
            matches!(&refused, Err(ChainError::Invalid(e)) if e.seq == 3 && kind_fits(&e.kind)),
            "{what}: {refused:?}"
        );
        restore().await;
        store.verify_chain_signed(None, &writers).await.unwrap();
    }

    // The replay's cover-up: the claim and its end deleted, the tail re-hashed.
    rewrite_chain(
        db,
        "default",
        Reseal::Unsigned,
        |entry| match entry["event"].as_str() {
            Some("call_claimed" | "call_finished") => Rewrite::Delete,
            _ => Rewrite::Keep,
        },
    )
    .await;
    let rewritten = chain_lines(db, "default").await;
    assert_eq!(rewritten.len(), lines.len() - 2);
    assert!(verify_file(&rewritten, None).is_ok());
    let refused = store.verify_chain_signed(None, &writers).await;
    assert!(
        matches!(
            &refused,
            Err(ChainError::Invalid(e)) if e.seq == 5 && matches!(e.kind, VerifyErrorKind::Unsigned { .. })
        ),
        "{refused:?}"
    );
    store.close().await;
}

// ---------------------------------------------------------------------------------------
// The property of issue 38: random interleavings of the lifecycle and of tampering.
// ---------------------------------------------------------------------------------------

/// The schedule's seed: `TOOLTRUST_LIFECYCLE_SEED` (decimal or `0x` hex) replaces it.
const LIFECYCLE_SEED: u64 = 0x1fe_c7c1_e038;

/// Steps per process: `TOOLTRUST_LIFECYCLE_STEPS` replaces it.
const LIFECYCLE_STEPS: usize = 300;

fn env_u64(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    let text = text.trim();
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(&hex.replace('_', ""), 16).ok(),
        None => text.parse().ok(),
    }
}

/// The trusted reviewers the schedule decides as (`ann`, the calls' author, among them:
/// the author rule refuses her).
const DECIDERS: [&str; 5] = ["rita", "sam", "bob", "lead", "ann"];

/// How the schedule forges a `call_decided` entry (each hash-correct, appended after the
/// head as [`forge_entry`] does, and marked `"forged": N` so that the test can tell it
/// from the writer's entries; the store reads no such field).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Forgery {
    /// The store's pre-signature entry: no statement at all.
    Unsigned,
    /// Signed by eve, whom the store does not trust.
    ByEve,
    /// Signed by tess, who may decide for tenant acme only.
    ByAcmeReviewer,
    /// In rita's name, with eve's key.
    StolenName,
    /// A rejection's genuine signature, its verdict edited to approved.
    EditedVerdict,
    /// A genuine approval of another call, copied.
    OtherCall,
    /// An approval naming another checksum than the one held (a provenance fault).
    OtherChecksum,
}

const FORGERIES: [Forgery; 7] = [
    Forgery::Unsigned,
    Forgery::ByEve,
    Forgery::ByAcmeReviewer,
    Forgery::StolenName,
    Forgery::EditedVerdict,
    Forgery::OtherCall,
    Forgery::OtherChecksum,
];

/// One process's record of what the store granted it.
#[derive(Default)]
struct Outcomes {
    /// (call, the binding named, the moment the claim was sent): claims that succeeded.
    claims: Vec<(usize, tooltrust::held::Binding, String)>,
    /// Claims refused, by the field the claim changed (`None`: the call's own binding).
    refused: BTreeMap<Option<&'static str>, usize>,
    /// (call, reviewer): approvals by trusted reviewers the store accepted.
    approvals: Vec<(usize, String)>,
    /// Claims refused as expired.
    expired: usize,
    /// (marker, call, kind): the forged entries appended.
    forged: Vec<(u64, usize, Forgery)>,
    /// Calls whose row status was set by hand.
    status_tampered: HashSet<usize>,
    /// Calls whose row scope, upstream or expiry was set by hand.
    binding_tampered: HashSet<usize>,
    /// Claims that were never finished (the host gone after the claim).
    abandoned: usize,
}

/// Appends `event` after the head of chain `default` in one transaction of a plain
/// connection (the head row locked, as the store's appender locks it), retrying while a
/// store holds the chain: an attacker's append racing the two processes' own. Returns
/// `false` if the chain has no head yet.
async fn forge_racing(raw: &sqlx::AnyPool, sqlite: bool, event: &Value) -> bool {
    for _ in 0..200 {
        let attempt = async {
            let mut tx = if sqlite {
                raw.begin_with("BEGIN IMMEDIATE").await?
            } else {
                raw.begin().await?
            };
            let select = if sqlite {
                "SELECT seq, hash FROM chain_head WHERE tenant = 'default'"
            } else {
                "SELECT seq, hash FROM chain_head WHERE tenant = 'default' FOR UPDATE"
            };
            let Some(row) = sqlx::query(select).fetch_optional(&mut *tx).await? else {
                return Ok::<bool, sqlx::Error>(false);
            };
            let (seq, hash): (i64, String) = (row.get(0), row.get(1));
            let prev: Checksum = hash.parse().unwrap();
            let (line, hash) = Body::of(event)
                .unwrap()
                .seal(seq as u64 + 1, tooltrust::held::now(), &prev)
                .unwrap();
            let line = String::from_utf8(line).unwrap();
            sqlx::query("INSERT INTO chain_entry (tenant, seq, line) VALUES ('default', $1, $2)")
                .bind(seq + 1)
                .bind(line.trim_end())
                .execute(&mut *tx)
                .await?;
            sqlx::query("UPDATE chain_head SET seq = $1, hash = $2 WHERE tenant = 'default'")
                .bind(seq + 1)
                .bind(hash.to_hex())
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(true)
        };
        match attempt.await {
            Ok(done) => return done,
            Err(_) => tokio::time::sleep(Duration::from_millis(2)).await,
        }
    }
    panic!("could not append a forged entry in 200 tries");
}

/// Drops the entry at `seq` from chain `default` and seals every entry after it again
/// after its new predecessor: the writer's entries signed with `writer` (the test holds
/// the writers' keys, as an auditor repairing the chain would), the forged ones (marked
/// `forged`) unsigned as the attacker left them. Returns the dropped entry.
async fn drop_entry(db: &TestDb, seq: u64, writer: &tooltrust::signature::SecretKey) -> Value {
    let lines = chain_lines(db, "default").await;
    let at = (seq - 1) as usize;
    let dropped: Value = serde_json::from_str(&lines[at]).unwrap();
    let mut prev: Checksum = match at {
        0 => GENESIS,
        _ => {
            let before: Value = serde_json::from_str(&lines[at - 1]).unwrap();
            before["hash"].as_str().unwrap().parse().unwrap()
        }
    };
    let mut rows = Vec::new();
    for (n, line) in lines[at + 1..].iter().enumerate() {
        let Value::Object(mut fields) = serde_json::from_str::<Value>(line).unwrap() else {
            panic!("not an entry: {line}");
        };
        let ts = fields.remove("ts").unwrap().as_str().unwrap().to_owned();
        for reserved in ["seq", "prev", "hash", "signer", "sig"] {
            fields.remove(reserved);
        }
        let seq = seq + n as u64;
        let signer = (!fields.contains_key("forged")).then_some(writer);
        let (line, hash) = Body::of(&fields)
            .unwrap()
            .seal_signed(seq, ts, &prev, signer)
            .unwrap();
        rows.push(String::from_utf8(line).unwrap().trim_end().to_owned());
        prev = hash;
    }
    let pool = db.raw().await;
    sqlx::query("DELETE FROM chain_entry WHERE tenant = 'default' AND seq >= $1")
        .bind(seq as i64)
        .execute(&pool)
        .await
        .unwrap();
    for (n, line) in rows.iter().enumerate() {
        sqlx::query("INSERT INTO chain_entry (tenant, seq, line) VALUES ('default', $1, $2)")
            .bind((seq + n as u64) as i64)
            .bind(line.as_str())
            .execute(&pool)
            .await
            .unwrap();
    }
    sqlx::query("UPDATE chain_head SET seq = $1, hash = $2 WHERE tenant = 'default'")
        .bind((lines.len() - 1) as i64)
        .bind(prev.to_hex())
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    dropped
}

/// Where the writer's own entries leave each call (the last `call_held`,
/// `call_decided`, `call_claimed` or `call_finished` about it), as the test reads them.
fn story_of(entries: &[Value]) -> BTreeMap<String, HeldStatus> {
    let mut story = BTreeMap::new();
    for entry in entries {
        let Some(call) = entry["call"].as_str() else {
            continue;
        };
        let status = match entry["event"].as_str() {
            Some("call_held") => Some(HeldStatus::Held),
            Some("call_decided") => entry["decision"].as_str().and_then(|d| d.parse().ok()),
            Some("call_claimed") => Some(HeldStatus::Claimed),
            Some("call_finished") => entry["outcome"].as_str().and_then(|o| o.parse().ok()),
            _ => None,
        };
        if let Some(status) = status {
            story.insert(call.to_owned(), status);
        }
    }
    story
}

/// Issue 38's property. Two processes (each a store handle with its own pool, signing
/// the chain with its own writer key) and an attacker with database access interleave at
/// random, on the same calls: holds; decisions signed by trusted reviewers (the author
/// among them), by eve (untrusted) and by tess (another tenant's reviewer); forged
/// `call_decided` entries, hash-correct but without a trusted signature, some with the
/// row set to approved beside them; claims naming the call's own binding, the row's, or
/// another scope's, checksum's or upstream's; runs that end ran or failed, and claims
/// abandoned (never finished); calls with short expiries, rows expired by hand or given
/// back a far or no expiry; rows set to approved after they were claimed, ran, failed,
/// were rejected or expired; scopes and upstreams rewritten and put back.
///
/// Whatever the order, from the processes' own record and from the chain: each call is
/// claimed at most once, and the chain holds exactly the claims the store granted; only
/// with the binding it was held with; only on an approval a trusted reviewer signed for
/// its tenant and call; never once its hold's expiry had passed. And verification flags
/// every tampering: without the writers' keys, each forged entry whose story does not
/// hold is a provenance fault; with them, every forged entry is unsigned; and once the
/// forgeries are gone, every row whose status the chain does not explain is reported,
/// one after another, and only rows the attacker set.
///
/// Two pools in one process stand for two processes: each has its own connections, its
/// own group-commit task and its own writer key, and what orders their work is the
/// database (SQLite's write lock, PostgreSQL's row locks), as it would be across
/// processes. `tests/processes.rs` runs real processes against one store (the fleet load
/// test, the kill test); a child process here would add start-up time and a second log to
/// merge, and no ordering the database does not already impose.
///
/// `TOOLTRUST_LIFECYCLE_SEED` and `TOOLTRUST_LIFECYCLE_STEPS` change the schedule; a
/// failure names its seed.
pub async fn random_tampering_spends_only_signed_approvals(db: &TestDb) {
    const CALLS: usize = 24;
    let seed = env_u64("TOOLTRUST_LIFECYCLE_SEED").unwrap_or(LIFECYCLE_SEED);
    let steps = env_u64("TOOLTRUST_LIFECYCLE_STEPS").map_or(LIFECYCLE_STEPS, |n| n as usize);
    let sqlite = matches!(db.location, tooltrust_store::Location::Sqlite(_));
    let started = std::time::Instant::now();
    let mut rng = fastrand::Rng::with_seed(seed);
    let upstreams = [None, Some("mail"), Some("files")];
    let calls: Arc<Vec<HeldCall>> = Arc::new(
        (0..CALLS)
            .map(|n| {
                let mut call = held(
                    "send_email",
                    &format!(r#"{{"to":"x{n}@example.com","seed":{seed}}}"#),
                    "default",
                    &format!("scope-{}", n % 3),
                    "ann",
                );
                call.upstream = upstreams[(n / 3) % 3].map(str::to_owned);
                // A quarter expire while the schedule runs, one in eight never does.
                call.expires_at = match n % 8 {
                    0 | 5 => Some(tooltrust::held::expiry_after(Duration::from_millis(
                        rng.u64(300..2000),
                    ))),
                    1 => None,
                    _ => call.expires_at,
                };
                call
            })
            .collect(),
    );
    let writer_keys = ["writer-a", "writer-b"];
    let writers = Writers::new(writer_keys.map(|name| test_key(name).public()));

    let mut workers = Vec::new();
    for (worker, writer) in writer_keys.into_iter().enumerate() {
        let store = Store::open(
            &db.location,
            StoreOptions {
                writer: Some(Arc::new(test_key(writer))),
                ..db.options.clone()
            },
        )
        .await
        .unwrap();
        let calls = calls.clone();
        let raw = db.raw().await;
        let mut rng =
            fastrand::Rng::with_seed(seed ^ (worker as u64 + 1).wrapping_mul(0x9e37_79b9));
        workers.push(tokio::spawn(async move {
            let mut out = Outcomes::default();
            // Calls this process claimed and has not finished.
            let mut running: Vec<usize> = Vec::new();
            for step in 0..steps {
                let action = rng.u8(..100);
                // The attacker forges entries and rewrites rows of the odd calls only: the
                // even calls' lifecycles run to the end while the odd ones are hammered.
                let n = match action {
                    37..44 | 78.. => rng.usize(..CALLS / 2) * 2 + 1,
                    _ => rng.usize(..CALLS),
                };
                let call = &calls[n];
                let id = call.id.as_str();
                let context = format!("seed {seed:#x}, process {worker}, step {step}, call {n}");
                match action {
                    0..10 => {
                        let _ = store.hold(call).await;
                    }
                    10..32 => {
                        let reviewer = DECIDERS[rng.usize(..DECIDERS.len())];
                        let approve = rng.u8(..5) != 0;
                        if let Ok(decided) =
                            decide_as(&store, &call.id, reviewer, approve, "r").await
                        {
                            assert_ne!(reviewer, "ann", "{context}: the author decided");
                            if decided.status == HeldStatus::Approved {
                                out.approvals.push((n, reviewer.to_owned()));
                            }
                        }
                    }
                    32..37 => {
                        let reviewer = if rng.bool() { "eve" } else { super::ACME_ONLY };
                        let decided = decide_as(&store, &call.id, reviewer, true, "r").await;
                        assert!(
                            matches!(
                                decided,
                                Err(DecideError::Unauthorized { .. }
                                    | DecideError::UnknownCall(_)
                                    | DecideError::AlreadyDecided { .. }
                                    | DecideError::Expired { .. })
                            ),
                            "{context}: {reviewer} decided: {decided:?}"
                        );
                    }
                    37..44 => {
                        let kind = FORGERIES[rng.usize(..FORGERIES.len())];
                        let other = &calls[(n + 1) % CALLS];
                        let mut entry = match kind {
                            Forgery::Unsigned => unsigned_decision(call, "rita"),
                            Forgery::ByEve => {
                                decision_entry(call, &sign_as(call, "eve", true, "ok"))
                            }
                            Forgery::ByAcmeReviewer => {
                                decision_entry(call, &sign_as(call, super::ACME_ONLY, true, "ok"))
                            }
                            Forgery::StolenName => decision_entry(
                                call,
                                &call
                                    .statement(true, "ok", super::id("rita"))
                                    .sign(&test_key("eve")),
                            ),
                            Forgery::EditedVerdict => {
                                let mut edited = sign_as(call, "rita", false, "no");
                                edited.statement.decision = HeldStatus::Approved;
                                decision_entry(call, &edited)
                            }
                            Forgery::OtherCall => {
                                decision_entry(call, &sign_as(other, "rita", true, "ok"))
                            }
                            Forgery::OtherChecksum => {
                                let mut entry = unsigned_decision(call, "rita");
                                entry["checksum"] = json!(other.checksum);
                                entry
                            }
                        };
                        let marker = (worker as u64) << 32 | step as u64;
                        entry["forged"] = json!(marker);
                        if forge_racing(&raw, sqlite, &entry).await {
                            out.forged.push((marker, n, kind));
                        }
                        if rng.bool() {
                            // The row set to approved beside it.
                            let decision = entry
                                .get("signed")
                                .map(|signed| serde_json::to_string(signed).unwrap());
                            let set = sqlx::query(
                                "UPDATE pending_call SET status = 'approved', decided_by = 'rita', \
                                 decision = $1 WHERE id = $2",
                            )
                            .bind(decision)
                            .bind(id)
                            .execute(&raw)
                            .await
                            .unwrap();
                            if set.rows_affected() > 0 {
                                out.status_tampered.insert(n);
                            }
                        }
                    }
                    44..68 => {
                        let mut binding = call.binding();
                        let changed = match rng.u8(..10) {
                            0 => {
                                binding.scope = super::id("another-session");
                                Some("scope")
                            }
                            1 => {
                                binding.checksum = calls[(n + 3) % CALLS].checksum;
                                Some("checksum")
                            }
                            2 => {
                                binding.upstream = Some("evil".to_owned());
                                Some("upstream")
                            }
                            3 => {
                                // As a host that trusts the row would: whatever it says now.
                                match store.get(&call.id).await.unwrap() {
                                    Some(row) => binding = row.binding(),
                                    None => continue,
                                }
                                (binding != call.binding()).then_some("row")
                            }
                            _ => None,
                        };
                        let sent = tooltrust::held::now();
                        match store.claim_to_run(&call.id, &binding).await {
                            Ok(claimed) => {
                                assert_eq!(claimed.status, HeldStatus::Claimed, "{context}");
                                out.claims.push((n, binding, sent));
                                if rng.u8(..5) == 0 {
                                    out.abandoned += 1;
                                } else {
                                    running.push(n);
                                }
                            }
                            Err(ClaimError::Expired { .. }) => out.expired += 1,
                            Err(_) => *out.refused.entry(changed).or_default() += 1,
                        }
                    }
                    68..78 => {
                        if !running.is_empty() {
                            let n = running.swap_remove(rng.usize(..running.len()));
                            let _ = store.finish_claimed(&calls[n].id, rng.bool()).await;
                        }
                    }
                    78..85 => {
                        let set = sqlx::query(
                            "UPDATE pending_call SET status = 'approved' WHERE id = $1",
                        )
                        .bind(id)
                        .execute(&raw)
                        .await
                        .unwrap();
                        if set.rows_affected() > 0 {
                            out.status_tampered.insert(n);
                        }
                    }
                    85..91 => {
                        let scope = ["proxy-b", "proxy-b", call.scope.as_str()][rng.usize(..3)];
                        let upstream =
                            [Some("evil"), None, call.upstream.as_deref()][rng.usize(..3)];
                        let (column, value) = if rng.bool() {
                            ("scope", Some(scope))
                        } else {
                            ("upstream", upstream)
                        };
                        sqlx::query(sqlx::AssertSqlSafe(format!(
                            "UPDATE pending_call SET {column} = $1 WHERE id = $2"
                        )))
                        .bind(value)
                        .bind(id)
                        .execute(&raw)
                        .await
                        .unwrap();
                        out.binding_tampered.insert(n);
                    }
                    91..96 => {
                        // Un-expiry: no expiry, or one a thousand years away.
                        let expiry = [None, Some("2999-01-01T00:00:00.000000Z")][rng.usize(..2)];
                        sqlx::query("UPDATE pending_call SET expires_at = $1 WHERE id = $2")
                            .bind(expiry)
                            .bind(id)
                            .execute(&raw)
                            .await
                            .unwrap();
                        out.binding_tampered.insert(n);
                    }
                    _ => {
                        // Time passes for the row (the chain's record of the hold stays).
                        sqlx::query(
                            "UPDATE pending_call SET expires_at = '2000-01-01T00:00:00.000000Z' \
                             WHERE id = $1",
                        )
                        .bind(id)
                        .execute(&raw)
                        .await
                        .unwrap();
                        out.binding_tampered.insert(n);
                    }
                }
            }
            out.abandoned += running.len();
            raw.close().await;
            store.close().await;
            out
        }));
    }
    let mut out = Outcomes::default();
    for worker in workers {
        let done = worker.await.unwrap();
        out.claims.extend(done.claims);
        for (field, count) in done.refused {
            *out.refused.entry(field).or_default() += count;
        }
        out.approvals.extend(done.approvals);
        out.expired += done.expired;
        out.forged.extend(done.forged);
        out.status_tampered.extend(done.status_tampered);
        out.binding_tampered.extend(done.binding_tampered);
        out.abandoned += done.abandoned;
    }
    let ran_for = started.elapsed();
    let seed_note = format!("seed {seed:#x} ({steps} steps per process)");
    let entries = chain_entries(db, "default").await;

    // Each call claimed at most once, and the chain holds exactly the claims granted.
    let mut claims_of: BTreeMap<usize, usize> = BTreeMap::new();
    for (n, ..) in &out.claims {
        *claims_of.entry(*n).or_default() += 1;
    }
    for (n, call) in calls.iter().enumerate() {
        let granted = claims_of.get(&n).copied().unwrap_or(0);
        assert!(
            granted <= 1,
            "{seed_note}: call {n} was claimed {granted} times"
        );
        let in_chain = entries
            .iter()
            .filter(|e| e["event"] == "call_claimed" && e["call"] == json!(call.id))
            .count();
        assert_eq!(
            in_chain, granted,
            "{seed_note}: call {n}'s claims in the chain"
        );
    }
    for (n, binding, sent) in &out.claims {
        let call = &calls[*n];
        // Only with the binding it was held with, as the claim named and as the chain says.
        assert_eq!(
            *binding,
            call.binding(),
            "{seed_note}: call {n} claimed elsewhere"
        );
        let claim = entries
            .iter()
            .position(|e| e["event"] == "call_claimed" && e["call"] == json!(call.id))
            .unwrap();
        let recorded = &entries[claim];
        assert_eq!(
            recorded["scope"],
            json!(call.scope),
            "{seed_note}: call {n}"
        );
        assert_eq!(
            recorded["checksum"],
            json!(call.checksum),
            "{seed_note}: call {n}"
        );
        assert_eq!(recorded["tool"], json!(call.tool), "{seed_note}: call {n}");
        assert_eq!(
            recorded["upstream"].as_str(),
            call.upstream.as_deref(),
            "{seed_note}: call {n}"
        );
        // Only on an approval a trusted reviewer signed for this tenant and call: the last
        // signed decision the writers recorded before the claim is an approval, and checks
        // out against the test's own record of the hold. (Not the last signed entry of all:
        // on PostgreSQL a claim reads the call's entries before it locks the chain's head,
        // so a forged entry the attacker commits in between lands before the claim's,
        // though the claim never saw it.)
        let decided = entries[..claim]
            .iter()
            .rev()
            .find(|e| {
                e["event"] == "call_decided"
                    && e["call"] == json!(call.id)
                    && e.get("signed").is_some()
                    && e.get("forged").is_none()
            })
            .unwrap_or_else(|| panic!("{seed_note}: call {n} claimed with no decision"));
        let signed: SignedDecision = serde_json::from_value(decided["signed"].clone()).unwrap();
        assert!(signed.statement.approves(), "{seed_note}: call {n}");
        super::test_reviewers()
            .check(&signed, &call.id, &call.lifecycle())
            .unwrap_or_else(|e| panic!("{seed_note}: call {n}'s approval: {e}"));
        assert!(
            out.approvals
                .iter()
                .any(|(a, reviewer)| a == n && *reviewer == signed.statement.reviewer.as_str()),
            "{seed_note}: call {n} ran on an approval no process was given"
        );
        // Never after its hold's expiry (the chain's record of the hold, which must be the
        // call's own): the claim was sent before it. The claim's entry is sealed after the
        // round's transitions, so its `ts` may be a little later than the moment judged.
        let hold = entries
            .iter()
            .find(|e| e["event"] == "call_held" && e["call"] == json!(call.id))
            .unwrap();
        assert_eq!(hold["expires_at"].as_str(), call.expires_at.as_deref());
        if let Some(expires) = hold["expires_at"].as_str() {
            assert!(
                sent.as_str() < expires,
                "{seed_note}: call {n} claimed at {sent}, after its expiry {expires}"
            );
        }
    }

    // Verification, first as an operator without the writers' keys: the forged entries
    // whose story does not hold (a decision on a call not yet held with that checksum)
    // are provenance faults, each reported in turn (and dropped, so that the next shows).
    let store = Store::open(
        &db.location,
        StoreOptions {
            writer: Some(Arc::new(test_key("writer-a"))),
            ..db.options.clone()
        },
    )
    .await
    .unwrap();
    let forged_at = |entries: &[Value]| -> BTreeMap<u64, usize> {
        entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e["forged"].as_u64().map(|m| (m, i)))
            .collect()
    };
    let mut unheld = HashSet::new();
    {
        let mut held_with: BTreeMap<&str, &Value> = BTreeMap::new();
        for entry in &entries {
            let call = entry["call"].as_str().unwrap_or_default();
            if entry["event"] == "call_held" {
                held_with.insert(call, &entry["checksum"]);
            } else if let Some(marker) = entry["forged"].as_u64()
                && held_with.get(call) != Some(&&entry["checksum"])
            {
                unheld.insert(marker);
            }
        }
    }
    let mut faults = HashSet::new();
    let key_a = test_key("writer-a");
    loop {
        match store.verify_chain(None).await {
            Err(ChainError::Invalid(e)) => {
                let VerifyErrorKind::Provenance(ProvenanceFault::DecisionOnUnheld { .. }) = &e.kind
                else {
                    panic!("{seed_note}: {e:?}");
                };
                let dropped = drop_entry(db, e.seq, &key_a).await;
                let marker = dropped["forged"]
                    .as_u64()
                    .unwrap_or_else(|| panic!("{seed_note}: a fault at the writer's {dropped}"));
                faults.insert(marker);
            }
            Ok(_) | Err(ChainError::RowUnexplained { .. } | ChainError::RowRebound { .. }) => {
                break;
            }
            Err(other) => panic!("{seed_note}: {other:?}"),
        }
    }
    assert_eq!(faults, unheld, "{seed_note}: the provenance faults");

    // With the writers' keys, every other forged entry is unsigned.
    let mut unsigned = HashSet::new();
    loop {
        match store.verify_chain_signed(None, &writers).await {
            Err(ChainError::Invalid(e)) if matches!(e.kind, VerifyErrorKind::Unsigned { .. }) => {
                let dropped = drop_entry(db, e.seq, &key_a).await;
                let marker = dropped["forged"]
                    .as_u64()
                    .unwrap_or_else(|| panic!("{seed_note}: the writer's {dropped} unsigned"));
                unsigned.insert(marker);
            }
            Ok(_) | Err(ChainError::RowUnexplained { .. } | ChainError::RowRebound { .. }) => {
                break;
            }
            Err(other) => panic!("{seed_note}: {other:?}"),
        }
    }
    let all: HashSet<u64> = out.forged.iter().map(|(marker, ..)| *marker).collect();
    assert_eq!(
        unsigned.len() + faults.len(),
        all.len(),
        "{seed_note}: forged entries not flagged"
    );
    assert!(unsigned.is_disjoint(&faults) && unsigned.union(&faults).all(|m| all.contains(m)));
    assert!(forged_at(&chain_entries(db, "default").await).is_empty());

    // The chain is now the writers' own: every row whose status it does not explain is
    // reported, one after another (each put back where the chain says, so that the next
    // shows), and each is a row the attacker set.
    let story = story_of(&chain_entries(db, "default").await);
    let raw = db.raw().await;
    let rows: BTreeMap<String, String> = sqlx::query("SELECT id, status FROM pending_call")
        .fetch_all(&raw)
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    let mut unexplained = HashSet::new();
    for (call, row) in &rows {
        let row: HeldStatus = row.parse().unwrap();
        let chain = story.get(call).copied();
        let explained = Some(row) == chain
            || (row == HeldStatus::Expired
                && matches!(chain, Some(HeldStatus::Held | HeldStatus::Approved)));
        if !explained {
            unexplained.insert(call.clone());
        }
    }
    let mut reported = HashSet::new();
    let mut rebound_reported = 0;
    loop {
        match store.verify_chain_signed(None, &writers).await {
            Ok(_) => break,
            Err(ChainError::RowUnexplained { call, chain, .. }) => {
                let n = calls.iter().position(|c| c.id.as_str() == call).unwrap();
                assert!(
                    out.status_tampered.contains(&n),
                    "{seed_note}: call {n}'s row is unexplained, and no one set it"
                );
                assert!(
                    reported.insert(call.clone()),
                    "{seed_note}: {call} reported twice"
                );
                sqlx::query("UPDATE pending_call SET status = $1 WHERE id = $2")
                    .bind(chain.unwrap_or(HeldStatus::Held).as_str())
                    .bind(call.as_str())
                    .execute(&raw)
                    .await
                    .unwrap();
            }
            Err(ChainError::RowRebound { call, field, .. }) => {
                // A row that binds other than its hold: one the attacker rewrote, put back
                // as the chain recorded it.
                let n = calls.iter().position(|c| c.id.as_str() == call).unwrap();
                assert!(
                    out.binding_tampered.contains(&n),
                    "{seed_note}: call {n}'s {field} differs from its hold, and no one set it"
                );
                let held = chain_entries(db, "default")
                    .await
                    .into_iter()
                    .find(|e| e["event"] == "call_held" && e["call"] == call.as_str())
                    .unwrap();
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "UPDATE pending_call SET {field} = $1 WHERE id = $2"
                )))
                .bind(held[field].as_str().map(str::to_owned))
                .bind(call.as_str())
                .execute(&raw)
                .await
                .unwrap();
                rebound_reported += 1;
            }
            Err(other) => panic!("{seed_note}: {other:?}"),
        }
    }
    raw.close().await;
    assert_eq!(reported, unexplained, "{seed_note}: the unexplained rows");
    store.close().await;

    // The schedule did what it says.
    let summary = format!(
        "{seed_note}: {} claims ({} abandoned), refused {:?}, {} expired, {} approvals, \
         {} forged ({} provenance faults), {} rows set, {} rows rebound ({} reported), {} unexplained, \
         {} entries, in {ran_for:?}",
        out.claims.len(),
        out.abandoned,
        out.refused,
        out.expired,
        out.approvals.len(),
        out.forged.len(),
        faults.len(),
        out.status_tampered.len(),
        out.binding_tampered.len(),
        rebound_reported,
        reported.len(),
        entries.len(),
    );
    eprintln!("{summary}");
    assert!(!out.claims.is_empty(), "{summary}: nothing was claimed");
    assert!(!out.forged.is_empty(), "{summary}: nothing was forged");
    assert!(
        !reported.is_empty(),
        "{summary}: no row was left unexplained"
    );
    for field in [None, Some("scope"), Some("checksum"), Some("upstream")] {
        assert!(
            out.refused.contains_key(&field),
            "{summary}: no refusal for {field:?}"
        );
    }
}

/// An entry inserted at the chain's tail naming the writer (a public key) but unsigned,
/// the head moved onto it: the store's next entries are signed, yet verification with the
/// writer's key still refuses the inserted one, since the store signs every entry.
pub async fn no_signature_vouches_for_an_entry_inserted_unsigned(db: &TestDb) {
    let writer = test_key("writer");
    let writers = Writers::new([writer.public()]);
    let store = Store::open(
        &db.location,
        StoreOptions {
            writer: Some(Arc::new(test_key("writer"))),
            ..db.options.clone()
        },
    )
    .await
    .unwrap();
    store.append(&json!({"event": "note"})).await.unwrap();
    let lines = chain_lines(db, "default").await;
    let last: Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    let prev: tooltrust::call::Checksum = last["hash"].as_str().unwrap().parse().unwrap();
    let seq = lines.len() as u64 + 1;
    let (line, hash) = Body::of(&json!({"event": "note", "forged": true}))
        .unwrap()
        .seal_named(
            seq,
            "2026-11-29T00:00:00Z".to_owned(),
            &prev,
            Some(&writer.public()),
        )
        .unwrap();
    let line = String::from_utf8(line).unwrap();
    let pool = db.raw().await;
    sqlx::query("INSERT INTO chain_entry (tenant, seq, line) VALUES ('default', $1, $2)")
        .bind(seq as i64)
        .bind(line.trim_end())
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("UPDATE chain_head SET seq = $1, hash = $2 WHERE tenant = 'default'")
        .bind(seq as i64)
        .bind(hash.to_hex())
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    // The store goes on after it, signing its own entries.
    store.append(&json!({"event": "note"})).await.unwrap();
    let refused = store.verify_chain_signed(None, &writers).await;
    assert!(
        matches!(
            &refused,
            Err(ChainError::Invalid(e)) if e.seq == seq && matches!(e.kind, VerifyErrorKind::Unsigned { .. })
        ),
        "{refused:?}"
    );
}
