//! The review queue's transitions as the store makes them: a held call's row, loaded and
//! locked, the runtime's lifecycle applied to it (`tooltrust::held`), and the row and
//! its chain entry written in one transaction. The appender runs them; the operations in
//! `pending` submit them.

use sqlx::any::AnyRow;
use sqlx::{Any, AssertSqlSafe, Row, Transaction};
use tooltrust::audit::{Body, Receipt};
use tooltrust::canonical::canonical_json;
use tooltrust::held::{
    Binding, HeldCall, HeldStatus, Lifecycle, LifecycleError, SignedDecision, StatusParseError,
};
use tooltrust::{Id, ToolCall};

use crate::clock;
use crate::engine::Engine;
use crate::error::{ClaimError, DecideError, HoldError, StoreError};
use crate::event::StoreEvent;
use crate::options::Authority;

/// The columns of a call, in the order [`from_row`] reads them.
pub(crate) const COLUMNS: &str = "id, tenant, tool, args, checksum, rule, reason, scope, author, \
    principal_request, context, status, created_at, decided_by, decision_reason, decided_at, \
    declaration, upstream, expires_at, decision";

/// The PostgreSQL channel that carries the ids of decided calls.
pub(crate) const DECISIONS_CHANNEL: &str = "tooltrust_decisions";

pub(crate) const HOLD: &str = "hold a call";
pub(crate) const LIST: &str = "list held calls";
pub(crate) const DECIDE: &str = "decide on a held call";
pub(crate) const CLAIM: &str = "claim a call to run";
pub(crate) const FINISH: &str = "record how a claimed call ended";

/// What a caller wants written.
#[derive(Debug)]
pub(crate) enum Work {
    /// Entries for a tenant's chain.
    Append { tenant: Id, bodies: Vec<Body> },
    /// A reviewer's signed decision on a held call (its entry goes to the call's
    /// tenant's chain).
    Decide(Box<SignedDecision>),
    /// A call to hold (its entry goes to the call's tenant's chain with it).
    Hold(Box<HeldCall>),
    /// A claim to run an approved call, for the call `binding` names.
    Claim {
        call: Id,
        binding: tooltrust::held::Binding,
    },
    /// How a claimed call ended.
    Finish { call: Id, ran: bool },
}

impl Work {
    pub(crate) fn call(&self) -> Option<&Id> {
        match self {
            Work::Append { .. } => None,
            Work::Decide(signed) => Some(&signed.statement.call),
            Work::Claim { call, .. } | Work::Finish { call, .. } => Some(call),
            Work::Hold(held) => Some(&held.id),
        }
    }
}

/// What a caller is told once the work's transaction has committed.
#[derive(Debug)]
pub(crate) enum Done {
    Appended(Vec<Receipt>),
    Held(Result<HeldCall, HoldError>),
    Decided(Result<HeldCall, DecideError>),
    Claimed(Result<HeldCall, ClaimError>),
}

/// Checks that a call to hold is fresh and self-consistent.
pub(crate) fn check_held(call: &HeldCall) -> Result<(), HoldError> {
    if call.status != HeldStatus::Held
        || call.decided_by.is_some()
        || call.decision_reason.is_some()
        || call.decided_at.is_some()
    {
        return Err(HoldError::NotHeld(call.id.clone()));
    }
    let bad_args = |reason: String| HoldError::BadArgs {
        id: call.id.clone(),
        reason,
    };
    let parsed = ToolCall::from_model(call.tool.as_str(), &call.args)
        .map_err(|e| bad_args(e.reason.to_string()))?;
    if canonical_json(&serde_json::Value::Object(parsed.args().clone())) != call.args {
        return Err(bad_args("not in canonical form".to_owned()));
    }
    if parsed.checksum() != call.checksum {
        return Err(HoldError::ChecksumMismatch {
            id: call.id.clone(),
            computed: parsed.checksum().to_hex(),
        });
    }
    if let Some(declaration) = &call.declaration
        && !matches!(
            serde_json::from_str::<serde_json::Value>(declaration),
            Ok(serde_json::Value::Object(_))
        )
    {
        return Err(HoldError::BadDeclaration(call.id.clone()));
    }
    Ok(())
}

/// A decision or claim, done inside the appender's transaction: the entry it adds to
/// its tenant's chain (if any) and what its caller is told.
pub(crate) struct Applied {
    pub(crate) entry: Option<(Id, Vec<Body>)>,
    pub(crate) done: Done,
}

/// Locks the call's row, checks the transition and makes it. A refused transition
/// changes nothing (a refused decision only adds its `call_decision_refused` entry).
pub(crate) async fn apply(
    tx: &mut Transaction<'static, Any>,
    engine: Engine,
    authority: &Authority,
    work: &Work,
) -> Result<Applied, StoreError> {
    match work {
        Work::Decide(signed) => decide_in(tx, engine, authority, signed).await,
        Work::Hold(held) => hold_in(tx, engine, held).await,
        Work::Claim { call, binding } => claim_in(tx, engine, authority, call, binding).await,
        Work::Finish { call, ran } => finish_in(tx, engine, call, *ran).await,
        // The appender writes appends itself; it never passes them here.
        Work::Append { .. } => Ok(Applied {
            entry: None,
            done: Done::Appended(Vec::new()),
        }),
    }
}

async fn hold_in(
    tx: &mut Transaction<'static, Any>,
    engine: Engine,
    stored: &HeldCall,
) -> Result<Applied, StoreError> {
    let inserted = sqlx::query(AssertSqlSafe(format!(
        "INSERT INTO pending_call ({COLUMNS}) VALUES \
         ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, NULL, NULL, NULL, $14, \
         $15, $16, NULL) \
         ON CONFLICT (id) DO NOTHING"
    )))
    .bind(stored.id.as_str())
    .bind(stored.tenant.as_str())
    .bind(stored.tool.as_str())
    .bind(stored.args.as_str())
    .bind(stored.checksum.to_hex())
    .bind(stored.rule.as_str())
    .bind(stored.reason.as_str())
    .bind(stored.scope.as_str())
    .bind(stored.author.as_str())
    .bind(stored.principal_request.as_deref())
    .bind(stored.context.as_deref())
    .bind(HeldStatus::Held.as_str())
    .bind(stored.created_at.as_str())
    .bind(stored.declaration.as_deref())
    .bind(stored.upstream.as_deref())
    .bind(stored.expires_at.as_deref())
    .execute(&mut **tx)
    .await
    .map_err(|e| engine.error(HOLD, e))?;
    if inserted.rows_affected() == 0 {
        return Ok(Applied {
            entry: None,
            done: Done::Held(Err(HoldError::Duplicate(stored.id.clone()))),
        });
    }
    Ok(Applied {
        entry: Some((
            stored.tenant.clone(),
            vec![Body::of(&held_event(stored, false))?],
        )),
        done: Done::Held(Ok(stored.clone())),
    })
}

/// The `call_held` entry of `call`.
fn held_event(call: &HeldCall, backfilled: bool) -> StoreEvent<'_> {
    StoreEvent::CallHeld {
        call: &call.id,
        tool: &call.tool,
        checksum: &call.checksum,
        scope: &call.scope,
        author: &call.author,
        rule: &call.rule,
        upstream: call.upstream.as_deref(),
        expires_at: call.expires_at.as_deref(),
        backfilled,
    }
}

/// Whether `call` was held before schema version 3, when holds were not yet recorded in
/// the chain (timestamps of the store's clock sort as text).
async fn held_before_the_lifecycle(
    tx: &mut Transaction<'static, Any>,
    engine: Engine,
    call: &HeldCall,
) -> Result<bool, StoreError> {
    let row = sqlx::query("SELECT applied_at FROM tooltrust_schema WHERE version = 3")
        .fetch_optional(&mut **tx)
        .await
        .map_err(|e| engine.error(DECIDE, e))?;
    let applied: Option<String> = match row {
        Some(row) => row.try_get(0).map_err(|e| engine.error(DECIDE, e))?,
        None => None,
    };
    Ok(applied.is_some_and(|applied| call.created_at < applied))
}

async fn decide_in(
    tx: &mut Transaction<'static, Any>,
    engine: Engine,
    authority: &Authority,
    signed: &SignedDecision,
) -> Result<Applied, StoreError> {
    let statement = &signed.statement;
    let id = &statement.call;
    let reviewer = &statement.reviewer;
    let approve = statement.approves();
    let Some(mut call) = select_for_update(tx, engine, id, DECIDE).await? else {
        return Ok(Applied {
            entry: None,
            done: Done::Decided(Err(DecideError::UnknownCall(id.clone()))),
        });
    };
    let now = clock::now_in(tx, engine).await?;
    let refused = |refusal: DecideError, why: String| -> Result<Applied, StoreError> {
        let event = StoreEvent::CallDecisionRefused {
            call: id,
            reviewer,
            approve,
            refusal: &why,
        };
        Ok(Applied {
            entry: Some((call.tenant.clone(), vec![Body::of(&event)?])),
            done: Done::Decided(Err(refusal)),
        })
    };
    // What was held is the chain's to say, not the row's: a decision binds the hold.
    let entries = call_entries(tx, engine, &call.tenant, DECIDE, id).await?;
    if let Some(decided) = entries
        .iter()
        .rev()
        .find(|entry| event_of(entry) == Some("call_decided"))
        .filter(|_| call.status == HeldStatus::Held)
    {
        // Decided once in the chain: a row set back to held is not decided again.
        let status = decided
            .get("decision")
            .and_then(serde_json::Value::as_str)
            .and_then(|status| status.parse().ok())
            .unwrap_or(call.status);
        return refused(
            DecideError::AlreadyDecided {
                id: id.clone(),
                status,
            },
            format!("already {status} in the audit chain"),
        );
    }
    let backfill = match held_in_chain(&entries, &call) {
        Some(held) => {
            call.scope = held.binding.scope.clone();
            call.tool = held.binding.tool.clone();
            call.checksum = held.binding.checksum;
            call.upstream = held.binding.upstream.clone();
            call.author = held.author.clone();
            call.expires_at = held.expires_at.clone();
            false
        }
        None if held_before_the_lifecycle(tx, engine, &call).await? => true,
        None => {
            return refused(
                DecideError::NeverHeld(id.clone()),
                "never recorded as held".to_owned(),
            );
        }
    };
    let mut lifecycle = call.lifecycle();
    if lifecycle.status == HeldStatus::Held && lifecycle.expired_at(&now) {
        // Past its expiry it never runs, whoever decides: the row says so from now on.
        set_status(tx, engine, id, HeldStatus::Expired, DECIDE).await?;
        let at = lifecycle.expires_at.clone().unwrap_or_default();
        return refused(
            DecideError::Expired {
                id: id.clone(),
                expired_at: at.clone(),
            },
            format!("expired at {at}"),
        );
    }
    if let Err(reason) = authority.reviewers.check(signed, id, &lifecycle) {
        let why = reason.to_string();
        return refused(
            DecideError::Unauthorized {
                id: id.clone(),
                reason,
            },
            why,
        );
    }
    if let Err(error) = lifecycle.decide(reviewer, approve, &now) {
        let (refusal, why) = match error {
            LifecycleError::AuthorCannotDecide(_) => (
                DecideError::AuthorCannotDecide {
                    id: id.clone(),
                    scope: call.scope.clone(),
                    reviewer: reviewer.clone(),
                },
                "the author cannot decide".to_owned(),
            ),
            LifecycleError::Expired(at) => {
                // Past its expiry it never runs: the row says so from now on.
                set_status(tx, engine, id, HeldStatus::Expired, DECIDE).await?;
                (
                    DecideError::Expired {
                        id: id.clone(),
                        expired_at: at.clone(),
                    },
                    format!("expired at {at}"),
                )
            }
            _ => (
                DecideError::AlreadyDecided {
                    id: id.clone(),
                    status: call.status,
                },
                format!("already {}", call.status),
            ),
        };
        return refused(refusal, why);
    }
    let reason = statement.reason.as_str();
    call.status = lifecycle.status;
    call.decided_by = Some(reviewer.clone());
    call.decision_reason = Some(reason.to_owned());
    call.decided_at = Some(now);
    call.decision = Some(signed.clone());
    let decision = serde_json::to_string(signed).map_err(|e| StoreError::CorruptRow {
        table: "pending_call",
        key: id.to_string(),
        reason: format!("decision: {e}"),
    })?;
    sqlx::query(
        "UPDATE pending_call SET status = $1, decided_by = $2, decision_reason = $3, \
         decided_at = $4, decision = $5 WHERE id = $6",
    )
    .bind(call.status.as_str())
    .bind(reviewer.as_str())
    .bind(reason)
    .bind(call.decided_at.as_deref())
    .bind(decision)
    .bind(id.as_str())
    .execute(&mut **tx)
    .await
    .map_err(|e| engine.error(DECIDE, e))?;
    let mut bodies = Vec::with_capacity(2);
    if backfill {
        // Held before the store recorded holds: its hold is recorded now, marked so, and
        // the decision follows it.
        bodies.push(Body::of(&held_event(&call, true))?);
    }
    let event = StoreEvent::CallDecided {
        call: &call.id,
        tool: &call.tool,
        checksum: &call.checksum,
        scope: &call.scope,
        author: &call.author,
        reviewer,
        decision: call.status,
        reason,
        signed,
    };
    bodies.push(Body::of(&event)?);
    Ok(Applied {
        entry: Some((call.tenant.clone(), bodies)),
        done: Done::Decided(Ok(call)),
    })
}

async fn claim_in(
    tx: &mut Transaction<'static, Any>,
    engine: Engine,
    authority: &Authority,
    id: &Id,
    binding: &Binding,
) -> Result<Applied, StoreError> {
    let Some(mut call) = select_for_update(tx, engine, id, CLAIM).await? else {
        return Ok(Applied {
            entry: None,
            done: Done::Claimed(Err(ClaimError::UnknownCall(id.clone()))),
        });
    };
    let now = clock::now_in(tx, engine).await?;
    let mut lifecycle = call.lifecycle();
    let refusal = match lifecycle.claim(binding, &now) {
        Err(LifecycleError::Expired(at)) => {
            set_status(tx, engine, id, HeldStatus::Expired, CLAIM).await?;
            Some(ClaimError::Expired {
                id: id.clone(),
                expired_at: at,
            })
        }
        Err(LifecycleError::NotApproved(status)) if status == HeldStatus::Held => {
            Some(ClaimError::NotApproved {
                id: id.clone(),
                status,
            })
        }
        Err(LifecycleError::NotApproved(HeldStatus::Rejected)) => Some(ClaimError::NotApproved {
            id: id.clone(),
            status: HeldStatus::Rejected,
        }),
        Err(LifecycleError::NotApproved(status)) => Some(ClaimError::AlreadyClaimed {
            id: id.clone(),
            status,
        }),
        Err(LifecycleError::BindingMismatch(field)) => Some(ClaimError::BindingMismatch {
            id: id.clone(),
            field,
        }),
        Err(error) => Some(ClaimError::Refused {
            id: id.clone(),
            reason: error.to_string(),
        }),
        // The row says approved; the chain must say so too, with a reviewer's signature.
        Ok(()) => approval_in_chain(tx, engine, authority, &call, binding, &now)
            .await?
            .err(),
    };
    if let Some(refusal) = refusal {
        // Refusals that say something is wrong with the row or the claim are recorded;
        // a second claim of a call the row shows claimed is the ordinary race, and is not.
        let entry = match &refusal {
            ClaimError::AlreadyClaimed { status, .. } if *status != HeldStatus::Approved => None,
            ClaimError::NotApproved { .. } => None,
            refusal => {
                let why = refusal.to_string();
                let event = StoreEvent::CallClaimRefused {
                    call: id,
                    checksum: &binding.checksum,
                    scope: &binding.scope,
                    refusal: &why,
                };
                Some((call.tenant.clone(), vec![Body::of(&event)?]))
            }
        };
        return Ok(Applied {
            entry,
            done: Done::Claimed(Err(refusal)),
        });
    }
    set_status(tx, engine, id, lifecycle.status, CLAIM).await?;
    call.status = lifecycle.status;
    let event = StoreEvent::CallClaimed {
        call: &call.id,
        tool: &call.tool,
        checksum: &call.checksum,
        scope: &call.scope,
        upstream: call.upstream.as_deref(),
    };
    Ok(Applied {
        entry: Some((call.tenant.clone(), vec![Body::of(&event)?])),
        done: Done::Claimed(Ok(call)),
    })
}

async fn finish_in(
    tx: &mut Transaction<'static, Any>,
    engine: Engine,
    id: &Id,
    ran: bool,
) -> Result<Applied, StoreError> {
    let Some(mut call) = select_for_update(tx, engine, id, FINISH).await? else {
        return Ok(Applied {
            entry: None,
            done: Done::Claimed(Err(ClaimError::UnknownCall(id.clone()))),
        });
    };
    let mut lifecycle = call.lifecycle();
    if let Err(error) = lifecycle.finish(ran) {
        return Ok(Applied {
            entry: None,
            done: Done::Claimed(Err(ClaimError::Refused {
                id: id.clone(),
                reason: error.to_string(),
            })),
        });
    }
    set_status(tx, engine, id, lifecycle.status, FINISH).await?;
    call.status = lifecycle.status;
    let event = StoreEvent::CallFinished {
        call: &call.id,
        checksum: &call.checksum,
        outcome: call.status,
    };
    Ok(Applied {
        entry: Some((call.tenant.clone(), vec![Body::of(&event)?])),
        done: Done::Claimed(Ok(call)),
    })
}

async fn set_status(
    tx: &mut Transaction<'static, Any>,
    engine: Engine,
    id: &Id,
    status: HeldStatus,
    op: &'static str,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE pending_call SET status = $1 WHERE id = $2")
        .bind(status.as_str())
        .bind(id.as_str())
        .execute(&mut **tx)
        .await
        .map_err(|e| engine.error(op, e))?;
    Ok(())
}

/// Whether the chain vouches for spending the approval of `call` on the call `binding`
/// names, now: the chain records the call's hold, an approving decision that a reviewer
/// this store trusts signed for exactly that hold and this binding, before its expiry,
/// and no claim of it yet. Every part is read from the chain's lines (found through the
/// call's index) and checked; the row and the index vouch for nothing.
async fn approval_in_chain(
    tx: &mut Transaction<'static, Any>,
    engine: Engine,
    authority: &Authority,
    call: &HeldCall,
    binding: &Binding,
    now: &str,
) -> Result<Result<(), ClaimError>, StoreError> {
    let id = &call.id;
    let entries = call_entries(tx, engine, &call.tenant, CLAIM, id).await?;
    if entries
        .iter()
        .any(|entry| matches!(event_of(entry), Some("call_claimed" | "call_finished")))
    {
        // The row was set back to approved: the chain already spent this approval.
        return Ok(Err(ClaimError::AlreadyClaimed {
            id: id.clone(),
            status: HeldStatus::Approved,
        }));
    }
    let Some(held) = held_in_chain(&entries, call) else {
        return Ok(Err(ClaimError::NoRecordedApproval(id.clone())));
    };
    let Some(signed) = entries
        .iter()
        .rev()
        .filter(|entry| event_of(entry) == Some("call_decided"))
        .find_map(|entry| entry.get("signed"))
    else {
        return Ok(Err(ClaimError::NoRecordedApproval(id.clone())));
    };
    let Ok(signed) = serde_json::from_value::<SignedDecision>(signed.clone()) else {
        return Ok(Err(ClaimError::NoRecordedApproval(id.clone())));
    };
    if let Err(reason) = authority.reviewers.check(&signed, id, &held) {
        return Ok(Err(ClaimError::Unauthorized {
            id: id.clone(),
            reason,
        }));
    }
    if !signed.statement.approves() {
        return Ok(Err(ClaimError::NoRecordedApproval(id.clone())));
    }
    if let Some(field) = signed.statement.binding().mismatch(binding) {
        return Ok(Err(ClaimError::BindingMismatch {
            id: id.clone(),
            field,
        }));
    }
    if held.expired_at(now) {
        return Ok(Err(ClaimError::Expired {
            id: id.clone(),
            expired_at: held.expires_at.clone().unwrap_or_default(),
        }));
    }
    Ok(Ok(()))
}

/// The entries of `tenant`'s chain about held call `id`, oldest first, found through the
/// `call` index and kept only if their own line names the call.
async fn call_entries(
    tx: &mut Transaction<'static, Any>,
    engine: Engine,
    tenant: &Id,
    op: &'static str,
    id: &Id,
) -> Result<Vec<serde_json::Map<String, serde_json::Value>>, StoreError> {
    let rows =
        sqlx::query("SELECT line FROM chain_entry WHERE tenant = $1 AND call = $2 ORDER BY seq")
            .bind(tenant.as_str())
            .bind(id.as_str())
            .fetch_all(&mut **tx)
            .await
            .map_err(|e| engine.error(op, e))?;
    Ok(rows
        .iter()
        .filter_map(|row| row.try_get::<String, _>(0).ok())
        .filter_map(|line| match serde_json::from_str(&line) {
            Ok(serde_json::Value::Object(entry)) => Some(entry),
            _ => None,
        })
        .filter(|entry| entry.get("call").and_then(serde_json::Value::as_str) == Some(id.as_str()))
        .collect())
}

fn event_of(entry: &serde_json::Map<String, serde_json::Value>) -> Option<&str> {
    entry.get("event").and_then(serde_json::Value::as_str)
}

/// The call as the chain's `call_held` entry recorded it (the first, if any), in the
/// call's tenant, with the row's status.
fn held_in_chain(
    entries: &[serde_json::Map<String, serde_json::Value>],
    call: &HeldCall,
) -> Option<Lifecycle> {
    let entry = entries
        .iter()
        .find(|entry| event_of(entry) == Some("call_held"))?;
    let text = |name: &str| entry.get(name).and_then(serde_json::Value::as_str);
    Some(Lifecycle {
        status: call.status,
        binding: Binding {
            tenant: call.tenant.clone(),
            scope: Id::new(text("scope")?).ok()?,
            tool: text("tool")?.to_owned(),
            checksum: text("checksum")?.parse().ok()?,
            upstream: text("upstream").map(str::to_owned),
        },
        author: Id::new(text("author")?).ok()?,
        reviewer: call.decided_by.clone(),
        expires_at: text("expires_at").map(str::to_owned),
    })
}

async fn select_for_update(
    tx: &mut Transaction<'static, Any>,
    engine: Engine,
    id: &Id,
    op: &'static str,
) -> Result<Option<HeldCall>, StoreError> {
    let row = sqlx::query(AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM pending_call WHERE id = $1{}",
        engine.for_update()
    )))
    .bind(id.as_str())
    .fetch_optional(&mut **tx)
    .await
    .map_err(|e| engine.error(op, e))?;
    row.as_ref().map(from_row).transpose()
}

/// Reads a row in [`COLUMNS`] order, refusing anything the store would not write.
pub(crate) fn from_row(row: &AnyRow) -> Result<HeldCall, StoreError> {
    let key: String = row.try_get(0).unwrap_or_default();
    let corrupt = |column: &str, why: &str| StoreError::CorruptRow {
        table: "pending_call",
        key: key.clone(),
        reason: format!("{column}: {why}"),
    };
    let text = |i: usize, column: &str| -> Result<String, StoreError> {
        row.try_get::<String, _>(i)
            .map_err(|e| corrupt(column, &e.to_string()))
    };
    let optional = |i: usize, column: &str| -> Result<Option<String>, StoreError> {
        row.try_get::<Option<String>, _>(i)
            .map_err(|e| corrupt(column, &e.to_string()))
    };
    let id = |i: usize, column: &str| -> Result<Id, StoreError> {
        Id::new(text(i, column)?).map_err(|e| corrupt(column, &e.to_string()))
    };
    Ok(HeldCall {
        id: id(0, "id")?,
        tenant: id(1, "tenant")?,
        tool: text(2, "tool")?,
        args: text(3, "args")?,
        checksum: text(4, "checksum")?
            .parse()
            .map_err(|_| corrupt("checksum", "not 64 lowercase hex characters"))?,
        rule: text(5, "rule")?,
        reason: text(6, "reason")?,
        scope: id(7, "scope")?,
        author: id(8, "author")?,
        principal_request: optional(9, "principal_request")?,
        context: optional(10, "context")?,
        status: text(11, "status")?
            .parse()
            .map_err(|e: StatusParseError| corrupt("status", &e.to_string()))?,
        created_at: text(12, "created_at")?,
        decided_by: optional(13, "decided_by")?
            .map(|by| Id::new(by).map_err(|e| corrupt("decided_by", &e.to_string())))
            .transpose()?,
        decision_reason: optional(14, "decision_reason")?,
        decided_at: optional(15, "decided_at")?,
        declaration: optional(16, "declaration")?,
        upstream: optional(17, "upstream")?,
        expires_at: optional(18, "expires_at")?,
        decision: optional(19, "decision")?
            .map(|text| {
                serde_json::from_str::<SignedDecision>(&text)
                    .map_err(|e| corrupt("decision", &e.to_string()))
            })
            .transpose()?,
    })
}
