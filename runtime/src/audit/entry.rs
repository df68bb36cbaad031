//! One entry of the audit log: how an event becomes a sealed line, and how a line is
//! read back and checked on its own (the chain across lines is checked in `verify`).

use serde::Serialize;
use serde_json::{Map, Value};

use crate::call::Checksum;
use crate::canonical::{JsonError, canonical_json, parse_strict, type_name, write_canonical};
use crate::id::{self, IdError};
use crate::signature::{PublicKey, SecretKey, Signature};

/// The `prev` of the first entry: 64 zeros.
pub const GENESIS: Checksum = Checksum::from_bytes([0; 32]);

/// The longest line (entry plus newline) the log writes or reads, so that a reader's
/// memory stays bounded whatever a file holds.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// The largest sequence number: every integer up to 2^53 survives canonical JSON
/// (which formats numbers as doubles) exactly.
pub const MAX_SEQ: u64 = 1 << 53;

/// The fields the log adds to every event; an event may not carry them itself.
pub const RESERVED_FIELDS: [&str; 6] = ["seq", "ts", "prev", "hash", "signer", "sig"];

/// The signature domain of chain entries: a writer signs each entry's hash, which covers
/// everything before it.
pub const CHAIN_DOMAIN: &str = "tooltrust/chain/v1";

/// Whether `sig` is `signer`'s signature of the entry hash `hash`.
pub fn signature_verifies(signer: &PublicKey, hash: &Checksum, sig: &Signature) -> bool {
    signer.verifies(CHAIN_DOMAIN, hash.as_bytes(), sig)
}

/// Adds `writer`'s signature of the entry's hash (`sig`) to a sealed line (its bytes, with
/// or without the newline, as [`Body::seal`] wrote them); `None` if the bytes are not
/// an entry this crate sealed.
///
/// A writer that names itself in every entry (`signer`) may sign only the last entry of
/// each batch it makes durable: the hash chain then carries the signature back to every
/// entry before it. Verification with the writer's key accepts an unsigned entry only if
/// a signed one follows it.
pub fn sign_line(line: &[u8], hash: &Checksum, writer: &SecretKey) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(line).ok()?;
    let newline = text.ends_with('\n');
    let mut entry: Value = serde_json::from_str(text.trim_end_matches('\n')).ok()?;
    let sig = writer.sign(CHAIN_DOMAIN, hash.as_bytes());
    entry
        .as_object_mut()?
        .insert("sig".to_owned(), Value::String(sig.to_string()));
    let mut signed = canonical_json(&entry).into_bytes();
    if newline {
        signed.push(b'\n');
    }
    Some(signed)
}

/// An entry as read back from the log.
///
/// On disk an entry is one line: the canonical JSON (RFC 8785) of the event's fields
/// together with `event`, `seq`, `ts`, `prev` and `hash`, followed by `\n`. `hash` is the
/// lowercase hex SHA-256 of `prev` (its 64 hex characters) followed by the canonical JSON
/// of the entry without `hash`.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Position in the log, from 1.
    pub seq: u64,
    /// When the entry was appended, RFC 3339 in UTC.
    pub ts: String,
    /// The event type, e.g. `call_denied`.
    pub event: String,
    /// The event's own fields (everything but `event`, `seq`, `ts`, `prev` and `hash`).
    pub fields: Map<String, Value>,
    /// The hash of the previous entry ([`GENESIS`] for the first).
    pub prev: Checksum,
    /// This entry's hash.
    pub hash: Checksum,
    /// The writer the entry names (`signer`, inside the hashed content), if any.
    pub signer: Option<PublicKey>,
    /// That writer's signature of the entry's hash (`sig`), if it signed this entry: a
    /// writer may sign only the last entry of each durable batch.
    pub sig: Option<Signature>,
}

/// Why an event cannot be recorded. Nothing is written when an event is refused.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum EventError {
    /// The event does not serialize to JSON.
    #[error("the event does not serialize to JSON: {0}")]
    Serialize(#[source] std::sync::Arc<serde_json::Error>),
    /// The event serializes to something other than a JSON object.
    #[error("an event must serialize to a JSON object, not {0}")]
    NotAnObject(&'static str),
    /// The event has no `event` field naming its type.
    #[error("an event must have a string field \"event\" naming its type")]
    MissingType,
    /// The `event` field is not a string.
    #[error("the \"event\" field must be a string naming the event type, not {0}")]
    TypeNotAString(&'static str),
    /// The event type is not a valid name.
    #[error("event type: {0}")]
    BadType(#[source] IdError),
    /// The event carries a field the log sets itself.
    #[error("the event field {0:?} is reserved for the log; rename it")]
    ReservedField(&'static str),
    /// The sealed entry would be longer than [`MAX_LINE_BYTES`].
    #[error("the entry is {len} bytes; an audit entry is at most {max} bytes")]
    TooLarge {
        /// The length of the line that would have been written.
        len: usize,
        /// [`MAX_LINE_BYTES`].
        max: usize,
    },
}

/// An event's fields, checked and ready to be sealed into an entry.
///
/// Every chain of entries (the file log, and the database stores of `tooltrust-store`)
/// seals its entries with this type, so that one verifier reads them all.
#[derive(Debug, Clone, PartialEq)]
pub struct Body(Map<String, Value>);

impl Body {
    /// Serializes `event` and checks its shape: a JSON object with a string field
    /// `"event"` naming its type (`[A-Za-z0-9_-]{1,128}`) and none of
    /// [`RESERVED_FIELDS`].
    pub fn of<T: Serialize + ?Sized>(event: &T) -> Result<Body, EventError> {
        let value = serde_json::to_value(event)
            .map_err(|error| EventError::Serialize(std::sync::Arc::new(error)))?;
        let Value::Object(fields) = value else {
            return Err(EventError::NotAnObject(type_name(&value)));
        };
        match fields.get("event") {
            None => return Err(EventError::MissingType),
            Some(Value::String(kind)) => id::validate(kind).map_err(EventError::BadType)?,
            Some(other) => return Err(EventError::TypeNotAString(type_name(other))),
        }
        if let Some(reserved) = RESERVED_FIELDS
            .into_iter()
            .find(|f| fields.contains_key(*f))
        {
            return Err(EventError::ReservedField(reserved));
        }
        Ok(Body(fields))
    }

    /// The event's type (its `"event"` field).
    pub fn event(&self) -> &str {
        self.0
            .get("event")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// The event's field `name`, if it has one.
    pub fn field(&self, name: &str) -> Option<&Value> {
        self.0.get(name)
    }

    /// Seals the body as entry `seq`, with timestamp `ts`, after the entry whose hash is
    /// `prev`: returns the entry's line (its canonical JSON followed by `\n`) and its
    /// hash. Fails only when the line would exceed [`MAX_LINE_BYTES`].
    pub fn seal(
        self,
        seq: u64,
        ts: String,
        prev: &Checksum,
    ) -> Result<(Vec<u8>, Checksum), EventError> {
        self.seal_signed(seq, ts, prev, None)
    }

    /// Like [`Body::seal`], and with a writer's key, signed: the entry names the key's
    /// public half in `signer` (covered by the hash) and carries the key's signature of
    /// its hash in `sig`. Whoever can write the log's file or rows, but does not hold the
    /// key, cannot then edit, insert or re-hash an entry that a verifier holding the
    /// public key accepts.
    pub fn seal_signed(
        self,
        seq: u64,
        ts: String,
        prev: &Checksum,
        writer: Option<&SecretKey>,
    ) -> Result<(Vec<u8>, Checksum), EventError> {
        let public = writer.map(SecretKey::public);
        let (mut entry, hash) = self.sealed(seq, ts, prev, public.as_ref());
        if let (Some(writer), Some(fields)) = (writer, entry.as_object_mut()) {
            let sig = writer.sign(CHAIN_DOMAIN, hash.as_bytes());
            fields.insert("sig".to_owned(), Value::String(sig.to_string()));
        }
        Ok((line_of(&entry)?, hash))
    }

    /// Like [`Body::seal`], naming `signer` (inside the hashed content) without signing:
    /// for a writer that signs the last entry of each durable batch with [`sign_line`].
    pub fn seal_named(
        self,
        seq: u64,
        ts: String,
        prev: &Checksum,
        signer: Option<&PublicKey>,
    ) -> Result<(Vec<u8>, Checksum), EventError> {
        let (entry, hash) = self.sealed(seq, ts, prev, signer);
        let line = line_of(&entry)?;
        // Room for the `sig` the writer may add to it later.
        if signer.is_some() && line.len() + SIG_FIELD_BYTES > MAX_LINE_BYTES {
            return Err(EventError::TooLarge {
                len: line.len() + SIG_FIELD_BYTES,
                max: MAX_LINE_BYTES,
            });
        }
        Ok((line, hash))
    }

    /// The entry with the log's fields and its hash.
    fn sealed(
        mut self,
        seq: u64,
        ts: String,
        prev: &Checksum,
        signer: Option<&PublicKey>,
    ) -> (Value, Checksum) {
        let fields = &mut self.0;
        fields.insert("seq".to_owned(), Value::from(seq));
        fields.insert("ts".to_owned(), Value::String(ts));
        fields.insert("prev".to_owned(), Value::String(prev.to_hex()));
        if let Some(signer) = signer {
            fields.insert("signer".to_owned(), Value::String(signer.to_string()));
        }
        let mut entry = Value::Object(self.0);
        let hash = entry_hash(prev, &entry);
        if let Some(fields) = entry.as_object_mut() {
            fields.insert("hash".to_owned(), Value::String(hash.to_hex()));
        }
        (entry, hash)
    }
}

/// The most a `sig` field adds to a line: `,"sig":"` and 128 hex digits and `"`.
const SIG_FIELD_BYTES: usize = 8 + 128 + 1;

/// An entry's line: its canonical JSON and `\n`, at most [`MAX_LINE_BYTES`].
fn line_of(entry: &Value) -> Result<Vec<u8>, EventError> {
    let mut line = canonical_json(entry).into_bytes();
    line.push(b'\n');
    if line.len() > MAX_LINE_BYTES {
        return Err(EventError::TooLarge {
            len: line.len(),
            max: MAX_LINE_BYTES,
        });
    }
    Ok(line)
}

/// `SHA-256(prev_hex ‖ canonical(entry without hash))`; `entry` must not hold `hash`.
fn entry_hash(prev: &Checksum, entry: &Value) -> Checksum {
    let mut text = String::with_capacity(512);
    text.push_str(&prev.to_hex());
    write_canonical(&mut text, entry);
    Checksum::of(text.as_bytes())
}

/// What is wrong with one line, judged on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LineFault {
    /// Not an entry at all: not UTF-8, not JSON, or missing or mistyped fields. A crash
    /// mid-write leaves this (or [`LineFault::NotCanonical`]) at the tail.
    Malformed(String),
    /// A valid entry written in other bytes than its canonical form.
    NotCanonical,
    /// Well-formed, but the stated hash is not the hash of the content.
    HashMismatch {
        stated: Checksum,
        computed: Checksum,
    },
}

/// Parses one line (without its newline) and checks that it is canonical and that its
/// hash matches its content.
pub(crate) fn read_line(line: &[u8]) -> Result<Entry, LineFault> {
    let text = std::str::from_utf8(line)
        .map_err(|error| LineFault::Malformed(format!("not UTF-8: {error}")))?;
    let mut entry =
        parse_strict(text).map_err(|error: JsonError| LineFault::Malformed(error.to_string()))?;
    if !entry.is_object() {
        return Err(LineFault::Malformed(format!(
            "an entry is a JSON object, not {}",
            type_name(&entry)
        )));
    }
    if canonical_json(&entry) != text {
        return Err(LineFault::NotCanonical);
    }
    let stated = take_checksum(fields_of(&mut entry)?, "hash")?;
    let sig = match fields_of(&mut entry)?.remove("sig") {
        None => None,
        Some(Value::String(text)) => Some(text.parse::<Signature>().map_err(|_| {
            LineFault::Malformed("\"sig\" must be 128 lowercase hex characters".to_owned())
        })?),
        Some(other) => return Err(missing(Some(&other), "sig", "a string")),
    };
    let prev = checksum_field(fields_of(&mut entry)?, "prev")?;
    let computed = entry_hash(&prev, &entry);
    if computed != stated {
        return Err(LineFault::HashMismatch { stated, computed });
    }
    let fields = fields_of(&mut entry)?;
    let signer = match fields.remove("signer") {
        None => None,
        Some(Value::String(text)) => Some(
            text.parse::<PublicKey>()
                .map_err(|error| LineFault::Malformed(format!("\"signer\": {error}")))?,
        ),
        Some(other) => return Err(missing(Some(&other), "signer", "a string")),
    };
    if signer.is_none() && sig.is_some() {
        return Err(LineFault::Malformed(
            "the entry has a \"sig\" but names no signer".to_owned(),
        ));
    }
    let seq = match fields.remove("seq") {
        Some(Value::Number(n)) => n
            .as_u64()
            .filter(|&n| (1..=MAX_SEQ).contains(&n))
            .ok_or_else(|| {
                LineFault::Malformed(format!(
                    "\"seq\" must be an integer from 1 to 2^53, not {n}"
                ))
            })?,
        other => return Err(missing(other.as_ref(), "seq", "an integer")),
    };
    let ts = take_string(fields, "ts")?;
    let event = take_string(fields, "event")?;
    fields.remove("prev");
    Ok(Entry {
        seq,
        ts,
        event,
        fields: std::mem::take(fields),
        prev,
        hash: stated,
        signer,
        sig,
    })
}

fn fields_of(entry: &mut Value) -> Result<&mut Map<String, Value>, LineFault> {
    entry
        .as_object_mut()
        .ok_or_else(|| LineFault::Malformed("an entry is a JSON object".to_owned()))
}

fn checksum_field(fields: &Map<String, Value>, name: &str) -> Result<Checksum, LineFault> {
    match fields.get(name) {
        Some(Value::String(text)) => text.parse().map_err(|_| {
            LineFault::Malformed(format!("\"{name}\" must be 64 lowercase hex characters"))
        }),
        other => Err(missing(other, name, "a string")),
    }
}

fn take_checksum(fields: &mut Map<String, Value>, name: &str) -> Result<Checksum, LineFault> {
    let checksum = checksum_field(fields, name)?;
    fields.remove(name);
    Ok(checksum)
}

fn take_string(fields: &mut Map<String, Value>, name: &str) -> Result<String, LineFault> {
    match fields.remove(name) {
        Some(Value::String(text)) => Ok(text),
        other => Err(missing(other.as_ref(), name, "a string")),
    }
}

fn missing(found: Option<&Value>, name: &str, wanted: &str) -> LineFault {
    match found {
        None => LineFault::Malformed(format!("the entry has no \"{name}\" field")),
        Some(value) => LineFault::Malformed(format!(
            "\"{name}\" must be {wanted}, not {}",
            type_name(value)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sealed_lines_read_back_as_the_same_entry() {
        let body =
            Body::of(&json!({"event": "call_denied", "tool": "send_email", "n": 1.5})).unwrap();
        let (line, hash) = body
            .seal(7, "2026-01-01T00:00:00Z".into(), &GENESIS)
            .unwrap();
        assert_eq!(line.last(), Some(&b'\n'));
        let entry = read_line(&line[..line.len() - 1]).unwrap();
        assert_eq!(entry.seq, 7);
        assert_eq!(entry.event, "call_denied");
        assert_eq!(entry.hash, hash);
        assert_eq!(entry.prev, GENESIS);
        assert_eq!(
            entry.fields,
            *json!({"tool": "send_email", "n": 1.5}).as_object().unwrap()
        );
    }

    #[test]
    fn the_hash_covers_prev_and_the_canonical_entry() {
        let (line, hash) = Body::of(&json!({"event": "x"}))
            .unwrap()
            .seal(1, "t".into(), &GENESIS)
            .unwrap();
        let zeros = "0".repeat(64);
        let expected = Checksum::of(
            format!(r#"{zeros}{{"event":"x","prev":"{zeros}","seq":1,"ts":"t"}}"#).as_bytes(),
        );
        assert_eq!(hash, expected);
        assert_eq!(
            String::from_utf8(line).unwrap(),
            format!(r#"{{"event":"x","hash":"{expected}","prev":"{zeros}","seq":1,"ts":"t"}}"#)
                + "\n"
        );
    }

    #[test]
    fn events_of_the_wrong_shape_are_refused() {
        assert!(matches!(
            Body::of(&json!([1])),
            Err(EventError::NotAnObject("an array"))
        ));
        assert!(matches!(
            Body::of(&json!({"a": 1})),
            Err(EventError::MissingType)
        ));
        assert!(matches!(
            Body::of(&json!({"event": 3})),
            Err(EventError::TypeNotAString("a number"))
        ));
        assert!(matches!(
            Body::of(&json!({"event": "a b"})),
            Err(EventError::BadType(_))
        ));
        for reserved in RESERVED_FIELDS {
            assert!(matches!(
                Body::of(&json!({"event": "e", reserved: 1})),
                Err(EventError::ReservedField(field)) if field == reserved
            ));
        }
        let huge = "x".repeat(MAX_LINE_BYTES);
        assert!(matches!(
            Body::of(&json!({"event": "e", "data": huge}))
                .unwrap()
                .seal(1, "t".into(), &GENESIS),
            Err(EventError::TooLarge { .. })
        ));
        let mut map = std::collections::BTreeMap::new();
        map.insert(vec![1u8], 1);
        let error = Body::of(&map).unwrap_err();
        let source = std::error::Error::source(&error)
            .and_then(|e| e.downcast_ref::<std::sync::Arc<serde_json::Error>>());
        assert!(
            source.is_some(),
            "the serde_json error is kept as the source: {error:?}"
        );
    }

    #[test]
    fn lines_are_checked_on_their_own() {
        let (line, _) = Body::of(&json!({"event": "x", "a": "b"}))
            .unwrap()
            .seal(1, "t".into(), &GENESIS)
            .unwrap();
        let text = std::str::from_utf8(&line[..line.len() - 1]).unwrap();
        assert!(matches!(
            read_line(b"{\"a\":"),
            Err(LineFault::Malformed(_))
        ));
        assert!(matches!(read_line(b"\xff"), Err(LineFault::Malformed(_))));
        assert!(matches!(read_line(b"[]"), Err(LineFault::Malformed(_))));
        let spaced = text.replacen(':', ": ", 1);
        assert_eq!(read_line(spaced.as_bytes()), Err(LineFault::NotCanonical));
        let changed = text.replace("\"b\"", "\"c\"");
        assert!(matches!(
            read_line(changed.as_bytes()),
            Err(LineFault::HashMismatch { .. })
        ));
    }
}
