//! Properties of canonical JSON and call checksums over generated inputs.

use proptest::prelude::*;
use serde_json::{Map, Number, Value};
use sha2::{Digest, Sha256};
use tooltrust::ToolCall;
use tooltrust::call::{CallErrorReason, Checksum};
use tooltrust::canonical::{canonical_json, parse_strict};
use tooltrust::canonical::{cmp_utf16, write_string};

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

// ---------------------------------------------------------------------------------------
// The direct path (`ToolCall::from_model`, no `Value`) against the `Value` path
// (`parse_strict`, then `canonical_json`) on arbitrary JSON text.

/// What the `Value` path makes of argument text: the canonical call text, or the error.
fn through_value(tool: &str, args_json: &str) -> Result<String, CallErrorReason> {
    let value = if args_json.is_empty() {
        Value::Object(Map::new())
    } else {
        parse_strict(args_json).map_err(CallErrorReason::Json)?
    };
    let kind = match &value {
        Value::Object(_) => {
            return Ok(format!(
                "{{\"args\":{},\"tool\":{}}}",
                canonical_json(&value),
                canonical_json(&Value::String(tool.to_owned()))
            ));
        }
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
    };
    Err(CallErrorReason::NotAnObject(kind))
}

/// Numbers at the edges: signed zeros, the ends of exact integers, of 64-bit integers
/// and of the doubles, underflow, ECMAScript's switch to exponents.
const NUMBERS: [&str; 18] = [
    "0",
    "-0",
    "-0.0",
    "0e0",
    "1e-400",
    "9007199254740993",
    "-9007199254740993",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775808",
    "-9223372036854775809",
    "5e-324",
    "1.7976931348623157e308",
    "0.1",
    "100e-2",
    "1e21",
    "1e-7",
    "123e-20",
];

/// Numbers beyond the doubles, and spellings JSON does not allow.
const FAULTY_NUMBERS: [&str; 12] = [
    "1E400",
    "-1e400",
    "1.7976931348623159e308",
    "01",
    "1.",
    ".5",
    "-",
    "+1",
    "1e",
    "0x10",
    "NaN",
    "Infinity",
];

/// Writes arbitrary JSON text from a seed: numbers spelled every way JSON allows (and
/// some it does not), strings with every kind of escape (lone and paired surrogates
/// included), keys from a small pool that spells some keys two ways (so that objects
/// repeat keys often), nesting around serde_json's limit of 128 levels, and texts
/// damaged by one byte. A hand-rolled generator: proptest's combinators are too slow
/// for 100,000 cases in a debug build.
struct JsonText {
    rng: Rng,
    out: String,
    /// Whether this text may hold the faults the strict parser refuses: repeated keys,
    /// lone surrogates, numbers beyond the doubles. Each is allowed in some texts only,
    /// so that most texts are accepted.
    repeats: bool,
    lone_surrogates: bool,
    overflow: bool,
    /// Whether numbers may be spelled in ways JSON does not allow.
    bad_numbers: bool,
    /// Keys written so far.
    keys: usize,
}

impl JsonText {
    fn of(seed: u64) -> String {
        let mut rng = Rng(seed | 1);
        let fault = rng.below(10);
        let mut text = JsonText {
            repeats: fault == 0,
            lone_surrogates: fault == 1,
            overflow: fault == 2,
            bad_numbers: fault == 3,
            keys: 0,
            rng,
            out: String::new(),
        };
        text.args();
        text.out
    }

    fn pick<'a>(&mut self, choices: &[&'a str]) -> &'a str {
        choices[self.rng.below(choices.len())]
    }

    fn gap(&mut self) {
        let gap = self.pick(&["", "", "", "", " ", "\n", "\t ", "\r\n  "]);
        self.out.push_str(gap);
    }

    fn args(&mut self) {
        match self.rng.below(20) {
            // Deep nesting, around serde_json's limit.
            0 | 1 => {
                let depth = 110 + self.rng.below(30);
                let (open, close) = if self.rng.below(2) == 0 {
                    ("[", "]")
                } else {
                    ("{\"k\":", "}")
                };
                self.out.push_str("{\"deep\":");
                self.out.push_str(&open.repeat(depth));
                self.value(2);
                self.out.push_str(&close.repeat(depth));
                self.out.push('}');
            }
            // Not an object, or nothing at all.
            2 => self.value(3),
            3 => {}
            // An object damaged by one byte put in or taken out.
            4 | 5 => {
                self.object(3, 24);
                let mut at = self.rng.below(self.out.len() + 1);
                while !self.out.is_char_boundary(at) {
                    at -= 1;
                }
                let byte = self.pick(&["", ",", "}", "]", "\"", "\\", ":", "0", "\u{1}", "{", "-"]);
                if byte.is_empty() {
                    if let Some(c) = self.out[at..].chars().next() {
                        self.out.replace_range(at..at + c.len_utf8(), "");
                    }
                } else {
                    self.out.insert_str(at, byte);
                }
            }
            _ => {
                self.gap();
                self.object(3, 24);
                self.gap();
            }
        }
    }

    fn value(&mut self, depth: usize) {
        let kinds = if depth == 0 { 3 } else { 5 };
        match self.rng.below(kinds) {
            0 => {
                let literal = self.pick(&["null", "true", "false"]);
                self.out.push_str(literal);
            }
            1 => self.number(),
            2 => self.string(),
            3 => self.array(depth - 1),
            _ => self.object(depth - 1, 8),
        }
    }

    fn array(&mut self, depth: usize) {
        self.out.push('[');
        for index in 0..self.rng.below(7) {
            if index > 0 {
                self.out.push(',');
            }
            self.gap();
            self.value(depth);
            self.gap();
        }
        self.out.push(']');
    }

    fn object(&mut self, depth: usize, most: usize) {
        self.out.push('{');
        for index in 0..self.rng.below(most) {
            if index > 0 {
                self.out.push(',');
            }
            self.gap();
            self.key();
            self.gap();
            self.out.push(':');
            self.gap();
            self.value(depth);
        }
        self.out.push('}');
    }

    fn key(&mut self) {
        if !self.repeats || self.rng.below(3) > 0 {
            // A random key made unique by a number at its end.
            self.string();
            self.out.pop();
            self.keys += 1;
            self.out.push_str(&format!("{}\"", self.keys));
            return;
        }
        let key = self.pick(&[
            "\"a\"",
            "\"\\u0061\"",
            "\"b\"",
            "\"ab\"",
            "\"\"",
            "\"é\"",
            "\"\\u00e9\"",
            "\"😀\"",
            "\"\\ud83d\\ude00\"",
            "\"\\ue000\"",
            "\"\u{fb01}\"",
            "\"A\"",
            "\"a\\u0000\"",
            "\"a\\n\"",
            "\"abcdefgh\"",
            "\"abcdefghi\"",
            "\"abcdefgh\\u0000\"",
            "\"\u{10ffff}\"",
        ]);
        self.out.push_str(key);
    }

    fn digits(&mut self, most: usize) -> String {
        let len = 1 + self.rng.below(most);
        let mut digits = String::with_capacity(len);
        digits.push(char::from(b'1' + self.rng.below(9) as u8));
        for _ in 1..len {
            digits.push(char::from(b'0' + self.rng.below(10) as u8));
        }
        digits
    }

    fn bits(&mut self) -> u64 {
        (self.rng.below(1 << 32) as u64) << 32 | self.rng.below(1 << 32) as u64
    }

    fn number(&mut self) {
        let minus = if self.rng.below(3) == 0 { "-" } else { "" };
        let text = match self.rng.below(8) {
            // Integers of every magnitude, to 2^64 and far beyond.
            0 => format!("{minus}{}", self.bits() >> self.rng.below(64)),
            1 => format!("{minus}{}", self.digits(40)),
            // Doubles of every bit pattern, written two ways.
            2 | 3 => {
                let x = f64::from_bits(self.bits());
                let x = if x.is_finite() { x } else { 0.5 };
                if self.rng.below(2) == 0 {
                    format!("{x:e}")
                } else {
                    format!("{x:?}")
                }
            }
            // Digits, a fraction and an exponent of every size: underflow, overflow.
            4 | 5 => {
                let int = self.digits(20);
                let frac = if self.rng.below(2) == 0 {
                    format!(".{}", self.digits(20))
                } else {
                    String::new()
                };
                let e = self.pick(&["e", "E", "e+", "e-", "E-"]);
                let most = if self.overflow { 420 } else { 290 };
                format!("{minus}{int}{frac}{e}{}", self.rng.below(most))
            }
            _ if self.bad_numbers && self.rng.below(2) == 0 => {
                self.pick(&FAULTY_NUMBERS).to_owned()
            }
            _ => self.pick(&NUMBERS).to_owned(),
        };
        self.out.push_str(&text);
    }

    fn string(&mut self) {
        self.out.push('"');
        for _ in 0..self.rng.below(6) {
            match self.rng.below(16) {
                0..=7 => {
                    let piece = self.pick(&["a", "b c", "xyz", "0", "A_/", "-.:", "plain text"]);
                    self.out.push_str(piece);
                }
                8 | 9 => {
                    let piece = self.pick(&[
                        "é",
                        "日本",
                        "😀",
                        "\u{2028}",
                        "\u{7f}",
                        "\u{80}",
                        "\u{e000}",
                        "\u{fb01}",
                        "\u{ffff}",
                        "\u{10ffff}",
                    ]);
                    self.out.push_str(piece);
                }
                10..=12 => {
                    let escape = self.pick(&[
                        "\\n", "\\t", "\\\"", "\\\\", "\\/", "\\b", "\\f", "\\r", "\\u0000",
                        "\\u001f", "\\u0041", "\\u00e9", "\\u2028", "\\uFB01", "\\uE000",
                    ]);
                    self.out.push_str(escape);
                }
                // A lone surrogate escape, a pair, any escape at all.
                13 if self.lone_surrogates => {
                    let unit = 0xd800 + self.rng.below(0x800);
                    self.out.push_str(&format!("\\u{unit:04x}"));
                }
                14 => self.out.push_str(&format!(
                    "\\u{:04X}\\u{:04x}",
                    0xd800 + self.rng.below(0x400),
                    0xdc00 + self.rng.below(0x400)
                )),
                _ => match char::from_u32(self.rng.below(0x11_0000) as u32) {
                    Some(c) if c != '"' && c != '\\' && self.rng.below(8) > 0 => self.out.push(c),
                    _ => {
                        let mut unit = self.rng.below(0x10000);
                        if !self.lone_surrogates && (0xd800..0xe000).contains(&unit) {
                            unit -= 0x1000;
                        }
                        self.out.push_str(&format!("\\u{unit:04x}"));
                    }
                },
            }
        }
        self.out.push('"');
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100_000))]

    /// The same canonical bytes, checksum and errors as the `Value` path.
    #[test]
    fn the_direct_path_matches_the_value_path(seed in any::<u64>()) {
        let text = JsonText::of(seed);
        let expected = through_value("t", &text);
        let call = ToolCall::from_model("t", &text);
        match (&call, &expected) {
            (Ok(call), Ok(canonical)) => {
                prop_assert_eq!(&call.canonical(), canonical, "{}", text);
                prop_assert_eq!(call.checksum(), Checksum::of(canonical.as_bytes()));
            }
            (Err(error), Err(reason)) => prop_assert_eq!(&error.reason, reason, "{}", text),
            _ => prop_assert!(false, "{text:?}: direct {call:?}, through a Value {expected:?}"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5_000))]

    /// A call's arguments are the parse of its canonical arguments, whose canonical
    /// text they are again.
    #[test]
    fn args_are_the_parse_of_the_canonical_args(seed in any::<u64>()) {
        let text = JsonText::of(seed);
        if let Ok(call) = ToolCall::from_model("t", &text) {
            let args = parse_strict(call.canonical_args()).unwrap();
            prop_assert_eq!(&Value::Object(call.args().clone()), &args, "{}", text);
            prop_assert_eq!(canonical_json(&args), call.canonical_args());
            let again = ToolCall::from_value("t", args).unwrap();
            prop_assert_eq!(again.checksum(), call.checksum());
            prop_assert_eq!(again.canonical_args(), call.canonical_args());
        }
    }
}

// ---------------------------------------------------------------------------------------
// What was hashed is what runs: integers beyond 2^53 are hashed as the nearest double,
// and the tool receives the number the canonical text names, never the one the model
// spelled; so one checksum always means one received value.

/// A decimal integer of every magnitude up to 2^70, signed or not, and one near it.
fn integer_pair() -> impl Strategy<Value = (String, String)> {
    (
        0u32..=70,
        any::<u128>(),
        any::<bool>(),
        0u128..=4096,
        any::<bool>(),
    )
        .prop_map(|(bits, raw, negative, delta, up)| {
            let a = if bits == 0 { 0 } else { raw >> (128 - bits) };
            let b = if up {
                a.saturating_add(delta)
            } else {
                a.saturating_sub(delta)
            };
            let sign = if negative { "-" } else { "" };
            (format!("{sign}{a}"), format!("{sign}{b}"))
        })
}

/// What a tool with an argument of type `T` would receive from `call`, or `None` when
/// its argument parser refuses the value.
fn received<T: serde::de::DeserializeOwned>(call: &ToolCall) -> Option<T> {
    let contexts = tooltrust::tool::Contexts::new();
    tooltrust::tool::ToolInput::new(call, &contexts)
        .parse::<std::collections::BTreeMap<String, T>>()
        .ok()
        .and_then(|mut args| args.remove("account"))
}

/// Checks that what a tool receives from `call` is what its canonical text names.
fn check_received(call: &ToolCall) -> Result<(), TestCaseError> {
    let named = call
        .canonical_args()
        .strip_prefix("{\"account\":")
        .and_then(|rest| rest.strip_suffix('}'))
        .unwrap_or_default()
        .to_owned();
    // Every integer type that accepts the value receives exactly the named number.
    if let Some(n) = received::<u64>(call) {
        prop_assert_eq!(n.to_string(), named.clone());
    }
    if let Some(n) = received::<i64>(call) {
        prop_assert_eq!(n.to_string(), named.clone());
    }
    if let Some(n) = received::<i128>(call) {
        prop_assert_eq!(n.to_string(), named.clone());
    }
    // A double receives the double the canonical text spells.
    let double = received::<f64>(call).unwrap();
    prop_assert_eq!(canonical_json(&Value::from(double)), named);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4_096))]

    #[test]
    fn one_checksum_means_one_received_value((a, b) in integer_pair()) {
        let call = |n: &str| ToolCall::from_model("pay", &format!("{{\"account\": {n}}}")).unwrap();
        let (ca, cb) = (call(&a), call(&b));
        check_received(&ca)?;
        check_received(&cb)?;
        // Same checksum exactly when the tool receives the same arguments.
        prop_assert_eq!(ca.checksum() == cb.checksum(), ca.args() == cb.args(), "{} {}", a, b);
        prop_assert_eq!(ca.checksum() == cb.checksum(), ca.canonical_args() == cb.canonical_args());
        // An integer a double holds exactly is received as written.
        let exact = a.parse::<i128>().unwrap().unsigned_abs() <= 1 << 53;
        if exact {
            prop_assert_eq!(received::<i128>(&ca), Some(a.parse::<i128>().unwrap()));
        }
        // Calling with what the reviewer read gives the same call.
        let again = ToolCall::from_model("pay", ca.canonical_args()).unwrap();
        prop_assert_eq!(again.checksum(), ca.checksum());
        prop_assert_eq!(again.args(), ca.args());
        // The host's own integers, signed and unsigned, are treated the same way.
        let host = if let Ok(n) = a.parse::<u64>() {
            Some(Value::from(n))
        } else {
            a.parse::<i64>().ok().map(Value::from)
        };
        if let Some(n) = host {
            let from_value = ToolCall::from_value("pay", serde_json::json!({"account": n})).unwrap();
            prop_assert_eq!(from_value.checksum(), ca.checksum());
            prop_assert_eq!(from_value.canonical_args(), ca.canonical_args());
            prop_assert_eq!(from_value.args(), ca.args());
            check_received(&from_value)?;
        }
    }
}

/// Pays into an account: the test's consequential tool, which reports the account it
/// received.
#[tooltrust::tool(trusted)]
fn pay(
    /// The account to pay into.
    account: u64,
) -> String {
    account.to_string()
}

/// Runs `call` through a session, as an agent would, and returns what the tool said;
/// `None` when the tool refused its arguments and did not run.
fn run_pay(call: ToolCall) -> Option<tooltrust::tool::Content> {
    let registry = tooltrust::tools![pay].unwrap();
    let session = tooltrust::Session::builder(registry).build().unwrap();
    let scope = session
        .open_scope(tooltrust::Id::new("agent").unwrap())
        .unwrap();
    match pollster::block_on(scope.call(call)).unwrap() {
        tooltrust::CallOutcome::Ran { output, .. } => Some(output.content),
        tooltrust::CallOutcome::Invalid { .. } => None,
        other => panic!("the call was not run: {other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Through dispatch: two spellings with one checksum pay into one account, the
    /// one the canonical text names; a number whose nearest double is beyond the
    /// tool's type is refused, and nothing runs.
    #[test]
    fn a_tool_runs_with_the_value_that_was_hashed(
        n in prop_oneof![(1u64 << 53)..u64::MAX, (u64::MAX - 2048)..=u64::MAX],
        delta in 0u64..64,
    ) {
        let (a, b) = (n, n.saturating_sub(delta));
        let ca = ToolCall::from_model("pay", &format!("{{\"account\":{a}}}")).unwrap();
        let cb = ToolCall::from_model("pay", &format!("{{\"account\":{b}}}")).unwrap();
        let named = ca
            .canonical_args()
            .trim_start_matches("{\"account\":")
            .trim_end_matches('}')
            .to_owned();
        let paid_a = run_pay(ca.clone());
        match named.parse::<u64>() {
            Ok(_) => prop_assert_eq!(&paid_a, &Some(tooltrust::tool::Content::Text(named))),
            Err(_) => prop_assert_eq!(&paid_a, &None),
        }
        if ca.checksum() == cb.checksum() {
            prop_assert_eq!(run_pay(cb), paid_a);
        }
    }
}

#[test]
fn the_issues_example_pays_the_account_the_reviewer_read() {
    let a = ToolCall::from_model("pay", r#"{"account": 1234567890123456795}"#).unwrap();
    let b = ToolCall::from_model("pay", r#"{"account": 1234567890123456789}"#).unwrap();
    assert_eq!(a.checksum(), b.checksum());
    assert_eq!(a.canonical_args(), r#"{"account":1234567890123456800}"#);
    let paid = Some(tooltrust::tool::Content::Text("1234567890123456800".into()));
    assert_eq!(run_pay(a), paid);
    assert_eq!(run_pay(b), paid);
    // Rounded beyond u64::MAX: refused before it runs.
    let over = ToolCall::from_model("pay", r#"{"account": 18446744073709551615}"#).unwrap();
    assert_eq!(over.canonical_args(), r#"{"account":18446744073709552000}"#);
    assert_eq!(run_pay(over), None);
}
