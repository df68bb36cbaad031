//! The host's declarations of remote tools: trust and effects per tool, by name pattern.
//! A remote server's own annotations never raise trust (MCP's specification: clients must
//! not trust annotations from servers they do not trust).

use tooltrust::tool::{DeclaredTrust, Effects};

/// What the host declares of one remote tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Declared {
    /// How far its output may be trusted.
    pub trust: DeclaredTrust,
    /// Whether it changes anything outside the agent.
    pub effects: Effects,
}

impl Declared {
    /// What an undeclared tool gets: untrusted output, consequential (fail closed).
    pub const UNDECLARED: Declared = Declared {
        trust: DeclaredTrust::Untrusted,
        effects: Effects::Consequential,
    };
}

/// Declarations by pattern, in order: the first pattern that matches a tool's name wins;
/// a name no pattern matches is [`Declared::UNDECLARED`]. A pattern is a name in which
/// `*` stands for any run of characters (`fetch_*`, `*`).
#[derive(Debug, Clone, Default)]
pub struct Declarations {
    rules: Vec<(String, Declared, Option<String>)>,
}

impl Declarations {
    /// No declarations: every tool is [`Declared::UNDECLARED`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a pattern after those already added.
    pub fn declare(self, pattern: impl Into<String>, declared: Declared) -> Self {
        self.declare_described(pattern, declared, None)
    }

    /// Like [`Declarations::declare`], with the description the host shows for the
    /// matched tools instead of the server's, when `description` is `Some`.
    pub fn declare_described(
        mut self,
        pattern: impl Into<String>,
        declared: Declared,
        description: Option<String>,
    ) -> Self {
        self.rules.push((pattern.into(), declared, description));
        self
    }

    /// What the host declares of `tool`.
    pub fn of(&self, tool: &str) -> Declared {
        self.rule_of(tool)
            .map_or(Declared::UNDECLARED, |(_, declared, _)| *declared)
    }

    /// The host's own description of `tool`, if the pattern that matches it gives one.
    pub fn description_of(&self, tool: &str) -> Option<&str> {
        self.rule_of(tool)
            .and_then(|(_, _, description)| description.as_deref())
    }

    fn rule_of(&self, tool: &str) -> Option<&(String, Declared, Option<String>)> {
        self.rules
            .iter()
            .find(|(pattern, _, _)| matches(pattern, tool))
    }
}

/// Whether `name` matches `pattern`, where `*` matches any run of characters.
fn matches(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        // No `*`: the whole name.
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_as_globs() {
        assert!(matches("fetch_*", "fetch_page"));
        assert!(matches("fetch_*", "fetch_"));
        assert!(!matches("fetch_*", "prefetch_page"));
        assert!(matches("*", "anything"));
        assert!(matches("lookup_policy", "lookup_policy"));
        assert!(!matches("lookup_policy", "lookup_policy2"));
        assert!(matches("*_email", "send_email"));
        assert!(matches("a*b*c", "a-b-c"));
        assert!(!matches("a*b*c", "a-c"));
        assert!(!matches("ab*ba", "aba"));
    }

    #[test]
    fn the_first_match_wins_and_the_rest_fail_closed() {
        let read = Declared {
            trust: DeclaredTrust::Untrusted,
            effects: Effects::ReadOnly,
        };
        let policy = Declared {
            trust: DeclaredTrust::Trusted,
            effects: Effects::ReadOnly,
        };
        let declarations = Declarations::new()
            .declare("lookup_policy", policy)
            .declare("*_policy", read);
        assert_eq!(declarations.of("lookup_policy"), policy);
        assert_eq!(declarations.of("other_policy"), read);
        assert_eq!(declarations.of("send_email"), Declared::UNDECLARED);
    }
}
