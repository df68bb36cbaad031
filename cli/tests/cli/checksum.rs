//! `tooltrust checksum [FILE]`.

use crate::common;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use common::{flagged, tool_call_vectors, tooltrust};

fn lines_of(run: &common::Run) -> Vec<Value> {
    run.stdout_text()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Every vector, fed as one JSON line with all its fields, gets its own answer.
#[test]
fn answers_every_vector_line_by_line() {
    let vectors = tool_call_vectors();
    let input: String = vectors.iter().map(|entry| format!("{entry}\n")).collect();
    let run = tooltrust(&["checksum"], input.as_bytes());
    let answers = lines_of(&run);
    assert_eq!(answers.len(), vectors.len());
    for (index, (entry, answer)) in vectors.iter().zip(&answers).enumerate() {
        if flagged(entry) {
            let error = answer["error"]
                .as_str()
                .unwrap_or_else(|| panic!("{index}: {answer}"));
            assert!(
                error.starts_with(&format!("line {}: ", index + 1)),
                "{error}"
            );
            assert!(answer.get("checksum").is_none());
        } else {
            assert_eq!(answer["canonical"], entry["canonical"], "vector {index}");
            assert_eq!(answer["checksum"], entry["checksum"], "vector {index}");
            let canonical = answer["canonical"].as_str().unwrap();
            assert_eq!(answer["checksum"], sha256_hex(canonical), "vector {index}");
        }
    }
    // Some vectors must be refused, so the run as a whole reports an error.
    assert!(vectors.iter().any(flagged));
    assert_eq!(run.code, Some(1));

    // The same from a file.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("calls.jsonl");
    std::fs::write(&path, &input).unwrap();
    let from_file = tooltrust(&["checksum", path.to_str().unwrap()], b"");
    assert_eq!(from_file.stdout, run.stdout);
    assert_eq!(from_file.code, Some(1));
}

#[test]
fn malformed_lines_get_error_lines_and_the_command_goes_on() {
    let good = json!({"tool": "sum", "args_json": "{\"b\":2,\"a\":1}"}).to_string();
    let input = [
        good.as_str(),
        "not json",
        "",
        "[1,2]",
        r#"{"tool": 7, "args_json": "{}"}"#,
        r#"{"tool": "t"}"#,
        r#"{"tool": "t", "args_json": "{\"a\":1,\"a\":2}"}"#,
        r#"{"tool": "t", "args_json": "{\"s\":\"\\ud800\"}"}"#,
        r#"{"tool": "t", "args_json": "[1]"}"#,
        r#"{"tool": "t", "args_json": "{\"n\":1e400}"}"#,
        r#"{"tool": "t", "args_json": "{}", "tool": "u"}"#,
        good.as_str(),
    ]
    .join("\n");
    let mut bytes = input.into_bytes();
    bytes.extend_from_slice(b"\n\xff\xfe\n");
    let run = tooltrust(&["checksum"], &bytes);
    assert_eq!(run.code, Some(1));
    let answers = lines_of(&run);
    assert_eq!(answers.len(), 13, "{}", run.stdout_text());
    let expected_errors = [
        (2, "not a JSON object"),
        (3, "empty line"),
        (4, "expected a JSON object"),
        (5, "`tool` must be a string"),
        (6, "no `args_json`"),
        (7, "duplicate key"),
        (8, "lone surrogate"),
        (9, "must be a JSON object"),
        (10, "out of range"),
        (11, "duplicate key \"tool\""),
        (13, "not UTF-8"),
    ];
    for (line, message) in expected_errors {
        let error = answers[line - 1]["error"].as_str().unwrap_or_default();
        assert!(error.starts_with(&format!("line {line}: ")), "{error}");
        assert!(error.contains(message), "line {line}: {error}");
    }
    for line in [1, 12] {
        assert_eq!(
            answers[line - 1],
            json!({
                "checksum": "4b5f4a811e7ac35838aea6f9316dd2b110af329297955540cd1c1c8cbe6d81cd",
                "canonical": "{\"args\":{\"a\":1,\"b\":2},\"tool\":\"sum\"}",
            })
        );
    }
}

#[test]
fn all_good_input_exits_0_and_accepts_crlf() {
    let input = "{\"tool\":\"a\",\"args_json\":\"\"}\r\n{\"tool\":\"b\",\"args_json\":\"{\\\"x\\\":[1.0,\\\"\\u00e9\\\"]}\"}";
    let run = tooltrust(&["checksum"], input.as_bytes());
    assert_eq!(run.code, Some(0), "{}", run.stdout_text());
    let answers = lines_of(&run);
    assert_eq!(answers.len(), 2);
    assert_eq!(answers[0]["canonical"], "{\"args\":{},\"tool\":\"a\"}");
    assert_eq!(
        answers[1]["canonical"],
        "{\"args\":{\"x\":[1,\"é\"]},\"tool\":\"b\"}"
    );
    for answer in &answers {
        let canonical = answer["canonical"].as_str().unwrap();
        assert_eq!(answer["checksum"], sha256_hex(canonical));
    }
    let run = tooltrust(&["checksum"], b"");
    assert_eq!((run.code, run.stdout.len()), (Some(0), 0));
}

#[test]
fn a_missing_file_is_an_error() {
    let run = tooltrust(&["checksum", "/nonexistent/calls.jsonl"], b"");
    assert_eq!(run.code, Some(1));
    assert!(run.stderr.contains("cannot open"), "{}", run.stderr);
}
