//! The gate: before every call, a deterministic decision from declared metadata and
//! taint — never from a model's opinion, and costing no model tokens.
//!
//! The default policy, in order:
//! 1. unknown tool → deny;
//! 2. any argument containing a live nonce → deny (a nonce leaking out through egress);
//! 3. review scope + consequential tool → deny (review scopes only read and judge);
//! 4. the developer's own rules, in the order added (the first that answers decides);
//! 5. strict isolation (opt-in): clean scope + untrusted-output tool → deny;
//! 6. tainted scope + consequential tool → needs review (never a silent allow);
//! 7. everything else → allow.
//!
//! Rules 1–3 hold whatever the developer adds; rules 5–6 are the defaults the developer's
//! rules may refine (see [`ArgumentFromTrustedBlock`]).

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::block::Block;
use crate::call::ToolCall;
use crate::id::Id;
use crate::registry::Registry;
use crate::tool::{Effects, ToolSpec, Trust};

/// A scope's taint level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Taint {
    /// No untrusted block has entered the scope.
    Clean,
    /// An untrusted block has entered the scope.
    Tainted,
    /// The scope exists only to judge another scope.
    Review,
}

/// What the gate rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ruling {
    /// The call runs.
    Allow,
    /// The call does not run.
    Deny,
    /// The call runs only once a review approves it.
    NeedsReview,
}

/// A decision with the rule that made it and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// What the gate rules.
    pub ruling: Ruling,
    /// The rule that decided.
    pub rule: String,
    /// Why, for the audit log and for the model.
    pub reason: String,
}

impl Decision {
    /// An allow by `rule`.
    pub fn allow(rule: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::new(Ruling::Allow, rule, reason)
    }

    /// A denial by `rule`.
    pub fn deny(rule: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::new(Ruling::Deny, rule, reason)
    }

    /// A referral to review by `rule`.
    pub fn needs_review(rule: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::new(Ruling::NeedsReview, rule, reason)
    }

    fn new(ruling: Ruling, rule: impl Into<String>, reason: impl Into<String>) -> Self {
        Decision {
            ruling,
            rule: rule.into(),
            reason: reason.into(),
        }
    }
}

/// What a rule may look at.
#[derive(Debug, Clone, Copy)]
pub struct GateContext<'a> {
    /// The call, already parsed and checksummed.
    pub call: &'a ToolCall,
    /// The agent's tools.
    pub registry: &'a Registry,
    /// The scope making the call.
    pub scope: &'a Id,
    /// The scope's taint.
    pub taint: Taint,
    /// Whether the scope is a child scope (where strict isolation sends untrusted work).
    pub is_child: bool,
    /// The blocks of the scope's context.
    pub blocks: &'a [Block],
}

impl GateContext<'_> {
    /// The called tool's declared metadata; `None` for a tool the registry does not hold.
    pub fn spec(&self) -> Option<ToolSpec> {
        self.registry.spec(self.call.tool()).ok()
    }
}

/// A developer's rule, consulted after the invariant rules and before the defaults.
pub trait Rule: Send + Sync {
    /// A name for the audit log.
    fn name(&self) -> &str;

    /// `Some` to decide, `None` to leave the call to the next rule.
    fn evaluate(&self, cx: &GateContext<'_>) -> Option<Decision>;
}

/// The live nonces of a scope, searchable in one pass over an argument.
#[derive(Debug, Clone, Default)]
pub struct NonceIndex {
    nonces: Vec<String>,
    matcher: Option<AhoCorasick>,
}

impl NonceIndex {
    /// Adds nonces; the index is rebuilt only when something new arrives.
    pub fn extend<'a>(&mut self, nonces: impl IntoIterator<Item = &'a String>) {
        let before = self.nonces.len();
        for nonce in nonces {
            if !self.nonces.contains(nonce) {
                self.nonces.push(nonce.clone());
            }
        }
        if self.nonces.len() != before {
            // Case-insensitive: a nonce that comes back upper-cased has still leaked.
            self.matcher = AhoCorasickBuilder::new()
                .ascii_case_insensitive(true)
                .match_kind(MatchKind::LeftmostFirst)
                .build(&self.nonces)
                .ok();
        }
    }

    /// The first live nonce found in the arguments' keys or string values, if any.
    pub fn find_in_args(&self, args: &Map<String, Value>) -> Option<&str> {
        let matcher = self.matcher.as_ref()?;
        args.iter().find_map(|(key, value)| {
            self.find_in_str(matcher, key)
                .or_else(|| self.find_in_value(matcher, value))
        })
    }

    fn find_in_value(&self, matcher: &AhoCorasick, value: &Value) -> Option<&str> {
        match value {
            Value::String(text) => self.find_in_str(matcher, text),
            Value::Array(items) => items
                .iter()
                .find_map(|item| self.find_in_value(matcher, item)),
            Value::Object(map) => map.iter().find_map(|(key, item)| {
                self.find_in_str(matcher, key)
                    .or_else(|| self.find_in_value(matcher, item))
            }),
            _ => None,
        }
    }

    fn find_in_str(&self, matcher: &AhoCorasick, text: &str) -> Option<&str> {
        matcher
            .find(text)
            .map(|found| self.nonces[found.pattern().as_usize()].as_str())
    }

    /// How many nonces the index holds.
    pub fn len(&self) -> usize {
        self.nonces.len()
    }

    /// Whether the index holds none.
    pub fn is_empty(&self) -> bool {
        self.nonces.is_empty()
    }
}

/// The gate's policy: the invariant rules, the developer's rules, and the defaults.
#[derive(Default)]
pub struct Policy {
    strict_isolation: bool,
    rules: Vec<Box<dyn Rule>>,
}

impl Policy {
    /// The default policy.
    pub fn new() -> Self {
        Self::default()
    }

    /// Opt in to strict isolation: a clean root scope may not call tools whose output
    /// is untrusted; it must run them in a child scope.
    pub fn strict_isolation(mut self, on: bool) -> Self {
        self.strict_isolation = on;
        self
    }

    /// Adds a rule after those already added.
    pub fn with_rule(mut self, rule: impl Rule + 'static) -> Self {
        self.rules.push(Box::new(rule));
        self
    }

    /// Decides on a call. Deterministic: the same context gives the same decision.
    pub fn decide(&self, cx: &GateContext<'_>, nonces: &NonceIndex) -> Decision {
        let spec = match cx.registry.spec(cx.call.tool()) {
            Ok(spec) => spec,
            // The error names the tools the agent does have.
            Err(unknown) => return Decision::deny("unknown-tool", unknown.to_string()),
        };
        if let Some(nonce) = nonces.find_in_args(cx.call.args()) {
            let shown = nonce.get(..8).unwrap_or(nonce);
            return Decision::deny(
                "nonce-leak",
                format!(
                    "an argument contains the live envelope nonce {shown}…; envelope nonces never leave the prompt"
                ),
            );
        }
        let consequential = spec.effects == Effects::Consequential;
        if cx.taint == Taint::Review && consequential {
            return Decision::deny(
                "review-scope",
                format!(
                    "review scopes may only read and judge; `{}` is consequential",
                    spec.name
                ),
            );
        }
        if let Some(decision) = self.rules.iter().find_map(|rule| rule.evaluate(cx)) {
            return decision;
        }
        if self.strict_isolation
            && !cx.is_child
            && cx.taint == Taint::Clean
            && spec.trust == Trust::Untrusted
        {
            return Decision::deny(
                "strict-isolation",
                format!(
                    "`{}` returns untrusted output; run it in a child scope",
                    spec.name
                ),
            );
        }
        if cx.taint == Taint::Tainted && consequential {
            return Decision::needs_review(
                "tainted-consequential",
                format!(
                    "`{}` is consequential and the scope holds untrusted content; a review must approve it",
                    spec.name
                ),
            );
        }
        Decision::allow(
            "default",
            format!(
                "`{}` is allowed in a {} scope",
                spec.name,
                taint_name(cx.taint)
            ),
        )
    }
}

fn taint_name(taint: Taint) -> &'static str {
    match taint {
        Taint::Clean => "clean",
        Taint::Tainted => "tainted",
        Taint::Review => "review",
    }
}

/// A developer rule: in a tainted scope, allow `tool` when its string argument
/// `argument` appears verbatim in a trusted block of the scope's context (say, send an
/// email only to an address the developer's own data names). Otherwise it does not
/// decide, and the defaults apply.
#[derive(Debug, Clone)]
pub struct ArgumentFromTrustedBlock {
    tool: String,
    argument: String,
    name: String,
}

impl ArgumentFromTrustedBlock {
    /// Allows `tool` when its `argument` comes from a trusted block.
    pub fn new(tool: impl Into<String>, argument: impl Into<String>) -> Self {
        let (tool, argument) = (tool.into(), argument.into());
        let name = format!("{tool}.{argument}-from-trusted-block");
        ArgumentFromTrustedBlock {
            tool,
            argument,
            name,
        }
    }
}

impl Rule for ArgumentFromTrustedBlock {
    fn name(&self) -> &str {
        &self.name
    }

    fn evaluate(&self, cx: &GateContext<'_>) -> Option<Decision> {
        if cx.call.tool() != self.tool || cx.taint != Taint::Tainted {
            return None;
        }
        let value = cx.call.args().get(&self.argument)?.as_str()?;
        if value.is_empty() {
            return None;
        }
        let source = cx
            .blocks
            .iter()
            .find(|block| block.trust() == Trust::Trusted && block.text().contains(value))?;
        Some(Decision::allow(
            self.name.clone(),
            format!(
                "`{}` comes from trusted block {}",
                self.argument,
                source.id()
            ),
        ))
    }
}
