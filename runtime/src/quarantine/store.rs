//! Quarantined output encrypted at rest: one file per (output, reader), each under its
//! own data key, wrapped by a key-encryption key that the host supplies and that is
//! never written anywhere.

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{PoisonError, RwLock};

use chacha20poly1305::aead::{Aead, Payload};
use chacha20poly1305::{Key, KeyInit, XChaCha20Poly1305, XNonce};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use zeroize::{Zeroize, Zeroizing};

use super::{Grant, QuarantineError, QuarantineStore, check_grant};
use crate::atomic_write::write_atomically;
use crate::event::{Event, Recorder};
use crate::id::Id;
use crate::random;

/// A key-encryption key: 32 bytes the host keeps (in a secret manager, a KMS, an
/// environment variable), never stored beside the data. Zeroized on drop; `Debug`
/// prints nothing of it.
pub struct Kek([u8; 32]);

impl Kek {
    /// A KEK from the host's 32 bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Kek(bytes)
    }

    /// A fresh KEK from the OS CSPRNG (the host must keep it to read the store later).
    pub fn generate() -> Result<Self, QuarantineError> {
        Ok(Kek(random::bytes()?))
    }

    /// A public fingerprint, stored in each file to tell "wrapped under another KEK"
    /// from tampering: the first 8 bytes of HMAC-SHA256(kek, a fixed label), which
    /// reveals nothing of the key.
    fn id(&self) -> [u8; KEK_ID_LEN] {
        let mut mac = <Hmac<Sha256> as hmac::KeyInit>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        mac.update(b"tooltrust/quarantine/kek-id/v1");
        let digest = mac.finalize().into_bytes();
        let mut id = [0u8; KEK_ID_LEN];
        id.copy_from_slice(&digest[..KEK_ID_LEN]);
        id
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new(<&Key>::from(&self.0))
    }
}

impl Drop for Kek {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl fmt::Debug for Kek {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Kek(<redacted>)")
    }
}

const MAGIC: &[u8; 4] = b"TTQ1";
const KEK_ID_LEN: usize = 8;
const NONCE_LEN: usize = 24;
const TAG_LEN: usize = 16;
const WRAPPED_KEY_LEN: usize = 32 + TAG_LEN;
const FILE_SUFFIX: &str = ".sealed";

/// Quarantined output encrypted at rest with XChaCha20-Poly1305, in a directory the
/// host chooses: `DIR/<output key>/<reader>.sealed`.
///
/// Every copy has a fresh random data key, wrapped by the [`Kek`]. The associated data
/// of both the wrapped key and the ciphertext binds the output key, the target scope
/// and the reader, so a copy moved to another reader's (or output's) place does not
/// open. A file holds only public ids, a KEK fingerprint, nonces and ciphertext.
///
/// Decryption needs a [`Grant`], which only the crate mints (for the custodian copying
/// for a review, for an assigned reviewer, or after promotion); the
/// [`Session`](crate::session::Session) records every decryption as a
/// `decryption_granted` event.
pub struct EncryptedStore {
    dir: PathBuf,
    kek: RwLock<Kek>,
    /// Whether each copy is synced before `put` returns.
    durable: bool,
}

impl EncryptedStore {
    /// A store in `dir` (created if missing) under `kek`.
    pub fn new(dir: impl AsRef<Path>, kek: Kek) -> Result<Self, QuarantineError> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).map_err(|e| storage("create the store directory", &dir, e))?;
        Ok(EncryptedStore {
            dir,
            kek: RwLock::new(kek),
            durable: true,
        })
    }

    /// Like [`new`](Self::new), writing each copy without syncing it: for a store whose
    /// `kek` lives only as long as the process (a proxy's forgotten results), where a
    /// crash loses nothing anyone could still open.
    pub fn scratch(dir: impl AsRef<Path>, kek: Kek) -> Result<Self, QuarantineError> {
        Ok(EncryptedStore {
            durable: false,
            ..Self::new(dir, kek)?
        })
    }

    /// The directory holding the store.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Rewraps every data key under `new` (the ciphertexts stay as they are), makes
    /// `new` the store's KEK, and records a `key_rotation` event with the count.
    ///
    /// Each file is replaced atomically. If rotation stops part-way (an I/O error, a
    /// crash), call it again with the same new KEK on a store opened with the old one:
    /// files already under the new KEK are skipped.
    pub fn rotate_kek(&self, new: Kek, recorder: &dyn Recorder) -> Result<u64, QuarantineError> {
        let mut kek = self.kek.write().unwrap_or_else(PoisonError::into_inner);
        let (old_id, new_id) = (kek.id(), new.id());
        let mut rewrapped = 0;
        for path in self.files()? {
            let bytes = fs::read(&path).map_err(|e| storage("read", &path, e))?;
            let (key, reader) = names_of(&path)?;
            let mut sealed = Sealed::parse(&bytes, &key, &reader)?;
            if sealed.kek_id == new_id {
                continue;
            }
            if sealed.kek_id != old_id {
                return Err(QuarantineError::WrongKek { key, reader });
            }
            let target = sealed.target.clone();
            let data_key = unwrap_key(&kek, &sealed, &key, &target, &reader)?;
            let (nonce, wrapped) = wrap_key(&new, &data_key, &key, &target, &reader)?;
            sealed.kek_id = new_id;
            sealed.wrap_nonce = nonce;
            sealed.wrapped_key = wrapped;
            write_copy(&path, &sealed.to_bytes())?;
            rewrapped += 1;
        }
        *kek = new;
        drop(kek);
        recorder.record(&Event::KeyRotation { rewrapped })?;
        Ok(rewrapped)
    }

    fn path_of(&self, key: &Id, reader: &Id) -> PathBuf {
        self.dir
            .join(key.as_str())
            .join(format!("{reader}{FILE_SUFFIX}"))
    }

    /// Every stored copy.
    fn files(&self) -> Result<Vec<PathBuf>, QuarantineError> {
        let mut files = Vec::new();
        let list = |dir: &Path| fs::read_dir(dir).map_err(|e| storage("list", dir, e));
        for output in list(&self.dir)? {
            let output = output.map_err(|e| storage("list", &self.dir, e))?.path();
            if !output.is_dir() {
                continue;
            }
            for copy in list(&output)? {
                let copy = copy.map_err(|e| storage("list", &output, e))?.path();
                if copy
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.ends_with(FILE_SUFFIX) && !n.starts_with('.'))
                {
                    files.push(copy);
                }
            }
        }
        files.sort();
        Ok(files)
    }

    /// The data key of one copy (for tests that look for it on disk).
    #[cfg(test)]
    pub(crate) fn data_key(
        &self,
        key: &Id,
        target: &Id,
        reader: &Id,
    ) -> Result<Zeroizing<[u8; 32]>, QuarantineError> {
        let path = self.path_of(key, reader);
        let bytes = fs::read(&path).map_err(|e| storage("read", &path, e))?;
        let sealed = Sealed::parse(&bytes, key, reader)?;
        let kek = self.kek.read().unwrap_or_else(PoisonError::into_inner);
        unwrap_key(&kek, &sealed, key, target, reader)
    }
}

impl QuarantineStore for EncryptedStore {
    fn put(&self, key: &Id, target: &Id, reader: &Id, bytes: &[u8]) -> Result<(), QuarantineError> {
        let kek = self.kek.read().unwrap_or_else(PoisonError::into_inner);
        let sealed = seal(&kek, bytes, key, target, reader)?;
        drop(kek);
        let path = self.path_of(key, reader);
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(|e| storage("create", dir, e))?;
        }
        if self.durable {
            write_copy(&path, &sealed)
        } else {
            fs::write(&path, &sealed).map_err(|e| storage("write", &path, e))
        }
    }

    fn open(
        &self,
        key: &Id,
        target: &Id,
        reader: &Id,
        grant: &Grant,
    ) -> Result<Vec<u8>, QuarantineError> {
        check_grant(key, reader, grant)?;
        let path = self.path_of(key, reader);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                return Err(QuarantineError::NotFound {
                    key: key.clone(),
                    reader: reader.clone(),
                });
            }
            Err(error) => return Err(storage("read", &path, error)),
        };
        let kek = self.kek.read().unwrap_or_else(PoisonError::into_inner);
        open_sealed(&kek, &bytes, key, target, reader)
    }
}

/// Seals `bytes` of output `key` (produced by scope `target`) for `reader` under `kek`:
/// the bytes [`EncryptedStore`] writes to a file, and a database store keeps in a row.
pub fn seal(
    kek: &Kek,
    bytes: &[u8],
    key: &Id,
    target: &Id,
    reader: &Id,
) -> Result<Vec<u8>, QuarantineError> {
    let mut data_key = Zeroizing::new([0u8; 32]);
    random::fill(data_key.as_mut())?;
    let data_nonce = random::bytes::<NONCE_LEN>()?;
    let ciphertext = XChaCha20Poly1305::new(<&Key>::from(&*data_key))
        .encrypt(
            &XNonce::from(data_nonce),
            Payload {
                msg: bytes,
                aad: &associated_data(Purpose::Output, key, target, reader),
            },
        )
        .map_err(QuarantineError::Encrypt)?;
    let (wrap_nonce, wrapped_key) = wrap_key(kek, &data_key, key, target, reader)?;
    Ok(Sealed {
        kek_id: kek.id(),
        target: target.clone(),
        wrap_nonce,
        wrapped_key,
        data_nonce,
        ciphertext,
    }
    .to_bytes())
}

/// Opens a copy [`seal`] made, under `kek`: the plaintext, or why not (another KEK, or
/// bytes changed or moved from another output, target or reader).
///
/// This is decryption without a session's [`Grant`]: for a host that holds the KEK
/// itself, such as a review console decrypting for a person, which must record the
/// decryption in the audit chain before it shows anything.
pub fn open_sealed(
    kek: &Kek,
    bytes: &[u8],
    key: &Id,
    target: &Id,
    reader: &Id,
) -> Result<Vec<u8>, QuarantineError> {
    let sealed = Sealed::parse(bytes, key, reader)?;
    if sealed.target != *target {
        return Err(tampered(key, reader));
    }
    if sealed.kek_id != kek.id() {
        return Err(QuarantineError::WrongKek {
            key: key.clone(),
            reader: reader.clone(),
        });
    }
    let data_key = unwrap_key(kek, &sealed, key, target, reader)?;
    XChaCha20Poly1305::new(<&Key>::from(&*data_key))
        .decrypt(
            &XNonce::from(sealed.data_nonce),
            Payload {
                msg: &sealed.ciphertext,
                aad: &associated_data(Purpose::Output, key, target, reader),
            },
        )
        .map_err(|_| tampered(key, reader))
}

impl fmt::Debug for EncryptedStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EncryptedStore")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// One stored copy: `MAGIC ‖ kek id ‖ len(target) ‖ target ‖ wrap nonce ‖ wrapped data
/// key ‖ data nonce ‖ ciphertext`. The output key and reader are the file's path.
struct Sealed {
    kek_id: [u8; KEK_ID_LEN],
    target: Id,
    wrap_nonce: [u8; NONCE_LEN],
    wrapped_key: Vec<u8>,
    data_nonce: [u8; NONCE_LEN],
    ciphertext: Vec<u8>,
}

impl Sealed {
    fn to_bytes(&self) -> Vec<u8> {
        let target = self.target.as_str().as_bytes();
        let mut out = Vec::with_capacity(128 + self.ciphertext.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.kek_id);
        // Ids are at most 128 bytes.
        out.push(target.len() as u8);
        out.extend_from_slice(target);
        out.extend_from_slice(&self.wrap_nonce);
        out.extend_from_slice(&self.wrapped_key);
        out.extend_from_slice(&self.data_nonce);
        out.extend_from_slice(&self.ciphertext);
        out
    }

    fn parse(bytes: &[u8], key: &Id, reader: &Id) -> Result<Sealed, QuarantineError> {
        let mut rest = bytes;
        let mut take = |n: usize| -> Result<&[u8], QuarantineError> {
            if rest.len() < n {
                return Err(tampered(key, reader));
            }
            let (head, tail) = rest.split_at(n);
            rest = tail;
            Ok(head)
        };
        if take(MAGIC.len())? != MAGIC {
            return Err(tampered(key, reader));
        }
        let kek_id = array(take(KEK_ID_LEN)?);
        let target_len = usize::from(take(1)?[0]);
        let target = std::str::from_utf8(take(target_len)?)
            .ok()
            .and_then(|text| Id::new(text).ok())
            .ok_or_else(|| tampered(key, reader))?;
        let wrap_nonce = array(take(NONCE_LEN)?);
        let wrapped_key = take(WRAPPED_KEY_LEN)?.to_vec();
        let data_nonce = array(take(NONCE_LEN)?);
        let ciphertext = rest.to_vec();
        if ciphertext.len() < TAG_LEN {
            return Err(tampered(key, reader));
        }
        Ok(Sealed {
            kek_id,
            target,
            wrap_nonce,
            wrapped_key,
            data_nonce,
            ciphertext,
        })
    }
}

fn array<const N: usize>(slice: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(slice);
    out
}

#[derive(Clone, Copy)]
enum Purpose {
    DataKey,
    Output,
}

/// `label ‖ 0 ‖ purpose ‖ 0 ‖ key ‖ 0 ‖ target ‖ 0 ‖ reader`: ids never hold a zero
/// byte, so no two different bindings share a text.
fn associated_data(purpose: Purpose, key: &Id, target: &Id, reader: &Id) -> Vec<u8> {
    let purpose: &str = match purpose {
        Purpose::DataKey => "data-key",
        Purpose::Output => "output",
    };
    let mut out = Vec::with_capacity(64);
    for part in [
        "tooltrust/quarantine/v1",
        purpose,
        key.as_str(),
        target.as_str(),
        reader.as_str(),
    ] {
        if !out.is_empty() {
            out.push(0);
        }
        out.extend_from_slice(part.as_bytes());
    }
    out
}

fn wrap_key(
    kek: &Kek,
    data_key: &[u8; 32],
    key: &Id,
    target: &Id,
    reader: &Id,
) -> Result<([u8; NONCE_LEN], Vec<u8>), QuarantineError> {
    let nonce = random::bytes::<NONCE_LEN>()?;
    let wrapped = kek
        .cipher()
        .encrypt(
            &XNonce::from(nonce),
            Payload {
                msg: data_key,
                aad: &associated_data(Purpose::DataKey, key, target, reader),
            },
        )
        .map_err(QuarantineError::Encrypt)?;
    Ok((nonce, wrapped))
}

fn unwrap_key(
    kek: &Kek,
    sealed: &Sealed,
    key: &Id,
    target: &Id,
    reader: &Id,
) -> Result<Zeroizing<[u8; 32]>, QuarantineError> {
    let plain = Zeroizing::new(
        kek.cipher()
            .decrypt(
                &XNonce::from(sealed.wrap_nonce),
                Payload {
                    msg: &sealed.wrapped_key,
                    aad: &associated_data(Purpose::DataKey, key, target, reader),
                },
            )
            .map_err(|_| tampered(key, reader))?,
    );
    let mut data_key = Zeroizing::new([0u8; 32]);
    if plain.len() != data_key.len() {
        return Err(tampered(key, reader));
    }
    data_key.copy_from_slice(&plain);
    Ok(data_key)
}

/// The output key and reader a copy's path names.
fn names_of(path: &Path) -> Result<(Id, Id), QuarantineError> {
    let invalid = || QuarantineError::NotAStoreFile(path.to_owned());
    let reader = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(FILE_SUFFIX))
        .and_then(|n| Id::new(n).ok())
        .ok_or_else(invalid)?;
    let key = path
        .parent()
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
        .and_then(|n| Id::new(n).ok())
        .ok_or_else(invalid)?;
    Ok((key, reader))
}

/// Writes `bytes` to a temporary file beside `path`, syncs it, renames it over `path`
/// and syncs the directory: a crash leaves the old copy or the new one.
fn write_copy(path: &Path, bytes: &[u8]) -> Result<(), QuarantineError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("copy");
    // Ids hold no '.', so the temporary name cannot be a copy's.
    let temp = dir.join(format!(".{name}.tmp"));
    write_atomically(path, &temp, bytes).map_err(|e| storage("write", path, e))
}

fn tampered(key: &Id, reader: &Id) -> QuarantineError {
    QuarantineError::Tampered {
        key: key.clone(),
        reader: reader.clone(),
    }
}

fn storage(op: &'static str, path: &Path, source: io::Error) -> QuarantineError {
    QuarantineError::Io {
        op,
        path: path.to_owned(),
        source,
    }
}

#[cfg(test)]
mod tests;
