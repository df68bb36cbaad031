//! Rules shared by the tooltrust runtime and its macros, so that a check made at compile
//! time and the same check made at run time (for tools defined at run time) can never
//! disagree. Not a public API: depend on `tooltrust`.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod doc;
pub mod pattern;

/// The longest tool name accepted: the limit every major provider shares.
pub const MAX_TOOL_NAME_LEN: usize = 64;

/// What a valid tool name is, for error messages.
pub const TOOL_NAME_RULE: &str = "1 to 64 characters of A-Z, a-z, 0-9, `_` and `-`";

/// Why an `untrusted` tool cannot declare `instruction` output.
pub const UNTRUSTED_INSTRUCTION: &str = "an `untrusted` tool cannot declare `instruction` output: outsiders write its output, and instructions carry your authority; remove `instruction` (its output is then rendered as data the model reads but never obeys)";

/// Whether `c` may appear in an id or a tool name (`[A-Za-z0-9_-]`).
pub fn is_id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Whether `name` is a valid tool name: [`TOOL_NAME_RULE`].
pub fn is_valid_tool_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_TOOL_NAME_LEN && name.chars().all(is_id_char)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names() {
        assert!(is_valid_tool_name("fetch_page-2"));
        assert!(is_valid_tool_name(&"x".repeat(MAX_TOOL_NAME_LEN)));
        assert!(!is_valid_tool_name(&"x".repeat(MAX_TOOL_NAME_LEN + 1)));
        assert!(!is_valid_tool_name(""));
        assert!(!is_valid_tool_name("a.b"));
        assert!(!is_valid_tool_name("é"));
    }
}
