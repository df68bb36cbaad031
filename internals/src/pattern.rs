//! When a string `pattern` closes a vocabulary: every match is the whole text (anchored
//! at both ends, in every alternative) and the pattern bounds the text's length. Anything
//! else lets the model write text of its own choosing, which is free text.
//!
//! The analysis reads the subset of the syntax that JSON Schema (ECMA-262) and the
//! runtime's matcher read alike, and fails closed: a construct it does not model (a
//! look-around, a back-reference, a flag, a nested class) makes the pattern free text.

/// The longest text a closed pattern may accept, in characters. A vocabulary the model
/// selects from is a code or a name, not a paragraph.
pub const MAX_CLOSED_PATTERN_LEN: usize = 256;

/// Why a pattern does not close a vocabulary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatternError {
    /// Some match need not start at the start of the text (no leading `^` in every
    /// alternative).
    NotAnchoredAtStart,
    /// Some match need not end at the end of the text (no trailing `$` in every
    /// alternative).
    NotAnchoredAtEnd,
    /// A repetition without an upper bound (`*`, `+`, `{n,}`) lets the text grow without
    /// limit.
    Unbounded,
    /// The longest text accepted is longer than [`MAX_CLOSED_PATTERN_LEN`].
    TooLong(usize),
    /// A construct the analysis does not model (a look-around, a back-reference, a
    /// flag, a nested class, a stray bracket).
    Unsupported(String),
}

impl std::fmt::Display for PatternError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PatternError::NotAnchoredAtStart => {
                f.write_str("it is not anchored at the start in every alternative (`^`)")
            }
            PatternError::NotAnchoredAtEnd => {
                f.write_str("it is not anchored at the end in every alternative (`$`)")
            }
            PatternError::Unbounded => f.write_str(
                "it does not bound the length (`*`, `+` or `{n,}` repeat without limit)",
            ),
            PatternError::TooLong(len) => write!(
                f,
                "it accepts texts of up to {len} characters, more than {MAX_CLOSED_PATTERN_LEN}"
            ),
            PatternError::Unsupported(what) => write!(f, "it uses {what}, which is not analysed"),
        }
    }
}

/// The remedy a message about a pattern that is not closed gives.
pub const CLOSED_PATTERN_RULE: &str = "anchor the whole pattern at both ends, around any alternation (`^(?:AB|CD)[0-9]{4}$`, not `^AB|CD$`), and bound every repetition (`{1,8}`, not `+` or `*`)";

/// The longest text `pattern` accepts, in characters, if it closes a vocabulary.
pub fn closed_pattern_len(pattern: &str) -> Result<usize, PatternError> {
    let mut parser = Parser {
        chars: pattern.chars().collect(),
        at: 0,
    };
    let alternatives = parser.alternation(0)?;
    if parser.at != parser.chars.len() {
        return Err(PatternError::Unsupported("an unmatched `)`".to_owned()));
    }
    if !alternatives.iter().all(|seq| starts_anchored(seq)) {
        return Err(PatternError::NotAnchoredAtStart);
    }
    if !alternatives.iter().all(|seq| ends_anchored(seq)) {
        return Err(PatternError::NotAnchoredAtEnd);
    }
    let len = max_len_of_alternation(&alternatives).ok_or(PatternError::Unbounded)?;
    if len > MAX_CLOSED_PATTERN_LEN {
        return Err(PatternError::TooLong(len));
    }
    Ok(len)
}

/// A pattern, as far as anchoring and length go.
#[derive(Debug)]
enum Node {
    /// `^`.
    Start,
    /// `$`.
    End,
    /// One character (a literal, a class, `.`).
    Char,
    /// A group's alternatives.
    Group(Vec<Vec<Node>>),
    /// A repeated node, at most `max` times (`None`: without limit).
    Repeat(Box<Node>, Option<usize>),
}

/// Every match of `seq` starts with `^` (or a group all of whose alternatives do).
fn starts_anchored(seq: &[Node]) -> bool {
    match seq.first() {
        Some(Node::Start) => true,
        Some(Node::Group(alternatives)) => alternatives.iter().all(|seq| starts_anchored(seq)),
        _ => false,
    }
}

/// Every match of `seq` ends with `$` (or a group all of whose alternatives do).
fn ends_anchored(seq: &[Node]) -> bool {
    match seq.last() {
        Some(Node::End) => true,
        Some(Node::Group(alternatives)) => alternatives.iter().all(|seq| ends_anchored(seq)),
        _ => false,
    }
}

fn max_len_of_alternation(alternatives: &[Vec<Node>]) -> Option<usize> {
    alternatives.iter().try_fold(0, |longest, seq| {
        let len = seq
            .iter()
            .try_fold(0usize, |sum, node| sum.checked_add(max_len(node)?))?;
        Some(longest.max(len))
    })
}

fn max_len(node: &Node) -> Option<usize> {
    match node {
        Node::Start | Node::End => Some(0),
        Node::Char => Some(1),
        Node::Group(alternatives) => max_len_of_alternation(alternatives),
        Node::Repeat(node, max) => {
            let once = max_len(node)?;
            match max {
                Some(max) => once.checked_mul(*max),
                None if once == 0 => Some(0),
                None => None,
            }
        }
    }
}

struct Parser {
    chars: Vec<char>,
    at: usize,
}

fn unsupported<T>(what: &str) -> Result<T, PatternError> {
    Err(PatternError::Unsupported(what.to_owned()))
}

/// How deep groups may nest before the pattern is refused (the parser recurses).
const MAX_NESTING: usize = 64;

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn eat(&mut self, c: char) -> bool {
        let found = self.peek() == Some(c);
        if found {
            self.at += 1;
        }
        found
    }

    /// Alternatives separated by `|`, up to a `)` or the end.
    fn alternation(&mut self, depth: usize) -> Result<Vec<Vec<Node>>, PatternError> {
        if depth > MAX_NESTING {
            return unsupported("groups nested too deep");
        }
        let mut alternatives = vec![self.sequence(depth)?];
        while self.eat('|') {
            alternatives.push(self.sequence(depth)?);
        }
        Ok(alternatives)
    }

    fn sequence(&mut self, depth: usize) -> Result<Vec<Node>, PatternError> {
        let mut seq = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let atom = self.atom(depth)?;
            seq.push(self.quantified(atom)?);
        }
        Ok(seq)
    }

    fn atom(&mut self, depth: usize) -> Result<Node, PatternError> {
        let Some(c) = self.peek() else {
            return unsupported("a truncated pattern");
        };
        self.at += 1;
        match c {
            '^' => Ok(Node::Start),
            '$' => Ok(Node::End),
            '.' => Ok(Node::Char),
            '(' => {
                if self.eat('?') {
                    if self.eat(':') {
                    } else if self.eat('<') || (self.eat('P') && self.eat('<')) {
                        // A named group: `(?<name>` or `(?P<name>`.
                        let named = |c: char| c.is_ascii_alphanumeric() || c == '_';
                        let start = self.at;
                        while self.peek().is_some_and(named) {
                            self.at += 1;
                        }
                        if self.at == start || !self.eat('>') {
                            return unsupported("a look-behind or a malformed group name");
                        }
                    } else {
                        return unsupported("a look-around or a flag group");
                    }
                }
                let alternatives = self.alternation(depth + 1)?;
                if !self.eat(')') {
                    return unsupported("an unclosed group");
                }
                Ok(Node::Group(alternatives))
            }
            '[' => self.class(),
            '\\' => self.escape().map(|()| Node::Char),
            '*' | '+' | '?' | '{' => unsupported("a repetition of nothing"),
            ']' | '}' => unsupported("a stray closing bracket"),
            _ => Ok(Node::Char),
        }
    }

    /// After `\`, outside or inside a class: one character.
    fn escape(&mut self) -> Result<(), PatternError> {
        let Some(c) = self.peek() else {
            return unsupported("a trailing backslash");
        };
        self.at += 1;
        match c {
            'd' | 'D' | 'w' | 'W' | 's' | 'S' | 'n' | 'r' | 't' | 'f' | 'v' => Ok(()),
            'x' => self.hex_digits(2),
            'u' => self.hex_digits(4),
            c if c.is_ascii_punctuation() => Ok(()),
            _ => unsupported(&format!("the escape `\\{c}`")),
        }
    }

    fn hex_digits(&mut self, count: usize) -> Result<(), PatternError> {
        for _ in 0..count {
            if !self.peek().is_some_and(|c| c.is_ascii_hexdigit()) {
                return unsupported("a malformed hexadecimal escape");
            }
            self.at += 1;
        }
        Ok(())
    }

    /// After `[`: the class, as one character. The engines disagree on a leading `]`, a
    /// nested `[` and set operations, so those are not analysed.
    fn class(&mut self) -> Result<Node, PatternError> {
        self.eat('^');
        if self.peek() == Some(']') {
            return unsupported("a class starting with `]`");
        }
        loop {
            let Some(c) = self.peek() else {
                return unsupported("an unclosed class");
            };
            self.at += 1;
            match c {
                ']' => return Ok(Node::Char),
                '\\' => self.escape()?,
                '[' => return unsupported("a `[` inside a class"),
                '&' | '-' | '~' if self.peek() == Some(c) => {
                    return unsupported("a set operation inside a class");
                }
                _ => {}
            }
        }
    }

    /// `atom` with the repetition that follows it, if any.
    fn quantified(&mut self, atom: Node) -> Result<Node, PatternError> {
        let max = match self.peek() {
            Some('?') => Some(1),
            Some('*' | '+') => None,
            Some('{') => {
                self.at += 1;
                let min = self.number()?;
                let max = if self.eat(',') {
                    if self.peek() == Some('}') {
                        None
                    } else {
                        Some(self.number()?)
                    }
                } else {
                    Some(min)
                };
                if !self.eat('}') || max.is_some_and(|max| max < min) {
                    return unsupported("a malformed `{…}` repetition");
                }
                self.at -= 1;
                max
            }
            _ => return Ok(atom),
        };
        self.at += 1;
        // A lazy repetition repeats as far.
        self.eat('?');
        if matches!(self.peek(), Some('?' | '*' | '+' | '{')) {
            return unsupported("a repetition of a repetition");
        }
        Ok(Node::Repeat(Box::new(atom), max))
    }

    fn number(&mut self) -> Result<usize, PatternError> {
        let start = self.at;
        let mut value: usize = 0;
        while let Some(digit) = self.peek().and_then(|c| c.to_digit(10)) {
            value = value
                .checked_mul(10)
                .and_then(|value| value.checked_add(digit as usize))
                .ok_or_else(|| PatternError::Unsupported("a repetition count too large".into()))?;
            self.at += 1;
        }
        if self.at == start {
            return unsupported("a malformed `{…}` repetition");
        }
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchored_bounded_patterns_close_a_vocabulary() {
        for (pattern, len) in [
            ("^[A-Z]{2}$", 2),
            ("^[A-Z]{2}[0-9]{4}$", 6),
            ("^(?:GB|FR|DE)-[0-9]{1,8}$", 11),
            ("^(?:refund|exchange)$", 8),
            ("(^a$)|(^bc$)", 2),
            ("^(?<code>[a-f0-9]{8})$", 8),
            ("^\\d{3}-\\d{4}?$", 8),
            ("^[^\\]]{0,4}$", 4),
            ("^yes$|^no$", 3),
            ("^$", 0),
            ("^x{0,3}?$", 3),
        ] {
            assert_eq!(closed_pattern_len(pattern), Ok(len), "{pattern}");
        }
    }

    #[test]
    fn anything_else_is_free_text() {
        use PatternError::*;
        for (pattern, error) in [
            ("^[A-Z]{2}[0-9]", NotAnchoredAtEnd),
            ("[A-Z]{2}$", NotAnchoredAtStart),
            // `^` binds to the first alternative only, `$` to the last.
            ("^a|b$", NotAnchoredAtStart),
            ("^a$|b", NotAnchoredAtStart),
            ("^a|^b", NotAnchoredAtEnd),
            ("^(a|b)|c$", NotAnchoredAtStart),
            ("^a$|", NotAnchoredAtStart),
            ("", NotAnchoredAtStart),
            ("^?a$", NotAnchoredAtStart),
            ("^[A-Z]+$", Unbounded),
            ("^.*$", Unbounded),
            ("^[a-z]{2,}$", Unbounded),
            ("^(?:ab)*$", Unbounded),
            ("^.{0,300}$", TooLong(300)),
            ("^(?:.{100}){100}$", TooLong(10_000)),
        ] {
            assert_eq!(closed_pattern_len(pattern), Err(error), "{pattern}");
        }
        for pattern in [
            "^(?=a)a$",
            "^(?<=a)a$",
            "^(?i)a$",
            "^(a)\\1$",
            "^\\ba$",
            "^[[:alpha:]]$",
            "^[a-z&&[^x]]$",
            "^[]a]$",
            "^a{2$",
            "^a{3,2}$",
            "^a**$",
            "^(a$",
            "^a)$",
            "^a]$",
            "^\\p{L}$",
            "^a{99999999999999999999999}$",
            "^\\",
        ] {
            assert!(
                matches!(closed_pattern_len(pattern), Err(Unsupported(_))),
                "{pattern}: {:?}",
                closed_pattern_len(pattern)
            );
        }
    }
}
