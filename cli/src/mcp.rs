//! `tooltrust mcp proxy --config FILE` and `tooltrust mcp demo-server`: both speak MCP on
//! standard input and output, so nothing else may write there.

use std::path::PathBuf;

use clap::Subcommand;

#[derive(Subcommand)]
pub enum McpCommand {
    /// Runs the guarding proxy: an MCP server on stdin/stdout that fronts the upstream
    /// servers of FILE with the trust and effects it declares, holds consequential calls in
    /// a tainted session, and records every decision in the audit log it names.
    Proxy {
        /// The configuration (TOML).
        #[arg(long)]
        config: PathBuf,
    },
    /// Runs a small MCP server on stdin/stdout to try the proxy with: a web page carrying
    /// a prompt injection (`fetch_page`), a policy (`lookup_policy`), an email sender that
    /// claims to be read-only (`send_email`) and `crash`.
    DemoServer,
}

/// Runs the command; `Err` is the message to show.
pub fn run(command: McpCommand) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start the async runtime: {error}"))?;
    runtime.block_on(async {
        match command {
            McpCommand::Proxy { config } => {
                let proxy = tooltrust_mcp::proxy::Proxy::start(&config)
                    .await
                    .map_err(|error| crate::store::describe(&error))?;
                for (upstream, why) in &proxy.unavailable {
                    eprintln!(
                        "tooltrust: upstream {upstream:?} is unavailable, its tools are unknown: {}",
                        crate::store::describe(why.as_ref())
                    );
                }
                proxy
                    .serve_stdio()
                    .await
                    .map_err(|error| crate::store::describe(&error))
            }
            McpCommand::DemoServer => {
                let running = rmcp::ServiceExt::serve(
                    tooltrust_mcp::demo::DemoServer,
                    rmcp::transport::stdio(),
                )
                .await
                .map_err(|error| format!("the MCP handshake failed: {error}"))?;
                running
                    .waiting()
                    .await
                    .map(|_| ())
                    .map_err(|error| error.to_string())
            }
        }
    })
}
