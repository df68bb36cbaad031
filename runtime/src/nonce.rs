//! Nonces that key envelope closers.
//!
//! Sealed mode (the default) derives each nonce as
//! `hex(first 16 bytes of HMAC-SHA256(session_key, "tooltrust/v1" ‖ 0 ‖ tier ‖ 0 ‖ identity))`:
//! stable for the same record within a session, unguessable without the key, different
//! across sessions, tiers and calls. Compat mode uses the reference's public nonces (the
//! call's checksum, the caller's id) for byte-identical interop.

use std::fmt;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use zeroize::Zeroizing;

use crate::hex::{self, Case};
use crate::random::{self, RandomError};

/// Domain separation of every derived nonce.
const DOMAIN: &[u8] = b"tooltrust/v1";

/// How many bytes of the MAC a nonce keeps (128 bits).
const NONCE_BYTES: usize = 16;

/// A per-session secret from the OS CSPRNG. It never appears in a prompt, a log or the
/// audit log; `Debug` prints nothing of it.
#[derive(Clone)]
pub struct SessionKey {
    bytes: Zeroizing<[u8; 32]>,
    /// The key's HMAC state after absorbing the key, so each nonce costs only the
    /// message's compressions.
    mac: Hmac<Sha256>,
}

/// Why a session key could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The OS random number generator failed.
    #[error(transparent)]
    Random(#[from] RandomError),
    /// The key text is not 32 raw bytes or 64 hex characters.
    #[error("a session key is 32 raw bytes or 64 hex characters")]
    Format,
}

impl SessionKey {
    /// A fresh key from the OS CSPRNG.
    pub fn generate() -> Result<Self, KeyError> {
        let mut bytes = Zeroizing::new([0u8; 32]);
        random::fill(bytes.as_mut())?;
        Ok(Self::from_bytes(*bytes))
    }

    /// A key from 32 bytes the host keeps (to render the same nonces across processes).
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        let bytes = Zeroizing::new(bytes);
        // HMAC accepts keys of any length, so this cannot fail.
        let mac = <Hmac<Sha256> as KeyInit>::new_from_slice(bytes.as_ref())
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        SessionKey { bytes, mac }
    }

    /// A key from a file's contents: 32 raw bytes, or 64 hex characters (surrounding
    /// whitespace ignored).
    pub fn from_file_contents(contents: &[u8]) -> Result<Self, KeyError> {
        if let Ok(raw) = <[u8; 32]>::try_from(contents) {
            return Ok(Self::from_bytes(raw));
        }
        let text = std::str::from_utf8(contents)
            .map_err(|_| KeyError::Format)?
            .trim();
        let mut bytes = Zeroizing::new([0u8; 32]);
        if !hex::decode(text, bytes.as_mut(), Case::Either) {
            return Err(KeyError::Format);
        }
        Ok(Self::from_bytes(*bytes))
    }

    /// The nonce of `identity` in `tier`: 32 lowercase hex characters. Each identity part
    /// is length-prefixed, so no two different identities share an input.
    pub fn nonce(&self, tier: &str, identity: &[&str]) -> String {
        let tag = self.mac_of(tier, identity).finalize().into_bytes();
        hex::encode(&tag[..NONCE_BYTES])
    }

    /// Whether `nonce` is the nonce of `identity` in `tier`, compared in constant time
    /// (the MAC crate's own truncated verification), so a forger learns nothing from
    /// how long a wrong guess took to refuse.
    pub fn verify(&self, tier: &str, identity: &[&str], nonce: &str) -> bool {
        let mut tag = [0u8; NONCE_BYTES];
        hex::decode(nonce, &mut tag, Case::Lower)
            && self
                .mac_of(tier, identity)
                .verify_truncated_left(&tag)
                .is_ok()
    }

    /// A full-length MAC (64 lowercase hex characters) of `message` in `tier`: what a host
    /// persists and later acts on (a saved conversation) is authenticated under the key.
    pub fn authenticate(&self, tier: &str, message: &str) -> String {
        hex::encode(&self.mac_of(tier, &[message]).finalize().into_bytes())
    }

    /// Whether `tag` is [`authenticate`](Self::authenticate)'s MAC of `message` in
    /// `tier`, compared in constant time.
    pub fn verify_authenticated(&self, tier: &str, message: &str, tag: &str) -> bool {
        let mut bytes = [0u8; 32];
        hex::decode(tag, &mut bytes, Case::Lower)
            && self.mac_of(tier, &[message]).verify_slice(&bytes).is_ok()
    }

    fn mac_of(&self, tier: &str, identity: &[&str]) -> Hmac<Sha256> {
        let mut mac = self.mac.clone();
        mac.update(DOMAIN);
        mac.update(&[0]);
        mac.update(tier.as_bytes());
        mac.update(&[0]);
        for part in identity {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part.as_bytes());
        }
        mac
    }

    /// The raw key, for a host that persists it; never put it in a prompt or a log.
    pub fn expose_bytes(&self) -> &[u8; 32] {
        &self.bytes
    }
}

impl fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SessionKey(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keyed MAC state (SHA-256 states that absorbed the key's inner and outer
    /// pads) is as secret as the key: it must be wiped with it, not left in freed
    /// memory. `Hmac` holds two of these states; sha2's `zeroize` feature wipes them.
    #[test]
    fn the_keyed_mac_state_is_wiped_on_drop() {
        fn wiped_on_drop<T: zeroize::ZeroizeOnDrop>() {}
        wiped_on_drop::<<Sha256 as hmac::digest::block_api::CoreProxy>::Core>();
        wiped_on_drop::<Zeroizing<[u8; 32]>>();
    }

    #[test]
    fn nonces_are_stable_and_separated() {
        let key = SessionKey::from_bytes([7; 32]);
        let a = key.nonce("tool-result", &["call_1", "abc"]);
        assert_eq!(a.len(), 32);
        assert!(
            a.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert_eq!(a, key.nonce("tool-result", &["call_1", "abc"]));
        assert_ne!(a, key.nonce("trusted-tool-result", &["call_1", "abc"]));
        assert_ne!(a, key.nonce("tool-result", &["call_2", "abc"]));
        assert_ne!(a, key.nonce("tool-result", &["call_1a", "bc"]));
        assert_ne!(
            a,
            SessionKey::from_bytes([8; 32]).nonce("tool-result", &["call_1", "abc"])
        );
    }

    #[test]
    fn the_nonce_is_the_specified_hmac() {
        let key = SessionKey::from_bytes([1; 32]);
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&[1; 32]).unwrap();
        mac.update(b"tooltrust/v1\0message\0");
        mac.update(&3u64.to_be_bytes());
        mac.update(b"m-1");
        let expected = hex::encode(&mac.finalize().into_bytes()[..16]);
        assert_eq!(key.nonce("message", &["m-1"]), expected);
        assert!(key.verify("message", &["m-1"], &expected));
        assert!(!key.verify("message", &["m-2"], &expected));
        assert!(!key.verify("message", &["m-1"], &expected.to_uppercase()));
        assert!(!key.verify("message", &["m-1"], &expected[..30]));
    }

    #[test]
    fn keys_load_from_raw_or_hex_and_never_print() {
        let raw = [0xabu8; 32];
        let hex_text = format!("{}\n", "ab".repeat(32));
        let a = SessionKey::from_file_contents(&raw).unwrap();
        let b = SessionKey::from_file_contents(hex_text.as_bytes()).unwrap();
        assert_eq!(a.nonce("t", &["x"]), b.nonce("t", &["x"]));
        assert_eq!(
            SessionKey::from_file_contents(b"short").err(),
            Some(KeyError::Format)
        );
        assert_eq!(
            SessionKey::from_file_contents("zz".repeat(32).as_bytes()).err(),
            Some(KeyError::Format)
        );
        assert!(!format!("{a:?}").contains("ab"));
        let fresh = SessionKey::generate().unwrap();
        assert_ne!(
            fresh.expose_bytes(),
            SessionKey::generate().unwrap().expose_bytes()
        );
    }
}
