//! Ed25519 keys and signatures: who may approve a held call, and who wrote an audit
//! chain, is a matter of holding a private key, never of being able to write a row.
//!
//! A [`SecretKey`] signs; its [`PublicKey`] verifies. Every signature is over a message
//! that starts with a domain (`tooltrust/decision/v1`, `tooltrust/chain/v1`) and a zero
//! byte, so a signature made for one purpose never verifies for another.
//!
//! Text forms: a public key is `ed25519:` and 64 lowercase hex digits; a secret key file
//! holds `tooltrust-ed25519-secret-key:` and the 64 hex digits of its seed, and is
//! written readable by its owner only.

use std::fmt;
use std::io::Write;
use std::path::Path;
use std::str::FromStr;

use ed25519_dalek::Signer;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use zeroize::Zeroizing;

use crate::hex;

const PUBLIC_PREFIX: &str = "ed25519:";
const SECRET_PREFIX: &str = "tooltrust-ed25519-secret-key:";

/// What a key or signature could not be read or made from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The text is not a public key.
    #[error("not a public key: expected `ed25519:` and 64 hex digits")]
    BadPublicKey,
    /// The bytes are not a point of the curve.
    #[error("not a valid Ed25519 public key")]
    InvalidPublicKey,
    /// The text is not a secret key file's content.
    #[error("not a secret key: expected `tooltrust-ed25519-secret-key:` and 64 hex digits")]
    BadSecretKey,
    /// The text is not a signature.
    #[error("not a signature: expected 128 hex digits")]
    BadSignature,
    /// The key file could not be read or written.
    #[error("key file {path}: {reason}")]
    File {
        /// The file.
        path: String,
        /// What failed.
        reason: String,
    },
    /// The key file can be read by others than its owner.
    #[error(
        "key file {path} has mode {mode:o}: a secret key must be readable by its owner only (chmod 600 it)"
    )]
    NotPrivate {
        /// The file.
        path: String,
        /// Its permission bits.
        mode: u32,
    },
    /// The operating system's random number generator failed.
    #[error(transparent)]
    Random(#[from] crate::random::RandomError),
}

/// An Ed25519 public key: verifies what its [`SecretKey`] signed.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PublicKey(ed25519_dalek::VerifyingKey);

impl PublicKey {
    /// The key's 32 bytes.
    pub fn to_bytes(&self) -> [u8; 32] {
        self.0.to_bytes()
    }

    /// Whether `signature` is this key's signature of `message` in `domain`.
    pub fn verifies(&self, domain: &str, message: &[u8], signature: &Signature) -> bool {
        self.0
            .verify_strict(&framed(domain, message), &signature.0)
            .is_ok()
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PUBLIC_PREFIX}{}", hex::encode(&self.to_bytes()))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({self})")
    }
}

impl FromStr for PublicKey {
    type Err = KeyError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let digits = text
            .trim()
            .strip_prefix(PUBLIC_PREFIX)
            .ok_or(KeyError::BadPublicKey)?;
        let mut bytes = [0u8; 32];
        if !hex::decode(digits, &mut bytes, hex::Case::Lower) {
            return Err(KeyError::BadPublicKey);
        }
        ed25519_dalek::VerifyingKey::from_bytes(&bytes)
            .ok()
            // A small-order point verifies forgeries: never a key.
            .filter(|key| !key.is_weak())
            .map(PublicKey)
            .ok_or(KeyError::InvalidPublicKey)
    }
}

impl Serialize for PublicKey {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PublicKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// An Ed25519 secret key. It signs; it is never written anywhere but its own file, and
/// its bytes are wiped when it is dropped.
pub struct SecretKey(ed25519_dalek::SigningKey);

impl SecretKey {
    /// A fresh key from the OS CSPRNG.
    pub fn generate() -> Result<SecretKey, KeyError> {
        let seed = Zeroizing::new(crate::random::bytes::<32>()?);
        Ok(SecretKey(ed25519_dalek::SigningKey::from_bytes(&seed)))
    }

    /// The key whose seed is `seed` (for tests and key files).
    pub fn from_seed(seed: [u8; 32]) -> SecretKey {
        let seed = Zeroizing::new(seed);
        SecretKey(ed25519_dalek::SigningKey::from_bytes(&seed))
    }

    /// Its public key.
    pub fn public(&self) -> PublicKey {
        PublicKey(self.0.verifying_key())
    }

    /// Signs `message` in `domain`.
    pub fn sign(&self, domain: &str, message: &[u8]) -> Signature {
        Signature(self.0.sign(&framed(domain, message)))
    }

    /// Reads a key file; refuses one that others than its owner can read.
    pub fn read(path: impl AsRef<Path>) -> Result<SecretKey, KeyError> {
        let path = path.as_ref();
        let file_error = |error: std::io::Error| KeyError::File {
            path: path.display().to_string(),
            reason: error.to_string(),
        };
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(path)
                .map_err(file_error)?
                .permissions()
                .mode();
            if mode & 0o077 != 0 {
                return Err(KeyError::NotPrivate {
                    path: path.display().to_string(),
                    mode: mode & 0o777,
                });
            }
        }
        let text = Zeroizing::new(std::fs::read_to_string(path).map_err(file_error)?);
        text.parse()
    }

    /// Writes the key to a new file `path`, readable by its owner only; an existing file
    /// is never overwritten.
    pub fn write_new(&self, path: impl AsRef<Path>) -> Result<(), KeyError> {
        let path = path.as_ref();
        let file_error = |error: std::io::Error| KeyError::File {
            path: path.display().to_string(),
            reason: error.to_string(),
        };
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        let mut file = crate::atomic_write::owner_only(&mut options)
            .open(path)
            .map_err(file_error)?;
        let text = Zeroizing::new(format!(
            "{SECRET_PREFIX}{}\n",
            hex::encode(self.0.as_bytes())
        ));
        file.write_all(text.as_bytes()).map_err(file_error)?;
        file.sync_all().map_err(file_error)
    }
}

impl FromStr for SecretKey {
    type Err = KeyError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let digits = text
            .trim()
            .strip_prefix(SECRET_PREFIX)
            .ok_or(KeyError::BadSecretKey)?;
        let mut seed = Zeroizing::new([0u8; 32]);
        if !hex::decode(digits, seed.as_mut(), hex::Case::Either) {
            return Err(KeyError::BadSecretKey);
        }
        Ok(SecretKey::from_seed(*seed))
    }
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretKey(public {})", self.public())
    }
}

/// An Ed25519 signature; its text is 128 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Signature(ed25519_dalek::Signature);

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(&self.0.to_bytes()))
    }
}

impl fmt::Debug for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Signature({self})")
    }
}

impl FromStr for Signature {
    type Err = KeyError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut bytes = [0u8; 64];
        if !hex::decode(text, &mut bytes, hex::Case::Lower) {
            return Err(KeyError::BadSignature);
        }
        Ok(Signature(ed25519_dalek::Signature::from_bytes(&bytes)))
    }
}

impl Serialize for Signature {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Signature {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// `domain ‖ 0 ‖ message`.
fn framed(domain: &str, message: &[u8]) -> Vec<u8> {
    let mut framed = Vec::with_capacity(domain.len() + 1 + message.len());
    framed.extend_from_slice(domain.as_bytes());
    framed.push(0);
    framed.extend_from_slice(message);
    framed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_only_its_message_in_its_domain() {
        let key = SecretKey::from_seed([7; 32]);
        let signature = key.sign("a", b"message");
        assert!(key.public().verifies("a", b"message", &signature));
        assert!(!key.public().verifies("b", b"message", &signature));
        assert!(!key.public().verifies("a", b"messagf", &signature));
        let other = SecretKey::from_seed([8; 32]);
        assert!(!other.public().verifies("a", b"message", &signature));
    }

    #[test]
    fn keys_and_signatures_read_back_from_their_text() {
        let key = SecretKey::from_seed([9; 32]);
        let public: PublicKey = key.public().to_string().parse().unwrap();
        assert_eq!(public, key.public());
        let signature = key.sign("d", b"m");
        assert_eq!(signature.to_string().parse::<Signature>(), Ok(signature));
        for bad in [
            "",
            "ed25519:",
            "ed25519:zz",
            "x25519:00",
            &"ed25519:0".repeat(2),
        ] {
            assert!(bad.parse::<PublicKey>().is_err(), "{bad}");
        }
        // The identity point is of small order: it would verify forged signatures.
        let identity = format!("ed25519:01{}", "0".repeat(62));
        assert_eq!(
            identity.parse::<PublicKey>(),
            Err(KeyError::InvalidPublicKey)
        );
        assert!("00".parse::<Signature>().is_err());
    }

    #[test]
    fn key_files_are_private_and_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ann.key");
        let key = SecretKey::generate().unwrap();
        key.write_new(&path).unwrap();
        assert_eq!(SecretKey::read(&path).unwrap().public(), key.public());
        assert!(matches!(
            SecretKey::generate().unwrap().write_new(&path),
            Err(KeyError::File { .. })
        ));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            assert!(matches!(
                SecretKey::read(&path),
                Err(KeyError::NotPrivate { mode: 0o644, .. })
            ));
        }
    }
}
