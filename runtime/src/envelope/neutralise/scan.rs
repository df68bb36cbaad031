//! Finding the bytes where a match can begin, fast: `<` and `[` are found with `memchr`;
//! blocks of 64 bytes that are all ASCII are skipped at once (and, up to the first
//! non-ASCII byte after where a search starts, spans of 1 KiB); in the others, the bytes
//! that may begin a candidate character (what reads as `<` or `[`, a tag character, a
//! variation selector: the generated table's `CANDIDATES`) are flagged, a bit per byte
//! (in text with few non-ASCII characters, their lead bytes, found by SSE2 byte masks; in
//! text dense with them, by compares the compiler vectorises), and each flagged byte is
//! confirmed by [`starts_relevant`], two table lookups, before the caller sees it.

use super::readings::CANDIDATES;

/// Bytes per block.
const BLOCK: usize = 64;
/// Bytes of ASCII skipped at once before the first non-ASCII byte.
const SPAN: usize = 16 * BLOCK;

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
    /// The [`block_flags`] of that block: bit `k` for its byte `k`.
    flags: u64,
    /// The dense searches, where the CPU has them.
    searches: Option<&'static Dense>,
    /// Whether the search for non-ASCII candidates stops at the next `<` or `[`: for a
    /// caller that may stop there (the verifier, at a block's closer), which then pays
    /// for little past it. Otherwise it runs ahead, which is cheaper where brackets are
    /// dense.
    bounded: bool,
    /// How far the next dense region reaches at least: [`REGION`], or for a bounded
    /// search a reach that starts at [`FIRST_REGION`] and doubles up to it.
    region: usize,
    /// The region searched by [`Dense`] (empty when none).
    dense: std::ops::Range<usize>,
    /// Each dense search's next hit at or after the last query, in that region.
    dense_next: [Option<usize>; 3],
}

impl<'a> Candidates<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Self {
        Self::with_searches(bytes, DENSE.as_ref(), false)
    }

    /// Like [`Candidates::new`], for a caller that may stop at any `<`: the search for
    /// non-ASCII candidates stops at the next `<` or `[` (but for what a dense search
    /// already read).
    pub(super) fn bounded(bytes: &'a [u8]) -> Self {
        Self::with_searches(bytes, DENSE.as_ref(), true)
    }

    fn with_searches(bytes: &'a [u8], searches: Option<&'static Dense>, bounded: bool) -> Self {
        Candidates {
            bounded,
            region: if bounded { FIRST_REGION } else { REGION },
            searches,
            bytes,
            brackets: memchr::memchr2_iter(b'<', b'[', bytes),
            next_ascii: None,
            next_lead: None,
            block: usize::MAX,
            flags: 0,
            dense: 0..0,
            dense_next: [None; 3],
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
                let at = self.next_lead(from, if self.bounded { ascii } else { len });
                self.next_lead = Some(at);
                at
            }
        };
        let next = ascii.min(lead);
        (next < len).then_some(next)
    }

    /// The first relevant non-ASCII character at or after `from` and before `to`, or
    /// `to`.
    fn next_lead(&mut self, from: usize, to: usize) -> usize {
        if from >= to {
            // Nothing to search (and a dense region made here would hold nothing).
            return to;
        }
        let mut block = from - from % BLOCK;
        // ASCII text goes by a span at a time, up to its first non-ASCII byte.
        while self.block != block
            && !self.dense.contains(&from)
            && block + SPAN <= to
            && self
                .bytes
                .get(block..block + SPAN)
                .is_some_and(<[u8]>::is_ascii)
        {
            block += SPAN;
        }
        while block < to {
            if self.dense.contains(&block.max(from)) {
                let found = self.next_dense(block.max(from));
                if found < self.dense.end {
                    return found.min(to);
                }
                block = self.dense.end;
                continue;
            }
            if self.block != block {
                if is_ascii_block(self.bytes, block) {
                    block += BLOCK;
                    continue;
                }
                match block_flags(self.bytes, block, self.searches.is_some()) {
                    // Nothing to confirm: no bookkeeping either.
                    Some(0) => {
                        block += BLOCK;
                        continue;
                    }
                    Some(flags) => {
                        self.block = block;
                        self.flags = flags;
                    }
                    None => {
                        // Dense non-ASCII text: search a region with the dense searchers,
                        // up to `to` at least. It may reach past `to`: its hits stay valid
                        // for the next queries, so that brackets in dense text do not
                        // restart the searches at each one.
                        let end = to.max(block + self.region).min(block + REGION);
                        self.dense = block..end.min(self.bytes.len());
                        self.dense_next = [None; 3];
                        if self.bounded {
                            // Past `to`, growing from small, so that a caller that stops at
                            // a bracket has searched at most about twice what it needed.
                            self.region = (self.region * 2).min(REGION);
                        }
                        continue;
                    }
                }
            }
            let mut flags = match from.checked_sub(block) {
                Some(skip) if skip < BLOCK => self.flags & (u64::MAX << skip),
                _ => self.flags,
            };
            while flags != 0 {
                let at = block + flags.trailing_zeros() as usize;
                if starts_relevant(self.bytes, at) {
                    return at.min(to);
                }
                flags &= flags - 1;
            }
            block += BLOCK;
        }
        to
    }

    /// The first candidate at or after `from` in the dense region, or its end.
    fn next_dense(&mut self, mut from: usize) -> usize {
        let Some(dense) = self.searches else {
            return self.dense.end;
        };
        let end = self.dense.end;
        loop {
            let mut at = end;
            for (i, next) in self.dense_next.iter_mut().enumerate() {
                let hit = match *next {
                    Some(hit) if hit >= from => hit,
                    _ => {
                        let hit = dense.find(i, self.bytes, from, end);
                        *next = Some(hit);
                        hit
                    }
                };
                at = at.min(hit);
            }
            if at >= end || starts_relevant(self.bytes, at) {
                return at;
            }
            from = at + 1;
        }
    }
}

/// Bytes searched at once by [`Dense`] once a block turns out dense.
const REGION: usize = 16 * 1024;

/// The first dense region of a bounded search.
const FIRST_REGION: usize = 256;

/// The searches for candidates in text dense with non-ASCII characters (CJK, say), where
/// a filter over every byte would cost several times a copy: the two lead bytes such text
/// is full of (E3, the CJK symbols; EF, the fullwidth forms) are searched by the bytes
/// that follow them in each candidate, with a packed (Teddy) searcher; the other leads of
/// candidates are rare there, and `memchr3` finds them.
struct Dense {
    searcher: aho_corasick::packed::Searcher,
    /// How many bytes each pattern starts after its character.
    offsets: Vec<usize>,
    rare: [[u8; 3]; 2],
}

/// `None` where the CPU has no packed searcher, or the candidates no longer fit.
static DENSE: std::sync::LazyLock<Option<Dense>> = std::sync::LazyLock::new(Dense::new);

impl Dense {
    fn new() -> Option<Dense> {
        let mut patterns: Vec<(Vec<u8>, usize)> = Vec::new();
        let mut rare: Vec<u8> = Vec::new();
        let encoded: Vec<Vec<u8>> = CANDIDATES
            .iter()
            .flat_map(|&(start, end)| start..=end)
            .filter_map(char::from_u32)
            .map(|c| c.to_string().into_bytes())
            .collect();
        for bytes in &encoded {
            let (pattern, offset) = match bytes[..] {
                [lead @ (0xE3 | 0xEF), second, third] => {
                    // A row with many candidates (the variation selectors) is searched
                    // by its first two bytes, the others by their last two.
                    let row = encoded
                        .iter()
                        .filter(|other| other.starts_with(&[lead, second]))
                        .count();
                    if row > 2 {
                        (vec![lead, second], 0)
                    } else {
                        (vec![second, third], 1)
                    }
                }
                _ => {
                    if let Some(&lead) = bytes.first()
                        && !rare.contains(&lead)
                    {
                        rare.push(lead);
                    }
                    continue;
                }
            };
            if !patterns.iter().any(|(p, _)| *p == pattern) {
                patterns.push((pattern, offset));
            }
        }
        if rare.len() > 6 || patterns.len() > 8 {
            return None;
        }
        rare.resize(6, rare.first().copied().unwrap_or(0));
        let searcher = aho_corasick::packed::Config::new()
            .builder()
            .extend(patterns.iter().map(|(p, _)| p))
            .build()?;
        Some(Dense {
            searcher,
            offsets: patterns.into_iter().map(|(_, offset)| offset).collect(),
            rare: [[rare[0], rare[1], rare[2]], [rare[3], rare[4], rare[5]]],
        })
    }

    /// The next hit of search `which` at or after `from` (and before `end`), or `end`: a
    /// byte that may start a candidate, for [`starts_relevant`] to confirm.
    fn find(&self, which: usize, bytes: &[u8], from: usize, end: usize) -> usize {
        let found = match which {
            0 => {
                // A pattern starts up to one byte after its character, so the search
                // runs two bytes past the region.
                let mut at = from;
                let stop = (end + 2).min(bytes.len());
                loop {
                    if at >= stop {
                        break None;
                    }
                    let span = aho_corasick::Span::from(at..stop);
                    let Some(hit) = self.searcher.find_in(bytes, span) else {
                        break None;
                    };
                    let offset = self
                        .offsets
                        .get(hit.pattern().as_usize())
                        .copied()
                        .unwrap_or(0);
                    match hit.start().checked_sub(offset) {
                        Some(start) if start >= from => break Some(start),
                        _ => at = hit.start() + 1,
                    }
                }
            }
            _ => {
                let [a, b, c] = self.rare.get(which - 1).copied().unwrap_or_default();
                bytes
                    .get(from..end)
                    .and_then(|region| memchr::memchr3(a, b, c, region))
                    .map(|i| from + i)
            }
        };
        found.map_or(end, |at| at.min(end))
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

/// One flag bit per byte of the block at `start` that may begin a candidate non-ASCII
/// character (a superset: the caller confirms each with [`starts_relevant`]). For a block
/// with few non-ASCII characters, these are their lead bytes; for a dense one (CJK, say),
/// `None` where the [`Dense`] searches are available (they are faster), else the bytes
/// that [`may_start_relevant`].
fn block_flags(bytes: &[u8], start: usize, searches: bool) -> Option<u64> {
    let Some(window) = bytes
        .get(start..start + BLOCK + PAST)
        .and_then(|window| <&[u8; BLOCK + PAST]>::try_from(window).ok())
    else {
        // The last block or two: flag their lead bytes.
        let tail = bytes.get(start..).unwrap_or_default();
        return Some(
            tail.iter()
                .take(BLOCK)
                .enumerate()
                .fold(0, |flags, (k, &b)| flags | u64::from(b >= 0xC0) << k),
        );
    };
    let leads = lead_mask(window);
    if leads == 0 {
        return Some(0);
    }
    // Few non-ASCII characters (a word of English, a name): check each one. (Clearing
    // the lowest bits, not counting them: without a popcount instruction, counts are
    // dear.)
    let mut rest = leads;
    for _ in 0..SPARSE {
        rest &= rest.wrapping_sub(1);
    }
    if rest == 0 {
        return Some(leads);
    }
    // A lead in every eight bytes: text made of non-ASCII (CJK, say), not text with some.
    if searches && every_octet(leads) {
        return None;
    }
    // Written over fixed-size arrays so that the compiler turns it into vector compares.
    let mut flags = [0u8; BLOCK + PAST];
    for (k, flag) in flags.iter_mut().take(BLOCK).enumerate() {
        *flag = u8::from(may_start_relevant(window[k], window[k + 1])) << 7;
    }
    Some(sign_mask(&flags))
}

/// Lead bytes a block may hold before the vector filter pays off over checking each.
const SPARSE: usize = 4;

/// Whether each eight-byte group of a block has a bit of `mask`.
fn every_octet(mask: u64) -> bool {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Bit 7 of each byte of `mask` that is not zero.
    ((mask & !HIGH).wrapping_add(!HIGH) | mask) & HIGH == HIGH
}

/// Bytes read past a block to tell its lead bytes apart.
const PAST: usize = 2;

/// One bit per byte of a block (the first [`BLOCK`] bytes of `window`) that is a UTF-8
/// lead byte and may begin a candidate: every lead byte but the two commonest in prose
/// with none, Latin-1 letters (C3) and the general punctuation of curly quotes, dashes
/// and ellipses (E2 80), whose one candidate is `‹` (E2 80 B9). A superset of
/// [`starts_relevant`] for non-ASCII characters; `sparse_filter_covers_every_candidate`
/// checks it against the table.
fn lead_mask(window: &[u8; BLOCK + PAST]) -> u64 {
    masks(window).1
}

/// One bit per byte of a block (the first [`BLOCK`] bytes of `window`) whose top bit is
/// set.
fn sign_mask(window: &[u8; BLOCK + PAST]) -> u64 {
    masks(window).0
}

/// Bits per byte of a block (the first [`BLOCK`] bytes of `window`): its top bit, and
/// [`lead_mask`]'s. Sixteen bytes at a time with SSE2 compares and byte masks, through
/// `safe_arch`, which keeps the intrinsics' `unsafe` out of this crate.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn masks(window: &[u8; BLOCK + PAST]) -> (u64, u64) {
    use safe_arch::{
        bitand_m128i, bitandnot_m128i, bitor_m128i, cmp_eq_mask_i8_m128i, cmp_gt_mask_i8_m128i,
        load_unaligned_m128i, move_mask_i8_m128i, set_splat_i8_m128i,
    };
    let splat = |b: u8| set_splat_i8_m128i(i8::from_ne_bytes([b]));
    // As signed bytes, lead bytes are -64..=-1 and continuation bytes -128..=-65.
    let continuation_max = splat(0xBF);
    let (latin, punctuation, row, angle) = (splat(0xC3), splat(0xE2), splat(0x80), splat(0xB9));
    let load = |at: usize| {
        window
            .get(at..at + 16)
            .and_then(|sixteen| <&[u8; 16]>::try_from(sixteen).ok())
            .map(load_unaligned_m128i)
    };
    let (mut signs, mut leads) = (0, 0);
    for k in 0..BLOCK / 16 {
        let (Some(v), Some(second), Some(third)) =
            (load(16 * k), load(16 * k + 1), load(16 * k + 2))
        else {
            continue;
        };
        let lead = bitand_m128i(cmp_gt_mask_i8_m128i(v, continuation_max), v);
        let in_row = bitand_m128i(
            cmp_eq_mask_i8_m128i(v, punctuation),
            cmp_eq_mask_i8_m128i(second, row),
        );
        // (`bitandnot(a, b)` is `!a & b`.)
        let quote = bitandnot_m128i(cmp_eq_mask_i8_m128i(third, angle), in_row);
        let kept = bitandnot_m128i(bitor_m128i(cmp_eq_mask_i8_m128i(v, latin), quote), lead);
        // A byte mask holds one bit per byte in its low sixteen bits.
        signs |= u64::from(move_mask_i8_m128i(v) as u16) << (16 * k);
        leads |= u64::from(move_mask_i8_m128i(kept) as u16) << (16 * k);
    }
    (signs, leads)
}

#[cfg(any(test, not(target_arch = "x86_64")))]
fn masks_portable(window: &[u8; BLOCK + PAST]) -> (u64, u64) {
    (0..BLOCK).fold((0, 0), |(signs, leads), k| {
        let byte = |i: usize| window.get(k + i).copied().unwrap_or(0);
        let b = byte(0);
        let none = b == 0xC3 || (b == 0xE2 && byte(1) == 0x80 && byte(2) != 0xB9);
        (
            signs | u64::from(b >= 0x80) << k,
            leads | u64::from(b >= 0xC0 && !none) << k,
        )
    })
}

#[cfg(not(target_arch = "x86_64"))]
fn masks(window: &[u8; BLOCK + PAST]) -> (u64, u64) {
    masks_portable(window)
}

/// A cheap superset of [`starts_relevant`] over a lead byte and the byte after it: the
/// rows of the two leads CJK text is full of (U+3000 punctuation, fullwidth and small
/// forms, the variation selectors) by their second byte, the other leads of candidates
/// whole. `the_dense_filter_covers_every_candidate` checks it against the table.
#[inline(always)]
fn may_start_relevant(b: u8, second: u8) -> bool {
    (((b == 0xE3) | (b == 0xEF))
        & ((second == 0x80) | ((second & 0xFE) == 0xB8) | (second == 0xBC)))
        | (b == 0xC2)
        | (b == 0xCB)
        | (b.wrapping_sub(0xE1) < 2)
        | ((b & 0xFC) == 0xF0)
}

/// For each lead byte (from 0xC0), one bit per second byte (its low six bits) that some
/// candidate begins with.
static SECOND_BYTES: [u64; 64] = second_bytes();

/// One bit per code point of the Basic Multilingual Plane: whether it is a candidate.
static BMP: [u64; 1024] = bmp_candidates();

const fn second_bytes() -> [u64; 64] {
    let mut table = [0u64; 64];
    let mut r = 0;
    while r < CANDIDATES.len() {
        let (start, end) = CANDIDATES[r];
        let mut cp = start;
        while cp <= end {
            let (lead, second) = if cp < 0x800 {
                (0xC0 | (cp >> 6), 0x80 | (cp & 0x3F))
            } else if cp < 0x10000 {
                (0xE0 | (cp >> 12), 0x80 | ((cp >> 6) & 0x3F))
            } else {
                (0xF0 | (cp >> 18), 0x80 | ((cp >> 12) & 0x3F))
            };
            table[(lead - 0xC0) as usize] |= 1 << (second & 0x3F);
            cp += 1;
        }
        r += 1;
    }
    table
}

const fn bmp_candidates() -> [u64; 1024] {
    let mut table = [0u64; 1024];
    let mut r = 0;
    while r < CANDIDATES.len() {
        let (start, end) = CANDIDATES[r];
        let mut cp = start;
        while cp <= end && cp < 0x10000 {
            table[(cp >> 6) as usize] |= 1 << (cp & 63);
            cp += 1;
        }
        r += 1;
    }
    table
}

/// Whether the character at `at` (a character boundary) may begin a match or be removed:
/// `<`, `[`, or one of the generated table's candidates (what reads as `<` or `[`, tag
/// characters, variation selectors).
#[inline(always)]
pub(super) fn starts_relevant(bytes: &[u8], at: usize) -> bool {
    let byte = |k: usize| bytes.get(at + k).copied().unwrap_or(0);
    let b = byte(0);
    if b < 0xC0 {
        return b == b'<' || b == b'[';
    }
    let c1 = byte(1) & 0x3F;
    // The masks keep every index inside its table.
    if SECOND_BYTES[usize::from(b & 0x3F)] >> c1 & 1 == 0 {
        return false;
    }
    let (row, column) = match b {
        0xC0..=0xDF => (usize::from(b & 0x1F), c1),
        0xE0..=0xEF => (
            (usize::from(b & 0x0F) << 6) | usize::from(c1),
            byte(2) & 0x3F,
        ),
        _ => {
            let cp = (u32::from(b & 0x07) << 18)
                | (u32::from(c1) << 12)
                | (u32::from(byte(2) & 0x3F) << 6)
                | u32::from(byte(3) & 0x3F);
            return is_candidate(cp);
        }
    };
    BMP[row & 0x3FF] >> column & 1 != 0
}

fn is_candidate(cp: u32) -> bool {
    let after = CANDIDATES.partition_point(|&(start, _)| start <= cp);
    after
        .checked_sub(1)
        .and_then(|i| CANDIDATES.get(i))
        .is_some_and(|&(_, end)| cp <= end)
}

#[cfg(test)]
mod tests {
    use super::super::skeleton::{Class, is_tag_character, is_variation_selector};
    use super::*;

    fn next_candidate(bytes: &[u8], from: usize) -> Option<usize> {
        Candidates::new(bytes).next_from(from)
    }

    #[test]
    fn every_relevant_character_is_a_candidate() {
        let mut buf = [0u8; 4];
        for c in (0..=0x10FFFF).filter_map(char::from_u32) {
            let class = Class::of(c);
            let relevant = class.begins(b'<')
                || class.begins(b'[')
                || is_tag_character(c)
                || is_variation_selector(c);
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

    /// The dense filter lets every candidate's first two bytes through, and every
    /// candidate is found inside dense CJK text at every offset of a block.
    #[test]
    fn the_dense_filter_covers_every_candidate() {
        let filler: String = "日本語のテキスト、「引用」。，"
            .chars()
            .cycle()
            .take(40)
            .collect();
        let mut buf = [0u8; 4];
        for &(start, end) in &CANDIDATES {
            for c in (start..=end).filter_map(char::from_u32) {
                let bytes = c.encode_utf8(&mut buf).as_bytes();
                assert!(may_start_relevant(bytes[0], bytes[1]), "U+{:04X}", c as u32);
                for cut in [0, 3, 30, 60] {
                    assert_first_candidate_at(&filler, cut, c);
                }
            }
        }
    }

    /// `c` inserted at `cut` of `text` is its first candidate, with and without the dense
    /// searches.
    fn assert_first_candidate_at(text: &str, cut: usize, c: char) {
        let mut body = text.to_owned();
        body.insert(cut, c);
        for searches in [DENSE.as_ref(), None] {
            let found = Candidates::with_searches(body.as_bytes(), searches, false).next_from(0);
            assert_eq!(found, Some(cut), "U+{:04X} at {cut}", c as u32);
        }
    }

    /// Every candidate is found at every offset of a block and the bytes after it, in
    /// prose whose other non-ASCII characters the lead mask leaves out (Latin-1 letters,
    /// curly quotes and dashes: E2 80 like `‹`).
    #[test]
    fn sparse_filter_covers_every_candidate() {
        let fillers = [
            "plain ascii words ",
            "caf\u{E9} \u{201C}na\u{EF}ve\u{201D} \u{2014} x ",
        ];
        for filler in fillers {
            let text: String = filler.chars().cycle().take(BLOCK * 2 + 8).collect();
            for &(start, end) in &CANDIDATES {
                for c in (start..=end).filter_map(char::from_u32) {
                    for (cut, _) in text
                        .char_indices()
                        .take_while(|&(at, _)| at <= BLOCK + PAST + 4)
                    {
                        assert_first_candidate_at(&text, cut, c);
                    }
                }
            }
        }
    }

    /// Long dense text, searched a region at a time: every candidate is found, in order,
    /// around the regions' edges too, from any starting point, with or without the dense
    /// searches.
    #[test]
    fn finds_candidates_across_dense_regions() {
        let mut body: String = "日本語のテキスト、「引用」。，ＡＢ"
            .chars()
            .cycle()
            .take(15_000)
            .collect();
        let needles = ['＜', '\u{FE0F}', '〈', '«', '\u{E0041}', '［', '‹'];
        let places = [
            100,
            REGION - 3,
            REGION - 1,
            REGION + 1,
            REGION + 5,
            2 * REGION + 1,
            40_000,
        ];
        for (i, at) in places.into_iter().enumerate().rev() {
            let at = body.floor_char_boundary(at);
            body.insert(at, needles[i % needles.len()]);
        }
        let expected = relevant(&body);
        assert!(expected.len() >= 7, "{expected:?}");
        for_each_search(body.as_bytes(), |candidates| {
            assert_eq!(all_of(candidates()), expected);
            for &at in &expected {
                let from = at.saturating_sub(5);
                let first = candidates().next_from(from);
                assert_eq!(first, expected.iter().copied().find(|&e| e >= from));
            }
        });
    }

    /// Where the characters that may begin a match are, by the test of each character.
    fn relevant(body: &str) -> Vec<usize> {
        body.char_indices()
            .filter(|&(at, _)| starts_relevant(body.as_bytes(), at))
            .map(|(at, _)| at)
            .collect()
    }

    /// Runs `check` with a maker of each kind of search over `bytes`: with and without
    /// the dense searches, running ahead and bounded.
    fn for_each_search<'a>(bytes: &'a [u8], mut check: impl FnMut(&dyn Fn() -> Candidates<'a>)) {
        for searches in [DENSE.as_ref(), None] {
            for bounded in [false, true] {
                check(&|| Candidates::with_searches(bytes, searches, bounded));
            }
        }
    }

    /// The next number of a deterministic generator (xorshift).
    fn next_random(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    /// The vector masks agree with reading each byte, for blocks of every mix of ASCII,
    /// lead and continuation bytes, every single byte at every position, and every byte
    /// after E2 80 at every position.
    #[test]
    fn byte_masks_agree_with_reading_each_byte() {
        let mut state = 0x9E37_79B9_7F4A_7C15;
        let mut blocks: Vec<[u8; BLOCK + PAST]> = (0..2000)
            .map(|_| {
                let mut block = [0u8; BLOCK + PAST];
                let spread = next_random(&mut state) % 4;
                for b in &mut block {
                    let r = next_random(&mut state);
                    *b = match spread {
                        0 => r as u8,
                        1 => 0x80 | (r as u8 & 0x7F),
                        2 => {
                            [0x3C, 0x80, 0xB9, 0xBF, 0xC0, 0xC3, 0xE2, 0xEF, 0xFF][(r % 9) as usize]
                        }
                        _ => (r as u8) & 0x7F,
                    };
                }
                block
            })
            .collect();
        for at in 0..BLOCK + PAST {
            for b in 0..=255u8 {
                let mut block = [b'a'; BLOCK + PAST];
                block[at] = b;
                blocks.push(block);
                // After E2 80, as its third byte.
                if at >= 2 {
                    block[at - 2] = 0xE2;
                    block[at - 1] = 0x80;
                    blocks.push(block);
                }
            }
        }
        for block in &blocks {
            assert_eq!(masks(block), masks_portable(block), "{block:02X?}");
        }
    }

    #[test]
    fn every_octet_holds_only_when_each_eight_bytes_have_a_bit() {
        assert!(every_octet(0x0101_0101_0101_0101));
        assert!(every_octet(0x8040_2010_0804_0201));
        assert!(every_octet(u64::MAX));
        for byte in 0..8 {
            for bit in 0..8 {
                let all = 0x8080_8080_8080_8080u64 | 1 << (byte * 8 + bit);
                assert!(every_octet(all));
                let without = 0x0101_0101_0101_0101u64 & !(0xFF << (byte * 8));
                assert!(!every_octet(without | 1 << (((byte + 1) % 8) * 8 + bit)));
            }
        }
        assert!(!every_octet(0));
    }

    /// Every candidate, asked for in order.
    fn all_of(mut candidates: Candidates<'_>) -> Vec<usize> {
        let mut found = Vec::new();
        let mut from = 0;
        while let Some(hit) = candidates.next_from(from) {
            found.push(hit);
            from = hit + 1;
        }
        found
    }

    /// A search that stops at each bracket finds what one that runs ahead finds, in
    /// text where brackets are dense, sparse or absent and non-ASCII is dense, sparse or
    /// absent, with candidates on either side of every bracket.
    #[test]
    fn a_bounded_search_finds_what_a_running_search_finds() {
        let pieces = [
            "plain words, no brackets. ",
            "a < b ",
            "Vec<T> ",
            "日本語のテキスト、「引用」。",
            "“quoted” — ",
            "café naïve ",
            "‹x› … ",
            "＜",
            "〈",
            "«",
            "\u{FE0F}",
            "[x] ",
        ];
        let mut rng = 0x9E37_79B9_7F4A_7C15_u64;
        for round in 0..200 {
            // Some bodies longer than a few dense regions.
            let len = if round % 10 == 0 { 3 * REGION } else { 6000 };
            let mut body = String::new();
            while body.len() < len {
                let random = next_random(&mut rng);
                let piece = pieces[(random % pieces.len() as u64) as usize];
                let times = 1 + (random >> 32) as usize % 60;
                for _ in 0..times {
                    body.push_str(piece);
                }
            }
            let expected = relevant(&body);
            for_each_search(body.as_bytes(), |candidates| {
                assert_eq!(all_of(candidates()), expected);
                // Queries that jump ahead, as a rewrite or a kept span does.
                let mut jumping = candidates();
                let mut from = 0;
                while let Some(hit) = jumping.next_from(from) {
                    assert_eq!(Some(&hit), expected.iter().find(|&&e| e >= from));
                    from = hit + 1 + (next_random(&mut rng) % 300) as usize;
                }
                assert!(expected.iter().all(|&e| e < from));
            });
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
