//! Finding the bytes where a match can begin, fast: `<` and `[` are found with `memchr`;
//! blocks of 64 bytes that are all ASCII are skipped at once (and, up to the first
//! non-ASCII byte after where a search starts, spans of 1 KiB); in the others, the bytes
//! that may begin a relevant character (a lookalike of `<` or `[`, or a tag character)
//! are flagged (in text dense with non-ASCII, by compares the compiler vectorises), and
//! each flagged byte is confirmed by [`starts_relevant`] before the caller sees it.

/// Bytes per block.
const BLOCK: usize = 64;
/// Bytes of ASCII skipped at once before the first non-ASCII byte.
const SPAN: usize = 16 * BLOCK;
/// Flag words per block: one flag bit per input byte, in eight-byte words.
const WORDS: usize = BLOCK / 8;

/// Walks the candidate bytes of a text in order. Both searches remember how far they
/// looked, so each byte is searched about once however dense the candidates are.
pub(super) struct Candidates<'a> {
    bytes: &'a [u8],
    /// The `<` and `[` of the text, in order.
    brackets: memchr::Memchr2<'a>,
    /// The next `<` or `[` at or after the last query (or the end of the text).
    next_ascii: Option<usize>,
    /// The next relevant non-ASCII character at or after the last query (or the end).
    next_lead: Option<usize>,
    /// Start of the block `flags` describes, or `usize::MAX`.
    block: usize,
    /// The [`block_flags`] of that block.
    flags: [u64; WORDS],
}

impl<'a> Candidates<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Self {
        Candidates {
            bytes,
            brackets: memchr::memchr2_iter(b'<', b'[', bytes),
            next_ascii: None,
            next_lead: None,
            block: usize::MAX,
            flags: [0; WORDS],
        }
    }

    /// First byte at or after `from` that starts a `<`, a `[`, or a relevant non-ASCII
    /// character: one [`starts_relevant`] accepts.
    pub(super) fn next_from(&mut self, from: usize) -> Option<usize> {
        let len = self.bytes.len();
        let ascii = match self.next_ascii {
            Some(at) if at >= from => at,
            _ => {
                let at = self.brackets.find(|&at| at >= from).unwrap_or(len);
                self.next_ascii = Some(at);
                at
            }
        };
        let lead = match self.next_lead {
            Some(at) if at >= from => at,
            _ => {
                let at = self.next_lead(from);
                self.next_lead = Some(at);
                at
            }
        };
        let next = ascii.min(lead);
        (next < len).then_some(next)
    }

    /// The first relevant non-ASCII character at or after `from`, or the end.
    fn next_lead(&mut self, from: usize) -> usize {
        let to = self.bytes.len();
        let mut block = from - from % BLOCK;
        // ASCII text goes by a span at a time, up to its first non-ASCII byte.
        while self.block != block
            && self
                .bytes
                .get(block..block + SPAN)
                .is_some_and(<[u8]>::is_ascii)
        {
            block += SPAN;
        }
        while block < to {
            if self.block != block {
                if is_ascii_block(self.bytes, block) {
                    block += BLOCK;
                    continue;
                }
                self.block = block;
                self.flags = block_flags(self.bytes, block);
            }
            for (k, &word) in self.flags.iter().enumerate() {
                let mut word = word;
                while word != 0 {
                    let at = block + k * 8 + word.trailing_zeros() as usize / 8;
                    if at >= from && starts_relevant(self.bytes, at) {
                        return at;
                    }
                    word &= word - 1;
                }
            }
            block += BLOCK;
        }
        to
    }
}

/// Whether the block at `start` is whole and all ASCII: one OR over its fixed-size bytes,
/// which the compiler turns into a few vector instructions.
#[inline(always)]
fn is_ascii_block(bytes: &[u8], start: usize) -> bool {
    bytes
        .get(start..start + BLOCK)
        .and_then(|block| <&[u8; BLOCK]>::try_from(block).ok())
        .is_some_and(|block| block.iter().fold(0, |any, &b| any | b) < 0x80)
}

/// One set bit per byte of the block at `start` that may begin a relevant non-ASCII
/// character (a superset: the caller confirms each with [`starts_relevant`]). For a
/// block with few non-ASCII characters, these are their lead bytes; for a dense one (CJK,
/// say), the bytes that [`may_start_relevant`].
fn block_flags(bytes: &[u8], start: usize) -> [u64; WORDS] {
    let mut words = [0u64; WORDS];
    let Some(block) = bytes
        .get(start..start + BLOCK)
        .and_then(|block| <&[u8; BLOCK]>::try_from(block).ok())
    else {
        // The last, short block: flag its lead bytes.
        let tail = bytes.get(start..).unwrap_or_default();
        for (k, &b) in tail.iter().enumerate().take(BLOCK) {
            if let Some(word) = words.get_mut(k / 8) {
                *word |= u64::from(b >= 0xC0) << (k % 8 * 8);
            }
        }
        return words;
    };
    for (word, eight) in words.iter_mut().zip(block.chunks_exact(8)) {
        let eight = eight.try_into().map_or(0, u64::from_le_bytes);
        // Bit 7 of each byte that is at least 0xC0, i.e. a lead byte.
        *word = eight & (eight << 1) & 0x8080_8080_8080_8080;
    }
    // Few non-ASCII characters (a word of English, a name): check each one. (Counting
    // words, not bits: without a popcount instruction, bits are dear.)
    if words.iter().filter(|&&word| word != 0).count() <= 3 {
        return words;
    }
    // The block and the two bytes after it, read in place (a copy on the stack would
    // stall the vector loads that follow).
    let Some(window) = bytes
        .get(start..start + BLOCK + 2)
        .and_then(|window| <&[u8; BLOCK + 2]>::try_from(window).ok())
    else {
        return words;
    };
    // Written over fixed-size arrays so that the compiler turns it into vector compares.
    let mut flags = [0u8; BLOCK];
    for (k, flag) in flags.iter_mut().enumerate() {
        *flag = u8::from(may_start_relevant(window[k], window[k + 1], window[k + 2]));
    }
    for (word, eight) in words.iter_mut().zip(flags.chunks_exact(8)) {
        *word = eight.try_into().map_or(0, u64::from_le_bytes);
    }
    words
}

/// A cheap superset of [`starts_relevant`] over three bytes: exact for the leads that
/// CJK text is full of (U+3000 punctuation, fullwidth forms), lead-only for the rare ones.
#[inline(always)]
fn may_start_relevant(b: u8, second: u8, third: u8) -> bool {
    ((b == 0xE3) & (second == 0x80) & ((third == 0x88) | (third == 0x8A)))
        | ((b == 0xEF)
            & (((second == 0xB9) & (third == 0xA4))
                | ((second == 0xBC) & ((third == 0x9C) | (third == 0xBB)))))
        | (b == 0xC2)
        | (b == 0xCB)
        | (b == 0xE1)
        | (b == 0xE2)
        | (b == 0xF3)
}

/// Whether the character at `at` (a character boundary) reads as `<` or `[`, or is a tag
/// character: the exact UTF-8 sequences of every such character [`super::skeleton::fold`]
/// knows.
#[inline]
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

    fn next_candidate(bytes: &[u8], from: usize) -> Option<usize> {
        Candidates::new(bytes).next_from(from)
    }

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
            assert_eq!(
                next_candidate(bytes, 0),
                relevant.then_some(0),
                "U+{:04X}",
                c as u32
            );
        }
    }

    /// Every relevant character is found wherever it sits in dense CJK, sparse English or
    /// plain ASCII, across block boundaries and at the very end.
    #[test]
    fn finds_each_relevant_character_at_every_offset() {
        let fillers = [
            "日本語のテキスト、「引用」。，",
            "plain words — “quoted” ",
            "abc",
        ];
        for filler in fillers {
            let text: String = filler.chars().cycle().take(90).collect();
            for (at, _) in text.char_indices().chain([(text.len(), ' ')]) {
                for needle in ['<', '［', '〈', '＜', '‹', '\u{E0041}', '«'] {
                    let mut body = text.clone();
                    body.insert(at, needle);
                    let bytes = body.as_bytes();
                    let mut candidates = Candidates::new(bytes);
                    let mut found = Vec::new();
                    let mut from = 0;
                    while let Some(hit) = candidates.next_from(from) {
                        found.push(hit);
                        from = hit + 1;
                    }
                    assert_eq!(found, [at], "{needle:?} at {at} in {body:?}");
                }
            }
        }
    }

    /// After a long run of ASCII (skipped a span at a time), around every block and span
    /// boundary, from any starting point.
    #[test]
    fn finds_relevant_characters_after_long_ascii() {
        let ascii = "plain words, no brackets. ".repeat(100);
        let offsets = (0..ascii.len()).filter(|at| matches!(at % BLOCK, 0 | 1 | 62 | 63));
        for at in offsets {
            for needle in ['〈', '\u{E0041}', '«'] {
                let mut body = ascii.clone();
                body.insert(at, needle);
                let bytes = body.as_bytes();
                for from in [0, at.saturating_sub(1), at] {
                    assert_eq!(
                        Candidates::new(bytes).next_from(from),
                        Some(at),
                        "{needle:?} at {at} from {from}"
                    );
                }
                assert_eq!(Candidates::new(bytes).next_from(at + 1), None);
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
        let mut candidates = Candidates::new(bytes);
        assert_eq!(candidates.next_from(0), Some(100));
        assert_eq!(candidates.next_from(101), Some(141));
        assert_eq!(candidates.next_from(142), None);
        assert_eq!(next_candidate(b"abc", 0), None);
        assert_eq!(next_candidate(b"<<<", 3), None);
        let every: Vec<_> = (0..70)
            .filter_map(|k| next_candidate(&[b'['; 70], k))
            .collect();
        assert_eq!(every, (0..70).collect::<Vec<_>>());
    }
}
