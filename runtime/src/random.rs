//! The one source of randomness: the operating system's CSPRNG. Ids, session keys, data
//! keys and AEAD nonces all come from here, and a failure is an error, never a panic.

/// The operating system's random number generator failed (on a supported platform this
/// happens only very early in boot, or in a sandbox that forbids it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the OS random number generator failed")]
pub struct RandomError(#[source] getrandom::Error);

/// Fills `bytes` from the OS CSPRNG.
pub(crate) fn fill(bytes: &mut [u8]) -> Result<(), RandomError> {
    getrandom::fill(bytes).map_err(RandomError)
}

/// `N` fresh random bytes.
pub(crate) fn bytes<const N: usize>() -> Result<[u8; N], RandomError> {
    let mut out = [0u8; N];
    fill(&mut out)?;
    Ok(out)
}
