//! Finding live envelope nonces in a call's arguments (egress of a secret the prompt
//! holds): however the model spells one — split by separators or other letters, across
//! fields, in upper case or fullwidth digits, reversed.
//!
//! Sealed nonces are lowercase hex. The arguments' values (strings and numbers, in order)
//! and, apart, their keys are projected onto their hex digits alone — case and width
//! folded, everything else dropped — and each projection is searched once for every
//! nonce and every nonce reversed. A nonce is 128
//! random bits, so an innocent argument matches one by chance with negligible
//! probability, however the text is cut.

use std::collections::HashSet;
use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use serde_json::{Map, Value};

/// The live nonces of a scope, searchable in one pass over a call's arguments.
#[derive(Debug, Clone, Default)]
pub struct NonceIndex {
    nonces: Vec<String>,
    known: HashSet<String>,
    /// Built on the first search after nonces arrive, not on every arrival: a scope
    /// gains a nonce per block, and rebuilding each time would cost the square of them.
    matcher: OnceLock<Option<AhoCorasick>>,
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
        }
    }

    /// Patterns `2k` and `2k + 1` are nonce `k`'s projection, forwards and reversed.
    fn matcher(&self) -> Option<&AhoCorasick> {
        self.matcher
            .get_or_init(|| {
                let patterns: Vec<Vec<u8>> = self
                    .nonces
                    .iter()
                    .flat_map(|nonce| {
                        let mut forwards = Vec::new();
                        project(nonce, &mut forwards);
                        let reversed = forwards.iter().rev().copied().collect();
                        [forwards, reversed]
                    })
                    .collect();
                (!patterns.is_empty())
                    .then(|| {
                        AhoCorasickBuilder::new()
                            .match_kind(MatchKind::LeftmostFirst)
                            .build(&patterns)
                            .ok()
                    })
                    .flatten()
            })
            .as_ref()
    }

    /// The first live nonce found in the arguments, if any.
    pub fn find_in_args(&self, args: &Map<String, Value>) -> Option<&str> {
        if self.nonces.is_empty() {
            return None;
        }
        let (mut keys, mut values) = (Vec::new(), Vec::new());
        for (key, value) in args {
            project(key, &mut keys);
            project_value(value, &mut keys, &mut values);
        }
        self.find_in(&values).or_else(|| self.find_in(&keys))
    }

    fn find_in(&self, projection: &[u8]) -> Option<&str> {
        let Some(matcher) = self.matcher() else {
            // No automaton could be built: search the slow way rather than not at all.
            return self.nonces.iter().map(String::as_str).find(|nonce| {
                let mut pattern = Vec::new();
                project(nonce, &mut pattern);
                let reversed: Vec<u8> = pattern.iter().rev().copied().collect();
                !pattern.is_empty()
                    && (contains(projection, &pattern) || contains(projection, &reversed))
            });
        };
        let found = matcher.find(projection)?;
        self.nonces
            .get(found.pattern().as_usize() / 2)
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

/// Projects `value`'s strings and numbers onto `values` and its object keys onto `keys`.
fn project_value(value: &Value, keys: &mut Vec<u8>, values: &mut Vec<u8>) {
    match value {
        Value::String(text) => project(text, values),
        Value::Number(number) => project(&number.to_string(), values),
        Value::Array(items) => items
            .iter()
            .for_each(|item| project_value(item, keys, values)),
        Value::Object(map) => {
            for (key, item) in map {
                project(key, keys);
                project_value(item, keys, values);
            }
        }
        Value::Bool(_) | Value::Null => {}
    }
}

/// Appends the hex digits of `text` to `out`, lowercase, with fullwidth digits and
/// letters read as their ASCII forms; everything else is dropped.
fn project(text: &str, out: &mut Vec<u8>) {
    for c in text.chars() {
        let c = match u32::from(c) {
            // Fullwidth `０`–`９`, `Ａ`–`Ｚ`, `ａ`–`ｚ` are their ASCII forms, shifted.
            code @ (0xFF10..=0xFF19 | 0xFF21..=0xFF3A | 0xFF41..=0xFF5A) => {
                char::from_u32(code - 0xFEE0).unwrap_or(c)
            }
            _ => c,
        };
        if c.is_ascii_hexdigit() {
            out.push(c.to_ascii_lowercase() as u8);
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(haystack, needle).is_some()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    const NONCE: &str = "0f3a9c1e5b7d2f4a6c8e0b1d3f5a7c9e";

    fn index(nonces: &[&str]) -> NonceIndex {
        let nonces: Vec<String> = nonces.iter().map(|n| (*n).to_owned()).collect();
        let mut index = NonceIndex::default();
        index.extend(&nonces);
        index
    }

    fn found(index: &NonceIndex, args: Value) -> Option<String> {
        index.find_in_args(args.as_object()?).map(str::to_owned)
    }

    fn fullwidth(text: &str) -> String {
        text.chars()
            .map(|c| char::from_u32(u32::from(c) + 0xFEE0).unwrap_or(c))
            .collect()
    }

    #[test]
    fn finds_a_nonce_however_it_is_spelled() {
        let index = index(&[NONCE]);
        let reversed: String = NONCE.chars().rev().collect();
        let spaced: String = NONCE.chars().map(|c| format!("{c} ")).collect();
        for text in [
            NONCE.to_owned(),
            format!("see {NONCE}."),
            NONCE.to_uppercase(),
            fullwidth(NONCE),
            reversed,
            spaced,
            format!("{}-{}", &NONCE[..16], &NONCE[16..]),
            format!("{}\u{200b}{}", &NONCE[..16], &NONCE[16..]),
            format!("{}xyz{}", &NONCE[..10], &NONCE[10..]),
        ] {
            assert_eq!(
                found(&index, json!({ "text": text })).as_deref(),
                Some(NONCE),
                "{text}"
            );
        }
        // Split across fields, or into a key and a number.
        assert!(found(&index, json!({"a": &NONCE[..16], "b": &NONCE[16..]})).is_some());
        assert!(found(&index, json!({ NONCE: 1 })).is_some());
        for text in ["", &NONCE[..31], "an ordinary sentence about cafés"] {
            assert_eq!(found(&index, json!({ "text": text })), None, "{text}");
        }
    }

    proptest! {
        /// A nonce cut at random places by random separators (spaces, punctuation, other
        /// letters, invisible characters), in random case and width, either direction, is
        /// found; text made of the same pieces without the nonce is not.
        #[test]
        fn a_cut_and_disguised_nonce_is_found(
            nonce in "[0-9a-f]{32}",
            cuts in proptest::collection::vec((0usize..32, "[ g-z.,;:/_\u{200b}\u{2013}-]{1,3}"), 0..8),
            upper in any::<bool>(),
            wide in any::<bool>(),
            reversed in any::<bool>(),
            filler in "[ g-z.,]{0,40}",
        ) {
            let index = index(&[&nonce]);
            let mut chars: Vec<String> = nonce.chars().map(String::from).collect();
            if reversed {
                chars.reverse();
            }
            for (at, separator) in &cuts {
                chars[*at].push_str(separator);
            }
            let mut text: String = chars.concat();
            if upper {
                text = text.to_uppercase();
            }
            if wide {
                text = fullwidth(&text);
            }
            let args = json!({ "body": format!("{filler}{text}{filler}") });
            prop_assert_eq!(found(&index, args), Some(nonce.clone()));
            let without = json!({ "body": format!("{filler}{}{filler}", &nonce[..20]) });
            prop_assert_eq!(found(&index, without), None);
        }
    }
}
