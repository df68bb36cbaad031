//! Who may use the console, and how they prove it: the one reviewer of a loopback
//! console, with the token the console drew for them, or reviewers named in a credentials
//! file (a bearer token or an argon2 password hash each). Either way every request proves
//! its reviewer; the address it came from proves nothing.

use std::fmt;
use std::path::{Path, PathBuf};

use argon2::password_hash::{PasswordHash, PasswordVerifier};
use sha2::{Digest, Sha256};
use tooltrust::Id;

use crate::token::Token;

/// How the console knows who is deciding.
#[derive(Debug, Clone)]
pub enum Access {
    /// A console on the loopback interface, used by one person whose name is given at
    /// start-up (`--reviewer NAME`). The console draws a random token when it binds
    /// ([`Console::token`](crate::Console::token)) and serves nobody without it: sent as
    /// a bearer token, or exchanged for a session cookie at
    /// [`Console::sign_in_url`](crate::Console::sign_in_url). Only for loopback
    /// addresses.
    Reviewer(Id),
    /// Reviewers from a credentials file (`--auth FILE`): identity comes from the
    /// authentication, never from a form field.
    Credentials(Credentials),
}

/// The shortest bearer token the file may hold, in characters.
pub const MIN_TOKEN_CHARS: usize = 32;

/// The reviewers a console accepts, read from a file of lines
/// `REVIEWER token TOKEN` or `REVIEWER argon2 PHC-STRING` (blank lines and lines
/// starting with `#` are skipped). A line may end with `tenants=A,B`: that reviewer
/// lists, opens, decides and decrypts the calls of those tenants only; a line without it
/// reaches every tenant.
///
/// ```text
/// # reviewer  kind    secret                              tenants
/// alice       token   3f9c2a7e1b8d4c6f0a5e9b2d7c1f8a3e    tenants=acme,globex
/// bob         argon2  $argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$…
/// ```
///
/// A token is kept only as its SHA-256; `Debug` shows names, never secrets.
#[derive(Clone)]
pub struct Credentials {
    reviewers: Vec<(Id, Secret)>,
    /// The tenants each restricted reviewer decides for.
    tenants: Vec<(Id, Vec<Id>)>,
    /// A hash no secret is checked against for real, with the costliest parameters of
    /// the file's hashes: it makes every failed attempt cost what a real one does.
    dummy: String,
}

#[derive(Clone)]
enum Secret {
    Token([u8; 32]),
    Argon2(String),
}

/// Why a credentials file was refused: the file, the line and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    /// The file cannot be read.
    #[error("cannot read the credentials file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A line is malformed.
    #[error("{}:{line}: {reason}", path.display())]
    Line {
        /// The file.
        path: PathBuf,
        /// The line number, from 1.
        line: usize,
        /// What is wrong, and what to write instead.
        reason: String,
    },
    /// The password check cannot be prepared with the file's argon2 parameters.
    #[error("{}: {reason}", path.display())]
    Check {
        /// The file.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
    /// The file names no reviewer.
    #[error("{}: names no reviewer; write lines `REVIEWER token TOKEN` or `REVIEWER argon2 PHC`", .0.display())]
    Empty(PathBuf),
}

impl Credentials {
    /// Reads a credentials file.
    pub fn load(path: impl AsRef<Path>) -> Result<Credentials, CredentialsError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| CredentialsError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Credentials::parse(&text).map_err(|(line, reason)| match line {
            0 if reason.is_empty() => CredentialsError::Empty(path.to_path_buf()),
            0 => CredentialsError::Check {
                path: path.to_path_buf(),
                reason,
            },
            line => CredentialsError::Line {
                path: path.to_path_buf(),
                line,
                reason,
            },
        })
    }

    /// Parses the file's text; the error is the line number (0: no reviewer) and why.
    fn parse(text: &str) -> Result<Credentials, (usize, String)> {
        let mut reviewers: Vec<(Id, Secret)> = Vec::new();
        let mut tenants: Vec<(Id, Vec<Id>)> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let number = i + 1;
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (name, kind, secret, only) = match fields[..] {
                [name, kind, secret] => (name, kind, secret, None),
                [name, kind, secret, only] => (name, kind, secret, Some(only)),
                _ => {
                    return Err((
                        number,
                        "expected three fields and an optional fourth: `REVIEWER token TOKEN` or `REVIEWER argon2 PHC`, then `tenants=A,B`".into(),
                    ));
                }
            };
            let id = Id::new(name).map_err(|e| (number, format!("reviewer {name:?}: {e}")))?;
            if let Some(only) = only {
                let list = only.strip_prefix("tenants=").ok_or_else(|| {
                    (
                        number,
                        format!("the fourth field must be `tenants=A,B`, not {only:?}"),
                    )
                })?;
                let named = list
                    .split(',')
                    .map(|tenant| {
                        Id::new(tenant).map_err(|e| (number, format!("tenant {tenant:?}: {e}")))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                tenants.push((id.clone(), named));
            }
            if reviewers.iter().any(|(known, _)| *known == id) {
                return Err((number, format!("reviewer {id} is named twice")));
            }
            let secret = match kind {
                "token" => {
                    if secret.chars().count() < MIN_TOKEN_CHARS {
                        return Err((
                            number,
                            format!(
                                "{id}'s token is shorter than {MIN_TOKEN_CHARS} characters; use a random one, e.g. `openssl rand -hex 32`"
                            ),
                        ));
                    }
                    Secret::Token(Sha256::digest(secret.as_bytes()).into())
                }
                "argon2" => {
                    let parsed = PasswordHash::new(secret)
                        .map_err(|e| (number, format!("{id}'s argon2 hash: {e}")))?;
                    if !parsed.algorithm.as_str().starts_with("argon2") {
                        return Err((
                            number,
                            format!("{id}'s hash is not an argon2 PHC string (`$argon2id$…`)"),
                        ));
                    }
                    Secret::Argon2(secret.to_owned())
                }
                other => {
                    return Err((
                        number,
                        format!("unknown kind {other:?}: use `token` or `argon2`"),
                    ));
                }
            };
            reviewers.push((id, secret));
        }
        if reviewers.is_empty() {
            return Err((0, String::new()));
        }
        let dummy = dummy_hash(&reviewers).map_err(|e| (0, e))?;
        Ok(Credentials {
            reviewers,
            tenants,
            dummy,
        })
    }

    /// One reviewer, proved by `token`, deciding for every tenant: the credentials of
    /// a console for one reviewer ([`Access::Reviewer`]).
    pub(crate) fn single(reviewer: Id, token: &Token) -> Result<Credentials, String> {
        let reviewers = vec![(
            reviewer,
            Secret::Token(Sha256::digest(token.secret().as_bytes()).into()),
        )];
        let dummy = dummy_hash(&reviewers)?;
        Ok(Credentials {
            reviewers,
            tenants: Vec::new(),
            dummy,
        })
    }

    /// The tenants `reviewer` decides for; `None`: every tenant.
    pub fn tenants_of(&self, reviewer: &Id) -> Option<&[Id]> {
        self.tenants
            .iter()
            .find(|(id, _)| id == reviewer)
            .map(|(_, tenants)| tenants.as_slice())
    }

    /// The reviewer whose bearer token this is.
    pub fn token_holder(&self, token: &str) -> Option<&Id> {
        let presented: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        // Every entry is compared, each in constant time: the timing says nothing of
        // which token (or how much of one) matched.
        let mut found = None;
        for (id, secret) in &self.reviewers {
            if let Secret::Token(digest) = secret
                && equal(digest, &presented)
            {
                found = Some(id);
            }
        }
        found
    }

    /// Whether `secret` proves `reviewer`: their token, or their password. Argon2 is
    /// slow on purpose; call this off the async threads. Every attempt costs one argon2
    /// verification, so the time taken does not tell which names exist, or their kind.
    pub fn verify(&self, reviewer: &str, secret: &str) -> Option<Id> {
        let known = self
            .reviewers
            .iter()
            .find(|(id, _)| id.as_str() == reviewer);
        let ok = match known {
            Some((_, Secret::Argon2(phc))) => argon2_verifies(phc, secret),
            Some((_, Secret::Token(digest))) => {
                argon2_verifies(&self.dummy, secret);
                equal(digest, &Sha256::digest(secret.as_bytes()).into())
            }
            None => {
                argon2_verifies(&self.dummy, secret);
                false
            }
        };
        known.filter(|_| ok).map(|(id, _)| id.clone())
    }
}

/// A PHC string hashed with the costliest argon2 parameters among `reviewers` (the
/// crate's defaults when none has a password).
fn dummy_hash(reviewers: &[(Id, Secret)]) -> Result<String, String> {
    use argon2::password_hash::{PasswordHasher, SaltString};
    let costliest = reviewers
        .iter()
        .filter_map(|(_, secret)| match secret {
            Secret::Argon2(phc) => PasswordHash::new(phc).ok().and_then(|hash| {
                let params = argon2::Params::try_from(&hash).ok()?;
                let algorithm = argon2::Algorithm::try_from(hash.algorithm).ok()?;
                Some((algorithm, params))
            }),
            Secret::Token(_) => None,
        })
        .max_by_key(|(_, params)| {
            u64::from(params.m_cost()) * u64::from(params.t_cost()) * u64::from(params.p_cost())
        });
    let hasher = match costliest {
        Some((algorithm, params)) => argon2::Argon2::new(algorithm, argon2::Version::V0x13, params),
        None => argon2::Argon2::default(),
    };
    let salt = SaltString::encode_b64(b"tooltrust-dummy!").map_err(|e| e.to_string())?;
    hasher
        .hash_password(b"tooltrust console timing", &salt)
        .map(|hash| hash.to_string())
        .map_err(|e| format!("cannot prepare the sign-in check: {e}"))
}

fn argon2_verifies(phc: &str, secret: &str) -> bool {
    PasswordHash::new(phc).is_ok_and(|hash| {
        argon2::Argon2::default()
            .verify_password(secret.as_bytes(), &hash)
            .is_ok()
    })
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.reviewers.iter().map(|(id, _)| id))
            .finish()
    }
}

/// Compares two digests in time independent of where they differ.
fn equal(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A PHC string for `password` (argon2id, the crate's default parameters, a fresh
/// salt), for a credentials file's `argon2` line.
pub fn hash_password(password: &str) -> Result<String, HashError> {
    use argon2::password_hash::{PasswordHasher, SaltString};
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| HashError(e.to_string()))?;
    let salt = SaltString::encode_b64(&bytes).map_err(|e| HashError(e.to_string()))?;
    Ok(argon2::Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map_err(|e| HashError(e.to_string()))?
        .to_string())
}

/// Why a password could not be hashed (no randomness for the salt).
#[derive(Debug, thiserror::Error)]
#[error("cannot hash the password: {0}")]
pub struct HashError(String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_passwords_prove_their_reviewer_only() {
        let phc = hash_password("correct horse battery staple").unwrap();
        let text = format!(
            "# reviewers\n\nalice token {}\nbob argon2 {phc}\n",
            "a".repeat(40)
        );
        let credentials = Credentials::parse(&text).unwrap();
        assert_eq!(
            credentials.token_holder(&"a".repeat(40)).map(Id::as_str),
            Some("alice")
        );
        assert_eq!(credentials.token_holder(&"a".repeat(41)), None);
        assert_eq!(
            credentials
                .verify("bob", "correct horse battery staple")
                .as_ref()
                .map(Id::as_str),
            Some("bob")
        );
        assert_eq!(credentials.verify("bob", "wrong"), None);
        assert_eq!(credentials.verify("alice", "wrong"), None);
        assert_eq!(credentials.verify("carol", "anything"), None);
        assert!(!format!("{credentials:?}").contains("aaaa"));
    }

    #[test]
    fn a_single_reviewers_token_proves_them_and_nothing_else_does() {
        let token = Token::random().unwrap();
        let alice = Id::new("alice").unwrap();
        let credentials = Credentials::single(alice.clone(), &token).unwrap();
        assert_eq!(credentials.token_holder(token.secret()), Some(&alice));
        assert_eq!(credentials.token_holder(&token.secret()[1..]), None);
        assert_eq!(credentials.token_holder(""), None);
        assert_eq!(credentials.tenants_of(&alice), None, "every tenant");
        assert_eq!(credentials.verify("alice", token.secret()), Some(alice));
        assert_eq!(credentials.verify("alice", "guess"), None);
    }

    #[test]
    fn a_failed_attempt_costs_what_the_costliest_password_does() {
        use argon2::password_hash::{PasswordHasher, SaltString};
        let params = argon2::Params::new(32 * 1024, 3, 1, None).unwrap();
        let costly =
            argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params)
                .hash_password(b"pw", &SaltString::encode_b64(b"0123456789abcdef").unwrap())
                .unwrap()
                .to_string();
        let cheap = hash_password("pw").unwrap();
        let text = format!("alice argon2 {cheap}\nbob argon2 {costly}\n");
        let credentials = Credentials::parse(&text).unwrap();
        let dummy = PasswordHash::new(&credentials.dummy).unwrap();
        let costliest = PasswordHash::new(&costly).unwrap();
        assert_eq!(dummy.params, costliest.params);
        // With tokens only, the crate's defaults.
        let tokens = Credentials::parse(&format!("carol token {}", "c".repeat(40))).unwrap();
        let default = PasswordHash::new(&cheap).unwrap();
        assert_eq!(
            PasswordHash::new(&tokens.dummy).unwrap().params,
            default.params
        );
    }

    #[test]
    fn every_malformed_line_is_refused_with_its_number() {
        let cases = [
            ("alice token short", 1, "shorter than 32"),
            ("\nalice password secret", 2, "unknown kind"),
            ("alice token", 1, "three fields"),
            (
                "bad<name> token aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                1,
                "reviewer",
            ),
            ("bob argon2 not-a-phc", 1, "argon2 hash"),
            (
                "bob argon2 $pbkdf2-sha256$i=1000$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA",
                1,
                "not an argon2",
            ),
        ];
        for (text, line, reason) in cases {
            let Err((at, why)) = Credentials::parse(text) else {
                panic!("{text:?} was accepted");
            };
            assert_eq!(at, line, "{text:?}: {why}");
            assert!(why.contains(reason), "{text:?}: {why}");
        }
        let twice = format!("alice token {0}\nalice token {0}", "b".repeat(32));
        assert!(Credentials::parse(&twice).unwrap_err().1.contains("twice"));
        assert_eq!(Credentials::parse("# nobody\n").unwrap_err().0, 0);
    }
}
