//! The store's speed, on SQLite and (with `TOOLTRUST_TEST_POSTGRES`) PostgreSQL:
//!
//! 1. Chain appends per second with 1, 8 and 32 concurrent appenders (tasks of one
//!    process, one store), each against a plain `INSERT` of the same row (the same
//!    sealed line, one autocommit statement per row, the same number of concurrent
//!    connections) in the same round. Goal at 8 appenders: at least 0.7x the plain rate
//!    (group commit batches what one chain must otherwise do one fsync at a time).
//! 2. On PostgreSQL, 8 appenders each on a chain (tenant) of its own: one primary's
//!    rate when the chains do not share a head.
//! 3. The review queue's first page (the 50 newest pending calls) out of 100,000 held
//!    calls, through `Store::list`, against the same query through a plain connection.
//!    Goal: p99 under 10 ms.
//!
//! 4. A claim of an approved call (its signed decision checked, its hold and claims found
//!    through the chain's `call` index) on a chain of `TOOLTRUST_BENCH_CHAIN` entries
//!    (default 1,000,000, each naming a call, so the index holds as many) against the same
//!    claim on a chain of none, in the same run. Goal: independent of the chain's length
//!    (ratio at most 2).
//!
//! `cargo bench -p tooltrust-store --bench store [-- FILTER]`; `TOOLTRUST_BENCH_ROUNDS`
//! (default 5) sets the rounds and `TOOLTRUST_BENCH_ENTRIES` (default 600) the entries
//! per measurement. Each engine works in a fresh database (a temporary SQLite file, a
//! PostgreSQL schema dropped at the end).

#[path = "../../runtime/benches/harness/mod.rs"]
mod harness;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use harness::Goal;
use serde_json::json;
use sqlx::{AnyPool, AssertSqlSafe, Connection, Executor};
use tokio::runtime::Runtime;
use tooltrust::Id;
use tooltrust::audit::{Body, GENESIS};
use tooltrust_store::{HeldStatus, ListFilter, Location, Store, StoreOptions};

/// A database for one engine's rows, and how to reach its tables with a plain pool.
struct Bench {
    name: &'static str,
    location: Location,
    options: StoreOptions,
    raw_url: String,
    _dir: Option<tempfile::TempDir>,
    schema: Option<(String, String)>,
}

impl Bench {
    fn sqlite() -> Bench {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bench.db");
        Bench {
            name: "sqlite",
            raw_url: format!("sqlite://{}", path.display()),
            location: Location::Sqlite(path),
            options: StoreOptions::default(),
            _dir: Some(dir),
            schema: None,
        }
    }

    fn postgres(runtime: &Runtime) -> Option<Bench> {
        let base = std::env::var("TOOLTRUST_TEST_POSTGRES").ok()?;
        let schema = format!("tt_bench_{}", Id::random().expect("OS randomness"));
        runtime.block_on(admin(&base, format!("CREATE SCHEMA {schema}")));
        let separator = if base.contains('?') { '&' } else { '?' };
        Some(Bench {
            name: "postgres",
            raw_url: format!("{base}{separator}options=-c%20search_path%3D{schema}"),
            location: Location::Postgres(base.clone()),
            options: StoreOptions {
                postgres_schema: Some(schema.clone()),
                ..StoreOptions::default()
            },
            _dir: None,
            schema: Some((base, schema)),
        })
    }

    async fn raw(&self, connections: u32) -> AnyPool {
        sqlx::any::install_default_drivers();
        sqlx::any::AnyPoolOptions::new()
            .max_connections(connections)
            .connect(&self.raw_url)
            .await
            .unwrap()
    }
}

async fn admin(base: &str, sql: String) {
    let mut conn = sqlx::PgConnection::connect(base).await.unwrap();
    conn.execute(AssertSqlSafe(sql)).await.unwrap();
    conn.close().await.unwrap();
}

fn entries_per_measurement() -> usize {
    std::env::var("TOOLTRUST_BENCH_ENTRIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(600)
}

/// The event every append records, and the line a plain insert writes for it.
fn event(n: usize) -> serde_json::Value {
    json!({"event": "call_allowed", "tool": "fetch_page", "call": format!("c{n}"), "rule": "read_only", "reason": "a read-only tool"})
}

fn sealed_line() -> String {
    let (line, _) = Body::of(&event(0))
        .unwrap()
        .seal(1, "2026-01-01T00:00:00.000000Z".to_owned(), &GENESIS)
        .unwrap();
    String::from_utf8(line).unwrap().trim_end().to_owned()
}

/// Entries per second: `appenders` tasks share `total` appends, each on its tenant.
async fn append_rate(store: &Store, appenders: usize, total: usize, tenants: bool) -> f64 {
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for a in 0..appenders {
        let store = if tenants {
            store.for_tenant(Id::new(format!("tenant-{a}")).unwrap())
        } else {
            store.clone()
        };
        tasks.spawn(async move {
            for n in (a..total).step_by(appenders) {
                store.append(&event(n)).await.unwrap();
            }
        });
    }
    tasks.join_all().await;
    total as f64 / started.elapsed().as_secs_f64()
}

/// Rows per second: `connections` tasks share `total` plain autocommit inserts.
async fn insert_rate(
    pool: &AnyPool,
    connections: usize,
    total: usize,
    seq: &Arc<AtomicI64>,
) -> f64 {
    let line: Arc<str> = sealed_line().into();
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..connections {
        let (pool, line, seq) = (pool.clone(), line.clone(), seq.clone());
        tasks.spawn(async move {
            for _ in (c..total).step_by(connections) {
                sqlx::query("INSERT INTO bench_plain (tenant, seq, line) VALUES ($1, $2, $3)")
                    .bind("default")
                    .bind(seq.fetch_add(1, Ordering::Relaxed))
                    .bind(line.as_ref())
                    .execute(&pool)
                    .await
                    .unwrap();
            }
        });
    }
    tasks.join_all().await;
    total as f64 / started.elapsed().as_secs_f64()
}

fn appends(runtime: &Runtime, bench: &Bench) {
    let total = entries_per_measurement();
    let rounds = harness::rounds(5);
    let store = runtime
        .block_on(Store::open(&bench.location, bench.options.clone()))
        .unwrap();
    runtime.block_on(async {
        let pool = bench.raw(1).await;
        pool.execute(
            "CREATE TABLE bench_plain (tenant TEXT NOT NULL, seq BIGINT NOT NULL, line TEXT NOT NULL, PRIMARY KEY (tenant, seq))",
        )
        .await
        .unwrap();
        pool.close().await;
    });
    let seq = Arc::new(AtomicI64::new(1));
    let mut configs = vec![
        (1, false, Goal::None),
        (8, false, Goal::AtLeast(0.7)),
        (32, false, Goal::None),
    ];
    if bench.name == "postgres" {
        configs.push((8, true, Goal::None));
    }
    for (appenders, tenants, goal) in configs {
        let name = if tenants {
            format!(
                "store/append {}, {appenders} appenders on {appenders} chains",
                bench.name
            )
        } else {
            format!(
                "store/append {}, {appenders} appenders on one chain",
                bench.name
            )
        };
        if !harness::selected(&name) {
            continue;
        }
        let pool = runtime.block_on(bench.raw(appenders as u32));
        let (mut subject, mut baseline) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            let chain = || runtime.block_on(append_rate(&store, appenders, total, tenants));
            let plain = || runtime.block_on(insert_rate(&pool, appenders, total, &seq));
            if round % 2 == 0 {
                subject.push(chain());
                baseline.push(plain());
            } else {
                baseline.push(plain());
                subject.push(chain());
            }
        }
        let baseline_name = format!("plain INSERT, {appenders} connections");
        harness::throughput(
            &name,
            &baseline_name,
            "entries/s",
            goal,
            &baseline,
            &subject,
        )
        .print();
        runtime.block_on(pool.close());
    }
    runtime.block_on(store.close());
}

/// 100,000 held calls, a quarter of each status, one a microsecond apart.
const HELD_CALLS: i64 = 100_000;

fn fill_queue(runtime: &Runtime, bench: &Bench) {
    let checksum = "0".repeat(64);
    let columns =
        "id, tenant, tool, args, checksum, rule, reason, scope, author, status, created_at";
    let status = "CASE n % 4 WHEN 0 THEN 'held' WHEN 1 THEN 'approved' WHEN 2 THEN 'rejected' ELSE 'ran' END";
    let sql = match bench.name {
        "sqlite" => format!(
            "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < {HELD_CALLS}) \
             INSERT INTO pending_call ({columns}) SELECT 'call-' || n, 'default', 'send_email', \
             '{{\"n\":' || n || '}}', '{checksum}', 'tainted_consequential', 'held', 'support', 'ann', \
             {status}, printf('2026-01-01T00:00:00.%06dZ', n) FROM s"
        ),
        _ => format!(
            "INSERT INTO pending_call ({columns}) SELECT 'call-' || n, 'default', 'send_email', \
             '{{\"n\":' || n || '}}', '{checksum}', 'tainted_consequential', 'held', 'support', 'ann', \
             {status}, '2026-01-01T00:00:00.' || lpad(n::text, 6, '0') || 'Z' \
             FROM generate_series(1, {HELD_CALLS}) AS n"
        ),
    };
    runtime.block_on(async {
        let pool = bench.raw(1).await;
        pool.execute(AssertSqlSafe(sql)).await.unwrap();
        pool.execute(if bench.name == "sqlite" {
            "ANALYZE"
        } else {
            "ANALYZE pending_call"
        })
        .await
        .unwrap();
        pool.close().await;
    });
}

fn list_query(runtime: &Runtime, bench: &Bench) {
    let name = format!(
        "store/list {}, 50 newest pending of 100000 calls",
        bench.name
    );
    if !harness::selected(&name) {
        return;
    }
    let store = runtime
        .block_on(Store::open(&bench.location, bench.options.clone()))
        .unwrap();
    fill_queue(runtime, bench);
    let pool = runtime.block_on(bench.raw(1));
    let filter = ListFilter {
        status: Some(HeldStatus::Held),
        limit: Some(50),
        ..ListFilter::default()
    };
    let listed = runtime.block_on(store.list(&filter)).unwrap();
    assert_eq!(listed.len(), 50);
    assert_eq!(listed[0].id.as_str(), "call-100000");
    let raw_sql = "SELECT id, tenant, tool, args, checksum, rule, reason, scope, author, \
        principal_request, context, status, created_at, decided_by, decision_reason, decided_at \
        FROM pending_call WHERE status = $1 ORDER BY created_at DESC, id DESC LIMIT 50";
    harness::latency(
        &name,
        "the same SELECT on a plain connection",
        Duration::from_millis(10),
        1000,
        || {
            runtime
                .block_on(sqlx::query(raw_sql).bind("pending").fetch_all(&pool))
                .unwrap()
        },
        || runtime.block_on(store.list(&filter)).unwrap(),
    );
    runtime.block_on(pool.close());
    runtime.block_on(store.close());
}

/// Section 4: claims on a long chain and on an empty one.
fn claims(runtime: &Runtime, bench: &Bench) {
    use tooltrust::held::{AllTenants, Reviewer, Reviewers, Tenants};
    use tooltrust::signature::SecretKey;
    let entries: u64 = std::env::var("TOOLTRUST_BENCH_CHAIN")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000);
    let key = SecretKey::from_seed([9; 32]);
    let reviewers = Reviewers::from_list(vec![Reviewer {
        id: Id::new("rita").unwrap(),
        key: key.public(),
        tenants: Tenants::All(AllTenants::All),
    }])
    .unwrap();
    let options = StoreOptions {
        reviewers: Arc::new(reviewers),
        ..bench.options.clone()
    };
    let store = runtime
        .block_on(Store::open(&bench.location, options))
        .unwrap();
    let long = store.for_tenant(Id::new("long-chain").unwrap());
    let short = store.for_tenant(Id::new("short-chain").unwrap());
    let filled = Instant::now();
    const BATCH: u64 = 10_000;
    for batch in 0..entries.div_ceil(BATCH) {
        let events: Vec<serde_json::Value> = (batch * BATCH..((batch + 1) * BATCH).min(entries))
            .map(|i| json!({"event": "filler", "call": format!("filler-{i}")}))
            .collect();
        runtime.block_on(long.append_all(&events)).unwrap();
    }
    harness::note(&format!(
        "store/{}: {entries} entries appended to one chain in {:?}",
        bench.name,
        filled.elapsed()
    ));
    // One approved call per sample, held and decided (signed) before the clock starts.
    let approved = |store: &Store, n: usize| {
        let call = tooltrust::ToolCall::from_model(
            "send_email",
            &format!(r#"{{"to":"claim-{n}@example.com"}}"#),
        )
        .unwrap();
        let held = tooltrust_store::HeldCall::new(
            &call,
            store.tenant().clone(),
            "tainted_consequential",
            "a tainted scope calls a consequential tool",
            Id::new("support").unwrap(),
            Id::new("agent").unwrap(),
        );
        let held = runtime.block_on(store.hold(&held)).unwrap();
        let signed = held
            .statement(true, "fine", Id::new("rita").unwrap())
            .sign(&key);
        runtime.block_on(store.decide(&signed)).unwrap()
    };
    let claim = |store: &Store, held: &tooltrust_store::HeldCall| {
        let start = Instant::now();
        runtime
            .block_on(store.claim_to_run(&held.id, &held.binding()))
            .unwrap();
        start.elapsed()
    };
    let (mut on_long, mut on_short) = (Vec::new(), Vec::new());
    for n in 0..40 {
        let (a, b) = (approved(&long, n), approved(&short, n));
        on_long.push(claim(&long, &a));
        on_short.push(claim(&short, &b));
    }
    on_long.sort();
    on_short.sort();
    let (long_median, short_median) = (on_long[on_long.len() / 2], on_short[on_short.len() / 2]);
    let ratio = long_median.as_secs_f64() / short_median.as_secs_f64();
    harness::note(&format!(
        "store/{}: a claim on a chain of {entries} entries, median {long_median:?}, against {short_median:?} on an empty chain: {ratio:.2}x (goal at most 2x: {})",
        bench.name,
        if ratio <= 2.0 { "met" } else { "MISSED" },
    ));
    runtime.block_on(store.close());
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut benches = vec![Bench::sqlite()];
    match Bench::postgres(&runtime) {
        Some(bench) => benches.push(bench),
        None => harness::note(
            "PostgreSQL not measured: set TOOLTRUST_TEST_POSTGRES=postgres://postgres@127.0.0.1:5432/test",
        ),
    }
    for bench in &benches {
        appends(&runtime, bench);
        list_query(&runtime, bench);
        claims(&runtime, bench);
    }
    for bench in benches {
        if let Some((base, schema)) = &bench.schema {
            runtime.block_on(admin(base, format!("DROP SCHEMA {schema} CASCADE")));
        }
    }
}
