//! Which store a command works on (`--sqlite FILE`, `--postgres URL`, or
//! `TOOLTRUST_STORE`; the flags win), and opening it.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use tokio::runtime::Runtime;
use tooltrust::Id;
use tooltrust::held::Reviewers;
use tooltrust::id::IdError;
use tooltrust_store::{
    ChainError, DecideError, Location, LocationError, REVIEWERS_ENV, STORE_ENV, Store, StoreError,
    StoreOptions, read_reviewers,
};

/// The flags that name a store.
#[derive(Debug, Clone, clap::Args)]
pub struct StoreArgs {
    /// A SQLite store file.
    #[arg(long, value_name = "FILE", conflicts_with = "postgres")]
    pub sqlite: Option<PathBuf>,
    /// A PostgreSQL store: postgres://USER@HOST:PORT/DATABASE (add
    /// `?options=-c%20search_path%3DSCHEMA` for a schema other than `public`).
    #[arg(long, value_name = "URL")]
    pub postgres: Option<String>,
    /// The reviewers file (who may decide, by public key; default: TOOLTRUST_REVIEWERS).
    #[arg(long, value_name = "FILE")]
    pub reviewers: Option<PathBuf>,
}

/// Why a store command could not run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No flag and no `TOOLTRUST_STORE`.
    #[error("no store given: use --sqlite FILE or --postgres URL, or set {STORE_ENV}")]
    NoStore,
    /// The location is malformed.
    #[error(transparent)]
    Location(#[from] LocationError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The chain could not be read.
    #[error(transparent)]
    Chain(#[from] ChainError),
    /// A decision was refused.
    #[error(transparent)]
    Decide(#[from] DecideError),
    /// No held call has this id.
    #[error("no held call has id {0}")]
    UnknownCall(Id),
    /// The reviewers file could not be read.
    #[error("{0}")]
    Reviewers(String),
    /// A key could not be read.
    #[error(transparent)]
    Key(#[from] crate::key::Error),
    /// The async runtime could not start.
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] io::Error),
    /// The output cannot be written.
    #[error("cannot write the output: {0}")]
    Write(#[from] io::Error),
}

impl StoreArgs {
    /// The store the flags name, else the one `TOOLTRUST_STORE` names, if any.
    pub fn location(&self) -> Result<Option<Location>, Error> {
        if let Some(path) = &self.sqlite {
            return Ok(Some(Location::Sqlite(path.clone())));
        }
        if let Some(url) = &self.postgres {
            return match Location::parse(url)? {
                location @ Location::Postgres(_) => Ok(Some(location)),
                Location::Sqlite(_) => Err(LocationError::Unrecognised(url.clone()).into()),
            };
        }
        Ok(Location::from_env()?)
    }

    /// The reviewers file the flag names, else the one `TOOLTRUST_REVIEWERS` names, if
    /// any.
    pub fn reviewers(&self) -> Result<Option<Reviewers>, Error> {
        let path = match &self.reviewers {
            Some(path) => path.clone(),
            None => match std::env::var_os(REVIEWERS_ENV) {
                Some(path) if !path.is_empty() => PathBuf::from(path),
                _ => return Ok(None),
            },
        };
        read_reviewers(path)
            .map(Some)
            .map_err(|error| Error::Reviewers(error.to_string()))
    }
}

/// Opens the store at `location` (never creating one) on a runtime of the command's own.
pub fn open(location: &Location) -> Result<(Runtime, Store), Error> {
    open_with(location, Reviewers::new())
}

/// [`open`], with the reviewers whose signed decisions the store accepts.
pub fn open_with(location: &Location, reviewers: Reviewers) -> Result<(Runtime, Store), Error> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    let options = StoreOptions {
        create: false,
        max_connections: 2,
        timeout: Duration::from_secs(10),
        reviewers: std::sync::Arc::new(reviewers),
        ..StoreOptions::default()
    };
    let store = runtime.block_on(Store::open(location, options))?;
    Ok((runtime, store))
}

/// Parses an id given on the command line (clap reports the error with the flag).
pub fn parse_id(text: &str) -> Result<Id, IdError> {
    Id::new(text)
}

/// An error and its causes on one line, for the command's edge: each cause that the
/// message does not already quote is added after a colon.
pub fn describe(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        let text = inner.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        cause = inner.source();
    }
    message
}
