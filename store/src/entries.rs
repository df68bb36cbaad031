//! Reading the audit chain back for people: its entries newest first, searched, and a
//! mark that changes whenever the review queue does (for live views).

use sqlx::{AssertSqlSafe, Row};

use crate::error::StoreError;
use crate::store::Store;

/// One entry of a chain as stored: its sequence number and its canonical line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainEntry {
    /// Its position in the chain, from 1.
    pub seq: u64,
    /// The exact canonical JSON line (the file log's line without its newline).
    pub line: String,
}

/// Which entries [`Store::chain_entries`] returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EntryFilter {
    /// Only entries whose line contains this text (ASCII letters compared without case).
    pub contains: Option<String>,
    /// Only entries before this sequence number (to page back through the chain).
    pub before: Option<u64>,
    /// At most this many (the newest that match); 100 if not given.
    pub limit: Option<u32>,
}

const READ: &str = "read the audit chain";

impl Store {
    /// The tenant's chain entries that match `filter`, newest first. The lines are as
    /// stored: [`verify_chain`](Self::verify_chain) says whether they are intact.
    pub async fn chain_entries(&self, filter: &EntryFilter) -> Result<Vec<ChainEntry>, StoreError> {
        let mut sql = String::from("SELECT seq, line FROM chain_entry WHERE tenant = $1");
        let before = filter
            .before
            .map(|seq| i64::try_from(seq).unwrap_or(i64::MAX));
        let pattern = filter.contains.as_deref().map(like_pattern);
        let mut next = 2;
        if before.is_some() {
            sql.push_str(&format!(" AND seq < ${next}"));
            next += 1;
        }
        if pattern.is_some() {
            // LOWER on both sides: SQLite's LIKE ignores ASCII case, PostgreSQL's does not.
            sql.push_str(&format!(" AND LOWER(line) LIKE LOWER(${next}) ESCAPE '\\'"));
        }
        let limit = filter.limit.unwrap_or(100);
        sql.push_str(&format!(" ORDER BY seq DESC LIMIT {limit}"));
        let mut query = sqlx::query(AssertSqlSafe(sql)).bind(self.tenant().as_str());
        if let Some(before) = before {
            query = query.bind(before);
        }
        if let Some(pattern) = pattern {
            query = query.bind(pattern);
        }
        let rows = query
            .fetch_all(self.pool())
            .await
            .map_err(|e| self.engine().error(READ, e))?;
        rows.iter()
            .map(|row| {
                let seq: i64 = row.try_get(0).map_err(|e| self.engine().error(READ, e))?;
                let line: String = row.try_get(1).map_err(|e| self.engine().error(READ, e))?;
                let seq = u64::try_from(seq).map_err(|_| StoreError::CorruptRow {
                    table: "chain_entry",
                    key: seq.to_string(),
                    reason: "a negative sequence number".into(),
                })?;
                Ok(ChainEntry { seq, line })
            })
            .collect()
    }

    /// A mark of the whole review queue that changes whenever a call is held or
    /// decided, by any process: compare two marks to know whether to look again.
    pub async fn queue_mark(&self) -> Result<String, StoreError> {
        const OP: &str = "read the review queue's mark";
        let row = sqlx::query(
            "SELECT COUNT(*), MAX(created_at), MAX(decided_at), \
             SUM(CASE WHEN status = 'ran' THEN 1 ELSE 0 END) FROM pending_call",
        )
        .fetch_one(self.pool())
        .await
        .map_err(|e| self.engine().error(OP, e))?;
        let count: i64 = row.try_get(0).map_err(|e| self.engine().error(OP, e))?;
        let held: Option<String> = row.try_get(1).map_err(|e| self.engine().error(OP, e))?;
        let decided: Option<String> = row.try_get(2).map_err(|e| self.engine().error(OP, e))?;
        let ran: Option<i64> = row.try_get(3).map_err(|e| self.engine().error(OP, e))?;
        Ok(format!(
            "{count}/{}/{}/{}",
            held.unwrap_or_default(),
            decided.unwrap_or_default(),
            ran.unwrap_or(0)
        ))
    }
}

/// A LIKE pattern matching `text` anywhere, its wildcards taken literally.
fn like_pattern(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 2);
    pattern.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}
