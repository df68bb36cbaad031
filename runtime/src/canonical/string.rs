//! Strings in canonical form: minimal escaping, and keys ordered by UTF-16 code units.

use std::cmp::Ordering;

/// Compares two strings by their UTF-16 code units, as RFC 8785 sorts keys.
pub fn cmp_utf16(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    match a.iter().zip(b).position(|(x, y)| x != y) {
        // One is a prefix of the other.
        None => a.len().cmp(&b.len()),
        Some(at) => {
            let rank = |text: &[u8]| text.get(at).copied().map(utf16_rank);
            rank(a).cmp(&rank(b))
        }
    }
}

/// A number that orders texts as [`cmp_utf16`] does, as far as their first eight bytes
/// tell: when two prefixes differ, they compare as their texts do; when they are equal,
/// only `cmp_utf16` can tell.
#[inline]
pub(crate) fn utf16_prefix(text: &str) -> u64 {
    let bytes = text.as_bytes();
    // Built in a register: an array written byte by byte and read back as one word
    // stalls the load.
    let prefix = match bytes.first_chunk::<8>() {
        Some(head) => u64::from_be_bytes(*head),
        None => bytes
            .iter()
            .fold(0u64, |word, &byte| word << 8 | u64::from(byte))
            .checked_shl(8 * (8 - bytes.len() as u32))
            .unwrap_or(0),
    };
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    if prefix & HIGHS == 0 {
        // ASCII: every byte ranks as itself.
        prefix
    } else {
        u64::from_be_bytes(prefix.to_be_bytes().map(utf16_rank))
    }
}

/// Where a byte of UTF-8 text sorts when the text sorts by UTF-16 code units.
///
/// UTF-8 byte order is code point order. UTF-16 order differs only between U+E000..U+FFFF
/// (lead bytes EE, EF) and astral characters (lead bytes F0..F4, surrogates D800..DBFF in
/// UTF-16), which it puts first; so those lead bytes swap places. Two texts equal up to
/// their first difference have their character boundaries in the same places, so that
/// difference lies between two lead bytes or two continuation bytes (80..BF, unmoved).
#[inline]
const fn utf16_rank(byte: u8) -> u8 {
    match byte {
        0xEE | 0xEF => byte + 5,
        0xF0..=0xF4 => byte - 2,
        _ => byte,
    }
}

/// Appends `text` as a canonical JSON string.
pub(crate) fn emit_string(out: &mut String, text: &str) {
    out.reserve(text.len() + 2);
    out.push('"');
    let bytes = text.as_bytes();
    // Runs without escapes go out in one piece. Escaped bytes are ASCII, so both ends of
    // every run are character boundaries.
    let mut run = 0;
    let mut escape_at = |out: &mut String, at: usize| {
        if let (Some(raw), Some(&byte)) = (text.get(run..at), bytes.get(at)) {
            out.push_str(raw);
            let escape = ESCAPES[usize::from(byte)];
            match escape.as_bytes() {
                // Most escapes are two bytes; pushing them as characters avoids a copy.
                &[backslash, letter] => {
                    out.push(char::from(backslash));
                    out.push(char::from(letter));
                }
                _ => out.push_str(escape),
            }
            run = at + 1;
        }
    };
    let (words, tail) = bytes.as_chunks::<8>();
    for (index, word) in words.iter().enumerate() {
        let mut mask = escape_mask(*word);
        while mask != 0 {
            escape_at(out, index * 8 + (mask.trailing_zeros() / 8) as usize);
            // Clear the lowest flag.
            mask &= mask - 1;
        }
    }
    let tail_start = words.len() * 8;
    for (offset, &byte) in tail.iter().enumerate() {
        if needs_escape(byte) {
            escape_at(out, tail_start + offset);
        }
    }
    out.push_str(text.get(run..).unwrap_or_default());
    out.push('"');
}

/// Whether canonical JSON escapes `byte` (below U+0020, `"`, `\`): where a run of a
/// string that is copied as it is ends.
#[inline]
pub(crate) fn needs_escape(byte: u8) -> bool {
    !ESCAPES[usize::from(byte)].is_empty()
}

/// Appends one character as a canonical JSON string holds it.
pub(crate) fn emit_char(out: &mut String, c: char) {
    match ESCAPES.get(c as usize) {
        Some(escape) if !escape.is_empty() => out.push_str(escape),
        _ => out.push(c),
    }
}

/// The escape of each byte: `"` and `\`, and U+0000..U+001F in their short forms where
/// JSON has one; empty for every byte written as it is.
const ESCAPES: [&str; 256] = {
    const CONTROL: [&str; 32] = [
        "\\u0000", "\\u0001", "\\u0002", "\\u0003", "\\u0004", "\\u0005", "\\u0006", "\\u0007",
        "\\b", "\\t", "\\n", "\\u000b", "\\f", "\\r", "\\u000e", "\\u000f", "\\u0010", "\\u0011",
        "\\u0012", "\\u0013", "\\u0014", "\\u0015", "\\u0016", "\\u0017", "\\u0018", "\\u0019",
        "\\u001a", "\\u001b", "\\u001c", "\\u001d", "\\u001e", "\\u001f",
    ];
    let mut table = [""; 256];
    let mut byte = 0;
    while byte < CONTROL.len() {
        table[byte] = CONTROL[byte];
        byte += 1;
    }
    table[b'"' as usize] = "\\\"";
    table[b'\\' as usize] = "\\\\";
    table
};

/// The high bit of each byte of `word` that needs an escape (below U+0020, `"`, `\`),
/// exactly: every lane is computed without carries or borrows into its neighbours.
#[inline]
pub(crate) fn escape_mask(word: [u8; 8]) -> u64 {
    const LOWS: u64 = u64::from_ne_bytes([0x7f; 8]);
    const HIGHS: u64 = !LOWS;
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    let word = u64::from_le_bytes(word);
    // A lane's high bit is set when its byte is nonzero; the low seven bits added to 0x7F
    // never carry out of the lane.
    let nonzero = |lanes: u64| ((lanes & LOWS) + LOWS) | lanes;
    // Likewise set when the byte is at least 0x20: 0x60 + (byte & 0x7F) reaches 0x80
    // exactly when (byte & 0x7F) >= 0x20, and a high byte is at least 0x20 anyway.
    let printable = ((word & LOWS) + ONES * 0x60) | word;
    let quote = nonzero(word ^ (ONES * u64::from(b'"')));
    let backslash = nonzero(word ^ (ONES * u64::from(b'\\')));
    !(printable & quote & backslash) & HIGHS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_compare_by_utf16_code_units() {
        assert_eq!(cmp_utf16("a", "ab"), Ordering::Less);
        assert_eq!(cmp_utf16("\u{1f600}", "\u{e000}"), Ordering::Less);
        assert_eq!(cmp_utf16("\u{d7ff}", "\u{1f600}"), Ordering::Less);
        assert_eq!(cmp_utf16("\u{1f600}", "\u{1f601}"), Ordering::Less);
    }

    /// Where two prefixes differ, they order their texts as `cmp_utf16` does.
    #[test]
    fn prefixes_order_texts_as_utf16_does() {
        let texts = [
            "",
            "\u{0}",
            "a",
            "a\u{0}",
            "ab",
            "abcdefg",
            "abcdefgh",
            "abcdefgh\u{0}",
            "abcdefghi",
            "é",
            "\u{7f}",
            "\u{80}",
            "\u{7ff}",
            "\u{800}",
            "\u{d7ff}",
            "\u{e000}",
            "\u{fb01}",
            "\u{ffff}",
            "\u{10000}",
            "\u{1f600}",
            "\u{10ffff}",
            "a\u{1f600}",
            "a\u{fb01}",
            "zzzzzzz\u{e000}",
            "zzzzzzz\u{10000}",
        ];
        for a in texts {
            for b in texts {
                let (pa, pb) = (utf16_prefix(a), utf16_prefix(b));
                if pa != pb {
                    assert_eq!(pa.cmp(&pb), cmp_utf16(a, b), "{a:?} {b:?}");
                }
                if a == b {
                    assert_eq!(pa, pb);
                }
            }
        }
    }

    #[test]
    fn strings_escape_minimally() {
        let mut out = String::new();
        emit_string(
            &mut out,
            "q\" b\\ / \u{8}\u{c}\n\r\t\u{0}\u{1f}\u{7f}\u{80}\u{2028}é",
        );
        assert_eq!(
            out,
            "\"q\\\" b\\\\ / \\b\\f\\n\\r\\t\\u0000\\u001f\u{7f}\u{80}\u{2028}é\""
        );
    }

    /// Every flag is exact: a byte is flagged exactly when it needs escaping, whatever
    /// its neighbours.
    #[test]
    fn escape_masks_flag_exactly_the_bytes_that_need_escaping() {
        let needs = |byte: u8| byte < 0x20 || byte == b'"' || byte == b'\\';
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                for word in [[a, b, b, a, a, a, b, b], [b, b, b, b, b, b, b, a]] {
                    let expected = word
                        .iter()
                        .enumerate()
                        .filter(|&(_, &byte)| needs(byte))
                        .fold(0u64, |mask, (at, _)| mask | 0x80 << (8 * at));
                    assert_eq!(escape_mask(word), expected, "{word:?}");
                }
            }
        }
    }
}
