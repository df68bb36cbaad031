//! Generates `readings.rs`, the table of what every code point reads as, from the Unicode
//! crates (dev-dependencies only: the runtime carries the table, not the crates).
//!
//! `generated_table_is_current` fails when the crates' data and the checked-in table
//! differ; `cargo test -p tooltrust --lib regenerate_readings -- --ignored` rewrites it.
//!
//! What a code point reads as:
//! - **invisible**: general category Mn, Me or Cf, or Default_Ignorable_Code_Point;
//! - **whitespace** (reads as a space): `char::is_whitespace`;
//! - otherwise its **readings**: lowercased, NFKC, lowercased again, UTS #39 skeleton,
//!   lowercased, and letters whose Unicode name says they are a Latin letter in another
//!   style (`NEGATIVE SQUARED LATIN CAPITAL LETTER M`, `LATIN LETTER SMALL CAPITAL T`)
//!   folded to that letter, repeated until nothing changes (the skeleton reads `m` as
//!   `rn`, so `ℳ` ends as `rn` too). Case is folded before the skeleton, which reads `I`
//!   as `l`; so that uppercase lookalikes whose lowercase looks different (Greek `Ν`,
//!   whose lowercase is `ν`) still read as their Latin letter, the skeleton of the
//!   unfolded character is a second reading. Only readings made of printable ASCII are
//!   kept, and `i` is written `l` (the skeleton's `I` and `l` are one shape);
//! - the skeleton's angle-bracket prototypes among punctuation (`❬`, `«`, `《`, `⟪`, `⧼` and
//!   their closing forms, with the brackets the skeleton maps to them: `〈`, `⟨`, `〈`)
//!   read as `<` and `>` as well;
//! - **punctuation** (general category P) and **symbols** (S), whatever they read as;
//! - **bar**: punctuation or a symbol whose NFKC form is `|` or whose skeleton is `l`
//!   (`|`, `｜`, `∣`).
//!
//! The scan's candidates are the characters that read as `<` or `[` first, the Unicode
//! tag characters and the variation selectors.

use std::collections::BTreeMap;
use std::fmt::Write;

use regex_syntax::hir::{Class, HirKind};
use unicode_normalization::UnicodeNormalization;
use unicode_properties::{GeneralCategory, GeneralCategoryGroup, UnicodeGeneralCategory};
use unicode_security::confusable_detection::skeleton;

use super::skeleton::{BAR, INVISIBLE, OTHER, PUNCTUATION, READING_BASE, SYMBOL};

const ANGLE_OPENERS: [&str; 5] = ["❬", "«", "《", "⟪", "⧼"];
const ANGLE_CLOSERS: [&str; 5] = ["❭", "»", "》", "⟫", "⧽"];

/// The code point ranges of a Unicode property, as regex-syntax knows it.
fn property(name: &str) -> Vec<(u32, u32)> {
    let hir = regex_syntax::parse(&format!(r"\p{{{name}}}")).expect("a known property");
    match hir.kind() {
        HirKind::Class(Class::Unicode(class)) => class
            .ranges()
            .iter()
            .map(|range| (u32::from(range.start()), u32::from(range.end())))
            .collect(),
        other => panic!("{name} is not a class: {other:?}"),
    }
}

fn contains(ranges: &[(u32, u32)], c: char) -> bool {
    let cp = u32::from(c);
    ranges
        .binary_search_by(|&(start, end)| {
            if end < cp {
                std::cmp::Ordering::Less
            } else if start > cp {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

struct Unicode {
    default_ignorable: Vec<(u32, u32)>,
    variation_selectors: Vec<(u32, u32)>,
}

impl Unicode {
    fn new() -> Self {
        Unicode {
            default_ignorable: property("Default_Ignorable_Code_Point"),
            variation_selectors: property("Variation_Selector"),
        }
    }

    fn invisible(&self, c: char) -> bool {
        matches!(
            c.general_category(),
            GeneralCategory::NonspacingMark
                | GeneralCategory::EnclosingMark
                | GeneralCategory::Format
        ) || contains(&self.default_ignorable, c)
    }

    /// One step of reading: fold case, NFKC, fold case, skeleton, fold case, and Latin
    /// letters by name; invisible characters dropped.
    fn step(&self, text: &str) -> String {
        let folded: String = text.chars().flat_map(char::to_lowercase).collect();
        let compatible: String = folded.nfkc().flat_map(char::to_lowercase).collect();
        skeleton(&compatible)
            .flat_map(char::to_lowercase)
            .filter(|&c| !self.invisible(c))
            .map(|c| latin_letter(c).unwrap_or(c))
            .collect()
    }

    fn read(&self, start: String) -> String {
        let mut text = start;
        for _ in 0..8 {
            let next = self.step(&text);
            if next == text {
                break;
            }
            text = next;
        }
        text
    }

    /// The readings of a visible `c`, in order, without duplicates.
    fn readings(&self, c: char) -> Vec<String> {
        if c.is_whitespace() {
            return vec![" ".to_owned()];
        }
        let compatible: String = c.to_string().nfkc().collect();
        let unfolded: String = skeleton(&compatible).flat_map(char::to_lowercase).collect();
        let mut starts = vec![c.to_string(), unfolded];
        starts.extend(latin_letter(c).map(String::from));
        let mut readings: Vec<String> = Vec::new();
        for start in starts {
            let reading = self.read(start);
            let printable =
                !reading.is_empty() && reading.bytes().all(|b| (0x20..0x7F).contains(&b));
            let reading = reading.replace('i', "l");
            if printable && !readings.contains(&reading) {
                readings.push(reading);
            }
        }
        if c.general_category_group() == GeneralCategoryGroup::Punctuation {
            let raw: String = skeleton(&c.to_string()).collect();
            for (prototypes, bracket) in [(ANGLE_OPENERS, "<"), (ANGLE_CLOSERS, ">")] {
                if prototypes.contains(&raw.as_str()) && !readings.iter().any(|r| r == bracket) {
                    readings.push(bracket.to_owned());
                }
            }
        }
        readings
    }
}

/// The letter a character's name says it is: `… LATIN [CAPITAL |SMALL ]LETTER X` or
/// `… LATIN LETTER SMALL CAPITAL X`.
fn latin_letter(c: char) -> Option<char> {
    if c.is_ascii() {
        return None;
    }
    let name = unicode_names2::name(c)?.to_string();
    let words: Vec<&str> = name.split(' ').collect();
    let (&letter, before) = words.split_last()?;
    let letter = match letter.as_bytes() {
        [b] if b.is_ascii_uppercase() => char::from(b.to_ascii_lowercase()),
        _ => return None,
    };
    let before = match before {
        [rest @ .., "LETTER", "SMALL", "CAPITAL"] => rest,
        [rest @ .., "LETTER"] => rest,
        _ => return None,
    };
    before.contains(&"LATIN").then_some(letter)
}

/// The class of every code point, the readings they refer to, and the candidates.
struct Table {
    readings: Vec<(String, String)>,
    /// `(first code point, class)` for each run of equal classes.
    runs: Vec<(u32, u16)>,
    ascii: Vec<u16>,
    candidates: Vec<(u32, u32)>,
    variation_selectors: Vec<(u32, u32)>,
}

fn build() -> Table {
    let unicode = Unicode::new();
    let mut ids: BTreeMap<(String, String), u16> = BTreeMap::new();
    let mut readings: Vec<(String, String)> = Vec::new();
    let mut runs: Vec<(u32, u16)> = Vec::new();
    let mut ascii = Vec::new();
    let mut candidates: Vec<(u32, u32)> = Vec::new();
    for cp in 0..=0x10FFFFu32 {
        let Some(c) = char::from_u32(cp) else {
            continue;
        };
        let group = c.general_category_group();
        let skip = matches!(
            c.general_category(),
            GeneralCategory::Unassigned | GeneralCategory::PrivateUse | GeneralCategory::Surrogate
        ) && !unicode.invisible(c);
        let mut candidate =
            contains(&unicode.variation_selectors, c) || (0xE0000..=0xE007F).contains(&cp);
        let kind = match group {
            GeneralCategoryGroup::Punctuation => PUNCTUATION,
            GeneralCategoryGroup::Symbol => SYMBOL,
            _ => 0,
        };
        let class = if skip {
            OTHER
        } else if unicode.invisible(c) {
            INVISIBLE
        } else {
            let found = unicode.readings(c);
            // Three readings happen nowhere yet; if they ever do, this says so.
            assert!(found.len() <= 2, "{c:?} has readings {found:?}");
            candidate |= !c.is_ascii()
                && found
                    .iter()
                    .any(|r| r.starts_with('<') || r.starts_with('['));
            let mut class = match found.first() {
                None => OTHER,
                Some(first) => {
                    let key = (first.clone(), found.get(1).cloned().unwrap_or_default());
                    let id = *ids.entry(key.clone()).or_insert_with(|| {
                        readings.push(key);
                        u16::try_from(readings.len() - 1).expect("fewer readings than ids")
                    });
                    READING_BASE + id
                }
            };
            assert!(class < SYMBOL, "too many readings");
            if kind != 0 {
                class |= kind;
                let compatible: String = c.to_string().nfkc().collect();
                let shape: String = skeleton(&compatible).collect();
                if compatible == "|" || shape == "l" {
                    class |= BAR;
                }
            }
            class
        };
        if cp < 0x80 {
            ascii.push(class);
        }
        if runs.last().is_none_or(|&(_, last)| last != class) {
            runs.push((cp, class));
        }
        if candidate {
            match candidates.last_mut() {
                Some((_, end)) if *end + 1 == cp => *end = cp,
                _ => candidates.push((cp, cp)),
            }
        }
    }
    Table {
        readings,
        runs,
        ascii,
        candidates,
        variation_selectors: unicode.variation_selectors.clone(),
    }
}

/// The source of `readings.rs`.
pub(super) fn generate() -> String {
    let table = build();
    let mut out = String::new();
    let version = |(major, minor, update): (u64, u64, u64)| format!("{major}.{minor}.{update}");
    let (major, minor, update) = unicode_normalization::UNICODE_VERSION;
    let versions = format!(
        "unicode-security (confusables, Unicode {}),\n//! unicode-normalization (NFKC, Unicode {}), \
         unicode-properties (general categories, Unicode {}),\n//! regex-syntax \
         (Default_Ignorable_Code_Point, Variation_Selector) and unicode_names2",
        version(unicode_security::UNICODE_VERSION),
        version((major.into(), minor.into(), update.into())),
        version(unicode_properties::UNICODE_VERSION),
    );
    let _ = writeln!(
        out,
        "//! What every code point reads as, for the neutraliser (see `generate.rs`).\n//!\n\
         //! @generated from {versions}\n//! by `cargo test -p tooltrust --lib regenerate_readings -- --ignored`.\n\
         //! Do not edit: `generated_table_is_current` compares it with the crates.\n"
    );
    let hex_pair = |(start, end): &(u32, u32)| format!("(0x{start:X}, 0x{end:X})");
    let arrays = [
        (
            "/// The readings a class refers to: (first, second or empty).",
            "const READINGS: [(&str, &str)",
            table
                .readings
                .iter()
                .map(|(a, b)| format!("({a:?}, {b:?})"))
                .collect::<Vec<_>>(),
        ),
        (
            "/// The class of each ASCII character.",
            "const ASCII: [u16",
            table.ascii.iter().map(u16::to_string).collect(),
        ),
        (
            "/// The first code point of each run of code points of one class.",
            "static RUN_STARTS: [u32",
            table
                .runs
                .iter()
                .map(|(start, _)| format!("0x{start:X}"))
                .collect(),
        ),
        (
            "/// The class of each run.",
            "static RUN_CLASSES: [u16",
            table
                .runs
                .iter()
                .map(|(_, class)| class.to_string())
                .collect(),
        ),
        (
            "/// The non-ASCII characters the scan stops at: those that read as `<` or `[` first, the\n\
             /// tag characters and the variation selectors (inclusive ranges).",
            "const CANDIDATES: [(u32, u32)",
            table.candidates.iter().map(hex_pair).collect(),
        ),
        (
            "/// The variation selectors (inclusive ranges).",
            "const VARIATION_SELECTORS: [(u32, u32)",
            table.variation_selectors.iter().map(hex_pair).collect(),
        ),
    ];
    for (n, (doc, declaration, items)) in arrays.iter().enumerate() {
        if n > 0 {
            out.push('\n');
        }
        let _ = writeln!(
            out,
            "{doc}\n#[rustfmt::skip]\npub(super) {declaration}; {}] = [",
            items.len()
        );
        wrap(&mut out, items);
        let _ = writeln!(out, "];");
    }
    out
}

/// Writes `items` separated by commas, in lines of at most 100 characters.
fn wrap(out: &mut String, items: &[String]) {
    let mut line = String::from("   ");
    for item in items {
        if line.len() + item.len() + 2 > 100 {
            out.push_str(line.trim_end());
            out.push('\n');
            line = String::from("   ");
        }
        line.push(' ');
        line.push_str(item);
        line.push(',');
    }
    if line.trim() != "" {
        out.push_str(line.trim_end());
        out.push('\n');
    }
}

const TABLE_PATH: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/src/envelope/neutralise/readings.rs"
);

#[test]
fn generated_table_is_current() {
    let checked_in = include_str!("readings.rs");
    let generated = generate();
    assert!(
        checked_in == generated,
        "readings.rs differs from what the Unicode crates give; regenerate it with \
         `cargo test -p tooltrust --lib regenerate_readings -- --ignored` and review the diff"
    );
}

#[test]
#[ignore = "rewrites the checked-in table; run it after updating the Unicode crates"]
fn regenerate_readings() {
    std::fs::write(TABLE_PATH, generate()).expect("writes readings.rs");
}

#[test]
fn latin_letters_by_name() {
    assert_eq!(latin_letter('🅼'), Some('m'));
    assert_eq!(latin_letter('ᴛ'), Some('t'));
    assert_eq!(latin_letter('ₘ'), Some('m'));
    assert_eq!(latin_letter('ᴇ'), Some('e'));
    assert_eq!(
        latin_letter('é'),
        None,
        "a letter with a mark is left to NFKC"
    );
    assert_eq!(latin_letter('Ⲙ'), None, "Coptic is not Latin");
    assert_eq!(
        latin_letter('🇲'),
        None,
        "regional indicators are not letters"
    );
    assert_eq!(latin_letter('ɐ'), None, "a turned letter is another letter");
}
