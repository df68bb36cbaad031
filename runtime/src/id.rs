//! Ids that may appear in tag names.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::hex;
use crate::random;
pub use crate::random::RandomError;

/// The longest id accepted.
pub const MAX_ID_LEN: usize = 128;

/// An id that is safe inside a tag name: 1 to 128 characters of `[A-Za-z0-9_-]`.
///
/// ```
/// use tooltrust::Id;
/// assert!(Id::new("call_0aF-9").is_ok());
/// assert!(Id::new("x>y").is_err());
/// assert_eq!(Id::random()?.as_str().len(), 32);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Cloning one is cheap (the text is shared), since ids are copied into every event,
/// lineage and index that names them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Id(Arc<str>);

/// Why a text is not a valid [`Id`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// The id is empty.
    #[error("an id cannot be empty")]
    Empty,
    /// The id is longer than [`MAX_ID_LEN`].
    #[error("an id is at most {MAX_ID_LEN} characters; this one has {0}")]
    TooLong(usize),
    /// The id holds a character outside `[A-Za-z0-9_-]`.
    #[error("id {id:?} holds {found:?} at byte {at}; ids may hold only A-Z, a-z, 0-9, `_` and `-`")]
    BadCharacter {
        /// The id as given.
        id: String,
        /// The first character at fault.
        found: char,
        /// Its byte offset.
        at: usize,
    },
}

impl Id {
    /// Validates `id`.
    pub fn new(id: impl Into<String>) -> Result<Self, IdError> {
        let id = id.into();
        validate(&id)?;
        Ok(Id(Arc::from(id)))
    }

    /// A fresh 128-bit random id from the OS CSPRNG, as 32 lowercase hex characters.
    pub fn random() -> Result<Self, RandomError> {
        let mut digits = [0u8; 32];
        hex::encode_into(&random::id_bytes()?, &mut digits);
        // Hex digits are ASCII.
        let text = std::str::from_utf8(&digits).unwrap_or_default();
        Ok(Id(Arc::from(text)))
    }

    /// An id the crate itself names; the text is a valid id by construction.
    pub(crate) fn from_static(id: &'static str) -> Self {
        debug_assert!(validate(id).is_ok(), "invalid static id {id:?}");
        Id(Arc::from(id))
    }

    /// The id's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Checks `id` against `[A-Za-z0-9_-]{1,128}`.
pub fn validate(id: &str) -> Result<(), IdError> {
    if id.is_empty() {
        return Err(IdError::Empty);
    }
    if let Some((at, found)) = id.char_indices().find(|&(_, c)| !is_id_char(c)) {
        return Err(IdError::BadCharacter {
            id: id.to_owned(),
            found,
            at,
        });
    }
    if id.len() > MAX_ID_LEN {
        return Err(IdError::TooLong(id.len()));
    }
    Ok(())
}

pub(crate) use tooltrust_internals::is_id_char;

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::ops::Deref for Id {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for Id {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Id {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Serialize for Id {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Id::new(text).map_err(serde::de::Error::custom)
    }
}

impl TryFrom<&str> for Id {
    type Error = IdError;
    fn try_from(id: &str) -> Result<Self, IdError> {
        Id::new(id)
    }
}

impl TryFrom<String> for Id {
    type Error = IdError;
    fn try_from(id: String) -> Result<Self, IdError> {
        Id::new(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_validated() {
        assert!(Id::new("a").is_ok());
        assert!(Id::new("A-z_09").is_ok());
        assert_eq!(Id::new(""), Err(IdError::Empty));
        assert!(matches!(
            Id::new("a b"),
            Err(IdError::BadCharacter {
                found: ' ',
                at: 1,
                ..
            })
        ));
        assert!(matches!(Id::new("é"), Err(IdError::BadCharacter { .. })));
        assert!(matches!(Id::new("a>"), Err(IdError::BadCharacter { .. })));
        assert!(Id::new("x".repeat(MAX_ID_LEN)).is_ok());
        assert_eq!(
            Id::new("x".repeat(MAX_ID_LEN + 1)),
            Err(IdError::TooLong(MAX_ID_LEN + 1))
        );
        assert!(serde_json::from_str::<Id>("\"a\\nb\"").is_err());
    }

    #[test]
    fn random_ids_are_128_bit_hex_and_distinct() {
        let a = Id::random().unwrap();
        let b = Id::random().unwrap();
        assert_eq!(a.as_str().len(), 32);
        assert!(
            a.as_str()
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert_ne!(a, b);
    }
}
