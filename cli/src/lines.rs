//! JSON-lines commands: one answer line per input line, so that outputs pair up with
//! inputs by line number; a line that cannot be answered gets `{"error": "line N: …"}`
//! and the command goes on.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;
use tooltrust::canonical::parse_strict;

/// Why a command could not go through its input.
#[derive(Debug, thiserror::Error)]
pub enum LinesError {
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
struct Refused {
    error: String,
}

/// Answers every line of `file` (standard input when `None`) with `answer`; `Ok(false)`
/// when any line was an error.
pub fn answer_file<T: Serialize>(
    file: Option<&Path>,
    out: &mut impl Write,
    answer: impl FnMut(&Value) -> Result<T, String>,
) -> Result<bool, LinesError> {
    match file {
        Some(path) => {
            let file = File::open(path).map_err(|source| LinesError::Open {
                path: path.to_owned(),
                source,
            })?;
            answer_lines(BufReader::new(file), out, answer)
        }
        None => answer_lines(io::stdin().lock(), out, answer),
    }
}

/// Answers every line of `input`: each must be a JSON object, handed to `answer`.
pub fn answer_lines<T: Serialize>(
    mut input: impl BufRead,
    out: &mut impl Write,
    mut answer: impl FnMut(&Value) -> Result<T, String>,
) -> Result<bool, LinesError> {
    let mut all_answered = true;
    let mut line = Vec::new();
    for number in 1u64.. {
        line.clear();
        if input
            .read_until(b'\n', &mut line)
            .map_err(LinesError::Read)?
            == 0
        {
            break;
        }
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        let written = match object_of(text).and_then(|line| answer(&line)) {
            Ok(answer) => serde_json::to_string(&answer),
            Err(reason) => {
                all_answered = false;
                serde_json::to_string(&Refused {
                    error: format!("line {number}: {reason}"),
                })
            }
        };
        let written = written.map_err(|e| LinesError::Write(io::Error::other(e)))?;
        writeln!(out, "{written}").map_err(LinesError::Write)?;
    }
    Ok(all_answered)
}

fn object_of(line: &[u8]) -> Result<Value, String> {
    let text = std::str::from_utf8(line).map_err(|_| "the line is not UTF-8 text".to_owned())?;
    if text.trim().is_empty() {
        return Err("empty line; expected a JSON object".into());
    }
    match parse_strict(text) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err("expected a JSON object".into()),
        Err(e) => Err(format!("the line is not a JSON object: {e}")),
    }
}

/// The string field `name` of `value`: `Ok(None)` when absent, an error when not a string.
pub fn optional_string<'a>(value: &'a Value, name: &str) -> Result<Option<&'a str>, String> {
    match value.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(format!("`{name}` must be a string")),
    }
}

/// The string field `name` of `value`, which must be present.
pub fn required_string<'a>(value: &'a Value, name: &str) -> Result<&'a str, String> {
    optional_string(value, name)?.ok_or_else(|| format!("the line has no `{name}`"))
}
