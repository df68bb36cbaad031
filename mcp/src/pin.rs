//! Pinning: the tool definitions a host accepted, by hash, in a lock file beside the
//! proxy's configuration: a definition that changes after the host accepted it (a rug
//! pull) is withheld until the host accepts it again.
//!
//! A definition is a tool's name, description, input schema and annotations as the server
//! lists them, and its hash the SHA-256 of that object's RFC 8785 canonical text (the
//! runtime's [`canonical_json`]), so key order and number spelling change nothing. The
//! lock keeps each definition beside its hash, so that a change can be shown field by
//! field ([`diff`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use rmcp::model::Tool;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tooltrust::call::Checksum;
use tooltrust::canonical::canonical_json;

/// A tool's definition as a server lists it, and its hash.
#[derive(Debug, Clone, PartialEq)]
pub struct Definition {
    /// The tool's name on its server.
    pub name: String,
    /// `{"name", "description", "inputSchema", "annotations"}` (absent ones `null`).
    pub value: Value,
    /// The SHA-256 of the value's canonical JSON.
    pub sha256: Checksum,
}

impl Definition {
    /// The definition of `tool`.
    pub fn of(tool: &Tool) -> Definition {
        let annotations = match &tool.annotations {
            None => Value::Null,
            // A plain struct of options: it serializes; should it not, the hash still
            // differs from any that does.
            Some(annotations) => serde_json::to_value(annotations)
                .unwrap_or_else(|error| Value::String(format!("unserializable: {error}"))),
        };
        let mut value = Map::new();
        value.insert("name".into(), Value::String(tool.name.to_string()));
        value.insert(
            "description".into(),
            tool.description
                .as_deref()
                .map_or(Value::Null, |text| Value::String(text.to_owned())),
        );
        value.insert(
            "inputSchema".into(),
            Value::Object((*tool.input_schema).clone()),
        );
        value.insert("annotations".into(), annotations);
        Definition::from_value(tool.name.to_string(), Value::Object(value))
    }

    fn from_value(name: String, value: Value) -> Definition {
        let sha256 = Checksum::of(canonical_json(&value).as_bytes());
        Definition {
            name,
            value,
            sha256,
        }
    }
}

/// The lock file: per upstream, per tool, the pinned hash and definition.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    /// The format's version, 1.
    pub version: u32,
    /// Upstream name → tool name → pin.
    pub upstreams: BTreeMap<String, BTreeMap<String, Pin>>,
}

/// One pinned tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pin {
    /// The SHA-256 of the definition's canonical JSON.
    pub sha256: Checksum,
    /// The definition, for showing what changed.
    pub definition: Value,
}

/// Why a lock file was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// It could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The lock file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// It is not a lock file of this version.
    #[error("{path}: not a tooltrust lock file: {source}")]
    Format {
        /// The lock file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// A pin's hash is not its definition's: the file was edited by hand.
    #[error(
        "{path}: the pin of {upstream}/{tool} does not match its definition; run `tooltrust mcp pin` again"
    )]
    Tampered {
        /// The lock file.
        path: PathBuf,
        /// The upstream.
        upstream: String,
        /// The tool.
        tool: String,
    },
}

/// The lock file of the configuration at `config`: beside it, `.lock` for its extension.
pub fn lock_path(config: &Path) -> PathBuf {
    config.with_extension("lock")
}

/// How a listed tool stands against the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Its definition is the pinned one.
    Pinned,
    /// It is pinned with another definition: this hash.
    Changed(Checksum),
    /// It has no pin.
    Unpinned,
}

impl Lock {
    /// The current format's version.
    pub const VERSION: u32 = 1;

    /// Reads the lock at `path`; `Ok(None)` when there is none.
    pub fn read(path: &Path) -> Result<Option<Lock>, LockError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(LockError::Io {
                    path: path.to_owned(),
                    source,
                });
            }
        };
        let lock: Lock = serde_json::from_str(&text).map_err(|source| LockError::Format {
            path: path.to_owned(),
            source,
        })?;
        if lock.version != Lock::VERSION {
            return Err(LockError::Format {
                path: path.to_owned(),
                source: serde::de::Error::custom(format!(
                    "version {} (this tooltrust reads version {})",
                    lock.version,
                    Lock::VERSION
                )),
            });
        }
        for (upstream, tools) in &lock.upstreams {
            for (tool, pin) in tools {
                let again = Definition::from_value(tool.clone(), pin.definition.clone());
                if again.sha256 != pin.sha256 || pin.definition["name"] != **tool {
                    return Err(LockError::Tampered {
                        path: path.to_owned(),
                        upstream: upstream.clone(),
                        tool: tool.clone(),
                    });
                }
            }
        }
        Ok(Some(lock))
    }

    /// Writes the lock to `path`, replacing it whole (a crash leaves the old one or the
    /// new one).
    pub fn write(&self, path: &Path) -> Result<(), LockError> {
        let io_error = |source| LockError::Io {
            path: path.to_owned(),
            source,
        };
        let mut text = serde_json::to_string_pretty(self)
            .map_err(|error| io_error(io::Error::other(error)))?;
        text.push('\n');
        let temp = path.with_extension("lock.tmp");
        let mut file = std::fs::File::create(&temp).map_err(io_error)?;
        io::Write::write_all(&mut file, text.as_bytes()).map_err(io_error)?;
        file.sync_all().map_err(io_error)?;
        std::fs::rename(&temp, path).map_err(io_error)
    }

    /// Pins `definitions` of `upstream`, replacing its earlier pins.
    pub fn pin(&mut self, upstream: &str, definitions: &[Definition]) {
        let tools = definitions
            .iter()
            .map(|definition| {
                (
                    definition.name.clone(),
                    Pin {
                        sha256: definition.sha256,
                        definition: definition.value.clone(),
                    },
                )
            })
            .collect();
        self.upstreams.insert(upstream.to_owned(), tools);
    }

    /// How `definition`, listed by `upstream`, stands against its pin.
    pub fn standing(&self, upstream: &str, definition: &Definition) -> Standing {
        match self
            .upstreams
            .get(upstream)
            .and_then(|tools| tools.get(&definition.name))
        {
            Some(pin) if pin.sha256 == definition.sha256 => Standing::Pinned,
            Some(pin) => Standing::Changed(pin.sha256),
            None => Standing::Unpinned,
        }
    }
}

/// What changed in one upstream's tools since they were pinned.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// A pinned tool lists another definition: the fields that differ.
    Changed {
        /// The upstream.
        upstream: String,
        /// The tool, by its name on the upstream.
        tool: String,
        /// The pinned hash.
        pinned: Checksum,
        /// The listed hash.
        listed: Checksum,
        /// Each differing field: its path (`description`,
        /// `inputSchema/properties/to/description`), pinned value, listed value.
        fields: Vec<(String, Option<Value>, Option<Value>)>,
    },
    /// A tool with no pin.
    New {
        /// The upstream.
        upstream: String,
        /// The tool.
        tool: String,
        /// Its hash.
        listed: Checksum,
    },
    /// A pinned tool the upstream no longer lists.
    Gone {
        /// The upstream.
        upstream: String,
        /// The tool.
        tool: String,
    },
}

/// What changed between the pins of `upstream` and the `definitions` it lists now.
pub fn diff(lock: &Lock, upstream: &str, definitions: &[Definition]) -> Vec<Change> {
    let empty = BTreeMap::new();
    let pins = lock.upstreams.get(upstream).unwrap_or(&empty);
    let mut changes = Vec::new();
    for definition in definitions {
        match pins.get(&definition.name) {
            Some(pin) if pin.sha256 == definition.sha256 => {}
            Some(pin) => {
                let mut fields = Vec::new();
                fields_of(
                    &mut fields,
                    String::new(),
                    &pin.definition,
                    &definition.value,
                );
                changes.push(Change::Changed {
                    upstream: upstream.to_owned(),
                    tool: definition.name.clone(),
                    pinned: pin.sha256,
                    listed: definition.sha256,
                    fields,
                });
            }
            None => changes.push(Change::New {
                upstream: upstream.to_owned(),
                tool: definition.name.clone(),
                listed: definition.sha256,
            }),
        }
    }
    for tool in pins.keys() {
        if !definitions
            .iter()
            .any(|definition| &definition.name == tool)
        {
            changes.push(Change::Gone {
                upstream: upstream.to_owned(),
                tool: tool.clone(),
            });
        }
    }
    changes
}

/// The leaves in which `old` and `new` differ, by path.
fn fields_of(
    out: &mut Vec<(String, Option<Value>, Option<Value>)>,
    path: String,
    old: &Value,
    new: &Value,
) {
    let join = |key: &str| {
        if path.is_empty() {
            key.to_owned()
        } else {
            format!("{path}/{key}")
        }
    };
    match (old, new) {
        (Value::Object(old), Value::Object(new)) => {
            for (key, value) in old {
                match new.get(key) {
                    Some(other) => fields_of(out, join(key), value, other),
                    None => out.push((join(key), Some(value.clone()), None)),
                }
            }
            for (key, value) in new {
                if !old.contains_key(key) {
                    out.push((join(key), None, Some(value.clone())));
                }
            }
        }
        (Value::Array(old), Value::Array(new)) if old.len() == new.len() => {
            for (index, (old, new)) in old.iter().zip(new).enumerate() {
                fields_of(out, join(&index.to_string()), old, new);
            }
        }
        // Compared as the hash compares them: canonical text.
        _ if canonical_json(old) == canonical_json(new) => {}
        _ => out.push((path, Some(old.clone()), Some(new.clone()))),
    }
}

/// `changes` for a terminal: one line per tool, one indented line per field, every
/// server-written value escaped (no control character, no bidirectional override reaches
/// the terminal).
pub fn render(changes: &[Change]) -> String {
    let shown = |value: &Option<Value>| match value {
        None => "(absent)".to_owned(),
        Some(Value::String(text)) => format!("{text:?}"),
        Some(other) => canonical_json(other).escape_debug().to_string(),
    };
    let name = |text: &str| tooltrust::envelope::inert(text).into_owned();
    let mut out = String::new();
    for change in changes {
        // Writing to a String cannot fail.
        let _ = match change {
            Change::Changed {
                upstream,
                tool,
                pinned,
                listed,
                fields,
            } => {
                let _ = writeln!(
                    out,
                    "changed: {}__{} (pinned {pinned}, listed {listed})",
                    name(upstream),
                    name(tool)
                );
                for (path, old, new) in fields {
                    let _ = writeln!(out, "  {}: {} -> {}", name(path), shown(old), shown(new));
                }
                Ok(())
            }
            Change::New {
                upstream,
                tool,
                listed,
            } => writeln!(
                out,
                "new: {}__{} (listed {listed}, no pin)",
                name(upstream),
                name(tool)
            ),
            Change::Gone { upstream, tool } => writeln!(
                out,
                "gone: {}__{} (pinned, no longer listed)",
                name(upstream),
                name(tool)
            ),
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn tool(description: &str) -> Tool {
        let Value::Object(schema) = json!({"type": "object", "properties": {"to": {"type": "string", "description": "who"}}})
        else {
            panic!("an object")
        };
        Tool::new("send", description.to_owned(), Arc::new(schema))
    }

    #[test]
    fn the_hash_is_of_the_canonical_definition() {
        let definition = Definition::of(&tool("Sends."));
        let canonical = canonical_json(&definition.value);
        assert!(canonical.starts_with("{\"annotations\":null,\"description\":\"Sends.\""));
        assert_eq!(definition.sha256, Checksum::of(canonical.as_bytes()));
        assert_ne!(definition.sha256, Definition::of(&tool("Sends!")).sha256);
    }

    #[test]
    fn a_lock_round_trips_and_refuses_edits() {
        let dir = std::env::temp_dir().join(format!("tooltrust-pin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.lock");
        let mut lock = Lock {
            version: Lock::VERSION,
            ..Lock::default()
        };
        let definition = Definition::of(&tool("Sends."));
        lock.pin("mail", std::slice::from_ref(&definition));
        lock.write(&path).unwrap();
        let read = Lock::read(&path).unwrap().unwrap();
        assert_eq!(read, lock);
        assert_eq!(read.standing("mail", &definition), Standing::Pinned);
        let changed = Definition::of(&tool("Sends, and more."));
        assert_eq!(
            read.standing("mail", &changed),
            Standing::Changed(definition.sha256)
        );
        assert_eq!(read.standing("web", &definition), Standing::Unpinned);
        let edited = std::fs::read_to_string(&path)
            .unwrap()
            .replace("Sends.", "Sends!");
        std::fs::write(&path, edited).unwrap();
        assert!(matches!(Lock::read(&path), Err(LockError::Tampered { .. })));
        assert!(Lock::read(&dir.join("none.lock")).unwrap().is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_diff_names_the_fields() {
        let mut lock = Lock::default();
        lock.pin("mail", &[Definition::of(&tool("Sends."))]);
        let mut changed = tool("Sends.\u{1b}[2J now");
        let Value::Object(schema) = json!({"type": "object", "properties": {"to": {"type": "string", "description": "anyone"}}})
        else {
            panic!("an object")
        };
        changed.input_schema = Arc::new(schema);
        let mut other = tool("x");
        other.name = "other".into();
        let changes = diff(
            &lock,
            "mail",
            &[Definition::of(&changed), Definition::of(&other)],
        );
        let Change::Changed { fields, .. } = &changes[0] else {
            panic!("{changes:?}")
        };
        let paths: Vec<&str> = fields.iter().map(|(path, _, _)| path.as_str()).collect();
        assert_eq!(
            paths,
            ["description", "inputSchema/properties/to/description"]
        );
        assert!(matches!(&changes[1], Change::New { tool, .. } if tool == "other"));
        let shown = render(&changes);
        assert!(shown.contains("changed: mail__send"), "{shown}");
        assert!(shown.contains("  description: \"Sends.\" -> "), "{shown}");
        assert!(!shown.contains('\u{1b}'), "escaped: {shown}");
        assert!(shown.contains("new: mail__other"), "{shown}");
        let gone = diff(&lock, "mail", &[]);
        assert!(matches!(&gone[0], Change::Gone { tool, .. } if tool == "send"));
    }
}
