//! A reviewer's decision as a signed statement: the authority to run a held call comes
//! from a reviewer's private key, never from whoever can write the row or the chain that
//! records it.
//!
//! The statement binds everything an approval is for (the call, tenant, scope, upstream,
//! tool and checksum), the verdict and its reason, the reviewer, when they decided and
//! until when the approval holds. Its signature is Ed25519 over the statement's RFC 8785
//! canonical JSON, in the domain [`DECISION_DOMAIN`]. Hosts hold [`Reviewers`]: public
//! keys only, each with the tenants that reviewer may decide for.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Binding, HeldStatus, Lifecycle};
use crate::call::Checksum;
use crate::canonical::canonical_json;
use crate::id::Id;
use crate::signature::{PublicKey, SecretKey, Signature};
use crate::timestamp;

/// The signature domain of decisions.
pub const DECISION_DOMAIN: &str = "tooltrust/decision/v1";

/// What a reviewer decided about one held call: every field is signed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionStatement {
    /// The held call's id.
    pub call: Id,
    /// The tenant whose queue holds it.
    pub tenant: Id,
    /// The scope that held it.
    pub scope: Id,
    /// For a call to an MCP upstream, the upstream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
    /// The tool the call names.
    pub tool: String,
    /// The call's canonical checksum: exactly these arguments.
    pub checksum: Checksum,
    /// `approved` or `rejected`.
    pub decision: HeldStatus,
    /// Why.
    pub reason: String,
    /// Who decided: an id of the hosts' reviewers file.
    pub reviewer: Id,
    /// When, by the reviewer's clock (RFC 3339).
    pub decided_at: String,
    /// Until when the approval may be spent (RFC 3339): the hold's own expiry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
}

impl DecisionStatement {
    /// `reviewer`'s decision, now, on the held call `call` that `held` describes.
    pub fn new(
        call: Id,
        held: &Lifecycle,
        approve: bool,
        reason: impl Into<String>,
        reviewer: Id,
    ) -> DecisionStatement {
        let binding = &held.binding;
        DecisionStatement {
            call,
            tenant: binding.tenant.clone(),
            scope: binding.scope.clone(),
            upstream: binding.upstream.clone(),
            tool: binding.tool.clone(),
            checksum: binding.checksum,
            decision: if approve {
                HeldStatus::Approved
            } else {
                HeldStatus::Rejected
            },
            reason: reason.into(),
            reviewer,
            decided_at: timestamp::now(),
            expires_at: held.expires_at.clone(),
        }
    }

    /// Whether it approves.
    pub fn approves(&self) -> bool {
        self.decision == HeldStatus::Approved
    }

    /// What it binds.
    pub fn binding(&self) -> Binding {
        Binding {
            tenant: self.tenant.clone(),
            scope: self.scope.clone(),
            tool: self.tool.clone(),
            checksum: self.checksum,
            upstream: self.upstream.clone(),
        }
    }

    /// The bytes that are signed: the statement's canonical JSON.
    pub fn canonical(&self) -> String {
        serde_json::to_value(self)
            .map(|value| canonical_json(&value))
            .unwrap_or_default()
    }

    /// Signs the statement with the reviewer's key.
    pub fn sign(self, key: &SecretKey) -> SignedDecision {
        let signature = key.sign(DECISION_DOMAIN, self.canonical().as_bytes());
        SignedDecision {
            statement: self,
            signature,
        }
    }
}

/// A decision and its reviewer's signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignedDecision {
    /// What was decided.
    pub statement: DecisionStatement,
    /// The reviewer's Ed25519 signature of the statement's canonical JSON.
    pub signature: Signature,
}

/// Why a signed decision does not count.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecisionError {
    /// The reviewer is not in the reviewers file.
    #[error("{0} is not a known reviewer: no public key is configured for it")]
    UnknownReviewer(Id),
    /// The signature is not the reviewer's signature of the statement.
    #[error("the decision is not signed by {0}'s key")]
    BadSignature(Id),
    /// The reviewer may not decide for the tenant.
    #[error("{reviewer} may not decide for tenant {tenant}")]
    TenantNotAllowed {
        /// The reviewer.
        reviewer: Id,
        /// The call's tenant.
        tenant: Id,
    },
    /// The statement names another call, binding or expiry than the hold it decides.
    #[error("the decision is about another {0} than the held call")]
    Mismatch(&'static str),
    /// A decision must say `approved` or `rejected`.
    #[error("a decision is approved or rejected, not {0}")]
    NotAVerdict(HeldStatus),
    /// The decision was made after the approval's expiry, or its time is not a
    /// timestamp.
    #[error("the decision's time {0} is not before the hold's expiry")]
    Late(String),
}

/// Which tenants a reviewer may decide for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Tenants {
    /// Every tenant (`tenants = "*"`).
    All(AllTenants),
    /// These tenants only.
    Only(Vec<Id>),
}

/// The text `*`: every tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AllTenants {
    /// `*`.
    #[serde(rename = "*")]
    All,
}

impl Tenants {
    /// Whether `tenant` is among them.
    pub fn allows(&self, tenant: &Id) -> bool {
        match self {
            Tenants::All(_) => true,
            Tenants::Only(tenants) => tenants.contains(tenant),
        }
    }
}

/// One reviewer: an id, a public key and the tenants they may decide for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reviewer {
    /// The reviewer's id, as decisions name it.
    pub id: Id,
    /// The public key of the reviewer's signing key.
    pub key: PublicKey,
    /// The tenants they may decide for.
    pub tenants: Tenants,
}

/// Who may decide: the reviewers whose public keys the host trusts. A host holds these,
/// never a private key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reviewers {
    by_id: BTreeMap<Id, Reviewer>,
}

/// A reviewers list that names one reviewer twice.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("reviewer {0} is listed twice")]
pub struct DuplicateReviewer(pub Id);

impl Reviewers {
    /// No reviewers: no decision counts.
    pub fn new() -> Reviewers {
        Reviewers::default()
    }

    /// These reviewers; each id at most once.
    pub fn from_list(list: Vec<Reviewer>) -> Result<Reviewers, DuplicateReviewer> {
        let mut reviewers = Reviewers::new();
        for reviewer in list {
            reviewers.insert(reviewer)?;
        }
        Ok(reviewers)
    }

    /// Adds a reviewer.
    pub fn insert(&mut self, reviewer: Reviewer) -> Result<(), DuplicateReviewer> {
        if self.by_id.contains_key(&reviewer.id) {
            return Err(DuplicateReviewer(reviewer.id));
        }
        self.by_id.insert(reviewer.id.clone(), reviewer);
        Ok(())
    }

    /// The reviewer with this id.
    pub fn get(&self, id: &Id) -> Option<&Reviewer> {
        self.by_id.get(id)
    }

    /// Every reviewer, by id.
    pub fn iter(&self) -> impl Iterator<Item = &Reviewer> {
        self.by_id.values()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Checks that `signed` is a decision a reviewer signed with their key, for a tenant
    /// they may decide, about exactly the held call `call` that `held` describes, made
    /// before that hold's expiry. Only then does the decision count.
    pub fn check(
        &self,
        signed: &SignedDecision,
        call: &Id,
        held: &Lifecycle,
    ) -> Result<(), DecisionError> {
        let statement = &signed.statement;
        let reviewer = self
            .get(&statement.reviewer)
            .ok_or_else(|| DecisionError::UnknownReviewer(statement.reviewer.clone()))?;
        if !reviewer.key.verifies(
            DECISION_DOMAIN,
            statement.canonical().as_bytes(),
            &signed.signature,
        ) {
            return Err(DecisionError::BadSignature(statement.reviewer.clone()));
        }
        if !reviewer.tenants.allows(&statement.tenant) {
            return Err(DecisionError::TenantNotAllowed {
                reviewer: statement.reviewer.clone(),
                tenant: statement.tenant.clone(),
            });
        }
        if !matches!(
            statement.decision,
            HeldStatus::Approved | HeldStatus::Rejected
        ) {
            return Err(DecisionError::NotAVerdict(statement.decision));
        }
        if statement.call != *call {
            return Err(DecisionError::Mismatch("call"));
        }
        if let Some(field) = held.binding.mismatch(&statement.binding()) {
            return Err(DecisionError::Mismatch(field));
        }
        if statement.expires_at != held.expires_at {
            return Err(DecisionError::Mismatch("expiry"));
        }
        let decided = timestamp::unix_millis(&statement.decided_at)
            .ok_or_else(|| DecisionError::Late(statement.decided_at.clone()))?;
        if let Some(expires) = &held.expires_at {
            match timestamp::unix_millis(expires) {
                Some(expires) if decided < expires => {}
                _ => return Err(DecisionError::Late(statement.decided_at.clone())),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(text: &str) -> Id {
        Id::new(text).unwrap()
    }

    fn held() -> Lifecycle {
        let mut held = Lifecycle::held(
            Binding {
                tenant: id("t"),
                scope: id("s"),
                tool: "send_email".into(),
                checksum: Checksum::of(b"call"),
                upstream: Some("mail".into()),
            },
            id("agent"),
            None,
        );
        held.expires_at = Some("2999-01-01T00:00:00Z".into());
        held
    }

    fn reviewers(key: &SecretKey, tenants: Tenants) -> Reviewers {
        Reviewers::from_list(vec![Reviewer {
            id: id("ann"),
            key: key.public(),
            tenants,
        }])
        .unwrap()
    }

    #[test]
    fn only_the_reviewers_key_makes_a_decision_count() {
        let ann = SecretKey::from_seed([1; 32]);
        let eve = SecretKey::from_seed([2; 32]);
        let trusted = reviewers(&ann, Tenants::Only(vec![id("t")]));
        let statement = DecisionStatement::new(id("c1"), &held(), true, "ok", id("ann"));
        let signed = statement.clone().sign(&ann);
        assert_eq!(trusted.check(&signed, &id("c1"), &held()), Ok(()));
        assert_eq!(
            trusted.check(&statement.clone().sign(&eve), &id("c1"), &held()),
            Err(DecisionError::BadSignature(id("ann")))
        );
        let mut edited = signed.clone();
        edited.statement.reason = "other".into();
        assert_eq!(
            trusted.check(&edited, &id("c1"), &held()),
            Err(DecisionError::BadSignature(id("ann")))
        );
        let mut bob = statement.clone();
        bob.reviewer = id("bob");
        assert_eq!(
            trusted.check(&bob.sign(&ann), &id("c1"), &held()),
            Err(DecisionError::UnknownReviewer(id("bob")))
        );
        let elsewhere = reviewers(&ann, Tenants::Only(vec![id("u")]));
        assert!(matches!(
            elsewhere.check(&signed, &id("c1"), &held()),
            Err(DecisionError::TenantNotAllowed { .. })
        ));
        assert_eq!(
            reviewers(&ann, Tenants::All(AllTenants::All)).check(&signed, &id("c1"), &held()),
            Ok(())
        );
    }

    #[test]
    fn a_decision_counts_only_for_the_hold_it_names() {
        let ann = SecretKey::from_seed([1; 32]);
        let trusted = reviewers(&ann, Tenants::All(AllTenants::All));
        let signed = DecisionStatement::new(id("c1"), &held(), true, "ok", id("ann")).sign(&ann);
        assert_eq!(
            trusted.check(&signed, &id("c2"), &held()),
            Err(DecisionError::Mismatch("call"))
        );
        let mut moved = held();
        moved.binding.scope = id("other");
        assert_eq!(
            trusted.check(&signed, &id("c1"), &moved),
            Err(DecisionError::Mismatch("scope"))
        );
        let mut upstream = held();
        upstream.binding.upstream = None;
        assert_eq!(
            trusted.check(&signed, &id("c1"), &upstream),
            Err(DecisionError::Mismatch("upstream"))
        );
        let mut unexpiring = held();
        unexpiring.expires_at = None;
        assert_eq!(
            trusted.check(&signed, &id("c1"), &unexpiring),
            Err(DecisionError::Mismatch("expiry"))
        );
        let mut late = DecisionStatement::new(id("c1"), &held(), true, "ok", id("ann"));
        late.decided_at = "2999-02-01T00:00:00Z".into();
        assert!(matches!(
            trusted.check(&late.sign(&ann), &id("c1"), &held()),
            Err(DecisionError::Late(_))
        ));
    }

    #[test]
    fn signed_decisions_read_back_from_json() {
        let ann = SecretKey::from_seed([1; 32]);
        let signed = DecisionStatement::new(id("c1"), &held(), false, "no", id("ann")).sign(&ann);
        let text = serde_json::to_string(&signed).unwrap();
        assert_eq!(
            serde_json::from_str::<SignedDecision>(&text).unwrap(),
            signed
        );
        let reviewer: Reviewer = serde_json::from_value(serde_json::json!({
            "id": "ann", "key": ann.public().to_string(), "tenants": "*"
        }))
        .unwrap();
        assert_eq!(reviewer.tenants, Tenants::All(AllTenants::All));
    }
}
