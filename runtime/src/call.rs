//! A tool call as the model made it, with its canonical checksum computed before
//! anything runs.

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::canonical::{JsonError, Kind, canonicalize, type_name, write_canonical, write_string};
use crate::hex::{self, Case};
use crate::id::{Id, IdError};
use crate::random::RandomError;

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
        hex::encode(&self.0)
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
        if hex::decode(text, &mut out, Case::Lower) {
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
/// # Ok::<(), tooltrust::call::CallError>(())
/// ```
///
/// # One checksum, one value
///
/// The canonical text reads every number as a double, as the reference does, so an
/// integer beyond 2^53 is hashed as the nearest double: `1234567890123456795` and
/// `1234567890123456789` both hash as `1234567890123456800`. A call keeps only its
/// canonical arguments, and [`args`](Self::args) (what the gate checks and the tool
/// receives) is always the parse of [`canonical_args`](Self::canonical_args): both of
/// those calls give their tool `1234567890123456800`, the value a reviewer reads in the
/// canonical text. Calls with the same checksum always run with the same arguments.
/// A number whose nearest double lies beyond the tool's integer type
/// (`18446744073709551615` becomes `18446744073709552000`, over `u64::MAX`) is refused
/// by the tool's argument parser, and the tool does not run.
///
/// ```
/// use tooltrust::ToolCall;
/// let a = ToolCall::from_model("pay", r#"{"account": 1234567890123456795}"#)?;
/// let b = ToolCall::from_model("pay", r#"{"account": 1234567890123456789}"#)?;
/// assert_eq!(a.checksum(), b.checksum());
/// assert_eq!(a.canonical_args(), r#"{"account":1234567890123456800}"#);
/// assert_eq!(a.args()["account"], 1234567890123456800u64);
/// assert_eq!(a.args(), b.args());
/// # Ok::<(), tooltrust::call::CallError>(())
/// ```
#[derive(Clone)]
pub struct ToolCall {
    id: Id,
    tool: String,
    /// The RFC 8785 text of the arguments object: the one source of truth.
    canonical_args: String,
    checksum: Checksum,
    /// The parse of `canonical_args`, made when first asked for.
    args: OnceLock<Map<String, Value>>,
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
    /// No fresh id could be drawn for the call.
    #[error(transparent)]
    Random(#[from] RandomError),
}

impl ToolCall {
    /// Parses the model's argument text (empty text means `{}`) and computes the
    /// checksum; the call gets a fresh random id.
    pub fn from_model(tool: impl Into<String>, args_json: &str) -> Result<Self, CallError> {
        let tool = tool.into();
        match Id::random() {
            Ok(id) => Self::build(id, tool, args_json),
            Err(error) => Err(CallError {
                tool,
                reason: error.into(),
            }),
        }
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
    /// text); `args` must be an object. As with [`from_model`](Self::from_model), the
    /// tool receives the value the canonical text names, which for integers beyond
    /// 2^53 is the nearest double.
    pub fn from_value(tool: impl Into<String>, args: Value) -> Result<Self, CallError> {
        let tool = tool.into();
        match args {
            Value::Object(_) => {
                let mut canonical_args = String::new();
                write_canonical(&mut canonical_args, &args);
                match Id::random() {
                    Ok(id) => Ok(Self::assemble(id, tool, canonical_args)),
                    Err(error) => Err(CallError {
                        tool,
                        reason: error.into(),
                    }),
                }
            }
            other => Err(CallError {
                tool,
                reason: CallErrorReason::NotAnObject(type_name(&other)),
            }),
        }
    }

    fn build(id: Id, tool: String, args_json: &str) -> Result<Self, CallError> {
        // Only the empty text means "no arguments"; whitespace alone is invalid JSON, as
        // it is to the reference.
        let canonical = if args_json.is_empty() {
            Ok((String::from("{}"), Kind::Object))
        } else {
            canonicalize(args_json)
        };
        match canonical {
            Ok((canonical_args, Kind::Object)) => Ok(Self::assemble(id, tool, canonical_args)),
            Ok((_, kind)) => Err(CallError {
                tool,
                reason: CallErrorReason::NotAnObject(kind.name()),
            }),
            Err(error) => Err(CallError {
                tool,
                reason: error.into(),
            }),
        }
    }

    fn assemble(id: Id, tool: String, canonical_args: String) -> Self {
        let checksum = Sha256::new()
            .chain_update(CALL_HEAD)
            .chain_update(&canonical_args)
            .chain_update(call_tail(&tool))
            .finalize();
        let checksum = Checksum(checksum.into());
        ToolCall {
            id,
            checksum,
            tool,
            canonical_args,
            args: OnceLock::new(),
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

    /// The arguments: the parse of [`canonical_args`](Self::canonical_args), which may
    /// differ from the text the model wrote in its numbers (see
    /// [one checksum, one value](Self#one-checksum-one-value)).
    pub fn args(&self) -> &Map<String, Value> {
        self.args.get_or_init(|| {
            // Canonical text is strict JSON by construction (the property tests parse it
            // back for arbitrary input), so this always finds the object.
            match serde_json::from_str(&self.canonical_args) {
                Ok(Value::Object(args)) => args,
                _ => Map::new(),
            }
        })
    }

    /// The RFC 8785 canonical text of the arguments object alone: what the checksum
    /// covers, what a reviewer reads, and what the tool's arguments are parsed from.
    pub fn canonical_args(&self) -> &str {
        &self.canonical_args
    }

    /// The lowercase-hex SHA-256 of [`canonical`](Self::canonical).
    pub fn checksum(&self) -> Checksum {
        self.checksum
    }

    /// The canonical text that was hashed: `{"args":…,"tool":…}` in RFC 8785 form.
    pub fn canonical(&self) -> String {
        let tail = call_tail(&self.tool);
        let mut out =
            String::with_capacity(CALL_HEAD.len() + self.canonical_args.len() + tail.len());
        out.push_str(CALL_HEAD);
        out.push_str(&self.canonical_args);
        out.push_str(&tail);
        out
    }
}

impl PartialEq for ToolCall {
    /// Calls are equal when their ids, tools and canonical arguments are.
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
            && self.tool == other.tool
            && self.canonical_args == other.canonical_args
    }
}

impl fmt::Debug for ToolCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolCall")
            .field("id", &self.id)
            .field("tool", &self.tool)
            .field("canonical_args", &self.canonical_args)
            .field("checksum", &self.checksum)
            .finish()
    }
}

/// The canonical text of `{"args": args, "tool": tool}` is this, the arguments'
/// canonical text, and [`call_tail`] ("args" sorts before "tool").
const CALL_HEAD: &str = "{\"args\":";

fn call_tail(tool: &str) -> String {
    let mut tail = String::with_capacity(tool.len() + 11);
    tail.push_str(",\"tool\":");
    write_string(&mut tail, tool);
    tail.push('}');
    tail
}
