//! Where a store lives: a SQLite file or a PostgreSQL URL, as flags and
//! `TOOLTRUST_STORE` name them.

use std::fmt;
use std::path::PathBuf;

/// The environment variable that names the store when no flag does: `sqlite:PATH` or a
/// `postgres://` URL.
pub const STORE_ENV: &str = "TOOLTRUST_STORE";

/// Where a store lives.
#[derive(Clone, PartialEq, Eq)]
pub enum Location {
    /// A SQLite database file (embedded, zero setup).
    Sqlite(PathBuf),
    /// A PostgreSQL connection URL (`postgres://` or `postgresql://`).
    Postgres(String),
}

/// Why a text does not name a store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocationError {
    /// The text is neither `sqlite:PATH` nor a `postgres://` URL.
    #[error("{0:?} does not name a store: use sqlite:PATH or postgres://USER@HOST:PORT/DATABASE")]
    Unrecognised(String),
    /// `sqlite:` with no path.
    #[error("sqlite: needs a file path (sqlite:PATH)")]
    EmptyPath,
    /// `TOOLTRUST_STORE` is set but not valid Unicode.
    #[error("{STORE_ENV} is not valid Unicode")]
    NotUnicode,
}

impl Location {
    /// Parses `sqlite:PATH` (also `sqlite://PATH`) or a `postgres://` / `postgresql://`
    /// URL.
    ///
    /// ```
    /// use tooltrust_store::Location;
    /// assert_eq!(Location::parse("sqlite:/var/lib/agent/store.db")?,
    ///            Location::Sqlite("/var/lib/agent/store.db".into()));
    /// assert!(matches!(Location::parse("postgres://postgres@127.0.0.1:5432/test")?,
    ///                  Location::Postgres(_)));
    /// assert!(Location::parse("mysql://x").is_err());
    /// # Ok::<(), tooltrust_store::LocationError>(())
    /// ```
    pub fn parse(text: &str) -> Result<Location, LocationError> {
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            return Ok(Location::Postgres(text.to_owned()));
        }
        let Some(rest) = text.strip_prefix("sqlite:") else {
            return Err(LocationError::Unrecognised(redact(text)));
        };
        let path = rest.strip_prefix("//").unwrap_or(rest);
        if path.is_empty() {
            return Err(LocationError::EmptyPath);
        }
        Ok(Location::Sqlite(PathBuf::from(path)))
    }

    /// The location `TOOLTRUST_STORE` names, if it is set.
    pub fn from_env() -> Result<Option<Location>, LocationError> {
        match std::env::var(STORE_ENV) {
            Ok(text) => Location::parse(&text).map(Some),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => Err(LocationError::NotUnicode),
        }
    }
}

/// Shows the location without any password a URL holds.
impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Sqlite(path) => write!(f, "sqlite:{}", path.display()),
            Location::Postgres(url) => f.write_str(&redact(url)),
        }
    }
}

impl fmt::Debug for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Sqlite(path) => f.debug_tuple("Sqlite").field(path).finish(),
            Location::Postgres(url) => f.debug_tuple("Postgres").field(&redact(url)).finish(),
        }
    }
}

/// `scheme://user:secret@host…` → `scheme://user:***@host…`; the query string (which
/// may hold `password=`) is dropped.
fn redact(url: &str) -> String {
    let url = url.split('?').next().unwrap_or(url);
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let Some((userinfo, host)) = rest.rsplit_once('@') else {
        return url.to_owned();
    };
    match userinfo.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse_and_passwords_never_show() {
        assert_eq!(
            Location::parse("sqlite://rel/a.db").unwrap(),
            Location::Sqlite("rel/a.db".into())
        );
        assert_eq!(Location::parse("sqlite:"), Err(LocationError::EmptyPath));
        assert!(matches!(
            Location::parse("/tmp/a.db"),
            Err(LocationError::Unrecognised(_))
        ));
        let url = "postgres://ann:s3cret@db:5432/x?password=other";
        let location = Location::parse(url).unwrap();
        assert_eq!(location, Location::Postgres(url.to_owned()));
        for shown in [location.to_string(), format!("{location:?}")] {
            assert!(
                !shown.contains("s3cret") && !shown.contains("other"),
                "{shown}"
            );
            assert!(shown.contains("ann:***@db:5432/x"), "{shown}");
        }
        let Err(LocationError::Unrecognised(shown)) = Location::parse("mysql://u:pw@h/db") else {
            panic!("mysql is not a store");
        };
        assert!(!shown.contains("pw@"), "{shown}");
    }
}
