//! `tooltrust checksum [FILE]`: call checksums for JSON lines of `{"tool", "args_json"}`.
//!
//! Every input line gets exactly one output line, so that outputs pair up with inputs by
//! line number; a line that cannot be read, or a call that tooltrust refuses, gets
//! `{"error": "line N: …"}` and the command goes on. Fields other than `tool` and
//! `args_json` are ignored, so that vector entries can be fed in as they are.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;
use tooltrust::{ToolCall, parse_strict};

/// Why the command could not go through its input.
#[derive(Debug, thiserror::Error)]
pub enum ChecksumError {
    /// The input file cannot be opened.
    #[error("cannot open {path}: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// Reading the input failed midway.
    #[error("cannot read the input: {0}")]
    Read(io::Error),
    /// Writing the output failed.
    #[error("cannot write the output: {0}")]
    Write(io::Error),
}

#[derive(Serialize)]
struct Accepted {
    checksum: String,
    canonical: String,
}

#[derive(Serialize)]
struct Refused {
    error: String,
}

/// Answers every line of `file` (standard input when `None`); `Ok(false)` when any line
/// was an error.
pub fn run(file: Option<&Path>, out: &mut impl Write) -> Result<bool, ChecksumError> {
    match file {
        Some(path) => {
            let file = File::open(path).map_err(|source| ChecksumError::Open {
                path: path.to_owned(),
                source,
            })?;
            answer_lines(BufReader::new(file), out)
        }
        None => answer_lines(io::stdin().lock(), out),
    }
}

/// Answers every line of `input`.
pub fn answer_lines(mut input: impl BufRead, out: &mut impl Write) -> Result<bool, ChecksumError> {
    let mut all_accepted = true;
    let mut line = Vec::new();
    for number in 1u64.. {
        line.clear();
        if input
            .read_until(b'\n', &mut line)
            .map_err(ChecksumError::Read)?
            == 0
        {
            break;
        }
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        let answer = match checksum_line(text) {
            Ok(call) => serde_json::to_string(&Accepted {
                checksum: call.checksum().to_hex(),
                canonical: call.canonical(),
            }),
            Err(reason) => {
                all_accepted = false;
                serde_json::to_string(&Refused {
                    error: format!("line {number}: {reason}"),
                })
            }
        };
        let answer = answer.map_err(|e| ChecksumError::Write(io::Error::other(e)))?;
        writeln!(out, "{answer}").map_err(ChecksumError::Write)?;
    }
    Ok(all_accepted)
}

/// The call one input line describes.
fn checksum_line(line: &[u8]) -> Result<ToolCall, String> {
    let text = std::str::from_utf8(line).map_err(|_| "the line is not UTF-8 text".to_owned())?;
    if text.trim().is_empty() {
        return Err("empty line; expected {\"tool\": \"…\", \"args_json\": \"…\"}".into());
    }
    let value = parse_strict(text).map_err(|e| format!("the line is not a JSON object: {e}"))?;
    let field = |name: &str| match value.get(name) {
        Some(Value::String(text)) => Ok(text.as_str()),
        Some(_) => Err(format!("`{name}` must be a string")),
        None => Err(format!("the line has no `{name}`")),
    };
    if !value.is_object() {
        return Err("expected a JSON object {\"tool\": \"…\", \"args_json\": \"…\"}".into());
    }
    let (tool, args_json) = (field("tool")?, field("args_json")?);
    ToolCall::from_model(tool, args_json).map_err(|e| e.to_string())
}
