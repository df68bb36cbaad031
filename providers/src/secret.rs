//! API keys: read from the environment or handed over by the host, sent only in a
//! header marked sensitive, never shown.

use zeroize::Zeroizing;

use crate::error::ConfigError;

/// A provider's API key. Its `Debug` shows `ApiKey([redacted])`; it has no `Display`;
/// its memory is zeroed when it is dropped.
#[derive(Clone)]
pub struct ApiKey(Zeroizing<String>);

impl ApiKey {
    /// A key the host holds (from its secret store, say).
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(Zeroizing::new(key.into()))
    }

    /// The key in the environment variable `var` (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`).
    /// Unset or empty is [`ConfigError::MissingKey`].
    pub fn from_env(var: &str) -> Result<Self, ConfigError> {
        match std::env::var(var) {
            Ok(key) if !key.is_empty() => Ok(ApiKey::new(key)),
            Ok(_) | Err(std::env::VarError::NotPresent) => Err(ConfigError::MissingKey {
                var: var.to_owned(),
            }),
            Err(std::env::VarError::NotUnicode(_)) => Err(ConfigError::NotUnicode {
                var: var.to_owned(),
            }),
        }
    }

    /// The key itself, for the header that carries it.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    /// The header value carrying `prefix` and the key, marked sensitive so that the HTTP
    /// stack never logs it.
    pub(crate) fn header(&self, prefix: &str) -> Result<reqwest::header::HeaderValue, ConfigError> {
        let value = Zeroizing::new(format!("{prefix}{}", self.expose()));
        let mut value =
            reqwest::header::HeaderValue::from_str(&value).map_err(|_| ConfigError::KeyHeader)?;
        value.set_sensitive(true);
        Ok(value)
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}
