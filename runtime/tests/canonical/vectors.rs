//! Conformance with the reference: RFC 8785 pairs and the reference's tool-call vectors.

use crate::canonical::reference;

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};
use tooltrust::ToolCall;
use tooltrust::call::{CallError, CallErrorReason};
use tooltrust::canonical::{JsonError, canonical_json, parse_strict};

use reference::Fault;

fn data(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/vectors")
        .join(path)
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Every `input/NAME.json` with its `output/NAME.json`, sorted by name; both folders
/// must hold the same names.
fn jcs_pairs() -> Vec<(String, String, Vec<u8>)> {
    let names = |folder: &str| -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(data(folder))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    };
    let inputs = names("jcs/input");
    assert_eq!(
        inputs,
        names("jcs/output"),
        "input/ and output/ must pair up"
    );
    assert!(inputs.len() >= 20, "the JCS vectors are missing");
    inputs
        .into_iter()
        .map(|name| {
            let input = fs::read_to_string(data(&format!("jcs/input/{name}"))).unwrap();
            let output = fs::read(data(&format!("jcs/output/{name}"))).unwrap();
            (name, input, output)
        })
        .collect()
}

#[test]
fn every_jcs_pair_canonicalises_to_its_output() {
    for (name, input, output) in jcs_pairs() {
        let value = parse_strict(&input).unwrap_or_else(|e| panic!("{name}: {e}"));
        let canonical = canonical_json(&value);
        assert!(
            canonical.as_bytes() == output.as_slice(),
            "{name}:\nexpected {}\nactual   {canonical}",
            String::from_utf8_lossy(&output)
        );
    }
}

/// The oracle that classifies refused vectors must itself agree with RFC 8785.
#[test]
fn the_reference_reading_agrees_with_every_jcs_pair() {
    for (name, input, output) in jcs_pairs() {
        let reading = reference::read(&input).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(reading.fault, None, "{name}");
        assert_eq!(reading.canonical.as_bytes(), output.as_slice(), "{name}");
    }
}

/// Checks every entry of a tool-call vector file: accepted calls reproduce `canonical`
/// and `checksum` exactly; entries flagged `args_unrepresentable` are refused with the
/// typed error that names the first fault in their text.
fn check_tool_call_vectors(text: &str) -> usize {
    let entries: Vec<Value> = serde_json::from_str(text).unwrap();
    assert!(!entries.is_empty(), "no vectors");
    for (index, entry) in entries.iter().enumerate() {
        let field = |name: &str| -> &str {
            entry[name]
                .as_str()
                .unwrap_or_else(|| panic!("vector {index}: `{name}` must be a string"))
        };
        let (tool, args_json) = (field("tool"), field("args_json"));
        let (canonical, checksum) = (field("canonical"), field("checksum"));
        let case = format!("vector {index} ({tool} {args_json:?})");

        // The vector is self-consistent, and the oracle reads it as the reference did.
        assert_eq!(sha256_hex(canonical.as_bytes()), checksum, "{case}");
        let args_text = if args_json.is_empty() {
            "{}"
        } else {
            args_json
        };
        let reading = reference::read(args_text).unwrap_or_else(|e| panic!("{case}: {e}"));
        let mut call_text = String::from("{\"args\":");
        call_text.push_str(&reading.canonical);
        call_text.push_str(",\"tool\":");
        call_text.push_str(&serde_json::to_string(tool).unwrap());
        call_text.push('}');
        assert_eq!(
            call_text, canonical,
            "{case}: the oracle disagrees with the reference"
        );

        let flagged = !matches!(
            entry.get("args_unrepresentable"),
            None | Some(Value::Null | Value::Bool(false))
        );
        let result = ToolCall::from_model(tool, args_json);
        if flagged {
            let fault = reading
                .fault
                .unwrap_or_else(|| panic!("{case}: flagged, but nothing in it is unrepresentable"));
            let reason = match result {
                Err(CallError { reason, .. }) => reason,
                Ok(call) => panic!("{case}: accepted with checksum {}", call.checksum()),
            };
            match (&fault, &reason) {
                (
                    Fault::DuplicateKey(want),
                    CallErrorReason::Json(JsonError::DuplicateKey { key }),
                ) if want == key => {}
                (Fault::LoneSurrogate, CallErrorReason::Json(JsonError::LoneSurrogate { .. })) => {}
                (
                    Fault::NumberOutOfRange,
                    CallErrorReason::Json(JsonError::NumberOutOfRange { .. }),
                ) => {}
                _ => panic!("{case}: expected a refusal for {fault:?}, got {reason:?}"),
            }
        } else {
            assert_eq!(
                reading.fault, None,
                "{case}: unrepresentable but not flagged"
            );
            let call = result.unwrap_or_else(|e| panic!("{case}: {e}"));
            assert_eq!(call.canonical(), canonical, "{case}");
            assert_eq!(call.checksum().to_hex(), checksum, "{case}");
            assert_eq!(call.tool(), tool, "{case}");
        }
    }
    entries.len()
}

#[test]
fn every_reference_tool_call_vector_passes() {
    let text = fs::read_to_string(data("adk-tool-calls.json")).unwrap();
    let count = check_tool_call_vectors(&text);
    assert!(count >= 33);
}

/// The checker catches a vector whose checksum the code does not reproduce, and a
/// flagged vector that the code accepts.
#[test]
fn the_vector_checker_fails_on_wrong_vectors() {
    let canonical = r#"{"args":{"a":1},"tool":"t"}"#;
    let good = serde_json::json!([{
        "tool": "t", "args_json": "{\"a\":1}",
        "canonical": canonical, "checksum": sha256_hex(canonical.as_bytes()),
    }]);
    assert_eq!(check_tool_call_vectors(&good.to_string()), 1);

    let mut wrong_checksum = good.clone();
    wrong_checksum[0]["checksum"] = Value::String(sha256_hex(b"other"));
    let mut wrong_canonical = good.clone();
    wrong_canonical[0]["canonical"] = Value::String(r#"{"args":{"a":2},"tool":"t"}"#.into());
    let mut flagged_but_fine = good.clone();
    flagged_but_fine[0]["args_unrepresentable"] = Value::Bool(true);
    let mut refused_but_not_flagged = good.clone();
    refused_but_not_flagged[0]["args_json"] = Value::String(r#"{"a":1,"a":1}"#.into());
    for (name, vectors) in [
        ("wrong checksum", wrong_checksum),
        ("wrong canonical", wrong_canonical),
        ("flagged but fine", flagged_but_fine),
        ("refused but not flagged", refused_but_not_flagged),
    ] {
        let outcome = std::panic::catch_unwind(|| check_tool_call_vectors(&vectors.to_string()));
        assert!(outcome.is_err(), "{name}: the checker should fail");
    }
}

#[test]
fn empty_argument_text_is_an_empty_object() {
    let call = ToolCall::from_model("ping", "").unwrap();
    assert_eq!(call.canonical(), r#"{"args":{},"tool":"ping"}"#);
    assert_eq!(
        call.checksum(),
        ToolCall::from_model("ping", "{}").unwrap().checksum()
    );
    assert!(call.args().is_empty());
    // Only the empty text: whitespace alone is not JSON.
    let error = ToolCall::from_model("ping", " \n").unwrap_err();
    assert!(matches!(
        error.reason,
        CallErrorReason::Json(JsonError::Syntax { .. })
    ));
}

#[test]
fn overflowing_numbers_are_refused() {
    for text in [
        r#"{"n":1e400}"#,
        r#"{"n":-1e400}"#,
        r#"{"n":[1,{"m":1E+309}]}"#,
    ] {
        let error = ToolCall::from_model("num", text).unwrap_err();
        assert!(
            matches!(
                error.reason,
                CallErrorReason::Json(JsonError::NumberOutOfRange { .. })
            ),
            "{text}: {error:?}"
        );
        assert_eq!(error.tool, "num");
    }
    // Underflow is not overflow: it rounds to zero as in the reference.
    let call = ToolCall::from_model("num", r#"{"n":1e-400}"#).unwrap();
    assert_eq!(call.canonical(), r#"{"args":{"n":0},"tool":"num"}"#);
}

#[test]
fn non_object_arguments_are_refused() {
    let cases = [
        ("[]", "an array"),
        ("[1,2]", "an array"),
        ("\"text\"", "a string"),
        ("1", "a number"),
        ("true", "a boolean"),
        ("null", "null"),
    ];
    for (text, what) in cases {
        let error = ToolCall::from_model("t", text).unwrap_err();
        assert_eq!(error.reason, CallErrorReason::NotAnObject(what), "{text}");
    }
    let error = ToolCall::from_value("t", serde_json::json!([1])).unwrap_err();
    assert_eq!(error.reason, CallErrorReason::NotAnObject("an array"));
}

#[test]
fn invalid_json_is_a_syntax_error() {
    for text in [
        "{",
        "{\"a\":}",
        "{'a':1}",
        "{\"a\":1,}",
        "{\"a\":1} {}",
        "{\"a\":NaN}",
    ] {
        let error = ToolCall::from_model("t", text).unwrap_err();
        assert!(
            matches!(
                error.reason,
                CallErrorReason::Json(JsonError::Syntax { .. })
            ),
            "{text}: {error:?}"
        );
    }
}

#[test]
fn duplicate_keys_are_refused_at_any_depth() {
    for (text, key) in [
        (r#"{"a":1,"a":1}"#, "a"),
        (r#"{"x":[{"k":{"a":1,"b":2,"a":3}}]}"#, "a"),
        // The same key spelled two ways is still the same key.
        (r#"{"é":1,"\u00e9":2}"#, "é"),
    ] {
        let error = ToolCall::from_model("t", text).unwrap_err();
        assert_eq!(
            error.reason,
            CallErrorReason::Json(JsonError::DuplicateKey { key: key.into() }),
            "{text}"
        );
    }
}
