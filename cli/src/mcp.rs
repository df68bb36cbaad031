//! `tooltrust mcp proxy --config FILE`, `tooltrust mcp pin --config FILE [--diff]` and
//! `tooltrust mcp demo-server`: the proxy and the demo server speak MCP on standard input
//! and output, so nothing else may write there.

use std::path::PathBuf;

use clap::{Subcommand, ValueEnum};
use tooltrust::envelope::inert;
use tooltrust_mcp::demo::Misbehaviour;

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
    /// Pins the tool definitions every upstream of FILE lists now (name, description,
    /// input schema, annotations; SHA-256 of their canonical JSON) in a lock file beside
    /// it; the proxy then withholds a tool whose definition changes, and a new one.
    Pin {
        /// The configuration (TOML); the lock file is FILE with the extension `.lock`.
        #[arg(long)]
        config: PathBuf,
        /// Shows, field by field, what changed since the tools were pinned, and writes
        /// nothing; exit status 1 when something changed.
        #[arg(long)]
        diff: bool,
    },
    /// Runs a small MCP server on stdin/stdout to try the proxy with: a web page carrying
    /// a prompt injection (`fetch_page`), a policy (`lookup_policy`), an email sender that
    /// claims to be read-only (`send_email`) and `crash`.
    DemoServer {
        /// Also attacks the proxy: poisoned descriptions, a rug pull, colliding names,
        /// or a tool that dumps the server's environment.
        #[arg(long, value_enum)]
        misbehave: Option<Attack>,
    },
}

/// The demo server's attacks, as the flag spells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Attack {
    /// Instructions in a description, a parameter description and enum values.
    Poisoned,
    /// `lookup_policy`'s description changes once `change` is called.
    RugPull,
    /// A tool named `_send_email`.
    Underscore,
    /// `send_email` listed twice.
    Duplicate,
    /// A tool `env` that returns the server's environment.
    DumpEnv,
    /// Instructions in the keys of a tool's input schema, none in its description.
    PoisonedKeys,
    /// Never answers `initialize`.
    SilentStart,
    /// Answers `initialize` after three seconds.
    SlowStart,
    /// Never answers `tools/list`.
    SilentList,
    /// A `tools/list` answer nested 200 levels deep.
    DeepList,
    /// `tools/list` pages for ever.
    EndlessPages,
    /// `list_changed` every millisecond, with new tool names each time.
    ListStorm,
}

/// Runs the command; `Ok(false)` when `pin --diff` found changes, `Err` is the message to
/// show. Whatever an upstream wrote is made inert before it reaches the terminal
/// ([`inert`]): an error it answered with is part of the message.
pub fn run(command: McpCommand) -> Result<bool, String> {
    run_command(command).map_err(|message| inert(&message).into_owned())
}

fn run_command(command: McpCommand) -> Result<bool, String> {
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
                        inert(&crate::store::describe(why.as_ref()))
                    );
                }
                for (tool, why) in &proxy.withheld {
                    eprintln!("tooltrust: tool {tool} is withheld: {}", inert(why));
                }
                proxy
                    .serve_stdio()
                    .await
                    .map(|()| true)
                    .map_err(|error| crate::store::describe(&error))
            }
            McpCommand::Pin { config, diff: false } => {
                let (file, count) = tooltrust_mcp::proxy::pin(&config)
                    .await
                    .map_err(|error| crate::store::describe(&error))?;
                eprintln!("tooltrust: pinned {count} tool(s) in {}", file.display());
                Ok(true)
            }
            McpCommand::Pin { config, diff: true } => {
                let changes = tooltrust_mcp::proxy::pin_diff(&config)
                    .await
                    .map_err(|error| crate::store::describe(&error))?;
                if changes.is_empty() {
                    println!("no changes since the tools were pinned");
                    return Ok(true);
                }
                print!("{}", tooltrust_mcp::pin::render(&changes));
                Ok(false)
            }
            McpCommand::DemoServer { misbehave } => {
                let transport = rmcp::transport::stdio();
                let running = match misbehave {
                    None => rmcp::ServiceExt::serve(tooltrust_mcp::demo::DemoServer, transport)
                        .await
                        .map_err(|error| format!("the MCP handshake failed: {error}"))?
                        .waiting()
                        .await,
                    Some(attack) => {
                        let misbehaviour = match attack {
                            Attack::Poisoned => Misbehaviour::Poisoned,
                            Attack::RugPull => Misbehaviour::RugPull,
                            Attack::Underscore => Misbehaviour::Underscore,
                            Attack::Duplicate => Misbehaviour::Duplicate,
                            Attack::DumpEnv => Misbehaviour::DumpEnv,
                            Attack::PoisonedKeys => Misbehaviour::PoisonedKeys,
                            Attack::SilentStart => Misbehaviour::SilentStart,
                            Attack::SlowStart => Misbehaviour::SlowStart,
                            Attack::SilentList => Misbehaviour::SilentList,
                            Attack::DeepList => Misbehaviour::DeepList,
                            Attack::EndlessPages => Misbehaviour::EndlessPages,
                            Attack::ListStorm => Misbehaviour::ListStorm,
                        };
                        rmcp::ServiceExt::serve(
                            tooltrust_mcp::demo::MisbehavingServer(misbehaviour),
                            transport,
                        )
                        .await
                        .map_err(|error| format!("the MCP handshake failed: {error}"))?
                        .waiting()
                        .await
                    }
                };
                running.map(|_| true).map_err(|error| error.to_string())
            }
        }
    })
}
