//! `tooltrust console`: the review console, a small web application over a store's
//! review queue and audit chain.

use std::io::BufRead;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use tooltrust::Id;
use tooltrust::held::{AllTenants, Reviewer, Reviewers, Tenants};
use tooltrust::quarantine::Kek;
use tooltrust::signature::SecretKey;
use tooltrust_console::{
    Access, Config, Console, Credentials, DEFAULT_DECISIONS_PER_MINUTE, DEFAULT_LISTEN,
    ReviewerKeys, TlsFiles,
};
use tooltrust_store::{Location, Store, StoreOptions};

use crate::store::{StoreArgs, describe, parse_id};

/// The console's flags.
#[derive(clap::Args)]
pub struct ConsoleArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// Where to listen. Any address but loopback (127.0.0.1, ::1) needs --auth and TLS.
    #[arg(long, default_value = DEFAULT_LISTEN)]
    listen: SocketAddr,
    /// The person who decides (loopback only). The console draws a random token for
    /// them, writes it to a file only its owner can read (see --token-dir) and prints
    /// the address that signs in with it; it serves no request without it, whoever
    /// connects from the loopback address.
    #[arg(long, value_parser = parse_id, conflicts_with = "auth")]
    reviewer: Option<Id>,
    /// Where a console for --reviewer writes its token, as tooltrust-console-PORT.token,
    /// readable by its owner only, removed when the console stops. Default: the SQLite
    /// store's directory; for PostgreSQL, $XDG_RUNTIME_DIR, or else the current
    /// directory.
    #[arg(long, value_name = "DIR", conflicts_with = "auth")]
    token_dir: Option<PathBuf>,
    /// The reviewers' credentials: lines `REVIEWER token TOKEN` or `REVIEWER argon2 PHC`
    /// (make a PHC string with `tooltrust console --hash-password`).
    #[arg(long, value_name = "FILE")]
    auth: Option<PathBuf>,
    /// The TLS certificate chain (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The TLS private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Decisions one reviewer may make per minute.
    #[arg(long, default_value_t = DEFAULT_DECISIONS_PER_MINUTE)]
    decisions_per_minute: u32,
    /// The quarantine's key-encryption key (32 raw bytes or 64 hex characters), to
    /// decrypt quarantined outputs for review.
    #[arg(long, value_name = "FILE")]
    kek_file: Option<PathBuf>,
    /// The private key of the --reviewer (as `tooltrust reviewer keygen` wrote it): each
    /// decision is signed with it, and counts only where the hosts' reviewers file trusts
    /// its public key. Without it (or --keys) the console shows, but cannot decide.
    #[arg(long, value_name = "FILE", requires = "reviewer")]
    key: Option<PathBuf>,
    /// A directory of the reviewers' private keys, one `ID.key` per reviewer of --auth.
    #[arg(long, value_name = "DIR", conflicts_with = "key")]
    keys: Option<PathBuf>,
    /// Reads a password from standard input, prints its argon2 PHC string for a
    /// credentials file, and exits.
    #[arg(long, exclusive = true)]
    hash_password: bool,
}

/// Runs the console until interrupted; `Err` is the message to show.
pub fn run(args: ConsoleArgs) -> Result<(), String> {
    if args.hash_password {
        let mut password = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut password)
            .map_err(|e| format!("cannot read the password: {e}"))?;
        let password = password.trim_end_matches(['\r', '\n']);
        if password.is_empty() {
            return Err("no password on standard input".into());
        }
        let phc = tooltrust_console::hash_password(password).map_err(|e| e.to_string())?;
        println!("{phc}");
        return Ok(());
    }
    let access = match (&args.reviewer, &args.auth) {
        (Some(reviewer), None) => Access::Reviewer(reviewer.clone()),
        (None, Some(file)) => {
            Access::Credentials(Credentials::load(file).map_err(|e| e.to_string())?)
        }
        _ => {
            return Err(
                "name the person who decides with --reviewer NAME (loopback; the console prints the address that signs them in with its token), or give --auth FILE".into(),
            );
        }
    };
    let location = args
        .store
        .location()
        .map_err(|e| describe(&e))?
        .ok_or_else(|| describe(&crate::store::Error::NoStore))?;
    let kek = args.kek_file.as_deref().map(read_kek).transpose()?;
    let keys = reviewer_keys(&args)?;
    let reviewers = match args.store.reviewers().map_err(|e| describe(&e))? {
        Some(reviewers) => reviewers,
        // Without the hosts' file, the store records what these keys sign; every host
        // checks each signature against its own reviewers file before it runs anything.
        None => Reviewers::from_list(
            keys.iter()
                .map(|(id, key)| Reviewer {
                    id: id.clone(),
                    key: key.public(),
                    tenants: Tenants::All(AllTenants::All),
                })
                .collect(),
        )
        .map_err(|e| e.to_string())?,
    };
    let mut signing = ReviewerKeys::new();
    for (id, key) in keys {
        signing.insert(id, key);
    }
    let tls = match (args.tls_cert, args.tls_key) {
        (Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
        _ => None,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start the async runtime: {error}"))?;
    runtime.block_on(async {
        let options = StoreOptions {
            create: false,
            reviewers: std::sync::Arc::new(reviewers),
            ..StoreOptions::default()
        };
        let store = Store::open(&location, options)
            .await
            .map_err(|e| describe(&e))?;
        let config = Config {
            store,
            listen: args.listen,
            access,
            tls,
            decisions_per_minute: args.decisions_per_minute,
            kek,
            keys: signing,
        };
        let console = Console::bind(config).await.map_err(|e| describe(&e))?;
        let url = console.url().map_err(|e| e.to_string())?;
        // The token's file lives until the console stops (then it is removed).
        let _token_file = match (console.token(), &args.reviewer) {
            (Some(token), Some(reviewer)) => {
                let port = console.local_addr().map_err(|e| e.to_string())?.port();
                let dir = match args.token_dir {
                    Some(dir) => dir,
                    None => default_token_dir(&location),
                };
                let path = dir.join(format!("tooltrust-console-{port}.token"));
                let file = token.write_file(&path).map_err(|e| {
                    format!(
                        "cannot write the console's token to {}: {e} (choose another directory with --token-dir DIR)",
                        path.display()
                    )
                })?;
                let sign_in = console.sign_in_url().map_err(|e| e.to_string())?;
                eprintln!("tooltrust: the review console is at {url} (Ctrl-C stops it)");
                eprintln!(
                    "tooltrust: {reviewer} signs in at {sign_in} (the token is also in {}, readable by its owner only; without it the console serves nobody)",
                    path.display()
                );
                Some(file)
            }
            _ => {
                eprintln!("tooltrust: the review console is at {url} (Ctrl-C stops it)");
                None
            }
        };
        console
            .run(stopped())
            .await
            .map_err(|e| format!("the console stopped: {e}"))
    })
}

/// Where a console for one reviewer writes its token unless told: beside a SQLite
/// store (a directory its owner chose for the store's secrets); for PostgreSQL, the
/// user's runtime directory, or else the current directory.
fn default_token_dir(location: &Location) -> PathBuf {
    match location {
        Location::Sqlite(path) => match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => PathBuf::from("."),
        },
        Location::Postgres(_) => std::env::var_os("XDG_RUNTIME_DIR")
            .filter(|dir| !dir.is_empty())
            .map_or_else(|| PathBuf::from("."), PathBuf::from),
    }
}

/// Completes on Ctrl-C, or (on Unix) on SIGTERM, so that the console stops cleanly
/// (and removes its token's file) under a service manager too.
async fn stopped() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut terminate) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// The signing keys of the reviewers the console serves: --key for --reviewer, or each
/// `ID.key` of --keys.
fn reviewer_keys(args: &ConsoleArgs) -> Result<Vec<(Id, SecretKey)>, String> {
    let mut keys = Vec::new();
    if let (Some(path), Some(reviewer)) = (&args.key, &args.reviewer) {
        let key = SecretKey::read(path).map_err(|e| e.to_string())?;
        keys.push((reviewer.clone(), key));
    }
    if let Some(dir) = &args.keys {
        let entries = std::fs::read_dir(dir)
            .map_err(|e| format!("cannot read the keys directory {}: {e}", dir.display()))?;
        for entry in entries {
            let path = entry
                .map_err(|e| format!("cannot read the keys directory {}: {e}", dir.display()))?
                .path();
            let Some(stem) = path
                .file_name()
                .and_then(|name| name.to_str())
                .and_then(|name| name.strip_suffix(".key"))
            else {
                continue;
            };
            let id = Id::new(stem).map_err(|e| format!("{}: {e}", path.display()))?;
            let key = SecretKey::read(&path).map_err(|e| e.to_string())?;
            keys.push((id, key));
        }
    }
    Ok(keys)
}

fn read_kek(path: &Path) -> Result<Kek, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let text = std::str::from_utf8(&bytes).map(str::trim).unwrap_or("");
    let mut key = [0u8; 32];
    if bytes.len() == 32 && !(text.len() == 32 && text.bytes().all(|b| b.is_ascii_hexdigit())) {
        key.copy_from_slice(&bytes);
    } else if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        for (i, byte) in key.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16)
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
    } else {
        return Err(format!(
            "{}: a key-encryption key is 32 raw bytes or 64 hex characters",
            path.display()
        ));
    }
    Ok(Kek::from_bytes(key))
}
