//! Outsiders' text made inert for a person's screen: a terminal runs the escape sequences
//! it is written (ESC and CSI clear the screen, move the cursor, retitle the window), and
//! a line break or a bidirectional override lets a line pass for one its reader did not
//! get. [`inert`] writes every such character as an escape, on one line.

use std::borrow::Cow;

/// Whether `c` could break a line, drive a terminal, or hide or reorder text where a
/// person reads it: every control character (C0, DEL and C1, so ESC and CSI too), the line
/// and paragraph separators, the bidirectional controls, the zero-width and other
/// default-ignorable characters (soft hyphen, fillers, variation selectors, tag
/// characters) and the interlinear annotation characters.
pub fn is_unseen(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{AD}'
                | '\u{34F}'
                | '\u{61C}'
                | '\u{115F}'..='\u{1160}'
                | '\u{17B4}'..='\u{17B5}'
                | '\u{180B}'..='\u{180F}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{3164}'
                | '\u{FE00}'..='\u{FE0F}'
                | '\u{FEFF}'
                | '\u{FFA0}'
                | '\u{FFF0}'..='\u{FFFB}'
                | '\u{1BCA0}'..='\u{1BCA3}'
                | '\u{1D173}'..='\u{1D17A}'
                | '\u{E0000}'..='\u{E0FFF}'
        )
}

/// `text` for a terminal or a log line: every [`is_unseen`] character written as an
/// escape (`\n`, `\r`, `\t`, otherwise `\u{…}` with its code point in hex: `\u{1b}` for
/// ESC), so whatever an outsider wrote stays on one line and drives nothing. Borrowed
/// when there is nothing to escape.
///
/// ```
/// use tooltrust::envelope::inert;
///
/// let forged = "\u{1b}[2J\u{1b}[Htooltrust: pinned 3 tool(s), unchanged\n";
/// assert_eq!(
///     inert(forged),
///     "\\u{1b}[2J\\u{1b}[Htooltrust: pinned 3 tool(s), unchanged\\n"
/// );
/// assert!(matches!(inert("plain"), std::borrow::Cow::Borrowed("plain")));
/// ```
pub fn inert(text: &str) -> Cow<'_, str> {
    let Some(first) = text.find(is_unseen) else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len() + 16);
    out.push_str(&text[..first]);
    for c in text[first..].chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if is_unseen(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_control_and_reordering_character_is_escaped() {
        for c in ['\u{0}', '\u{7}', '\u{1b}', '\u{7f}', '\u{85}', '\u{9b}'] {
            assert!(is_unseen(c), "{c:?}");
            assert!(!inert(&format!("a{c}b")).contains(c), "{c:?}");
        }
        assert_eq!(inert("\u{9b}2J"), "\\u{9b}2J", "C1's CSI");
        assert_eq!(
            inert("pay \u{202E}lper\u{202C} \u{200B}x\u{2028}y"),
            "pay \\u{202e}lper\\u{202c} \\u{200b}x\\u{2028}y"
        );
        assert_eq!(inert("a\r\n\tb"), "a\\r\\n\\tb");
    }

    #[test]
    fn printable_text_is_left_as_is() {
        for text in ["", "plain", "exаmple ü 日本 ‘quoted’ C:\\path", "emoji 🦀"] {
            assert!(matches!(inert(text), Cow::Borrowed(_)), "{text}");
        }
    }
}
