//! A tool call as the model made it, with its canonical checksum computed before
//! anything runs.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::canonical::{
    JsonError, Order, Sink, emit_canonical, emit_object, emit_string, parse_strict, type_name,
};
use crate::id::{Id, IdError, decode_hex, hex};

/// A lowercase-hex SHA-256 of a call's canonical text.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Checksum([u8; 32]);

impl Checksum {
    /// A checksum from its raw digest.
    pub const fn from_bytes(digest: [u8; 32]) -> Self {
        Checksum(digest)
    }

    /// The checksum of arbitrary bytes.
    pub fn of(bytes: &[u8]) -> Self {
        Checksum(Sha256::digest(bytes).into())
    }

    /// The raw digest.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The 64 lowercase hex characters.
    pub fn to_hex(&self) -> String {
        hex(&self.0)
    }
}

impl fmt::Display for Checksum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for Checksum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Checksum({self})")
    }
}

/// Why a text is not a checksum.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a checksum is 64 lowercase hex characters")]
pub struct ChecksumParseError;

impl FromStr for Checksum {
    type Err = ChecksumParseError;

    fn from_str(text: &str) -> Result<Self, ChecksumParseError> {
        let mut out = [0u8; 32];
        if decode_hex(text, &mut out, true) {
            Ok(Checksum(out))
        } else {
            Err(ChecksumParseError)
        }
    }
}

impl Serialize for Checksum {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for Checksum {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A call the model asked for: which tool, with which arguments, under which id, and
/// the checksum that identifies it.
///
/// ```
/// use tooltrust::ToolCall;
/// let a = ToolCall::from_model("sum", r#"{"b": 2, "a": 1}"#)?;
/// let b = ToolCall::from_model("sum", r#"{"a":1,"b":2}"#)?;
/// assert_eq!(a.checksum(), b.checksum());
/// assert_eq!(a.canonical(), r#"{"args":{"a":1,"b":2},"tool":"sum"}"#);
/// assert!(ToolCall::from_model("sum", r#"{"a":1,"a":2}"#).is_err());
/// # Ok::<(), tooltrust::CallError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    id: Id,
    tool: String,
    args: Map<String, Value>,
    checksum: Checksum,
}

/// Why the model's call cannot run. The call is answered with this error instead of
/// running; nothing is executed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("call to `{tool}` refused: {reason}")]
pub struct CallError {
    /// The tool the model named.
    pub tool: String,
    /// What is wrong with the call.
    pub reason: CallErrorReason,
}

/// What is wrong with a call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallErrorReason {
    /// The argument text is not acceptable JSON.
    #[error("arguments: {0}")]
    Json(#[from] JsonError),
    /// The arguments are JSON, but not an object.
    #[error("arguments must be a JSON object, not {0}")]
    NotAnObject(&'static str),
    /// The call id the provider gave cannot be used.
    #[error("call id: {0}")]
    Id(#[from] IdError),
}

impl ToolCall {
    /// Parses the model's argument text (empty text means `{}`) and computes the
    /// checksum; the call gets a fresh random id.
    pub fn from_model(tool: impl Into<String>, args_json: &str) -> Result<Self, CallError> {
        Self::build(Id::random(), tool.into(), args_json)
    }

    /// Like [`from_model`](Self::from_model), keeping the id the provider gave the call
    /// (which must be a valid [`Id`]).
    pub fn from_model_with_id(
        id: &str,
        tool: impl Into<String>,
        args_json: &str,
    ) -> Result<Self, CallError> {
        let tool = tool.into();
        match Id::new(id) {
            Ok(id) => Self::build(id, tool, args_json),
            Err(error) => Err(CallError {
                tool,
                reason: error.into(),
            }),
        }
    }

    /// A call from arguments already parsed (by the host's own code, not the model's
    /// text); `args` must be an object.
    pub fn from_value(tool: impl Into<String>, args: Value) -> Result<Self, CallError> {
        let tool = tool.into();
        match args {
            Value::Object(args) => Ok(Self::assemble(Id::random(), tool, args)),
            other => Err(CallError {
                tool,
                reason: CallErrorReason::NotAnObject(type_name(&other)),
            }),
        }
    }

    fn build(id: Id, tool: String, args_json: &str) -> Result<Self, CallError> {
        // Only the empty text means "no arguments"; whitespace alone is invalid JSON, as
        // it is to the reference.
        let parsed = if args_json.is_empty() {
            Ok(Value::Object(Map::new()))
        } else {
            parse_strict(args_json)
        };
        match parsed {
            Ok(Value::Object(args)) => Ok(Self::assemble(id, tool, args)),
            Ok(other) => Err(CallError {
                tool,
                reason: CallErrorReason::NotAnObject(type_name(&other)),
            }),
            Err(error) => Err(CallError {
                tool,
                reason: error.into(),
            }),
        }
    }

    fn assemble(id: Id, tool: String, args: Map<String, Value>) -> Self {
        let mut hashing = Hashing::new();
        emit_canonical(
            &mut hashing,
            |out, order| emit_call(out, &tool, &args, order),
            |out| *out = Hashing::new(),
        );
        let checksum = hashing.finish();
        ToolCall {
            id,
            tool,
            args,
            checksum,
        }
    }

    /// The call's id.
    pub fn id(&self) -> &Id {
        &self.id
    }

    /// The tool the model named (not necessarily a registered one).
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// The parsed arguments.
    pub fn args(&self) -> &Map<String, Value> {
        &self.args
    }

    /// The lowercase-hex SHA-256 of [`canonical`](Self::canonical).
    pub fn checksum(&self) -> Checksum {
        self.checksum
    }

    /// The canonical text that was hashed: `{"args":…,"tool":…}` in RFC 8785 form.
    pub fn canonical(&self) -> String {
        let mut out = String::new();
        emit_canonical(
            &mut out,
            |out, order| emit_call(out, &self.tool, &self.args, order),
            String::clear,
        );
        out
    }
}

/// Writes the canonical text of `{"args": args, "tool": tool}` without building the
/// wrapper object ("args" sorts before "tool").
fn emit_call<S: Sink>(out: &mut S, tool: &str, args: &Map<String, Value>, order: &mut Order) {
    out.push_str("{\"args\":");
    emit_object(out, args, order);
    out.push_str(",\"tool\":");
    emit_string(out, tool);
    out.push_str("}");
}

/// Hashes canonical text as it is written, through a buffer on the stack, so that a
/// checksum neither allocates nor holds the whole text.
struct Hashing {
    hasher: Sha256,
    buffer: [u8; Hashing::BUFFER],
    len: usize,
}

impl Hashing {
    const BUFFER: usize = 1024;

    fn new() -> Self {
        Hashing {
            hasher: Sha256::new(),
            buffer: [0; Self::BUFFER],
            len: 0,
        }
    }

    fn finish(mut self) -> Checksum {
        self.flush();
        Checksum(self.hasher.finalize().into())
    }

    fn flush(&mut self) {
        if let Some(pending) = self.buffer.get(..self.len) {
            self.hasher.update(pending);
        }
        self.len = 0;
    }

    /// Writes what does not fit in the buffer's free space.
    #[cold]
    fn spill(&mut self, bytes: &[u8]) {
        self.flush();
        match self.buffer.get_mut(..bytes.len()) {
            Some(slot) => {
                slot.copy_from_slice(bytes);
                self.len = bytes.len();
            }
            // Longer than the buffer (a big string): straight to the hasher, no copy.
            None => self.hasher.update(bytes),
        }
    }
}

impl Sink for Hashing {
    #[inline]
    fn push_str(&mut self, text: &str) {
        let bytes = text.as_bytes();
        match self.buffer.get_mut(self.len..self.len + bytes.len()) {
            Some(slot) => {
                slot.copy_from_slice(bytes);
                self.len += bytes.len();
            }
            None => self.spill(bytes),
        }
    }

    #[inline]
    fn push_ascii(&mut self, byte: u8) {
        match self.buffer.get_mut(self.len) {
            Some(slot) => {
                *slot = byte;
                self.len += 1;
            }
            None => self.spill(&[byte]),
        }
    }
}
