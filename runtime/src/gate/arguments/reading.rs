//! How a deny constraint reads an argument: every scalar inside it, object keys included,
//! in each form that names the same thing to the tool that receives it.
//!
//! - A string is **folded**: default-ignorable code points dropped (soft hyphens, zero-width
//!   and bidi controls, variation selectors), NFKC-normalised and case-folded (Unicode's
//!   compatibility caseless form, recomposed: `ＥＶＥ`, `EVE` and `eve` read `eve`, `ß`
//!   reads `ss`), and trimmed of whitespace and control characters.
//! - Its **address** form is the folded text with the ideographic full stop `。` read as
//!   `.` and the dots that end a host name removed (`evil.example.` names `evil.example`,
//!   as do `https://evil.example./` and `<eve@evil.example.>`); each address-like piece
//!   of it (split at whitespace, `,`, `;`, `<`, `>`, quotes and parentheses, and holding
//!   an `@` or a `.`) is read on its own too, so `Eve <eve@evil.example>, ann@example.com`
//!   names `eve@evil.example`.
//! - A number reads as its canonical JSON text as well, and a string as a number when its
//!   folded text is a decimal number (`"５"`, `" 5 "`, `"+5"`, `"5e0"`, `"1_000"`,
//!   `"inf"`): a tool that coerces it gets that number. Text that folds to `true` or
//!   `false` reads as that boolean.
//! - `null` reads as nothing: it names no value.

use std::borrow::Cow;

use caseless::Caseless;
use serde_json::{Number, Value};
use unicode_normalization::UnicodeNormalization;

use crate::canonical::canonical_json;

/// One scalar inside an argument, as the walk meets it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Scalar<'a> {
    Text(&'a str),
    Number(&'a Number),
    Bool(bool),
}

impl Scalar<'_> {
    /// Whether `meets` holds for one of the texts it reads as: the folded text, its
    /// address form, and each address-like piece of that.
    pub(super) fn any_text(self, mut meets: impl FnMut(&str) -> bool) -> bool {
        let folded = match self {
            Scalar::Text(text) => fold(text),
            Scalar::Number(number) => canonical_json(&Value::Number(number.clone())),
            Scalar::Bool(value) => value.to_string(),
        };
        if meets(&folded) {
            return true;
        }
        let address = address(&folded);
        if matches!(address, Cow::Owned(_)) && meets(&address) {
            return true;
        }
        address
            .split(is_piece_separator)
            // The whole address is one piece when nothing separates it: already read.
            .filter(|piece| piece.len() < address.len() && piece.contains(['@', '.']))
            .any(meets)
    }

    /// The number it reads as, if any (never NaN).
    pub(super) fn number(self) -> Option<f64> {
        let number = match self {
            Scalar::Number(number) => number.as_f64(),
            Scalar::Text(text) => {
                let folded = fold(text);
                let digits: Cow<'_, str> = match folded.contains('_') {
                    true => Cow::Owned(folded.replace('_', "")),
                    false => Cow::Borrowed(&folded),
                };
                digits.parse::<f64>().ok()
            }
            Scalar::Bool(_) => None,
        };
        number.filter(|number| !number.is_nan())
    }

    /// The boolean it reads as, if any.
    pub(super) fn boolean(self) -> Option<bool> {
        match self {
            Scalar::Bool(value) => Some(value),
            Scalar::Text(text) => match fold(text).as_str() {
                "true" => Some(true),
                "false" => Some(false),
                _ => None,
            },
            Scalar::Number(_) => None,
        }
    }
}

/// The texts a whole string names: its folded text, then its address form when that
/// differs. A deny set's strings are read this way.
pub(super) fn names(text: &str) -> Vec<String> {
    let folded = fold(text);
    match address(&folded) {
        Cow::Owned(address) => vec![folded, address],
        Cow::Borrowed(_) => vec![folded],
    }
}

/// Visits every scalar inside `value`, object keys included, depth first, until `visit`
/// answers `Some`; `null` is skipped. The walk keeps its own stack: a deep value cannot
/// exhaust the thread's.
pub(super) fn find_scalar<T>(
    value: &Value,
    mut visit: impl FnMut(Scalar<'_>) -> Option<T>,
) -> Option<T> {
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        let found = match value {
            Value::Null => None,
            Value::Bool(value) => visit(Scalar::Bool(*value)),
            Value::Number(number) => visit(Scalar::Number(number)),
            Value::String(text) => visit(Scalar::Text(text)),
            Value::Array(items) => {
                stack.extend(items.iter().rev());
                None
            }
            Value::Object(map) => {
                let mut found = None;
                for (key, item) in map.iter().rev() {
                    stack.push(item);
                    found = found.or_else(|| visit(Scalar::Text(key)));
                }
                found
            }
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

/// `text` folded: default-ignorable code points dropped, NFKC and full case folding (the
/// compatibility caseless form, NFKD(fold(NFKD(fold(NFD(x))))), recomposed with NFKC so
/// that a pattern's precomposed letters match), then trimmed of whitespace and control
/// characters.
pub(super) fn fold(text: &str) -> String {
    let trimmed = |c: char| c.is_whitespace() || c.is_control();
    if text.is_ascii() {
        // NFKC leaves ASCII as it is, and its case folding is lowercasing.
        return text.trim_matches(trimmed).to_ascii_lowercase();
    }
    let folded: String = text
        .chars()
        .filter(|&c| !is_default_ignorable(c))
        .nfd()
        .default_case_fold()
        .nfkd()
        .default_case_fold()
        .nfkc()
        .filter(|&c| !is_default_ignorable(c))
        .collect();
    match folded.trim_matches(trimmed) {
        same if same.len() == folded.len() => folded,
        shorter => shorter.to_owned(),
    }
}

/// `folded` as an address: the ideographic full stop read as `.` (as IDNA reads it, after
/// NFKC has made its halfwidth and fullwidth forms `。` and `.`), and every run of dots that
/// follows a letter or digit and ends a host name removed (a host's trailing dot names the
/// same host).
fn address(folded: &str) -> Cow<'_, str> {
    let is_dot = |c: char| c == '.' || c == '\u{3002}';
    if !folded.contains(is_dot) {
        return Cow::Borrowed(folded);
    }
    let chars: Vec<char> = folded.chars().collect();
    let mut out = String::with_capacity(folded.len());
    let mut changed = false;
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        if !is_dot(c) {
            out.push(c);
            i += 1;
            continue;
        }
        let end = chars[i..]
            .iter()
            .position(|&c| !is_dot(c))
            .map_or(chars.len(), |run| i + run);
        let after_host = i
            .checked_sub(1)
            .and_then(|before| chars.get(before))
            .is_some_and(|c| c.is_alphanumeric());
        let ends_host = chars
            .get(end)
            .is_none_or(|&c| !(c.is_alphanumeric() || matches!(c, '-' | '_' | '@')));
        if after_host && ends_host {
            changed = true;
        } else {
            changed |= chars[i..end].iter().any(|&c| c != '.');
            out.extend(std::iter::repeat_n('.', end - i));
        }
        i = end;
    }
    match changed {
        true => Cow::Owned(out),
        false => Cow::Borrowed(folded),
    }
}

/// Where an address-like piece of a text ends: between the addresses of a list, around
/// a display name's address (`Eve <eve@evil.example>`).
fn is_piece_separator(c: char) -> bool {
    c.is_whitespace()
        || c.is_control()
        || matches!(c, ',' | ';' | '<' | '>' | '"' | '\'' | '(' | ')')
}

/// Unicode's Default_Ignorable_Code_Point: characters that show nothing and that IDNA
/// and NFKC_Casefold drop. `default_ignorables_are_unicodes` checks the table against the
/// Unicode data regex-syntax carries.
pub(super) fn is_default_ignorable(c: char) -> bool {
    let cp = u32::from(c);
    DEFAULT_IGNORABLE
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

/// Default_Ignorable_Code_Point, as inclusive ranges in order.
pub(super) const DEFAULT_IGNORABLE: [(u32, u32); 17] = [
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
];
