//! CSRF tokens: an HMAC of the viewer's credential binding under a key drawn when the
//! console starts, so a token is good only for that viewer of that process.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The key behind every token of one console process.
pub(crate) struct CsrfKey([u8; 32]);

impl CsrfKey {
    /// A fresh key from the OS.
    pub(crate) fn generate() -> Result<CsrfKey, getrandom::Error> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key)?;
        Ok(CsrfKey(key))
    }

    fn mac(&self, binding: &str) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        mac.update(b"tooltrust/console/csrf/v1\0");
        mac.update(binding.as_bytes());
        mac
    }

    /// The token for `binding` (what identifies the viewer's credential).
    pub(crate) fn token(&self, binding: &str) -> String {
        tooltrust_hex(&self.mac(binding).finalize().into_bytes())
    }

    /// Whether `token` is the one for `binding` (compared in constant time).
    pub(crate) fn check(&self, binding: &str, token: &str) -> bool {
        let Some(bytes) = unhex(token) else {
            return false;
        };
        self.mac(binding).verify_slice(&bytes).is_ok()
    }
}

fn tooltrust_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() != 64 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

/// 32 random bytes as hex (session ids).
pub(crate) fn random_hex() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(tooltrust_hex(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_holds_only_for_its_binding_and_key() {
        let key = CsrfKey::generate().unwrap();
        let token = key.token("reviewer:alice");
        assert!(key.check("reviewer:alice", &token));
        assert!(!key.check("reviewer:bob", &token));
        assert!(!key.check("reviewer:alice", ""));
        assert!(!key.check("reviewer:alice", &token[..62]));
        // Not hex, and one digit changed (whatever digits the token drew).
        assert!(!key.check("reviewer:alice", &format!("g{}", &token[1..])));
        let first = if token.starts_with('0') { '1' } else { '0' };
        assert!(!key.check("reviewer:alice", &format!("{first}{}", &token[1..])));
        let other = CsrfKey::generate().unwrap();
        assert!(!other.check("reviewer:alice", &token));
    }
}
