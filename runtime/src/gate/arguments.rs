//! Argument policies: per tool, constraints on the call's arguments that decide without a
//! person. `deny` when one deny constraint holds; `allow` when every allow constraint
//! holds and the call carries no argument they leave unconstrained, even in a tainted
//! scope; otherwise the next rule, and the defaults, decide.
//!
//! An allow never lets a tainted scope write free text to a tool: its patterns must be
//! anchored at both ends and bound the length (the check a closed vocabulary passes,
//! [`tooltrust_internals::pattern`]), and an argument no allow constraint names keeps the
//! call from being allowed.

use serde_json::Value;
use tooltrust_internals::pattern::{CLOSED_PATTERN_RULE, closed_pattern_len};

use super::{Decision, GateContext, Rule, rule};
use crate::canonical::canonical_json;

/// Why a constraint or a policy was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ArgumentPolicyError {
    /// The pattern does not compile.
    #[error("pattern {pattern:?} does not compile: {message}")]
    Pattern {
        /// The pattern.
        pattern: String,
        /// The regex engine's message.
        message: String,
    },
    /// An allow's pattern is not anchored at both ends, or does not bound the length: it
    /// would let a tainted scope write free text.
    #[error(
        "pattern {pattern:?} of argument `{argument}` may not allow: {why}; {CLOSED_PATTERN_RULE}"
    )]
    OpenPattern {
        /// The argument.
        argument: String,
        /// The pattern.
        pattern: String,
        /// What is open about it.
        why: String,
    },
    /// A set holds a value that is not a string, a number or a boolean, or is empty.
    #[error("a set of values holds only strings, numbers and booleans, at least one: {0}")]
    Set(String),
    /// A range without bounds, with a bound that is not a finite number, or whose minimum
    /// is above its maximum.
    #[error("a range needs a finite `min` or `max`, `min` at most `max`: {0}")]
    Range(String),
}

/// One constraint on one argument's value.
#[derive(Debug, Clone)]
pub struct Constraint(Kind);

#[derive(Debug, Clone)]
enum Kind {
    /// The value's canonical JSON is one of these.
    OneOf(Vec<String>),
    /// The value is a string the pattern matches.
    Pattern {
        text: String,
        regex: regex_lite::Regex,
    },
    /// The value is a number within the bounds (inclusive).
    Range { min: Option<f64>, max: Option<f64> },
}

impl Constraint {
    /// The value is one of `values` (strings, numbers, booleans), compared as canonical
    /// JSON: `"7"` is not `7`, `1.0` is `1`.
    pub fn one_of(values: impl IntoIterator<Item = Value>) -> Result<Self, ArgumentPolicyError> {
        let mut set = Vec::new();
        for value in values {
            match value {
                Value::String(_) | Value::Number(_) | Value::Bool(_) => {
                    set.push(canonical_json(&value));
                }
                other => return Err(ArgumentPolicyError::Set(canonical_json(&other))),
            }
        }
        if set.is_empty() {
            return Err(ArgumentPolicyError::Set("an empty set".to_owned()));
        }
        Ok(Constraint(Kind::OneOf(set)))
    }

    /// The value is a string `pattern` matches (anywhere, unless it is anchored; an
    /// allow takes only patterns anchored at both ends that bound the length).
    pub fn pattern(pattern: &str) -> Result<Self, ArgumentPolicyError> {
        let regex =
            regex_lite::Regex::new(pattern).map_err(|error| ArgumentPolicyError::Pattern {
                pattern: pattern.to_owned(),
                message: error.to_string(),
            })?;
        Ok(Constraint(Kind::Pattern {
            text: pattern.to_owned(),
            regex,
        }))
    }

    /// The value is a number at least `min` and at most `max` (either may be absent,
    /// not both).
    pub fn range(min: Option<f64>, max: Option<f64>) -> Result<Self, ArgumentPolicyError> {
        let shown = format!("min {min:?}, max {max:?}");
        let finite = |bound: Option<f64>| bound.is_none_or(f64::is_finite);
        let ordered = match (min, max) {
            (Some(min), Some(max)) => min <= max,
            (None, None) => false,
            _ => true,
        };
        if !(finite(min) && finite(max) && ordered) {
            return Err(ArgumentPolicyError::Range(shown));
        }
        Ok(Constraint(Kind::Range { min, max }))
    }

    /// Whether `value` meets the constraint; a value of another type never does.
    pub fn holds(&self, value: &Value) -> bool {
        match (&self.0, value) {
            (Kind::OneOf(set), value) => {
                let text = canonical_json(value);
                set.contains(&text)
            }
            (Kind::Pattern { regex, .. }, Value::String(text)) => regex.is_match(text),
            (Kind::Range { min, max }, Value::Number(number)) => {
                number.as_f64().is_some_and(|number| {
                    min.is_none_or(|min| number >= min) && max.is_none_or(|max| number <= max)
                })
            }
            _ => false,
        }
    }

    /// How the constraint reads in a decision's reason (never the call's value).
    fn describe(&self) -> &'static str {
        match self.0 {
            Kind::OneOf(_) => "in its set",
            Kind::Pattern { .. } => "matching its pattern",
            Kind::Range { .. } => "within its bounds",
        }
    }
}

/// A named gate rule: the argument policy of one tool. Named `<tool>.argument-policy`
/// ([`rule::ARGUMENT_POLICY`]), the name every decision it makes carries.
///
/// ```
/// use serde_json::json;
/// use tooltrust::Policy;
/// use tooltrust::gate::{ArgumentPolicy, Constraint};
///
/// # fn main() -> Result<(), tooltrust::gate::ArgumentPolicyError> {
/// let send = ArgumentPolicy::new("send_email")
///     .allow("to", Constraint::one_of([json!("ann@example.com")])?)?
///     .allow("body", Constraint::pattern("^[A-Za-z0-9 .,:]{1,200}$")?)?
///     .deny("to", Constraint::pattern(r"@evil\.example$")?);
/// let policy = Policy::new().with_rule(send);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ArgumentPolicy {
    tool: String,
    name: String,
    allow: Vec<(String, Constraint)>,
    deny: Vec<(String, Constraint)>,
}

impl ArgumentPolicy {
    /// A policy for `tool` with no constraints (it decides nothing until given some).
    pub fn new(tool: impl Into<String>) -> Self {
        let tool = tool.into();
        let name = format!("{tool}.{}", rule::ARGUMENT_POLICY);
        ArgumentPolicy {
            tool,
            name,
            allow: Vec::new(),
            deny: Vec::new(),
        }
    }

    /// The tool the policy is for.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// Adds an allow constraint on `argument`. Refuses a pattern that is not anchored at
    /// both ends or does not bound the length: a tainted scope could write free text
    /// through it.
    pub fn allow(
        mut self,
        argument: impl Into<String>,
        constraint: Constraint,
    ) -> Result<Self, ArgumentPolicyError> {
        let argument = argument.into();
        if let Kind::Pattern { text, .. } = &constraint.0
            && let Err(why) = closed_pattern_len(text)
        {
            return Err(ArgumentPolicyError::OpenPattern {
                argument,
                pattern: text.clone(),
                why: why.to_string(),
            });
        }
        self.allow.push((argument, constraint));
        Ok(self)
    }

    /// Adds a deny constraint on `argument`: a call whose `argument` meets it is denied.
    pub fn deny(mut self, argument: impl Into<String>, constraint: Constraint) -> Self {
        self.deny.push((argument.into(), constraint));
        self
    }
}

impl Rule for ArgumentPolicy {
    fn name(&self) -> &str {
        &self.name
    }

    fn evaluate(&self, cx: &GateContext<'_>) -> Option<Decision> {
        if cx.call.tool() != self.tool {
            return None;
        }
        let args = cx.call.args();
        // The reasons name the argument and the constraint, never the value: the model
        // reads them.
        if let Some((argument, constraint)) = self.deny.iter().find(|(argument, constraint)| {
            args.get(argument.as_str())
                .is_some_and(|value| constraint.holds(value))
        }) {
            return Some(Decision::deny(
                self.name.clone(),
                format!(
                    "`{argument}` is {} among the values `{}`'s argument policy denies",
                    constraint.describe(),
                    self.tool
                ),
            ));
        }
        let named = |key: &str| self.allow.iter().any(|(argument, _)| argument == key);
        let allowed = !self.allow.is_empty()
            && args.keys().all(|key| named(key))
            && self.allow.iter().all(|(argument, constraint)| {
                args.get(argument.as_str())
                    .is_some_and(|value| constraint.holds(value))
            });
        allowed.then(|| {
            let mut arguments: Vec<&str> = self
                .allow
                .iter()
                .map(|(argument, _)| argument.as_str())
                .collect();
            arguments.dedup();
            Decision::allow(
                self.name.clone(),
                format!(
                    "every argument of `{}` is within its argument policy ({})",
                    self.tool,
                    arguments.join(", ")
                ),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::gate::{NonceIndex, Policy, Ruling, ScopeRole, Taint};
    use crate::registry::Registry;
    use crate::tool::{DeclaredTrust, DynamicTool};
    use crate::{Id, ToolCall};

    fn registry() -> Registry {
        let send = DynamicTool::builder("send_email")
            .description("Sends an email.")
            .schema(json!({"type": "object"}))
            .trust(DeclaredTrust::Trusted)
            .handler(|_, _| async { Ok::<_, std::io::Error>("sent".to_owned()) })
            .build()
            .unwrap();
        Registry::builder().tool(send).build().unwrap()
    }

    fn policy() -> ArgumentPolicy {
        ArgumentPolicy::new("send_email")
            .allow(
                "to",
                Constraint::one_of([json!("ann@example.com"), json!("bob@example.com")]).unwrap(),
            )
            .unwrap()
            .allow("cc", Constraint::range(Some(0.0), Some(3.0)).unwrap())
            .unwrap()
            .deny("to", Constraint::pattern(r"@evil\.example$").unwrap())
    }

    fn decide(args: Value) -> Decision {
        let registry = registry();
        let call = ToolCall::from_value("send_email", args).unwrap();
        let scope = Id::new("s").unwrap();
        let cx = GateContext {
            call: &call,
            registry: &registry,
            scope: &scope,
            taint: Taint::Tainted,
            role: ScopeRole::Agent,
            is_child: false,
            blocks: &[],
            repeats: 0,
        };
        Policy::new()
            .with_rule(policy())
            .decide(&cx, &NonceIndex::default())
    }

    #[test]
    fn allows_denies_or_leaves_it_to_the_defaults() {
        let name = "send_email.argument-policy";
        let allowed = decide(json!({"to": "ann@example.com", "cc": 2}));
        assert_eq!(
            (allowed.ruling, allowed.rule.as_str()),
            (Ruling::Allow, name)
        );
        let denied = decide(json!({"to": "eve@evil.example", "cc": 0}));
        assert_eq!((denied.ruling, denied.rule.as_str()), (Ruling::Deny, name));
        assert!(!denied.reason.contains("eve"), "{}", denied.reason);
        for held in [
            json!({"to": "carl@example.com", "cc": 0}),
            json!({"to": "ann@example.com", "cc": 4}),
            json!({"to": "ann@example.com", "cc": "2"}),
            json!({"to": "ann@example.com"}),
            // An argument the allow does not name: free text has no way through.
            json!({"to": "ann@example.com", "cc": 1, "body": "anything"}),
        ] {
            let decision = decide(held.clone());
            assert_eq!(decision.ruling, Ruling::NeedsReview, "{held}: {decision:?}");
            assert_eq!(decision.rule, rule::TAINTED_CONSEQUENTIAL);
        }
    }

    #[test]
    fn an_allow_takes_only_closed_patterns() {
        for open in ["kettle", "^kettle", "kettle$", "^.*$", "^a|b$", "^[a-z]+$"] {
            let refused = ArgumentPolicy::new("t").allow("a", Constraint::pattern(open).unwrap());
            assert!(
                matches!(refused, Err(ArgumentPolicyError::OpenPattern { .. })),
                "{open}"
            );
        }
        assert!(
            ArgumentPolicy::new("t")
                .allow("a", Constraint::pattern("^[a-z]{1,8}$").unwrap())
                .is_ok()
        );
        assert!(Constraint::pattern("(").is_err());
        assert!(Constraint::one_of([json!({"a": 1})]).is_err());
        assert!(Constraint::one_of([]).is_err());
        assert!(Constraint::range(None, None).is_err());
        assert!(Constraint::range(Some(2.0), Some(1.0)).is_err());
        assert!(Constraint::range(Some(f64::NAN), None).is_err());
    }
}
