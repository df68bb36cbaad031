//! `tooltrust audit verify` and `tooltrust audit show`.

use std::fs::File;
use std::io::{self, BufReader, Write};
use std::path::{Path, PathBuf};

use clap::Subcommand;
use serde_json::Value;
use tooltrust::Id;
use tooltrust::audit::{
    Entry, EntryReader, HEAD_FILE, Head, HeadError, LOG_FILE, VerifyError, VerifyErrorKind,
    VerifyReport, Writers, verify_signed,
};
use tooltrust::signature::PublicKey;
use tooltrust_store::{ChainError, Location, STORE_ENV};

use crate::store::{self, StoreArgs, parse_id};

#[derive(Subcommand)]
pub enum AuditCommand {
    /// Verifies an audit log, alone or against a pinned head: a file, or a tenant's
    /// chain in a store (--sqlite FILE, --postgres URL, or TOOLTRUST_STORE).
    ///
    /// Every entry must be canonical, hashed and chained, a store's chain must end at
    /// its head row, a log file must still hold the head file the log keeps beside it
    /// (`audit.head`, when there is one) and, with --head, the pinned head too. Prints
    /// `ok: N entries, head <hash>` (exit status 0), or the first bad seq and why (exit
    /// status 1).
    Verify {
        /// The log (`audit.jsonl`); omit it to verify a store's chain.
        #[arg(conflicts_with_all = ["sqlite", "postgres"])]
        file: Option<PathBuf>,
        /// A head record pinned earlier (`{"hash":"…","seq":N}`, as in `audit.head`).
        #[arg(long, value_name = "HEADFILE")]
        head: Option<PathBuf>,
        #[command(flatten)]
        store: StoreArgs,
        /// The tenant whose chain to verify in a store.
        #[arg(long, value_parser = parse_id, default_value = "default")]
        tenant: Id,
        /// The public key (`ed25519:…`, as `tooltrust audit keygen` prints it) of a
        /// process that writes the chain; repeat it for each. With it, every entry must
        /// be signed by one of them, so an entry edited, inserted or re-hashed by someone
        /// without a writer's private key fails, with or without --head.
        #[arg(long = "writer", value_name = "PUBLIC_KEY")]
        writers: Vec<PublicKey>,
    },
    /// Makes a chain writer's key pair: writes the private key to a new file readable by
    /// its owner only and prints the public key, which `audit verify --writer` takes.
    Keygen(crate::key::KeygenArgs),
    /// Prints an audit log's entries for a human, then whether it verifies (against
    /// the head file beside it, when there is one).
    ///
    /// Exit status 1 if it does not verify. Text from the log is escaped, so it cannot
    /// drive the terminal.
    Show {
        /// The log (`audit.jsonl`).
        file: PathBuf,
    },
}

/// Why a command could not run at all (a bad log is a result, not an error).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The store could not be opened or read.
    #[error(transparent)]
    Store(#[from] store::Error),
    /// Neither a file nor a store was given.
    #[error("give a log file, --sqlite FILE or --postgres URL (or set {STORE_ENV})")]
    NothingToVerify,
    /// The head file is unreadable or malformed.
    #[error(transparent)]
    Head(#[from] HeadError),
    /// The log cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The log.
        path: PathBuf,
        /// What failed.
        source: std::sync::Arc<io::Error>,
    },
    /// The output cannot be written.
    #[error("cannot write the output: {0}")]
    Write(#[from] io::Error),
    /// A key could not be made.
    #[error(transparent)]
    Key(#[from] crate::key::Error),
}

/// Runs a command; `Ok(false)` means the log failed verification.
pub fn run(command: AuditCommand, out: &mut impl Write) -> Result<bool, Error> {
    match command {
        AuditCommand::Verify {
            file,
            head,
            store,
            tenant,
            writers,
        } => {
            let head = head.map(Head::read).transpose()?;
            let writers = (!writers.is_empty()).then(|| Writers::new(writers));
            match (file, store.location()?) {
                (Some(file), _) => verify_file(&file, head, writers.as_ref(), out),
                (None, Some(location)) => {
                    verify_store(&location, tenant, head, writers.as_ref(), out)
                }
                (None, None) => Err(Error::NothingToVerify),
            }
        }
        AuditCommand::Show { file } => show(&file, out),
        AuditCommand::Keygen(args) => Ok(crate::key::keygen(&args, out)?),
    }
}

/// The head file an [`AuditLog`](tooltrust::AuditLog) keeps beside its log, if `file`
/// is such a log and the head is there.
fn head_beside(file: &Path) -> Result<Option<Head>, Error> {
    if file.file_name() != Some(LOG_FILE.as_ref()) {
        return Ok(None);
    }
    let path = file.with_file_name(HEAD_FILE);
    if !path.exists() {
        return Ok(None);
    }
    Ok(Some(Head::read(path)?))
}

/// Verifies against the pinned head and the one beside the log: the pinned head proves
/// the log was not rewritten since it was taken, the one beside it that no entry was
/// cut off the end since the last append.
fn verify_file(
    file: &Path,
    pinned: Option<Head>,
    writers: Option<&Writers>,
    out: &mut impl Write,
) -> Result<bool, Error> {
    let beside = head_beside(file)?;
    let mut result = verify_signed(file, pinned.as_ref(), writers);
    if let (Ok(_), Some(beside)) = (&result, beside)
        && pinned != Some(beside)
    {
        result = verify_signed(file, Some(&beside), writers);
    }
    report(file, result, out)
}

fn verify_store(
    location: &Location,
    tenant: Id,
    head: Option<Head>,
    writers: Option<&Writers>,
    out: &mut impl Write,
) -> Result<bool, Error> {
    let (runtime, store) = store::open(location)?;
    let store = store.for_tenant(tenant);
    let result = runtime.block_on(async {
        match writers {
            Some(writers) => store.verify_chain_signed(head, writers).await,
            None => store.verify_chain(head).await,
        }
    });
    runtime.block_on(store.close());
    match result {
        Ok(report) => print_ok(&report, out),
        Err(ChainError::Invalid(error)) => print_failure(&error, out),
        Err(ChainError::Store(error)) => Err(store::Error::from(error).into()),
        Err(damage) => {
            writeln!(out, "FAILED: {damage}")?;
            Ok(false)
        }
    }
}

fn print_ok(report: &VerifyReport, out: &mut impl Write) -> Result<bool, Error> {
    writeln!(
        out,
        "ok: {} entries, head {}",
        report.entries, report.head.hash
    )?;
    for unknown in &report.outcome_unknown {
        writeln!(
            out,
            "outcome unknown: call {} let run at seq {} (no outcome after it: still running, or cut off by a crash before its outcome was synced)",
            unknown.call, unknown.seq
        )?;
    }
    Ok(true)
}

fn print_failure(error: &VerifyError, out: &mut impl Write) -> Result<bool, Error> {
    writeln!(out, "FAILED: first bad seq {}: {}", error.seq, error.kind)?;
    Ok(false)
}

fn report(
    file: &Path,
    result: Result<VerifyReport, VerifyError>,
    out: &mut impl Write,
) -> Result<bool, Error> {
    match result {
        Ok(report) => print_ok(&report, out),
        Err(VerifyError {
            kind: VerifyErrorKind::Io(source),
            ..
        }) => Err(Error::Read {
            path: file.to_path_buf(),
            source,
        }),
        Err(error) => print_failure(&error, out),
    }
}

fn show(file: &Path, out: &mut impl Write) -> Result<bool, Error> {
    let log = File::open(file).map_err(|source| Error::Read {
        path: file.to_path_buf(),
        source: std::sync::Arc::new(source),
    })?;
    let mut reader = EntryReader::new(BufReader::new(log), head_beside(file)?);
    let mut failure = None;
    for entry in &mut reader {
        match entry {
            Ok(entry) => show_entry(&entry, out)?,
            Err(error) => failure = Some(error),
        }
    }
    let result = match failure {
        Some(error) => Err(error),
        None => reader.finish(),
    };
    report(file, result, out)
}

fn show_entry(entry: &Entry, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "#{}  {}  {}",
        entry.seq,
        escape(&entry.ts),
        escape(&entry.event)
    )?;
    let width = entry
        .fields
        .keys()
        .map(|k| escape(k).len())
        .max()
        .unwrap_or(0);
    for (key, value) in &entry.fields {
        writeln!(out, "    {:width$}  {}", escape(key), json_text(value))?;
    }
    let (hash, prev) = (entry.hash.to_hex(), entry.prev.to_hex());
    writeln!(out, "    hash {}…  prev {}…", &hash[..16], &prev[..16])?;
    writeln!(out)
}

/// A value as compact JSON, with every control and bidirectional-formatting
/// character escaped: log text came, in part, from outsiders.
fn json_text(value: &Value) -> String {
    escape(&value.to_string())
}

/// `text` with control characters (C0, DEL, C1) and bidirectional-formatting
/// characters written as `\uXXXX`.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let bidi = matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        if c.is_control() || bidi {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_neutralises_terminal_controls() {
        assert_eq!(escape("a\u{1b}[31mb"), "a\\u001b[31mb");
        assert_eq!(escape("\u{9b}2J\u{7f}"), "\\u009b2J\\u007f");
        assert_eq!(escape("x\u{202e}y"), "x\\u202ey");
        assert_eq!(escape("é 😀 ж"), "é 😀 ж");
    }
}
