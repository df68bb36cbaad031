//! The audit chain in the database: one hash chain per tenant, in exactly the entry
//! format of the file log (`tooltrust::audit`), so that one verifier reads both.
//!
//! Each entry is a row `(tenant, seq, line)` holding the canonical line the file log
//! would write; `chain_head` holds each tenant's last `(seq, hash)`. An append locks
//! the head row inside its transaction (the write lock on SQLite, `SELECT … FOR UPDATE`
//! on PostgreSQL), reads the previous hash from it, inserts the sealed entries and moves
//! the head, so the chain stays linear whatever number of processes and hosts append.
//! Within a process, every write to a chain goes through the appender, which commits
//! the ones that arrive together in one transaction (group commit).

use std::io::{self, BufReader, Read};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use sqlx::{Any, AnyPool, AssertSqlSafe, Row, Transaction};
use tokio::sync::mpsc;
use tooltrust::Id;
use tooltrust::audit::{
    Body, EntryReader, GENESIS, Head, MAX_SEQ, Receipt, VerifyError, VerifyErrorKind, VerifyReport,
    Writers,
};
use tooltrust::call::Checksum;
use tooltrust::held::HeldStatus;
use tooltrust::signature::SecretKey;

use crate::engine::Engine;
use crate::error::{ChainError, StoreError};

pub(crate) const APPEND: &str = "append to the audit chain";

/// Rows per round trip when inserting entries; a batch is cut into these sizes, so only
/// these few statements are ever prepared.
const INSERT_CHUNKS: [usize; 4] = [64, 16, 4, 1];

/// Rows per page when reading a chain back.
const PAGE_ROWS: i64 = 1000;

/// Locks `tenant`'s head row for the rest of the transaction (creating it for a new
/// chain) and checks that the entry it names is there, with its hash.
pub(crate) async fn lock_head(
    tx: &mut Transaction<'static, Any>,
    engine: Engine,
    tenant: &Id,
) -> Result<Head, StoreError> {
    let error = |e| engine.error(APPEND, e);
    let select = match engine {
        Engine::Sqlite => "SELECT seq, hash FROM chain_head WHERE tenant = $1",
        Engine::Postgres => "SELECT seq, hash FROM chain_head WHERE tenant = $1 FOR UPDATE",
    };
    let mut row = sqlx::query(select)
        .bind(tenant.as_str())
        .fetch_optional(&mut **tx)
        .await
        .map_err(error)?;
    if row.is_none() {
        sqlx::query(
            "INSERT INTO chain_head (tenant, seq, hash) VALUES ($1, 0, $2) ON CONFLICT (tenant) DO NOTHING",
        )
        .bind(tenant.as_str())
        .bind(GENESIS.to_hex())
        .execute(&mut **tx)
        .await
        .map_err(error)?;
        row = sqlx::query(select)
            .bind(tenant.as_str())
            .fetch_optional(&mut **tx)
            .await
            .map_err(error)?;
    }
    let Some(row) = row else {
        return Ok(Head::EMPTY);
    };
    let head = head_of(tenant, row.try_get(0), row.try_get(1))?;
    if head.seq == 0 {
        return Ok(head);
    }
    // A statement of its own, after the lock: in PostgreSQL's read committed mode a
    // statement sees what was committed before it began, so this one sees the entry
    // the previous holder of the lock wrote (a join in the locking statement would not).
    let line = sqlx::query("SELECT line FROM chain_entry WHERE tenant = $1 AND seq = $2")
        .bind(tenant.as_str())
        .bind(head.seq as i64)
        .fetch_optional(&mut **tx)
        .await
        .map_err(error)?
        .map(|row| row.try_get::<String, _>(0))
        .transpose()
        .map_err(error)?;
    let damaged = |reason: &str| StoreError::ChainDamaged {
        tenant: tenant.clone(),
        seq: head.seq,
        reason: reason.to_owned(),
    };
    match line {
        None => Err(damaged("the entry the head row names is missing")),
        Some(line) if !names(&line, head) => {
            Err(damaged("the head row does not match the last entry"))
        }
        Some(_) => Ok(head),
    }
}

/// Whether `line` states `head`'s seq and hash.
fn names(line: &str, head: Head) -> bool {
    let Ok(Value::Object(entry)) = serde_json::from_str::<Value>(line) else {
        return false;
    };
    entry.get("seq").and_then(Value::as_u64) == Some(head.seq)
        && entry.get("hash").and_then(Value::as_str) == Some(head.hash.to_hex().as_str())
}

pub(crate) fn head_of(
    tenant: &Id,
    seq: Result<i64, sqlx::Error>,
    hash: Result<String, sqlx::Error>,
) -> Result<Head, StoreError> {
    let corrupt = |reason: String| StoreError::CorruptRow {
        table: "chain_head",
        key: tenant.to_string(),
        reason,
    };
    let seq = seq
        .ok()
        .and_then(|seq| u64::try_from(seq).ok())
        .filter(|&seq| seq <= MAX_SEQ)
        .ok_or_else(|| corrupt("seq is not an integer from 0 to 2^53".to_owned()))?;
    let hash = hash
        .ok()
        .and_then(|hash| hash.parse::<Checksum>().ok())
        .ok_or_else(|| corrupt("hash is not 64 lowercase hex characters".to_owned()))?;
    Ok(Head { seq, hash })
}

/// A sealed entry as a row holds it: its line (the database derives the indexed `call`
/// column from it).
pub(crate) struct SealedRow {
    pub(crate) line: String,
}

/// Seals `bodies` after `head`, advancing it, signed by `writer` if given; on error
/// `head` is unchanged.
pub(crate) fn seal(
    tenant: &Id,
    head: &mut Head,
    bodies: Vec<Body>,
    ts: &str,
    writer: Option<&SecretKey>,
    lines: &mut Vec<SealedRow>,
) -> Result<Vec<Receipt>, StoreError> {
    if head.seq + bodies.len() as u64 > MAX_SEQ {
        return Err(StoreError::ChainFull(tenant.clone()));
    }
    let mut tip = *head;
    let mut sealed = Vec::with_capacity(bodies.len());
    let mut receipts = Vec::with_capacity(bodies.len());
    for body in bodies {
        let seq = tip.seq + 1;
        let (mut line, hash) = body.seal_signed(seq, ts.to_owned(), &tip.hash, writer)?;
        line.pop(); // the newline: a row holds the line alone
        sealed.push(SealedRow {
            line: String::from_utf8_lossy(&line).into_owned(),
        });
        receipts.push(Receipt { seq, hash });
        tip = Head { seq, hash };
    }
    lines.append(&mut sealed);
    *head = tip;
    Ok(receipts)
}

/// Inserts `lines` as entries `first_seq…` and moves the head row to `head`. An
/// entry already at one of those seqs (the chain holds entries past its head row) is
/// [`StoreError::ChainDamaged`]; on PostgreSQL the transaction is then aborted.
pub(crate) async fn write_entries(
    tx: &mut Transaction<'static, Any>,
    engine: Engine,
    tenant: &Id,
    first_seq: u64,
    lines: &[SealedRow],
    head: Head,
) -> Result<(), StoreError> {
    let error = |e| engine.error(APPEND, e);
    let mut rest = lines;
    let mut seq = first_seq;
    while !rest.is_empty() {
        let chunk = INSERT_CHUNKS
            .into_iter()
            .find(|&n| n <= rest.len())
            .unwrap_or(1);
        let (now, later) = rest.split_at(chunk);
        let mut query = sqlx::query(AssertSqlSafe(insert_statement(chunk)));
        for row in now {
            query = query
                .bind(tenant.as_str())
                .bind(seq as i64)
                .bind(row.line.as_str());
            seq += 1;
        }
        if let Err(e) = query.execute(&mut **tx).await {
            let taken = matches!(&e, sqlx::Error::Database(db) if db.is_unique_violation());
            return Err(if taken {
                StoreError::ChainDamaged {
                    tenant: tenant.clone(),
                    seq: first_seq,
                    reason: "the chain holds entries past its head row".to_owned(),
                }
            } else {
                error(e)
            });
        }
        rest = later;
    }
    sqlx::query("UPDATE chain_head SET seq = $1, hash = $2 WHERE tenant = $3")
        .bind(head.seq as i64)
        .bind(head.hash.to_hex())
        .bind(tenant.as_str())
        .execute(&mut **tx)
        .await
        .map_err(error)?;
    Ok(())
}

/// `INSERT INTO chain_entry (tenant, seq, line) VALUES ($1, $2, $3), …` for `rows` rows.
fn insert_statement(rows: usize) -> String {
    let mut sql = String::from("INSERT INTO chain_entry (tenant, seq, line) VALUES ");
    for row in 0..rows {
        if row > 0 {
            sql.push_str(", ");
        }
        let n = row * 3;
        sql.push_str(&format!("(${}, ${}, ${})", n + 1, n + 2, n + 3));
    }
    sql
}

/// Verifies `tenant`'s chain: every entry in order, checked by the very reader that
/// checks log files, against the head row, and against `pinned` if given.
pub(crate) async fn verify(
    pool: &AnyPool,
    engine: Engine,
    tenant: &Id,
    pinned: Option<Head>,
    writers: Option<Writers>,
) -> Result<VerifyReport, ChainError> {
    const OP: &str = "read the audit chain";
    let head_row = sqlx::query("SELECT seq, hash FROM chain_head WHERE tenant = $1")
        .bind(tenant.as_str())
        .fetch_optional(pool)
        .await
        .map_err(|e| engine.error(OP, e))?
        .map(|row| head_of(tenant, row.try_get(0), row.try_get(1)))
        .transpose()?;

    // Pages are read by a task and checked on a blocking thread, as one stream of lines.
    let (pages, receiver) = mpsc::channel(2);
    let reading = tokio::spawn(read_pages(pool.clone(), engine, tenant.clone(), pages));
    let failure = Arc::new(Mutex::new(None));
    let lines = PageReader {
        pages: receiver,
        page: Vec::new(),
        at: 0,
        failure: failure.clone(),
    };
    let checked =
        tokio::task::spawn_blocking(move || check(lines, head_row, pinned, writers)).await;
    reading.abort();
    let failure = failure
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    if let Some(error) = failure {
        return Err(ChainError::Store(error));
    }
    let (report, story) = checked
        .map_err(|e| StoreError::Io {
            op: "check the audit chain",
            source: Arc::new(io::Error::other(e.to_string())),
        })?
        .map_err(ChainError::Invalid)?;
    match head_row {
        None if report.entries > 0 => return Err(ChainError::HeadMissing(tenant.clone())),
        Some(head) if head.seq < report.entries => {
            return Err(ChainError::PastHead {
                tenant: tenant.clone(),
                head: head.seq,
                last: report.entries,
            });
        }
        _ => {}
    }
    cross_check(pool, engine, tenant, &story).await?;
    Ok(report)
}

/// What the chain says of each held call: where its lifecycle entries leave it, and the
/// calls an upgrade recorded as decided before holds were recorded.
#[derive(Default)]
struct Story {
    status: std::collections::HashMap<String, HeldStatus>,
    /// What each call's `call_held` entry bound: scope, tool, checksum, upstream, expiry.
    bound: std::collections::HashMap<String, [Option<String>; 5]>,
    upgraded: std::collections::HashSet<String>,
}

impl Story {
    fn observe(&mut self, entry: &tooltrust::audit::Entry) {
        let text = |name: &str| entry.fields.get(name).and_then(Value::as_str);
        if entry.event == "store_upgraded"
            && let Some(Value::Array(calls)) = entry.fields.get("decided_before_holds")
        {
            self.upgraded
                .extend(calls.iter().filter_map(Value::as_str).map(str::to_owned));
        }
        let Some(call) = text("call") else {
            return;
        };
        if entry.event == "call_held" {
            let field = |name: &str| text(name).map(str::to_owned);
            self.bound.entry(call.to_owned()).or_insert([
                field("scope"),
                field("tool"),
                field("checksum"),
                field("upstream"),
                field("expires_at"),
            ]);
        }
        let status = match entry.event.as_str() {
            "call_held" => Some(HeldStatus::Held),
            "call_decided" => text("decision").and_then(|d| d.parse().ok()),
            "call_claimed" => Some(HeldStatus::Claimed),
            "call_finished" => text("outcome").and_then(|o| o.parse().ok()),
            _ => None,
        };
        if let Some(status) = status {
            self.status.insert(call.to_owned(), status);
        }
    }
}

/// Every held call's row must be where the chain left it (or expired from held or
/// approved, which the chain need not record): a row whose status the chain does not
/// explain was written around the review queue.
async fn cross_check(
    pool: &AnyPool,
    engine: Engine,
    tenant: &Id,
    story: &Story,
) -> Result<(), ChainError> {
    const OP: &str = "read the review queue";
    let rows = sqlx::query(
        "SELECT id, status, scope, tool, checksum, upstream, expires_at FROM pending_call \
         WHERE tenant = $1 ORDER BY id",
    )
    .bind(tenant.as_str())
    .fetch_all(pool)
    .await
    .map_err(|e| engine.error(OP, e))?;
    for row in rows {
        let (Ok(call), Ok(status)) = (row.try_get::<String, _>(0), row.try_get::<String, _>(1))
        else {
            continue;
        };
        let row_status = status.parse::<HeldStatus>().ok();
        let chain = story.status.get(&call).copied();
        let explained = story.upgraded.contains(&call)
            || match (row_status, chain) {
                (Some(row), Some(chain)) if row == chain => true,
                (Some(HeldStatus::Expired), Some(HeldStatus::Held | HeldStatus::Approved)) => true,
                // Held before holds were recorded (its hold is recorded with its decision).
                (Some(HeldStatus::Held | HeldStatus::Expired), None) => true,
                _ => false,
            };
        if !explained {
            return Err(ChainError::RowUnexplained {
                tenant: tenant.clone(),
                call,
                row: status,
                chain,
            });
        }
        // What the row says it binds must be what the chain recorded as held.
        if let Some(bound) = story.bound.get(&call) {
            let names = ["scope", "tool", "checksum", "upstream", "expires_at"];
            for (i, name) in names.into_iter().enumerate() {
                let in_row = row.try_get::<Option<String>, _>(i + 2).ok().flatten();
                if in_row != bound[i] {
                    return Err(ChainError::RowRebound {
                        tenant: tenant.clone(),
                        call,
                        field: name,
                    });
                }
            }
        }
    }
    Ok(())
}

/// Reads every line; the head row pins the reader, and `pinned` is checked beside it.
fn check(
    lines: PageReader,
    head_row: Option<Head>,
    pinned: Option<Head>,
    writers: Option<Writers>,
) -> Result<(VerifyReport, Story), VerifyError> {
    let mut reader = EntryReader::new(BufReader::with_capacity(1 << 16, lines), head_row);
    let mut story = Story::default();
    if let Some(writers) = writers {
        // The store signs every entry it writes.
        reader = reader.with_each_signed_by(writers);
    }
    let mut at_pinned = None;
    let mut provenance = tooltrust::audit::Provenance::new();
    for entry in &mut reader {
        let entry = entry?;
        if pinned.is_some_and(|pinned| pinned.seq == entry.seq) {
            at_pinned = Some(entry.hash);
        }
        provenance.observe(&entry);
        story.observe(&entry);
    }
    let mut report = reader.finish()?;
    if let Some(pinned) = pinned.filter(|pinned| pinned.seq > 0) {
        match at_pinned {
            None => {
                return Err(VerifyError {
                    seq: report.entries + 1,
                    kind: VerifyErrorKind::Truncated {
                        last: report.entries,
                        head_seq: pinned.seq,
                    },
                });
            }
            Some(found) if found != pinned.hash => {
                return Err(VerifyError {
                    seq: pinned.seq,
                    kind: VerifyErrorKind::HeadMismatch {
                        pinned: pinned.hash,
                        found,
                    },
                });
            }
            Some(_) => {}
        }
    }
    report.outcome_unknown = provenance.check()?;
    Ok((report, story))
}

/// Sends `tenant`'s entries, page by page in seq order, each line followed by `\n`.
async fn read_pages(
    pool: AnyPool,
    engine: Engine,
    tenant: Id,
    pages: mpsc::Sender<Result<Vec<u8>, StoreError>>,
) {
    let mut after: i64 = 0;
    loop {
        let rows = sqlx::query(
            "SELECT seq, line FROM chain_entry WHERE tenant = $1 AND seq > $2 ORDER BY seq LIMIT $3",
        )
        .bind(tenant.as_str())
        .bind(after)
        .bind(PAGE_ROWS)
        .fetch_all(&pool)
        .await;
        let page = rows
            .map_err(|e| engine.error("read the audit chain", e))
            .and_then(|rows| {
                let mut page = Vec::new();
                for row in &rows {
                    let seq: i64 = row
                        .try_get(0)
                        .map_err(|e| engine.error("read the audit chain", e))?;
                    let line: String = row
                        .try_get(1)
                        .map_err(|e| engine.error("read the audit chain", e))?;
                    after = seq;
                    page.extend_from_slice(line.as_bytes());
                    page.push(b'\n');
                }
                Ok(page)
            });
        let done = matches!(&page, Ok(page) if page.is_empty()) || page.is_err();
        if pages.send(page).await.is_err() || done {
            return;
        }
    }
}

/// The pages as one byte stream. A page that failed to load ends the stream with an
/// I/O error and leaves the store's error in `failure` for the caller.
struct PageReader {
    pages: mpsc::Receiver<Result<Vec<u8>, StoreError>>,
    page: Vec<u8>,
    at: usize,
    failure: Arc<Mutex<Option<StoreError>>>,
}

impl Read for PageReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.at == self.page.len() {
            match self.pages.blocking_recv() {
                Some(Ok(page)) if page.is_empty() => return Ok(0),
                Some(Ok(page)) => {
                    self.page = page;
                    self.at = 0;
                }
                Some(Err(error)) => {
                    let message = error.to_string();
                    *self.failure.lock().unwrap_or_else(PoisonError::into_inner) = Some(error);
                    return Err(io::Error::other(message));
                }
                None => return Ok(0),
            }
        }
        let n = out.len().min(self.page.len() - self.at);
        out[..n].copy_from_slice(&self.page[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_statements_number_their_parameters() {
        assert_eq!(
            insert_statement(2),
            "INSERT INTO chain_entry (tenant, seq, line) VALUES ($1, $2, $3), ($4, $5, $6)"
        );
    }

    #[test]
    fn sealing_advances_the_head_only_when_every_body_seals() {
        let tenant = Id::new("t").unwrap();
        let mut head = Head::EMPTY;
        let mut lines = Vec::new();
        let bodies = vec![
            Body::of(&serde_json::json!({"event": "a"})).unwrap(),
            Body::of(&serde_json::json!({"event": "b"})).unwrap(),
        ];
        let receipts = seal(&tenant, &mut head, bodies, "t", None, &mut lines).unwrap();
        assert_eq!(receipts.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(
            head,
            Head {
                seq: 2,
                hash: receipts[1].hash
            }
        );
        assert!(names(&lines[1].line, head) && !names(&lines[0].line, head));

        let huge = "x".repeat(tooltrust::audit::MAX_LINE_BYTES);
        let bodies = vec![
            Body::of(&serde_json::json!({"event": "c"})).unwrap(),
            Body::of(&serde_json::json!({"event": "d", "data": huge})).unwrap(),
        ];
        let before = head;
        assert!(matches!(
            seal(&tenant, &mut head, bodies, "t", None, &mut lines),
            Err(StoreError::Event(_))
        ));
        assert_eq!((head, lines.len()), (before, 2));
    }
}
