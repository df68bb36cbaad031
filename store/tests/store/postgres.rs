//! The store on PostgreSQL: every case of the contract, each in a schema of its own on
//! the server `TOOLTRUST_TEST_POSTGRES` names, and the faults only a server has. Without
//! the variable these tests print one line and do nothing (`.ci/run` sets it).

use crate::common;

use tooltrust_store::{Store, StoreError, StoreOptions};

use common::TestDb;

common::contract_tests!(TestDb::postgres().await);

/// A schema name that would need quoting (or inject SQL) is refused by name.
#[tokio::test]
async fn schema_names_are_checked() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    for bad in ["Robert'); DROP TABLE x;--", "", "9lives", &"a".repeat(64)] {
        let options = StoreOptions {
            postgres_schema: Some(bad.to_owned()),
            ..db.options.clone()
        };
        let opened = Store::open(&db.location, options).await;
        assert!(
            matches!(
                opened,
                Err(StoreError::BadOption {
                    option: "postgres_schema",
                    ..
                })
            ),
            "{bad:?}: {opened:?}"
        );
    }
}

/// A server that is not there is `Unavailable`, not a hang or a panic.
#[tokio::test]
async fn an_unreachable_server_is_unavailable() {
    // A port kept bound and not listening for the whole test: connections to it are
    // refused, and no other process can take it meanwhile.
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let any_port: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
    socket.bind(&any_port.into()).unwrap();
    let port = socket
        .local_addr()
        .unwrap()
        .as_socket()
        .expect("an IPv4 address")
        .port();
    let options = StoreOptions {
        timeout: std::time::Duration::from_secs(2),
        ..StoreOptions::default()
    };
    let location =
        tooltrust_store::Location::Postgres(format!("postgres://postgres@127.0.0.1:{port}/test"));
    let opened = Store::open(&location, options).await;
    assert!(
        matches!(opened, Err(StoreError::Unavailable { .. })),
        "{opened:?}"
    );
}

/// A PostgreSQL server of the test's own (initdb into a temporary directory, on a free
/// port), so that restarting it disturbs no one else using the machine's server.
struct PrivateServer {
    dir: tempfile::TempDir,
    bin: std::path::PathBuf,
    port: u16,
    /// Run the server's tools as the `postgres` user (the server refuses to run as root).
    as_postgres: bool,
}

impl PrivateServer {
    /// `None` when no PostgreSQL server binaries are installed.
    fn start() -> Option<PrivateServer> {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(Result::ok)
            .map(|version| version.path().join("bin"))
            .find(|bin| bin.join("initdb").exists() && bin.join("pg_ctl").exists())?;
        let root = std::process::Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|out| out.stdout.trim_ascii() == b"0");
        let dir = tempfile::tempdir().unwrap();
        if root {
            let owned = std::process::Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(owned.success());
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let server = PrivateServer {
            dir,
            bin,
            port,
            as_postgres: root,
        };
        let data = server.data();
        assert!(server.tool(
            "initdb",
            &[
                "-D",
                &data,
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync"
            ]
        ));
        server.start_again();
        Some(server)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    fn tool(&self, name: &str, args: &[&str]) -> bool {
        let tool = self.bin.join(name);
        let mut command = if self.as_postgres {
            let mut command = std::process::Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(tool);
            command
        } else {
            std::process::Command::new(tool)
        };
        command
            .args(args)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap()
            .success()
    }

    fn start_again(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("server.log").display().to_string();
        assert!(self.tool(
            "pg_ctl",
            &[
                "-D",
                &self.data(),
                "-l",
                &log,
                "-w",
                "-t",
                "60",
                "-o",
                &options,
                "start"
            ]
        ));
    }

    /// Stops the server the hard way: no checkpoint, connections cut, as in a crash.
    fn stop_now(&self) {
        assert!(self.tool(
            "pg_ctl",
            &["-D", &self.data(), "-m", "immediate", "-w", "stop"]
        ));
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        self.tool("pg_ctl", &["-D", &self.data(), "-m", "immediate", "stop"]);
    }
}

/// The server restarts (crash-stopped, then started) while four tasks append: appends
/// in flight fail with a typed error, the pool reconnects, appends go on, and every
/// acknowledged entry is in the chain, which verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_restart_loses_nothing_acknowledged() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};

    if common::postgres_url().is_none() {
        return;
    }
    let Some(server) = tokio::task::spawn_blocking(PrivateServer::start)
        .await
        .unwrap()
    else {
        eprintln!(
            "note: the restart test needs PostgreSQL's server binaries (initdb, pg_ctl) in /usr/lib/postgresql/*/bin; not run"
        );
        return;
    };
    let location = tooltrust_store::Location::Postgres(server.url());
    let options = StoreOptions {
        timeout: std::time::Duration::from_secs(30),
        ..StoreOptions::default()
    };
    let store = Store::open(&location, options).await.unwrap();
    let acks = Arc::new(Mutex::new(Vec::new()));
    let errors = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for writer in 0..4 {
        let (store, acks, errors, stop) =
            (store.clone(), acks.clone(), errors.clone(), stop.clone());
        writers.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                match store
                    .append(&serde_json::json!({"event": "tool_ran", "writer": writer, "n": n}))
                    .await
                {
                    Ok(receipt) => acks.lock().unwrap().push(receipt),
                    Err(error) => {
                        errors.lock().unwrap().push(error);
                        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    }
                }
                n += 1;
            }
        }));
    }
    let acknowledged = || acks.lock().unwrap().len();
    let wait_for = |count: usize| async move {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while acknowledged() < count {
            assert!(
                std::time::Instant::now() < deadline,
                "appends did not resume"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    };
    wait_for(200).await;
    let server = Arc::new(server);
    let restarting = server.clone();
    tokio::task::spawn_blocking(move || {
        restarting.stop_now();
        restarting.start_again();
    })
    .await
    .unwrap();
    let before = acknowledged();
    wait_for(before + 200).await;
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.await.unwrap();
    }

    let errors = errors.lock().unwrap().clone();
    for error in &errors {
        assert!(
            matches!(
                error,
                StoreError::Unavailable { .. } | StoreError::CommitUnknown { .. }
            ),
            "{error:?}"
        );
    }
    let acks = acks.lock().unwrap().clone();
    let report = store.verify_chain(None).await.unwrap();
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&server.url()).await.unwrap();
    let rows = sqlx::query("SELECT seq, line FROM chain_entry WHERE tenant = 'default'")
        .fetch_all(&pool)
        .await
        .unwrap();
    let hashes: std::collections::HashMap<i64, String> = rows
        .iter()
        .map(|row| {
            let line: String = sqlx::Row::get(row, 1);
            let entry: serde_json::Value = serde_json::from_str(&line).unwrap();
            (
                sqlx::Row::get(row, 0),
                entry["hash"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    for receipt in &acks {
        assert_eq!(
            hashes.get(&(receipt.seq as i64)),
            Some(&receipt.hash.to_hex()),
            "entry {} lost",
            receipt.seq
        );
    }
    eprintln!(
        "note: restart: {} appends acknowledged ({before} before the restart), all present; {} failed during it ({} with an unknown outcome); {} entries, verified",
        acks.len(),
        errors.len(),
        errors
            .iter()
            .filter(|e| matches!(e, StoreError::CommitUnknown { .. }))
            .count(),
        report.entries
    );
    pool.close().await;
    store.close().await;
}
