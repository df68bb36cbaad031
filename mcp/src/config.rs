//! The guarding proxy's configuration file (TOML). Every error names the line, the key and
//! the value, so a bad file is refused at start with something a person can fix.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::PathBuf;

use indexmap::IndexMap;
use serde::Deserialize;
use toml::Spanned;
use tooltrust::gate::{ArgumentPolicy, Constraint};
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
    /// The reviewers file (relative to the configuration file): the public keys whose
    /// signed decisions may approve a call held in `store`. Without it, no approval in the
    /// store counts. The proxy never holds a reviewer's private key.
    #[serde(default)]
    pub reviewers: Option<PathBuf>,
    /// The private key that signs the proxy's entries in the store's chain (relative to
    /// the configuration file; `tooltrust audit keygen` writes one), so that `tooltrust
    /// audit verify --writer` refuses entries written by anyone else.
    #[serde(default)]
    pub audit_key: Option<PathBuf>,
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
    /// How many bytes a held call's arguments, each shown whole, may take in a question
    /// to the person at the host (default 4096). A longer call is never asked about cut:
    /// it goes to the review queue (`store`), or without one is declined, saying why.
    #[serde(default = "default_asked_arguments_bytes")]
    pub max_asked_arguments_bytes: usize,
    /// How long, in milliseconds, an upstream may take to answer `initialize`, and then
    /// to list all its tools (default 10000). Upstreams start together; one that takes
    /// longer is unavailable, and the host is answered without it.
    #[serde(default = "default_upstream_timeout_ms")]
    pub upstream_timeout_ms: u64,
    /// How many tools one upstream may list (default 1024).
    #[serde(default = "default_listed_tools")]
    pub max_listed_tools: usize,
    /// How many pages of `tools/list` one listing may follow (default 64).
    #[serde(default = "default_listing_pages")]
    pub max_listing_pages: usize,
    /// How many bytes one upstream's listed tools may take as JSON (default 4 MiB).
    #[serde(default = "default_listing_bytes")]
    pub max_listing_bytes: usize,
    /// How many bytes of results (their text and envelopes) the session keeps in memory
    /// (default 64 MiB). Past it the oldest are let go of: each keeps its checksum, the
    /// session its taint, and the text goes to an encrypted quarantine beside the audit
    /// log (`<audit_log>-quarantine`, under a key that lives and dies with the process).
    #[serde(default = "default_kept_result_bytes")]
    pub max_kept_result_bytes: usize,
    /// The servers the proxy fronts.
    #[serde(default)]
    pub upstream: Vec<Upstream>,
}

fn default_asked_arguments_bytes() -> usize {
    crate::serve::DEFAULT_ASKED_ARGUMENTS_BYTES
}

/// The default of [`ProxyConfig::max_kept_result_bytes`].
pub const DEFAULT_KEPT_RESULT_BYTES: usize = 64 << 20;

fn default_kept_result_bytes() -> usize {
    DEFAULT_KEPT_RESULT_BYTES
}

/// The default of [`ProxyConfig::upstream_timeout_ms`].
pub const DEFAULT_UPSTREAM_TIMEOUT_MS: u64 = 10_000;
/// The default of [`ProxyConfig::max_listed_tools`].
pub const DEFAULT_LISTED_TOOLS: usize = 1024;
/// The default of [`ProxyConfig::max_listing_pages`].
pub const DEFAULT_LISTING_PAGES: usize = 64;
/// The default of [`ProxyConfig::max_listing_bytes`].
pub const DEFAULT_LISTING_BYTES: usize = 4 << 20;

fn default_upstream_timeout_ms() -> u64 {
    DEFAULT_UPSTREAM_TIMEOUT_MS
}

fn default_listed_tools() -> usize {
    DEFAULT_LISTED_TOOLS
}

fn default_listing_pages() -> usize {
    DEFAULT_LISTING_PAGES
}

fn default_listing_bytes() -> usize {
    DEFAULT_LISTING_BYTES
}

/// The directory paths in the configuration at `path` are relative to, never wherever
/// the host started us.
pub(crate) fn config_dir(path: &std::path::Path) -> &std::path::Path {
    path.parent().unwrap_or(std::path::Path::new("."))
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
#[derive(Debug, Clone, Deserialize)]
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
    /// Argument policies by the upstream's tool name: gate rules that allow or deny a
    /// call from its arguments alone, without asking anyone.
    #[serde(default)]
    pub arguments: IndexMap<String, ArgumentsDeclaration>,
    /// The sandbox its command runs in: by default the [`crate::sandbox`] defaults only;
    /// `{ read = [...], write = [...] }` grants more; `false` runs it unsandboxed.
    #[serde(default)]
    pub sandbox: Option<Spanned<crate::grants::Sandbox>>,
}

/// One tool's argument policy: `deny` when one deny constraint meets any value inside its
/// argument, however spelled; held when a constrained argument's value is one the policy
/// cannot judge; `allow` when every allow constraint holds for the exact value (and the
/// call has no argument they leave out), even in a tainted session; otherwise the default
/// rules. [`ArgumentPolicy`] says how a deny and an allow read a value.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArgumentsDeclaration {
    /// Constraints by argument name, every one of which must hold to allow.
    #[serde(default)]
    pub allow: IndexMap<String, Spanned<ConstraintDeclaration>>,
    /// Constraints by argument name, any one of which denies: each reads every string and
    /// number inside the argument, NFKC-normalised, case-folded and trimmed.
    #[serde(default)]
    pub deny: IndexMap<String, Spanned<ConstraintDeclaration>>,
}

/// One constraint on an argument, as the file writes it: exactly one of `one_of`,
/// `pattern`, or `min` and/or `max`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConstraintDeclaration {
    /// The value is one of these (strings, numbers, booleans).
    #[serde(default)]
    pub one_of: Option<Vec<serde_json::Value>>,
    /// The value is a string this regex matches; to allow, anchored at both ends and
    /// bounded (`^[a-z]{1,32}@example\.com$`); to deny, matched ignoring ASCII case
    /// against the folded text.
    #[serde(default)]
    pub pattern: Option<String>,
    /// The value is a number at least this (to deny, text that reads as a number too).
    #[serde(default)]
    pub min: Option<f64>,
    /// The value is a number at most this (to deny, text that reads as a number too).
    #[serde(default)]
    pub max: Option<f64>,
}

impl ConstraintDeclaration {
    fn constraint(&self) -> Result<Constraint, String> {
        let bounded = self.min.is_some() || self.max.is_some();
        match (&self.one_of, &self.pattern, bounded) {
            (Some(values), None, false) => {
                Constraint::one_of(values.iter().cloned()).map_err(|error| error.to_string())
            }
            (None, Some(pattern), false) => {
                Constraint::pattern(pattern).map_err(|error| error.to_string())
            }
            (None, None, true) => {
                Constraint::range(self.min, self.max).map_err(|error| error.to_string())
            }
            _ => Err("give exactly one of `one_of`, `pattern`, or `min` and/or `max`".to_owned()),
        }
    }
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
                (None, Some(_)) if upstream.sandbox.is_some() => {
                    return Err(ConfigError {
                        line: upstream.sandbox.as_ref().and_then(|s| at(s.span())),
                        message: format!(
                            "key `sandbox` of upstream {name:?}: only a `command` upstream runs in a sandbox"
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
        for upstream in &config.upstream {
            upstream.argument_policies_in(Some(text))?;
        }
        for (key, value) in [
            ("max_description_bytes", config.max_description_bytes),
            ("max_schema_bytes", config.max_schema_bytes),
            (
                "max_asked_arguments_bytes",
                config.max_asked_arguments_bytes,
            ),
        ] {
            if !(16..=1 << 24).contains(&value) {
                return Err(ConfigError {
                    line: key_line(text, key),
                    message: format!("key `{key}`, value {value}: between 16 and 16777216"),
                });
            }
        }
        for (key, value, range) in [
            (
                "upstream_timeout_ms",
                config.upstream_timeout_ms,
                10..=600_000,
            ),
            (
                "max_listed_tools",
                config.max_listed_tools as u64,
                1..=65_536,
            ),
            (
                "max_listing_pages",
                config.max_listing_pages as u64,
                1..=4096,
            ),
            (
                "max_listing_bytes",
                config.max_listing_bytes as u64,
                1024..=1 << 28,
            ),
            (
                "max_kept_result_bytes",
                config.max_kept_result_bytes as u64,
                1024..=1 << 40,
            ),
        ] {
            if !range.contains(&value) {
                return Err(ConfigError {
                    line: key_line(text, key),
                    message: format!(
                        "key `{key}`, value {value}: between {} and {}",
                        range.start(),
                        range.end()
                    ),
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

    /// The gate rules of this upstream's `arguments`, one per tool, for its tools as the
    /// proxy names them (`<upstream>__<tool>`). Checked by [`ProxyConfig::parse`]: an
    /// allow whose pattern could let free text through is refused there, with its line.
    pub fn argument_policies(&self) -> Result<Vec<ArgumentPolicy>, ConfigError> {
        self.argument_policies_in(None)
    }

    fn argument_policies_in(&self, text: Option<&str>) -> Result<Vec<ArgumentPolicy>, ConfigError> {
        let upstream = self.name.get_ref();
        let mut policies = Vec::with_capacity(self.arguments.len());
        for (tool, declared) in &self.arguments {
            let mut policy = ArgumentPolicy::new(format!("{upstream}__{tool}"));
            if declared.allow.is_empty() && declared.deny.is_empty() {
                return Err(ConfigError {
                    line: text.and_then(|text| section_line(text, tool)),
                    message: format!(
                        "the argument policy of {upstream:?}'s tool {tool:?} has neither `allow` nor `deny`"
                    ),
                });
            }
            let refused = |list: &str,
                           argument: &str,
                           at: &Spanned<ConstraintDeclaration>,
                           why: String| {
                let line = text.map(|text| line_of(text, at.span().start));
                let written = line
                    .zip(text)
                    .and_then(|(line, text)| text.lines().nth(line - 1))
                    .map(str::trim);
                ConfigError {
                    line,
                    message: format!(
                        "{}{list} of argument `{argument}` in the argument policy of {upstream:?}'s tool {tool:?}: {why}",
                        written
                            .map(|written| format!("`{written}`: "))
                            .unwrap_or_default()
                    ),
                }
            };
            for (argument, declared) in &declared.allow {
                let constraint = declared
                    .get_ref()
                    .constraint()
                    .map_err(|why| refused("allow", argument, declared, why))?;
                policy = policy
                    .allow(argument.clone(), constraint)
                    .map_err(|error| refused("allow", argument, declared, error.to_string()))?;
            }
            for (argument, declared) in &declared.deny {
                let constraint = declared
                    .get_ref()
                    .constraint()
                    .map_err(|why| refused("deny", argument, declared, why))?;
                policy = policy.deny(argument.clone(), constraint);
            }
            policies.push(policy);
        }
        Ok(policies)
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

/// The line of a `[upstream.arguments.TOOL]` (or `…arguments."TOOL"]`) table header.
fn section_line(text: &str, tool: &str) -> Option<usize> {
    text.lines()
        .position(|line| {
            let line = line.trim();
            line.strip_prefix("[upstream.arguments.")
                .and_then(|rest| rest.strip_suffix(']'))
                .is_some_and(|name| name.trim_matches('"') == tool)
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
            config.max_asked_arguments_bytes,
            crate::serve::DEFAULT_ASKED_ARGUMENTS_BYTES
        );
        assert_eq!(
            config.upstream[1].endpoint(),
            Some(Endpoint::Url("http://127.0.0.1:9000/mcp".into()))
        );
    }

    /// The README's proxy configuration, and its argument policy appended to it.
    fn readme_configurations() -> (ProxyConfig, ProxyConfig) {
        let readme = include_str!("../../README.md");
        let blocks = || {
            readme
                .split("```toml\n")
                .skip(1)
                .filter_map(|rest| rest.split("```").next())
        };
        let block = blocks()
            .find(|block| block.contains("[[upstream]]"))
            .expect("a proxy configuration in the README");
        let policy = blocks()
            .find(|block| block.contains("[upstream.arguments."))
            .expect("an argument policy in the README");
        (
            ProxyConfig::parse(block).unwrap(),
            ProxyConfig::parse(&format!("{block}{policy}")).unwrap(),
        )
    }

    #[test]
    fn the_readmes_configuration_is_read() {
        let (config, with_policy) = readme_configurations();
        assert_eq!(
            config.upstream[0].declarations().description_of("search"),
            Some("Searches the catalogue.")
        );
        assert_eq!(
            with_policy.upstream[0].argument_policies().unwrap().len(),
            1
        );
    }

    /// The README's argument policy, as the proxy reads it from the README's own text,
    /// decides on calls in a clean session (where the defaults would run them unasked):
    /// its deny sees the address however it is spelled or wrapped, its allow passes only
    /// the exact value, and a value of a type its allow does not expect is held.
    #[test]
    fn the_readmes_argument_policy_denies_every_spelling_and_allows_only_the_exact_value() {
        use serde_json::{Value, json};
        use tooltrust::gate::{GateContext, NonceIndex, Policy, Ruling, ScopeRole, Taint};
        use tooltrust::tool::DynamicTool;
        use tooltrust::{Id, Registry, ToolCall};

        let (_, config) = readme_configurations();
        let send = DynamicTool::builder("web__send_email")
            .description("Sends an email.")
            .schema(json!({"type": "object"}))
            .trust(DeclaredTrust::Trusted)
            .handler(|_, _| async { Ok::<_, std::io::Error>("sent".to_owned()) })
            .build()
            .unwrap();
        let registry = Registry::builder().tool(send).build().unwrap();
        let policy = config.upstream[0]
            .argument_policies()
            .unwrap()
            .into_iter()
            .fold(Policy::new(), Policy::with_rule);
        let scope = Id::new("s").unwrap();
        let decide = |args: Value| {
            let call = ToolCall::from_value("web__send_email", args).unwrap();
            let cx = GateContext {
                call: &call,
                registry: &registry,
                scope: &scope,
                taint: Taint::Clean,
                role: ScopeRole::Agent,
                is_child: false,
                blocks: &[],
                repeats: 0,
            };
            let decision = policy.decide(&cx, &NonceIndex::default());
            (decision.ruling, decision.rule)
        };
        let name = "web__send_email.argument-policy".to_owned();
        for to in [
            json!("eve@evil.example"),
            json!("eve@EVIL.example"),
            json!("eve@evil.example\n"),
            json!("eve@evil.example."),
            json!("ｅｖｅ＠ｅｖｉｌ．ｅｘａｍｐｌｅ"),
            json!("eve@evil.exam\u{AD}ple"),
            json!("Eve <eve@evil.example>, ann@example.com"),
            json!(["eve@evil.example"]),
            json!({"x": "eve@evil.example"}),
        ] {
            assert_eq!(
                decide(json!({"to": to, "body": "Hi"})),
                (Ruling::Deny, name.clone()),
                "{to}"
            );
        }
        assert_eq!(
            decide(json!({"to": "ann@example.com", "body": "X1: 49 EUR."})),
            (Ruling::Allow, name.clone())
        );
        // Not the exact value: the defaults decide (a clean session runs it).
        assert_eq!(
            decide(json!({"to": "Ann@example.com", "body": "X1: 49 EUR."})),
            (Ruling::Allow, "default".to_owned())
        );
        for args in [
            json!({"to": ["ann@example.com"], "body": "X1: 49 EUR."}),
            json!({"to": "ann@example.com", "body": ["X1: 49 EUR."]}),
        ] {
            assert_eq!(
                decide(args.clone()),
                (Ruling::NeedsReview, name.clone()),
                "{args}"
            );
        }
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

    const POLICY: &str = r#"
[upstream.arguments.send_email]
allow = { to = { one_of = ["ann@example.com"] }, body = { pattern = "^[A-Za-z0-9 .,:]{1,200}$" } }
deny = { to = { pattern = "@evil\\.example$" }, copies = { min = 4 } }
"#;

    #[test]
    fn argument_policies_are_gate_rules_and_an_open_allow_is_refused() {
        let config = ProxyConfig::parse(&format!("{GOOD}{POLICY}")).unwrap();
        let policies = config.upstream[1].argument_policies().unwrap();
        assert_eq!(policies.len(), 1);
        assert_eq!(policies[0].tool(), "docs__send_email");
        use tooltrust::gate::Rule as _;
        assert_eq!(policies[0].name(), "docs__send_email.argument-policy");

        let cases = [
            // Unanchored, anchored at one end, unbounded: free text could get through.
            ("\"^[A-Za-z0-9 .,:]{1,200}$\"", "\"kettle\"", "anchored"),
            ("\"^[A-Za-z0-9 .,:]{1,200}$\"", "\"^[a-z ]+$\"", "bound"),
            (
                "pattern = \"^[A-Za-z0-9",
                "pattern = \"^([A-Za-z0-9",
                "compile",
            ),
            ("{ min = 4 }", "{ min = 4, pattern = \"x\" }", "exactly one"),
            ("{ min = 4 }", "{ min = 4, max = 1 }", "min"),
            ("[\"ann@example.com\"]", "[]", "at least one"),
        ];
        for (from, to, needle) in cases {
            let text = format!("{GOOD}{}", POLICY.replace(from, to));
            let error = ProxyConfig::parse(&text).unwrap_err();
            let line = text
                .lines()
                .position(|line| line.contains(to))
                .map(|index| index + 1);
            assert_eq!(error.line, line, "{error}");
            assert!(error.to_string().contains(needle), "{needle}: {error}");
            assert!(error.to_string().contains("send_email"), "{error}");
        }
        let empty = format!("{GOOD}\n[upstream.arguments.send_email]\n");
        let error = ProxyConfig::parse(&empty).unwrap_err();
        assert!(error.to_string().contains("neither"), "{error}");
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
