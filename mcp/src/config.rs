//! The guarding proxy's configuration file (TOML). Every error names the line, the key and
//! the value, so a bad file is refused at start with something a person can fix.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::PathBuf;

use indexmap::IndexMap;
use serde::Deserialize;
use toml::Spanned;
use tooltrust::tool::{DeclaredTrust, Effects};

use crate::declaration::{Declarations, Declared};

/// The proxy's configuration, as written in `tooltrust-mcp.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyConfig {
    /// The audit log's directory, relative to the configuration file.
    pub audit_log: PathBuf,
    /// Strict isolation: a clean session may not call tools whose output is untrusted.
    #[serde(default)]
    pub strict_isolation: bool,
    /// `enforce` (the default) or `observe` (decide and record, but let every known call
    /// through).
    #[serde(default)]
    pub mode: Mode,
    /// The loop breaker: a call whose checksum already ran this many times is denied.
    #[serde(default)]
    pub max_repeats: Option<u32>,
    /// A review queue for held calls the client cannot be asked about: `sqlite:PATH`
    /// (relative to the configuration file) or a `postgres://` URL. Without one, such a
    /// call is only reported held.
    #[serde(default)]
    pub store: Option<Spanned<String>>,
    /// Whether tool definitions must match the lock file written by `tooltrust mcp pin`:
    /// `auto` (the default: when the lock file exists) or `required` (a missing lock
    /// leaves every tool unpinned, so withheld).
    #[serde(default)]
    pub pin: PinMode,
    /// Whether the session starts tainted when an upstream's own metadata (descriptions,
    /// schema strings) of a tool not declared `trusted` is shown to the host without a
    /// `description` of the config's own (default `true`). Set `false` only for hosts
    /// that never show tool descriptions to a model.
    #[serde(default = "yes")]
    pub metadata_taints: bool,
    /// How many bytes of an upstream's text a description (of a tool, or a string in its
    /// schema) may show; the rest is cut (default 1024).
    #[serde(default = "default_description_bytes")]
    pub max_description_bytes: usize,
    /// How many bytes of text (strings and property names) a tool's input schema may
    /// hold; descriptions past it are cut, and a schema whose values alone exceed it is
    /// not served (default 16384).
    #[serde(default = "default_schema_bytes")]
    pub max_schema_bytes: usize,
    /// The servers the proxy fronts.
    #[serde(default)]
    pub upstream: Vec<Upstream>,
}

fn yes() -> bool {
    true
}

/// The default of [`ProxyConfig::max_description_bytes`].
pub const DEFAULT_DESCRIPTION_BYTES: usize = 1024;
/// The default of [`ProxyConfig::max_schema_bytes`].
pub const DEFAULT_SCHEMA_BYTES: usize = 16 * 1024;

fn default_description_bytes() -> usize {
    DEFAULT_DESCRIPTION_BYTES
}

fn default_schema_bytes() -> usize {
    DEFAULT_SCHEMA_BYTES
}

/// When tool definitions are checked against their pins.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PinMode {
    /// Checked when the lock file exists.
    #[default]
    Auto,
    /// Always checked: without a lock file, no tool is pinned, so none is served.
    Required,
}

/// Whether the gate's decisions are enforced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Decisions are enforced.
    #[default]
    Enforce,
    /// Decisions are recorded as what the gate would do; known calls pass through.
    Observe,
}

/// One upstream MCP server.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Upstream {
    /// Its name; its tools appear as `<name>__<tool>`.
    pub name: Spanned<String>,
    /// The command that starts it over stdio (program and arguments).
    #[serde(default)]
    pub command: Option<Spanned<Vec<String>>>,
    /// Its streamable-HTTP endpoint.
    #[serde(default)]
    pub url: Option<Spanned<String>>,
    /// Environment variables for the command, added to the few it inherits from the
    /// proxy (`PATH`, `HOME`, `LANG`, `TZ`); nothing else of the proxy's environment
    /// reaches it.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Declarations by tool-name pattern, in order: the first match wins.
    #[serde(default)]
    pub tools: IndexMap<String, ToolDeclaration>,
}

/// What the host declares of the tools a pattern matches.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDeclaration {
    /// `trusted` or `untrusted`.
    pub trust: Trust,
    /// Whether the tools change nothing (default: they are consequential).
    #[serde(default)]
    pub read_only: bool,
    /// The description the host shows instead of the upstream's (which, for a tool not
    /// declared `trusted`, is outsiders' text).
    #[serde(default)]
    pub description: Option<String>,
}

/// A tool's declared trust, as the file spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trust {
    /// Output the host vouches for.
    Trusted,
    /// Output anyone may have written.
    Untrusted,
}

/// How an upstream is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A process over stdio.
    Command {
        /// The program.
        program: String,
        /// Its arguments.
        args: Vec<String>,
    },
    /// A streamable-HTTP server.
    Url(String),
}

/// A refused configuration: where, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The 1-based line, when the error has one.
    pub line: Option<usize>,
    /// What is wrong, naming the key and the value.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "line {line}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

impl ProxyConfig {
    /// Reads and checks a configuration text.
    pub fn parse(text: &str) -> Result<ProxyConfig, ConfigError> {
        let config: ProxyConfig = toml::from_str(text).map_err(|error| {
            let line = error.span().map(|span| line_of(text, span.start));
            // The line as written names the key and the value.
            let written = line
                .and_then(|line| text.lines().nth(line - 1))
                .map(str::trim)
                .filter(|written| !written.is_empty());
            ConfigError {
                line,
                message: match written {
                    Some(written) => format!("`{written}`: {}", error.message().trim_end()),
                    None => error.message().trim_end().to_owned(),
                },
            }
        })?;
        if let Some(store) = &config.store
            && let Err(error) = tooltrust_store::Location::parse(store.get_ref())
        {
            return Err(ConfigError {
                line: Some(line_of(text, store.span().start)),
                message: format!("key `store`, value {:?}: {error}", store.get_ref()),
            });
        }
        let mut names = HashSet::new();
        for upstream in &config.upstream {
            let name = upstream.name.get_ref();
            let at = |span: std::ops::Range<usize>| Some(line_of(text, span.start));
            let valid = !name.is_empty()
                && name.len() <= 32
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                && !name.contains("__")
                // `mail_` + `_x` would read as `mail` + `__x`: with no `_` at the end of an
                // upstream's name (and none at the start of a tool's), `<upstream>__<tool>`
                // splits one way only.
                && !name.ends_with('_');
            if !valid {
                return Err(ConfigError {
                    line: at(upstream.name.span()),
                    message: format!(
                        "key `name`, value {name:?}: an upstream name is 1 to 32 of A-Z, a-z, 0-9, `-`, `_`, without `__` and not ending in `_`"
                    ),
                });
            }
            if !names.insert(name.clone()) {
                return Err(ConfigError {
                    line: at(upstream.name.span()),
                    message: format!("key `name`, value {name:?}: two upstreams have this name"),
                });
            }
            match (&upstream.command, &upstream.url) {
                (Some(command), None) if command.get_ref().is_empty() => {
                    return Err(ConfigError {
                        line: at(command.span()),
                        message: format!(
                            "key `command` of upstream {name:?}, value []: give the program and its arguments"
                        ),
                    });
                }
                (None, Some(url))
                    if !(url.get_ref().starts_with("http://")
                        || url.get_ref().starts_with("https://")) =>
                {
                    return Err(ConfigError {
                        line: at(url.span()),
                        message: format!(
                            "key `url` of upstream {name:?}, value {:?}: an http:// or https:// URL",
                            url.get_ref()
                        ),
                    });
                }
                (Some(_), None) | (None, Some(_)) => {}
                _ => {
                    return Err(ConfigError {
                        line: at(upstream.name.span()),
                        message: format!(
                            "upstream {name:?}: give exactly one of `command` (stdio) and `url` (HTTP)"
                        ),
                    });
                }
            }
        }
        for (key, value) in [
            ("max_description_bytes", config.max_description_bytes),
            ("max_schema_bytes", config.max_schema_bytes),
        ] {
            if !(16..=1 << 24).contains(&value) {
                return Err(ConfigError {
                    line: key_line(text, key),
                    message: format!("key `{key}`, value {value}: between 16 and 16777216"),
                });
            }
        }
        Ok(config)
    }
}

impl Upstream {
    /// How the upstream is reached (checked by [`ProxyConfig::parse`]).
    pub fn endpoint(&self) -> Option<Endpoint> {
        match (&self.command, &self.url) {
            (Some(command), None) => {
                let (program, args) = command.get_ref().split_first()?;
                Some(Endpoint::Command {
                    program: program.clone(),
                    args: args.to_vec(),
                })
            }
            (None, Some(url)) => Some(Endpoint::Url(url.get_ref().clone())),
            _ => None,
        }
    }

    /// The host's declarations for this upstream's tools.
    pub fn declarations(&self) -> Declarations {
        self.tools
            .iter()
            .fold(Declarations::new(), |declarations, (pattern, declared)| {
                declarations.declare_described(
                    pattern.clone(),
                    Declared {
                        trust: match declared.trust {
                            Trust::Trusted => DeclaredTrust::Trusted,
                            Trust::Untrusted => DeclaredTrust::Untrusted,
                        },
                        effects: if declared.read_only {
                            Effects::ReadOnly
                        } else {
                            Effects::Consequential
                        },
                    },
                    declared.description.clone(),
                )
            })
    }
}

/// The line of a top-level `key = …`, for errors found after parsing.
fn key_line(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|line| {
            line.trim_start()
                .strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map(|index| index + 1)
}

fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()
        .iter()
        .take(offset)
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
audit_log = "audit"
strict_isolation = false

[[upstream]]
name = "web"
command = ["python3", "web.py"]
env = { LANG = "C" }

[upstream.tools]
"fetch_*" = { trust = "untrusted", read_only = true }
"lookup_policy" = { trust = "trusted", read_only = true }
"send_*" = { trust = "trusted" }

[[upstream]]
name = "docs"
url = "http://127.0.0.1:9000/mcp"
"#;

    #[test]
    fn the_documented_shape_is_read_as_written() {
        let config = ProxyConfig::parse(GOOD).unwrap();
        assert_eq!(config.audit_log, PathBuf::from("audit"));
        assert_eq!(config.mode, Mode::Enforce);
        let web = &config.upstream[0];
        assert_eq!(
            web.endpoint(),
            Some(Endpoint::Command {
                program: "python3".into(),
                args: vec!["web.py".into()]
            })
        );
        assert_eq!(web.env["LANG"], "C");
        let declarations = web.declarations();
        assert_eq!(declarations.of("fetch_page").effects, Effects::ReadOnly);
        assert_eq!(
            declarations.of("fetch_page").trust,
            DeclaredTrust::Untrusted
        );
        assert_eq!(
            declarations.of("lookup_policy").trust,
            DeclaredTrust::Trusted
        );
        assert_eq!(
            declarations.of("send_email").effects,
            Effects::Consequential
        );
        assert_eq!(declarations.of("delete_all"), Declared::UNDECLARED);
        assert_eq!(declarations.description_of("send_email"), None);
        assert_eq!(config.pin, PinMode::Auto);
        assert!(config.metadata_taints);
        assert_eq!(config.max_description_bytes, DEFAULT_DESCRIPTION_BYTES);
        assert_eq!(
            config.upstream[1].endpoint(),
            Some(Endpoint::Url("http://127.0.0.1:9000/mcp".into()))
        );
    }

    #[test]
    fn the_readmes_configuration_is_read() {
        let readme = include_str!("../../README.md");
        let block = readme
            .split("```toml\n")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .expect("a TOML block in the README");
        let config = ProxyConfig::parse(block).unwrap();
        assert_eq!(
            config.upstream[0].declarations().description_of("search"),
            Some("Searches the catalogue.")
        );
    }

    #[test]
    fn pins_metadata_and_descriptions_are_read() {
        let text = GOOD
            .replace(
                "strict_isolation = false",
                "pin = \"required\"\nmetadata_taints = false\nmax_schema_bytes = 4096",
            )
            .replace(
                "\"send_*\" = { trust = \"trusted\" }",
                "\"send_*\" = { trust = \"untrusted\", description = \"Sends an email.\" }",
            );
        let config = ProxyConfig::parse(&text).unwrap();
        assert_eq!(config.pin, PinMode::Required);
        assert!(!config.metadata_taints);
        assert_eq!(config.max_schema_bytes, 4096);
        let declarations = config.upstream[0].declarations();
        assert_eq!(
            declarations.description_of("send_email"),
            Some("Sends an email.")
        );
        assert_eq!(declarations.description_of("fetch_page"), None);
    }

    #[test]
    fn bad_files_name_the_line_the_key_and_the_value() {
        let cases = [
            (
                GOOD.replace("\"untrusted\", read_only", "\"untrustd\", read_only"),
                11,
                "untrustd",
            ),
            (
                GOOD.replace("strict_isolation = false", "strict_isolation = \"no\""),
                3,
                "strict_isolation",
            ),
            (GOOD.replace("name = \"docs\"", "name = \"web\""), 16, "web"),
            (GOOD.replace("name = \"docs\"", "name = \"a b\""), 16, "a b"),
            (
                GOOD.replace("url = \"http://127.0.0.1:9000/mcp\"", "url = \"ftp://x\""),
                17,
                "ftp://x",
            ),
            (
                GOOD.replace("url = \"http://127.0.0.1:9000/mcp\"", ""),
                16,
                "exactly one",
            ),
            (GOOD.replace("env = {", "colour = 1\nenv = {"), 8, "colour"),
            (
                GOOD.replace("strict_isolation = false", "store = \"mysql://x\""),
                3,
                "mysql://x",
            ),
            (
                GOOD.replace("name = \"docs\"", "name = \"mail_\""),
                16,
                "mail_",
            ),
            (
                GOOD.replace("strict_isolation = false", "pin = \"sometimes\""),
                3,
                "sometimes",
            ),
            (
                GOOD.replace("strict_isolation = false", "max_description_bytes = 1"),
                3,
                "max_description_bytes",
            ),
        ];
        for (text, line, needle) in cases {
            let error = ProxyConfig::parse(&text).unwrap_err();
            assert_eq!(error.line, Some(line), "{error}");
            assert!(error.to_string().contains(needle), "{error}");
        }
        assert!(ProxyConfig::parse("").is_err(), "audit_log is required");
    }
}
