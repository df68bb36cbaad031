//! The token of a console for one reviewer ([`Access::Reviewer`](crate::Access)): drawn
//! from the operating system's CSPRNG when the console binds, written to a file only its
//! owner reads, and required of every request, as a bearer token or exchanged once for
//! the console's session cookie (`/login?token=…`). A loopback address proves nothing:
//! any local user can connect to it.

use std::fmt;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::csrf::random_hex;

/// A console's sign-in token: 32 bytes (256 bits) from the OS, as 64 hex characters.
/// `Debug` never shows it.
#[derive(Clone)]
pub struct Token(String);

impl Token {
    /// A fresh token from the OS.
    pub(crate) fn random() -> Result<Token, getrandom::Error> {
        random_hex().map(Token)
    }

    /// The secret itself, for the person it signs in (and nobody else).
    pub fn secret(&self) -> &str {
        &self.0
    }

    /// Writes the token, on a line of its own, to a new file at `path`, readable and
    /// writable by its owner only (mode 0600 on Unix, whatever the umask).
    ///
    /// The bytes go to a file of a fresh random name beside `path`, created exclusively
    /// (`O_EXCL`: never a file or symbolic link that was already there), which is then
    /// renamed to `path`: a file left at `path` by a console that was killed is replaced,
    /// and a symbolic link planted there is replaced, never followed. The returned
    /// [`TokenFile`] removes the file when dropped.
    pub fn write_file(&self, path: &Path) -> io::Result<TokenFile> {
        let name = path
            .file_name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))?
            .to_string_lossy();
        let suffix = random_hex().map_err(io::Error::other)?;
        let temp = path.with_file_name(format!(".{name}.{}.tmp", &suffix[..16]));
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let written = options.open(&temp).and_then(|mut file| {
            file.write_all(format!("{}\n", self.0).as_bytes())?;
            file.sync_all()?;
            fs::rename(&temp, path)
        });
        if let Err(error) = written {
            let _ = fs::remove_file(&temp);
            return Err(error);
        }
        Ok(TokenFile {
            path: path.to_path_buf(),
            token: self.clone(),
        })
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(…)")
    }
}

/// A token's file, removed when dropped (if it still holds that token: a console
/// started since on the same port may have replaced it).
#[derive(Debug)]
pub struct TokenFile {
    path: PathBuf,
    token: Token,
}

impl TokenFile {
    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TokenFile {
    fn drop(&mut self) {
        let ours =
            fs::read_to_string(&self.path).is_ok_and(|text| text.trim_end() == self.token.secret());
        if ours {
            let _ = fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_long_random_and_never_shown() {
        let (one, two) = (Token::random().unwrap(), Token::random().unwrap());
        assert_eq!(one.secret().len(), 64);
        assert!(one.secret().bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(one.secret(), two.secret());
        assert!(!format!("{one:?}").contains(one.secret()));
    }

    #[test]
    fn the_file_is_the_owners_only_replaces_what_was_there_and_goes_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("console.token");
        // A file a killed console left, and a symbolic link someone planted: replaced.
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "keep me").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let token = Token::random().unwrap();
        let file = token.write_file(&path).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{}\n", token.secret())
        );
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let meta = std::fs::symlink_metadata(&path).unwrap();
            assert!(meta.file_type().is_file());
            assert_eq!(meta.mode() & 0o777, 0o600);
        }
        // Only the token's file is left in the directory (no temporary file).
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
        drop(file);
        assert!(!path.exists());

        // A file another console wrote since is not ours to remove.
        let file = token.write_file(&path).unwrap();
        let other = Token::random().unwrap();
        let _theirs = std::mem::ManuallyDrop::new(other.write_file(&path).unwrap());
        drop(file);
        assert!(path.exists());
        // No directory: refused, nothing written.
        let missing = dir.path().join("missing").join("console.token");
        assert!(token.write_file(&missing).is_err());
    }
}
