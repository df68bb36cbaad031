//! The one source of randomness: the operating system's CSPRNG. Ids, session keys, data
//! keys and AEAD nonces all come from here, and a failure is an error, never a panic.

use std::cell::RefCell;

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

/// Bytes drawn from the OS per refill of a thread's id pool.
const POOL: usize = 512;

/// OS random bytes, drawn a batch at a time and handed out once each. Every call
/// draws an id, and one system call per id costs more than the rest of hashing a
/// small call; a batch costs about as much as one.
struct IdPool {
    bytes: [u8; POOL],
    /// The next unused byte.
    next: usize,
    /// The process that drew them: a child forked from this thread inherits a copy of
    /// the pool, and must not hand out the bytes its parent hands out. (A child whose
    /// id equals its parent's, as the first process of a new PID namespace can, is not
    /// told apart: such a pair could repeat up to a pool of ids, never reveal them.)
    pid: u32,
}

thread_local! {
    static IDS: RefCell<IdPool> = const {
        RefCell::new(IdPool { bytes: [0; POOL], next: POOL, pid: 0 })
    };
}

/// 16 fresh random bytes for an id: OS CSPRNG output no other id was given. Only for
/// ids, which must be unique and unguessable; keys and nonces use [`bytes`].
pub(crate) fn id_bytes() -> Result<[u8; 16], RandomError> {
    IDS.with_borrow_mut(|pool| {
        let pid = std::process::id();
        if pool.next + 16 > POOL || pool.pid != pid {
            fill(&mut pool.bytes)?;
            pool.next = 0;
            pool.pid = pid;
        }
        let mut out = [0u8; 16];
        let taken = &mut pool.bytes[pool.next..pool.next + 16];
        out.copy_from_slice(taken);
        // Handed out once: what stays in memory is no longer anyone's id.
        taken.fill(0);
        pool.next += 16;
        Ok(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_are_never_handed_out_twice_across_refills_and_threads() {
        let draw = || {
            (0..3 * POOL / 16)
                .map(|_| id_bytes().unwrap())
                .collect::<Vec<_>>()
        };
        let here = draw();
        let there = std::thread::spawn(draw).join().unwrap();
        let all: HashSet<_> = here.iter().chain(&there).collect();
        assert_eq!(all.len(), here.len() + there.len());
        assert!(all.iter().all(|id| **id != [0; 16]));
    }
}
