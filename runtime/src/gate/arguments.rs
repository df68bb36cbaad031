//! Argument policies: per tool, constraints on the call's arguments that decide without a
//! person. `deny` when one deny constraint meets the argument; held for review when a
//! constrained argument carries a value the policy cannot judge; `allow` when every allow
//! constraint holds and the call carries no argument they leave unconstrained, even in a
//! tainted scope; otherwise the next rule, and the defaults, decide.
//!
//! A deny reads widely, an allow exactly (see [`ArgumentPolicy`]): spelling a denied value
//! another way, or wrapping it in an array, does not get it past a deny; anything but the
//! exact value an allow names is not allowed.
//!
//! An allow never lets a tainted scope write free text to a tool: its patterns must be
//! anchored at both ends and bound the length (the check a closed vocabulary passes,
//! [`tooltrust_internals::pattern`]), and an argument no allow constraint names keeps the
//! call from being allowed.

mod reading;
#[cfg(test)]
mod tests;

use serde_json::Value;
use tooltrust_internals::pattern::{CLOSED_PATTERN_RULE, closed_pattern_len};

use self::reading::{Scalar, find_scalar, names};
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

/// One constraint on one argument's value. How it reads the value depends on whether the
/// policy allows or denies with it: see [`ArgumentPolicy`].
#[derive(Debug, Clone)]
pub struct Constraint(Kind);

#[derive(Debug, Clone)]
enum Kind {
    OneOf(Set),
    Pattern {
        text: String,
        /// Matched against the exact string, for an allow.
        regex: regex_lite::Regex,
        /// The same pattern ignoring ASCII case, matched against folded text, for a deny.
        folded: regex_lite::Regex,
    },
    /// Inclusive bounds.
    Range {
        min: Option<f64>,
        max: Option<f64>,
    },
}

/// A set of values, kept as each reading compares them.
#[derive(Debug, Clone)]
struct Set {
    /// Every value's canonical JSON, for an allow.
    canonical: Vec<String>,
    /// The strings' folded and address forms, for a deny.
    texts: Vec<String>,
    numbers: Vec<f64>,
    booleans: Vec<bool>,
}

impl Constraint {
    /// The value is one of `values` (strings, numbers, booleans). An allow compares
    /// canonical JSON (`"7"` is not `7`, `1.0` is `1`, `"Ann"` is not `"ann"`); a deny
    /// compares what every scalar inside the value reads as (see [`ArgumentPolicy`]).
    pub fn one_of(values: impl IntoIterator<Item = Value>) -> Result<Self, ArgumentPolicyError> {
        let mut set = Set {
            canonical: Vec::new(),
            texts: Vec::new(),
            numbers: Vec::new(),
            booleans: Vec::new(),
        };
        for value in values {
            match &value {
                Value::String(text) => set.texts.extend(names(text)),
                Value::Number(number) => set.numbers.extend(number.as_f64()),
                Value::Bool(value) => set.booleans.push(*value),
                other => return Err(ArgumentPolicyError::Set(canonical_json(other))),
            }
            set.canonical.push(canonical_json(&value));
        }
        if set.canonical.is_empty() {
            return Err(ArgumentPolicyError::Set("an empty set".to_owned()));
        }
        Ok(Constraint(Kind::OneOf(set)))
    }

    /// The value is a string `pattern` matches (anywhere, unless it is anchored; an
    /// allow takes only patterns anchored at both ends that bound the length). A deny
    /// matches it ignoring ASCII case against folded text, so its other letters are best
    /// written folded (lowercase, `ss` for `ß`).
    pub fn pattern(pattern: &str) -> Result<Self, ArgumentPolicyError> {
        let refused = |error: regex_lite::Error| ArgumentPolicyError::Pattern {
            pattern: pattern.to_owned(),
            message: error.to_string(),
        };
        let regex = regex_lite::Regex::new(pattern).map_err(refused)?;
        let folded = regex_lite::RegexBuilder::new(pattern)
            .case_insensitive(true)
            .build()
            .map_err(refused)?;
        Ok(Constraint(Kind::Pattern {
            text: pattern.to_owned(),
            regex,
            folded,
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

    /// Whether `value` meets the constraint as an allow reads it: exactly, and only a
    /// value of the constraint's own type (a string for a pattern, a number for a range,
    /// one of the set's types for a set); an array, an object or another type never does.
    pub fn holds(&self, value: &Value) -> bool {
        match (&self.0, value) {
            (Kind::OneOf(set), value) => {
                let text = canonical_json(value);
                set.canonical.contains(&text)
            }
            (Kind::Pattern { regex, .. }, Value::String(text)) => regex.is_match(text),
            (Kind::Range { min, max }, Value::Number(number)) => number
                .as_f64()
                .is_some_and(|number| within(*min, *max, number)),
            _ => false,
        }
    }

    /// Whether the constraint takes `value`'s type: an allow holds a value of another
    /// type for review rather than leave it to the defaults.
    fn expects(&self, value: &Value) -> bool {
        match (&self.0, value) {
            (Kind::Pattern { .. }, Value::String(_)) | (Kind::Range { .. }, Value::Number(_)) => {
                true
            }
            (Kind::OneOf(set), Value::String(_)) => !set.texts.is_empty(),
            (Kind::OneOf(set), Value::Number(_)) => !set.numbers.is_empty(),
            (Kind::OneOf(set), Value::Bool(_)) => !set.booleans.is_empty(),
            _ => false,
        }
    }

    /// What a deny finds in `value`: a scalar inside it that meets the constraint, else
    /// one it cannot read, else nothing.
    fn finds(&self, value: &Value) -> Finding {
        let mut unreadable = false;
        let met = find_scalar(value, |scalar| match self.denies(scalar) {
            Some(true) => Some(()),
            Some(false) => None,
            None => {
                unreadable = true;
                None
            }
        });
        match (met, unreadable) {
            (Some(()), _) => Finding::Met,
            (None, true) => Finding::Unreadable,
            (None, false) => Finding::Clear,
        }
    }

    /// Whether one scalar, read as a deny reads it, meets the constraint; `None` when the
    /// constraint cannot read it (text that is no number, for a range).
    fn denies(&self, scalar: Scalar<'_>) -> Option<bool> {
        match &self.0 {
            Kind::Pattern { folded, .. } => Some(scalar.any_text(|text| folded.is_match(text))),
            Kind::Range { min, max } => scalar.number().map(|number| within(*min, *max, number)),
            Kind::OneOf(set) => {
                let mut read = false;
                if !set.texts.is_empty() {
                    read = true;
                    if scalar.any_text(|text| set.texts.iter().any(|name| name == text)) {
                        return Some(true);
                    }
                }
                if !set.numbers.is_empty()
                    && let Some(number) = scalar.number()
                {
                    read = true;
                    if set.numbers.contains(&number) {
                        return Some(true);
                    }
                }
                if !set.booleans.is_empty()
                    && let Some(value) = scalar.boolean()
                {
                    read = true;
                    if set.booleans.contains(&value) {
                        return Some(true);
                    }
                }
                read.then_some(false)
            }
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

    /// The types the constraint reads, for a reason.
    fn expected(&self) -> String {
        match &self.0 {
            Kind::Pattern { .. } => "a string".to_owned(),
            Kind::Range { .. } => "a number".to_owned(),
            Kind::OneOf(set) => [
                (!set.texts.is_empty(), "a string"),
                (!set.numbers.is_empty(), "a number"),
                (!set.booleans.is_empty(), "a boolean"),
            ]
            .into_iter()
            .filter_map(|(has, name)| has.then_some(name))
            .collect::<Vec<_>>()
            .join(" or "),
        }
    }
}

fn within(min: Option<f64>, max: Option<f64>, number: f64) -> bool {
    min.is_none_or(|min| number >= min) && max.is_none_or(|max| number <= max)
}

/// What a deny constraint finds in an argument's value.
enum Finding {
    /// A scalar inside it meets the constraint.
    Met,
    /// None does, and some scalar is one the constraint cannot read.
    Unreadable,
    /// None does.
    Clear,
}

/// A value's JSON type, for a reason (never the value).
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A named gate rule: the argument policy of one tool. Named `<tool>.argument-policy`
/// ([`rule::ARGUMENT_POLICY`]), the name every decision it makes carries.
///
/// It decides in this order, and otherwise leaves the call to the next rule:
/// 1. **deny** when a deny constraint meets its argument;
/// 2. **hold for review** when a constrained argument carries a value the policy cannot
///    judge: a deny range (or a set of numbers or booleans) meets text that reads as none,
///    or an allow constraint meets a value of another type than its own (an array or an
///    object where a string pattern was given, `"2"` where a range was). Such a call is
///    never allowed by the defaults, not even in a clean scope;
/// 3. **allow** when every allow constraint holds and the call has no argument they leave
///    out.
///
/// **A deny reads widely.** It applies to every scalar inside the argument, in arrays and
/// objects at any depth, object keys included (`null` names nothing). A string is read
/// folded: default-ignorable characters dropped (zero-width and bidi controls, soft
/// hyphens), NFKC-normalised, case-folded and trimmed of whitespace and control
/// characters, so `EVE@EVIL.EXAMPLE`, `ｅｖｅ＠ｅｖｉｌ．ｅｘａｍｐｌｅ` and
/// `"eve@evil.example\n"` all read `eve@evil.example`. It is also read as an address: `。`
/// as `.`, the trailing dot of a host name dropped (`eve@evil.example.`), and each
/// address-like piece of a list or a display name on its own (`Eve <eve@evil.example>,
/// ann@example.com`). A number reads as its JSON text too, and text that folds to a
/// decimal number (`"５"`, `"1e3"`, `"1_000"`) reads as that number, for a range or a
/// set. A pattern is matched ignoring ASCII case; a set's strings are compared folded.
///
/// **An allow reads exactly**: the argument's own value, of the constraint's own type, is
/// compared as it is (a set by canonical JSON), so `"ann@example.com "` or
/// `["ann@example.com"]` is not `"ann@example.com"`.
///
/// A deny list stays a backstop: a lookalike in another script (`еvil.example` with a
/// Cyrillic `е`) is another name, which only an allow keeps out.
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

    /// Adds a deny constraint on `argument`: a call in whose `argument` it meets any
    /// value, read as [the policy](Self) describes, is denied.
    pub fn deny(mut self, argument: impl Into<String>, constraint: Constraint) -> Self {
        self.deny.push((argument.into(), constraint));
        self
    }

    /// What the deny constraints make of `args`: the first that meets its argument, else
    /// why the first that cannot read its argument holds the call.
    fn deny_or_hold(&self, args: &serde_json::Map<String, Value>) -> Option<Decision> {
        let mut held = None;
        for (argument, constraint) in &self.deny {
            let Some(value) = args.get(argument.as_str()) else {
                continue;
            };
            match constraint.finds(value) {
                Finding::Met => {
                    return Some(Decision::deny(
                        self.name.clone(),
                        format!(
                            "`{argument}` is {} among the values `{}`'s argument policy denies",
                            constraint.describe(),
                            self.tool
                        ),
                    ));
                }
                Finding::Unreadable if held.is_none() => {
                    held = Some(Decision::needs_review(
                        self.name.clone(),
                        format!(
                            "`{argument}` holds a value `{}`'s argument policy cannot read as {}; a review must approve it",
                            self.tool,
                            constraint.expected()
                        ),
                    ));
                }
                Finding::Unreadable | Finding::Clear => {}
            }
        }
        held
    }

    /// Why a call must be reviewed: the first allow constraint whose argument has a value
    /// of another type than its own.
    fn unexpected(&self, args: &serde_json::Map<String, Value>) -> Option<Decision> {
        self.allow.iter().find_map(|(argument, constraint)| {
            let value = args.get(argument.as_str())?;
            (!constraint.expects(value)).then(|| {
                Decision::needs_review(
                    self.name.clone(),
                    format!(
                        "`{argument}` is {} where `{}`'s argument policy expects {}; a review must approve it",
                        type_name(value),
                        self.tool,
                        constraint.expected()
                    ),
                )
            })
        })
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
        // The reasons name the argument, the constraint and types, never the value: the
        // model reads them. A deny wins over a hold, a hold over an allow.
        if let Some(decision) = self.deny_or_hold(args).or_else(|| self.unexpected(args)) {
            return Some(decision);
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
