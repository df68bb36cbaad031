//! The skeleton of a text: the characters a model reads once invisible characters are
//! skipped and lookalike characters are folded to lowercase ASCII.
//!
//! The folding table is practical rather than complete: it covers the lookalikes that can
//! spell our tag vocabulary and chat tokens (fullwidth forms, Cyrillic, Greek and Armenian
//! letters that look Latin, small capitals, letterlike and mathematical alphanumeric
//! symbols, circled and squared letters, accented Latin-1 letters, and the brackets,
//! slashes, bars, underscores and hyphens that look like ours).

/// The black flag, the only base of a well-formed emoji tag sequence.
pub(super) const BLACK_FLAG: char = '\u{1F3F4}';
/// The cancel tag that ends an emoji tag sequence.
pub(super) const CANCEL_TAG: char = '\u{E007F}';

/// Whether `c` is a Unicode tag character (U+E0000–U+E007F).
pub(super) fn is_tag_character(c: char) -> bool {
    matches!(c as u32, 0xE0000..=0xE007F)
}

/// The ASCII character a tag character spells (U+E0020–U+E007E), if any.
pub(super) fn tag_ascii(c: char) -> Option<char> {
    match c as u32 {
        cp @ 0xE0020..=0xE007E => char::from_u32(cp - 0xE0000),
        _ => None,
    }
}

/// Whether a reader sees `c` as nothing of its own: zero-width and joiner characters, bidi
/// controls, fillers, variation selectors, combining marks (they decorate the previous
/// character, so `<` with an overlay still reads as `<`) and tag characters.
pub(super) fn is_ignorable(c: char) -> bool {
    matches!(
        c as u32,
        0x00AD
            | 0x0300..=0x036F
            | 0x061C
            | 0x115F
            | 0x1160
            | 0x17B4
            | 0x17B5
            | 0x180B..=0x180F
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x206F
            | 0x20D0..=0x20FF
            | 0x3164
            | 0xFE00..=0xFE0F
            | 0xFE20..=0xFE2F
            | 0xFEFF
            | 0xFFA0
            | 0x1D173..=0x1D17A
            | 0xE0000..=0xE007F
            | 0xE0100..=0xE01EF
    )
}

/// Folds `c` to the lowercase ASCII character it reads as, or returns it unchanged.
pub(super) fn fold(c: char) -> char {
    if c.is_ascii() {
        return c.to_ascii_lowercase();
    }
    let cp = c as u32;
    let folded = match cp {
        // Fullwidth ASCII.
        0xFF01..=0xFF5E => cp - 0xFEE0,
        // Mathematical alphanumeric letters: 13 styles of A–Z then a–z (the holes in the
        // block are unassigned, so folding them too does no harm).
        0x1D400..=0x1D6A3 => u32::from(b'a') + (cp - 0x1D400) % 52 % 26,
        0x1D7CE..=0x1D7FF => u32::from(b'0') + (cp - 0x1D7CE) % 10,
        // Parenthesized, circled, squared, negative circled and negative squared letters.
        0x249C..=0x24B5 => u32::from(b'a') + (cp - 0x249C),
        0x24B6..=0x24CF => u32::from(b'a') + (cp - 0x24B6),
        0x24D0..=0x24E9 => u32::from(b'a') + (cp - 0x24D0),
        0x1F130..=0x1F149 => u32::from(b'a') + (cp - 0x1F130),
        0x1F150..=0x1F169 => u32::from(b'a') + (cp - 0x1F150),
        0x1F170..=0x1F189 => u32::from(b'a') + (cp - 0x1F170),
        _ => match LOOKALIKES.binary_search_by_key(&cp, |&(from, _)| from) {
            Ok(i) => LOOKALIKES.get(i).map_or(cp, |&(_, to)| u32::from(to)),
            Err(_) => cp,
        },
    };
    char::from_u32(folded).map_or(c, |f| f.to_ascii_lowercase())
}

/// Lookalikes outside the ranges folded arithmetically, sorted by code point.
const LOOKALIKES: &[(u32, u8)] = &[
    (0x00AB, b'<'), // «
    (0x00BB, b'>'), // »
    (0x00C0, b'a'),
    (0x00C1, b'a'),
    (0x00C2, b'a'),
    (0x00C3, b'a'),
    (0x00C4, b'a'),
    (0x00C5, b'a'),
    (0x00C7, b'c'),
    (0x00C8, b'e'),
    (0x00C9, b'e'),
    (0x00CA, b'e'),
    (0x00CB, b'e'),
    (0x00CC, b'i'),
    (0x00CD, b'i'),
    (0x00CE, b'i'),
    (0x00CF, b'i'),
    (0x00D1, b'n'),
    (0x00D2, b'o'),
    (0x00D3, b'o'),
    (0x00D4, b'o'),
    (0x00D5, b'o'),
    (0x00D6, b'o'),
    (0x00D8, b'o'),
    (0x00D9, b'u'),
    (0x00DA, b'u'),
    (0x00DB, b'u'),
    (0x00DC, b'u'),
    (0x00DD, b'y'),
    (0x00E0, b'a'),
    (0x00E1, b'a'),
    (0x00E2, b'a'),
    (0x00E3, b'a'),
    (0x00E4, b'a'),
    (0x00E5, b'a'),
    (0x00E7, b'c'),
    (0x00E8, b'e'),
    (0x00E9, b'e'),
    (0x00EA, b'e'),
    (0x00EB, b'e'),
    (0x00EC, b'i'),
    (0x00ED, b'i'),
    (0x00EE, b'i'),
    (0x00EF, b'i'),
    (0x00F1, b'n'),
    (0x00F2, b'o'),
    (0x00F3, b'o'),
    (0x00F4, b'o'),
    (0x00F5, b'o'),
    (0x00F6, b'o'),
    (0x00F8, b'o'),
    (0x00F9, b'u'),
    (0x00FA, b'u'),
    (0x00FB, b'u'),
    (0x00FC, b'u'),
    (0x00FD, b'y'),
    (0x00FF, b'y'),
    (0x0131, b'i'), // dotless i
    (0x017F, b's'), // long s
    (0x01C0, b'|'), // dental click
    (0x0251, b'a'),
    (0x0261, b'g'),
    (0x0269, b'i'),
    (0x026A, b'i'),
    (0x0274, b'n'),
    (0x0280, b'r'),
    (0x028F, b'y'),
    (0x02C2, b'<'), // modifier letter left arrowhead
    (0x02C3, b'>'),
    (0x02CD, b'_'), // modifier letter low macron
    (0x0391, b'a'), // Greek capitals
    (0x0392, b'b'),
    (0x0395, b'e'),
    (0x0396, b'z'),
    (0x0397, b'h'),
    (0x0399, b'i'),
    (0x039A, b'k'),
    (0x039C, b'm'),
    (0x039D, b'n'),
    (0x039F, b'o'),
    (0x03A1, b'p'),
    (0x03A4, b't'),
    (0x03A5, b'y'),
    (0x03A7, b'x'),
    (0x03B1, b'a'), // Greek small letters
    (0x03B3, b'y'),
    (0x03B5, b'e'),
    (0x03B7, b'n'),
    (0x03B9, b'i'),
    (0x03BA, b'k'),
    (0x03BD, b'v'),
    (0x03BF, b'o'),
    (0x03C1, b'p'),
    (0x03C4, b't'),
    (0x03C5, b'u'),
    (0x03C7, b'x'),
    (0x0405, b's'), // Cyrillic capitals
    (0x0406, b'i'),
    (0x0408, b'j'),
    (0x0410, b'a'),
    (0x0412, b'b'),
    (0x0415, b'e'),
    (0x041A, b'k'),
    (0x041C, b'm'),
    (0x041D, b'h'),
    (0x041E, b'o'),
    (0x0420, b'p'),
    (0x0421, b'c'),
    (0x0422, b't'),
    (0x0423, b'y'),
    (0x0425, b'x'),
    (0x0430, b'a'), // Cyrillic small letters
    (0x0435, b'e'),
    (0x043E, b'o'),
    (0x0440, b'p'),
    (0x0441, b'c'),
    (0x0443, b'y'),
    (0x0445, b'x'),
    (0x0455, b's'),
    (0x0456, b'i'),
    (0x0458, b'j'),
    (0x04BB, b'h'),
    (0x04C0, b'l'),
    (0x04CF, b'l'),
    (0x0501, b'd'),
    (0x051A, b'q'),
    (0x051B, b'q'),
    (0x051C, b'w'),
    (0x051D, b'w'),
    (0x0570, b'h'), // Armenian
    (0x0578, b'n'),
    (0x057D, b'u'),
    (0x0585, b'o'),
    (0x05C0, b'|'), // Hebrew paseq
    (0x1433, b'>'), // Canadian syllabics
    (0x1438, b'<'),
    (0x1D00, b'a'), // small capitals
    (0x1D04, b'c'),
    (0x1D05, b'd'),
    (0x1D07, b'e'),
    (0x1D0D, b'm'),
    (0x1D0F, b'o'),
    (0x1D1B, b't'),
    (0x1D1C, b'u'),
    (0x2010, b'-'), // hyphens and dashes
    (0x2011, b'-'),
    (0x2012, b'-'),
    (0x2013, b'-'),
    (0x2014, b'-'),
    (0x2015, b'-'),
    (0x2017, b'_'), // double low line
    (0x2039, b'<'),
    (0x203A, b'>'),
    (0x2044, b'/'), // fraction slash
    (0x210A, b'g'),
    (0x210E, b'h'),
    (0x2113, b'l'),
    (0x212F, b'e'),
    (0x2134, b'o'),
    (0x2160, b'i'), // Roman numerals
    (0x216D, b'c'),
    (0x216E, b'd'),
    (0x216F, b'm'),
    (0x2170, b'i'),
    (0x217D, b'c'),
    (0x217E, b'd'),
    (0x217F, b'm'),
    (0x2212, b'-'), // minus sign
    (0x2215, b'/'), // division slash
    (0x2223, b'|'), // divides
    (0x2329, b'<'),
    (0x232A, b'>'),
    (0x23D0, b'|'),
    (0x2502, b'|'), // box drawing
    (0x2571, b'/'),
    (0x2581, b'_'), // lower one eighth block, the word separator of some vocabularies
    (0x2758, b'|'),
    (0x276C, b'<'),
    (0x276D, b'>'),
    (0x276E, b'<'),
    (0x276F, b'>'),
    (0x27E8, b'<'),
    (0x27E9, b'>'),
    (0x27EA, b'<'),
    (0x27EB, b'>'),
    (0x29F8, b'/'), // big solidus
    (0x29FC, b'<'),
    (0x29FD, b'>'),
    (0x3008, b'<'), // CJK angle brackets
    (0x3009, b'>'),
    (0x300A, b'<'),
    (0x300B, b'>'),
    (0xA731, b's'),
    (0xFE33, b'_'),
    (0xFE34, b'_'),
    (0xFE4D, b'_'),
    (0xFE4E, b'_'),
    (0xFE4F, b'_'),
    (0xFE58, b'-'),
    (0xFE63, b'-'), // small forms
    (0xFE64, b'<'),
    (0xFE65, b'>'),
    (0xFFE8, b'|'),
];

/// A position in a text that reads it as its skeleton. It always rests on a character
/// that is not ignorable (or at the end), so looking ahead costs one decode.
#[derive(Clone, Copy)]
pub(super) struct Cursor<'a> {
    text: &'a str,
    pos: usize,
    /// End of the last character consumed, so a match does not swallow trailing
    /// ignorable characters.
    consumed: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at byte `pos` of `text`, which must be a character boundary (else the
    /// cursor reads nothing).
    pub(super) fn at(text: &'a str, pos: usize) -> Self {
        let mut cursor = Cursor {
            text,
            pos,
            consumed: pos,
        };
        cursor.settle();
        cursor
    }

    fn settle(&mut self) {
        let Some(rest) = self.text.get(self.pos..) else {
            self.pos = self.text.len();
            return;
        };
        for c in rest.chars() {
            if !is_ignorable(c) {
                return;
            }
            self.pos += c.len_utf8();
        }
    }

    /// The next skeleton character and the byte offset of its first byte.
    pub(super) fn peek_at(&self) -> Option<(char, usize)> {
        let c = self.text.get(self.pos..)?.chars().next()?;
        Some((fold(c), self.pos))
    }

    /// The next skeleton character.
    pub(super) fn peek(&self) -> Option<char> {
        self.peek_at().map(|(c, _)| c)
    }

    /// Consumes the next character.
    pub(super) fn bump(&mut self) {
        if let Some(c) = self
            .text
            .get(self.pos..)
            .and_then(|rest| rest.chars().next())
        {
            self.pos += c.len_utf8();
            self.consumed = self.pos;
            self.settle();
        }
    }

    /// Consumes the next character if it reads as `want`.
    pub(super) fn eat(&mut self, want: char) -> bool {
        let hit = self.peek() == Some(want);
        if hit {
            self.bump();
        }
        hit
    }

    /// Consumes characters while they satisfy `pred`; returns how many.
    pub(super) fn eat_while(&mut self, pred: impl Fn(char) -> bool) -> usize {
        let mut n = 0;
        while self.peek().is_some_and(&pred) {
            self.bump();
            n += 1;
        }
        n
    }

    /// Consumes whitespace of any script.
    pub(super) fn eat_whitespace(&mut self) {
        self.eat_while(char::is_whitespace);
    }

    /// Consumes `word` (lowercase ASCII) if the skeleton reads it next.
    pub(super) fn eat_word(&mut self, word: &str) -> bool {
        let mut ahead = *self;
        for b in word.chars() {
            if !ahead.eat(b) {
                return false;
            }
        }
        *self = ahead;
        true
    }

    /// End of the last character consumed.
    pub(super) fn consumed(&self) -> usize {
        self.consumed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookalike_table_is_sorted_and_unique() {
        assert!(LOOKALIKES.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn folds_lookalikes_to_ascii() {
        let spelled = "ＵＮＴＲＵＳＴＥＤ＿ｃｏｎｔｅｎｔ";
        assert_eq!(
            spelled.chars().map(fold).collect::<String>(),
            "untrusted_content"
        );
        let cyrillic_greek = "\u{0455}\u{0443}\u{0455}\u{03C4}\u{0435}m"; // ѕуѕτеm
        assert_eq!(
            cyrillic_greek.chars().map(fold).collect::<String>(),
            "system"
        );
        assert_eq!(fold('𝐦'), 'm');
        assert_eq!(fold('𝟗'), '9');
        assert_eq!(fold('ⓜ'), 'm');
        for bracket in ['＜', '﹤', '〈', '⟨', '‹', 'ᐸ', '〈', '˂', '«'] {
            assert_eq!(fold(bracket), '<', "{bracket}");
        }
        for slash in ['／', '∕', '⁄', '⧸'] {
            assert_eq!(fold(slash), '/', "{slash}");
        }
        assert_eq!(fold('日'), '日');
    }

    #[test]
    fn cursor_skips_ignorables_and_records_consumed_end() {
        let text = "a\u{200B}b\u{2060}";
        let mut cursor = Cursor::at(text, 0);
        assert!(cursor.eat_word("ab"));
        assert_eq!(cursor.consumed(), 5);
        assert_eq!(cursor.peek(), None);
    }
}
