//! Finding live envelope nonces in a call's arguments (egress of a secret the prompt
//! holds): however the model spells one — split by separators or other letters, across
//! fields, in upper case or fullwidth digits, reversed.
//!
//! Sealed nonces are lowercase hex. The arguments' values (strings and numbers, in order)
//! and, apart, their keys are projected onto their hex digits alone — case and width
//! folded, everything else dropped — and each projection is searched in one pass for
//! every nonce, forwards and reversed. A nonce is 128
//! random bits, so an innocent argument matches one by chance with negligible
//! probability, however the text is cut.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

/// The live nonces of a scope, searchable in one pass over a call's arguments.
///
/// A scope gains a nonce with every block, so adding one must cost the same however many
/// the scope holds, and a search must not visit them one by one. Every nonce is indexed
/// by the first `KEY_DIGITS` hex digits of its projection, forwards and reversed: 16
/// hex digits are exactly 64 bits, so a window of the arguments' projection is its own
/// key, rolled one digit at a time, and a hit is confirmed against the whole nonce.
#[derive(Debug, Clone, Default)]
pub struct NonceIndex {
    nonces: Vec<String>,
    known: HashSet<String>,
    /// Each nonce's projection; empty when too short to look for.
    projections: Vec<Box<[u8]>>,
    /// The newest pattern whose first digits make the key. Pattern `2k` is nonce `k`'s
    /// projection forwards, `2k + 1` reversed. Searched once per digit of the arguments,
    /// so the hash is a fast one, seeded per index (a compat nonce may be a public id).
    heads: HashMap<u64, usize, foldhash::fast::RandomState>,
    /// One bit per slot of a key's [`slot`]: set for every key in `heads`, so most windows
    /// of the arguments are passed over without a lookup. At least [`FILTER_SPREAD`] bits
    /// per key, grown (and refilled) as keys arrive.
    filter: Vec<u64>,
    /// Per pattern, the next older pattern with the same key.
    next: Vec<Option<usize>>,
}

/// The fewest hex digits a nonce must project to for the index to look for it. Sealed
/// nonces have 32; a compat nonce is a public id or checksum, and one as short as `m1`
/// would match any argument holding a `1`.
const MIN_PROJECTION: usize = 16;

/// Digits of a projection that key the index: at most the fewest a nonce has, and 16
/// digits of 4 bits fill a `u64`.
const KEY_DIGITS: usize = MIN_PROJECTION;

/// Filter bits per key: about one window in this many of an innocent argument is looked up.
const FILTER_SPREAD: usize = 16;

impl NonceIndex {
    /// Adds nonces; each costs the same however many the index already holds.
    pub fn extend<'a>(&mut self, nonces: impl IntoIterator<Item = &'a String>) {
        for nonce in nonces {
            if !self.known.insert(nonce.clone()) {
                continue;
            }
            let k = self.nonces.len();
            self.nonces.push(nonce.clone());
            let mut digits = Vec::new();
            project(nonce, &mut digits);
            if digits.len() < MIN_PROJECTION {
                // Never matched: so short a pattern would match ordinary arguments.
                self.projections.push(Box::default());
                self.next.extend([None, None]);
                continue;
            }
            for (pattern, key) in [
                (2 * k, key_of(digits.iter())),
                (2 * k + 1, key_of(digits.iter().rev())),
            ] {
                self.next.push(self.heads.insert(key, pattern));
                self.mark(key);
            }
            self.projections.push(digits.into_boxed_slice());
        }
    }

    /// Sets `key`'s filter bit, first doubling the filter (and setting every key's bit
    /// again) when it holds fewer than [`FILTER_SPREAD`] bits per key.
    fn mark(&mut self, key: u64) {
        if self.filter.len() * 64 < self.heads.len() * FILTER_SPREAD {
            let words = (self.heads.len() * FILTER_SPREAD / 64).next_power_of_two();
            self.filter = vec![0; words.max(self.filter.len() * 2)];
            let keys: Vec<u64> = self.heads.keys().copied().collect();
            keys.into_iter().for_each(|key| self.set(key));
        } else {
            self.set(key);
        }
    }

    fn set(&mut self, key: u64) {
        let (word, bit) = slot(key, self.filter.len());
        self.filter[word] |= bit;
    }

    /// The first live nonce found in the arguments, if any.
    pub fn find_in_args(&self, args: &Map<String, Value>) -> Option<&str> {
        if self.heads.is_empty() {
            return None;
        }
        let (mut keys, mut values) = (Vec::new(), Vec::new());
        for (key, value) in args {
            project(key, &mut keys);
            project_value(value, &mut keys, &mut values);
        }
        self.find_in(&values).or_else(|| self.find_in(&keys))
    }

    /// The nonce whose pattern starts leftmost in `projection` (hex digits, lowercase).
    fn find_in(&self, projection: &[u8]) -> Option<&str> {
        let mut key = 0u64;
        for (end, &digit) in projection.iter().enumerate() {
            key = key << 4 | u64::from(value_of(digit));
            let Some(start) = (end + 1).checked_sub(KEY_DIGITS) else {
                continue;
            };
            let (word, bit) = slot(key, self.filter.len());
            if self.filter[word] & bit == 0 {
                continue;
            }
            let mut pattern = self.heads.get(&key).copied();
            while let Some(p) = pattern {
                let nonce = &self.projections[p / 2];
                let found = projection
                    .get(start..start + nonce.len())
                    .is_some_and(|window| {
                        if p % 2 == 0 {
                            window == &nonce[..]
                        } else {
                            window.iter().eq(nonce.iter().rev())
                        }
                    });
                if found {
                    return self.nonces.get(p / 2).map(String::as_str);
                }
                pattern = self.next[p];
            }
        }
        None
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
    let bytes = text.as_bytes();
    let start = out.len();
    // Written without a branch per byte (whether a byte is a digit is unpredictable in
    // prose): every byte's digit or 0 is stored, and only digits advance the end.
    out.resize(start + bytes.len(), 0);
    let written = &mut out[start..];
    let mut end = 0;
    let mut put = |digit: u8| {
        written[end] = digit;
        end += usize::from(digit != 0);
    };
    // Only the lead byte EF (of U+F000–U+FFFF) starts a fullwidth digit; between two of
    // them, a table gives every byte's digit.
    let mut from = 0;
    for lead in memchr::memchr_iter(0xEF, bytes).map(Some).chain([None]) {
        let to = lead.unwrap_or(bytes.len());
        for &byte in bytes.get(from..to).unwrap_or_default() {
            put(DIGITS[usize::from(byte)]);
        }
        if let Some(at) = lead {
            put(fullwidth_digit(bytes.get(at + 1..at + 3)));
            from = at + 1;
        }
    }
    out.truncate(start + end);
}

/// Each byte's lowercase hex digit, or 0: an ASCII hex digit is its own byte, and no
/// byte of a multi-byte character is ASCII.
static DIGITS: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut byte = 0;
    while byte < 256 {
        let c = byte as u8;
        table[byte] = match c {
            b'0'..=b'9' | b'a'..=b'f' => c,
            b'A'..=b'F' => c.to_ascii_lowercase(),
            _ => 0,
        };
        byte += 1;
    }
    table
};

/// The hex digit a fullwidth character is (`０`–`９` U+FF10–FF19, `Ａ`–`Ｆ` U+FF21–FF26,
/// `ａ`–`ｆ` U+FF41–FF46), given the two bytes after its lead byte `EF`; else 0.
fn fullwidth_digit(rest: Option<&[u8]>) -> u8 {
    match rest {
        Some(&[0xBC, last @ 0x90..=0x99]) => last - 0x90 + b'0',
        Some(&[0xBC, last @ 0xA1..=0xA6]) => last - 0xA1 + b'a',
        Some(&[0xBD, last @ 0x81..=0x86]) => last - 0x81 + b'a',
        _ => 0,
    }
}

/// The value of a lowercase hex digit.
fn value_of(digit: u8) -> u8 {
    match digit {
        b'a'..=b'f' => digit - b'a' + 10,
        _ => digit.wrapping_sub(b'0') & 0xF,
    }
}

/// The filter word and bit of `key`, in a filter of `words` words (a power of two).
fn slot(key: u64, words: usize) -> (usize, u64) {
    // A multiply spreads the key's bits to the top; the top bits pick the slot.
    let mixed = key.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let word = (mixed >> 32) as usize & (words - 1);
    (word, 1 << (mixed >> 58))
}

/// The key of a pattern: its first [`KEY_DIGITS`] digit values, as the search rolls them.
fn key_of<'a>(digits: impl Iterator<Item = &'a u8>) -> u64 {
    digits
        .take(KEY_DIGITS)
        .fold(0, |key, &digit| key << 4 | u64::from(value_of(digit)))
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

    /// Nonces added one at a time, as a long session adds them, are all found exactly as
    /// by an index built at once; short public ids are never matched.
    #[test]
    fn nonces_added_one_by_one_are_found_as_when_added_at_once() {
        let nonces: Vec<String> = (0..700u64)
            .map(|i| format!("{:016x}{:016x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15), i))
            .collect();
        let mut one_by_one = NonceIndex::default();
        for nonce in &nonces {
            one_by_one.extend([nonce]);
        }
        let mut at_once = NonceIndex::default();
        at_once.extend(&nonces);
        assert_eq!((one_by_one.len(), at_once.len()), (700, 700));
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

    /// Public ids (compat nonces) may share their first digits, or one may read as
    /// another reversed: each is still found whole, and only whole.
    #[test]
    fn nonces_that_share_their_first_digits_are_each_found_whole() {
        let shared = "0123456789abcdef";
        let first = format!("{shared}00000000000000001111");
        let second = format!("{shared}2222222222222222");
        let palindrome_of_shared: String = shared.chars().rev().collect();
        let third = format!("{palindrome_of_shared}ffff0000ffff0000");
        let index = index(&[&first, &second, &third]);
        for nonce in [&first, &second, &third] {
            assert_eq!(
                found(&index, json!({ "text": format!("x {nonce} y") })).as_deref(),
                Some(nonce.as_str())
            );
            let reversed: String = nonce.chars().rev().collect();
            assert_eq!(
                found(&index, json!({ "text": reversed })).as_deref(),
                Some(nonce.as_str())
            );
        }
        // The shared digits alone, or with the wrong rest, are no nonce.
        assert_eq!(found(&index, json!({ "text": shared })), None);
        assert_eq!(
            found(
                &index,
                json!({ "text": format!("{shared}000000000000000011") })
            ),
            None
        );
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
