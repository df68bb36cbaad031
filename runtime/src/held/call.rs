//! A held call as it is kept: what was called, why the gate held it, where it stands, and
//! the reviewer's decision once there is one. The durable store keeps these rows; the
//! CLI, the console and the MCP server show and decide them.

use serde::Serialize;

use crate::ToolCall;
use crate::call::Checksum;
use crate::canonical::canonical_json;
use crate::id::Id;
use crate::registry::CatalogEntry;

use super::{
    Binding, DEFAULT_APPROVAL_TTL, DecisionStatement, HeldStatus, Lifecycle, SignedDecision,
    expiry_after,
};

/// A call the gate held for review, with its decision once there is one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeldCall {
    /// The call's id (unique across the store).
    pub id: Id,
    /// The tenant whose chain records its decision.
    pub tenant: Id,
    /// The tool the call names.
    pub tool: String,
    /// The RFC 8785 canonical text of the arguments object.
    pub args: String,
    /// The call's checksum: SHA-256 of the canonical `{"args": …, "tool": …}`.
    pub checksum: Checksum,
    /// The gate rule that held it.
    pub rule: String,
    /// Why the gate held it.
    pub reason: String,
    /// The scope that made the call.
    pub scope: Id,
    /// That scope's author, who may not decide on it.
    pub author: Id,
    /// What the principal asked for, if the host records it.
    pub principal_request: Option<String>,
    /// The context that led to the call (for the reviewer; may hold untrusted text).
    pub context: Option<String>,
    /// The declaration of the tool it names, as canonical JSON (see
    /// [`declared`](Self::declared)), if the host records it.
    pub declaration: Option<String>,
    /// Where it stands.
    pub status: HeldStatus,
    /// When it was held (set by the store that holds it).
    pub created_at: String,
    /// Who decided.
    pub decided_by: Option<Id>,
    /// Why.
    pub decision_reason: Option<String>,
    /// When.
    pub decided_at: Option<String>,
    /// For a call to an MCP upstream, the upstream's name (part of what an approval
    /// binds).
    pub upstream: Option<String>,
    /// After this moment (RFC 3339) the call can be neither decided nor claimed: it
    /// expires. `None`: never.
    pub expires_at: Option<String>,
    /// The reviewer's signed decision, once decided (for display: a claim reads the
    /// decision from the audit chain and checks its signature there).
    pub decision: Option<SignedDecision>,
}

impl HeldCall {
    /// A fresh held call (no decision, `created_at` to be set by the store that holds it)
    /// for `call`, held by `rule` for `reason`, made by `scope` whose author is `author`,
    /// for `tenant`, expiring [`DEFAULT_APPROVAL_TTL`] from now.
    pub fn new(
        call: &ToolCall,
        tenant: Id,
        rule: impl Into<String>,
        reason: impl Into<String>,
        scope: Id,
        author: Id,
    ) -> HeldCall {
        HeldCall {
            id: call.id().clone(),
            tenant,
            tool: call.tool().to_owned(),
            args: canonical_json(&serde_json::Value::Object(call.args().clone())),
            checksum: call.checksum(),
            rule: rule.into(),
            reason: reason.into(),
            scope,
            author,
            principal_request: None,
            context: None,
            declaration: None,
            status: HeldStatus::Held,
            created_at: String::new(),
            decided_by: None,
            decision_reason: None,
            decided_at: None,
            upstream: None,
            expires_at: Some(expiry_after(DEFAULT_APPROVAL_TTL)),
            decision: None,
        }
    }

    /// The statement a reviewer signs to decide this call: everything an approval binds,
    /// the verdict, the reason, the reviewer, now, and the call's expiry. Sign it with
    /// [`DecisionStatement::sign`] and hand it to the store that holds the call
    /// (`tooltrust_store::Store::decide`).
    pub fn statement(
        &self,
        approve: bool,
        reason: impl Into<String>,
        reviewer: Id,
    ) -> DecisionStatement {
        DecisionStatement::new(
            self.id.clone(),
            &self.lifecycle(),
            approve,
            reason,
            reviewer,
        )
    }

    /// What an approval of the call is bound to.
    pub fn binding(&self) -> Binding {
        Binding {
            tenant: self.tenant.clone(),
            scope: self.scope.clone(),
            tool: self.tool.clone(),
            checksum: self.checksum,
            upstream: self.upstream.clone(),
        }
    }

    /// The call as the runtime's lifecycle sees it: the store applies the very
    /// transitions the session applies.
    pub fn lifecycle(&self) -> Lifecycle {
        Lifecycle {
            status: self.status,
            binding: self.binding(),
            author: self.author.clone(),
            reviewer: self.decided_by.clone(),
            expires_at: self.expires_at.clone(),
        }
    }
}

impl HeldCall {
    /// Records the declaration of the tool the call names, from the registry's
    /// catalog: `{"description", "effects", "output", "trust"}` as canonical JSON, with
    /// the words MCP's `_meta.tooltrust` uses (`trusted`/`untrusted`,
    /// `read_only`/`consequential`, `data`/`instruction`).
    pub fn declared(mut self, entry: &CatalogEntry) -> HeldCall {
        let mut declaration = entry.declaration();
        if let Some(fields) = declaration.as_object_mut() {
            fields.insert("description".into(), entry.description.clone().into());
        }
        self.declaration = Some(canonical_json(&declaration));
        self
    }
}
