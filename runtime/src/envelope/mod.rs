//! Envelopes: every block of content that enters a prompt is wrapped in its tier's tag,
//! and the closing tag carries a nonce the content cannot predict.
//!
//! Three layers, and which guarantee comes from which:
//! - **Parser layer** (exact): a body never contains its own live closer (refused in both
//!   modes), so [`parse()`] recovers exactly the blocks [`Renderer`] rendered.
//! - **Model layer** (probabilistic): in sealed mode every data body is
//!   [`neutralise()`]d, so nothing inside reads as our tags to a model, and the
//!   [`STANDING_EXPLANATION`] tells the model how envelopes work. Compat mode keeps the
//!   reference's weaknesses here: it neutralises only `<system_instructions` in message
//!   bodies, and its nonces are public (a fetched page knows its own URL, so it can
//!   compute its tool result's checksum and closer).
//! - **Action layer**: the gate, which holds even when the model is fooled.

mod compat;
pub mod confusable;
pub mod explanation;
pub mod inert;
pub mod neutralise;
pub mod parse;
pub mod render;

pub use compat::{RETRIEVED_DIRECTIVE, unknown_tool_warning};
pub use confusable::{Confusable, ConfusableKind, confusable_note, confusables};
pub use explanation::{STANDING_EXPLANATION, STANDING_EXPLANATION_VERSION};
pub use inert::{inert, is_unseen};
pub use neutralise::{Finding, FindingKind, Neutralised, neutralise};
pub use parse::{ParseError, ParseFault, ParsedBlock, parse, parse_sealed};
pub use render::{Mode, RenderError, Rendered, Renderer};

pub use crate::nonce::{KeyError, SessionKey};

/// The tag families of the envelope vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// `<system_instructions kind="developer-rules">`: the developer's policy; no nonce.
    DeveloperPolicy,
    /// `<trusted_content_{nonce}>`: output of a trusted tool.
    TrustedContent,
    /// `<untrusted_content_{nonce}>`: untrusted tool results, tool errors, artifact
    /// handles, media fallbacks, third-party retrieved records.
    UntrustedContent,
    /// `<message_{nonce}>`: a user's message.
    Message,
    /// `<peer_agent_output_{nonce}>`: a peer agent's message or reasoning.
    PeerOutput,
    /// `<retrieved_corpus>`: the parent of first-party retrieved records; no nonce.
    RetrievedCorpus,
    /// `<retrieved_{nonce}>`: one first-party retrieved record.
    Retrieved,
    /// `<memories>`: the parent of memories; no nonce.
    Memories,
    /// `<memory_{nonce}>`: one memory.
    Memory,
    /// `<thought_{nonce}>`: one reasoning trace.
    Thought,
}

impl Tier {
    /// Every tier, longest tag name first so that prefix matching is unambiguous.
    pub const ALL: [Tier; 10] = [
        Tier::DeveloperPolicy,
        Tier::UntrustedContent,
        Tier::PeerOutput,
        Tier::RetrievedCorpus,
        Tier::TrustedContent,
        Tier::Retrieved,
        Tier::Memories,
        Tier::Message,
        Tier::Memory,
        Tier::Thought,
    ];

    /// The tag name, or for nonce-keyed tiers the tag name's prefix before the nonce.
    pub fn tag(self) -> &'static str {
        match self {
            Tier::DeveloperPolicy => "system_instructions",
            Tier::TrustedContent => "trusted_content_",
            Tier::UntrustedContent => "untrusted_content_",
            Tier::Message => "message_",
            Tier::PeerOutput => "peer_agent_output_",
            Tier::RetrievedCorpus => "retrieved_corpus",
            Tier::Retrieved => "retrieved_",
            Tier::Memories => "memories",
            Tier::Memory => "memory_",
            Tier::Thought => "thought_",
        }
    }

    /// Whether the tag name ends in a nonce.
    pub fn is_keyed(self) -> bool {
        !matches!(
            self,
            Tier::DeveloperPolicy | Tier::RetrievedCorpus | Tier::Memories
        )
    }

    /// Whether the tier's body is a list of child envelopes rather than text.
    pub fn is_container(self) -> bool {
        matches!(self, Tier::RetrievedCorpus | Tier::Memories)
    }

    /// The tier's name in `verify` output and nonce derivation.
    pub fn name(self) -> &'static str {
        match self {
            Tier::DeveloperPolicy => "developer_policy",
            Tier::TrustedContent => "trusted_content",
            Tier::UntrustedContent => "untrusted_content",
            Tier::Message => "message",
            Tier::PeerOutput => "peer_output",
            Tier::RetrievedCorpus => "retrieved_corpus",
            Tier::Retrieved => "retrieved",
            Tier::Memories => "memories",
            Tier::Memory => "memory",
            Tier::Thought => "thought",
        }
    }

    /// The full tag name for `nonce` (ignored by tiers without one).
    pub fn tag_name(self, nonce: &str) -> String {
        if self.is_keyed() {
            format!("{}{nonce}", self.tag())
        } else {
            self.tag().to_owned()
        }
    }
}

/// The attributes a sealed nonce is bound to besides the tier: relabelling a block's
/// kind, role or output type (say, to `output="instruction"`) changes the nonce its key
/// derives, so the verifier catches it.
pub(crate) const BOUND_ATTRS: [&str; 3] = ["kind", "role", "output"];

/// The domain a sealed nonce is derived in: the tier's name, then each bound attribute
/// the block carries with its value's length (`untrusted_content:kind=11:tool-result`), so
/// that no value can spell another attribute (`kind="x:output=instruction"` is not
/// `kind="x" output="instruction"`).
pub(crate) fn nonce_domain<'a>(tier: Tier, attr: impl Fn(&str) -> Option<&'a str>) -> String {
    // Room for the tier's name and a short value or two: one allocation per block.
    let mut domain = String::with_capacity(64);
    domain.push_str(tier.name());
    for name in BOUND_ATTRS {
        if let Some(value) = attr(name) {
            domain.push(':');
            domain.push_str(name);
            domain.push('=');
            domain.push_str(itoa::Buffer::new().format(value.len()));
            domain.push(':');
            domain.push_str(value);
        }
    }
    domain
}

/// Escapes an attribute value as the reference does: `&`, `<`, `>` and `"`.
pub(crate) fn escape_attr(out: &mut String, value: &str) {
    escape_into(out, value, false);
}

/// Like [`escape_attr`], and writes control characters (newlines among them) as `&#xN;`
/// too, so that a value stays on its tag's line. Sealed mode only: compat writes what
/// the reference writes.
pub(crate) fn escape_attr_and_controls(out: &mut String, value: &str) {
    escape_into(out, value, true);
}

fn escape_into(out: &mut String, value: &str, controls: bool) {
    // Most values (names, ids, hex) need nothing escaped: one pass over the bytes
    // instead of one over the characters.
    if all_bytes(value.as_bytes(), |b| {
        (b' '..=b'~').contains(&b) & (b != b'&') & (b != b'<') & (b != b'>') & (b != b'"')
    }) {
        out.push_str(value);
        return;
    }
    let mut from = 0;
    for (at, c) in value.char_indices() {
        let entity = match c {
            '&' => "&amp;",
            '<' => "&lt;",
            '>' => "&gt;",
            '"' => "&quot;",
            c if controls && c.is_control() => {
                out.push_str(&value[from..at]);
                out.push_str(&control_entity(c));
                from = at + c.len_utf8();
                continue;
            }
            _ => continue,
        };
        out.push_str(&value[from..at]);
        out.push_str(entity);
        from = at + 1;
    }
    out.push_str(&value[from..]);
}

/// Reverses [`escape_attr_and_controls`]; `None` for a bare `&` or any entity
/// not spelled exactly as they write it (`&#xa;` for a newline, not `&#xA;`, `&#x0a;`,
/// `&#x+a;` or `&#10;`).
pub(crate) fn unescape_attr(value: &str) -> Option<String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        if let Some(hex) = rest.strip_prefix("&#x") {
            let (digits, after) = hex.split_once(';')?;
            let code = u32::from_str_radix(digits, 16).ok()?;
            let c = char::from_u32(code).filter(|c| c.is_control())?;
            if control_entity(c) != rest[..3 + digits.len() + 1] {
                return None;
            }
            out.push(c);
            rest = after;
            continue;
        }
        let (entity, text) = [
            ("&amp;", '&'),
            ("&lt;", '<'),
            ("&gt;", '>'),
            ("&quot;", '"'),
        ]
        .into_iter()
        .find(|(entity, _)| rest.starts_with(entity))?;
        out.push(text);
        rest = &rest[entity.len()..];
    }
    out.push_str(rest);
    Some(out)
}

/// The entity [`escape_attr_and_controls`] writes for a control character.
/// Whether `keep` holds for every byte. Each 64-byte chunk is checked without an early
/// exit, which the compiler turns into a check of many bytes at once (an early exit per
/// byte cost a branch per byte); the first chunk that fails ends the search.
pub(crate) fn all_bytes(bytes: &[u8], keep: impl Fn(u8) -> bool) -> bool {
    bytes
        .chunks(64)
        .all(|chunk| chunk.iter().fold(true, |all, &b| all & keep(b)))
}

fn control_entity(c: char) -> String {
    format!("&#x{:x};", u32::from(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain-value pass lets through only values that escaping leaves as they are.
    #[test]
    fn escaping_writes_every_entity_and_only_those() {
        let every_byte: String = (0u8..0x80).map(char::from).collect();
        for value in [
            "",
            "tool-result",
            "0123456789abcdef0123456789abcdef",
            "a&b<c>d\"e",
            "tab\there, newline\nthere",
            "\u{7f}del and é and 日本 and \u{85}",
            every_byte.as_str(),
        ] {
            for controls in [false, true] {
                let mut fast = String::new();
                escape_into(&mut fast, value, controls);
                let mut slow = String::new();
                for c in value.chars() {
                    match c {
                        '&' => slow.push_str("&amp;"),
                        '<' => slow.push_str("&lt;"),
                        '>' => slow.push_str("&gt;"),
                        '"' => slow.push_str("&quot;"),
                        c if controls && c.is_control() => slow.push_str(&control_entity(c)),
                        c => slow.push(c),
                    }
                }
                assert_eq!(fast, slow, "{value:?}, controls {controls}");
            }
        }
    }
}
