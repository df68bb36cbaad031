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

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};
use serde_json::{Map, Value};

/// The live nonces of a scope, searchable in one pass over a call's arguments.
///
/// A scope gains nonces with every block, and an automaton cannot take more patterns
/// once built. Rebuilding one over all of them for every call would cost the square of
/// a long session's nonces, so they are kept in levels, each with its own automaton,
/// merged like the digits of a binary counter: each level is at least twice the next,
/// a nonce is rebuilt into a larger level only a logarithmic number of times, and a
/// search visits a logarithmic number of automata.
#[derive(Debug, Clone, Default)]
pub struct NonceIndex {
    nonces: Vec<String>,
    known: HashSet<String>,
    levels: Vec<Level>,
}

/// The fewest hex digits a nonce must project to for the index to look for it. Sealed
/// nonces have 32; a compat nonce is a public id or checksum, and one as short as `m1`
/// would match any argument holding a `1`.
const MIN_PROJECTION: usize = 16;

/// Patterns (two per nonce) under which a level is a contiguous NFA rather than a DFA.
const SMALL_LEVEL: usize = 128;

/// A byte no projection holds (projections are lowercase hex digits).
const NEVER: u8 = b'x';

/// The automaton of `nonces[first..first + len]`: patterns `2k` and `2k + 1` are nonce
/// `first + k`'s projection, forwards and reversed. `None` when none could be built (the
/// nonces are then searched one by one).
#[derive(Debug, Clone)]
struct Level {
    first: usize,
    len: usize,
    matcher: Option<AhoCorasick>,
}

impl NonceIndex {
    /// Adds nonces, as one new level, merged into the levels before it while they are
    /// not larger than twice it.
    pub fn extend<'a>(&mut self, nonces: impl IntoIterator<Item = &'a String>) {
        let before = self.nonces.len();
        for nonce in nonces {
            if self.known.insert(nonce.clone()) {
                self.nonces.push(nonce.clone());
            }
        }
        if self.nonces.len() == before {
            return;
        }
        let mut first = before;
        while let Some(last) = self.levels.last() {
            if last.len > 2 * (self.nonces.len() - first) {
                break;
            }
            first = last.first;
            self.levels.pop();
        }
        let level = self.level(first);
        self.levels.push(level);
    }

    fn level(&self, first: usize) -> Level {
        let patterns: Vec<Vec<u8>> = self.nonces[first..]
            .iter()
            .flat_map(|nonce| {
                let mut forwards = Vec::new();
                project(nonce, &mut forwards);
                if forwards.len() < MIN_PROJECTION {
                    // Never matched: an empty pattern would match every argument.
                    forwards.clear();
                    forwards.push(NEVER);
                }
                let reversed = forwards.iter().rev().copied().collect();
                [forwards, reversed]
            })
            .collect();
        Level {
            first,
            len: self.nonces.len() - first,
            matcher: AhoCorasickBuilder::new()
                .match_kind(MatchKind::LeftmostFirst)
                // A small level is rebuilt often (every arrival makes one): a DFA's
                // tables cost more to build than they save on a few patterns.
                .kind((patterns.len() < SMALL_LEVEL).then_some(AhoCorasickKind::ContiguousNFA))
                .build(&patterns)
                .ok(),
        }
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
        self.levels
            .iter()
            .find_map(|level| self.find_in_level(level, projection))
    }

    fn find_in_level(&self, level: &Level, projection: &[u8]) -> Option<&str> {
        let nonces = &self.nonces[level.first..level.first + level.len];
        let Some(matcher) = &level.matcher else {
            // No automaton could be built: search the slow way rather than not at all.
            return nonces.iter().map(String::as_str).find(|nonce| {
                let mut pattern = Vec::new();
                project(nonce, &mut pattern);
                let reversed: Vec<u8> = pattern.iter().rev().copied().collect();
                pattern.len() >= MIN_PROJECTION
                    && (contains(projection, &pattern) || contains(projection, &reversed))
            });
        };
        let found = matcher.find(projection)?;
        nonces
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

    /// Nonces added one at a time, as a long session adds them, are all found, in few
    /// levels, exactly as by an index built at once; short public ids are never matched.
    #[test]
    fn nonces_added_one_by_one_stay_searchable_in_few_levels() {
        let nonces: Vec<String> = (0..700u64)
            .map(|i| format!("{:016x}{:016x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15), i))
            .collect();
        let mut one_by_one = NonceIndex::default();
        for nonce in &nonces {
            one_by_one.extend([nonce]);
            assert!(
                one_by_one.levels.len() <= 12,
                "{} levels",
                one_by_one.levels.len()
            );
        }
        let mut at_once = NonceIndex::default();
        at_once.extend(&nonces);
        assert_eq!(at_once.levels.len(), 1);
        for nonce in nonces.iter().step_by(37) {
            let args = json!({ "body": format!("leak: {}", nonce.to_uppercase()) });
            assert_eq!(
                found(&one_by_one, args.clone()).as_deref(),
                Some(nonce.as_str())
            );
            assert_eq!(found(&at_once, args).as_deref(), Some(nonce.as_str()));
        }
        assert_eq!(
            found(&one_by_one, json!({"body": "nothing here, 12345"})),
            None
        );
        let short = index(&["m1", "q", "mem-2"]);
        assert_eq!(found(&short, json!({"body": "m1 q 1 2 mem-2"})), None);
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
