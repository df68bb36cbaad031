//! Characters a person may take for others: what a reviewer must be told before approving
//! a call to `ann@exаmple.com` (a Cyrillic `а`) or one with two keys that both read `to`
//! (the second's `о` Cyrillic). The data is the UTS #39 data the neutraliser's table is
//! generated from (`unicode-security`: script extensions and the confusables skeleton),
//! with NFKC for compatibility forms.
//!
//! A text is read word by word (words end at whitespace and at [`is_unseen`] characters),
//! and a character is marked when:
//!
//! - its word **mixes scripts** (its resolved script set, UTS #39's, is empty): each
//!   character of a script other than the word's most frequent one (`а` in `exаmple`);
//! - its word is of **one other script but reads as Latin** in a text whose Latin words
//!   are at least as many as that script's: every letter of the word looks like an ASCII
//!   one (`аррӏе` in `pay аррӏе`, not `хорошо` in Russian text);
//! - it is a **lookalike**: a Latin or script-neutral letter or digit that is not ASCII and
//!   reads as ASCII (fullwidth `ｅ`, `ɑ`, mathematical `𝐚`, `ı`), or punctuation that
//!   reads as `.`, `@`, `/` or `:` (`․`, `＠`); a Latin letter whose decomposition shows a
//!   visible diacritic (`é`, `ü`) is not marked;
//! - it is **invisible** or drives the display ([`is_unseen`]), other than a line break or
//!   a tab.

use std::fmt;

use unicode_normalization::UnicodeNormalization;
use unicode_script::{Script, ScriptExtension};
use unicode_security::mixed_script::AugmentedScriptSet;
use unicode_security::skeleton;

use super::inert::is_unseen;

/// A character a person may take for another, and why it is marked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confusable {
    /// Its byte offset in the text.
    pub at: usize,
    /// The character.
    pub character: char,
    /// Why it is marked.
    pub kind: ConfusableKind,
    /// Its script's name (`Cyrillic`; `Common` for script-neutral characters).
    pub script: &'static str,
    /// The ASCII it reads as (the confusables skeleton, or its NFKC form), if any.
    pub looks_like: Option<String>,
}

/// Why a character is marked (see the [module](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfusableKind {
    /// Its word mixes scripts, and it is not of the word's main script (named).
    MixedScript {
        /// The script of most of the word's other characters.
        among: &'static str,
    },
    /// Its word is of another script than Latin, yet every letter of it reads as a Latin
    /// one, in a text of at least as many Latin words.
    WholeScript,
    /// Not ASCII, yet it reads as ASCII.
    Lookalike,
    /// Invisible, or it breaks, hides or reorders text.
    Invisible,
}

impl Confusable {
    /// The character's Unicode name (`CYRILLIC SMALL LETTER A`), or `UNNAMED` for one
    /// without.
    pub fn name(&self) -> String {
        unicode_names2::name(self.character)
            .map_or_else(|| "UNNAMED".to_owned(), |name| name.to_string())
    }
}

/// `U+0430 CYRILLIC SMALL LETTER A (Cyrillic among Latin, looks like "a")`.
impl fmt::Display for Confusable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "U+{:04X} {} (", u32::from(self.character), self.name())?;
        match self.kind {
            ConfusableKind::MixedScript { among } => write!(f, "{} among {among}", self.script)?,
            ConfusableKind::WholeScript => {
                write!(f, "{}, in a word that reads as Latin", self.script)?;
            }
            ConfusableKind::Lookalike => write!(f, "{}, not ASCII", self.script)?,
            ConfusableKind::Invisible => f.write_str("invisible, or breaks or reorders text")?,
        }
        if let Some(ascii) = &self.looks_like {
            write!(f, ", looks like \"{ascii}\"")?;
        }
        f.write_str(")")
    }
}

/// Every character of `text` a person may take for another (see the [module](self)), in
/// the order of the text. Empty for plain ASCII, and for ordinary text of one script.
///
/// ```
/// use tooltrust::envelope::{ConfusableKind, confusables};
///
/// let found = confusables("ann@ex\u{430}mple.com");
/// assert_eq!(found.len(), 1);
/// assert_eq!(found[0].character, '\u{430}');
/// assert_eq!(found[0].kind, ConfusableKind::MixedScript { among: "Latin" });
/// assert_eq!(
///     found[0].to_string(),
///     "U+0430 CYRILLIC SMALL LETTER A (Cyrillic among Latin, looks like \"a\")"
/// );
/// assert!(confusables("Grüße aus Zürich, café").is_empty());
/// ```
pub fn confusables(text: &str) -> Vec<Confusable> {
    let mut found = Vec::new();
    let mut words = Vec::new();
    let mut start = None;
    for (at, c) in text.char_indices() {
        let unseen = is_unseen(c);
        if !unseen && !c.is_whitespace() {
            start.get_or_insert(at);
            continue;
        }
        if let Some(start) = start.take() {
            words.push(Word::of(text, start, at));
        }
        if unseen && !matches!(c, '\n' | '\r' | '\t') {
            found.push(Confusable {
                at,
                character: c,
                kind: ConfusableKind::Invisible,
                script: script_of(c),
                looks_like: None,
            });
        }
    }
    if let Some(start) = start {
        words.push(Word::of(text, start, text.len()));
    }
    // How many words of one script each script has: a word of another script reads as
    // Latin only where Latin words are at least as many.
    let mut counts: Vec<(Script, usize)> = Vec::new();
    for word in &words {
        if word.resolved.is_empty() || word.resolved.is_all() {
            continue;
        }
        for script in word.resolved.base.iter() {
            match counts.iter_mut().find(|(seen, _)| *seen == script) {
                Some((_, count)) => *count += 1,
                None => counts.push((script, 1)),
            }
        }
    }
    let count = |script: Script| {
        counts
            .iter()
            .find(|(seen, _)| *seen == script)
            .map_or(0, |(_, count)| *count)
    };
    let latin = count(Script::Latin);
    for word in &words {
        let among_latin = latin > 0
            && !word.resolved.base.contains_script(Script::Latin)
            && word
                .resolved
                .base
                .iter()
                .all(|script| count(script) <= latin);
        word.mark(text, among_latin, &mut found);
    }
    found.sort_by_key(|confusable| confusable.at);
    found
}

/// How many distinct characters [`confusable_note`] names before it only counts.
pub const NOTE_CHARACTERS: usize = 8;

/// One line naming the distinct characters of `text` a person may take for others, each
/// once, at most [`NOTE_CHARACTERS`] (then how many more); `None` when there is none.
/// What a reviewer is shown beside a value, wherever it is shown.
pub fn confusable_note(text: &str) -> Option<String> {
    let found = confusables(text);
    let mut seen = std::collections::HashSet::new();
    let mut named = Vec::new();
    for confusable in &found {
        if seen.insert(confusable.character) && named.len() < NOTE_CHARACTERS {
            named.push(confusable.to_string());
        }
    }
    if named.is_empty() {
        return None;
    }
    let mut note = named.join("; ");
    if seen.len() > named.len() {
        note.push_str(&format!("; and {} more", seen.len() - named.len()));
    }
    Some(note)
}

/// A run of text without whitespace or [`is_unseen`] characters.
struct Word {
    start: usize,
    end: usize,
    /// Its characters of a script (Common and Inherited ones go with any), and their
    /// augmented script sets.
    scripted: Vec<(usize, char, AugmentedScriptSet)>,
    /// UTS #39's resolved script set: empty when the word mixes scripts.
    resolved: AugmentedScriptSet,
}

impl Word {
    fn of(text: &str, start: usize, end: usize) -> Word {
        let scripted: Vec<(usize, char, AugmentedScriptSet)> = text[start..end]
            .char_indices()
            .map(|(at, c)| (start + at, c, AugmentedScriptSet::for_char(c)))
            .filter(|(_, _, set)| !set.is_all())
            .collect();
        let mut resolved = AugmentedScriptSet::default();
        for (_, _, set) in &scripted {
            resolved.intersect_with(*set);
        }
        Word {
            start,
            end,
            scripted,
            resolved,
        }
    }

    /// Marks its characters; `among_latin`: the word is of one script, not Latin, in a
    /// text where Latin words are at least as many as that script's.
    fn mark(&self, text: &str, among_latin: bool, found: &mut Vec<Confusable>) {
        let from = found.len();
        if self.resolved.is_empty() {
            let among = main_script(&self.scripted);
            for &(at, c, set) in &self.scripted {
                if !set.base.contains_script(among) {
                    found.push(Confusable {
                        at,
                        character: c,
                        kind: ConfusableKind::MixedScript {
                            among: among.full_name(),
                        },
                        script: script_of(c),
                        looks_like: looks_like(c),
                    });
                }
            }
        } else if among_latin
            && self
                .scripted
                .iter()
                .all(|&(_, c, _)| looks_like(c).is_some_and(|ascii| is_word(&ascii)))
        {
            for &(at, c, _) in &self.scripted {
                found.push(Confusable {
                    at,
                    character: c,
                    kind: ConfusableKind::WholeScript,
                    script: script_of(c),
                    looks_like: looks_like(c),
                });
            }
        }
        // Marked for their script, in the order of the text.
        let scripts = found.len();
        for (at, c) in text[self.start..self.end].char_indices() {
            let at = self.start + at;
            if c.is_ascii()
                || found[from..scripts]
                    .binary_search_by_key(&at, |marked| marked.at)
                    .is_ok()
            {
                continue;
            }
            let set = ScriptExtension::from(c);
            if !(set.is_common() || set.is_inherited() || set.contains_script(Script::Latin)) {
                continue;
            }
            let Some(ascii) = looks_like(c) else {
                continue;
            };
            let lookalike = if c.is_alphanumeric() {
                is_word(&ascii) && !decorated(c)
            } else {
                matches!(ascii.as_str(), "." | "@" | "/" | ":")
            };
            if lookalike {
                found.push(Confusable {
                    at,
                    character: c,
                    kind: ConfusableKind::Lookalike,
                    script: script_of(c),
                    looks_like: Some(ascii),
                });
            }
        }
    }
}

/// The script most of `scripted` share (Latin on a tie with it, else the first seen).
fn main_script(scripted: &[(usize, char, AugmentedScriptSet)]) -> Script {
    let mut counts: Vec<(Script, usize)> = Vec::new();
    for (_, _, set) in scripted {
        for script in set.base.iter() {
            match counts.iter_mut().find(|(seen, _)| *seen == script) {
                Some((_, count)) => *count += 1,
                None => counts.push((script, 1)),
            }
        }
    }
    let mut best = (Script::Latin, 0);
    for (script, count) in counts {
        if count > best.1 || (count == best.1 && script == Script::Latin) {
            best = (script, count);
        }
    }
    best.0
}

fn script_of(c: char) -> &'static str {
    unicode_script::UnicodeScript::script(&c).full_name()
}

/// What `c` reads as in printable ASCII: its NFKC form (`ｅ`, `𝐚`, `ﬁ`), else its
/// confusables skeleton when that is one character (`а`, `ɑ`; not `Æ`, whose skeleton is
/// `AE`).
fn looks_like(c: char) -> Option<String> {
    let printable =
        |text: &str| !text.is_empty() && text.bytes().all(|b| (0x21..0x7F).contains(&b));
    let compatible: String = std::iter::once(c).nfkc().collect();
    if printable(&compatible) {
        return Some(compatible);
    }
    let mut one = [0u8; 4];
    let confusable: String = skeleton(c.encode_utf8(&mut one)).collect();
    (printable(&confusable) && confusable.len() == 1).then_some(confusable)
}

/// ASCII letters and digits only.
fn is_word(ascii: &str) -> bool {
    ascii.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// A letter shown with a diacritic a reader sees (`é` is `e` and an acute accent).
fn decorated(c: char) -> bool {
    let mut parts = std::iter::once(c).nfd();
    parts.next().is_some_and(|base| base.is_ascii()) && parts.next().is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marked(text: &str) -> Vec<(char, ConfusableKind)> {
        confusables(text)
            .into_iter()
            .map(|confusable| (confusable.character, confusable.kind))
            .collect()
    }

    const AMONG_LATIN: ConfusableKind = ConfusableKind::MixedScript { among: "Latin" };

    #[test]
    fn a_letter_of_another_script_in_a_latin_word_is_named() {
        assert_eq!(marked("ann@ex\u{430}mple.com"), [('\u{430}', AMONG_LATIN)]);
        // A two-letter key: the tie goes to Latin, so the Cyrillic `о` is the odd one.
        let key = confusables("t\u{43E}");
        assert_eq!(key.len(), 1);
        assert_eq!(key[0].at, 1);
        assert_eq!(
            key[0].to_string(),
            "U+043E CYRILLIC SMALL LETTER O (Cyrillic among Latin, looks like \"o\")"
        );
        assert_eq!(
            marked("p\u{430}yp\u{430}l"),
            [('\u{430}', AMONG_LATIN), ('\u{430}', AMONG_LATIN)]
        );
        // Greek among Latin, Latin among Cyrillic.
        assert_eq!(
            marked("g\u{3BF}\u{3BF}gle"),
            [('\u{3BF}', AMONG_LATIN), ('\u{3BF}', AMONG_LATIN)]
        );
        assert_eq!(
            marked("пpивет"),
            [('p', ConfusableKind::MixedScript { among: "Cyrillic" })]
        );
    }

    #[test]
    fn a_word_of_another_script_that_reads_as_latin_is_named_in_latin_text() {
        let found = marked("pay \u{430}\u{440}\u{440}\u{4CF}\u{435} now");
        assert_eq!(found.len(), 5, "{found:?}");
        assert!(
            found
                .iter()
                .all(|(_, kind)| *kind == ConfusableKind::WholeScript)
        );
        // The same word in Cyrillic text is Cyrillic text.
        assert!(marked("\u{430}\u{440}\u{440}\u{4CF}\u{435} и пример").is_empty());
    }

    #[test]
    fn lookalikes_and_invisible_characters_are_named() {
        assert_eq!(
            marked("\u{FF45}xample"),
            [('\u{FF45}', ConfusableKind::Lookalike)]
        );
        assert_eq!(
            marked("ex\u{251}mple"),
            [('\u{251}', ConfusableKind::Lookalike)]
        );
        assert_eq!(
            marked("\u{1D41A}dmin"),
            [('\u{1D41A}', ConfusableKind::Lookalike)]
        );
        assert_eq!(
            marked("example\u{2024}com"),
            [('\u{2024}', ConfusableKind::Lookalike)]
        );
        assert_eq!(
            marked("pay\u{200B}pal \u{202E}x\u{1b}"),
            [
                ('\u{200B}', ConfusableKind::Invisible),
                ('\u{202E}', ConfusableKind::Invisible),
                ('\u{1b}', ConfusableKind::Invisible)
            ]
        );
        let fullwidth = &confusables("\u{FF45}")[0];
        assert_eq!(fullwidth.looks_like.as_deref(), Some("e"));
        assert_eq!(fullwidth.name(), "FULLWIDTH LATIN SMALL LETTER E");
    }

    #[test]
    fn ordinary_text_is_not_marked() {
        for text in [
            "",
            "ann@example.com",
            "Grüße aus Zürich, café, naïve, mañana, Ærø",
            "Привет! Как дела? Всё хорошо.",
            "Καλημέρα κόσμε",
            "日本語のテキスト、カタカナ",
            "한국어 텍스트",
            "It’s 10–12 “quoted” — fine… 1½ × 2 ™ ©",
            "line one\nline two\ttabbed\r\n",
            "emoji 🦀 🎉",
            "Привет, John: как дела? Всё хорошо, спасибо, сэр.",
            "Ελπίζω ότι ο John είναι καλά",
        ] {
            assert!(confusables(text).is_empty(), "{text}: {:?}", marked(text));
        }
    }

    #[test]
    fn a_long_word_of_mixed_scripts_is_read_once() {
        // Every other letter Cyrillic, with a lookalike among them: each is found once,
        // in the order of the text, and the note names the two characters.
        let text = "a\u{430}".repeat(50_000) + "\u{FF45}";
        let found = confusables(&text);
        assert_eq!(found.len(), 50_001);
        assert!(found.windows(2).all(|pair| pair[0].at < pair[1].at));
        let note = confusable_note(&text).expect("a note");
        assert_eq!(note.matches("U+").count(), 2, "{note}");
    }

    #[test]
    fn a_note_names_each_character_once_and_counts_the_rest() {
        assert_eq!(confusable_note("example"), None);
        let note = confusable_note("p\u{430}yp\u{430}l").expect("a note");
        assert_eq!(
            note,
            "U+0430 CYRILLIC SMALL LETTER A (Cyrillic among Latin, looks like \"a\")"
        );
        let many: String = ('\u{FF41}'..='\u{FF5A}').collect();
        let note = confusable_note(&many).expect("a note");
        assert_eq!(note.matches("FULLWIDTH").count(), NOTE_CHARACTERS, "{note}");
        assert!(note.ends_with("; and 18 more"), "{note}");
    }
}
