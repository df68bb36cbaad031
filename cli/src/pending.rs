//! `tooltrust pending list|show|approve|reject`: the review queue of a store, from any
//! terminal.

use std::io::Write;

use clap::Subcommand;
use serde_json::Value;
use tooltrust::Id;
use tooltrust::canonical::canonical_json;
use tooltrust_store::{HeldCall, HeldStatus, ListFilter};

use crate::audit::escape;
use std::path::PathBuf;

use tooltrust::held::{AllTenants, Reviewer, Reviewers, Tenants};

use crate::store::{Error, StoreArgs, open, open_with, parse_id};

#[derive(Subcommand)]
pub enum PendingCommand {
    /// Lists held calls, newest first.
    ///
    /// With --json, one JSON object per line: id, tenant, tool, args (the RFC 8785
    /// canonical text of the arguments), checksum, rule, reason, scope, author (who may
    /// not decide), status (held, approved, rejected, expired, claimed, ran, failed), created_at, decided_by,
    /// decision_reason, decided_at.
    List {
        /// Only calls with this status: held, approved, rejected, expired, claimed, ran or failed.
        #[arg(long)]
        status: Option<HeldStatus>,
        /// Only calls to this tool.
        #[arg(long)]
        tool: Option<String>,
        /// Only calls made by this scope.
        #[arg(long, value_parser = parse_id)]
        scope: Option<Id>,
        /// Only calls of this tenant.
        #[arg(long, value_parser = parse_id)]
        tenant: Option<Id>,
        /// Only calls older than this one (the next page after the call with this id).
        #[arg(long, value_parser = parse_id)]
        before: Option<Id>,
        /// At most this many.
        #[arg(long)]
        limit: Option<u32>,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Shows one held call: the list's fields plus the principal's request and the
    /// context that led to the call.
    Show {
        /// The call's id.
        #[arg(value_parser = parse_id)]
        id: Id,
        /// One JSON object.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Approves a held call, signed with the reviewer's private key (--key); it may then
    /// run, once, in the scope that held it, on a host whose reviewers file trusts that
    /// key for the call's tenant. The author of the scope that made the call cannot
    /// approve it. The signed decision is recorded in the tenant's audit chain.
    Approve(Decision),
    /// Rejects a held call; it never runs. Recorded like an approval.
    Reject(Decision),
}

/// A decision's arguments.
#[derive(clap::Args)]
pub struct Decision {
    /// The call's id.
    #[arg(value_parser = parse_id)]
    id: Id,
    /// Who decides: the reviewer's id in the hosts' reviewers file.
    #[arg(long, value_parser = parse_id)]
    reviewer: Id,
    /// The reviewer's private key (as `tooltrust reviewer keygen` wrote it): the decision
    /// is signed with it, and counts only where its public key is trusted.
    #[arg(long, value_name = "FILE")]
    key: PathBuf,
    /// Why.
    #[arg(long)]
    reason: String,
    /// Prints the decided call as one JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    store: StoreArgs,
}

/// Runs a command. A refused decision is an error (exit status 1, with the reason).
pub fn run(command: PendingCommand, out: &mut impl Write) -> Result<bool, Error> {
    match command {
        PendingCommand::List {
            status,
            tool,
            scope,
            tenant,
            before,
            limit,
            json,
            store,
        } => {
            let filter = ListFilter {
                status,
                tool,
                scope,
                tenant,
                before,
                limit,
                ..ListFilter::default()
            };
            let (runtime, store) = open(&store.location()?.ok_or(Error::NoStore)?)?;
            let calls = runtime.block_on(store.list(&filter))?;
            for call in &calls {
                if json {
                    writeln!(out, "{}", canonical_json(&listed(call)))?;
                } else {
                    writeln!(out, "{}", summary(call))?;
                }
            }
            Ok(true)
        }
        PendingCommand::Show { id, json, store } => {
            let (runtime, store) = open(&store.location()?.ok_or(Error::NoStore)?)?;
            let call = runtime
                .block_on(store.get(&id))?
                .ok_or(Error::UnknownCall(id))?;
            if json {
                writeln!(out, "{}", canonical_json(&shown(&call)))?;
            } else {
                write!(out, "{}", details(&call))?;
            }
            Ok(true)
        }
        PendingCommand::Approve(decision) => decide(decision, true, out),
        PendingCommand::Reject(decision) => decide(decision, false, out),
    }
}

fn decide(decision: Decision, approve: bool, out: &mut impl Write) -> Result<bool, Error> {
    let key = crate::key::read(&decision.key)?;
    let location = decision.store.location()?.ok_or(Error::NoStore)?;
    let reviewers = match decision.store.reviewers()? {
        Some(reviewers) => reviewers,
        // Without the hosts' file, the store records what this key signed; every host
        // checks the signature against its own reviewers file before it runs anything.
        None => Reviewers::from_list(vec![Reviewer {
            id: decision.reviewer.clone(),
            key: key.public(),
            tenants: Tenants::All(AllTenants::All),
        }])
        .map_err(|error| Error::Reviewers(error.to_string()))?,
    };
    let (runtime, store) = open_with(&location, reviewers)?;
    let result = runtime.block_on(async {
        let call = store
            .get(&decision.id)
            .await?
            .ok_or_else(|| Error::UnknownCall(decision.id.clone()))?;
        let signed = call
            .statement(approve, decision.reason.clone(), decision.reviewer.clone())
            .sign(&key);
        Ok::<_, Error>(store.decide(&signed).await?)
    });
    runtime.block_on(store.close());
    let call = result?;
    if decision.json {
        writeln!(out, "{}", canonical_json(&shown(&call)))?;
    } else {
        writeln!(out, "{} {} by {}", call.id, call.status, decision.reviewer)?;
    }
    Ok(true)
}

/// The object `show --json` prints: every field of the call.
fn shown(call: &HeldCall) -> Value {
    serde_json::to_value(call).unwrap_or(Value::Null)
}

/// The object `list --json` prints: the call without the principal's request and the
/// context (which `show` adds).
fn listed(call: &HeldCall) -> Value {
    let mut value = shown(call);
    if let Some(fields) = value.as_object_mut() {
        fields.remove("principal_request");
        fields.remove("context");
    }
    value
}

/// One line per call for a person; every text escaped (parts came from outsiders).
fn summary(call: &HeldCall) -> String {
    format!(
        "{}  {:8}  {}  {}  scope {} (author {})  {}: {}",
        call.id,
        call.status,
        escape(&call.created_at),
        escape(&call.tool),
        call.scope,
        call.author,
        escape(&call.rule),
        escape(&call.reason)
    )
}

/// Every field, one per line, escaped.
fn details(call: &HeldCall) -> String {
    let optional = |text: &Option<String>| text.as_deref().map(escape).unwrap_or_default();
    let rows = [
        ("id", call.id.to_string()),
        ("tenant", call.tenant.to_string()),
        ("status", call.status.to_string()),
        ("tool", escape(&call.tool)),
        ("args", escape(&call.args)),
        ("checksum", call.checksum.to_hex()),
        ("rule", escape(&call.rule)),
        ("reason", escape(&call.reason)),
        ("scope", call.scope.to_string()),
        ("author", call.author.to_string()),
        ("created_at", escape(&call.created_at)),
        ("principal_request", optional(&call.principal_request)),
        ("context", optional(&call.context)),
        (
            "decided_by",
            call.decided_by
                .as_ref()
                .map(Id::to_string)
                .unwrap_or_default(),
        ),
        ("decision_reason", optional(&call.decision_reason)),
        ("decided_at", optional(&call.decided_at)),
    ];
    rows.iter()
        .map(|(name, value)| format!("{name:17}  {value}\n"))
        .collect()
}
