//! Tests across processes, each process a copy of this very binary run with `--child`:
//!
//! - `kill_mid_append_sqlite` / `kill_mid_append_postgres`: a process appending from
//!   four tasks is killed with SIGKILL at a random moment, 100 times over one store;
//!   every append it acknowledged is in the chain, and the chain verifies.
//! - `two_processes_share_one_sqlite_file`: two processes open a fresh file at the
//!   same moment and append at once; the schema is applied once and the chain holds
//!   every entry of both, linear.
//! - `fleet_load_postgres`: the load test. Agent processes (8) decide, claim and record
//!   against one PostgreSQL chain at once; every call is decided and run exactly once,
//!   no entry is lost or duplicated, the chain verifies. `TOOLTRUST_LOAD_DECISIONS` sets
//!   the decisions per agent (default 250; the full load is 2000:
//!   `TOOLTRUST_LOAD_DECISIONS=2000 cargo test --release -p tooltrust-store --test processes -- fleet`).
//!
//! The PostgreSQL cases need `TOOLTRUST_TEST_POSTGRES` (`tests/store/postgres.rs` says so when
//! it is missing). Arguments that are not flags filter the cases by name.

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::Instant;

use serde_json::json;
use tooltrust::call::Checksum;
use tooltrust_store::{
    ClaimError, DecideError, HeldStatus, ListFilter, Location, Store, StoreOptions,
};

use common::contract::chain_entries;
use common::{TestDb, decide_as, id, numbered};

/// A case returns whether it ran (the PostgreSQL ones need `TOOLTRUST_TEST_POSTGRES`).
type Case = fn(&tokio::runtime::Runtime) -> bool;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        return child(&args[1..]);
    }
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let cases: [(&str, Case); 4] = [
        ("kill_mid_append_sqlite", kill_mid_append_sqlite),
        ("kill_mid_append_postgres", kill_mid_append_postgres),
        (
            "two_processes_share_one_sqlite_file",
            two_processes_share_one_sqlite_file,
        ),
        ("fleet_load_postgres", fleet_load_postgres),
    ];
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for (name, case) in cases {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        let started = Instant::now();
        match catch_unwind(AssertUnwindSafe(|| case(&runtime))) {
            Ok(true) => {
                passed += 1;
                println!(
                    "test {name} ... ok ({:.1} s)",
                    started.elapsed().as_secs_f64()
                );
            }
            // tests/store/postgres.rs says, once, how to run them.
            Ok(false) => skipped += 1,
            Err(_) => {
                failed += 1;
                println!("test {name} ... FAILED");
            }
        }
    }
    println!("processes: {passed} passed, {failed} failed, {skipped} skipped");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// How a child finds the store: the location text and the PostgreSQL schema (or `-`).
fn store_args(db: &TestDb) -> [String; 2] {
    let text = match &db.location {
        Location::Sqlite(path) => format!("sqlite:{}", path.display()),
        Location::Postgres(url) => url.clone(),
    };
    [
        text,
        db.options
            .postgres_schema
            .clone()
            .unwrap_or_else(|| "-".to_owned()),
    ]
}

fn spawn_child(role: &str, store: &[String; 2], rest: &[String]) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .arg("--child")
        .arg(role)
        .args(store)
        .args(rest)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// A line a child printed: `ack SEQ HASH`, `decided ID`, `claimed ID`, `refused ID`.
fn parse_acks(lines: &[String]) -> Vec<(u64, Checksum)> {
    lines
        .iter()
        .filter_map(|line| line.strip_prefix("ack "))
        .map(|rest| {
            let (seq, hash) = rest.split_once(' ').unwrap();
            (seq.parse().unwrap(), hash.parse().unwrap())
        })
        .collect()
}

/// Every acknowledged entry is in the chain with the hash it was acknowledged with,
/// and the chain verifies; returns the number of entries.
fn check_acknowledged(
    runtime: &tokio::runtime::Runtime,
    db: &TestDb,
    acks: &[(u64, Checksum)],
) -> u64 {
    runtime.block_on(async {
        let store = db.open().await;
        let report = store.verify_chain(None).await.unwrap();
        store.close().await;
        let hashes: HashMap<u64, Checksum> = chain_entries(db, "default")
            .await
            .into_iter()
            .map(|entry| {
                let seq = entry["seq"].as_u64().unwrap();
                (seq, entry["hash"].as_str().unwrap().parse().unwrap())
            })
            .collect();
        for (seq, hash) in acks {
            assert_eq!(
                hashes.get(seq),
                Some(hash),
                "acknowledged entry {seq} is missing or changed"
            );
        }
        report.entries
    })
}

fn kill_mid_append_sqlite(runtime: &tokio::runtime::Runtime) -> bool {
    kill_mid_append(runtime, &TestDb::sqlite());
    true
}

fn kill_mid_append_postgres(runtime: &tokio::runtime::Runtime) -> bool {
    let Some(base) = common::postgres_configured() else {
        return false;
    };
    kill_mid_append(runtime, &runtime.block_on(TestDb::postgres_at(base)));
    true
}

/// 100 times: start an appending child, let it acknowledge a random number of appends
/// (0 to 40), kill it with SIGKILL, and check what it acknowledged.
fn kill_mid_append(runtime: &tokio::runtime::Runtime, db: &TestDb) {
    // The schema exists before the first child, which is killed at once in some rounds.
    runtime.block_on(async { db.open().await.close().await });
    let args = store_args(db);
    let mut acks = Vec::new();
    let mut rng = fastrand::Rng::with_seed(0x5eed);
    for round in 0..100 {
        let mut child = spawn_child("append", &args, &["4".to_owned(), "0".to_owned()]);
        let wanted = rng.usize(0..=40);
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut seen = Vec::new();
        while seen.len() <= wanted {
            match lines.next() {
                Some(Ok(line)) if line.starts_with("ack ") => seen.push(line),
                Some(Ok(_)) => {}
                _ => panic!("round {round}: the appender ended before it was killed"),
            }
        }
        child.kill().unwrap(); // SIGKILL: no destructor, no rollback, no flush
        // What it printed before dying was acknowledged too.
        seen.extend(
            lines
                .map_while(Result::ok)
                .filter(|l| l.starts_with("ack ")),
        );
        child.wait().unwrap();
        acks.extend(parse_acks(&seen));
        if round % 10 == 9 {
            check_acknowledged(runtime, db, &acks);
        }
    }
    let entries = check_acknowledged(runtime, db, &acks);
    assert!(entries >= acks.len() as u64);
    let distinct: HashSet<_> = acks.iter().map(|(seq, _)| seq).collect();
    assert_eq!(
        distinct.len(),
        acks.len(),
        "no two acknowledgements share a seq"
    );
    println!(
        "note: {} kills; {} acknowledged appends, all present; {} entries in all (the rest committed as the kill struck)",
        100,
        acks.len(),
        entries
    );
}

fn two_processes_share_one_sqlite_file(runtime: &tokio::runtime::Runtime) -> bool {
    let db = TestDb::sqlite();
    let args = store_args(&db);
    let children: Vec<Child> = (0..2)
        .map(|_| spawn_child("append", &args, &["4".to_owned(), "400".to_owned()]))
        .collect();
    let mut acks = Vec::new();
    for mut child in children {
        let lines: Vec<String> = BufReader::new(child.stdout.take().unwrap())
            .lines()
            .map_while(Result::ok)
            .collect();
        assert!(child.wait().unwrap().success());
        acks.extend(parse_acks(&lines));
    }
    assert_eq!(acks.len(), 800);
    assert_eq!(check_acknowledged(runtime, &db, &acks), 800);
    true
}

fn decisions_per_agent() -> usize {
    std::env::var("TOOLTRUST_LOAD_DECISIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(250)
}

const AGENTS: usize = 8;

/// The calls each agent works on at once (its concurrent sessions).
const LANES: usize = 8;

/// The load test: calls held for 8 agents; agent `i` works on its own share and its
/// neighbour's, so every call is contested by two processes.
fn fleet_load_postgres(runtime: &tokio::runtime::Runtime) -> bool {
    let Some(base) = common::postgres_configured() else {
        return false;
    };
    let db = runtime.block_on(TestDb::postgres_at(base));
    let per_agent = decisions_per_agent();
    let store = runtime.block_on(db.open());
    let total = per_agent * AGENTS;
    runtime.block_on(async {
        let mut holds = tokio::task::JoinSet::new();
        for worker in 0..8 {
            let store = store.clone();
            holds.spawn(async move {
                for n in (worker..total).step_by(8) {
                    store.hold(&numbered(n, "author")).await.unwrap();
                }
            });
        }
        holds.join_all().await;
    });
    let args = store_args(&db);
    let started = Instant::now();
    let agents: Vec<Child> = (0..AGENTS)
        .map(|agent| spawn_child("agent", &args, &[agent.to_string(), per_agent.to_string()]))
        .collect();
    let mut lines = Vec::new();
    for mut agent in agents {
        lines.extend(
            BufReader::new(agent.stdout.take().unwrap())
                .lines()
                .map_while(Result::ok)
                .collect::<Vec<_>>(),
        );
        assert!(agent.wait().unwrap().success(), "an agent failed");
    }
    let elapsed = started.elapsed();

    let acks = parse_acks(&lines);
    let of =
        |kind: &str| -> Vec<&str> { lines.iter().filter_map(|l| l.strip_prefix(kind)).collect() };
    let (decided, claimed, refused) = (of("decided "), of("claimed "), of("refused "));
    let calls = runtime
        .block_on(store.list(&ListFilter::default()))
        .unwrap();
    assert_eq!(calls.len(), total);
    assert!(
        calls.iter().all(|c| c.status == HeldStatus::Claimed),
        "every call was claimed"
    );
    let all: HashSet<String> = calls.iter().map(|c| c.id.to_string()).collect();
    let once = |ids: &[&str], what: &str| {
        let set: HashSet<String> = ids.iter().map(|s| s.to_string()).collect();
        assert_eq!(ids.len(), total, "{what}: {} for {total} calls", ids.len());
        assert_eq!(set, all, "{what}: every call exactly once");
    };
    once(&decided, "decided");
    once(&claimed, "claimed");

    let entries_in_chain = check_acknowledged(runtime, &db, &acks);
    let chain = runtime.block_on(chain_entries(&db, "default"));
    let mut per_kind: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for entry in &chain {
        let kind = entry["event"].as_str().unwrap().to_owned();
        let key = entry
            .get("call")
            .or_else(|| entry.get("n"))
            .map(ToString::to_string)
            .unwrap_or_default();
        per_kind.entry(kind).or_default().push(key);
    }
    let distinct = |kind: &str| {
        per_kind
            .get(kind)
            .map_or(0, |v| v.iter().collect::<HashSet<_>>().len())
    };
    let count = |kind: &str| per_kind.get(kind).map_or(0, Vec::len);
    assert_eq!(
        (count("call_decided"), distinct("call_decided")),
        (total, total)
    );
    assert_eq!(
        (count("call_claimed"), distinct("call_claimed")),
        (total, total)
    );
    assert_eq!((count("call_held"), distinct("call_held")), (total, total));
    assert_eq!(count("call_decision_refused"), refused.len());
    assert_eq!(
        (count("tool_ran"), distinct("tool_ran")),
        (acks.len(), acks.len())
    );
    assert_eq!(entries_in_chain as usize, chain.len());
    assert_eq!(
        chain.len(),
        3 * total + refused.len() + acks.len(),
        "no entry lost or added"
    );
    println!(
        "note: load: {AGENTS} agent processes x {per_agent} decisions on one PostgreSQL chain in {:.2} s: {total} decisions ({:.0}/s), {} refused decisions, {total} claims, {} recorded events; {} chain entries ({:.0}/s), verified",
        elapsed.as_secs_f64(),
        total as f64 / elapsed.as_secs_f64(),
        refused.len(),
        acks.len(),
        chain.len(),
        chain.len() as f64 / elapsed.as_secs_f64()
    );
    runtime.block_on(store.close());
    true
}

/// The child's side: `append LOCATION SCHEMA WRITERS COUNT` (COUNT 0: until killed) or
/// `agent LOCATION SCHEMA INDEX DECISIONS`.
fn child(args: &[String]) -> ExitCode {
    let [role, location, schema, rest @ ..] = args else {
        eprintln!("usage: --child append|agent LOCATION SCHEMA …");
        return ExitCode::FAILURE;
    };
    let location = Location::parse(location).unwrap();
    let options = StoreOptions {
        postgres_schema: (schema != "-").then(|| schema.clone()),
        ..common::test_options()
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async move {
        let store = Store::open(&location, options).await.unwrap();
        match role.as_str() {
            "append" => {
                let writers: usize = rest[0].parse().unwrap();
                let count: usize = rest[1].parse().unwrap();
                append_child(store, writers, count).await
            }
            "agent" => {
                let index: usize = rest[0].parse().unwrap();
                let decisions: usize = rest[1].parse().unwrap();
                agent_child(store, index, decisions).await
            }
            other => panic!("unknown role {other}"),
        }
    });
    ExitCode::SUCCESS
}

fn say(line: String) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").unwrap();
    out.flush().unwrap();
}

async fn append_child(store: Store, writers: usize, count: usize) {
    let mut tasks = tokio::task::JoinSet::new();
    for writer in 0..writers {
        let store = store.clone();
        tasks.spawn(async move {
            let mut n = 0;
            while count == 0 || n < count / writers {
                let receipt = store
                    .append(&json!({"event": "tool_ran", "pid": std::process::id(), "writer": writer, "n": n}))
                    .await
                    .unwrap();
                say(format!("ack {} {}", receipt.seq, receipt.hash));
                n += 1;
            }
        });
    }
    tasks.join_all().await;
    store.close().await;
}

/// Agent `index` decides (approves) the calls of its share and its neighbour's, in
/// order, [`LANES`] tasks at once; then claims them; and records one event per decision it
/// won.
async fn agent_child(store: Store, index: usize, per_agent: usize) {
    let mut ids: Vec<_> = store
        .list(&ListFilter::default())
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    ids.sort();
    let total = ids.len();
    let mine: Vec<_> = (0..2 * per_agent)
        .map(|k| ids[(index * per_agent + k) % total].clone())
        .collect();
    let reviewer = id(&format!("agent-{index}"));
    let mut tasks = tokio::task::JoinSet::new();
    for lane in 0..LANES {
        let (store, reviewer) = (store.clone(), reviewer.clone());
        let lane_ids: Vec<_> = mine.iter().skip(lane).step_by(LANES).cloned().collect();
        tasks.spawn(async move {
            for call in &lane_ids {
                match decide_as(&store, call, reviewer.as_str(), true, "load test").await {
                    Ok(_) => {
                        say(format!("decided {call}"));
                        let receipt = store
                            .append(&json!({"event": "tool_ran", "call": call}))
                            .await
                            .unwrap();
                        say(format!("ack {} {}", receipt.seq, receipt.hash));
                    }
                    Err(DecideError::AlreadyDecided { .. }) => say(format!("refused {call}")),
                    Err(other) => panic!("decide {call}: {other}"),
                }
            }
            for call in &lane_ids {
                let binding = store.get(call).await.unwrap().unwrap().binding();
                match store.claim_to_run(call, &binding).await {
                    Ok(_) => say(format!("claimed {call}")),
                    Err(ClaimError::AlreadyClaimed { .. }) => {}
                    Err(ClaimError::NotApproved {
                        status: HeldStatus::Held,
                        ..
                    }) => {
                        // The neighbour has not decided it yet: wait for it.
                        store.wait_decision(call, Default::default()).await.unwrap();
                        match store.claim_to_run(call, &binding).await {
                            Ok(_) => say(format!("claimed {call}")),
                            Err(ClaimError::AlreadyClaimed { .. }) => {}
                            Err(other) => panic!("claim {call}: {other}"),
                        }
                    }
                    Err(other) => panic!("claim {call}: {other}"),
                }
            }
        });
    }
    tasks.join_all().await;
    store.close().await;
}
