//! `tooltrust checksum [FILE]`: call checksums for JSON lines of `{"tool", "args_json"}`.
//!
//! Every input line gets exactly one output line; a line that cannot be read, or a call
//! that tooltrust refuses, gets `{"error": "line N: …"}` and the command goes on. Fields
//! other than `tool` and `args_json` are ignored, so that vector entries can be fed in as
//! they are.

use std::io::Write;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;
use tooltrust::ToolCall;

use crate::lines::{LinesError, answer_file, required_string};

#[derive(Serialize)]
struct Accepted {
    checksum: String,
    canonical: String,
}

/// Answers every line of `file` (standard input when `None`); `Ok(false)` when any line
/// was an error.
pub fn run(file: Option<&Path>, out: &mut impl Write) -> Result<bool, LinesError> {
    answer_file(file, out, checksum_line)
}

/// The checksum of the call one input line describes.
fn checksum_line(line: &Value) -> Result<Accepted, String> {
    let (tool, args_json) = (
        required_string(line, "tool")?,
        required_string(line, "args_json")?,
    );
    let call = ToolCall::from_model(tool, args_json).map_err(|e| e.to_string())?;
    Ok(Accepted {
        checksum: call.checksum().to_hex(),
        canonical: call.canonical(),
    })
}
