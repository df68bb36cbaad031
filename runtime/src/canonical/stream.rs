//! Canonical text written while JSON text is parsed, without building a `Value`.
//!
//! serde_json's parser drives a visitor that writes each scalar in canonical form as it
//! meets it; strings without escapes are borrowed from the input and copied as they
//! are, numbers are formatted once. An object's members are written in the order they
//! come, each one's span recorded; when the keys did not come in UTF-16 order, the
//! members are sorted (a repeated key then sits beside its twin) and the object's bytes
//! rewritten once.
//!
//! A misordered object is rewritten after its members, nested objects included, are
//! written; so a byte is copied once for each misordered object around it. serde_json
//! stops at 128 levels of nesting, which bounds that factor.
//!
//! A text this writer refuses is parsed again by [`parse_strict`], whose error is the
//! one returned: both parsers refuse the same texts (the same serde_json parser, and
//! every repeated key found either way), and the error names the same fault whichever
//! path found it. Refused texts, rare and never run, pay for two parses.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use super::number::{emit_f64, emit_i64, emit_u64};
use super::parse::{JsonError, json_error, parse_strict};
use super::string::{cmp_utf16, emit_string, utf16_prefix};
use super::value::Kind;

/// The canonical text of the JSON value `text` holds, and what kind of value it is;
/// the same text and the same errors as [`parse_strict`] followed by
/// [`canonical_json`](super::canonical_json).
pub(crate) fn canonicalize(text: &str) -> Result<(String, Kind), JsonError> {
    let mut writer = Writer {
        out: String::with_capacity(text.len()),
        members: Vec::with_capacity(32),
        scratch: String::new(),
        outermost_misordered: false,
        duplicate: None,
    };
    let kind = {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        Seed(&mut writer)
            .deserialize(&mut deserializer)
            .and_then(|kind| deserializer.end().map(|()| kind))
    };
    // The outermost object is sorted once the parser (and its buffer for unescaped
    // strings) is gone, so that two copies of a big text are not held beside it.
    if kind.is_ok() && writer.outermost_misordered {
        writer.sort_object(0, 0);
    }
    let error = match (kind, writer.duplicate) {
        (Ok(kind), None) => return Ok((writer.out, kind)),
        (_, Some(key)) => JsonError::DuplicateKey { key },
        (Err(error), None) => json_error(&error, None),
    };
    // The strict parser refuses every text refused here, and names the first fault in
    // the text (it stops at a repeated key, where this writer reads on to the end of
    // the object).
    Err(parse_strict(text).err().unwrap_or(error))
}

struct Writer<'de> {
    out: String,
    /// The members of every object being written, innermost last.
    members: Vec<Member<'de>>,
    /// Where a misordered inner object is rebuilt.
    scratch: String,
    /// The outermost value is an object whose members are still to be sorted.
    outermost_misordered: bool,
    /// A key found twice in one object.
    duplicate: Option<String>,
}

/// One member of an object: its key as parsed, and where `"key":value` lies in `out`.
struct Member<'de> {
    key: Cow<'de, str>,
    /// [`utf16_prefix`] of the key, which orders most keys without reading them.
    prefix: u64,
    start: usize,
    end: usize,
}

impl Member<'_> {
    fn cmp_key(&self, other: &Member<'_>) -> Ordering {
        self.prefix
            .cmp(&other.prefix)
            .then_with(|| cmp_utf16(&self.key, &other.key))
    }
}

impl Writer<'_> {
    /// Rewrites the object that starts at `start` in `out`, whose members start at
    /// `base`, with its members in UTF-16 order of their keys; `false` (the key kept
    /// in `duplicate`) when two of its keys are the same.
    fn sort_object(&mut self, base: usize, start: usize) -> bool {
        let members = self.members.get_mut(base..).unwrap_or_default();
        members.sort_unstable_by(Member::cmp_key);
        if let Some([twin, _]) = members
            .windows(2)
            .find(|pair| pair[0].prefix == pair[1].prefix && pair[0].key == pair[1].key)
        {
            self.duplicate = Some(twin.key.clone().into_owned());
            return false;
        }
        // The outermost object is written straight into the result, sized exactly (it
        // keeps its length); inner ones go through the scratch buffer and back.
        let size = self.out.len() - start + 1;
        let mut sorted = if start == 0 {
            String::with_capacity(size)
        } else {
            let mut scratch = std::mem::take(&mut self.scratch);
            scratch.clear();
            scratch.reserve(size);
            scratch
        };
        sorted.push('{');
        for (index, member) in members.iter().enumerate() {
            if index > 0 {
                sorted.push(',');
            }
            sorted.push_str(self.out.get(member.start..member.end).unwrap_or_default());
        }
        sorted.push('}');
        if start == 0 {
            self.out = sorted;
        } else {
            self.out.truncate(start);
            self.out.push_str(&sorted);
            self.scratch = sorted;
        }
        true
    }
}

/// Appends a string that serde_json borrowed from the input: such a string held no
/// escape there, and JSON forbids raw `"`, `\` and control characters in strings (the
/// parser refuses them), so it is already in canonical form.
#[inline]
fn push_unescaped(out: &mut String, text: &str) {
    out.push('"');
    out.push_str(text);
    out.push('"');
}

/// Writes one value.
struct Seed<'w, 'de>(&'w mut Writer<'de>);

impl<'de> DeserializeSeed<'de> for Seed<'_, 'de> {
    type Value = Kind;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Kind, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_, 'de> {
    type Value = Kind;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Kind, E> {
        self.0.out.push_str(if v { "true" } else { "false" });
        Ok(Kind::Bool)
    }

    fn visit_i64<E>(self, v: i64) -> Result<Kind, E> {
        emit_i64(&mut self.0.out, v);
        Ok(Kind::Number)
    }

    fn visit_u64<E>(self, v: u64) -> Result<Kind, E> {
        emit_u64(&mut self.0.out, v);
        Ok(Kind::Number)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Kind, E> {
        // serde_json refuses numbers beyond the doubles itself; this keeps it so.
        if !v.is_finite() {
            return Err(E::custom("number out of range"));
        }
        emit_f64(&mut self.0.out, v);
        Ok(Kind::Number)
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Kind, E> {
        push_unescaped(&mut self.0.out, v);
        Ok(Kind::String)
    }

    fn visit_str<E>(self, v: &str) -> Result<Kind, E> {
        emit_string(&mut self.0.out, v);
        Ok(Kind::String)
    }

    fn visit_unit<E>(self) -> Result<Kind, E> {
        self.0.out.push_str("null");
        Ok(Kind::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Kind, A::Error> {
        let writer = self.0;
        writer.out.push('[');
        let mut first = true;
        loop {
            if !first {
                writer.out.push(',');
            }
            if seq.next_element_seed(Seed(&mut *writer))?.is_none() {
                if !first {
                    // No element after all: take back the comma.
                    writer.out.pop();
                }
                break;
            }
            first = false;
        }
        writer.out.push(']');
        Ok(Kind::Array)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Kind, A::Error> {
        let writer = self.0;
        let base = writer.members.len();
        let start = writer.out.len();
        writer.out.push('{');
        // Keys in strictly increasing order are in canonical order and cannot repeat.
        let mut in_order = true;
        while let Some(key) = access.next_key_seed(KeySeed)? {
            let prefix = utf16_prefix(&key);
            if let Some(last) = writer
                .members
                .last()
                .filter(|_| writer.members.len() > base)
            {
                in_order = in_order
                    && match last.prefix.cmp(&prefix) {
                        Ordering::Equal => cmp_utf16(&last.key, &key) == Ordering::Less,
                        order => order == Ordering::Less,
                    };
                writer.out.push(',');
            }
            let member = writer.out.len();
            match &key {
                Cow::Borrowed(key) => push_unescaped(&mut writer.out, key),
                Cow::Owned(key) => emit_string(&mut writer.out, key),
            }
            writer.out.push(':');
            access.next_value_seed(Seed(&mut *writer))?;
            writer.members.push(Member {
                key,
                prefix,
                start: member,
                end: writer.out.len(),
            });
        }
        if in_order {
            writer.out.push('}');
        } else if start == 0 {
            // The outermost object: its members stay for `canonicalize` to sort.
            writer.outermost_misordered = true;
            return Ok(Kind::Object);
        } else if !writer.sort_object(base, start) {
            return Err(de::Error::custom("duplicate key"));
        }
        writer.members.truncate(base);
        Ok(Kind::Object)
    }
}

/// Reads a key, borrowed from the input when it holds no escape.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}
