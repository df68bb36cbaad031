//! `tooltrust verify`: parses a rendered prompt and prints its blocks as JSON lines; exit
//! status 1 with the offending position when it is not exactly what a renderer writes.

use std::io::{self, Read, Write};
use std::path::Path;

use serde::Serialize;
use tooltrust::envelope::SessionKey;
use tooltrust::envelope::{ParsedBlock, parse, parse_sealed};

/// Why the command could not run.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// The prompt cannot be read.
    #[error("cannot read the prompt: {0}")]
    Read(io::Error),
    /// The prompt is not UTF-8 text.
    #[error("the prompt is not UTF-8 text")]
    NotText,
    /// Writing the output failed.
    #[error("cannot write the output: {0}")]
    Write(io::Error),
}

#[derive(Serialize)]
struct Line<'a> {
    tier: &'static str,
    nonce: Option<&'a str>,
    attrs: serde_json::Map<String, serde_json::Value>,
    body: &'a str,
    start: usize,
    end: usize,
    /// The index of the enclosing block's line, for children of a container.
    #[serde(skip_serializing_if = "Option::is_none")]
    parent: Option<usize>,
}

#[derive(Serialize)]
struct Rejected {
    error: String,
    offset: usize,
}

/// Verifies the prompt in `file` (standard input when `None`); with `key`, also
/// authenticates every nonce and requires neutral bodies. `Ok(false)` when rejected.
pub fn run(
    file: Option<&Path>,
    key: Option<&SessionKey>,
    out: &mut impl Write,
) -> Result<bool, VerifyError> {
    let bytes = match file {
        Some(path) => std::fs::read(path).map_err(VerifyError::Read)?,
        None => {
            let mut bytes = Vec::new();
            io::stdin()
                .read_to_end(&mut bytes)
                .map_err(VerifyError::Read)?;
            bytes
        }
    };
    let prompt = String::from_utf8(bytes).map_err(|_| VerifyError::NotText)?;
    let parsed = match key {
        Some(key) => parse_sealed(&prompt, key),
        None => parse(&prompt),
    };
    match parsed {
        Ok(blocks) => {
            let mut index = 0;
            for block in &blocks {
                write_block(out, block, None, &mut index)?;
            }
            Ok(true)
        }
        Err(error) => {
            let line = serde_json::to_string(&Rejected {
                error: error.fault.to_string(),
                offset: error.offset,
            })
            .map_err(|e| VerifyError::Write(io::Error::other(e)))?;
            writeln!(out, "{line}").map_err(VerifyError::Write)?;
            eprintln!("tooltrust verify: rejected {error}");
            Ok(false)
        }
    }
}

fn write_block(
    out: &mut impl Write,
    block: &ParsedBlock<'_>,
    parent: Option<usize>,
    index: &mut usize,
) -> Result<(), VerifyError> {
    let line = Line {
        tier: block.tier.name(),
        nonce: block.nonce,
        attrs: block
            .attrs
            .iter()
            .map(|(key, value)| {
                (
                    (*key).to_owned(),
                    serde_json::Value::String(value.to_string()),
                )
            })
            .collect(),
        body: block.body,
        start: block.start,
        end: block.end,
        parent,
    };
    let text = serde_json::to_string(&line).map_err(|e| VerifyError::Write(io::Error::other(e)))?;
    writeln!(out, "{text}").map_err(VerifyError::Write)?;
    let own = *index;
    *index += 1;
    for child in &block.children {
        write_block(out, child, Some(own), index)?;
    }
    Ok(())
}
