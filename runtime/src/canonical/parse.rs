//! The strict parser: serde_json's, with duplicate keys refused and every fault typed.

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Number, Value};

/// Why a JSON text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonError {
    /// The text is not JSON.
    #[error("invalid JSON at line {line}, column {column}: {message}")]
    Syntax {
        /// What the parser said.
        message: String,
        /// 1-based line of the fault.
        line: usize,
        /// 1-based column of the fault.
        column: usize,
    },
    /// A string holds a lone or reversed UTF-16 surrogate escape, which no UTF-8 text
    /// can represent.
    #[error("lone surrogate in a string escape at line {line}, column {column}")]
    LoneSurrogate {
        /// 1-based line of the fault.
        line: usize,
        /// 1-based column of the fault.
        column: usize,
    },
    /// A number is too large for a double (`1e400`).
    #[error("number out of range of a double at line {line}, column {column}")]
    NumberOutOfRange {
        /// 1-based line of the fault.
        line: usize,
        /// 1-based column of the fault.
        column: usize,
    },
    /// One object holds the same key twice.
    #[error("duplicate key {key:?} in one object")]
    DuplicateKey {
        /// The repeated key.
        key: String,
    },
}

/// What a visitor refused, kept beside the serde_json error it raised so that the
/// error is typed without reading its message.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// The first repeated key of an object.
    DuplicateKey(String),
    /// A number that is not a finite double.
    NumberOutOfRange,
}

impl Refusal {
    /// Records the refusal in `slot` and returns the error that stops the parse.
    pub(crate) fn raise<E: de::Error>(self, slot: &mut Option<Refusal>) -> E {
        let error = match &self {
            Refusal::DuplicateKey(key) => E::custom(format_args!("duplicate key {key:?}")),
            Refusal::NumberOutOfRange => E::custom("number out of range"),
        };
        *slot = Some(self);
        error
    }
}

/// The typed error for a parse that failed with `error`, after the visitor refused
/// `refusal` (if it did).
pub(crate) fn json_error(error: &serde_json::Error, refusal: Option<Refusal>) -> JsonError {
    let (line, column) = (error.line(), error.column());
    match refusal {
        Some(Refusal::DuplicateKey(key)) => JsonError::DuplicateKey { key },
        Some(Refusal::NumberOutOfRange) => JsonError::NumberOutOfRange { line, column },
        None => classify(error),
    }
}

/// Parses JSON text strictly: like `serde_json::from_str`, but a duplicate key in one
/// object is an error, and every fault has its own variant.
pub fn parse_strict(text: &str) -> Result<Value, JsonError> {
    let refusal = RefCell::new(None);
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value = StrictSeed(&refusal)
        .deserialize(&mut deserializer)
        .and_then(|value| deserializer.end().map(|()| value));
    value.map_err(|error| json_error(&error, refusal.into_inner()))
}

fn classify(error: &serde_json::Error) -> JsonError {
    let (line, column) = (error.line(), error.column());
    let text = error.to_string();
    // What the parser said, without the position serde_json appends to it.
    let message = text
        .strip_suffix(&format!(" at line {line} column {column}"))
        .unwrap_or(&text);
    // serde_json gives an error's category but names its code only in the message. Two
    // syntax errors get their own variant: a lone surrogate (a low surrogate, or a high
    // one followed by a non-low escape; or a high one not followed by `\u`) and a
    // number beyond the doubles. The unit tests pin these messages.
    if error.is_syntax() {
        match message {
            "lone leading surrogate in hex escape" | "unexpected end of hex escape" => {
                return JsonError::LoneSurrogate { line, column };
            }
            "number out of range" => return JsonError::NumberOutOfRange { line, column },
            _ => {}
        }
    }
    JsonError::Syntax {
        message: message.to_owned(),
        line,
        column,
    }
}

/// Builds a `Value`, refusing duplicate keys; the first duplicate found is kept in the
/// slot so that the error names it exactly.
#[derive(Clone, Copy)]
struct StrictSeed<'a>(&'a RefCell<Option<Refusal>>);

impl<'de> DeserializeSeed<'de> for StrictSeed<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictSeed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| Refusal::NumberOutOfRange.raise(&mut self.0.borrow_mut()))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element_seed(self)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            // Refuse at the repeated key, before reading (possibly much) more.
            match map.entry(key) {
                Entry::Vacant(slot) => {
                    slot.insert(access.next_value_seed(self)?);
                }
                Entry::Occupied(slot) => {
                    let key = slot.key().clone();
                    return Err(Refusal::DuplicateKey(key).raise(&mut self.0.borrow_mut()));
                }
            }
        }
        Ok(Value::Object(map))
    }
}
