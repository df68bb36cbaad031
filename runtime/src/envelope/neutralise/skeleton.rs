//! The skeleton of a text: what a reader takes each character for, from the generated
//! table in `readings.rs` (UTS #39 confusables, NFKC, case folding; see `generate.rs`).
//! Invisible characters (general categories Mn, Me and Cf, and default-ignorable code
//! points) are skipped; every other character has up to two readings in printable ASCII
//! (`ｍ` reads `rn`, as the skeleton reads `m`; `Ν` reads `v` and `n`), or is filler
//! (punctuation and symbols without one), or reads as nothing we look for.

use super::readings::{ASCII, READINGS, RUN_CLASSES, RUN_STARTS, VARIATION_SELECTORS};
use crate::const_str::eq;

/// The class of a character that reads as nothing we look for.
pub(super) const OTHER: u16 = 0;
/// The class of invisible characters.
pub(super) const INVISIBLE: u16 = 1;
/// Classes from this one up (below the flags) refer to `READINGS[class - READING_BASE]`.
pub(super) const READING_BASE: u16 = 2;
/// Set on the class of punctuation (general category P).
pub(super) const PUNCTUATION: u16 = 0x4000;
/// Set on the class of symbols (general category S).
pub(super) const SYMBOL: u16 = 0x2000;
/// Set on the class of a punctuation or symbol character that reads as `l` (`|`, `｜`).
pub(super) const BAR: u16 = 0x8000;
/// The flag bits.
const FLAGS: u16 = PUNCTUATION | SYMBOL | BAR;

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

/// Whether `c` is a variation selector (the Unicode property Variation_Selector).
pub(super) fn is_variation_selector(c: char) -> bool {
    let cp = c as u32;
    VARIATION_SELECTORS
        .iter()
        .any(|&(start, end)| (start..=end).contains(&cp))
}

/// What a reader takes a character for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Class(u16);

impl Class {
    /// The class of `c`.
    pub(super) fn of(c: char) -> Class {
        let cp = c as u32;
        if let Some(&class) = ASCII.get(cp as usize) {
            return Class(class);
        }
        let run = RUN_STARTS.partition_point(|&start| start <= cp);
        Class(
            run.checked_sub(1)
                .and_then(|run| RUN_CLASSES.get(run))
                .copied()
                .unwrap_or(OTHER),
        )
    }

    /// The class of the ASCII byte `b` (of `b & 0x7F`).
    pub(super) const fn of_ascii(b: u8) -> Class {
        Class(ASCII[(b & 0x7F) as usize])
    }

    pub(super) const fn is_invisible(self) -> bool {
        self.0 == INVISIBLE
    }

    /// Punctuation or a symbol without a reading (`※`, `▁`).
    pub(super) fn is_filler(self) -> bool {
        self.0 & !FLAGS == OTHER && self.0 & (PUNCTUATION | SYMBOL) != 0
    }

    pub(super) const fn is_bar(self) -> bool {
        self.0 & BAR != 0
    }

    /// The readings: one or two, or none.
    pub(super) const fn readings(self) -> [&'static str; 2] {
        let id = self.0 & !FLAGS;
        if id < READING_BASE || (id - READING_BASE) as usize >= READINGS.len() {
            return ["", ""];
        }
        let (first, second) = READINGS[(id - READING_BASE) as usize];
        [first, second]
    }

    /// The first reading (empty when there is none).
    pub(super) const fn reading(self) -> &'static str {
        self.readings()[0]
    }

    /// Whether some reading begins with `c`.
    pub(super) const fn begins(self, c: u8) -> bool {
        let [first, second] = self.readings();
        matches!(first.as_bytes(), [b, ..] if *b == c)
            || matches!(second.as_bytes(), [b, ..] if *b == c)
    }

    /// Whether some reading is exactly `text`.
    pub(super) const fn reads(self, text: &str) -> bool {
        let [first, second] = self.readings();
        eq(first, text) || eq(second, text)
    }

    pub(super) const fn is_whitespace(self) -> bool {
        self.reads(" ")
    }

    /// Punctuation or a symbol (general category P or S), whatever it reads as (`¡`
    /// reads as `l` and `🅼` as `m`, and both are marks); brackets and bars too.
    pub(super) const fn is_mark(self) -> bool {
        self.0 & (PUNCTUATION | SYMBOL) != 0
    }

    /// Whether the first reading is a letter, digit, `_` or `-`: part of an id.
    pub(super) fn is_id(self) -> bool {
        let reading = self.reading();
        !reading.is_empty()
            && reading
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    }
}

/// A position in a text that reads it as its skeleton. It always rests on a character
/// that is not invisible (or at the end), so looking ahead costs one decode.
#[derive(Clone, Copy)]
pub(super) struct Cursor<'a> {
    text: &'a str,
    pos: usize,
    /// End of the last character consumed, so a match does not swallow trailing
    /// invisible characters.
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
            if !Class::of(c).is_invisible() {
                return;
            }
            self.pos += c.len_utf8();
        }
    }

    /// The next visible character.
    pub(super) fn peek_char(&self) -> Option<char> {
        self.text.get(self.pos..)?.chars().next()
    }

    /// The class of the next visible character.
    pub(super) fn peek(&self) -> Option<Class> {
        self.peek_char().map(Class::of)
    }

    /// Byte offset of the next visible character.
    pub(super) fn pos(&self) -> usize {
        self.pos
    }

    /// Consumes the next character.
    pub(super) fn bump(&mut self) {
        if let Some(c) = self.peek_char() {
            self.pos += c.len_utf8();
            self.consumed = self.pos;
            self.settle();
        }
    }

    /// Consumes the next character if some reading of it is exactly `want`.
    pub(super) fn eat(&mut self, want: &str) -> bool {
        let hit = self.peek().is_some_and(|class| class.reads(want));
        if hit {
            self.bump();
        }
        hit
    }

    /// Consumes characters while their class satisfies `pred`; returns how many.
    pub(super) fn eat_while(&mut self, pred: impl Fn(Class) -> bool) -> usize {
        let mut n = 0;
        while self.peek().is_some_and(&pred) {
            self.bump();
            n += 1;
        }
        n
    }

    /// Consumes whitespace of any script.
    pub(super) fn eat_whitespace(&mut self) {
        self.eat_while(Class::is_whitespace);
    }

    /// Consumes characters whose readings spell `word` (lowercase ASCII, itself already
    /// read: `rnernory` for `memory`), with any of `.`, `:`, `-`, `_` between them.
    pub(super) fn eat_reading(&mut self, word: &[u8]) -> bool {
        match spell(*self, word) {
            Some(after) => {
                *self = after;
                true
            }
            None => false,
        }
    }

    /// End of the last character consumed.
    pub(super) fn consumed(&self) -> usize {
        self.consumed
    }
}

/// Whether `class` may sit inside a word of a name: `.`, `:`, `-` or `_`.
pub(super) const fn is_inner_separator(class: Class) -> bool {
    class.reads(".") || class.reads(":") || class.reads("-") || class.reads("_")
}

/// The cursor after the characters that spell `word`, trying each reading of each
/// character (a word is short and a character has at most two readings).
fn spell<'a>(cursor: Cursor<'a>, word: &[u8]) -> Option<Cursor<'a>> {
    if word.is_empty() {
        return Some(cursor);
    }
    let class = cursor.peek()?;
    let [first, second] = class.readings();
    for reading in [first, second] {
        let Some(rest) = word
            .strip_prefix(reading.as_bytes())
            .filter(|_| !reading.is_empty())
        else {
            continue;
        };
        let mut next = cursor;
        next.bump();
        if !rest.is_empty() {
            next.eat_while(is_inner_separator);
        }
        if let Some(done) = spell(next, rest) {
            return Some(done);
        }
        if first == second {
            break;
        }
    }
    None
}

/// The first reading of an ASCII byte, in a form constants can use.
pub(super) const fn ascii_reading(b: u8) -> &'static str {
    let class = ASCII[(b & 0x7F) as usize] & !FLAGS;
    if class < READING_BASE {
        return "";
    }
    READINGS[(class - READING_BASE) as usize].0
}

/// The reading of an ASCII word of our vocabulary (`memory` reads `rnernory`): the same
/// table applied to the vocabulary as to the text.
pub(super) fn read_ascii(word: &str) -> impl Iterator<Item = u8> + '_ {
    word.bytes().flat_map(|b| ascii_reading(b).bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(text: &str) -> String {
        text.chars()
            .map(Class::of)
            .filter(|class| !class.is_invisible())
            .map(Class::reading)
            .collect()
    }

    #[test]
    fn the_table_reads_lookalikes_as_ascii() {
        assert_eq!(
            reading("ＵＮＴＲＵＳＴＥＤ＿ｃｏｎｔｅｎｔ"),
            "untrusted_content"
        );
        // Cyrillic and Greek letters; the skeleton reads `m` as `rn`, `i` and `I` as `l`.
        assert_eq!(
            reading("\u{0455}\u{0443}\u{0455}\u{03C4}\u{0435}m"),
            "systern"
        );
        assert_eq!(reading("INSTRUCTIONS"), reading("instructions"));
        assert_eq!(reading("𝐦"), "rn");
        assert_eq!(reading("ⓜ"), "rn");
        assert_eq!(reading("🅼"), "rn");
        for bracket in ['＜', '﹤', '〈', '⟨', '‹', 'ᐸ', '〈', '˂', '«', '❮', 'ᚲ'] {
            assert!(Class::of(bracket).begins(b'<'), "{bracket}");
        }
        for slash in ['／', '∕', '⁄', '⧸', 'ノ'] {
            assert!(Class::of(slash).reads("/"), "{slash}");
        }
        assert!(Class::of('｜').is_bar() && Class::of('|').is_bar());
        assert!(!Class::of('l').is_bar());
        assert!(Class::of('\u{200B}').is_invisible());
        assert!(Class::of('\u{0301}').is_invisible());
        assert!(Class::of('\u{E0041}').is_invisible());
        assert!(Class::of('\u{3000}').is_whitespace());
        assert!(Class::of('※').is_filler() && Class::of('¡').is_mark() && Class::of('🅼').is_mark());
        assert!(!Class::of('m').is_mark() && !Class::of('\u{3000}').is_mark());
        assert_eq!(Class::of('日').readings(), ["", ""]);
        // Greek capital Nu reads as `v` once folded and as `n` unfolded.
        assert!(Class::of('Ν').reads("n") && Class::of('Ν').reads("v"));
    }

    #[test]
    fn cursor_skips_invisibles_and_records_consumed_end() {
        let text = "a\u{200B}b\u{2060}";
        let mut cursor = Cursor::at(text, 0);
        assert!(cursor.eat_reading(b"ab"));
        assert_eq!(cursor.consumed(), 5);
        assert_eq!(cursor.peek(), None);
    }

    #[test]
    fn words_are_spelled_through_readings_and_inner_separators() {
        let word: Vec<u8> = read_ascii("memory").collect();
        assert_eq!(word, b"rnernory");
        for text in [
            "memory",
            "MEMORY",
            "rnemory",
            "m.e.m.o.r.y",
            "ｍｅｍ-ｏｒｙ",
            "Μemory",
        ] {
            let mut cursor = Cursor::at(text, 0);
            assert!(cursor.eat_reading(&word), "{text}");
            assert_eq!(cursor.consumed(), text.len(), "{text}");
        }
        for text in ["memorx", "mem ory", "memo"] {
            assert!(!Cursor::at(text, 0).eat_reading(&word), "{text}");
        }
    }
}
