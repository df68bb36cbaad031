//! The guarding proxy: an MCP server a host starts instead of its real servers. It fronts
//! the upstreams of its configuration, takes their tools with the host's declarations
//! (namespaced `<upstream>__<tool>`), and puts every call through one scope's gate —
//! one proxy process over stdio is one client session, so one scope. Every decision goes
//! to the audit log in the configured directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::process::Command;
use tooltrust::audit::AuditLog;
use tooltrust::{Id, Policy, Registry, Session};

use crate::config::{ConfigError, Endpoint, Mode, ProxyConfig};
use crate::connect::{ConnectOptions, Connection, connect};
use crate::serve::ScopeServer;

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
    /// The upstreams' tools could not form one registry (two with one name, say).
    #[error("the upstreams' tools do not form one registry")]
    Registry(#[source] tooltrust::registry::RegistryError),
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
    /// Upstreams that could not be reached at start, and why (their tools are unknown).
    pub unavailable: Vec<(String, Unavailable)>,
    _connections: Vec<Connection>,
}

impl Proxy {
    /// Reads the configuration at `path`, opens the audit log, connects to every
    /// upstream (one that cannot be reached is reported in [`Proxy::unavailable`], and
    /// its tools stay unknown) and opens the session's scope.
    pub async fn start(path: &Path) -> Result<Proxy, ProxyError> {
        let text = std::fs::read_to_string(path).map_err(|source| ProxyError::Read {
            path: path.to_owned(),
            source,
        })?;
        let config = ProxyConfig::parse(&text).map_err(|error| ProxyError::Config {
            path: path.to_owned(),
            error,
        })?;
        // Relative to the configuration file, never to wherever the host started us.
        let dir = path
            .parent()
            .unwrap_or(Path::new("."))
            .join(&config.audit_log);
        let log = AuditLog::open(&dir).map_err(|source| ProxyError::Audit {
            dir: dir.clone(),
            source,
        })?;
        let mut builder = Registry::builder();
        let mut connections = Vec::new();
        let mut unavailable = Vec::new();
        for upstream in &config.upstream {
            let name = upstream.name.get_ref().clone();
            let options = ConnectOptions {
                prefix: format!("{name}__"),
                ..ConnectOptions::default()
            };
            let declarations = upstream.declarations();
            let connected = match upstream.endpoint() {
                Some(Endpoint::Command { program, args }) => {
                    let mut command = Command::new(program);
                    command.args(args).envs(&upstream.env);
                    match rmcp::transport::TokioChildProcess::builder(command)
                        .stderr(std::process::Stdio::inherit())
                        .spawn()
                    {
                        Ok((transport, _)) => connect(transport, &declarations, options)
                            .await
                            .map_err(Unavailable::from),
                        Err(error) => Err(Unavailable::from(error)),
                    }
                }
                Some(Endpoint::Url(url)) => {
                    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url);
                    connect(transport, &declarations, options)
                        .await
                        .map_err(Unavailable::from)
                }
                None => Err(Unavailable::from("the upstream has no endpoint")),
            };
            match connected {
                Ok(remote) => {
                    let (tools, connection) = remote.into_tools();
                    for tool in tools {
                        builder = builder.tool(tool);
                    }
                    connections.push(connection);
                }
                Err(error) => unavailable.push((name, error)),
            }
        }
        let registry = builder.build().map_err(ProxyError::Registry)?;
        let mut policy = Policy::new()
            .strict_isolation(config.strict_isolation)
            .observe(config.mode == Mode::Observe);
        if let Some(max) = config.max_repeats {
            policy = policy.max_repeats(max);
        }
        let session = Session::builder(registry)
            .policy(policy)
            .recorder(Arc::new(log))
            .build()
            .map_err(ProxyError::Key)?;
        let (host, person) = (Id::new("mcp-host"), Id::new("mcp-person"));
        let scope = session
            .open_scope(host.map_err(ProxyError::Id)?)
            .map_err(ProxyError::Scope)?;
        let mut server =
            ScopeServer::new(scope).ask_about_held_calls(person.map_err(ProxyError::Id)?);
        if let Some(store) = &config.store {
            let (location, flag) = match tooltrust_store::Location::parse(store.get_ref()) {
                Ok(tooltrust_store::Location::Sqlite(file)) => {
                    // Relative to the configuration file, like the audit log.
                    let file = path.parent().unwrap_or(Path::new(".")).join(file);
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
            let queue = tooltrust_store::Store::open(&location, Default::default())
                .await
                .map_err(|source| ProxyError::Store(Box::new(source)))?;
            server = server.review_queue(crate::ReviewQueue::new(queue, flag));
        }
        Ok(Proxy {
            server,
            unavailable,
            _connections: connections,
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
        running
            .waiting()
            .await
            .map_err(crate::ServeError::Connection)?;
        drop(self._connections);
        Ok(())
    }
}
