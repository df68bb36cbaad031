//! Compat mode is byte-identical to the reference for every vector, except where
//! tooltrust refuses by design (live closers in bodies, calls the reference reads
//! leniently); those are checked as refusals.

use std::path::Path;

use serde_json::Value;
use tooltrust::testing::conformance::check_entry;

fn entries(file: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/vectors")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("vector file");
    serde_json::from_str::<Vec<Value>>(&text).expect("a JSON array")
}

fn assert_all_pass(file: &str) -> usize {
    let entries = entries(file);
    let mut failures = Vec::new();
    for (index, entry) in entries.iter().enumerate() {
        for mismatch in check_entry(entry) {
            failures.push(format!(
                "#{index} ({}) {}:\n  expected {:?}\n  actual   {:?}",
                entry["note"], mismatch.field, mismatch.expected, mismatch.actual
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    entries.len()
}

#[test]
fn every_tool_call_vector_renders_byte_identically() {
    assert!(assert_all_pass("adk-tool-calls.json") >= 30);
}

#[test]
fn every_envelope_vector_renders_byte_identically() {
    assert!(assert_all_pass("adk-envelopes.json") >= 10);
}

#[test]
fn every_reference_surface_renders_byte_identically() {
    assert!(assert_all_pass("surfaces.json") >= 9);
}

#[test]
fn compat_closes_a_peer_thought_where_it_opened() {
    let rendered = tooltrust::envelope::Renderer::compat()
        .thought(&tooltrust::record::Thought {
            id: tooltrust::Id::new("t-1").unwrap(),
            kind: tooltrust::record::ThoughtKind::PeerReasoning,
            from: "planner".into(),
            created_at: None,
            content: "plan".into(),
            replay_compatibility: None,
        })
        .unwrap();
    assert!(
        rendered
            .text
            .ends_with("</thought_t-1>\n</peer_agent_output_t-1>")
    );
    let blocks = tooltrust::envelope::parse(&rendered.text).unwrap();
    assert_eq!(blocks.len(), 1);
}

#[test]
fn conformance_notices_a_changed_byte() {
    for file in ["adk-tool-calls.json", "adk-envelopes.json"] {
        for mut entry in entries(file) {
            if entry.get("args_unrepresentable").is_some() {
                continue; // a refused call: its reference fields are not ours to match
            }
            let field = if entry.get("rendered").is_some_and(Value::is_string) {
                "rendered"
            } else if entry.get("checksum").is_some() {
                "checksum"
            } else {
                continue;
            };
            let original = entry[field].as_str().unwrap().to_owned();
            if original.is_empty() {
                continue;
            }
            let mut changed = original.clone().into_bytes();
            let last = changed.len() - 1;
            changed[last] = if changed[last] == b'x' { b'y' } else { b'x' };
            entry[field] = Value::String(String::from_utf8(changed).unwrap());
            assert!(
                !check_entry(&entry).is_empty(),
                "{file} {}: a changed `{field}` went unnoticed",
                entry["note"]
            );
        }
    }
}

#[test]
fn an_unknown_kind_is_a_failure() {
    let entry = serde_json::json!({"kind": "hologram", "input": {}, "rendered": ""});
    assert_eq!(check_entry(&entry)[0].field, "kind");
    assert!(!check_entry(&serde_json::json!({"x": 1})).is_empty());
}
