//! Properties of canonical JSON and call checksums over generated inputs.

use proptest::prelude::*;
use serde_json::{Map, Number, Value};
use sha2::{Digest, Sha256};
use tooltrust::canonical::{cmp_utf16, write_string};
use tooltrust::{ToolCall, canonical_json, parse_strict};

/// Keys drawn so that collisions, shared prefixes and the UTF-16/UTF-8 order split
/// (U+E000..U+FFFF against astral characters) come up often.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        "[ab]{0,3}",
        prop::collection::vec(
            prop::sample::select(vec![
                'a',
                'A',
                'é',
                'É',
                '\u{0}',
                '\u{1f}',
                '"',
                '\\',
                '/',
                '\u{7f}',
                '\u{2028}',
                '\u{e000}',
                '\u{fb01}',
                '\u{ffff}',
                '\u{10000}',
                '\u{1f600}',
                '\u{10ffff}',
            ]),
            0..4,
        )
        .prop_map(String::from_iter),
        any::<String>(),
    ]
}

/// Finite doubles that are not integers, so that two values are equal as
/// `serde_json::Value`s exactly when they mean the same JSON value.
fn fraction() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<u64>().prop_map(f64::from_bits),
        (-1000i32..1000).prop_map(|i| f64::from(i) * 0.1),
        (1u32..1000).prop_map(|i| 1.0 / f64::from(i)),
    ]
    .prop_filter("a finite non-integer", |x| {
        x.is_finite() && x.fract() != 0.0
    })
}

fn leaf() -> impl Strategy<Value = Value> {
    const SAFE: i64 = 1 << 53;
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-SAFE..=SAFE).prop_map(|n| Value::Number(n.into())),
        fraction().prop_map(|x| Value::Number(Number::from_f64(x).unwrap())),
        key().prop_map(Value::String),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..5)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

fn args() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map(key(), value(), 0..6).prop_map(|map| map.into_iter().collect())
}

/// A small deterministic generator for the spelling choices of [`Spelling`].
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
    }
}

/// Writes a value as JSON text that means the same but is spelled differently: object
/// members shuffled, whitespace between tokens, characters escaped that need not be.
struct Spelling {
    rng: Rng,
    out: String,
}

impl Spelling {
    fn of(value: &Value, seed: u64) -> String {
        let mut spelling = Spelling {
            rng: Rng(seed | 1),
            out: String::new(),
        };
        spelling.space();
        spelling.value(value);
        spelling.space();
        spelling.out
    }

    fn space(&mut self) {
        for _ in 0..self.rng.below(3) {
            let ws = [" ", "\t", "\n", "\r\n", "  "][self.rng.below(5)];
            self.out.push_str(ws);
        }
    }

    fn value(&mut self, value: &Value) {
        match value {
            Value::Object(map) => {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                for i in (1..entries.len()).rev() {
                    let j = self.rng.below(i + 1);
                    entries.swap(i, j);
                }
                self.out.push('{');
                for (index, (key, item)) in entries.into_iter().enumerate() {
                    if index > 0 {
                        self.out.push(',');
                    }
                    self.space();
                    self.string(key);
                    self.space();
                    self.out.push(':');
                    self.space();
                    self.value(item);
                    self.space();
                }
                self.out.push('}');
            }
            Value::Array(items) => {
                self.out.push('[');
                for (index, item) in items.iter().enumerate() {
                    if index > 0 {
                        self.out.push(',');
                    }
                    self.space();
                    self.value(item);
                    self.space();
                }
                self.out.push(']');
            }
            Value::String(text) => self.string(text),
            other => self.out.push_str(&other.to_string()),
        }
    }

    fn string(&mut self, text: &str) {
        self.out.push('"');
        for c in text.chars() {
            let must_escape = c == '"' || c == '\\' || (c as u32) < 0x20;
            if must_escape || self.rng.below(4) == 0 {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    self.out.push_str(&format!("\\u{unit:04X}"));
                }
            } else {
                self.out.push(c);
            }
        }
        self.out.push('"');
    }
}

/// Replaces the `target`-th node (pre-order) of `value` with `with`; returns whether it
/// found the node.
fn replace_node(value: &mut Value, target: &mut usize, with: &Value) -> bool {
    if *target == 0 {
        *value = with.clone();
        return true;
    }
    *target -= 1;
    match value {
        Value::Array(items) => items
            .iter_mut()
            .any(|item| replace_node(item, target, with)),
        Value::Object(map) => map
            .values_mut()
            .any(|item| replace_node(item, target, with)),
        _ => false,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn key_order_and_whitespace_do_not_change_the_checksum(args in args(), seed in any::<u64>()) {
        let value = Value::Object(args.clone());
        let plain = ToolCall::from_model("t", &serde_json::to_string(&value).unwrap()).unwrap();
        let respelled_text = Spelling::of(&value, seed);
        let respelled = ToolCall::from_model("t", &respelled_text).unwrap();
        prop_assert_eq!(respelled.checksum(), plain.checksum(), "{}", respelled_text);
        prop_assert_eq!(respelled.canonical(), plain.canonical());
        prop_assert_eq!(respelled.args(), &args);
        prop_assert_eq!(ToolCall::from_value("t", value).unwrap().checksum(), plain.checksum());
    }

    #[test]
    fn canonical_json_is_idempotent_through_a_parse(value in value()) {
        let canonical = canonical_json(&value);
        let parsed = parse_strict(&canonical).unwrap();
        prop_assert_eq!(&parsed, &value);
        prop_assert_eq!(canonical_json(&parsed), canonical);
    }

    #[test]
    fn different_args_give_different_checksums(
        args in args(),
        target in any::<prop::sample::Index>(),
        replacement in value(),
        other_tool in "[a-z]{1,8}",
    ) {
        let original = Value::Object(args);
        let mut changed = original.clone();
        let nodes = count_nodes(&original);
        let mut at = target.index(nodes);
        prop_assume!(replace_node(&mut changed, &mut at, &replacement));
        prop_assume!(changed != original && changed.is_object());
        let a = ToolCall::from_value("t", original).unwrap();
        let b = ToolCall::from_value("t", changed).unwrap();
        prop_assert_ne!(a.checksum(), b.checksum(), "{} vs {}", a.canonical(), b.canonical());
        let c = ToolCall::from_value(other_tool.clone(), Value::Object(a.args().clone())).unwrap();
        prop_assert_eq!(a.checksum() == c.checksum(), other_tool == "t");
    }

    #[test]
    fn arbitrary_text_never_panics(text in prop_oneof![
        any::<String>(),
        prop::collection::vec(
            prop::sample::select(vec![
                "{", "}", "[", "]", ",", ":", "\"", "\"a\"", "\\u", "\\", "d800", "dc00", "00e9",
                "1", "-", "0", ".5", "e400", "E-9", "true", "null", " ", "\n", "é", "\u{0}",
            ]),
            0..24,
        )
        .prop_map(|parts| parts.concat()),
    ]) {
        if let Ok(call) = ToolCall::from_model("t", &text) {
            let canonical = call.canonical();
            let digest: [u8; 32] = Sha256::digest(canonical.as_bytes()).into();
            prop_assert_eq!(*call.checksum().as_bytes(), digest);
            let reparsed = ToolCall::from_model("t", &canonical_json(&Value::Object(call.args().clone()))).unwrap();
            prop_assert_eq!(reparsed.checksum(), call.checksum());
        }
    }

    #[test]
    fn strings_escape_as_rfc_8785_says(text in prop_oneof![escapable_text(), any::<String>()]) {
        let mut out = String::new();
        write_string(&mut out, &text);
        prop_assert_eq!(out, escape_naively(&text));
    }

    #[test]
    fn keys_compare_by_utf16_code_units(a in key(), b in key()) {
        let expected = a.encode_utf16().cmp(b.encode_utf16());
        prop_assert_eq!(cmp_utf16(&a, &b), expected);
    }

}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// The checksum is hashed while the text is written, through a buffer; big strings
    /// and many small pieces cross its edges.
    #[test]
    fn the_checksum_is_the_sha256_of_the_canonical_text(
        big in prop::collection::vec(escapable_text(), 0..400).prop_map(|parts| parts.concat()),
        small in prop::collection::btree_map("[a-z]{1,6}", any::<i32>(), 0..600),
    ) {
        let mut args = Map::new();
        args.insert("big".into(), Value::String(big));
        args.insert(
            "small".into(),
            Value::Object(small.into_iter().map(|(k, v)| (k, Value::from(v))).collect()),
        );
        let call = ToolCall::from_value("t", Value::Object(args)).unwrap();
        let digest: [u8; 32] = Sha256::digest(call.canonical().as_bytes()).into();
        prop_assert_eq!(*call.checksum().as_bytes(), digest);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn doubles_round_trip_exactly(bits in any::<u64>()) {
        let x = f64::from_bits(bits);
        prop_assume!(x.is_finite());
        let shortest = ryu_js::Buffer::new().format_finite(x).to_owned();
        for text in [shortest.clone(), format!("{x:?}"), format!("{x:e}")] {
            let parsed = parse_strict(&text).unwrap();
            let back = parsed.as_f64().unwrap();
            // ECMAScript spells -0 as 0.
            let expected = if text == "0" { 0.0f64 } else { x };
            prop_assert_eq!(back.to_bits(), expected.to_bits(), "{}", text);
            prop_assert_eq!(canonical_json(&parsed), shortest.clone());
            let call = ToolCall::from_model("t", &format!("{{\"x\":{text}}}")).unwrap();
            prop_assert_eq!(call.args()["x"].as_f64().unwrap().to_bits(), expected.to_bits());
        }
    }
}

/// RFC 8785 string escaping, one character at a time.
fn escape_naively(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Text where bytes that need escaping land at every offset of a machine word.
fn escapable_text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            4 => prop::sample::select(vec!['a', ' ', '~', '\u{7f}', '\u{80}', 'é', '\u{2028}', '😀', '\u{ff}']),
            1 => prop::sample::select(vec!['"', '\\', '\u{0}', '\n', '\u{1f}', '\u{8}', '\u{c}', '\r', '\t', '\u{1b}']),
        ],
        0..80,
    )
    .prop_map(String::from_iter)
}

fn count_nodes(value: &Value) -> usize {
    1 + match value {
        Value::Array(items) => items.iter().map(count_nodes).sum(),
        Value::Object(map) => map.values().map(count_nodes).sum(),
        _ => 0,
    }
}
