//! The review queue: calls the gate held, a person's decision on each, and the claim
//! that lets an approved call run exactly once.
//!
//! Every transition is one transaction that locks the call's row (the write lock on
//! SQLite, `SELECT … FOR UPDATE` on PostgreSQL) and checks its status before changing
//! it, so two reviewers deciding at once, or two processes claiming at once, cannot
//! both succeed. A hold, a decision and a claim write their chain entry in the same
//! transaction: each is recorded exactly when it is taken.

use std::time::Duration;

use sqlx::{AssertSqlSafe, Row};
use tooltrust::Id;
use tooltrust::held::{Binding, HeldCall, HeldStatus, SignedDecision};

use crate::clock;
use crate::error::{ClaimError, DecideError, HoldError, StoreError, WaitError};
use crate::store::Store;
use crate::transition::{COLUMNS, DECISIONS_CHANNEL, Done, LIST, Work, check_held, from_row};

/// Which held calls [`Store::list`] returns. Every field left `None` matches all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListFilter {
    /// Only calls with this status.
    pub status: Option<HeldStatus>,
    /// Only calls to this tool.
    pub tool: Option<String>,
    /// Only calls made by this scope.
    pub scope: Option<Id>,
    /// Only calls of this tenant.
    pub tenant: Option<Id>,
    /// Only calls of these tenants (a reviewer who decides for some tenants only); an
    /// empty list matches nothing.
    pub tenants: Option<Vec<Id>>,
    /// Only calls older than this one (the next page after it, newest first).
    pub before: Option<Id>,
    /// At most this many (the newest).
    pub limit: Option<u32>,
}

/// How [`Store::wait_decision`] waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitOptions {
    /// Give up after this long (`None`: wait until decided).
    pub timeout: Option<Duration>,
    /// The first pause between two looks at the call; it doubles up to `max_poll`.
    pub min_poll: Duration,
    /// The longest pause between two looks.
    pub max_poll: Duration,
}

impl Default for WaitOptions {
    /// No timeout; polls from 50 ms up to 5 s (on PostgreSQL a notification ends each
    /// pause as soon as a decision commits).
    fn default() -> Self {
        WaitOptions {
            timeout: None,
            min_poll: Duration::from_millis(50),
            max_poll: Duration::from_secs(5),
        }
    }
}

/// The longest reason a decision may give (the chain's entries stay small).
pub const MAX_REASON_BYTES: usize = 16 * 1024;

impl Store {
    /// Puts `call` in the review queue, undecided, and returns it as stored (with
    /// `created_at` set). The row and its `call_held` entry in the tenant's chain commit
    /// together, so every decision in the chain follows the hold it decides.
    ///
    /// The record must be fresh (status held, no decision) and self-consistent:
    /// `args` the canonical text of an object and `checksum` the checksum of the tool
    /// and those arguments, which the store recomputes. A held id cannot be held again.
    pub async fn hold(&self, call: &HeldCall) -> Result<HeldCall, HoldError> {
        check_held(call)?;
        let mut stored = call.clone();
        stored.created_at = clock::now();
        let tenant = stored.tenant.clone();
        match self.submit(&tenant, Work::Hold(Box::new(stored))).await? {
            Done::Held(held) => held,
            _ => Err(StoreError::Closed.into()),
        }
    }

    /// The held calls that match `filter`, newest first.
    pub async fn list(&self, filter: &ListFilter) -> Result<Vec<HeldCall>, StoreError> {
        let mut conditions = Vec::new();
        let mut values: Vec<&str> = Vec::new();
        let mut condition = |column: &str, value| {
            values.push(value);
            conditions.push(format!("{column} = ${}", values.len()));
        };
        if let Some(tenant) = &filter.tenant {
            condition("tenant", tenant.as_str());
        }
        if let Some(status) = filter.status {
            condition("status", status.as_str());
        }
        if let Some(tool) = &filter.tool {
            condition("tool", tool.as_str());
        }
        if let Some(scope) = &filter.scope {
            condition("scope", scope.as_str());
        }
        if let Some(tenants) = &filter.tenants {
            let mut placeholders = Vec::with_capacity(tenants.len());
            for tenant in tenants {
                values.push(tenant.as_str());
                placeholders.push(format!("${}", values.len()));
            }
            conditions.push(match placeholders.is_empty() {
                true => "1 = 0".to_owned(),
                false => format!("tenant IN ({})", placeholders.join(", ")),
            });
        }
        if let Some(before) = &filter.before {
            values.push(before.as_str());
            let n = values.len();
            // Keyset paging in the listing's own order; an unknown id pages to nothing.
            conditions.push(format!(
                "(created_at < (SELECT created_at FROM pending_call WHERE id = ${n}) \
                 OR (created_at = (SELECT created_at FROM pending_call WHERE id = ${n}) \
                 AND id < ${n}))"
            ));
        }
        let mut sql = format!("SELECT {COLUMNS} FROM pending_call");
        if !conditions.is_empty() {
            sql.push_str(" WHERE ");
            sql.push_str(&conditions.join(" AND "));
        }
        sql.push_str(" ORDER BY created_at DESC, id DESC");
        if let Some(limit) = filter.limit {
            sql.push_str(&format!(" LIMIT {limit}"));
        }
        let mut query = sqlx::query(AssertSqlSafe(sql));
        for value in values {
            query = query.bind(value);
        }
        let rows = query
            .fetch_all(self.pool())
            .await
            .map_err(|e| self.engine().error(LIST, e))?;
        rows.iter().map(from_row).collect()
    }

    /// The held call with this id, if any.
    pub async fn get(&self, id: &Id) -> Result<Option<HeldCall>, StoreError> {
        let row = sqlx::query(AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM pending_call WHERE id = $1"
        )))
        .bind(id.as_str())
        .fetch_optional(self.pool())
        .await
        .map_err(|e| self.engine().error(LIST, e))?;
        row.as_ref().map(from_row).transpose()
    }

    /// Records a reviewer's signed decision on a held call: approves or rejects it.
    ///
    /// The decision counts only if a reviewer of [`StoreOptions::reviewers`](crate::StoreOptions::reviewers)
    /// signed it with their key, may decide for the call's tenant, and its statement
    /// binds exactly the call the chain recorded as held (tenant, scope, tool, checksum,
    /// upstream, expiry): write access to the database decides nothing. Make the
    /// statement with [`HeldCall::statement`] and sign it with the reviewer's
    /// [`SecretKey`](tooltrust::signature::SecretKey).
    ///
    /// Atomic: only a held call can be decided, and only by someone other than the
    /// author of the scope that made it; the status change and its `call_decided`
    /// entry (with the signed statement) commit together (and, on PostgreSQL, a
    /// notification wakes the processes waiting for it). When two reviewers decide at
    /// once, one succeeds and the other gets [`DecideError::AlreadyDecided`]. A refusal
    /// changes nothing but its own `call_decision_refused` entry.
    pub async fn decide(&self, signed: &SignedDecision) -> Result<HeldCall, DecideError> {
        let reason = &signed.statement.reason;
        if reason.trim().is_empty() {
            return Err(DecideError::NoReason);
        }
        if reason.len() > MAX_REASON_BYTES {
            return Err(DecideError::ReasonTooLong {
                len: reason.len(),
                max: MAX_REASON_BYTES,
            });
        }
        let id = &signed.statement.call;
        let Some(tenant) = self.tenant_of(id).await? else {
            return Err(DecideError::UnknownCall(id.clone()));
        };
        match self
            .submit(&tenant, Work::Decide(Box::new(signed.clone())))
            .await?
        {
            Done::Decided(decided) => decided,
            _ => Err(StoreError::Closed.into()),
        }
    }

    /// Claims an approved call to run: approved → claimed, exactly once across every
    /// process sharing the store, with a `call_claimed` entry in the tenant's chain in
    /// the same transaction.
    ///
    /// `binding` names the call about to run, as the caller's gate just held it again:
    /// its tenant, its scope, its tool, its checksum and its upstream. The approval is
    /// spent only on a call that matches all of it, before the hold's expiry, and only if
    /// the chain holds the call's hold and an approving decision signed by a reviewer
    /// this store trusts for exactly that hold and binding, and no claim of it yet (a row
    /// set to approved, or set back to approved after it ran, by anything but
    /// [`Store::decide`] is refused, and the refusal recorded). Claim after the gate has
    /// decided the call again, run it only after this returns `Ok`, then record how it
    /// ended with [`Store::finish_claimed`]. A second claim is refused.
    pub async fn claim_to_run(&self, id: &Id, binding: &Binding) -> Result<HeldCall, ClaimError> {
        let Some(tenant) = self.tenant_of(id).await? else {
            return Err(ClaimError::UnknownCall(id.clone()));
        };
        let work = Work::Claim {
            call: id.clone(),
            binding: binding.clone(),
        };
        match self.submit(&tenant, work).await? {
            Done::Claimed(claimed) => claimed,
            _ => Err(StoreError::Closed.into()),
        }
    }

    /// Records how a claimed call ended: claimed → ran (`ran`) or failed, with a
    /// `call_finished` entry in the chain in the same transaction.
    pub async fn finish_claimed(&self, id: &Id, ran: bool) -> Result<HeldCall, ClaimError> {
        let Some(tenant) = self.tenant_of(id).await? else {
            return Err(ClaimError::UnknownCall(id.clone()));
        };
        let work = Work::Finish {
            call: id.clone(),
            ran,
        };
        match self.submit(&tenant, work).await? {
            Done::Claimed(finished) => finished,
            _ => Err(StoreError::Closed.into()),
        }
    }

    /// The tenant of a held call (whose chain its decision goes to), if it is held.
    async fn tenant_of(&self, id: &Id) -> Result<Option<Id>, StoreError> {
        let row = sqlx::query("SELECT tenant FROM pending_call WHERE id = $1")
            .bind(id.as_str())
            .fetch_optional(self.pool())
            .await
            .map_err(|e| self.engine().error(LIST, e))?;
        row.map(|row| {
            let tenant: String = row.try_get(0).map_err(|e| self.engine().error(LIST, e))?;
            Id::new(tenant).map_err(|e| StoreError::CorruptRow {
                table: "pending_call",
                key: id.to_string(),
                reason: format!("tenant: {e}"),
            })
        })
        .transpose()
    }

    /// Waits until the call is decided (or has run) and returns it.
    ///
    /// Looks at the call, then pauses, doubling the pause from `min_poll` to
    /// `max_poll`; on PostgreSQL it also listens for the notification each decision
    /// sends, which ends a pause at once. Another process (a person running `tooltrust
    /// pending approve`, say) may decide.
    pub async fn wait_decision(
        &self,
        id: &Id,
        options: WaitOptions,
    ) -> Result<HeldCall, WaitError> {
        let deadline = options.timeout.map(|t| tokio::time::Instant::now() + t);
        let mut listener = self.decision_listener().await;
        let mut pause = options.min_poll.max(Duration::from_millis(1));
        loop {
            match self.get(id).await? {
                None => return Err(WaitError::UnknownCall(id.clone())),
                Some(call) if call.status != HeldStatus::Held => return Ok(call),
                Some(_) => {}
            }
            let mut until = tokio::time::Instant::now() + pause;
            if let Some(deadline) = deadline {
                if tokio::time::Instant::now() >= deadline {
                    return Err(WaitError::TimedOut(id.clone()));
                }
                until = until.min(deadline);
            }
            match listener.as_mut() {
                Some(listener) => {
                    // Any notification (or a lost connection) means: look again.
                    if let Ok(Err(error)) = tokio::time::timeout_at(until, listener.recv()).await {
                        tracing::debug!(%error, "decision listener failed; polling");
                    }
                }
                None => tokio::time::sleep_until(until).await,
            }
            pause = (pause * 2).min(options.max_poll.max(options.min_poll));
        }
    }

    /// On PostgreSQL, a listener on the decisions channel (polling alone if it cannot
    /// connect).
    async fn decision_listener(&self) -> Option<sqlx::postgres::PgListener> {
        let crate::Location::Postgres(url) = self.location() else {
            return None;
        };
        let mut listener = match sqlx::postgres::PgListener::connect(url).await {
            Ok(listener) => listener,
            Err(error) => {
                tracing::debug!(%error, "cannot listen for decisions; polling");
                return None;
            }
        };
        match listener.listen(DECISIONS_CHANNEL).await {
            Ok(()) => Some(listener),
            Err(error) => {
                tracing::debug!(%error, "cannot listen for decisions; polling");
                None
            }
        }
    }
}
