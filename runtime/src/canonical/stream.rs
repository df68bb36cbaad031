//! Canonical text written while JSON text is parsed, without building a `Value`.
//!
//! One pass over the text: each scalar is written in canonical form as it is met;
//! strings without escapes are copied as they are (found eight bytes at a time), numbers
//! are formatted once. An object's members are written in the order they come, each
//! one's span recorded; when the keys did not come in UTF-16 order, the members are
//! sorted (a repeated key then sits beside its twin) and the object's bytes rewritten
//! once.
//!
//! A misordered object is rewritten after its members, nested objects included, are
//! written; so a byte is copied once for each misordered object around it. Nesting stops
//! at serde_json's limit (127 containers), which bounds that factor.
//!
//! The parser reads exactly the texts serde_json reads, and every number as serde_json
//! reads it (integers up to `u64` exactly, the rest correctly rounded to a double); the
//! differential property tests hold it to that. A text it refuses is parsed again by
//! [`parse_strict`] (serde_json's parser), whose error is the one returned, so every
//! fault is named as serde_json names it. Refused texts, rare and never run, pay for two
//! parses.

use std::borrow::Cow;
use std::cmp::Ordering;

use super::number::{emit_f64, emit_i64, emit_u64};
use super::parse::{JsonError, parse_strict};
use super::string::{cmp_utf16, emit_char, escape_mask, needs_escape, utf16_prefix};
use super::value::Kind;

/// The canonical text of the JSON value `text` holds, and what kind of value it is;
/// the same text and the same errors as [`parse_strict`] followed by
/// [`canonical_json`](super::canonical_json).
pub(crate) fn canonicalize(text: &str) -> Result<(String, Kind), JsonError> {
    let mut parser = Parser {
        text,
        at: 0,
        room: NESTING,
        writer: Writer {
            out: String::with_capacity(text.len()),
            members: Vec::with_capacity(32),
            scratch: String::new(),
            outermost_misordered: false,
            duplicate: None,
        },
    };
    let kind = parser.document();
    let mut writer = parser.writer;
    // The outermost object is sorted last, so that two copies of a big text are not
    // held beside the input while it is parsed.
    if kind.is_ok() && writer.outermost_misordered {
        writer.sort_object(0, 0);
    }
    let error = match (kind, writer.duplicate) {
        (Ok(kind), None) => return Ok((writer.out, kind)),
        (_, Some(key)) => JsonError::DuplicateKey { key },
        (Err(Refused), None) => JsonError::Syntax {
            message: "invalid JSON".to_owned(),
            line: 1,
            column: parser.at + 1,
        },
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

/// Containers serde_json lets a text open, one inside the other, plus one: it refuses
/// the 128th.
const NESTING: u32 = 128;

/// Exponents of more significant digits than this are read by serde_json's own parser.
const MOST_EXPONENT_DIGITS: usize = 4;

/// The text is not JSON, or not JSON this writer takes (a repeated key); the strict
/// parser says which.
struct Refused;

struct Parser<'a> {
    text: &'a str,
    /// The next byte to read.
    at: usize,
    /// How many more containers may open inside the current one, plus one.
    room: u32,
    writer: Writer<'a>,
}

impl<'a> Parser<'a> {
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    fn document(&mut self) -> Result<Kind, Refused> {
        self.skip_whitespace();
        let kind = self.value()?;
        self.skip_whitespace();
        if self.at == self.bytes().len() {
            Ok(kind)
        } else {
            Err(Refused)
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes().get(self.at).copied()
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    /// Reads `byte` after any whitespace.
    fn expect(&mut self, byte: u8) -> Result<(), Refused> {
        self.skip_whitespace();
        if self.peek() == Some(byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(Refused)
        }
    }

    /// Reads and writes one value; the next byte starts it.
    fn value(&mut self) -> Result<Kind, Refused> {
        match self.peek() {
            Some(b'{') => self.nested(Self::object),
            Some(b'[') => self.nested(Self::array),
            Some(b'"') => {
                let out = &mut self.writer.out;
                out.push('"');
                read_string(self.text, &mut self.at, |piece| piece.write(out))?;
                out.push('"');
                Ok(Kind::String)
            }
            Some(b't') => self.literal("true", Kind::Bool),
            Some(b'f') => self.literal("false", Kind::Bool),
            Some(b'n') => self.literal("null", Kind::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(Refused),
        }
    }

    fn nested(&mut self, read: fn(&mut Self) -> Result<Kind, Refused>) -> Result<Kind, Refused> {
        self.room -= 1;
        if self.room == 0 {
            return Err(Refused);
        }
        let kind = read(self);
        self.room += 1;
        kind
    }

    fn literal(&mut self, word: &str, kind: Kind) -> Result<Kind, Refused> {
        let rest = self.bytes().get(self.at..).unwrap_or_default();
        if !rest.starts_with(word.as_bytes()) {
            return Err(Refused);
        }
        self.at += word.len();
        self.writer.out.push_str(word);
        Ok(kind)
    }

    fn array(&mut self) -> Result<Kind, Refused> {
        self.at += 1;
        self.writer.out.push('[');
        self.skip_whitespace();
        if self.peek() == Some(b']') {
            self.at += 1;
        } else {
            loop {
                self.value()?;
                self.skip_whitespace();
                match self.peek() {
                    Some(b',') => {
                        self.at += 1;
                        self.writer.out.push(',');
                        self.skip_whitespace();
                    }
                    Some(b']') => {
                        self.at += 1;
                        break;
                    }
                    _ => return Err(Refused),
                }
            }
        }
        self.writer.out.push(']');
        Ok(Kind::Array)
    }

    fn object(&mut self) -> Result<Kind, Refused> {
        self.at += 1;
        let base = self.writer.members.len();
        let start = self.writer.out.len();
        self.writer.out.push('{');
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.at += 1;
            self.writer.out.push('}');
            return Ok(Kind::Object);
        }
        // Keys in strictly increasing order are in canonical order and cannot repeat.
        let mut in_order = true;
        loop {
            if self.peek() != Some(b'"') {
                return Err(Refused);
            }
            let writer = &mut self.writer;
            if writer.members.len() > base {
                writer.out.push(',');
            }
            let member = writer.out.len();
            writer.out.push('"');
            // Kept for sorting: borrowed from the text unless it holds an escape.
            let mut key = Cow::Borrowed("");
            read_string(self.text, &mut self.at, |piece| {
                piece.write(&mut writer.out);
                match (piece, &mut key) {
                    (Piece::Plain(run), Cow::Borrowed(first)) if first.is_empty() => *first = run,
                    (Piece::Plain(run), key) => key.to_mut().push_str(run),
                    (Piece::Escaped(c), key) => key.to_mut().push(c),
                }
            })?;
            writer.out.push('"');
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
            }
            writer.out.push(':');
            self.expect(b':')?;
            self.skip_whitespace();
            self.value()?;
            self.writer.members.push(Member {
                key,
                prefix,
                start: member,
                end: self.writer.out.len(),
            });
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => {
                    self.at += 1;
                    self.skip_whitespace();
                }
                Some(b'}') => {
                    self.at += 1;
                    break;
                }
                _ => return Err(Refused),
            }
        }
        let writer = &mut self.writer;
        if in_order {
            writer.out.push('}');
        } else if start == 0 {
            // The outermost object: its members stay for `canonicalize` to sort.
            writer.outermost_misordered = true;
            return Ok(Kind::Object);
        } else if !writer.sort_object(base, start) {
            return Err(Refused);
        }
        writer.members.truncate(base);
        Ok(Kind::Object)
    }

    /// Reads a number as serde_json does: an integer that fits a `u64` (negated, an
    /// `i64`, or a double when that overflows or is `-0`) exactly, anything else as the
    /// nearest double.
    fn number(&mut self) -> Result<Kind, Refused> {
        let bytes = self.bytes();
        let start = self.at;
        let negative = bytes.get(start) == Some(&b'-');
        let digits_start = start + usize::from(negative);
        let mut at = match bytes.get(digits_start) {
            // One leading zero, and only one: `01` ends the number after the `0`.
            Some(b'0') => digits_start + 1,
            Some(b'1'..=b'9') => digits_end(bytes, digits_start + 1),
            _ => return Err(Refused),
        };
        let digits_stop = at;
        let mut integral = true;
        if bytes.get(at) == Some(&b'.') {
            at = digits_end(bytes, at + 1).max(at + 1);
            if at == digits_stop + 1 {
                return Err(Refused);
            }
            integral = false;
        }
        let mut long_exponent = false;
        if let Some(b'e' | b'E') = bytes.get(at) {
            at += 1;
            if let Some(b'+' | b'-') = bytes.get(at) {
                at += 1;
            }
            let exponent = at;
            at = digits_end(bytes, at);
            if at == exponent {
                return Err(Refused);
            }
            integral = false;
            let significant = bytes.get(exponent..at).unwrap_or_default();
            let significant = significant.iter().skip_while(|&&digit| digit == b'0');
            long_exponent = significant.count() > MOST_EXPONENT_DIGITS;
        }
        self.at = at;
        let out = &mut self.writer.out;
        if integral {
            let magnitude = bytes
                .get(digits_start..digits_stop)
                .unwrap_or_default()
                .iter()
                .try_fold(0u64, |n, &digit| {
                    n.checked_mul(10)?.checked_add(u64::from(digit - b'0'))
                });
            if let Some(magnitude) = magnitude {
                if !negative {
                    emit_u64(out, magnitude);
                } else {
                    let negated = (magnitude as i64).wrapping_neg();
                    if negated >= 0 {
                        // `-0`, or below `i64::MIN`.
                        emit_f64(out, -(magnitude as f64));
                    } else {
                        emit_i64(out, negated);
                    }
                }
                return Ok(Kind::Number);
            }
        }
        let literal = self.text.get(start..at).ok_or(Refused)?;
        let double = if long_exponent {
            // Rust's parser stops counting an exponent's digits near 65,536, where a
            // text of many digits can still bring the value back into range; serde_json
            // reads every digit.
            serde_json::from_str::<f64>(literal).map_err(|_| Refused)
        } else {
            literal.parse::<f64>().map_err(|_| Refused)
        };
        match double {
            Ok(double) if double.is_finite() => {
                emit_f64(out, double);
                Ok(Kind::Number)
            }
            // Beyond the doubles: serde_json refuses it too.
            _ => Err(Refused),
        }
    }
}

/// A piece of a string as [`read_string`] hands it on.
#[derive(Clone, Copy)]
enum Piece<'a> {
    /// A run that holds no escape, as written.
    Plain(&'a str),
    /// The character an escape stands for.
    Escaped(char),
}

impl Piece<'_> {
    /// Appends the piece in canonical form: a run as it is (JSON forbids raw `"`, `\`
    /// and control characters in strings, and the parser refuses them), an escaped
    /// character escaped only if canonical JSON escapes it.
    fn write(self, out: &mut String) {
        match self {
            Piece::Plain(run) => out.push_str(run),
            Piece::Escaped(c) => emit_char(out, c),
        }
    }
}

/// Reads the string whose opening quote is at `*at`, handing its pieces to `piece` in
/// order, and moves `*at` past its closing quote.
fn read_string<'a>(
    text: &'a str,
    at: &mut usize,
    mut piece: impl FnMut(Piece<'a>),
) -> Result<(), Refused> {
    let bytes = text.as_bytes();
    let mut from = *at + 1;
    loop {
        let end = plain_run(bytes, from);
        piece(Piece::Plain(text.get(from..end).ok_or(Refused)?));
        match bytes.get(end) {
            Some(b'"') => {
                *at = end + 1;
                return Ok(());
            }
            Some(b'\\') => {
                let (c, next) = unescape(bytes, end + 1)?;
                piece(Piece::Escaped(c));
                from = next;
            }
            // A control character, or the end of the text.
            _ => return Err(Refused),
        }
    }
}

/// The character the escape whose letter is at `at` stands for, and where it ends.
fn unescape(bytes: &[u8], at: usize) -> Result<(char, usize), Refused> {
    let c = match bytes.get(at) {
        Some(b'"') => '"',
        Some(b'\\') => '\\',
        Some(b'/') => '/',
        Some(b'b') => '\u{8}',
        Some(b'f') => '\u{c}',
        Some(b'n') => '\n',
        Some(b'r') => '\r',
        Some(b't') => '\t',
        Some(b'u') => {
            let unit = hex4(bytes, at + 1)?;
            let (code, end) = match unit {
                // A high surrogate must be followed by the escape of a low one.
                0xD800..=0xDBFF => {
                    if bytes.get(at + 5..at + 7) != Some(b"\\u") {
                        return Err(Refused);
                    }
                    let low = hex4(bytes, at + 7)?;
                    if !(0xDC00..=0xDFFF).contains(&low) {
                        return Err(Refused);
                    }
                    (0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00), at + 11)
                }
                0xDC00..=0xDFFF => return Err(Refused),
                _ => (unit, at + 5),
            };
            return Ok((char::from_u32(code).ok_or(Refused)?, end));
        }
        _ => return Err(Refused),
    };
    Ok((c, at + 1))
}

/// The four hex digits at `at`.
fn hex4(bytes: &[u8], at: usize) -> Result<u32, Refused> {
    let digits = bytes.get(at..at + 4).ok_or(Refused)?;
    digits.iter().try_fold(0, |unit, &digit| {
        let value = char::from(digit).to_digit(16).ok_or(Refused)?;
        Ok(unit << 4 | value)
    })
}

/// Where the run of ASCII digits from `at` ends.
fn digits_end(bytes: &[u8], mut at: usize) -> usize {
    while let Some(b'0'..=b'9') = bytes.get(at) {
        at += 1;
    }
    at
}

/// Where the run of string bytes from `at` that need no attention ends: at a quote, a
/// backslash, a control character or the end of the text. Eight bytes at a time.
fn plain_run(bytes: &[u8], mut at: usize) -> usize {
    while let Some(word) = bytes.get(at..).and_then(<[u8]>::first_chunk::<8>) {
        let mask = escape_mask(*word);
        if mask != 0 {
            return at + mask.trailing_zeros() as usize / 8;
        }
        at += 8;
    }
    while let Some(&byte) = bytes.get(at) {
        if needs_escape(byte) {
            break;
        }
        at += 1;
    }
    at
}
