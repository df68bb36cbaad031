//! A store upgraded from before version 3, when decisions were recorded but holds were
//! not: its chain verifies after the upgrade (which records the calls decided before holds
//! were recorded), and the approvals given then, unsigned, get an expiry and are never
//! spent.

use serde_json::json;
use sqlx::Row;
use tooltrust::audit::{Body, GENESIS};
use tooltrust_store::ClaimError;

use crate::common::{TestDb, held};

async fn a_version_2_decision_verifies_after_the_upgrade(db: &TestDb) {
    let postgres = matches!(db.location, tooltrust_store::Location::Postgres(_));
    let (v1, v2) = if postgres {
        (
            include_str!("../../migrations/postgres/0001_initial.sql"),
            include_str!("../../migrations/postgres/0002_declaration.sql"),
        )
    } else {
        (
            include_str!("../../migrations/sqlite/0001_initial.sql"),
            include_str!("../../migrations/sqlite/0002_declaration.sql"),
        )
    };
    if let tooltrust_store::Location::Sqlite(path) = &db.location {
        std::fs::File::create(path).unwrap();
    }
    let pool = db.raw().await;
    sqlx::raw_sql(v1).execute(&pool).await.unwrap();
    sqlx::raw_sql(v2).execute(&pool).await.unwrap();
    sqlx::query(
        "CREATE TABLE tooltrust_schema (version BIGINT PRIMARY KEY, checksum TEXT NOT NULL, applied_at TEXT NOT NULL)",
    )
    .execute(&pool)
    .await
    .unwrap();
    for (version, sql) in [(1i64, v1), (2, v2)] {
        sqlx::query("INSERT INTO tooltrust_schema VALUES ($1, $2, '2026-01-01T00:00:00Z')")
            .bind(version)
            .bind(tooltrust::call::Checksum::of(sql.as_bytes()).to_hex())
            .execute(&pool)
            .await
            .unwrap();
    }
    // A call approved under version 2: its row, and its decision in the chain (no hold).
    let call = held("send_email", r#"{"to":"eve"}"#, "default", "support", "ann");
    sqlx::query(
        "INSERT INTO pending_call (id, tenant, tool, args, checksum, rule, reason, scope, author, status, created_at, decided_by, decision_reason, decided_at) \
         VALUES ($1, 'default', 'send_email', $2, $3, 'tainted_consequential', 'r', 'support', 'ann', 'approved', '2026-01-01T00:00:00.000000Z', 'rita', 'fine', '2026-01-01T00:00:01.000000Z')",
    )
    .bind(call.id.as_str())
    .bind(call.args.as_str())
    .bind(call.checksum.to_hex())
    .execute(&pool)
    .await
    .unwrap();
    let decided = json!({
        "event": "call_decided", "call": call.id, "tool": "send_email",
        "checksum": call.checksum, "scope": "support", "author": "ann",
        "reviewer": "rita", "decision": "approved", "reason": "fine",
    });
    let (line, hash) = Body::of(&decided)
        .unwrap()
        .seal(1, "2026-01-01T00:00:01Z".to_owned(), &GENESIS)
        .unwrap();
    sqlx::query("INSERT INTO chain_entry (tenant, seq, line) VALUES ('default', 1, $1)")
        .bind(String::from_utf8(line).unwrap().trim_end())
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("INSERT INTO chain_head (tenant, seq, hash) VALUES ('default', 1, $1)")
        .bind(hash.to_hex())
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;

    let store = db.open().await;
    // The upgrade said which calls were decided before holds were recorded; verify passes.
    let report = store.verify_chain(None).await.unwrap();
    assert_eq!(report.entries, 2);
    let pool = db.raw().await;
    let last: String = sqlx::query("SELECT line FROM chain_entry WHERE seq = 2")
        .fetch_one(&pool)
        .await
        .unwrap()
        .get(0);
    pool.close().await;
    let last: serde_json::Value = serde_json::from_str(&last).unwrap();
    assert_eq!(last["event"], "store_upgraded");
    assert_eq!(last["decided_before_holds"], json!([call.id]));
    // Opening again records nothing more.
    drop(store);
    let store = db.open().await;
    assert_eq!(store.verify_chain(None).await.unwrap().entries, 2);
    // The old approval got an expiry, and, unsigned, is never spent.
    let upgraded = store.get(&call.id).await.unwrap().unwrap();
    assert!(upgraded.expires_at.is_some());
    let refused = store.claim_to_run(&call.id, &upgraded.binding()).await;
    assert!(
        matches!(refused, Err(ClaimError::NoRecordedApproval(_))),
        "{refused:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_version_2_decisions_verify_after_the_upgrade() {
    a_version_2_decision_verifies_after_the_upgrade(&TestDb::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_version_2_decisions_verify_after_the_upgrade() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    a_version_2_decision_verifies_after_the_upgrade(&db).await;
}
