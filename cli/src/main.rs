//! The `tooltrust` command.

mod audit;

use std::io::{self, Write};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "tooltrust",
    version,
    about = "Tools for tooltrust: audit log verification"
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut stdout = io::stdout().lock();
    let outcome = match cli.command {
        Command::Audit(command) => audit::run(command, &mut stdout).map_err(|e| e.to_string()),
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
