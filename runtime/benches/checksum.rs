//! `ToolCall::from_model` against its unavoidable work: parsing the argument text and
//! hashing the canonical bytes (`cargo bench -p tooltrust --bench checksum`).

mod harness;

use std::hint::black_box;

use harness::Goal;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tooltrust::ToolCall;

const TOOL: &str = "search_files";

const FIXTURES: [(&str, &str); 3] = [
    ("1k", include_str!("../tests/data/perf/args1k.json")),
    (
        "100k_struct",
        include_str!("../tests/data/perf/args100k_struct.json"),
    ),
    (
        "100k_str",
        include_str!("../tests/data/perf/args100k_str.json"),
    ),
];

/// The ratio the checksum must stay within (issue 8; the stretch goal is 1.2).
const GOAL: Goal = Goal::AtMost(1.5);

fn main() {
    for (name, text) in FIXTURES {
        let canonical = match ToolCall::from_model(TOOL, text) {
            Ok(call) => call.canonical(),
            Err(error) => panic!("fixture {name}: {error}"),
        };
        harness::compare(
            &format!(
                "checksum/from_model {name} ({} B canonical)",
                canonical.len()
            ),
            "serde_json::from_str + SHA-256 of the canonical bytes",
            GOAL,
            || {
                let value: Value = serde_json::from_str(black_box(text)).ok()?;
                Some((value, Sha256::digest(black_box(canonical.as_bytes()))))
            },
            || ToolCall::from_model(TOOL, black_box(text)),
        );
        // With the id the provider gave the call: no id drawn from the OS.
        harness::compare(
            &format!("checksum/from_model_with_id {name}"),
            "serde_json::from_str + SHA-256 of the canonical bytes",
            GOAL,
            || {
                let value: Value = serde_json::from_str(black_box(text)).ok()?;
                Some((value, Sha256::digest(black_box(canonical.as_bytes()))))
            },
            || ToolCall::from_model_with_id("call_7Yb2", TOOL, black_box(text)),
        );
    }
}
