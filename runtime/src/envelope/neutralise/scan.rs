//! Finding the bytes where a match can begin, fast: ordinary text is skipped 32 bytes at
//! a time, and only the few UTF-8 sequences that can start a relevant character are
//! looked at (the brackets of §3.5's vocabulary, their lookalikes, and tag characters).

/// Bytes per block of the fast skip.
const BLOCK: usize = 32;

/// First byte at or after `from` that may start a relevant character, or `None`.
///
/// The check is coarse (any lead byte that begins one of the relevant sequences);
/// [`starts_relevant`] confirms it.
pub(super) fn next_candidate(bytes: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    while let Some(block) = bytes.get(at..at + BLOCK) {
        let mask = lead_mask(block);
        if mask != 0 {
            return Some(at + mask.trailing_zeros() as usize);
        }
        at += BLOCK;
    }
    let tail = bytes.get(at..)?;
    tail.iter().position(|&b| is_lead(b)).map(|k| at + k)
}

/// One bit per byte of `block` that [`is_lead`]; written so that the compiler turns it
/// into vector compares.
#[inline(always)]
fn lead_mask(block: &[u8]) -> u32 {
    let mut mask = 0u32;
    for (k, &b) in block.iter().enumerate().take(BLOCK) {
        mask |= u32::from(is_lead(b)) << k;
    }
    mask
}

/// Whether `b` is the first byte of some relevant sequence.
#[inline(always)]
fn is_lead(b: u8) -> bool {
    (b == b'<')
        | (b == b'[')
        | (b == 0xC2)
        | (b == 0xCB)
        | (b.wrapping_sub(0xE1) < 3)
        | (b == 0xEF)
        | (b == 0xF3)
}

/// Whether the character at `at` (a character boundary) reads as `<` or `[`, or is a tag
/// character: the exact UTF-8 sequences of every such character [`super::skeleton::fold`]
/// knows.
pub(super) fn starts_relevant(bytes: &[u8], at: usize) -> bool {
    let Some(rest) = bytes.get(at..) else {
        return false;
    };
    matches!(
        rest,
        [b'<' | b'[', ..]
            | [0xC2, 0xAB, ..] // «
            | [0xCB, 0x82, ..] // ˂
            | [0xE1, 0x90, 0xB8, ..] // ᐸ
            | [0xE2, 0x80, 0xB9, ..] // ‹
            | [0xE2, 0x8C, 0xA9, ..] // 〈
            | [0xE2, 0x9D, 0xAC | 0xAE, ..] // ❬ ❮
            | [0xE2, 0x9F, 0xA8 | 0xAA, ..] // ⟨ ⟪
            | [0xE2, 0xA7, 0xBC, ..] // ⧼
            | [0xE3, 0x80, 0x88 | 0x8A, ..] // 〈 《
            | [0xEF, 0xB9, 0xA4, ..] // ﹤
            | [0xEF, 0xBC, 0x9C | 0xBB, ..] // ＜ ［
            | [0xF3, 0xA0, 0x80 | 0x81, ..] // U+E0000–U+E007F
    )
}

#[cfg(test)]
mod tests {
    use super::super::skeleton::{fold, is_tag_character};
    use super::*;

    #[test]
    fn every_relevant_character_is_a_candidate() {
        let mut buf = [0u8; 4];
        for c in (0..=0x10FFFF).filter_map(char::from_u32) {
            let relevant = matches!(fold(c), '<' | '[') || is_tag_character(c);
            let bytes = c.encode_utf8(&mut buf).as_bytes();
            assert_eq!(
                starts_relevant(bytes, 0),
                relevant,
                "U+{:04X} is misclassified",
                c as u32
            );
            if relevant {
                assert_eq!(next_candidate(bytes, 0), Some(0), "U+{:04X}", c as u32);
            }
        }
    }

    #[test]
    fn finds_candidates_across_blocks() {
        let mut text = "x".repeat(100);
        text.push('<');
        text.push_str(&"y".repeat(40));
        text.push('［');
        let bytes = text.as_bytes();
        assert_eq!(next_candidate(bytes, 0), Some(100));
        assert_eq!(next_candidate(bytes, 101), Some(141));
        assert_eq!(next_candidate(bytes, 142), None);
        assert_eq!(next_candidate(b"abc", 0), None);
    }
}
