//! An independent reading of JSON text the way the reference implementation reads it
//! (JavaScript's `JSON.parse`, then RFC 8785): strings are UTF-16 and may hold lone
//! surrogates, a duplicate key keeps its last value, every number is a double.
//!
//! The tests use it as an oracle: it reproduces the reference's canonical text for every
//! vector, including the ones tooltrust refuses, and names the first fault in the text
//! that makes tooltrust refuse it. It shares no code with the parser under test.

use std::collections::BTreeMap;

/// Why tooltrust must refuse a text that the reference reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// One object holds this key twice.
    DuplicateKey(String),
    /// A string holds a lone UTF-16 surrogate escape.
    LoneSurrogate,
    /// A number overflows a double.
    NumberOutOfRange,
}

/// The reference's reading of a text.
#[derive(Debug)]
pub struct Reading {
    /// The RFC 8785 text of the value as the reference sees it (lone surrogates as
    /// `\uXXXX` escapes, as `JSON.stringify` writes them).
    pub canonical: String,
    /// The first fault in document order, if any.
    pub fault: Option<Fault>,
}

/// Reads `text`; `Err` when it is not JSON at all.
pub fn read(text: &str) -> Result<Reading, String> {
    let mut reader = Reader {
        bytes: text.as_bytes(),
        at: 0,
        fault: None,
    };
    reader.skip_whitespace();
    let value = reader.value(0)?;
    reader.skip_whitespace();
    if reader.at != reader.bytes.len() {
        return Err(format!("trailing characters at byte {}", reader.at));
    }
    let mut canonical = String::new();
    write(&mut canonical, &value);
    Ok(Reading {
        canonical,
        fault: reader.fault,
    })
}

enum Node {
    Literal(&'static str),
    Number(f64),
    String(Vec<u16>),
    Array(Vec<Node>),
    /// Keys in UTF-16 code units: their natural order is the RFC 8785 order.
    Object(BTreeMap<Vec<u16>, Node>),
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    fault: Option<Fault>,
}

impl Reader<'_> {
    fn note(&mut self, fault: Fault) {
        self.fault.get_or_insert(fault);
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), String> {
        if self.peek() == Some(byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(format!("expected {:?} at byte {}", byte as char, self.at))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Node, String> {
        if depth > 200 {
            return Err("nesting too deep".into());
        }
        match self.peek() {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string().map(Node::String),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => {
                for word in ["null", "true", "false"] {
                    if self.bytes[self.at..].starts_with(word.as_bytes()) {
                        self.at += word.len();
                        return Ok(Node::Literal(word));
                    }
                }
                Err(format!("expected a value at byte {}", self.at))
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Node, String> {
        self.expect(b'{')?;
        let mut map = BTreeMap::new();
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(Node::Object(map));
        }
        loop {
            self.skip_whitespace();
            let key = self.string()?;
            if map.contains_key(&key) {
                self.note(Fault::DuplicateKey(String::from_utf16_lossy(&key)));
            }
            self.skip_whitespace();
            self.expect(b':')?;
            self.skip_whitespace();
            let value = self.value(depth + 1)?;
            // JSON.parse keeps the last value of a repeated key.
            map.insert(key, value);
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(Node::Object(map));
                }
                _ => return Err(format!("expected , or }} at byte {}", self.at)),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Node, String> {
        self.expect(b'[')?;
        let mut items = Vec::new();
        self.skip_whitespace();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(Node::Array(items));
        }
        loop {
            self.skip_whitespace();
            items.push(self.value(depth + 1)?);
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(Node::Array(items));
                }
                _ => return Err(format!("expected , or ] at byte {}", self.at)),
            }
        }
    }

    fn number(&mut self) -> Result<Node, String> {
        let start = self.at;
        let digits = |reader: &mut Self| {
            let from = reader.at;
            while matches!(reader.peek(), Some(b'0'..=b'9')) {
                reader.at += 1;
            }
            reader.at - from
        };
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        let integer_start = self.at;
        let integer_digits = digits(self);
        if integer_digits == 0 || (integer_digits > 1 && self.bytes[integer_start] == b'0') {
            return Err(format!("bad number at byte {start}"));
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            if digits(self) == 0 {
                return Err(format!("bad fraction at byte {start}"));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if digits(self) == 0 {
                return Err(format!("bad exponent at byte {start}"));
            }
        }
        let text = std::str::from_utf8(&self.bytes[start..self.at]).map_err(|e| e.to_string())?;
        let number: f64 = text.parse().map_err(|e| format!("{e}"))?;
        if !number.is_finite() {
            self.note(Fault::NumberOutOfRange);
        }
        Ok(Node::Number(number))
    }

    /// A string as UTF-16 code units, lone surrogates kept.
    fn string(&mut self) -> Result<Vec<u16>, String> {
        self.expect(b'"')?;
        let mut units = Vec::new();
        let mut pending_high = None;
        loop {
            let start = self.at;
            let byte = self.peek().ok_or("unterminated string")?;
            let unit_from_escape = match byte {
                b'"' => {
                    self.at += 1;
                    if let Some(high) = pending_high {
                        self.note(Fault::LoneSurrogate);
                        units.push(high);
                    }
                    return Ok(units);
                }
                0x00..=0x1f => return Err(format!("raw control character at byte {start}")),
                b'\\' => {
                    self.at += 1;
                    let escape = self.peek().ok_or("unterminated escape")?;
                    self.at += 1;
                    match escape {
                        b'"' => Some(0x22),
                        b'\\' => Some(0x5c),
                        b'/' => Some(0x2f),
                        b'b' => Some(0x08),
                        b'f' => Some(0x0c),
                        b'n' => Some(0x0a),
                        b'r' => Some(0x0d),
                        b't' => Some(0x09),
                        b'u' => {
                            let hex = self
                                .bytes
                                .get(self.at..self.at + 4)
                                .and_then(|h| std::str::from_utf8(h).ok())
                                .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
                                .ok_or(format!("bad \\u escape at byte {start}"))?;
                            self.at += 4;
                            Some(u16::from_str_radix(hex, 16).map_err(|e| e.to_string())?)
                        }
                        _ => return Err(format!("bad escape at byte {start}")),
                    }
                }
                _ => None,
            };
            let new_units: Vec<u16> = match unit_from_escape {
                Some(unit) => vec![unit],
                None => {
                    let rest =
                        std::str::from_utf8(&self.bytes[self.at..]).map_err(|e| e.to_string())?;
                    let c = rest.chars().next().ok_or("unterminated string")?;
                    self.at += c.len_utf8();
                    c.encode_utf16(&mut [0; 2]).to_vec()
                }
            };
            for unit in new_units {
                match (pending_high.take(), unit) {
                    (Some(high), 0xDC00..=0xDFFF) => units.extend([high, unit]),
                    (Some(high), _) => {
                        self.note(Fault::LoneSurrogate);
                        units.push(high);
                        self.push_unit(&mut units, &mut pending_high, unit);
                    }
                    (None, _) => self.push_unit(&mut units, &mut pending_high, unit),
                }
            }
        }
    }

    fn push_unit(&mut self, units: &mut Vec<u16>, pending_high: &mut Option<u16>, unit: u16) {
        match unit {
            0xD800..=0xDBFF => *pending_high = Some(unit),
            0xDC00..=0xDFFF => {
                self.note(Fault::LoneSurrogate);
                units.push(unit);
            }
            _ => units.push(unit),
        }
    }
}

fn write(out: &mut String, node: &Node) {
    match node {
        Node::Literal(word) => out.push_str(word),
        Node::Number(number) if number.is_finite() => {
            out.push_str(ryu_js::Buffer::new().format_finite(*number))
        }
        Node::Number(_) => out.push_str("null"),
        Node::String(units) => write_units(out, units),
        Node::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write(out, item);
            }
            out.push(']');
        }
        Node::Object(map) => {
            out.push('{');
            for (index, (key, item)) in map.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_units(out, key);
                out.push(':');
                write(out, item);
            }
            out.push('}');
        }
    }
}

fn write_units(out: &mut String, units: &[u16]) {
    out.push('"');
    for decoded in char::decode_utf16(units.iter().copied()) {
        match decoded {
            Ok('"') => out.push_str("\\\""),
            Ok('\\') => out.push_str("\\\\"),
            Ok('\u{8}') => out.push_str("\\b"),
            Ok('\u{c}') => out.push_str("\\f"),
            Ok('\n') => out.push_str("\\n"),
            Ok('\r') => out.push_str("\\r"),
            Ok('\t') => out.push_str("\\t"),
            Ok(c) if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            Ok(c) => out.push(c),
            Err(lone) => out.push_str(&format!("\\u{:04x}", lone.unpaired_surrogate())),
        }
    }
    out.push('"');
}
