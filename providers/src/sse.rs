//! Server-sent events (the WHATWG `text/event-stream` format): bytes in, events out.
//!
//! Written here rather than taken from `eventsource-stream`: the parser is a few dozen
//! lines over `Response::chunk`, needs no futures or parser-combinator dependency, and
//! fails closed on bytes that are not UTF-8 where the crate would substitute them.
//! `reqwest-eventsource` adds its own reconnecting retries, which a model request must
//! not have.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Event {
    /// The `event:` field (`message` when absent).
    pub event: String,
    /// The `data:` lines, joined by `\n`.
    pub data: String,
}

/// Why a stream could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Error {
    /// A line is not UTF-8.
    NotUtf8(std::str::Utf8Error),
    /// A line (terminated or not yet) is longer than the parser's line limit.
    Line,
    /// An event's data is longer than the parser's data limit.
    Data,
}

/// An incremental parser: [`push`](Parser::push) chunks as they arrive, split anywhere.
///
/// What it holds is bounded: a line longer than `max_line` bytes, or an event whose data
/// outgrows `max_data` bytes, is an error as soon as the bytes that exceed it arrive, so
/// a hostile stream costs at most those limits plus one chunk.
#[derive(Debug)]
pub(crate) struct Parser {
    /// Bytes of the line not yet terminated.
    pending: Vec<u8>,
    /// How far `pending` has been searched for a terminator.
    scanned: usize,
    /// Whether the start of the stream (and its optional byte-order mark) is behind us.
    started: bool,
    /// The event being read.
    fields: Fields,
    max_line: usize,
}

/// The fields of the event being read.
#[derive(Debug)]
struct Fields {
    event: String,
    data: String,
    max_data: usize,
}

impl Parser {
    /// A parser refusing lines over `max_line` bytes (terminator excluded) and events
    /// whose data (the `data:` values joined by `\n`) is over `max_data` bytes.
    pub fn new(max_line: usize, max_data: usize) -> Self {
        Parser {
            pending: Vec::new(),
            scanned: 0,
            started: false,
            fields: Fields {
                event: String::new(),
                data: String::new(),
                max_data,
            },
            max_line,
        }
    }

    /// Parses `bytes`, appending every event they complete to `out`.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<Event>) -> Result<(), Error> {
        self.pending.extend_from_slice(bytes);
        if !self.started {
            if self.pending.len() < 3 && b"\xEF\xBB\xBF".starts_with(&self.pending) {
                return Ok(());
            }
            if self.pending.starts_with(b"\xEF\xBB\xBF") {
                self.pending.drain(..3);
            }
            self.started = true;
        }
        let mut start = 0;
        // Where the next search begins; at the end, how far the unterminated rest is known
        // to hold no terminator.
        let mut scanned = self.scanned;
        while let Some(offset) = self.pending[scanned..]
            .iter()
            .position(|&byte| byte == b'\n' || byte == b'\r')
        {
            let end = scanned + offset;
            let next = match self.pending[end] {
                b'\r' => match self.pending.get(end + 1) {
                    // A lone CR at the end of a chunk may be the first half of CRLF.
                    None => {
                        scanned = end;
                        break;
                    }
                    Some(b'\n') => end + 2,
                    Some(_) => end + 1,
                },
                _ => end + 1,
            };
            if end - start > self.max_line {
                return Err(Error::Line);
            }
            let line = std::str::from_utf8(&self.pending[start..end]).map_err(Error::NotUtf8)?;
            self.fields.line(line, out)?;
            start = next;
            scanned = next;
        }
        if self.pending.get(scanned) != Some(&b'\r') {
            scanned = self.pending.len();
        }
        // `scanned` stops before a trailing CR, which is a terminator, not the line's.
        if scanned - start > self.max_line {
            return Err(Error::Line);
        }
        self.pending.drain(..start);
        self.scanned = scanned - start;
        Ok(())
    }
}

impl Fields {
    fn line(&mut self, line: &str, out: &mut Vec<Event>) -> Result<(), Error> {
        if line.is_empty() {
            let event = std::mem::take(&mut self.event);
            if !self.data.is_empty() {
                let mut data = std::mem::take(&mut self.data);
                data.pop();
                out.push(Event {
                    event: if event.is_empty() {
                        "message".to_owned()
                    } else {
                        event
                    },
                    data,
                });
            }
            return Ok(());
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "data" => {
                // `data` ends with the `\n` that would join this value; the event's data
                // drops the last one.
                if self.data.len() + value.len() > self.max_data {
                    return Err(Error::Data);
                }
                self.data.push_str(value);
                self.data.push('\n');
            }
            "event" => self.event = value.to_owned(),
            // Comments (empty field name), `id` and `retry` mean nothing to a model
            // request, which is never resumed.
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unlimited() -> Parser {
        Parser::new(usize::MAX, usize::MAX)
    }

    fn parse_in_chunks(bytes: &[u8], size: usize) -> Vec<Event> {
        let mut parser = unlimited();
        let mut out = Vec::new();
        for chunk in bytes.chunks(size) {
            parser.push(chunk, &mut out).unwrap();
        }
        out
    }

    fn event(event: &str, data: &str) -> Event {
        Event {
            event: event.into(),
            data: data.into(),
        }
    }

    #[test]
    fn events_are_the_same_however_the_bytes_are_split() {
        let stream =
            "\u{FEFF}: comment\r\nevent: message_start\r\ndata: {\"a\":\r\ndata:1}\r\n\r\n\
                      data: é\rdata:  two spaces\r\rid: 7\nretry: 10\ndata\n\nevent: x\n\n"
                .as_bytes();
        let expected = vec![
            event("message_start", "{\"a\":\n1}"),
            event("message", "é\n two spaces"),
            event("message", ""),
        ];
        for size in 1..=stream.len() {
            assert_eq!(parse_in_chunks(stream, size), expected, "chunks of {size}");
        }
    }

    #[test]
    fn an_unterminated_event_is_not_dispatched() {
        assert_eq!(parse_in_chunks(b"data: [DONE]\n", 4), Vec::new());
        assert_eq!(parse_in_chunks(b"data: [DONE]", 4), Vec::new());
    }

    #[test]
    fn bytes_that_are_not_utf8_are_an_error() {
        let mut parser = unlimited();
        assert!(matches!(
            parser.push(b"data: \xFF\n\n", &mut Vec::new()),
            Err(Error::NotUtf8(_))
        ));
    }

    /// Pushes `stream` in chunks of `size` to a parser with the limits given; the first
    /// error, or the events.
    fn limited(
        stream: &[u8],
        size: usize,
        max_line: usize,
        max_data: usize,
    ) -> Result<Vec<Event>, Error> {
        let mut parser = Parser::new(max_line, max_data);
        let mut out = Vec::new();
        for chunk in stream.chunks(size) {
            parser.push(chunk, &mut out)?;
        }
        Ok(out)
    }

    #[test]
    fn a_line_at_the_limit_is_read_and_one_byte_more_is_refused() {
        // "data: " + 4 bytes = a 10-byte line, whatever its terminator.
        for terminator in ["\n", "\r", "\r\n"] {
            // The comment after the blank line settles a lone CR's meaning.
            let stream = format!("data: abcd{terminator}{terminator}:\n");
            for size in 1..=stream.len() {
                assert_eq!(
                    limited(stream.as_bytes(), size, 10, 100),
                    Ok(vec![event("message", "abcd")]),
                    "{terminator:?} in chunks of {size}"
                );
                assert_eq!(
                    limited(stream.as_bytes(), size, 9, 100),
                    Err(Error::Line),
                    "{terminator:?} in chunks of {size}"
                );
            }
        }
    }

    #[test]
    fn an_unterminated_line_over_the_limit_is_refused_before_it_ends() {
        let mut parser = Parser::new(16, 100);
        let mut out = Vec::new();
        assert_eq!(parser.push(b"data: 0123456789", &mut out), Ok(()));
        assert_eq!(parser.push(b"a", &mut out), Err(Error::Line));
    }

    #[test]
    fn event_data_over_the_limit_is_refused_however_it_is_split_into_lines() {
        // Three values of 4 bytes: 14 bytes of data once joined.
        let stream = b"data: abcd\ndata: efgh\ndata: ijkl\n\n";
        assert_eq!(
            limited(stream, 3, 100, 14),
            Ok(vec![event("message", "abcd\nefgh\nijkl")])
        );
        assert_eq!(limited(stream, 3, 100, 13), Err(Error::Data));
    }
}
