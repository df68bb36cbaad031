//! RFC 8785 canonical JSON (JCS), and the strict parser that feeds it.
//!
//! Canonical form: object keys sorted by their UTF-16 code units, numbers in ECMAScript
//! `Number.prototype.toString` form, strings with minimal escaping, no whitespace. It is
//! byte-identical to the reference implementation for every JSON input, with one
//! deliberate difference in the parser: a duplicate key in one object is an error here,
//! where the reference keeps the last value (two parsers that disagree on duplicates
//! are an attack surface).
//!
//! Numbers are IEEE doubles, as in the reference: an integer beyond 2^53 is rounded to
//! the nearest double (`12345678901234567890` hashes as `12345678901234567000`).

use std::cell::RefCell;
use std::cmp::Ordering;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Number, Value};

/// Returns the RFC 8785 canonical text of `value`.
///
/// ```
/// let value = serde_json::json!({"b": [1.0, "é"], "a": 1e21});
/// assert_eq!(tooltrust::canonical_json(&value), r#"{"a":1e+21,"b":[1,"é"]}"#);
/// ```
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(&mut out, value);
    out
}

/// Appends the canonical text of `value` to `out`.
pub fn write_canonical(out: &mut String, value: &Value) {
    let start = out.len();
    emit_canonical(
        out,
        |out, order| emit_value(out, value, order),
        |out| out.truncate(start),
    );
}

/// Appends `text` as a canonical JSON string: `"` and `\` escaped, the control
/// characters below U+0020 as `\b \t \n \f \r` or `\u00xx`, everything else raw.
pub fn write_string(out: &mut String, text: &str) {
    emit_string(out, text);
}

/// Where canonical text goes: a `String`, or a hasher that never holds the whole text.
pub(crate) trait Sink {
    /// Appends `text`.
    fn push_str(&mut self, text: &str);
    /// Appends one ASCII punctuation byte (`"`, `,`, `:`, brackets).
    fn push_ascii(&mut self, byte: u8);
}

impl Sink for String {
    #[inline]
    fn push_str(&mut self, text: &str) {
        String::push_str(self, text);
    }

    #[inline]
    fn push_ascii(&mut self, byte: u8) {
        self.push(char::from(byte));
    }
}

/// How objects are written. serde_json's map iterates in UTF-8 order (or insertion order
/// under its `preserve_order` feature), and UTF-16 order differs from UTF-8 order only
/// when keys mix U+E000..U+FFFF with astral characters. So a first pass writes members as
/// the map iterates them, checking the order as it goes, and only when some map was out
/// of UTF-16 order does a second pass sort every object.
#[derive(Debug, Default)]
pub(crate) struct Order {
    sort: bool,
    misordered: bool,
}

/// Writes canonical text with `emit`; when the first pass finds a map out of order,
/// `restart` undoes what it wrote and `emit` runs again with every object sorted.
pub(crate) fn emit_canonical<S: Sink>(
    out: &mut S,
    emit: impl Fn(&mut S, &mut Order),
    restart: impl FnOnce(&mut S),
) {
    let mut order = Order::default();
    emit(out, &mut order);
    if order.misordered {
        restart(out);
        emit(
            out,
            &mut Order {
                sort: true,
                misordered: false,
            },
        );
    }
}

pub(crate) fn emit_value<S: Sink>(out: &mut S, value: &Value, order: &mut Order) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(number) => emit_number(out, number),
        Value::String(text) => emit_string(out, text),
        Value::Array(items) => {
            out.push_ascii(b'[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push_ascii(b',');
                }
                emit_value(out, item, order);
            }
            out.push_ascii(b']');
        }
        Value::Object(map) => emit_object(out, map, order),
    }
}

pub(crate) fn emit_object<S: Sink>(out: &mut S, map: &Map<String, Value>, order: &mut Order) {
    if order.misordered {
        // This pass is discarded; the sorted one will write the text.
        return;
    }
    out.push_ascii(b'{');
    if order.sort {
        let mut members: Vec<(&String, &Value)> = map.iter().collect();
        members.sort_unstable_by(|a, b| cmp_utf16(a.0, b.0));
        for (index, (key, item)) in members.into_iter().enumerate() {
            if index > 0 {
                out.push_ascii(b',');
            }
            emit_member(out, key, item, order);
        }
    } else {
        let mut previous: Option<&str> = None;
        for (key, item) in map {
            if let Some(previous) = previous {
                if cmp_utf16(previous, key) != Ordering::Less {
                    order.misordered = true;
                }
                out.push_ascii(b',');
            }
            emit_member(out, key, item, order);
            previous = Some(key);
        }
    }
    out.push_ascii(b'}');
}

fn emit_member<S: Sink>(out: &mut S, key: &str, item: &Value, order: &mut Order) {
    emit_string(out, key);
    out.push_ascii(b':');
    emit_value(out, item, order);
}

/// Compares two strings by their UTF-16 code units, as RFC 8785 sorts keys.
pub fn cmp_utf16(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    match a.iter().zip(b).position(|(x, y)| x != y) {
        // One is a prefix of the other.
        None => a.len().cmp(&b.len()),
        Some(at) => {
            let (x, y) = (a.get(at).copied(), b.get(at).copied());
            // UTF-8 byte order is code point order. UTF-16 order differs only between
            // U+E000..U+FFFF (lead bytes EE, EF) and astral characters (lead bytes
            // F0..F4, surrogates D800..DBFF in UTF-16), which it puts first. A
            // difference in a continuation byte is one within a single range.
            let bmp_high = |byte: Option<u8>| matches!(byte, Some(0xEE | 0xEF));
            let astral = |byte: Option<u8>| matches!(byte, Some(0xF0..=0xF4));
            if (bmp_high(x) && astral(y)) || (astral(x) && bmp_high(y)) {
                y.cmp(&x)
            } else {
                x.cmp(&y)
            }
        }
    }
}

fn emit_number<S: Sink>(out: &mut S, number: &Number) {
    const EXACT: u64 = 1 << 53;
    if let Some(n) = number.as_u64() {
        if n <= EXACT {
            out.push_str(itoa::Buffer::new().format(n));
            return;
        }
    } else if let Some(n) = number.as_i64()
        && n.unsigned_abs() <= EXACT
    {
        out.push_str(itoa::Buffer::new().format(n));
        return;
    }
    // Integers beyond 2^53 and all fractions: the nearest double, in ECMAScript form.
    // serde_json never holds a non-finite number, so `as_f64` always answers.
    let double = number.as_f64().unwrap_or(0.0);
    // ECMAScript writes an integral double below 2^53 as its integer digits, and
    // `-0` as `0`; itoa is much faster than the general algorithm for these.
    if double.fract() == 0.0 && double.abs() <= EXACT as f64 {
        out.push_str(itoa::Buffer::new().format(double as i64));
    } else {
        out.push_str(ryu_js::Buffer::new().format_finite(double));
    }
}

pub(crate) fn emit_string<S: Sink>(out: &mut S, text: &str) {
    out.push_ascii(b'"');
    let bytes = text.as_bytes();
    // Runs without escapes go out in one piece. Escaped bytes are ASCII, so both ends of
    // every run are character boundaries.
    let mut run = 0;
    while let Some(at) = bytes
        .get(run..)
        .and_then(find_escape)
        .map(|found| run + found)
    {
        let (Some(raw), Some(&byte)) = (text.get(run..at), bytes.get(at)) else {
            break;
        };
        out.push_str(raw);
        // Most escapes are two bytes; writing them as bytes avoids a copy call.
        let escape = ESCAPES[usize::from(byte)];
        match escape.as_bytes() {
            &[backslash, letter] => {
                out.push_ascii(backslash);
                out.push_ascii(letter);
            }
            _ => out.push_str(escape),
        }
        run = at + 1;
    }
    out.push_str(text.get(run..).unwrap_or_default());
    out.push_ascii(b'"');
}

/// The escape of each byte: `"` and `\`, and U+0000..U+001F in their short forms where
/// JSON has one; empty for every byte written as it is.
const ESCAPES: [&str; 256] = {
    const CONTROL: [&str; 32] = [
        "\\u0000", "\\u0001", "\\u0002", "\\u0003", "\\u0004", "\\u0005", "\\u0006", "\\u0007",
        "\\b", "\\t", "\\n", "\\u000b", "\\f", "\\r", "\\u000e", "\\u000f", "\\u0010", "\\u0011",
        "\\u0012", "\\u0013", "\\u0014", "\\u0015", "\\u0016", "\\u0017", "\\u0018", "\\u0019",
        "\\u001a", "\\u001b", "\\u001c", "\\u001d", "\\u001e", "\\u001f",
    ];
    let mut table = [""; 256];
    let mut byte = 0;
    while byte < CONTROL.len() {
        table[byte] = CONTROL[byte];
        byte += 1;
    }
    table[b'"' as usize] = "\\\"";
    table[b'\\' as usize] = "\\\\";
    table
};

/// The index of the first byte of `bytes` that needs an escape, eight bytes at a time.
fn find_escape(bytes: &[u8]) -> Option<usize> {
    if bytes.len() < 8 {
        return bytes
            .iter()
            .position(|&byte| !ESCAPES[usize::from(byte)].is_empty());
    }
    let (words, _) = bytes.as_chunks::<8>();
    for (index, word) in words.iter().enumerate() {
        let found = escape_mask(*word);
        if found != 0 {
            return Some(index * 8 + (found.trailing_zeros() / 8) as usize);
        }
    }
    // The last eight bytes overlap words already found clean, so their first flagged
    // byte is the first escape of the tail.
    let found = escape_mask(*bytes.last_chunk::<8>()?);
    (found != 0).then(|| bytes.len() - 8 + (found.trailing_zeros() / 8) as usize)
}

/// The high bit of each byte of `word` that needs an escape. Only the lowest set bit is
/// exact: a borrow runs upward only from a byte that matched, so bits above the first
/// match may be spurious, and bits below it never are.
#[inline]
fn escape_mask(word: [u8; 8]) -> u64 {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGHS: u64 = ONES << 7;
    let word = u64::from_le_bytes(word);
    let quote = word ^ (ONES * u64::from(b'"'));
    let backslash = word ^ (ONES * u64::from(b'\\'));
    (word.wrapping_sub(ONES * 0x20) & !word
        | quote.wrapping_sub(ONES) & !quote
        | backslash.wrapping_sub(ONES) & !backslash)
        & HIGHS
}

/// How an error message names a JSON value's type ("an object", "a string"…).
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Why a JSON text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonError {
    /// The text is not JSON.
    #[error("invalid JSON at line {line}, column {column}: {message}")]
    Syntax {
        /// What the parser said.
        message: String,
        /// 1-based line of the fault.
        line: usize,
        /// 1-based column of the fault.
        column: usize,
    },
    /// A string holds a lone or reversed UTF-16 surrogate escape, which no UTF-8 text
    /// can represent.
    #[error("lone surrogate in a string escape at line {line}, column {column}")]
    LoneSurrogate {
        /// 1-based line of the fault.
        line: usize,
        /// 1-based column of the fault.
        column: usize,
    },
    /// A number is too large for a double (`1e400`).
    #[error("number out of range of a double at line {line}, column {column}")]
    NumberOutOfRange {
        /// 1-based line of the fault.
        line: usize,
        /// 1-based column of the fault.
        column: usize,
    },
    /// One object holds the same key twice.
    #[error("duplicate key {key:?} in one object")]
    DuplicateKey {
        /// The repeated key.
        key: String,
    },
}

/// Parses JSON text strictly: like `serde_json::from_str`, but a duplicate key in one
/// object is an error, and every fault has its own variant.
pub fn parse_strict(text: &str) -> Result<Value, JsonError> {
    let duplicate = RefCell::new(None);
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value = StrictSeed(&duplicate)
        .deserialize(&mut deserializer)
        .and_then(|value| deserializer.end().map(|()| value));
    value.map_err(|error| match duplicate.into_inner() {
        Some(key) => JsonError::DuplicateKey { key },
        None => classify(&error),
    })
}

fn classify(error: &serde_json::Error) -> JsonError {
    let message = error.to_string();
    let (line, column) = (error.line(), error.column());
    // serde_json reports surrogate faults with these two messages only: a low surrogate
    // or a high one followed by a non-low escape, and a high one not followed by `\u`.
    if message.starts_with("lone leading surrogate in hex escape")
        || message.starts_with("unexpected end of hex escape")
    {
        JsonError::LoneSurrogate { line, column }
    } else if message.starts_with("number out of range") {
        JsonError::NumberOutOfRange { line, column }
    } else {
        let message = message
            .rsplit_once(" at line ")
            .map_or(message.as_str(), |(head, _)| head)
            .to_owned();
        JsonError::Syntax {
            message,
            line,
            column,
        }
    }
}

/// Builds a `Value`, refusing duplicate keys; the first duplicate found is kept in the
/// slot so that the error names it exactly.
#[derive(Clone, Copy)]
struct StrictSeed<'a>(&'a RefCell<Option<String>>);

impl<'de> DeserializeSeed<'de> for StrictSeed<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictSeed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("number out of range"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element_seed(self)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            // Refuse at the repeated key, before reading (possibly much) more.
            match map.entry(key) {
                Entry::Vacant(slot) => {
                    slot.insert(access.next_value_seed(self)?);
                }
                Entry::Occupied(slot) => {
                    let key = slot.key().clone();
                    let error = de::Error::custom(format_args!("duplicate key {key:?}"));
                    *self.0.borrow_mut() = Some(key);
                    return Err(error);
                }
            }
        }
        Ok(Value::Object(map))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_take_ecmascript_form() {
        let cases = [
            ("0", "0"),
            ("-0", "0"),
            ("-0.0", "0"),
            ("1.0", "1"),
            ("1E21", "1e+21"),
            ("1e20", "100000000000000000000"),
            ("1e-7", "1e-7"),
            ("0.000001", "0.000001"),
            ("9007199254740993", "9007199254740992"),
            ("-9007199254740993", "-9007199254740992"),
            ("18446744073709551615", "18446744073709552000"),
            ("12345678901234567890", "12345678901234567000"),
            ("5e-324", "5e-324"),
            ("1.7976931348623157e308", "1.7976931348623157e+308"),
        ];
        for (input, expected) in cases {
            let value = parse_strict(input).unwrap();
            assert_eq!(canonical_json(&value), expected, "input {input}");
        }
    }

    #[test]
    fn keys_sort_by_utf16_code_units() {
        // U+FB01 sorts after U+1F600 in UTF-16 (0xFB01 > 0xD83D) but before it in UTF-8.
        let value = json!({"\u{fb01}": 1, "\u{1f600}": 2, "a": 3});
        assert_eq!(
            canonical_json(&value),
            "{\"a\":3,\"\u{1f600}\":2,\"\u{fb01}\":1}"
        );
        assert_eq!(cmp_utf16("a", "ab"), Ordering::Less);
        assert_eq!(cmp_utf16("\u{1f600}", "\u{e000}"), Ordering::Less);
        assert_eq!(cmp_utf16("\u{d7ff}", "\u{1f600}"), Ordering::Less);
        assert_eq!(cmp_utf16("\u{1f600}", "\u{1f601}"), Ordering::Less);
    }

    /// A map out of UTF-16 order makes the writer start over with every object sorted;
    /// what was written before the value, and the checksum, come out right.
    #[test]
    fn out_of_order_maps_are_rewritten_sorted() {
        let value = json!([{"b": 1, "a": [{"\u{fb01}": 1, "\u{1f600}": 2}]}, {"z": 0, "y": 1}]);
        let expected = "[{\"a\":[{\"\u{1f600}\":2,\"\u{fb01}\":1}],\"b\":1},{\"y\":1,\"z\":0}]";
        let mut out = String::from("prefix:");
        write_canonical(&mut out, &value);
        assert_eq!(out, format!("prefix:{expected}"));

        let call =
            crate::ToolCall::from_model("t", r#"{"k":{"\ufb01":1,"\ud83d\ude00":2},"e":"\ue000"}"#)
                .unwrap();
        let canonical =
            "{\"args\":{\"e\":\"\u{e000}\",\"k\":{\"\u{1f600}\":2,\"\u{fb01}\":1}},\"tool\":\"t\"}";
        assert_eq!(call.canonical(), canonical);
        assert_eq!(call.checksum(), crate::Checksum::of(canonical.as_bytes()));
    }

    #[test]
    fn strings_escape_minimally() {
        let value = json!("q\" b\\ / \u{8}\u{c}\n\r\t\u{0}\u{1f}\u{7f}\u{80}\u{2028}é");
        assert_eq!(
            canonical_json(&value),
            "\"q\\\" b\\\\ / \\b\\f\\n\\r\\t\\u0000\\u001f\u{7f}\u{80}\u{2028}é\""
        );
    }

    /// The first flagged byte is the first byte that needs escaping, whatever its
    /// neighbours (the flags above it may be spurious, and are never used).
    #[test]
    fn escape_masks_find_the_first_byte_that_needs_escaping() {
        let needs = |byte: u8| byte < 0x20 || byte == b'"' || byte == b'\\';
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                for word in [[a, b, b, a, a, a, b, b], [b, b, b, b, b, b, b, a]] {
                    let expected = word.iter().position(|&byte| needs(byte));
                    let mask = escape_mask(word);
                    let found = (mask != 0).then(|| (mask.trailing_zeros() / 8) as usize);
                    assert_eq!(found, expected, "{word:?}");
                    assert_eq!(find_escape(&word), expected, "{word:?}");
                }
            }
        }
    }

    #[test]
    fn strict_parser_refuses_what_the_reference_would_read_differently() {
        assert!(matches!(
            parse_strict(r#"{"a":1,"a":2}"#),
            Err(JsonError::DuplicateKey { key }) if key == "a"
        ));
        assert!(matches!(
            parse_strict(r#"{"a":{"b":1,"b":1}}"#),
            Err(JsonError::DuplicateKey { .. })
        ));
        assert!(matches!(
            parse_strict(r#"{"s":"\udfff x"}"#),
            Err(JsonError::LoneSurrogate { .. })
        ));
        assert!(matches!(
            parse_strict(r#"{"s":"\ud83d"}"#),
            Err(JsonError::LoneSurrogate { .. })
        ));
        for text in [
            r#""\ud800x""#,
            r#""\ud800\u0041""#,
            r#""\ud800\ud800\udc00""#,
            r#""\udc00\ud800""#,
            r#"{"\ud800":1}"#,
        ] {
            assert!(
                matches!(parse_strict(text), Err(JsonError::LoneSurrogate { .. })),
                "{text}"
            );
        }
        // A surrogate pair is fine; a truncated escape is a plain syntax error.
        assert_eq!(
            parse_strict(r#""\ud83d\ude00""#),
            Ok(Value::String("😀".into()))
        );
        assert!(matches!(
            parse_strict(r#""\ud800\u12"#),
            Err(JsonError::Syntax { .. })
        ));
        assert!(matches!(
            parse_strict(r#"{"n":1e400}"#),
            Err(JsonError::NumberOutOfRange { .. })
        ));
        assert!(matches!(
            parse_strict(r#"{"n":-1e400}"#),
            Err(JsonError::NumberOutOfRange { .. })
        ));
        assert!(matches!(
            parse_strict("{\"a\":1} x"),
            Err(JsonError::Syntax { .. })
        ));
        assert!(matches!(parse_strict(""), Err(JsonError::Syntax { .. })));
        // Same keys in sibling objects are fine.
        assert!(parse_strict(r#"[{"a":1},{"a":1}]"#).is_ok());
    }

    /// Feature unification could switch on `arbitrary_precision`, under which numbers
    /// keep their spelling and `1e2` would no longer canonicalise through a double.
    #[test]
    fn serde_json_arbitrary_precision_is_off() {
        let value: Value = serde_json::from_str("1e2").unwrap();
        assert_eq!(
            serde_json::to_string(&value).unwrap(),
            "100.0",
            "serde_json's arbitrary_precision feature is on: canonical numbers would break"
        );
        assert_eq!(canonical_json(&parse_strict("1e2").unwrap()), "100");
    }

    /// `preserve_order` (also reachable through feature unification) makes maps iterate
    /// in insertion order; the canonical order must not depend on it.
    #[test]
    fn canonical_order_does_not_depend_on_map_order() {
        let forward = parse_strict(r#"{"b":1,"a":2,"\ue000":3,"😀":4}"#).unwrap();
        let backward = parse_strict(r#"{"😀":4,"\ue000":3,"a":2,"b":1}"#).unwrap();
        let expected = "{\"a\":2,\"b\":1,\"😀\":4,\"\u{e000}\":3}";
        assert_eq!(canonical_json(&forward), expected);
        assert_eq!(canonical_json(&backward), expected);
    }
}
