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

use std::collections::HashSet;
use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use memchr::memmem;
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
    known: HashSet<String>,
    /// Built on the first search after nonces arrive, not on every arrival: a scope
    /// gains a nonce per block, and rebuilding each time would cost the square of them.
    matcher: OnceLock<Option<AhoCorasick>>,
    /// The length of the shortest nonce, when every nonce is made of id characters (as
    /// every nonce the renderer makes is): a nonce can then only occur inside a run of
    /// id characters at least that long, and the search looks only there.
    shortest_id_run: Option<usize>,
}

impl NonceIndex {
    /// Adds nonces; the matcher is rebuilt at the next search, and only if something new
    /// arrived.
    pub fn extend<'a>(&mut self, nonces: impl IntoIterator<Item = &'a String>) {
        let before = self.nonces.len();
        for nonce in nonces {
            if self.known.insert(nonce.clone()) {
                self.nonces.push(nonce.clone());
            }
        }
        if self.nonces.len() != before {
            self.matcher = OnceLock::new();
            self.shortest_id_run = self
                .nonces
                .iter()
                .all(|nonce| nonce.bytes().all(is_id_byte))
                .then(|| self.nonces.iter().map(String::len).min())
                .flatten()
                .filter(|&shortest| shortest > 0);
        }
    }

    fn matcher(&self) -> Option<&AhoCorasick> {
        self.matcher
            .get_or_init(|| {
                // Case-insensitive: a nonce that comes back upper-cased has still leaked.
                (!self.nonces.is_empty())
                    .then(|| {
                        AhoCorasickBuilder::new()
                            .ascii_case_insensitive(true)
                            .match_kind(MatchKind::LeftmostFirst)
                            .build(&self.nonces)
                            .ok()
                    })
                    .flatten()
            })
            .as_ref()
    }

    /// The first live nonce found in the arguments' keys or string values, if any.
    pub fn find_in_args(&self, args: &Map<String, Value>) -> Option<&str> {
        if self.nonces.is_empty() {
            return None;
        }
        let matcher = self.matcher();
        args.iter().find_map(|(key, value)| {
            self.find_in_str(matcher, key)
                .or_else(|| self.find_in_value(matcher, value))
        })
    }

    fn find_in_value(&self, matcher: Option<&AhoCorasick>, value: &Value) -> Option<&str> {
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

    fn find_in_str(&self, matcher: Option<&AhoCorasick>, text: &str) -> Option<&str> {
        let Some(matcher) = matcher else {
            // No automaton could be built: search the slow way rather than not at all.
            let lower = text.to_ascii_lowercase();
            return self
                .nonces
                .iter()
                .find(|nonce| lower.contains(&nonce.to_ascii_lowercase()))
                .map(String::as_str);
        };
        let found = match self.shortest_id_run {
            Some(shortest) => find_in_id_runs(text.as_bytes(), shortest, |run| matcher.find(run)),
            None => matcher.find(text),
        };
        found
            .and_then(|found| self.nonces.get(found.pattern().as_usize()))
            .map(String::as_str)
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

/// Whether `byte` is an id character (`[A-Za-z0-9_-]`, see [`crate::id::is_id_char`]).
fn is_id_byte(byte: u8) -> bool {
    crate::id::is_id_char(char::from(byte))
}

/// Calls `f` on each maximal run of id characters of `text` at least `shortest` long,
/// in order, until it returns `Some`.
///
/// Any `shortest` consecutive bytes hold exactly one offset `k * shortest + shortest - 1`,
/// so probing only those offsets finds every such run; in prose, where runs are short
/// words, that reads about one byte in `shortest`.
fn find_in_id_runs<'t, R>(
    text: &'t [u8],
    shortest: usize,
    mut f: impl FnMut(&'t [u8]) -> Option<R>,
) -> Option<R> {
    let mut probe = shortest.checked_sub(1)?;
    while let Some(&byte) = text.get(probe) {
        if !is_id_byte(byte) {
            probe += shortest;
            continue;
        }
        let start = text[..probe]
            .iter()
            .rposition(|&b| !is_id_byte(b))
            .map_or(0, |at| at + 1);
        let end = text[probe..]
            .iter()
            .position(|&b| !is_id_byte(b))
            .map_or(text.len(), |len| probe + len);
        if end - start >= shortest
            && let Some(found) = f(&text[start..end])
        {
            return Some(found);
        }
        // The next run starts after `end`; its probes lie beyond it.
        probe += (end - probe) / shortest * shortest + shortest;
    }
    None
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
        let value = cx.call.args().get(&self.argument)?.as_str()?;
        if value.is_empty() {
            return None;
        }
        let value_finder = memmem::Finder::new(value);
        let source = cx.blocks.iter().find(|block| {
            block.trust() == Trust::Trusted && holds_token(block.text(), value, &value_finder)
        })?;
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
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn index(nonces: &[&str]) -> NonceIndex {
        let nonces: Vec<String> = nonces.iter().map(|n| (*n).to_owned()).collect();
        let mut index = NonceIndex::default();
        index.extend(&nonces);
        index
    }

    fn found(index: &NonceIndex, text: &str) -> Option<String> {
        index
            .find_in_args(json!({ "text": text }).as_object()?)
            .map(str::to_owned)
    }

    #[test]
    fn finds_nonces_wherever_they_sit_in_a_run() {
        let nonce = "0f3a9c1e5b7d2f4a6c8e0b1d3f5a7c9e";
        let index = index(&[nonce]);
        assert_eq!(index.shortest_id_run, Some(32));
        for text in [
            nonce.to_owned(),
            format!("see {nonce}."),
            format!("x{nonce}y"),
            format!("a-b_c{}", nonce.to_uppercase()),
            format!("{}{nonce}", "z".repeat(40)),
            format!("é{nonce}é"),
            format!("{} {nonce}", "word ".repeat(30)),
        ] {
            assert_eq!(found(&index, &text).as_deref(), Some(nonce), "{text}");
        }
        for text in [
            String::new(),
            nonce[..31].to_owned(),
            format!("{} {}", &nonce[..16], &nonce[16..]),
            format!("{}é{}", &nonce[..16], &nonce[16..]),
        ] {
            assert_eq!(found(&index, &text), None, "{text}");
        }
    }

    /// A nonce alone in its run, or inside a longer one, at every offset among fillers
    /// that are not id characters.
    #[test]
    fn finds_a_run_at_every_offset() {
        for len in 1..=5 {
            let nonce = "7a1f9".get(..len).unwrap();
            let index = index(&[nonce]);
            for pad in 0..3 {
                let run = format!("{}{nonce}{}", "z".repeat(pad), "Z".repeat(2 - pad));
                for before in 0..12 {
                    for after in 0..3 {
                        let text = format!("{}{run}{}", ". é".repeat(before), ".".repeat(after));
                        assert_eq!(found(&index, &text).as_deref(), Some(nonce), "{text:?}");
                        let text = format!("{}{nonce}{}", "!".repeat(before), "!".repeat(after));
                        assert_eq!(found(&index, &text).as_deref(), Some(nonce), "{text:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn nonces_that_are_not_ids_are_searched_everywhere() {
        let index = index(&["a b", "m-1"]);
        assert_eq!(index.shortest_id_run, None);
        assert_eq!(found(&index, "xa by").as_deref(), Some("a b"));
        assert_eq!(found(&index, "item-12").as_deref(), Some("m-1"));
    }

    proptest! {
        /// The search through id runs finds exactly what a search of the whole text
        /// finds: texts made of nonces (of mixed lengths, some upper-cased) and fillers
        /// that join or split id runs.
        #[test]
        fn id_runs_find_what_the_whole_text_holds(
            nonces in proptest::collection::vec("[ab0_-]{1,6}", 1..4),
            pieces in proptest::collection::vec((0usize..8, "[ab0_ -.éAB]{0,3}"), 0..12),
        ) {
            let text: String = pieces
                .iter()
                .map(|(pick, filler)| match pick {
                    0..=2 => nonces[pick % nonces.len()].clone(),
                    3 => nonces[0].to_uppercase(),
                    _ => filler.clone(),
                })
                .collect();
            let nonces: Vec<String> = nonces;
            let mut index = NonceIndex::default();
            index.extend(&nonces);
            let matcher = index.matcher().unwrap().clone();
            let whole = matcher
                .find(&text)
                .map(|found| index.nonces[found.pattern().as_usize()].clone());
            prop_assert!(index.shortest_id_run.is_some());
            prop_assert_eq!(found(&index, &text), whole);
        }
    }
}
