//! Text that several owners hold without copying it: a scope keeps each block's text and
//! its rendered envelope for as long as the scope lives, and when the envelope quotes the
//! text byte for byte, the block's text is that part of the envelope rather than a second
//! copy of it.

use std::borrow::Borrow;
use std::fmt;
use std::ops::{Deref, Range};
use std::sync::Arc;

/// An immutable string, or a part of one, shared by reference counting.
#[derive(Clone)]
pub(crate) struct SharedText {
    whole: Arc<String>,
    /// Always on character boundaries of `whole`.
    range: Range<usize>,
}

impl SharedText {
    /// The part of this text at `range` (byte offsets into it), shared with it; `None`
    /// when `range` is out of bounds or not on character boundaries.
    pub(crate) fn part(&self, range: Range<usize>) -> Option<SharedText> {
        self.as_str().get(range.clone())?;
        Some(SharedText {
            whole: Arc::clone(&self.whole),
            range: self.range.start + range.start..self.range.start + range.end,
        })
    }

    /// The text.
    pub(crate) fn as_str(&self) -> &str {
        // Both ends were checked against `whole`, which never changes.
        self.whole.get(self.range.clone()).unwrap_or_default()
    }
}

impl From<String> for SharedText {
    fn from(text: String) -> Self {
        let range = 0..text.len();
        SharedText {
            whole: Arc::new(text),
            range,
        }
    }
}

impl Deref for SharedText {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for SharedText {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for SharedText {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for SharedText {}

impl fmt::Debug for SharedText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::SharedText;

    #[test]
    fn a_part_is_the_same_bytes_as_the_slice_and_shares_them() {
        let whole = SharedText::from("<open>\nbody é\n</close>".to_owned());
        let part = whole.part(7..14).unwrap();
        assert_eq!(part.as_str(), "body é");
        assert_eq!(part.as_ptr(), whole[7..].as_ptr());
        assert_eq!(part.part(5..7).unwrap().as_str(), "é");
        assert_eq!(part, SharedText::from("body é".to_owned()));
    }

    #[test]
    fn a_part_out_of_bounds_or_inside_a_character_is_none() {
        let whole = SharedText::from("aé".to_owned());
        assert!(whole.part(0..4).is_none());
        assert!(whole.part(0..2).is_none());
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = 2..1;
        assert!(whole.part(reversed).is_none());
        let part = whole.part(1..3).unwrap();
        assert!(part.part(0..3).is_none());
    }

    #[test]
    fn a_slice_of_shared_texts_joins_like_strings() {
        let texts = [
            SharedText::from("a".to_owned()),
            SharedText::from("b".to_owned()),
        ];
        assert_eq!(texts.join("\n\n"), "a\n\nb");
    }
}
