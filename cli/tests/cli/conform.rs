//! `tooltrust conform PATH...` on the project's vectors and on corrupted copies.

use crate::common;

use std::fs;
use std::path::Path;

use serde_json::{Value, json};

use common::{flagged, tool_call_vectors, tooltrust, vectors};

fn conform(paths: &[&Path]) -> common::Run {
    let mut args = vec!["conform"];
    args.extend(paths.iter().map(|p| p.to_str().unwrap()));
    tooltrust(&args, b"")
}

/// The `N passed, M failed` line, which must be the last.
fn totals(run: &common::Run) -> (usize, usize) {
    let text = run.stdout_text();
    let last = text.lines().last().unwrap_or_default().to_owned();
    let numbers: Vec<usize> = last
        .split(|c: char| !c.is_ascii_digit())
        .filter(|part| !part.is_empty())
        .map(|part| part.parse().unwrap())
        .collect();
    assert_eq!(
        last,
        format!("{} passed, {} failed", numbers[0], numbers[1])
    );
    (numbers[0], numbers[1])
}

fn jcs_input_count() -> usize {
    fs::read_dir(vectors("jcs/input")).unwrap().count()
}

/// Writes `entries` as a vector file in `dir`.
fn vector_file(dir: &Path, name: &str, entries: &Value) -> std::path::PathBuf {
    let path = dir.join(name);
    fs::write(&path, serde_json::to_string_pretty(entries).unwrap()).unwrap();
    path
}

#[test]
fn the_projects_tool_call_and_jcs_vectors_pass() {
    let calls = vectors("adk-tool-calls.json");
    let jcs = vectors("jcs");
    let run = conform(&[&calls, &jcs]);
    let expected = tool_call_vectors().len() + jcs_input_count();
    assert_eq!(totals(&run), (expected, 0), "{}", run.stdout_text());
    assert_eq!(run.code, Some(0));
    let text = run.stdout_text();
    assert!(!text.contains("FAIL"), "{text}");
    assert!(
        !text.contains("not checked"),
        "every field is checked: {text}"
    );
}

#[test]
fn the_projects_envelope_vectors_pass() {
    let path = vectors("adk-envelopes.json");
    let entries: Vec<Value> = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    let run = conform(&[&path]);
    assert_eq!(totals(&run), (entries.len(), 0), "{}", run.stdout_text());
    assert_eq!(run.code, Some(0));
}

#[test]
fn a_changed_rendering_fails_and_shows_both_sides() {
    let dir = tempfile::tempdir().unwrap();
    let mut entries: Vec<Value> =
        serde_json::from_str(&fs::read_to_string(vectors("adk-envelopes.json")).unwrap()).unwrap();
    let original = entries[0]["rendered"].as_str().unwrap().to_owned();
    entries[0]["rendered"] = json!(original.replace("Be polite.", "Be rude."));
    let path = vector_file(dir.path(), "envelopes.json", &Value::Array(entries.clone()));
    let run = conform(&[&path]);
    let text = run.stdout_text();
    assert_eq!(totals(&run), (entries.len() - 1, 1), "{text}");
    assert_eq!(run.code, Some(1));
    assert!(
        text.contains("Be rude.") && text.contains("Be polite."),
        "{text}"
    );
}

/// One corruption of the tool-call vectors, the field it must be caught in, and the
/// corrupted text that must show.
fn corrupt_and_expect_failure(mutate: impl FnOnce(&mut Vec<Value>) -> usize, must_show: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let mut entries = tool_call_vectors();
    let index = mutate(&mut entries);
    let path = vector_file(dir.path(), "calls.json", &Value::Array(entries.clone()));
    let run = conform(&[&path]);
    let text = run.stdout_text();
    assert_eq!(run.code, Some(1), "{text}");
    assert_eq!(totals(&run), (entries.len() - 1, 1), "{text}");
    assert!(
        text.contains(&format!("FAIL {}#{index}", path.display())),
        "{text}"
    );
    for needle in must_show {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
}

#[test]
fn a_changed_checksum_fails() {
    let wrong = "0".repeat(64);
    corrupt_and_expect_failure(
        |entries| {
            let index = entries.iter().position(|e| !flagged(e)).unwrap();
            entries[index]["checksum"] = json!(wrong);
            index
        },
        &[
            "checksum:",
            &format!("expected: \"{wrong}\""),
            "actual:   \"e0b6feaa",
        ],
    );
}

#[test]
fn a_changed_canonical_text_fails() {
    corrupt_and_expect_failure(
        |entries| {
            entries[1]["canonical"] = json!("{\"args\":{\"b\":2,\"a\":1},\"tool\":\"sum\"}");
            1
        },
        &[
            "canonical:",
            r#"actual:   "{\"args\":{\"a\":1,\"b\":2},\"tool\":\"sum\"}""#,
        ],
    );
}

#[test]
fn a_refused_call_without_the_flag_fails() {
    corrupt_and_expect_failure(
        |entries| {
            let index = entries.iter().position(flagged).unwrap();
            entries[index]
                .as_object_mut()
                .unwrap()
                .remove("args_unrepresentable");
            entries[index]
                .as_object_mut()
                .unwrap()
                .remove("rendered_error");
            index
        },
        &["refused: call to"],
    );
}

#[test]
fn a_flagged_call_that_is_accepted_fails() {
    corrupt_and_expect_failure(
        |entries| {
            entries[0]["args_unrepresentable"] = json!(true);
            0
        },
        &["refused as unrepresentable", "accepted, checksum e0b6feaa"],
    );
}

#[test]
fn a_flagged_call_refused_for_a_syntax_error_fails() {
    corrupt_and_expect_failure(
        |entries| {
            let index = entries.iter().position(flagged).unwrap();
            entries[index]["args_json"] = json!("{\"a\":");
            index
        },
        &["refused for another reason"],
    );
}

#[test]
fn entries_of_unknown_shape_or_kind_fail() {
    let dir = tempfile::tempdir().unwrap();
    let path = vector_file(
        dir.path(),
        "odd.json",
        &json!([
            {"tool": "t", "arguments": "{}"},
            {"kind": "hologram", "input": {}, "rendered": "x"},
            {"kind": "thought", "input": {}},
            "a string",
            {"tool": "t", "args_json": "{}"},
        ]),
    );
    let run = conform(&[&path]);
    let text = run.stdout_text();
    assert_eq!(totals(&run), (0, 5), "{text}");
    assert_eq!(run.code, Some(1));
    assert!(text.contains(r#"unknown kind \"hologram\""#), "{text}");
    assert!(text.contains("field `rendered`"), "{text}");
    assert!(
        text.contains("a `canonical` or `checksum` to check"),
        "{text}"
    );
}

#[test]
fn unreadable_paths_fail() {
    let dir = tempfile::tempdir().unwrap();
    let empty = vector_file(dir.path(), "empty.json", &json!([]));
    let object = vector_file(dir.path(), "object.json", &json!({"a": 1}));
    let broken = dir.path().join("broken.json");
    fs::write(&broken, "[{").unwrap();
    let missing = dir.path().join("missing.json");
    let not_jcs = dir.path().join("plain-dir");
    fs::create_dir(&not_jcs).unwrap();
    let run = conform(&[&empty, &object, &broken, &missing, &not_jcs]);
    let text = run.stdout_text();
    assert_eq!(totals(&run), (0, 5), "{text}");
    assert_eq!(run.code, Some(1));
    for needle in [
        "no vectors",
        "not an array",
        "not JSON",
        "cannot read",
        "not an RFC 8785 directory",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn a_corrupted_jcs_directory_fails() {
    let dir = tempfile::tempdir().unwrap();
    let jcs = dir.path().join("jcs");
    copy_dir(&vectors("jcs"), &jcs);
    // A changed output, a missing output and an output without its input.
    fs::write(jcs.join("output/arrays.json"), b"[1]").unwrap();
    fs::remove_file(jcs.join("output/french.json")).unwrap();
    fs::write(jcs.join("output/orphan.json"), b"{}").unwrap();
    let run = conform(&[&jcs]);
    let text = run.stdout_text();
    assert_eq!(totals(&run), (jcs_input_count() - 2, 3), "{text}");
    assert_eq!(run.code, Some(1));
    assert!(
        text.contains("input/arrays.json") && text.contains("expected: \"[1]\""),
        "{text}"
    );
    assert!(text.contains("no output/french.json"), "{text}");
    assert!(text.contains("no input/orphan.json"), "{text}");
}

#[test]
fn at_least_one_path_is_required() {
    let run = tooltrust(&["conform"], b"");
    assert_eq!(run.code, Some(2));
}
