//! `tooltrust canon FILE`: the RFC 8785 canonical bytes of a JSON document.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use tooltrust::canonical::{JsonError, canonical_json, parse_strict};

/// Why a document has no canonical form.
#[derive(Debug, thiserror::Error)]
pub enum CanonError {
    /// The file cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// The file is not UTF-8 text.
    #[error("{path} is not UTF-8 text")]
    NotUtf8 {
        /// The file.
        path: PathBuf,
    },
    /// The text is not acceptable JSON.
    #[error("{path}: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// Why it was refused.
        source: JsonError,
    },
    /// The canonical bytes cannot be written.
    #[error("cannot write the output: {0}")]
    Write(#[from] io::Error),
}

/// Writes the canonical bytes of the document in `path` to `out`, without a newline.
pub fn run(path: &Path, out: &mut impl Write) -> Result<bool, CanonError> {
    let bytes = std::fs::read(path).map_err(|source| CanonError::Read {
        path: path.to_owned(),
        source,
    })?;
    let text = String::from_utf8(bytes).map_err(|_| CanonError::NotUtf8 {
        path: path.to_owned(),
    })?;
    let value = parse_strict(&text).map_err(|source| CanonError::Json {
        path: path.to_owned(),
        source,
    })?;
    out.write_all(canonical_json(&value).as_bytes())?;
    Ok(true)
}
