//! The `tooltrust` command: canonical JSON, call checksums and conformance checks.

mod canon;
mod checksum;
mod conform;

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "tooltrust",
    version,
    about = "Canonical JSON, tool-call checksums and conformance checks for tooltrust"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut stdout = io::stdout().lock();
    let outcome = match cli.command {
        Command::Canon { file } => canon::run(&file, &mut stdout).map_err(|e| e.to_string()),
        Command::Checksum { file } => {
            checksum::run(file.as_deref(), &mut stdout).map_err(|e| e.to_string())
        }
        Command::Conform { paths } => conform::run(&paths, &mut stdout).map_err(|e| e.to_string()),
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
