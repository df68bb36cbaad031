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
//! rules may refine (see [`ArgumentFromTrustedBlock`] and [`ArgumentPolicy`]).

mod arguments;
mod leak;

use std::borrow::Cow;

use memchr::memmem;
use serde::{Deserialize, Serialize};

use crate::block::{Block, Origin};
use crate::call::ToolCall;
use crate::canonical::canonical_json;
use crate::envelope::neutralise::fold;
use crate::id::Id;
use crate::record::Sender;
use crate::registry::Registry;
use crate::tool::{DeclaredTrust, Effects, ToolSpec, Trust};

pub use arguments::{ArgumentPolicy, ArgumentPolicyError, Constraint};
pub use leak::NonceIndex;

/// A scope's taint level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Taint {
    /// No untrusted block has entered the scope.
    Clean,
    /// An untrusted block has entered the scope.
    Tainted,
}

/// What a scope is for (a role, not a taint level: a review scope reads untrusted
/// material like any other and is tainted by it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScopeRole {
    /// Agent work: it reads, calls tools and answers.
    Agent,
    /// It exists only to judge another scope: it may read, never act.
    Review,
}

/// The names of the built-in rules, as decisions, events and the audit log carry them.
/// Stable: hosts match on them.
pub mod rule {
    /// The model named a tool the registry does not hold.
    pub const UNKNOWN_TOOL: &str = "unknown-tool";
    /// An argument carries a live envelope nonce.
    pub const NONCE_LEAK: &str = "nonce-leak";
    /// A review scope asked for a consequential tool.
    pub const REVIEW_SCOPE: &str = "review-scope";
    /// Strict isolation: a clean root scope asked for an untrusted-output tool.
    pub const STRICT_ISOLATION: &str = "strict-isolation";
    /// A tainted scope asked for a consequential tool.
    pub const TAINTED_CONSEQUENTIAL: &str = "tainted-consequential";
    /// Nothing objected.
    pub const DEFAULT: &str = "default";
    /// A review decided a held call.
    pub const REVIEW: &str = "review";
    /// The loop breaker: the same call already ran too often.
    pub const REPEATED: &str = "repeated-call";
    /// Observe mode let a call through that the gate would have held or denied.
    pub const OBSERVE: &str = "observe";
    /// What an argument policy's name ends with: `<tool>.argument-policy`
    /// ([`ArgumentPolicy`](super::ArgumentPolicy)).
    pub const ARGUMENT_POLICY: &str = "argument-policy";
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
    /// What the scope is for.
    pub role: ScopeRole,
    /// Whether the scope is a child scope (where strict isolation sends untrusted work).
    pub is_child: bool,
    /// The blocks of the scope's context.
    pub blocks: &'a [Block],
    /// How many times a call with this checksum already ran in the scope.
    pub repeats: u32,
}

impl<'a> GateContext<'a> {
    /// The called tool's declared metadata; `None` for a tool the registry does not hold.
    pub fn spec(&self) -> Option<&'a ToolSpec> {
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

/// The gate's policy: the invariant rules, the developer's rules, and the defaults.
#[derive(Default)]
pub struct Policy {
    strict_isolation: bool,
    max_repeats: Option<u32>,
    observe: bool,
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

    /// The loop breaker: a call whose checksum already ran `n` times in the scope is
    /// denied (identical calls have identical checksums, whatever their key order).
    pub fn max_repeats(mut self, n: u32) -> Self {
        self.max_repeats = Some(n);
        self
    }

    /// Observe mode, for adopting the gate before enforcing it: every decision is made
    /// and recorded as what the gate *would* do, but the call runs anyway, except a call
    /// to an unknown tool, which still fails closed.
    pub fn observe(mut self, on: bool) -> Self {
        self.observe = on;
        self
    }

    /// Whether the policy only observes.
    pub fn observes(&self) -> bool {
        self.observe
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
            Err(unknown) => return Decision::deny(rule::UNKNOWN_TOOL, unknown.to_string()),
        };
        // The reason never quotes the nonce, not even in part: it is shown to the model.
        if nonces.find_in_args(cx.call.args()).is_some() {
            return Decision::deny(
                rule::NONCE_LEAK,
                "an argument contains a live envelope nonce; envelope nonces never leave the prompt",
            );
        }
        if let Some(max) = self.max_repeats
            && cx.repeats >= max
        {
            return Decision::deny(
                rule::REPEATED,
                format!(
                    "this exact call to `{}` already ran {} time(s) in this scope (limit {max}); change the arguments or stop",
                    spec.name, cx.repeats
                ),
            );
        }
        let consequential = spec.effects == Effects::Consequential;
        if cx.role == ScopeRole::Review && consequential {
            return Decision::deny(
                rule::REVIEW_SCOPE,
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
            && spec.trust == DeclaredTrust::Untrusted
        {
            return Decision::deny(
                rule::STRICT_ISOLATION,
                format!(
                    "`{}` returns untrusted output; run it in a child scope",
                    spec.name
                ),
            );
        }
        if cx.taint == Taint::Tainted && consequential {
            return Decision::needs_review(
                rule::TAINTED_CONSEQUENTIAL,
                format!(
                    "`{}` is consequential and the scope holds untrusted content; a review must approve it",
                    spec.name
                ),
            );
        }
        Decision::allow(
            rule::DEFAULT,
            format!(
                "`{}` is allowed in a {} {} scope",
                spec.name,
                taint_name(cx.taint),
                role_name(cx.role),
            ),
        )
    }
}

fn taint_name(taint: Taint) -> &'static str {
    match taint {
        Taint::Clean => "clean",
        Taint::Tainted => "tainted",
    }
}

fn role_name(role: ScopeRole) -> &'static str {
    match role {
        ScopeRole::Agent => "agent",
        ScopeRole::Review => "review",
    }
}

/// A developer rule: in a tainted scope, allow `tool` when its argument `argument` (a
/// string, a number or a boolean, read as canonical text) appears, as a whole token, in
/// a block that vouches for it (say, send an email only to an address the developer's
/// own data names). Otherwise it does not decide, and the defaults apply.
///
/// A block vouches for a value when it is the developer's instruction, or a trusted
/// tool's output that does not merely echo that tool's own arguments (a lookup that
/// answers "no record for eve@evil.example" vouches for nothing). An echo is judged as
/// a model reads it: the value and every scalar argument of that tool's call are compared
/// after the neutraliser's folding (NFKC, case, lookalikes, invisible characters), so a
/// lookup that lowercases `EVE@EVIL.EXAMPLE`, or prints back the account number it was
/// given, vouches for nothing either. The value itself must appear in the block as it
/// is: folding never widens what vouches (`paypa1.example` is not `paypal.example`).
/// The principal's
/// messages vouch only when the developer opts in with
/// [`principal_messages`](Self::principal_messages): "never email eve@evil.example"
/// names an address too.
#[derive(Debug, Clone)]
pub struct ArgumentFromTrustedBlock {
    tool: String,
    argument: String,
    name: String,
    principal_messages: bool,
}

impl ArgumentFromTrustedBlock {
    /// Allows `tool` when its `argument` comes from a block that vouches for it.
    pub fn new(tool: impl Into<String>, argument: impl Into<String>) -> Self {
        let (tool, argument) = (tool.into(), argument.into());
        let name = format!("{tool}.{argument}-from-trusted-block");
        ArgumentFromTrustedBlock {
            tool,
            argument,
            name,
            principal_messages: false,
        }
    }

    /// Lets the principal's own messages vouch too (off by default).
    pub fn principal_messages(mut self, on: bool) -> Self {
        self.principal_messages = on;
        self
    }

    /// Whether `block` may vouch for `value`.
    fn vouches(&self, block: &Block, value: &Needle<'_>) -> bool {
        let origin_vouches = match block.origin() {
            // The developer's instruction.
            None => true,
            Some(Origin::ToolOutput {
                argument_values, ..
            }) => {
                block.trust() == Trust::Trusted
                    && !argument_values.iter().any(|argument| {
                        holds_token(&fold(argument), &value.folded, &value.folded_finder)
                    })
            }
            Some(Origin::Message(Sender::Principal)) => self.principal_messages,
            Some(_) => false,
        };
        origin_vouches && holds_token(block.text(), value.text, &value.finder)
    }
}

/// The value a rule looks for: as canonical text, and as the neutraliser reads it.
struct Needle<'a> {
    text: &'a str,
    finder: memmem::Finder<'a>,
    folded: String,
    folded_finder: memmem::Finder<'static>,
}

impl<'a> Needle<'a> {
    fn new(text: &'a str) -> Self {
        let folded = fold(text);
        Needle {
            text,
            finder: memmem::Finder::new(text),
            folded_finder: memmem::Finder::new(&folded).into_owned(),
            folded,
        }
    }
}

/// An argument as canonical text: a string as it is, a number or a boolean as its
/// canonical JSON; anything else (null, an array, an object) is none.
fn scalar_text(value: &serde_json::Value) -> Option<Cow<'_, str>> {
    match value {
        serde_json::Value::String(text) => Some(Cow::Borrowed(text)),
        serde_json::Value::Number(_) | serde_json::Value::Bool(_) => {
            Some(Cow::Owned(canonical_json(value)))
        }
        _ => None,
    }
}

/// Whether `text` holds `value` as a whole token: not as part of a longer address, name
/// or number (`ce@corp.example` is not in `alice@corp.example`).
fn holds_token(text: &str, value: &str, finder: &memmem::Finder<'_>) -> bool {
    let part_of_token =
        |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || "._%+-@/:#~=&?".contains(c));
    finder.find_iter(text.as_bytes()).any(|at| {
        let before = text[..at].chars().next_back();
        let mut after = text[at + value.len()..].chars();
        // Sentence punctuation right after the value ends it ("mail alice@corp.example.").
        let continues = match after.next() {
            Some(c) if ".:?!,;".contains(c) => part_of_token(after.next()) && c != ',' && c != ';',
            c => part_of_token(c),
        };
        !part_of_token(before) && !continues
    })
}

impl Rule for ArgumentFromTrustedBlock {
    fn name(&self) -> &str {
        &self.name
    }

    fn evaluate(&self, cx: &GateContext<'_>) -> Option<Decision> {
        if cx.call.tool() != self.tool || cx.taint != Taint::Tainted {
            return None;
        }
        let value = scalar_text(cx.call.args().get(&self.argument)?)?;
        if value.is_empty() {
            return None;
        }
        let needle = Needle::new(&value);
        let source = cx
            .blocks
            .iter()
            .find(|block| self.vouches(block, &needle))?;
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

#[cfg(test)]
mod tests {
    use super::rule;

    /// Hosts match on the rule names and audit logs keep them: their text never changes.
    #[test]
    fn rule_names_are_stable() {
        let names = [
            (rule::UNKNOWN_TOOL, "unknown-tool"),
            (rule::NONCE_LEAK, "nonce-leak"),
            (rule::REVIEW_SCOPE, "review-scope"),
            (rule::STRICT_ISOLATION, "strict-isolation"),
            (rule::TAINTED_CONSEQUENTIAL, "tainted-consequential"),
            (rule::DEFAULT, "default"),
            (rule::REVIEW, "review"),
            (rule::REPEATED, "repeated-call"),
            (rule::OBSERVE, "observe"),
            (rule::ARGUMENT_POLICY, "argument-policy"),
        ];
        for (constant, text) in names {
            assert_eq!(constant, text);
        }
    }
}
