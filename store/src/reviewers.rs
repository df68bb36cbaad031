//! The reviewers file: who may decide held calls, as public keys a host trusts. Agent
//! hosts, proxies and the console's store read it; none of them holds a private key.
//!
//! ```toml
//! [[reviewer]]
//! id = "rita"
//! key = "ed25519:3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29"
//! tenants = "*"              # or a list: ["default", "acme"]
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;
use tooltrust::held::{DuplicateReviewer, Reviewer, Reviewers};

/// The environment variable that names the reviewers file when no flag does.
pub const REVIEWERS_ENV: &str = "TOOLTRUST_REVIEWERS";

/// Why a reviewers file could not be read.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ReviewersFileError {
    /// The file could not be read.
    #[error("cannot read the reviewers file {path}: {reason}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
    /// The file is not a reviewers file.
    #[error("the reviewers file {path} is invalid: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A reviewer is listed twice.
    #[error("the reviewers file {path}: {source}")]
    Duplicate {
        /// The file.
        path: PathBuf,
        /// Which.
        source: DuplicateReviewer,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    reviewer: Vec<Reviewer>,
}

/// Parses a reviewers file's text; `path` names it in errors.
pub fn parse_reviewers(text: &str, path: &Path) -> Result<Reviewers, ReviewersFileError> {
    let file: File = toml::from_str(text).map_err(|error| ReviewersFileError::Invalid {
        path: path.to_owned(),
        reason: error.message().to_owned(),
    })?;
    Reviewers::from_list(file.reviewer).map_err(|source| ReviewersFileError::Duplicate {
        path: path.to_owned(),
        source,
    })
}

/// Reads the reviewers file at `path`.
pub fn read_reviewers(path: impl AsRef<Path>) -> Result<Reviewers, ReviewersFileError> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|error| ReviewersFileError::Read {
        path: path.to_owned(),
        reason: error.to_string(),
    })?;
    parse_reviewers(&text, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tooltrust::Id;
    use tooltrust::signature::SecretKey;

    #[test]
    fn a_reviewers_file_reads_back() {
        let key = SecretKey::from_seed([3; 32]).public();
        let text = format!(
            "[[reviewer]]\nid = \"rita\"\nkey = \"{key}\"\ntenants = \"*\"\n\n\
             [[reviewer]]\nid = \"sam\"\nkey = \"{key}\"\ntenants = [\"acme\"]\n"
        );
        let reviewers = parse_reviewers(&text, Path::new("r.toml")).unwrap();
        let rita = reviewers.get(&Id::new("rita").unwrap()).unwrap();
        assert!(rita.tenants.allows(&Id::new("any").unwrap()));
        let sam = reviewers.get(&Id::new("sam").unwrap()).unwrap();
        assert!(sam.tenants.allows(&Id::new("acme").unwrap()));
        assert!(!sam.tenants.allows(&Id::new("other").unwrap()));
    }

    #[test]
    fn bad_reviewers_files_are_refused() {
        let key = SecretKey::from_seed([3; 32]).public();
        for bad in [
            "[[reviewer]]\nid = \"rita\"\nkey = \"ed25519:00\"\ntenants = \"*\"\n".to_owned(),
            format!("[[reviewer]]\nid = \"a b\"\nkey = \"{key}\"\ntenants = \"*\"\n"),
            format!("[[reviewer]]\nid = \"rita\"\nkey = \"{key}\"\ntenants = \"all\"\n"),
            format!("[[reviewer]]\nid = \"rita\"\nkey = \"{key}\"\n"),
            format!("[[reviewer]]\nid = \"rita\"\nkey = \"{key}\"\ntenants = \"*\"\nrole = 1\n"),
        ] {
            assert!(
                matches!(
                    parse_reviewers(&bad, Path::new("r.toml")),
                    Err(ReviewersFileError::Invalid { .. })
                ),
                "{bad}"
            );
        }
        let twice = format!(
            "[[reviewer]]\nid = \"rita\"\nkey = \"{key}\"\ntenants = \"*\"\n\
             [[reviewer]]\nid = \"rita\"\nkey = \"{key}\"\ntenants = \"*\"\n"
        );
        assert!(matches!(
            parse_reviewers(&twice, Path::new("r.toml")),
            Err(ReviewersFileError::Duplicate { .. })
        ));
    }
}
