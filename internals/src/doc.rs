//! Doc comments joined into one text the way rustdoc joins them (rustc's
//! `unindent_doc_fragments` and `add_doc_fragment`), so that a tool's description is the
//! text its documentation shows. The macro joins literal comments itself; a comment with
//! an expression (`#[doc = include_str!("…")]`) is known only to the compiler, so the
//! same join runs as `const fn`s in the generated code.
//!
//! Two simplifications: a proc macro cannot tell a `///` comment from a `#[doc = "…"]`
//! literal written by hand (the compiler hands both over as the same tokens), so the
//! macro reads every literal as a `///` comment and only expressions as attributes; and
//! only ASCII whitespace counts as whitespace (rustdoc also counts Unicode spaces when it
//! decides whether a line is blank).

/// One `#[doc]` attribute's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocFragment<'a> {
    /// A `///` comment, without the `///`.
    Sugared(&'a str),
    /// A `#[doc = …]` attribute: a string literal, or an expression such as
    /// `include_str!("…")`.
    Raw(&'a str),
}

impl<'a> DocFragment<'a> {
    const fn text(&self) -> &'a str {
        match self {
            DocFragment::Sugared(text) | DocFragment::Raw(text) => text,
        }
    }

    const fn is_sugared(&self) -> bool {
        matches!(self, DocFragment::Sugared(_))
    }
}

/// The length in bytes of [`doc_join`]'s text.
pub const fn doc_len(fragments: &[DocFragment<'_>]) -> usize {
    render(fragments, &mut [])
}

/// The fragments joined as rustdoc joins them; `N` must be [`doc_len`] of them.
pub const fn doc_join<const N: usize>(fragments: &[DocFragment<'_>]) -> [u8; N] {
    let mut out = [0u8; N];
    let len = render(fragments, &mut out);
    assert!(len == N, "doc_join: N is not doc_len(fragments)");
    out
}

/// The text [`doc_join`] wrote (it copies whole lines of UTF-8 text and ASCII, so it is
/// UTF-8).
pub const fn doc_str(bytes: &[u8]) -> &str {
    match core::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(_) => panic!("doc_str: not UTF-8"),
    }
}

/// The fragments joined as rustdoc joins them, as a `String`.
pub fn join_docs(fragments: &[DocFragment<'_>]) -> String {
    let mut out = vec![0u8; doc_len(fragments)];
    render(fragments, &mut out);
    doc_str(&out).to_owned()
}

/// Writes the joined text into `out` as far as it reaches, and returns its full length.
///
/// Every line loses the indentation all non-blank lines share; when `///` comments and
/// `#[doc]` attributes are mixed, the attributes' lines count one space more (a `///`
/// comment's text starts with the space after `///`). Each line ends with a newline; an
/// empty fragment is one empty line; blank lines are kept as they are.
const fn render(fragments: &[DocFragment<'_>], out: &mut [u8]) -> usize {
    let add = if mixed(fragments) { 1 } else { 0 };
    let min_indent = min_indent(fragments, add);
    let mut len = 0;
    let mut f = 0;
    while f < fragments.len() {
        let fragment = fragments[f];
        f += 1;
        let bytes = fragment.text().as_bytes();
        if bytes.is_empty() {
            len = push(out, len, b'\n');
            continue;
        }
        let indent = if !fragment.is_sugared() && min_indent > 0 {
            min_indent - add
        } else {
            min_indent
        };
        let mut start = 0;
        while start < bytes.len() {
            let (end, next) = line_at(bytes, start);
            let from = if is_blank(bytes, start, end) {
                start
            } else {
                start + indent
            };
            let mut i = from;
            while i < end {
                len = push(out, len, bytes[i]);
                i += 1;
            }
            len = push(out, len, b'\n');
            start = next;
        }
    }
    len
}

/// Whether `///` comments and `#[doc]` attributes are mixed (and at least one comment is
/// a `///` one).
const fn mixed(fragments: &[DocFragment<'_>]) -> bool {
    let mut any_sugared = false;
    let mut changes = false;
    let mut i = 0;
    while i < fragments.len() {
        any_sugared |= fragments[i].is_sugared();
        if i > 0 && fragments[i].is_sugared() != fragments[i - 1].is_sugared() {
            changes = true;
        }
        i += 1;
    }
    any_sugared && changes
}

/// The indentation every non-blank line shares, `#[doc]` attributes' lines counted
/// `add` more; `usize::MAX` when every line is blank.
const fn min_indent(fragments: &[DocFragment<'_>], add: usize) -> usize {
    let mut min = usize::MAX;
    let mut f = 0;
    while f < fragments.len() {
        let fragment = fragments[f];
        f += 1;
        let bytes = fragment.text().as_bytes();
        let extra = if fragment.is_sugared() { 0 } else { add };
        let mut start = 0;
        while start < bytes.len() {
            let (end, next) = line_at(bytes, start);
            if !is_blank(bytes, start, end) {
                let mut indent = 0;
                while start + indent < end && matches!(bytes[start + indent], b' ' | b'\t') {
                    indent += 1;
                }
                if indent + extra < min {
                    min = indent + extra;
                }
            }
            start = next;
        }
    }
    min
}

/// The line that starts at `start`, as `str::lines` reads it: where its text ends
/// (before `\n` or `\r\n`) and where the next line starts.
const fn line_at(bytes: &[u8], start: usize) -> (usize, usize) {
    let mut end = start;
    while end < bytes.len() && bytes[end] != b'\n' {
        end += 1;
    }
    let next = end + 1;
    if end > start && bytes[end - 1] == b'\r' {
        end -= 1;
    }
    (end, next)
}

const fn is_blank(bytes: &[u8], start: usize, end: usize) -> bool {
    let mut i = start;
    while i < end {
        if !matches!(bytes[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
            return false;
        }
        i += 1;
    }
    true
}

/// Writes `byte` at `at` if `out` reaches that far; returns the next position.
const fn push(out: &mut [u8], at: usize, byte: u8) -> usize {
    if at < out.len() {
        out[at] = byte;
    }
    at + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use DocFragment::{Raw, Sugared};

    #[test]
    fn sugared_comments_lose_their_shared_indentation() {
        // /// Returns the policy.
        // ///
        // ///   Indented.
        let docs = [
            Sugared(" Returns the policy."),
            Sugared(""),
            Sugared("   Indented."),
        ];
        assert_eq!(join_docs(&docs), "Returns the policy.\n\n  Indented.\n");
    }

    #[test]
    fn an_included_file_joins_line_by_line() {
        // A file's final newline ends its last line; it adds no blank line.
        let file = "First paragraph.\n\nSecond.\n";
        let docs = [Sugared(" Intro."), Raw(file), Sugared(" The end.")];
        assert_eq!(
            join_docs(&docs),
            "Intro.\nFirst paragraph.\n\nSecond.\nThe end.\n"
        );
        // Alone, a file loses the indentation its lines share.
        assert_eq!(join_docs(&[Raw("  a\n    b\r\n")]), "a\n  b\n");
        // Mixed, an attribute's lines count one space more, as if written after `/// `.
        assert_eq!(
            join_docs(&[Sugared("  deep"), Raw("flat")]),
            " deep\nflat\n"
        );
    }

    #[test]
    fn the_const_join_is_the_same() {
        const DOCS: &[DocFragment<'static>] = &[Sugared(" A."), Raw("  B\n"), Sugared("")];
        const LEN: usize = doc_len(DOCS);
        const BYTES: [u8; LEN] = doc_join::<LEN>(DOCS);
        const TEXT: &str = doc_str(&BYTES);
        assert_eq!(TEXT, join_docs(DOCS));
        assert_eq!(TEXT, "A.\n  B\n\n");
    }
}
