//! Reading a log back: every line checked on its own and against the chain, and the
//! whole against a pinned head.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::Arc;

use super::entry::{Entry, GENESIS, LineFault, MAX_LINE_BYTES, read_line};
use super::head::Head;
use super::provenance::{OutcomeUnknown, Provenance, ProvenanceFault};
use crate::call::Checksum;
use crate::signature::PublicKey;

/// A log that verified: how many entries it holds and its last entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// The number of entries (equal to the last `seq`).
    pub entries: u64,
    /// The last entry's `seq` and `hash`.
    pub head: Head,
    /// Calls let run whose outcome the chain does not hold: still running when it was
    /// read, or cut off by a crash before their outcome was synced (it follows the
    /// decision's sync). Not damage.
    pub outcome_unknown: Vec<OutcomeUnknown>,
}

/// Where and why a log failed verification.
#[derive(Debug, Clone, thiserror::Error)]
#[error("seq {seq}: {kind}")]
pub struct VerifyError {
    /// The first bad sequence number: the position (counting entries from 1) where the
    /// chain first fails. Entries before it are intact.
    pub seq: u64,
    /// What failed there.
    pub kind: VerifyErrorKind,
}

/// What failed. Offsets are byte offsets of the start of the line in the file.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyErrorKind {
    /// The file could not be read.
    #[error("cannot read the log: {0}")]
    Io(#[source] Arc<std::io::Error>),
    /// A line is longer than any entry the log writes.
    #[error("the line at byte {offset} is longer than {max} bytes")]
    LineTooLong {
        /// Start of the line.
        offset: u64,
        /// The longest line an entry may take.
        max: usize,
    },
    /// A line is not an entry (not UTF-8, not JSON, or missing or mistyped fields).
    #[error("the line at byte {offset} is not an entry: {reason}")]
    Malformed {
        /// Start of the line.
        offset: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// A line is an entry, but not in the exact canonical bytes the log writes.
    #[error("the line at byte {offset} is not in canonical form (bytes were changed)")]
    NotCanonical {
        /// Start of the line.
        offset: u64,
    },
    /// The entry's content does not hash to its `hash` (its content was changed).
    #[error(
        "the entry at byte {offset} was changed: its content hashes to {computed}, not {stated}"
    )]
    HashMismatch {
        /// Start of the line.
        offset: u64,
        /// The `hash` the entry states.
        stated: Checksum,
        /// The hash of its content.
        computed: Checksum,
    },
    /// An entry is out of sequence: one was deleted, inserted, duplicated or moved.
    #[error(
        "the entry at byte {offset} has seq {found} (an entry was deleted, inserted, duplicated or moved)"
    )]
    SeqMismatch {
        /// Start of the line.
        offset: u64,
        /// The `seq` the entry states.
        found: u64,
    },
    /// An entry does not chain to the one before it.
    #[error(
        "the entry at byte {offset} does not chain to the previous entry: prev {found}, expected {expected}"
    )]
    ChainBroken {
        /// Start of the line.
        offset: u64,
        /// The `prev` the entry states.
        found: Checksum,
        /// The previous entry's hash.
        expected: Checksum,
    },
    /// The file ends in a partial line: a write that a crash interrupted (such an entry
    /// was never acknowledged) — or bytes someone appended or cut.
    #[error("torn tail: {len} bytes at byte {offset} are not a complete entry")]
    TornTail {
        /// Where the partial line starts (the length of the intact log).
        offset: u64,
        /// Its length in bytes.
        len: u64,
    },
    /// The log ends before the pinned head: entries were cut off its end.
    #[error("truncated: the log ends at seq {last}, but the head pins seq {head_seq}")]
    Truncated {
        /// The last entry present.
        last: u64,
        /// The pinned head's seq.
        head_seq: u64,
    },
    /// The chain is intact, but its held-call entries tell an impossible story: a claim
    /// with no approval before it, a decision on a call never held.
    #[error("{0}")]
    Provenance(ProvenanceFault),
    /// The verifier trusts writers' keys, and no trusted writer vouches for this entry: it
    /// names no writer, or no signed entry follows it.
    #[error(
        "the entry at byte {offset} is not signed, nor followed by an entry signed by a trusted writer"
    )]
    Unsigned {
        /// Start of the line.
        offset: u64,
    },
    /// The entry is signed by a key the verifier does not trust.
    #[error("the entry at byte {offset} is signed by {signer}, which is not a trusted writer")]
    UnknownSigner {
        /// Start of the line.
        offset: u64,
        /// The key it names (`ed25519:…`).
        signer: String,
    },
    /// The entry's signature is not its signer's signature of its hash: the entry was
    /// re-hashed or its signature copied from another.
    #[error(
        "the entry at byte {offset} has a signature that is not {signer}'s signature of its hash"
    )]
    BadSignature {
        /// Start of the line.
        offset: u64,
        /// The key it names (`ed25519:…`).
        signer: String,
    },
    /// The entry at the pinned head's seq is not the pinned one: the log was rewritten.
    #[error("the entry at the head's seq has hash {found}; the head pins {pinned}")]
    HeadMismatch {
        /// The pinned hash.
        pinned: Checksum,
        /// The hash found at that seq.
        found: Checksum,
    },
}

/// Verifies the log at `path` and, when `head` is given, that it still holds the
/// entries the head pins; then that its held-call entries tell a possible story
/// ([`Provenance`](super::Provenance)).
///
/// Every line must be an entry in exact canonical bytes, hash to its `hash`, carry the
/// next `seq` and chain to the previous entry through `prev`; so any changed byte and
/// any deleted, inserted, duplicated or reordered entry fails, and the error names the
/// first bad `seq`. Cutting whole entries off the end leaves a valid shorter log, which
/// only a head pinned beforehand can reveal: keep one (see [`AuditLog`](super::AuditLog)).
///
/// ```no_run
/// use tooltrust::audit::{Head, verify};
/// let pinned = Head::read("/secure/elsewhere/audit.head")?;
/// let report = verify("/var/lib/agent/audit/audit.jsonl".as_ref(), Some(&pinned))?;
/// println!("ok: {} entries, head {}", report.entries, report.head.hash);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn verify(path: &Path, head: Option<&Head>) -> Result<VerifyReport, VerifyError> {
    verify_signed(path, head, None)
}

/// [`verify`], and, with `writers`, every entry must be signed by one of them: then an
/// entry edited and re-hashed, inserted, or deleted with the entries after it re-hashed,
/// fails without a pinned head, by anyone who lacks a writer's private key.
pub fn verify_signed(
    path: &Path,
    head: Option<&Head>,
    writers: Option<&Writers>,
) -> Result<VerifyReport, VerifyError> {
    let file = File::open(path).map_err(|error| VerifyError {
        seq: 1,
        kind: VerifyErrorKind::Io(Arc::new(error)),
    })?;
    let mut reader = EntryReader::new(BufReader::with_capacity(1 << 16, file), head.copied());
    if let Some(writers) = writers {
        reader = reader.with_writers(writers.clone());
    }
    let mut provenance = Provenance::new();
    for entry in &mut reader {
        provenance.observe(&entry?);
    }
    let mut report = reader.finish()?;
    report.outcome_unknown = provenance.check()?;
    Ok(report)
}

/// Reads entries in order and checks each against the chain (and against a pinned
/// head, if given); the first failure ends the iteration.
///
/// ```no_run
/// use std::{fs::File, io::BufReader};
/// use tooltrust::audit::EntryReader;
/// let file = File::open("audit.jsonl")?;
/// let mut reader = EntryReader::new(BufReader::new(file), None);
/// for entry in &mut reader {
///     let entry = entry?;
///     println!("{} {} {}", entry.seq, entry.ts, entry.event);
/// }
/// let report = reader.finish()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct EntryReader<R> {
    reader: R,
    pinned: Option<Head>,
    writers: Option<Writers>,
    /// Whether every entry must carry its own signature (a writer that signs each).
    each_signed: bool,
    /// The first entry since the last signed one (seq, offset): a signed entry must follow.
    unsigned_since: Option<(u64, u64)>,
    /// Bytes of the intact entries read so far.
    good_len: u64,
    tip: Head,
    torn: Option<Vec<u8>>,
    done: bool,
    line: Vec<u8>,
}

impl<R: BufRead> EntryReader<R> {
    /// Reads a log from its start; `pinned` is a head the log must still hold.
    pub fn new(reader: R, pinned: Option<Head>) -> Self {
        EntryReader {
            reader,
            pinned,
            writers: None,
            each_signed: false,
            unsigned_since: None,
            good_len: 0,
            tip: Head::EMPTY,
            torn: None,
            done: false,
            line: Vec::new(),
        }
    }

    /// Accepts only entries signed by one of `writers`: an entry that names its writer
    /// without a signature is accepted only when a signed entry follows it (a writer that
    /// signs the last entry of each durable batch).
    pub fn with_writers(mut self, writers: Writers) -> Self {
        self.writers = Some(writers);
        self
    }

    /// Like [`with_writers`](Self::with_writers), for a writer that signs every entry
    /// (the store's chain): an entry without its own signature fails, whatever follows,
    /// so no later signature vouches for an entry inserted unsigned.
    pub fn with_each_signed_by(mut self, writers: Writers) -> Self {
        self.writers = Some(writers);
        self.each_signed = true;
        self
    }

    /// The last intact entry read so far.
    pub fn tip(&self) -> Head {
        self.tip
    }

    /// The length in bytes of the intact entries read so far.
    pub fn good_len(&self) -> u64 {
        self.good_len
    }

    /// The bytes of the torn tail, once the reader has reported one.
    pub(crate) fn take_torn(&mut self) -> Option<Vec<u8>> {
        self.torn.take()
    }

    /// Once the iteration has ended without an error: checks that the log reaches the
    /// pinned head, and reports.
    pub fn finish(&self) -> Result<VerifyReport, VerifyError> {
        if let Some((seq, offset)) = self.unsigned_since {
            // Entries after the last signed one: no writer vouches for them.
            return Err(VerifyError {
                seq,
                kind: VerifyErrorKind::Unsigned { offset },
            });
        }
        if let Some(pinned) = &self.pinned {
            if pinned.seq > self.tip.seq {
                return Err(VerifyError {
                    seq: self.tip.seq + 1,
                    kind: VerifyErrorKind::Truncated {
                        last: self.tip.seq,
                        head_seq: pinned.seq,
                    },
                });
            }
            if pinned.seq == 0 && pinned.hash != GENESIS {
                return Err(head_mismatch(pinned, GENESIS));
            }
        }
        Ok(VerifyReport {
            entries: self.tip.seq,
            head: self.tip,
            outcome_unknown: Vec::new(),
        })
    }

    fn fail(&mut self, kind: VerifyErrorKind) -> Option<Result<Entry, VerifyError>> {
        self.done = true;
        Some(Err(VerifyError {
            seq: self.tip.seq + 1,
            kind,
        }))
    }
}

fn head_mismatch(pinned: &Head, found: Checksum) -> VerifyError {
    VerifyError {
        seq: pinned.seq,
        kind: VerifyErrorKind::HeadMismatch {
            pinned: pinned.hash,
            found,
        },
    }
}

impl<R: BufRead> Iterator for EntryReader<R> {
    type Item = Result<Entry, VerifyError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let offset = self.good_len;
        self.line.clear();
        let limit = MAX_LINE_BYTES as u64 + 1;
        if let Err(error) = (&mut self.reader)
            .take(limit)
            .read_until(b'\n', &mut self.line)
        {
            return self.fail(VerifyErrorKind::Io(Arc::new(error)));
        }
        if self.line.is_empty() {
            self.done = true;
            return None;
        }
        let complete = self.line.last() == Some(&b'\n');
        if self.line.len() as u64 >= limit {
            return self.fail(VerifyErrorKind::LineTooLong {
                offset,
                max: MAX_LINE_BYTES,
            });
        }
        let body = if complete {
            &self.line[..self.line.len() - 1]
        } else {
            &self.line[..]
        };
        let parsed = if complete {
            read_line(body)
        } else {
            // A line without its newline was never acknowledged, whatever it holds.
            Err(LineFault::Malformed("no trailing newline".to_owned()))
        };
        let entry = match parsed {
            Ok(entry) => entry,
            // Only a final line without its newline is torn: a crash cuts a write short,
            // it never completes a line with other bytes. A complete bad line is damage,
            // even at the end, and is never set aside as a crash's leftover.
            Err(_) if !complete => {
                let len = self.line.len() as u64;
                self.torn = Some(std::mem::take(&mut self.line));
                return self.fail(VerifyErrorKind::TornTail { offset, len });
            }
            Err(LineFault::Malformed(reason)) => {
                return self.fail(VerifyErrorKind::Malformed { offset, reason });
            }
            Err(LineFault::NotCanonical) => {
                return self.fail(VerifyErrorKind::NotCanonical { offset });
            }
            Err(LineFault::HashMismatch { stated, computed }) => {
                return self.fail(VerifyErrorKind::HashMismatch {
                    offset,
                    stated,
                    computed,
                });
            }
        };
        if entry.seq != self.tip.seq + 1 {
            return self.fail(VerifyErrorKind::SeqMismatch {
                offset,
                found: entry.seq,
            });
        }
        if entry.prev != self.tip.hash {
            return self.fail(VerifyErrorKind::ChainBroken {
                offset,
                found: entry.prev,
                expected: self.tip.hash,
            });
        }
        if let Some(writers) = &self.writers {
            let fault = match (&entry.signer, &entry.sig) {
                (None, _) => Some(VerifyErrorKind::Unsigned { offset }),
                (Some(signer), _) if !writers.contains(signer) => {
                    Some(VerifyErrorKind::UnknownSigner {
                        offset,
                        signer: signer.to_string(),
                    })
                }
                (Some(signer), Some(sig))
                    if !super::entry::signature_verifies(signer, &entry.hash, sig) =>
                {
                    Some(VerifyErrorKind::BadSignature {
                        offset,
                        signer: signer.to_string(),
                    })
                }
                // Signed: it vouches for every entry before it, through the hash chain.
                (Some(_), Some(_)) => {
                    self.unsigned_since = None;
                    None
                }
                (Some(_), None) if self.each_signed => Some(VerifyErrorKind::Unsigned { offset }),
                // Named but not signed: a later signed entry must vouch for it.
                (Some(_), None) => {
                    self.unsigned_since.get_or_insert((entry.seq, offset));
                    None
                }
            };
            if let Some(fault) = fault {
                return self.fail(fault);
            }
        }
        if let Some(pinned) = self.pinned
            && pinned.seq == entry.seq
            && pinned.hash != entry.hash
        {
            self.done = true;
            return Some(Err(head_mismatch(&pinned, entry.hash)));
        }
        self.tip = Head {
            seq: entry.seq,
            hash: entry.hash,
        };
        self.good_len += self.line.len() as u64;
        Some(Ok(entry))
    }
}

/// The writers whose signatures a verifier accepts: public keys only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Writers(Vec<PublicKey>);

impl Writers {
    /// These keys.
    pub fn new(keys: impl IntoIterator<Item = PublicKey>) -> Writers {
        let mut keys: Vec<PublicKey> = keys.into_iter().collect();
        keys.sort_by_key(PublicKey::to_bytes);
        keys.dedup();
        Writers(keys)
    }

    /// Whether `key` is one of them.
    pub fn contains(&self, key: &PublicKey) -> bool {
        self.0.contains(key)
    }

    /// The keys.
    pub fn keys(&self) -> &[PublicKey] {
        &self.0
    }
}
