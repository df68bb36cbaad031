//! `tooltrust reviewer keygen` and `tooltrust audit keygen`: a fresh Ed25519 key pair, the
//! private key in a new file readable by its owner only, the public key printed.

use std::io::Write;
use std::path::{Path, PathBuf};

use tooltrust::signature::{KeyError, SecretKey};

/// A key file's flag.
#[derive(Debug, Clone, clap::Args)]
pub struct KeygenArgs {
    /// Where to write the private key (a new file, mode 0600; never overwritten).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

/// Why a key could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The key could not be generated, written or read.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// The output cannot be written.
    #[error("cannot write the output: {0}")]
    Write(#[from] std::io::Error),
}

/// Writes a new key to `out` and prints its public key.
pub fn keygen(args: &KeygenArgs, out: &mut impl Write) -> Result<bool, Error> {
    let key = SecretKey::generate()?;
    key.write_new(&args.out)?;
    writeln!(out, "{}", key.public())?;
    Ok(true)
}

/// Reads a private key file (refusing one that others can read).
pub fn read(path: &Path) -> Result<SecretKey, Error> {
    Ok(SecretKey::read(path)?)
}
