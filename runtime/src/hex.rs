//! Lowercase hex, as checksums, nonces, ids and keys are written.

/// Lowercase hex of `bytes`.
pub(crate) fn encode(bytes: &[u8]) -> String {
    let mut out = vec![0u8; bytes.len() * 2];
    encode_into(bytes, &mut out);
    // Hex digits are ASCII.
    String::from_utf8(out).unwrap_or_default()
}

/// Writes the lowercase hex digits of `bytes` to `out` (twice as long).
pub(crate) fn encode_into(bytes: &[u8], out: &mut [u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (&byte, pair) in bytes.iter().zip(out.chunks_exact_mut(2)) {
        pair[0] = DIGITS[usize::from(byte >> 4)];
        pair[1] = DIGITS[usize::from(byte & 0xf)];
    }
}

/// Which digits [`decode`] accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Case {
    /// Only `0-9a-f`: the canonical form of checksums and nonces.
    Lower,
    /// `0-9a-f` and `A-F` (key files written by other tools).
    Either,
}

/// Decodes `text`, exactly `2 * out.len()` digits of `case`, into `out`; `false` when it
/// is anything else (and `out` is then unspecified).
pub(crate) fn decode(text: &str, out: &mut [u8], case: Case) -> bool {
    let nibble = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' if case == Case::Either => Some(b - b'A' + 10),
        _ => None,
    };
    if text.len() != out.len() * 2 {
        return false;
    }
    for (slot, pair) in out.iter_mut().zip(text.as_bytes().chunks_exact(2)) {
        match (nibble(pair[0]), nibble(pair[1])) {
            (Some(high), Some(low)) => *slot = high << 4 | low,
            _ => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_what_is_not_hex() {
        let bytes = [0x00, 0x9f, 0xa0, 0xff];
        let text = encode(&bytes);
        assert_eq!(text, "009fa0ff");
        let mut out = [0u8; 4];
        assert!(decode(&text, &mut out, Case::Lower));
        assert_eq!(out, bytes);
        assert!(!decode("009FA0FF", &mut out, Case::Lower));
        assert!(decode("009FA0FF", &mut out, Case::Either));
        assert!(!decode("009fa0f", &mut out, Case::Either));
        assert!(!decode("009fa0fg", &mut out, Case::Either));
    }
}
