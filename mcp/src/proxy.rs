//! The guarding proxy: an MCP server a host starts instead of its real servers. It fronts
//! the upstreams of its configuration, takes their tools with the host's declarations
//! (namespaced `<upstream>__<tool>`), and puts every call through one scope's gate —
//! one proxy process over stdio is one client session, so one scope. Every decision goes
//! to the audit log in the configured directory.
//!
//! An upstream is an outsider, and so is everything it says:
//!
//! - **Metadata is input.** A tool not declared `trusted` is shown with its description and
//!   schema neutralised (the runtime's sealed neutraliser) and capped
//!   (`max_description_bytes`, `max_schema_bytes`), or with the host's own `description`.
//!   When such a tool shows text the server wrote, the session starts tainted (a
//!   consequential call is then held), unless the configuration says
//!   `metadata_taints = false`. No titles, server instructions, prompts or resources of an
//!   upstream are forwarded.
//! - **Pinning.** With a lock file beside the configuration (`tooltrust mcp pin`), or
//!   `pin = "required"`, a tool whose definition differs from its pin, or has none, is
//!   withheld: absent from `tools/list`, unknown when called, and recorded in the audit
//!   log with both hashes. When an upstream says its tools changed, they are listed again
//!   and a changed one is withheld for the rest of the session.
//! - **One upstream cannot take the proxy down.** An upstream that cannot be reached, or
//!   whose tool names collide (`mail` + `_send_email` against `mail_` + `send_email`), is
//!   unavailable — recorded, reported on standard error and in `tools/list`'s `_meta` —
//!   and the others serve. Upstreams start together, each within a time limit on
//!   `initialize` and on its whole listing (`upstream_timeout_ms`), and a listing is
//!   bounded in pages, tools and bytes (`max_listing_pages`, `max_listed_tools`,
//!   `max_listing_bytes`): one that stalls or floods is unavailable, and the host is
//!   answered without it. After `list_changed`, an upstream is listed again at most once a
//!   second, and the tools it adds are recorded one by one only up to a bound. A reason
//!   that quotes the upstream (its handshake's or listing's error) is neutralised like a
//!   description and taints the session likewise.
//! - **Nor write to a terminal.** What an upstream wrote reaches the proxy's standard
//!   error (its own standard error too, relayed a line at a time) made inert
//!   ([`tooltrust::envelope::inert()`]): no escape sequence, no line of its own.
//! - **Nor read its secrets.** An upstream process starts with a cleared environment and
//!   only [`INHERITED_ENV`] and its configured `env`, in a sandbox that keeps it from the
//!   proxy's files, the user's home and the proxy's `/proc` entries ([`crate::sandbox`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, RwLock, Weak};

use rmcp::Peer;
use rmcp::service::RoleServer;
use serde_json::{Map, Value, json};
use tokio::process::Command;
use tokio::sync::Notify;
use tooltrust::audit::AuditLog;
use tooltrust::call::Checksum;
use tooltrust::gate::{Decision, GateContext, Rule, rule};
use tooltrust::tool::Tool as _;
use tooltrust::{Id, Policy, Registry, Session};

use crate::config::{ConfigError, Endpoint, Mode, PinMode, ProxyConfig, Upstream, config_dir};
use crate::connect::{
    ConnectOptions, Connection, Listed, ListingLimits, PeerSlot, Remote, connect, remote_tool,
};
use crate::metadata::MetadataLimits;
use crate::pin::{Change, Definition, Lock, LockError, Standing, lock_path};
use crate::sandbox::Jail;
use crate::serve::{Listing, ScopeServer};

mod relay;

/// The variables of the proxy's own environment an upstream process inherits (when the
/// proxy has them); nothing else of it (API keys, tokens) reaches an upstream. Its `env`
/// in the configuration adds to these.
pub const INHERITED_ENV: [&str; 4] = ["PATH", "HOME", "LANG", "TZ"];

/// Why the proxy did not start, or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProxyError {
    /// The configuration file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The configuration was refused.
    #[error("{path}: {error}")]
    Config {
        /// The file.
        path: PathBuf,
        /// Where and why.
        #[source]
        error: ConfigError,
    },
    /// The audit log could not be opened.
    #[error("cannot open the audit log in {dir}")]
    Audit {
        /// Its directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: tooltrust::audit::AuditError,
    },
    /// What the proxy found at start (an unavailable upstream, a withheld tool) could not
    /// be recorded in the audit log.
    #[error("cannot record in the audit log")]
    Record(#[source] tooltrust::audit::AuditError),
    /// The lock file of pinned tool definitions was refused.
    #[error("the lock file was refused")]
    Lock(#[source] LockError),
    /// The proxy could not close its `/proc` entries to its upstreams.
    #[error("cannot make the proxy non-dumpable")]
    Harden(#[source] std::io::Error),
    /// An upstream could not be reached, when every one must be (to pin them).
    #[error("upstream {upstream:?} is unavailable")]
    Upstream {
        /// The upstream.
        upstream: String,
        /// Why.
        #[source]
        source: Unavailable,
    },
    /// The upstreams' tools could not form one registry (two with one name, say).
    #[error("the upstreams' tools do not form one registry")]
    Registry(#[source] tooltrust::registry::RegistryError),
    /// The quarantine for results past the memory budget could not be opened.
    #[error("cannot open the quarantine in {dir}")]
    Quarantine {
        /// Its directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: tooltrust::quarantine::QuarantineError,
    },
    /// The session's key could not be drawn.
    #[error("cannot start the session")]
    Key(#[source] tooltrust::envelope::KeyError),
    /// The review queue's store could not be opened.
    #[error("cannot open the review queue")]
    Store(#[source] Box<tooltrust_store::StoreError>),
    /// An id the proxy uses was refused.
    #[error("an id was refused")]
    Id(#[source] tooltrust::id::IdError),
    /// The session's scope could not be opened.
    #[error("cannot open the session's scope")]
    Scope(#[source] tooltrust::session::SessionError),
    /// Serving the host failed.
    #[error(transparent)]
    Serve(#[from] crate::ServeError),
}

/// Why an upstream could not be reached: it could not be started, or its MCP handshake
/// or tool list failed.
pub type Unavailable = Box<dyn std::error::Error + Send + Sync>;

/// A proxy ready to serve: its scope's server and the upstream connections it keeps open.
pub struct Proxy {
    server: ScopeServer,
    /// Upstreams that could not be reached at start, or whose tool names collide, and why
    /// (their tools are unknown).
    pub unavailable: Vec<(String, Unavailable)>,
    /// Tools not served from the start (by their name here), and why: a definition that
    /// differs from its pin or has none, or metadata that cannot be shown.
    pub withheld: Vec<(String, String)>,
    guard: Arc<Guard>,
    connections: Vec<Arc<Connection>>,
}

/// What the proxy withholds, shared by `tools/list`, the gate and the upstreams' watchers.
struct Guard {
    /// Tools listed at start and withheld since (by their name here), and why.
    withheld: RwLock<BTreeMap<String, String>>,
    /// `tools/list`'s `_meta.tooltrust`: unavailable upstreams (until a late one answers)
    /// and tools withheld at start.
    unavailable: RwLock<BTreeMap<String, Value>>,
    left_out: Vec<Value>,
    /// The host, once it is connected: told when a tool is withheld.
    host: OnceLock<Peer<RoleServer>>,
}

impl Listing for Guard {
    fn listed(&self, name: &str) -> bool {
        // A poisoned lock lists nothing it might have withheld (fail closed).
        self.withheld
            .read()
            .is_ok_and(|withheld| !withheld.contains_key(name))
    }

    fn upstream(&self, tool: &str) -> Option<String> {
        // Upstream names end without `_` and hold no `__`: the name splits one way only.
        tool.split_once("__")
            .map(|(upstream, _)| upstream.to_owned())
    }

    fn meta(&self) -> Option<Map<String, Value>> {
        let withheld: Vec<Value> = match self.withheld.read() {
            Ok(withheld) => withheld
                .iter()
                .map(|(tool, reason)| json!({"tool": tool, "reason": reason}))
                .collect(),
            Err(_) => Vec::new(),
        };
        let unavailable: Vec<Value> = match self.unavailable.read() {
            Ok(unavailable) => unavailable.values().cloned().collect(),
            Err(_) => Vec::new(),
        };
        if unavailable.is_empty() && self.left_out.is_empty() && withheld.is_empty() {
            return None;
        }
        let mut all = self.left_out.clone();
        all.extend(withheld);
        let mut meta = Map::new();
        meta.insert(
            "tooltrust".into(),
            json!({"unavailable": unavailable, "withheld": all}),
        );
        Some(meta)
    }
}

/// The gate's rule for withheld tools: unknown, like a tool the registry does not hold
/// (so observe mode lets none through either).
struct WithheldRule(Arc<Guard>);

impl Rule for WithheldRule {
    fn name(&self) -> &str {
        "mcp-withheld"
    }

    fn evaluate(&self, cx: &GateContext<'_>) -> Option<Decision> {
        let tool = cx.call.tool();
        let Ok(withheld) = self.0.withheld.read() else {
            return Some(Decision::deny(
                rule::UNKNOWN_TOOL,
                "the proxy's withheld tools cannot be read",
            ));
        };
        withheld.get(tool).map(|why| {
            Decision::deny(
                rule::UNKNOWN_TOOL,
                format!("unknown tool `{tool}`: the proxy withholds it ({why})"),
            )
        })
    }
}

/// An upstream whose tool list the proxy watches.
struct Watched {
    upstream: String,
    connection: Weak<Connection>,
    changed: Arc<Notify>,
    /// The upstream's name of each tool served → its name here and the hash accepted.
    accepted: HashMap<String, (String, Checksum)>,
    /// The upstream's names of tools withheld already (at start, or added since: at most
    /// [`MAX_REPORTED_ADDITIONS`] of those).
    reported: HashSet<String>,
    /// How many tools were added since the session started and recorded.
    added: usize,
    /// Whether more tools were added than are recorded one by one.
    overflowed: bool,
}

/// The shortest time between two listings of one upstream after it says its tools
/// changed.
const RELIST_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);
/// How many tools an upstream may add after the session started that are each recorded
/// in the audit log; past them, one entry says so.
const MAX_REPORTED_ADDITIONS: usize = 64;

/// Why a tool registered from its pin is withheld until its upstream answers.
const NOT_YET: &str = "its upstream has not answered yet; it is listed when it does";
/// How long an attempt to reach an upstream may go on after the host stopped waiting.
const LATE_LIMIT: std::time::Duration = std::time::Duration::from_secs(600);

/// One upstream being reached, in a task of its own.
struct Attempt {
    task: tokio::task::JoinHandle<Result<Remote, Unavailable>>,
    options: ConnectOptions,
    changed: Arc<Notify>,
    peer: PeerSlot,
}

impl Attempt {
    fn start(
        upstream: &Upstream,
        limits: MetadataLimits,
        listing: ListingLimits,
        jail: &Arc<Jail>,
    ) -> Attempt {
        let changed = Arc::new(Notify::new());
        let options = ConnectOptions {
            prefix: format!("{}__", upstream.name.get_ref()),
            limits,
            tools_changed: Some(Arc::clone(&changed)),
            // The attempt may go on after the host stopped waiting (see `late`).
            listing: ListingLimits {
                timeout: LATE_LIMIT.max(listing.timeout),
                ..listing
            },
            ..ConnectOptions::default()
        };
        let task = {
            let upstream = upstream.clone();
            let options = options.clone();
            let jail = Arc::clone(jail);
            tokio::spawn(async move { reach(&upstream, options, &jail).await })
        };
        Attempt {
            task,
            options,
            changed,
            peer: PeerSlot::default(),
        }
    }
}

/// The tools of `upstream` as pinned in `lock`, registered before it answered, bound to
/// an empty peer slot and withheld until it answers with the same definitions; `None`
/// when nothing of it is pinned. A pin whose definition does not hash to its pin, or
/// whose name another upstream took, is left out.
fn dormant_tools(
    lock: &Lock,
    upstream: &Upstream,
    attempt: &Attempt,
    taken: &mut HashMap<String, String>,
) -> Option<(Vec<tooltrust::tool::DynamicTool>, Vec<Listed>)> {
    let name = upstream.name.get_ref();
    let declarations = upstream.declarations();
    let mut tools = Vec::new();
    let mut waiting = Vec::new();
    for pin in lock.upstreams.get(name)?.values() {
        let Ok(remote) = serde_json::from_value::<rmcp::model::Tool>(pin.definition.clone()) else {
            continue;
        };
        let Ok((listed, Some(tool))) =
            remote_tool(&remote, &declarations, &attempt.options, &attempt.peer)
        else {
            continue;
        };
        if listed.definition.sha256 != pin.sha256 || taken.contains_key(&listed.local_name) {
            continue;
        }
        taken.insert(listed.local_name.clone(), name.clone());
        tools.push(tool);
        waiting.push(listed);
    }
    (!waiting.is_empty()).then_some((tools, waiting))
}

/// Waits for a late upstream's attempt: when it answers, each tool registered from its pin
/// whose listed definition is still the pinned one is listed (after the session is
/// tainted, when the host is shown the server's text), the host is told, and the
/// upstream is watched like the others. A tool listed otherwise stays withheld.
async fn arrive(
    upstream: String,
    attempt: Attempt,
    waiting: Vec<Listed>,
    guard: Arc<Guard>,
    log: Arc<AuditLog>,
    taint: Option<tooltrust::Scope>,
) {
    let remote = match attempt.task.await {
        Ok(Ok(remote)) => remote,
        Ok(Err(error)) => {
            let reason = describe(error.as_ref());
            if let Err(error) = log.append(&json!({
                "event": "mcp_upstream_unavailable",
                "upstream": upstream,
                "reason": reason,
            })) {
                eprintln!("tooltrust: could not record: {}", describe(&error));
            }
            return;
        }
        Err(_) => return,
    };
    let listed: HashMap<&str, &Listed> = remote
        .listed()
        .iter()
        .map(|listed| (listed.definition.name.as_str(), listed))
        .collect();
    let mut arrived = Vec::new();
    let mut shown = Vec::new();
    let mut accepted = HashMap::new();
    for pinned in &waiting {
        let Some(now) = listed.get(pinned.definition.name.as_str()) else {
            continue;
        };
        if now.definition.sha256 != pinned.definition.sha256 || now.refused.is_some() {
            continue;
        }
        arrived.push(pinned.local_name.clone());
        accepted.insert(
            pinned.definition.name.clone(),
            (pinned.local_name.clone(), pinned.definition.sha256),
        );
        if pinned.outsiders_text {
            shown.push(format!("- {}: {}", pinned.local_name, pinned.description));
        }
    }
    if let Some(scope) = &taint
        && !shown.is_empty()
        && scope
            .add_untrusted(
                "tool-metadata",
                format!(
                    "Tool descriptions written by upstream servers, as the host was shown them:\n{}",
                    shown.join("\n")
                ),
            )
            .is_err()
    {
        // Not tainted, so not shown.
        return;
    }
    attempt.peer.connect(remote.peer());
    if let Err(error) = log.append(&json!({
        "event": "mcp_upstream_available",
        "upstream": upstream,
        "tools": arrived,
    })) {
        eprintln!("tooltrust: could not record: {}", describe(&error));
        return;
    }
    {
        let (Ok(mut withheld), Ok(mut unavailable)) =
            (guard.withheld.write(), guard.unavailable.write())
        else {
            return;
        };
        unavailable.remove(&upstream);
        for pinned in &waiting {
            if arrived.contains(&pinned.local_name) {
                withheld.remove(&pinned.local_name);
            } else {
                withheld.insert(
                    pinned.local_name.clone(),
                    "its upstream answered late, and not with its pinned definition".to_owned(),
                );
            }
        }
    }
    eprintln!("tooltrust: upstream {upstream:?} answered late; its pinned tools are listed");
    if let Some(host) = guard.host.get() {
        let _ = host.notify_tool_list_changed().await;
    }
    let reported = listed.keys().map(|name| (*name).to_owned()).collect();
    let (_, connection) = remote.into_tools();
    let connection = Arc::new(connection);
    let watched = Watched {
        upstream,
        connection: Arc::downgrade(&connection),
        changed: attempt.changed,
        accepted,
        reported,
        added: 0,
        overflowed: false,
    };
    watch(watched, guard, log).await;
}

/// An error and its causes, on one line.
fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// A reason fit for `tools/list`: causes may quote what an upstream said, so it is
/// capped, kept on one line with nothing that drives a display, and neutralised like its
/// metadata.
fn shown_reason(text: &str) -> String {
    let mut end = text.len().min(500);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let inert = tooltrust::envelope::inert(&text[..end]);
    tooltrust::envelope::neutralise(&inert).text.into_owned()
}

/// Whether an upstream's unavailability quotes what it said: an error of its handshake or
/// listing carries its words (a tool name that is not a tool name among them). A process
/// that could not start, or a collision of identifier-shaped names, does not.
fn quotes_upstream(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(error) = next {
        if error.is::<crate::ConnectError>() {
            return true;
        }
        next = error.source();
    }
    false
}

fn read_config(path: &Path) -> Result<ProxyConfig, ProxyError> {
    let text = std::fs::read_to_string(path).map_err(|source| ProxyError::Read {
        path: path.to_owned(),
        source,
    })?;
    ProxyConfig::parse(&text).map_err(|error| ProxyError::Config {
        path: path.to_owned(),
        error,
    })
}

/// The command that starts a stdio upstream: a cleared environment, then
/// [`INHERITED_ENV`], then its configured `env`.
fn command_of(program: &str, args: &[String], upstream: &Upstream) -> Command {
    let mut command = Command::new(program);
    command.args(args).env_clear();
    for key in INHERITED_ENV {
        if let Some(value) = std::env::var_os(key) {
            command.env(key, value);
        }
    }
    // Windows programs need these to start at all.
    #[cfg(windows)]
    for key in ["SYSTEMROOT", "WINDIR"] {
        if let Some(value) = std::env::var_os(key) {
            command.env(key, value);
        }
    }
    command.envs(&upstream.env);
    command
}

/// Starts (in its sandbox) or reaches `upstream` and lists its tools.
async fn reach(
    upstream: &Upstream,
    options: ConnectOptions,
    jail: &Jail,
) -> Result<Remote, Unavailable> {
    let declarations = upstream.declarations();
    match upstream.endpoint() {
        Some(Endpoint::Command { program, args }) => {
            let mut command = command_of(&program, &args, upstream);
            jail.confine(&mut command, upstream, &program)?;
            let (transport, errors) = rmcp::transport::TokioChildProcess::builder(command)
                .stderr(std::process::Stdio::piped())
                .spawn()?;
            if let Some(errors) = errors {
                tokio::spawn(relay::errors(upstream.name.get_ref().clone(), errors));
            }
            Ok(connect(transport, &declarations, options).await?)
        }
        Some(Endpoint::Url(url)) => {
            let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url);
            Ok(connect(transport, &declarations, options).await?)
        }
        None => Err(Unavailable::from("the upstream has no endpoint")),
    }
}

/// The audit event of a withheld tool.
fn withheld_event(
    upstream: &str,
    tool: &str,
    pinned: Option<Checksum>,
    listed: Checksum,
    reason: &str,
) -> Value {
    json!({
        "event": "mcp_tool_withheld",
        "upstream": upstream,
        "tool": tool,
        "pinned": pinned.map(|hash| hash.to_hex()),
        "listed": listed.to_hex(),
        "reason": reason,
    })
}

impl Proxy {
    /// Reads the configuration at `path`, opens the audit log, connects to every
    /// upstream (one that cannot be reached, or whose tool names collide, is reported in
    /// [`Proxy::unavailable`], and its tools stay unknown), checks the tools against
    /// their pins, and opens the session's scope — tainted if the host is shown text an
    /// upstream wrote.
    ///
    /// It first makes itself non-dumpable ([`crate::sandbox::harden`]), and says on
    /// standard error and in the audit log which upstreams run less sandboxed than the
    /// defaults.
    pub async fn start(path: &Path) -> Result<Proxy, ProxyError> {
        crate::sandbox::harden().map_err(ProxyError::Harden)?;
        let config = read_config(path)?;
        let dir = config_dir(path).join(&config.audit_log);
        let writer = match &config.audit_key {
            Some(file) => Some(Arc::new(
                tooltrust::signature::SecretKey::read(config_dir(path).join(file)).map_err(
                    |error| ProxyError::Config {
                        path: path.to_owned(),
                        error: ConfigError {
                            line: None,
                            message: format!("key `audit_key`: {error}"),
                        },
                    },
                )?,
            )),
            None => None,
        };
        let opened = match &writer {
            // Signed: `tooltrust audit verify --writer` then refuses entries it did not write.
            Some(writer) => tooltrust::audit::FileStorage::open(&dir).and_then(|storage| {
                AuditLog::open_signed(storage, Default::default(), Arc::clone(writer))
            }),
            None => AuditLog::open(&dir),
        };
        let log = Arc::new(opened.map_err(|source| ProxyError::Audit {
            dir: dir.clone(),
            source,
        })?);
        let pins = match (
            Lock::read(&lock_path(path)).map_err(ProxyError::Lock)?,
            config.pin,
        ) {
            (Some(lock), _) => Some(lock),
            (None, PinMode::Required) => Some(Lock::default()),
            (None, PinMode::Auto) => None,
        };
        let limits = MetadataLimits {
            description_bytes: config.max_description_bytes,
            schema_bytes: config.max_schema_bytes,
        };
        let mut builder = Registry::builder();
        let mut taken: HashMap<String, String> = HashMap::new();
        let mut watched = Vec::new();
        let mut connections = Vec::new();
        let mut unavailable: Vec<(String, Unavailable)> = Vec::new();
        let mut withheld = Vec::new();
        let mut events = Vec::new();
        let mut outsiders_text = Vec::new();
        let jail = Arc::new(Jail::new(path, &config));
        for note in jail.notes(&config.upstream) {
            eprintln!("tooltrust: {}", note.text);
            events.extend(note.event());
        }
        // Every upstream starts at once, each within the listing's time limit: the host
        // waits for the slowest one at most that long.
        let listing = ListingLimits::of(&config);
        let attempts: Vec<Attempt> = config
            .upstream
            .iter()
            .map(|upstream| Attempt::start(upstream, limits, listing, &jail))
            .collect();
        // The host waits for the slowest upstream at most this long; an attempt still
        // running then goes on, and its pinned tools are listed if it answers.
        let deadline = tokio::time::Instant::now() + listing.timeout;
        let mut late = Vec::new();
        for (upstream, mut attempt) in config.upstream.iter().zip(attempts) {
            let name = upstream.name.get_ref().clone();
            let changed = Arc::clone(&attempt.changed);
            let reached = match tokio::time::timeout_at(deadline, &mut attempt.task).await {
                Ok(Ok(reached)) => reached,
                Ok(Err(error)) => Err(Unavailable::from(format!("its start failed: {error}"))),
                Err(_) => {
                    let dormant = pins
                        .as_ref()
                        .and_then(|lock| dormant_tools(lock, upstream, &attempt, &mut taken));
                    match dormant {
                        Some((tools, waiting)) => {
                            for tool in tools {
                                builder = builder.tool(tool);
                            }
                            late.push((name.clone(), attempt, waiting));
                        }
                        None => attempt.task.abort(),
                    }
                    unavailable.push((
                        name,
                        format!(
                            "it did not answer initialize and tools/list within {:?}",
                            listing.timeout
                        )
                        .into(),
                    ));
                    continue;
                }
            };
            let remote = match reached {
                Ok(remote) => remote,
                Err(error) => {
                    unavailable.push((name, error));
                    continue;
                }
            };
            // Names are unique within an upstream (`connect` checks) and `__` splits a
            // name one way only (the configuration checks), so this is a second line.
            let collision = remote.listed().iter().find_map(|listed| {
                taken
                    .get(&listed.local_name)
                    .map(|other| (listed.local_name.clone(), other.clone()))
            });
            if let Some((tool, other)) = collision {
                // Dropping `remote` closes its connection.
                unavailable.push((
                    name,
                    format!("its tool name `{tool}` is already upstream {other:?}'s").into(),
                ));
                continue;
            }
            let mut accepted = HashMap::new();
            let mut reported = HashSet::new();
            for listed in remote.listed() {
                taken.insert(listed.local_name.clone(), name.clone());
                let definition = &listed.definition;
                let refusal = match (&listed.refused, &pins) {
                    (Some(why), _) => Some((None, format!("its metadata cannot be shown: {why}"))),
                    (None, Some(lock)) => match lock.standing(&name, definition) {
                        Standing::Pinned => None,
                        Standing::Changed(pinned) => Some((
                            Some(pinned),
                            "its definition differs from its pin; run `tooltrust mcp pin --diff` to see how".to_owned(),
                        )),
                        Standing::Unpinned => Some((
                            None,
                            "it has no pin; run `tooltrust mcp pin` to accept it".to_owned(),
                        )),
                    },
                    (None, None) => None,
                };
                if let Some((pinned, why)) = refusal {
                    events.push(withheld_event(
                        &name,
                        &definition.name,
                        pinned,
                        definition.sha256,
                        &why,
                    ));
                    withheld.push((listed.local_name.clone(), why));
                    reported.insert(definition.name.clone());
                    continue;
                }
                accepted.insert(
                    definition.name.clone(),
                    (listed.local_name.clone(), definition.sha256),
                );
                if listed.outsiders_text {
                    outsiders_text.push(format!("- {}: {}", listed.local_name, listed.description));
                }
            }
            let (tools, connection) = remote.into_tools();
            let served: HashSet<&String> = accepted.values().map(|(local, _)| local).collect();
            for tool in tools {
                if served.contains(&tool.spec().name.to_string()) {
                    builder = builder.tool(tool);
                }
            }
            let connection = Arc::new(connection);
            watched.push(Watched {
                upstream: name,
                connection: Arc::downgrade(&connection),
                changed,
                accepted,
                reported,
                added: 0,
                overflowed: false,
            });
            connections.push(connection);
        }
        for (upstream, why) in &unavailable {
            events.push(json!({
                "event": "mcp_upstream_unavailable",
                "upstream": upstream,
                "reason": describe(why.as_ref()),
            }));
        }
        if !events.is_empty() {
            log.append_all(&events)
                .map_err(|partial| ProxyError::Record(partial.error))?;
        }
        let registry = builder.build().map_err(ProxyError::Registry)?;
        let guard = Arc::new(Guard {
            withheld: RwLock::new(
                late.iter()
                    .flat_map(|(_, _, waiting): &(String, Attempt, Vec<Listed>)| waiting)
                    .map(|listed| (listed.local_name.clone(), NOT_YET.to_owned()))
                    .collect(),
            ),
            unavailable: RwLock::new(
                unavailable
                    .iter()
                    .map(|(upstream, why)| {
                        (
                            upstream.clone(),
                            json!({"upstream": upstream, "reason": shown_reason(&describe(why.as_ref()))}),
                        )
                    })
                    .collect(),
            ),
            left_out: withheld
                .iter()
                .map(|(tool, why)| json!({"tool": tool, "reason": why}))
                .collect(),
            host: OnceLock::new(),
        });
        let mut policy = Policy::new()
            .strict_isolation(config.strict_isolation)
            .observe(config.mode == Mode::Observe)
            .with_rule(WithheldRule(Arc::clone(&guard)));
        if let Some(max) = config.max_repeats {
            policy = policy.max_repeats(max);
        }
        for upstream in &config.upstream {
            let policies = upstream
                .argument_policies()
                .map_err(|error| ProxyError::Config {
                    path: path.to_owned(),
                    error,
                })?;
            for argument_policy in policies {
                policy = policy.with_rule(argument_policy);
            }
        }
        let recorder: Arc<AuditLog> = Arc::clone(&log);
        // Results past the memory budget go to disk, encrypted under a key only this
        // process holds.
        let mut quarantine_dir = dir.clone().into_os_string();
        quarantine_dir.push("-quarantine");
        let quarantine = tooltrust::quarantine::Kek::generate()
            .and_then(|kek| tooltrust::quarantine::EncryptedStore::scratch(&quarantine_dir, kek))
            .map_err(|source| ProxyError::Quarantine {
                dir: quarantine_dir.into(),
                source,
            })?;
        let session = Session::builder(registry)
            .policy(policy)
            .recorder(recorder)
            .quarantine_store(Arc::new(quarantine))
            .max_kept_bytes(config.max_kept_result_bytes)
            .build()
            .map_err(ProxyError::Key)?;
        let (host, person) = (Id::new("mcp-host"), Id::new("mcp-person"));
        let scope = session
            .open_scope(host.map_err(ProxyError::Id)?)
            .map_err(ProxyError::Scope)?;
        for (upstream, why) in &unavailable {
            if quotes_upstream(why.as_ref()) {
                outsiders_text.push(format!(
                    "- why upstream {upstream:?} is unavailable: {}",
                    shown_reason(&describe(why.as_ref()))
                ));
            }
        }
        if config.metadata_taints && !outsiders_text.is_empty() {
            // The host shows these to its model: outsiders' words are in its context
            // before the first call, as if a tool had returned them.
            scope
                .add_untrusted(
                    "tool-metadata",
                    format!(
                        "Text written by upstream servers, as the host was shown it (tool descriptions, and why an upstream is unavailable):\n{}",
                        outsiders_text.join("\n")
                    ),
                )
                .map_err(ProxyError::Scope)?;
        }
        let late_scope = config.metadata_taints.then(|| scope.clone());
        let mut server = ScopeServer::new(scope)
            .ask_about_held_calls(person.map_err(ProxyError::Id)?)
            .max_asked_arguments_bytes(config.max_asked_arguments_bytes)
            .listing(Arc::clone(&guard) as Arc<dyn Listing>);
        if let Some(store) = &config.store {
            let (location, flag) = match tooltrust_store::Location::parse(store.get_ref()) {
                Ok(tooltrust_store::Location::Sqlite(file)) => {
                    // Relative to the configuration file, like the audit log.
                    let file = config_dir(path).join(file);
                    let flag = format!("--sqlite {}", file.display());
                    (tooltrust_store::Location::Sqlite(file), flag)
                }
                // The URL may hold a password: the model is never shown it.
                Ok(location) => (location, "--postgres URL".to_owned()),
                Err(error) => {
                    return Err(ProxyError::Config {
                        path: path.to_owned(),
                        error: ConfigError {
                            line: None,
                            message: format!("key `store`: {error}"),
                        },
                    });
                }
            };
            let config_error = |message: String| ProxyError::Config {
                path: path.to_owned(),
                error: ConfigError {
                    line: None,
                    message,
                },
            };
            let reviewers = match &config.reviewers {
                Some(file) => tooltrust_store::read_reviewers(config_dir(path).join(file))
                    .map_err(|error| config_error(format!("key `reviewers`: {error}")))?,
                None => tooltrust::held::Reviewers::new(),
            };
            let options = tooltrust_store::StoreOptions {
                reviewers: Arc::new(reviewers),
                writer: writer.clone(),
                ..Default::default()
            };
            let queue = tooltrust_store::Store::open(&location, options)
                .await
                .map_err(|source| ProxyError::Store(Box::new(source)))?;
            server = server.review_queue(crate::ReviewQueue::new(queue, flag));
        }
        for upstream in watched {
            tokio::spawn(watch(upstream, Arc::clone(&guard), Arc::clone(&log)));
        }
        for (upstream, attempt, waiting) in late {
            tokio::spawn(arrive(
                upstream,
                attempt,
                waiting,
                Arc::clone(&guard),
                Arc::clone(&log),
                late_scope.clone(),
            ));
        }
        Ok(Proxy {
            server,
            unavailable,
            withheld,
            guard,
            connections,
        })
    }

    /// The server the host talks to.
    pub fn server(&self) -> &ScopeServer {
        &self.server
    }

    /// Serves the host over stdio until it disconnects.
    pub async fn serve_stdio(self) -> Result<(), ProxyError> {
        let running = rmcp::ServiceExt::serve(self.server, crate::stdio::stdio())
            .await
            .map_err(|error| crate::ServeError::Handshake(Box::new(error)))?;
        // Set once, here: a second set cannot happen.
        let _ = self.guard.host.set(running.peer().clone());
        running
            .waiting()
            .await
            .map_err(crate::ServeError::Connection)?;
        drop(self.connections);
        Ok(())
    }
}

/// Watches one upstream: when it says its tools changed, lists them again and withholds,
/// for the rest of the session, every served tool whose definition is no longer the one
/// accepted at start (its pin, when pins are checked). A list that cannot be read
/// withholds them all. Ends when the connection is gone.
async fn watch(mut watched: Watched, guard: Arc<Guard>, log: Arc<AuditLog>) {
    let mut first = true;
    loop {
        if !first {
            // Notifications meanwhile leave one permit: a storm is one re-listing per
            // interval, however fast it blows.
            tokio::time::sleep(RELIST_INTERVAL).await;
        }
        first = false;
        watched.changed.notified().await;
        let Some(connection) = watched.connection.upgrade() else {
            return;
        };
        let listed = connection.definitions().await;
        drop(connection);
        let mut found: Vec<(Option<String>, Value, String)> = Vec::new();
        match listed {
            Ok(definitions) => {
                let now: HashMap<&str, &Definition> = definitions
                    .iter()
                    .map(|definition| (definition.name.as_str(), definition))
                    .collect();
                for (tool, (local, accepted)) in &watched.accepted {
                    if let Some(definition) = now.get(tool.as_str())
                        && definition.sha256 != *accepted
                    {
                        let why = "its definition changed after it was accepted; run `tooltrust mcp pin --diff` to see how";
                        found.push((
                            Some(local.clone()),
                            withheld_event(
                                &watched.upstream,
                                tool,
                                Some(*accepted),
                                definition.sha256,
                                why,
                            ),
                            why.to_owned(),
                        ));
                    }
                }
                for definition in &definitions {
                    if watched.accepted.contains_key(&definition.name)
                        || watched.reported.contains(&definition.name)
                    {
                        continue;
                    }
                    if watched.added >= MAX_REPORTED_ADDITIONS {
                        // Bounded: one entry says the rest go unrecorded (and unserved).
                        if !watched.overflowed {
                            watched.overflowed = true;
                            found.push((
                                None,
                                json!({
                                    "event": "mcp_tools_added_unrecorded",
                                    "upstream": watched.upstream,
                                    "reason": format!("more than {MAX_REPORTED_ADDITIONS} tools were added after the session started; the rest are unknown and not recorded one by one"),
                                }),
                                String::new(),
                            ));
                        }
                        break;
                    }
                    watched.reported.insert(definition.name.clone());
                    watched.added += 1;
                    let why = "a tool added after the session started is unknown until the proxy starts again";
                    found.push((
                        None,
                        withheld_event(
                            &watched.upstream,
                            &definition.name,
                            None,
                            definition.sha256,
                            why,
                        ),
                        why.to_owned(),
                    ));
                }
            }
            Err(error) => {
                // The error may quote the upstream: the audit log keeps it, the host is
                // told only the proxy's words (a session already open is not tainted).
                let why = format!(
                    "its upstream said its tools changed, and they could not be listed again: {}",
                    describe(&error)
                );
                let shown = "its upstream said its tools changed, and they could not be listed again (the audit log has the error)";
                for (tool, (local, accepted)) in &watched.accepted {
                    let event = json!({
                        "event": "mcp_tool_withheld",
                        "upstream": watched.upstream,
                        "tool": tool,
                        "pinned": accepted.to_hex(),
                        "listed": null,
                        "reason": why,
                    });
                    found.push((Some(local.clone()), event, shown.to_owned()));
                }
            }
        }
        let mut newly = Vec::new();
        {
            let Ok(mut withheld) = guard.withheld.write() else {
                return;
            };
            for (local, event, why) in found {
                match local {
                    Some(local) if !withheld.contains_key(&local) => {
                        withheld.insert(local.clone(), shown_reason(&why));
                        newly.push((Some(local), event));
                    }
                    Some(_) => {}
                    None => newly.push((None, event)),
                }
            }
        }
        if newly.is_empty() {
            continue;
        }
        for (local, event) in &newly {
            if let Some(local) = local {
                eprintln!(
                    "tooltrust: withholding {local}: upstream {:?} changed its definition",
                    watched.upstream
                );
            }
            // Withheld already; a failed record is reported, and the call stays unknown.
            if let Err(error) = log.append(event) {
                eprintln!(
                    "tooltrust: a withheld tool could not be recorded: {}",
                    describe(&error)
                );
            }
        }
        if newly.iter().any(|(local, _)| local.is_some())
            && let Some(host) = guard.host.get()
        {
            let _ = host.notify_tool_list_changed().await;
        }
    }
}

/// The definitions every upstream of the configuration at `path` lists now; fails if one
/// cannot be reached.
async fn definitions(path: &Path) -> Result<Vec<(String, Vec<Definition>)>, ProxyError> {
    crate::sandbox::harden().map_err(ProxyError::Harden)?;
    let config = read_config(path)?;
    let jail = Jail::new(path, &config);
    for note in jail.notes(&config.upstream) {
        eprintln!("tooltrust: {}", note.text);
    }
    let mut all = Vec::with_capacity(config.upstream.len());
    for upstream in &config.upstream {
        let name = upstream.name.get_ref().clone();
        let options = ConnectOptions {
            prefix: format!("{name}__"),
            listing: ListingLimits::of(&config),
            ..ConnectOptions::default()
        };
        match reach(upstream, options, &jail).await {
            Ok(remote) => {
                let definitions = remote
                    .listed()
                    .iter()
                    .map(|listed| listed.definition.clone())
                    .collect();
                all.push((name, definitions));
            }
            Err(source) => {
                return Err(ProxyError::Upstream {
                    upstream: name,
                    source,
                });
            }
        }
    }
    Ok(all)
}

/// `tooltrust mcp pin`: lists every upstream's tools and pins their definitions in the
/// lock file beside the configuration at `path` (replacing it). Returns the lock file and
/// how many tools it pins.
pub async fn pin(path: &Path) -> Result<(PathBuf, usize), ProxyError> {
    let mut lock = Lock {
        version: Lock::VERSION,
        ..Lock::default()
    };
    let mut count = 0;
    for (upstream, definitions) in definitions(path).await? {
        count += definitions.len();
        lock.pin(&upstream, &definitions);
    }
    let file = lock_path(path);
    lock.write(&file).map_err(ProxyError::Lock)?;
    Ok((file, count))
}

/// `tooltrust mcp pin --diff`: what changed in every upstream's tools since they were
/// pinned (everything is new when there is no lock file).
pub async fn pin_diff(path: &Path) -> Result<Vec<Change>, ProxyError> {
    let lock = Lock::read(&lock_path(path))
        .map_err(ProxyError::Lock)?
        .unwrap_or_default();
    let mut changes = Vec::new();
    for (upstream, definitions) in definitions(path).await? {
        changes.extend(crate::pin::diff(&lock, &upstream, &definitions));
    }
    Ok(changes)
}
