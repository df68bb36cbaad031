//! tooltrust-console: the review console of tooltrust, a small web application over
//! the store of [`tooltrust_store`] where a person sees every held call, why it was
//! held and the context that led to it, and approves or rejects it.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use tooltrust_console::{Config, Console};
//! let store = tooltrust_store::Store::open_sqlite("store.db").await?;
//! let console = Console::bind(Config::loopback(store, tooltrust::Id::new("alice")?)).await?;
//! // The address holds the token that signs alice in: show it to her alone.
//! eprintln!("open {}", console.sign_in_url()?);
//! console.run(async { let _ = tokio::signal::ctrl_c().await; }).await?;
//! # Ok(()) }
//! ```
//!
//! # Security
//!
//! - Every request proves its reviewer; the address it comes from proves nothing (any
//!   local user can connect to the loopback interface). On loopback one reviewer may be
//!   named at start-up ([`Access::Reviewer`]): the console draws a random token for them
//!   ([`Console::token`], 256 bits from the OS), which a request carries as a bearer
//!   token or exchanges once for a session cookie ([`Console::sign_in_url`]); compared
//!   in constant time. A loopback console answers only to its own host names (a
//!   rebound DNS name is refused). Any other address needs [`Access::Credentials`] (a
//!   bearer token or an argon2 password hash per reviewer) and TLS, or
//!   [`Console::bind`] refuses to start. The reviewer's identity comes from the
//!   authentication only.
//! - A reviewer limited to some tenants sees only theirs: their queue, its paging
//!   cursor (another tenant's call id pages as an unknown one does), the calls they
//!   open, and the live updates' mark.
//! - Decisions are plain HTML form posts; each carries a CSRF token bound to the
//!   viewer, and a post from another origin is refused. Decisions are rate-limited per
//!   reviewer and recorded in the tenant's audit chain with the reviewer's id.
//! - Every response carries a Content-Security-Policy that allows scripts only from the
//!   console's own embedded file; every value from the store is HTML-escaped by the
//!   templates. JavaScript only adds live updates: every page works without it.
//! - Quarantined outputs are decrypted only on an explicit request, recorded in the
//!   chain before the plaintext is shown, and only by a console given the KEK.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod access;
mod app;
mod context;
mod csrf;
mod error;
mod guard;
mod keys;
mod limits;
mod pages;
mod routes;
mod serve;
mod sessions;
mod token;
mod viewer;

pub use access::{
    Access, Credentials, CredentialsError, HashError, MIN_TOKEN_CHARS, hash_password,
};
pub use guard::CSP;
pub use keys::ReviewerKeys;
pub use serve::{
    Config, Console, DEFAULT_DECISIONS_PER_MINUTE, DEFAULT_LISTEN, StartError, TlsFiles,
};
pub use token::{Token, TokenFile};
