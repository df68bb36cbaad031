//! The `tooltrust` command: canonical JSON, call checksums, rendering, verification,
//! conformance checks, audit logs and the review queue of a store.

mod audit;
mod canon;
mod checksum;
mod conform;
mod console;
mod key;
mod lines;
mod mcp;
mod pending;
mod render;
mod store;
mod verify;

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tooltrust::envelope::{Renderer, SessionKey};

#[derive(Parser)]
#[command(
    name = "tooltrust",
    version,
    about = "Canonical JSON, call checksums, envelopes, verification, conformance and audit logs for tooltrust"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Verifies or shows a tamper-evident audit log.
    #[command(subcommand)]
    Audit(audit::AuditCommand),
    /// Writes the RFC 8785 canonical bytes of a JSON document.
    ///
    /// The bytes go to standard output with no trailing newline. Invalid JSON, duplicate
    /// keys, lone surrogates and numbers that overflow a double are errors (exit status 1).
    Canon {
        /// The JSON document.
        file: PathBuf,
    },
    /// Computes tool-call checksums for JSON lines of `{"tool", "args_json"}`.
    ///
    /// Writes one JSON line for each input line: `{"checksum": "<64 hex>", "canonical": "…"}`,
    /// or `{"error": "line N: …"}` for a line or call that cannot be read; other fields of an
    /// input line are ignored. Exit status 1 when any line was an error.
    Checksum {
        /// The input; standard input when absent.
        file: Option<PathBuf>,
    },
    /// Serves the review console: the calls held in a store (--sqlite FILE, --postgres
    /// URL or TOOLTRUST_STORE), why, the context that led to them, decisions, and the
    /// audit chain, as a small web application on 127.0.0.1:8787.
    Console(Box<console::ConsoleArgs>),
    /// Runs conformance vectors and reports every failing case.
    ///
    /// Takes tool-call vector files (arrays of objects with `args_json`), envelope vector
    /// files (objects with `kind`, `input`, `rendered`) and RFC 8785 directories (`input/`
    /// and `output/`). Prints every failing case with expected and actual, then
    /// `N passed, M failed`; exit status 0 only when nothing failed.
    Conform {
        /// Vector files and directories.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Renders JSON lines `{"text", "id"?, "tool"?, "args_json"?}` into envelopes and writes
    /// one JSON line each: `{"rendered", "nonce", "neutralised"}` or `{"error"}`.
    Render {
        /// `sealed` (secret nonces, neutralised bodies) or `compat` (the reference's bytes).
        #[arg(long, value_enum, default_value = "sealed")]
        mode: Mode,
        /// The tier every line is rendered into.
        #[arg(long, value_enum)]
        tier: render::Tier,
        /// The session key for sealed nonces: 32 raw bytes or 64 hex characters (default:
        /// a fresh random key, never shown).
        #[arg(long)]
        key_file: Option<PathBuf>,
        /// The input; standard input when absent.
        file: Option<PathBuf>,
    },
    /// MCP: the guarding proxy, and a demo server to try it with.
    #[command(subcommand)]
    Mcp(mcp::McpCommand),
    /// Lists, shows and decides the calls held for review in a store (--sqlite FILE,
    /// --postgres URL, or TOOLTRUST_STORE=sqlite:PATH|postgres://…; the flags win).
    #[command(subcommand)]
    Pending(pending::PendingCommand),
    /// Reviewers' keys: a reviewer signs each decision with a private key that only they
    /// hold; agent hosts and proxies hold the public keys (the reviewers file).
    #[command(subcommand)]
    Reviewer(ReviewerCommand),
    /// Parses a rendered prompt strictly and writes its blocks as JSON lines; exit status 1
    /// with the offending position when it does not close exactly as rendered. With
    /// `--key-file`, also authenticates every nonce of a sealed prompt.
    Verify {
        /// The session key that rendered the prompt: 32 raw bytes or 64 hex characters.
        #[arg(long)]
        key_file: Option<PathBuf>,
        /// The prompt; standard input when absent.
        file: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum ReviewerCommand {
    /// Makes a reviewer's key pair: writes the private key to a new file readable by its
    /// owner only and prints the public key (`ed25519:…`) for the hosts' reviewers file.
    Keygen(key::KeygenArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Mode {
    Sealed,
    Compat,
}

fn session_key(path: Option<&PathBuf>) -> Result<Option<SessionKey>, String> {
    let Some(path) = path else {
        return Ok(None);
    };
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    SessionKey::from_file_contents(&bytes)
        .map(Some)
        .map_err(|e| format!("{}: {e}", path.display()))
}

fn renderer(mode: Mode, key: Option<SessionKey>) -> Result<Renderer, String> {
    Ok(match (mode, key) {
        (Mode::Compat, _) => Renderer::compat(),
        (Mode::Sealed, Some(key)) => Renderer::sealed(key),
        (Mode::Sealed, None) => {
            Renderer::sealed(SessionKey::generate().map_err(|e| e.to_string())?)
        }
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // MCP speaks on stdout itself, and the console serves until interrupted: nothing
    // here may hold stdout for them.
    let cli = match cli.command {
        Command::Console(args) => {
            return match console::run(*args) {
                Ok(()) => ExitCode::SUCCESS,
                Err(message) => {
                    eprintln!("tooltrust: {message}");
                    ExitCode::FAILURE
                }
            };
        }
        Command::Mcp(command) => {
            return match mcp::run(command) {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => ExitCode::FAILURE,
                Err(message) => {
                    eprintln!("tooltrust: {message}");
                    ExitCode::FAILURE
                }
            };
        }
        command => Cli { command },
    };
    let mut stdout = io::stdout().lock();
    let outcome = match cli.command {
        Command::Audit(command) => {
            audit::run(command, &mut stdout).map_err(|e| store::describe(&e))
        }
        Command::Canon { file } => canon::run(&file, &mut stdout).map_err(|e| e.to_string()),
        Command::Checksum { file } => {
            checksum::run(file.as_deref(), &mut stdout).map_err(|e| e.to_string())
        }
        Command::Conform { paths } => conform::run(&paths, &mut stdout).map_err(|e| e.to_string()),
        Command::Console(_) | Command::Mcp(_) => Err("handled above".to_owned()),
        Command::Pending(command) => {
            pending::run(command, &mut stdout).map_err(|e| store::describe(&e))
        }
        Command::Reviewer(ReviewerCommand::Keygen(args)) => {
            key::keygen(&args, &mut stdout).map_err(|e| store::describe(&e))
        }
        Command::Render {
            mode,
            tier,
            key_file,
            file,
        } => session_key(key_file.as_ref())
            .and_then(|key| renderer(mode, key))
            .and_then(|renderer| {
                render::run(&renderer, tier, file.as_deref(), &mut stdout)
                    .map_err(|e| e.to_string())
            }),
        Command::Verify { key_file, file } => session_key(key_file.as_ref()).and_then(|key| {
            verify::run(file.as_deref(), key.as_ref(), &mut stdout).map_err(|e| e.to_string())
        }),
    };
    let flushed = stdout.flush();
    match (outcome, flushed) {
        (Ok(true), Ok(())) => ExitCode::SUCCESS,
        (Ok(false), Ok(())) => ExitCode::FAILURE,
        (Err(message), _) => {
            eprintln!("tooltrust: {message}");
            ExitCode::FAILURE
        }
        (Ok(_), Err(error)) => {
            eprintln!("tooltrust: cannot write the output: {error}");
            ExitCode::FAILURE
        }
    }
}
