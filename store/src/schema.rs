//! The schema: versioned migrations embedded in the crate, applied when a store opens.
//!
//! `tooltrust_schema` records each applied version with the SHA-256 of its SQL. Opening
//! applies what is missing, in one transaction that holds the database's write lock
//! (SQLite) or an advisory lock (PostgreSQL), so a fleet of processes opening a fresh
//! database at once applies each migration exactly once. A database whose newest
//! version is unknown to this build is refused ([`StoreError::SchemaTooNew`]): an
//! older binary never writes to a newer schema.

use sqlx::{AnyPool, AssertSqlSafe, Row};
use tooltrust::call::Checksum;

use crate::clock;
use crate::engine::{Engine, quoted_schema};
use crate::error::StoreError;

/// One version of the schema, in each engine's SQL.
pub(crate) struct Migration {
    pub(crate) version: i64,
    pub(crate) sqlite: &'static str,
    pub(crate) postgres: &'static str,
}

/// Every version, oldest first. Never edit an entry that has shipped: add a new one.
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        sqlite: include_str!("../migrations/sqlite/0001_initial.sql"),
        postgres: include_str!("../migrations/postgres/0001_initial.sql"),
    },
    Migration {
        version: 2,
        sqlite: include_str!("../migrations/sqlite/0002_declaration.sql"),
        postgres: include_str!("../migrations/postgres/0002_declaration.sql"),
    },
    Migration {
        version: 3,
        sqlite: include_str!("../migrations/sqlite/0003_lifecycle.sql"),
        postgres: include_str!("../migrations/postgres/0003_lifecycle.sql"),
    },
    Migration {
        version: 4,
        sqlite: include_str!("../migrations/sqlite/0004_signed.sql"),
        postgres: include_str!("../migrations/postgres/0004_signed.sql"),
    },
];

/// The newest schema version this build knows.
pub const SCHEMA_VERSION: i64 = 4;

impl Migration {
    fn sql(&self, engine: Engine) -> &'static str {
        match engine {
            Engine::Sqlite => self.sqlite,
            Engine::Postgres => self.postgres,
        }
    }

    fn checksum(&self, engine: Engine) -> String {
        Checksum::of(self.sql(engine).as_bytes()).to_hex()
    }
}

/// The advisory lock key that serialises migrations on PostgreSQL ("tooltrust" in
/// ASCII): any 64-bit constant no other application uses would do.
const MIGRATION_LOCK: i64 = 0x746f_6f6c_7472_7573;

/// Brings the database's schema up to [`SCHEMA_VERSION`], or refuses a newer or
/// altered one.
pub(crate) async fn migrate(
    pool: &AnyPool,
    engine: Engine,
    postgres_schema: Option<&str>,
) -> Result<(), StoreError> {
    const OP: &str = "apply the schema";
    let error = |e| engine.error(OP, e);
    let mut tx = engine.begin_write(pool, OP).await?;
    if engine == Engine::Postgres {
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(MIGRATION_LOCK)
            .execute(&mut *tx)
            .await
            .map_err(error)?;
        if let Some(schema) = postgres_schema {
            let create = format!("CREATE SCHEMA IF NOT EXISTS {}", quoted_schema(schema)?);
            sqlx::query(AssertSqlSafe(create))
                .execute(&mut *tx)
                .await
                .map_err(error)?;
        }
    }
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS tooltrust_schema (
            version BIGINT PRIMARY KEY,
            checksum TEXT NOT NULL,
            applied_at TEXT NOT NULL
        )",
    )
    .execute(&mut *tx)
    .await
    .map_err(error)?;
    let applied = sqlx::query("SELECT version, checksum FROM tooltrust_schema ORDER BY version")
        .fetch_all(&mut *tx)
        .await
        .map_err(error)?;
    let mut newest = 0;
    for row in &applied {
        let version: i64 = row.try_get(0).map_err(error)?;
        let recorded: String = row.try_get(1).map_err(error)?;
        newest = newest.max(version);
        let Some(migration) = MIGRATIONS.iter().find(|m| m.version == version) else {
            continue;
        };
        let expected = migration.checksum(engine);
        if recorded != expected {
            return Err(StoreError::SchemaAltered {
                version,
                recorded,
                expected,
            });
        }
    }
    if newest > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found: newest,
            supported: SCHEMA_VERSION,
        });
    }
    for migration in MIGRATIONS.iter().filter(|m| m.version > newest) {
        sqlx::raw_sql(migration.sql(engine))
            .execute(&mut *tx)
            .await
            .map_err(error)?;
        sqlx::query(
            "INSERT INTO tooltrust_schema (version, checksum, applied_at) VALUES ($1, $2, $3)",
        )
        .bind(migration.version)
        .bind(migration.checksum(engine))
        .bind(clock::now())
        .execute(&mut *tx)
        .await
        .map_err(error)?;
    }
    if (1..3).contains(&newest) {
        record_decisions_before_holds(&mut tx, engine, newest).await?;
    }
    engine.commit(tx, OP).await
}

/// Before version 3 the store recorded decisions but not holds, so the chain of a store
/// upgraded from then holds decisions on calls it never recorded as held, which
/// verification reports. The upgrade says so in each such chain, once: a `store_upgraded`
/// entry naming the calls decided before holds were recorded (those decisions carry no
/// reviewer's signature and never approve a claim).
async fn record_decisions_before_holds(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    engine: Engine,
    from: i64,
) -> Result<(), StoreError> {
    const OP: &str = "record the upgrade in the audit chain";
    let error = |e| engine.error(OP, e);
    let tenants: Vec<String> = sqlx::query("SELECT tenant FROM chain_head ORDER BY tenant")
        .fetch_all(&mut **tx)
        .await
        .map_err(error)?
        .iter()
        .filter_map(|row| row.try_get(0).ok())
        .collect();
    for tenant in tenants {
        let Ok(tenant) = tooltrust::Id::new(tenant) else {
            continue;
        };
        let lines = sqlx::query(
            "SELECT line FROM chain_entry WHERE tenant = $1 AND call IS NOT NULL ORDER BY seq",
        )
        .bind(tenant.as_str())
        .fetch_all(&mut **tx)
        .await
        .map_err(error)?;
        let mut held = std::collections::HashSet::new();
        let mut unheld = Vec::new();
        for row in &lines {
            let Ok(line) = row.try_get::<String, _>(0) else {
                continue;
            };
            let Ok(serde_json::Value::Object(entry)) = serde_json::from_str(&line) else {
                continue;
            };
            let text = |name: &str| entry.get(name).and_then(serde_json::Value::as_str);
            match (text("event"), text("call")) {
                (Some("call_held"), Some(call)) => {
                    held.insert(call.to_owned());
                }
                (Some("call_decided"), Some(call))
                    if entry.contains_key("decision") && !held.contains(call) =>
                {
                    unheld.push(call.to_owned());
                }
                _ => {}
            }
        }
        if unheld.is_empty() {
            continue;
        }
        let event = serde_json::json!({
            "event": "store_upgraded",
            "from_version": from,
            "to_version": SCHEMA_VERSION,
            "decided_before_holds": unheld,
        });
        let mut head = crate::chain::lock_head(tx, engine, &tenant).await?;
        let first = head.seq + 1;
        let mut sealed = Vec::new();
        let body = tooltrust::audit::Body::of(&event)?;
        crate::chain::seal(
            &tenant,
            &mut head,
            vec![body],
            &clock::now(),
            None,
            &mut sealed,
        )?;
        crate::chain::write_entries(tx, engine, &tenant, first, &sealed, head).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_rise_one_by_one_to_the_newest() {
        for (i, migration) in MIGRATIONS.iter().enumerate() {
            assert_eq!(migration.version, i as i64 + 1);
        }
        assert_eq!(MIGRATIONS.last().map(|m| m.version), Some(SCHEMA_VERSION));
    }

    #[test]
    fn both_engines_create_the_same_tables_indexes_and_columns() {
        let names = |sql: &str| -> Vec<String> {
            let words: Vec<&str> = sql
                .lines()
                .filter(|line| !line.trim_start().starts_with("--"))
                .flat_map(str::split_whitespace)
                .collect();
            (0..words.len())
                .filter_map(|i| match &words[i..] {
                    ["CREATE", kind @ ("TABLE" | "INDEX"), name, ..] => {
                        Some(format!("{kind} {name}"))
                    }
                    ["ALTER", "TABLE", table, "ADD", "COLUMN", column, ..] => {
                        Some(format!("{table}.{column}"))
                    }
                    _ => None,
                })
                .collect()
        };
        // A SQLite migration that rebuilds a table (to change a CHECK, which SQLite cannot
        // alter) names other objects than PostgreSQL's ALTERs by design; both engines'
        // resulting columns are read by every contract test after it.
        for migration in MIGRATIONS
            .iter()
            .filter(|m| !m.sqlite.contains("RENAME TO"))
        {
            let sqlite = names(migration.sqlite);
            assert!(!sqlite.is_empty());
            assert_eq!(
                sqlite,
                names(migration.postgres),
                "version {}",
                migration.version
            );
        }
    }
}
