//! MCP for tooltrust, on the official Rust SDK (`rmcp`).
//!
//! - [`serve`] exposes a session's registry to an MCP client: `tools/list` carries each
//!   tool's schema, annotations derived from its declaration (`readOnlyHint`,
//!   `destructiveHint` for consequential tools, `openWorldHint` for untrusted output) and
//!   the declaration in `_meta.tooltrust`; `tools/call` goes through the scope like the
//!   agent loop's calls, and answers with the enveloped output, or an error result
//!   (`isError`) naming the gate's rule and reason.
//!   [`http_service`] serves the same over streamable HTTP, a scope per MCP session.
//! - [`connect`] takes a remote server's tools as registry tools with the trust *the host*
//!   declares ([`Declarations`]), never the trust the server claims.
//!
//! - [`proxy`] is the guarding proxy behind `tooltrust mcp proxy --config FILE`, configured
//!   by [`config::ProxyConfig`], its stdio upstreams started in a [`sandbox`]; [`demo`] is
//!   a small upstream to try it with.
//!
//! The core crate stays free of an async runtime; this one brings tokio through rmcp.

#![deny(missing_docs)]

pub mod config;
mod connect;
mod declaration;
pub mod demo;
mod grants;
mod metadata;
pub mod pin;
pub mod proxy;
pub mod sandbox;
mod serve;
pub mod stdio;

pub use connect::{
    ConnectError, ConnectOptions, Connection, Listed, ListingLimits, Remote, RemoteCallError,
    connect,
};
pub use declaration::{Declarations, Declared};
pub use metadata::MetadataLimits;
pub use serve::{DEFAULT_ASKED_ARGUMENTS_BYTES, ReviewQueue, ScopeServer, tool_of};

/// Why serving ended with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The MCP handshake failed.
    #[error("the MCP client did not complete its handshake")]
    Handshake(#[source] Box<rmcp::service::ServerInitializeError>),
    /// The task serving the connection ended abnormally.
    #[error("the MCP connection failed")]
    Connection(#[source] tokio::task::JoinError),
}

/// Serves `scope`'s session's tools over `transport` until the client disconnects; every
/// call is made and decided in `scope`, and recorded by its session. Over stdio:
/// `serve(scope, tooltrust_mcp::stdio::stdio())` (or `rmcp::transport::stdio()`, which
/// hands every read and write to a blocking thread).
pub async fn serve<T, E, A>(scope: tooltrust::Scope, transport: T) -> Result<(), ServeError>
where
    T: rmcp::transport::IntoTransport<rmcp::service::RoleServer, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let running = rmcp::ServiceExt::serve(ScopeServer::new(scope), transport)
        .await
        .map_err(|error| ServeError::Handshake(Box::new(error)))?;
    running
        .waiting()
        .await
        .map(|_| ())
        .map_err(ServeError::Connection)
}

/// The same server over streamable HTTP: every MCP session gets a scope of its own in
/// `session`, authored by `author`. Mount it in a tower server, such as axum's
/// `Router::new().nest_service("/mcp", http_service(session, author))`; by default it
/// answers only requests addressed to the loopback interface (`Host` checked).
pub fn http_service(
    session: tooltrust::Session,
    author: tooltrust::Id,
) -> rmcp::transport::streamable_http_server::StreamableHttpService<
    ScopeServer,
    rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
> {
    rmcp::transport::streamable_http_server::StreamableHttpService::new(
        move || {
            session
                .open_scope(author.clone())
                .map(ScopeServer::new)
                .map_err(std::io::Error::other)
        },
        Default::default(),
        Default::default(),
    )
}
