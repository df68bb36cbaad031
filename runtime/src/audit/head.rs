//! The head of a log: its last sequence number and hash, which pins everything before it.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use super::entry::{GENESIS, MAX_SEQ};
use crate::call::Checksum;
use crate::canonical::{canonical_json, parse_strict};

/// The last entry of a log: its `seq` and `hash`. Because every hash covers the one
/// before it, a head pins the whole log up to `seq`; a log that later verifies against
/// it cannot have lost, changed or reordered any of those entries.
///
/// Its text form, as in the head file, is `{"hash":"…","seq":N}`.
///
/// ```
/// use tooltrust::audit::Head;
/// let head = Head::parse(r#"{"hash":"0000000000000000000000000000000000000000000000000000000000000000","seq":0}"#)?;
/// assert_eq!(head, Head::EMPTY);
/// assert_eq!(Head::parse(&head.to_json())?, head);
/// # Ok::<(), tooltrust::audit::HeadError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Head {
    /// The last sequence number (0 for an empty log).
    pub seq: u64,
    /// The last entry's hash (64 zeros for an empty log).
    pub hash: Checksum,
}

/// Why a text is not a head record.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum HeadError {
    /// The head file cannot be read.
    #[error("cannot read the head file {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: Arc<io::Error>,
    },
    /// The text is not a head record.
    #[error("not a head record ({0}); expected {{\"hash\":\"<64 hex>\",\"seq\":N}}")]
    Malformed(String),
}

impl Head {
    /// The head of an empty log.
    pub const EMPTY: Head = Head {
        seq: 0,
        hash: GENESIS,
    };

    /// The canonical JSON text, with a trailing newline.
    pub fn to_json(&self) -> String {
        let mut map = Map::new();
        map.insert("hash".to_owned(), Value::String(self.hash.to_hex()));
        map.insert("seq".to_owned(), Value::from(self.seq));
        canonical_json(&Value::Object(map)) + "\n"
    }

    /// Parses a head record; surrounding whitespace is allowed, anything else is not.
    pub fn parse(text: &str) -> Result<Head, HeadError> {
        let malformed = |why: &str| HeadError::Malformed(why.to_owned());
        let value = parse_strict(text.trim()).map_err(|e| HeadError::Malformed(e.to_string()))?;
        let Value::Object(map) = value else {
            return Err(malformed("not a JSON object"));
        };
        if map.len() != 2 {
            return Err(malformed("it must hold exactly \"hash\" and \"seq\""));
        }
        let seq = map
            .get("seq")
            .and_then(Value::as_u64)
            .filter(|&seq| seq <= MAX_SEQ)
            .ok_or_else(|| malformed("\"seq\" must be an integer from 0 to 2^53"))?;
        let hash = map
            .get("hash")
            .and_then(Value::as_str)
            .and_then(|text| text.parse().ok())
            .ok_or_else(|| malformed("\"hash\" must be 64 lowercase hex characters"))?;
        Ok(Head { seq, hash })
    }

    /// Reads a head record from a file (for example one a host pinned elsewhere).
    pub fn read(path: impl AsRef<Path>) -> Result<Head, HeadError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| HeadError::Io {
            path: path.to_path_buf(),
            source: Arc::new(source),
        })?;
        Head::parse(&text)
    }
}

impl fmt::Display for Head {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "seq {}, hash {}", self.seq, self.hash)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_round_trip_and_refuse_anything_else() {
        let head = Head {
            seq: 42,
            hash: Checksum::of(b"x"),
        };
        let text = head.to_json();
        assert_eq!(text, format!("{{\"hash\":\"{}\",\"seq\":42}}\n", head.hash));
        assert_eq!(Head::parse(&text).ok(), Some(head));
        assert_eq!(Head::parse(&format!("  {text}\n\n")).ok(), Some(head));
        let hash = head.hash;
        for bad in [
            String::new(),
            "[]".to_owned(),
            format!(r#"{{"hash":"{hash}"}}"#),
            format!(r#"{{"hash":"{hash}","seq":-1}}"#),
            format!(r#"{{"hash":"{hash}","seq":1.5}}"#),
            format!(r#"{{"hash":"{}","seq":1}}"#, hash.to_hex().to_uppercase()),
            format!(r#"{{"hash":"{hash}","seq":1,"x":1}}"#),
            format!(r#"{{"hash":"{hash}","seq":1,"seq":2}}"#),
        ] {
            assert!(
                matches!(Head::parse(&bad), Err(HeadError::Malformed(_))),
                "{bad}"
            );
        }
    }
}
