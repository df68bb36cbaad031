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
//! the nearest double (`12345678901234567890` hashes as `12345678901234567000`). The
//! canonical text therefore names one value for many spellings, and a
//! [`ToolCall`](crate::ToolCall) hands its tool the value the canonical text names,
//! never the one the model spelled (see there).
//!
//! Two writers produce the same bytes: one from a parsed `serde_json::Value`
//! ([`canonical_json`]), and one straight from JSON text, without building a `Value`,
//! which is how a tool call's arguments are canonicalised.

mod number;
mod parse;
mod stream;
mod string;
mod value;

pub use parse::{JsonError, parse_strict};
pub use string::cmp_utf16;

pub(crate) use stream::canonicalize;
pub(crate) use value::{Kind, type_name};

use serde_json::Value;

/// Returns the RFC 8785 canonical text of `value`.
///
/// ```
/// let value = serde_json::json!({"b": [1.0, "é"], "a": 1e21});
/// assert_eq!(tooltrust::canonical::canonical_json(&value), r#"{"a":1e+21,"b":[1,"é"]}"#);
/// ```
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(&mut out, value);
    out
}

/// Appends the canonical text of `value` to `out`.
pub fn write_canonical(out: &mut String, value: &Value) {
    value::write_value(out, value);
}

/// Appends `text` as a canonical JSON string: `"` and `\` escaped, the control
/// characters below U+0020 as `\b \t \n \f \r` or `\u00xx`, everything else raw.
pub fn write_string(out: &mut String, text: &str) {
    string::emit_string(out, text);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The canonical text of `text` by both writers, which must agree.
    fn canonical(text: &str) -> String {
        let through_value = canonical_json(&parse_strict(text).unwrap());
        let (direct, kind) = canonicalize(text).unwrap();
        assert_eq!(direct, through_value, "the two writers disagree on {text}");
        assert_eq!(kind, Kind::of(&parse_strict(text).unwrap()));
        direct
    }

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
            ("-9223372036854775808", "-9223372036854776000"),
            ("123456789012345678901234567890", "1.2345678901234568e+29"),
            ("5e-324", "5e-324"),
            ("1.7976931348623157e308", "1.7976931348623157e+308"),
        ];
        for (input, expected) in cases {
            assert_eq!(canonical(input), expected, "input {input}");
        }
    }

    #[test]
    fn keys_sort_by_utf16_code_units() {
        // U+FB01 sorts after U+1F600 in UTF-16 (0xFB01 > 0xD83D) but before it in UTF-8.
        let value = json!({"\u{fb01}": 1, "\u{1f600}": 2, "a": 3});
        let expected = "{\"a\":3,\"\u{1f600}\":2,\"\u{fb01}\":1}";
        assert_eq!(canonical_json(&value), expected);
        assert_eq!(canonical(&value.to_string()), expected);
    }

    /// A map out of UTF-16 order makes the writers sort; what was written before the
    /// value, and the checksum, come out right.
    #[test]
    fn out_of_order_maps_are_rewritten_sorted() {
        let value = json!([{"b": 1, "a": [{"\u{fb01}": 1, "\u{1f600}": 2}]}, {"z": 0, "y": 1}]);
        let expected = "[{\"a\":[{\"\u{1f600}\":2,\"\u{fb01}\":1}],\"b\":1},{\"y\":1,\"z\":0}]";
        let mut out = String::from("prefix:");
        write_canonical(&mut out, &value);
        assert_eq!(out, format!("prefix:{expected}"));
        assert_eq!(
            canonical(r#"[{"b":1,"a":[{"\ufb01":1,"\ud83d\ude00":2}]},{"z":0,"y":1}]"#),
            expected
        );

        let call =
            crate::ToolCall::from_model("t", r#"{"k":{"\ufb01":1,"\ud83d\ude00":2},"e":"\ue000"}"#)
                .unwrap();
        let canonical =
            "{\"args\":{\"e\":\"\u{e000}\",\"k\":{\"\u{1f600}\":2,\"\u{fb01}\":1}},\"tool\":\"t\"}";
        assert_eq!(call.canonical(), canonical);
        assert_eq!(
            call.checksum(),
            crate::call::Checksum::of(canonical.as_bytes())
        );
    }

    /// Objects big enough to look for repeated keys in a set, in order and not, with
    /// nested objects misordered too.
    #[test]
    fn big_objects_sort_and_refuse_repeats() {
        let keys: Vec<String> = (0..40).map(|i| format!("k{i:02}")).collect();
        let member = |key: &String| format!("\"{key}\":{{\"y\":[1,{{\"b\":2,\"a\":1}}],\"x\":0}}");
        let object = |members: &[String]| format!("{{{}}}", members.join(","));
        let forward: Vec<String> = keys.iter().map(member).collect();
        let backward: Vec<String> = keys.iter().rev().map(member).collect();
        assert_eq!(canonical(&object(&backward)), canonical(&object(&forward)));
        assert!(
            canonical(&object(&backward))
                .starts_with(r#"{"k00":{"x":0,"y":[1,{"a":1,"b":2}]},"k01""#)
        );
        for at in [1, 15, 16, 17, 39] {
            let mut members = backward.clone();
            members.push(format!("\"k{at:02}\":0"));
            let expected = JsonError::DuplicateKey {
                key: format!("k{at:02}"),
            };
            assert_eq!(canonicalize(&object(&members)).unwrap_err(), expected);
            assert_eq!(parse_strict(&object(&members)).unwrap_err(), expected);
        }
    }

    #[test]
    fn strict_parsers_refuse_what_the_reference_would_read_differently() {
        // Both parsers give the same typed error.
        let refused = |text: &str| -> JsonError {
            let error = parse_strict(text).unwrap_err();
            assert_eq!(canonicalize(text).unwrap_err(), error, "{text}");
            error
        };
        assert_eq!(
            refused(r#"{"a":1,"a":2}"#),
            JsonError::DuplicateKey { key: "a".into() }
        );
        assert!(matches!(
            refused(r#"{"a":{"b":1,"b":1}}"#),
            JsonError::DuplicateKey { .. }
        ));
        assert!(matches!(
            refused(r#"{"s":"\udfff x"}"#),
            JsonError::LoneSurrogate { .. }
        ));
        assert!(matches!(
            refused(r#"{"s":"\ud83d"}"#),
            JsonError::LoneSurrogate { .. }
        ));
        for text in [
            r#""\ud800x""#,
            r#""\ud800\u0041""#,
            r#""\ud800\ud800\udc00""#,
            r#""\udc00\ud800""#,
            r#"{"\ud800":1}"#,
        ] {
            assert!(
                matches!(refused(text), JsonError::LoneSurrogate { .. }),
                "{text}"
            );
        }
        // A surrogate pair is fine; a truncated escape is a plain syntax error.
        assert_eq!(
            parse_strict(r#""\ud83d\ude00""#),
            Ok(Value::String("😀".into()))
        );
        assert_eq!(canonical(r#""\ud83d\ude00""#), "\"😀\"");
        assert!(matches!(
            refused(r#""\ud800\u12"#),
            JsonError::Syntax { .. }
        ));
        assert!(matches!(
            refused(r#"{"n":1e400}"#),
            JsonError::NumberOutOfRange { .. }
        ));
        assert!(matches!(
            refused(r#"{"n":-1e400}"#),
            JsonError::NumberOutOfRange { .. }
        ));
        assert!(matches!(refused("{\"a\":1} x"), JsonError::Syntax { .. }));
        // A syntax error keeps what serde_json said, without the position it appends.
        assert_eq!(
            refused("{\"a\":1,\n}"),
            JsonError::Syntax {
                message: "trailing comma".into(),
                line: 2,
                column: 1
            }
        );
        assert!(matches!(refused(""), JsonError::Syntax { .. }));
        // Same keys in sibling objects are fine.
        assert_eq!(canonical(r#"[{"a":1},{"a":1}]"#), r#"[{"a":1},{"a":1}]"#);
    }

    /// Strings are scanned eight bytes at a time: an escape, a quote or a control
    /// character ends a plain run exactly where it is, after any bytes, at any offset.
    #[test]
    fn escapes_and_controls_are_found_at_every_offset() {
        for len in 0..24 {
            let plain: String = "aé😀\u{7f}b".chars().cycle().take(len).collect();
            for escape in ["\\n", "\\\"", "\\\\", "\\u00e9", "\\ud83d\\ude00"] {
                canonical(&format!(
                    "{{\"{plain}{escape}x\":\"{plain}{escape}{plain}\"}}"
                ));
            }
            for control in ["\u{0}", "\u{1f}", "\n"] {
                let text = format!("[\"{plain}{control}\"]");
                assert_eq!(
                    canonicalize(&text).unwrap_err(),
                    parse_strict(&text).unwrap_err()
                );
            }
        }
    }

    /// Exponents far beyond the doubles, offset by as many digits: read to the last
    /// digit, as serde_json reads them.
    #[test]
    fn long_exponents_are_read_exactly() {
        let ones = |zeros: usize, exponent: &str| format!("1{}{exponent}", "0".repeat(zeros));
        assert_eq!(canonical(&ones(65_536, "e-655360")), "0");
        assert_eq!(canonical(&ones(66_000, "e-655360")), "0");
        assert_eq!(canonical(&ones(3, "e-00000000000000003")), "1");
        assert_eq!(canonical(&ones(0, "e300")), "1e+300");
        let far = format!("0.{}1e655360", "0".repeat(65_227));
        assert!(matches!(
            canonicalize(&far).unwrap_err(),
            JsonError::NumberOutOfRange { .. }
        ));
        assert!(parse_strict(&far).is_err());
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
        assert_eq!(canonical("1e2"), "100");
    }

    /// `preserve_order` (also reachable through feature unification) makes maps iterate
    /// in insertion order; the canonical order must not depend on it.
    #[test]
    fn canonical_order_does_not_depend_on_map_order() {
        let expected = "{\"a\":2,\"b\":1,\"😀\":4,\"\u{e000}\":3}";
        assert_eq!(canonical(r#"{"b":1,"a":2,"\ue000":3,"😀":4}"#), expected);
        assert_eq!(canonical(r#"{"😀":4,"\ue000":3,"a":2,"b":1}"#), expected);
    }
}
