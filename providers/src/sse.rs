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

/// An incremental parser: [`push`](Parser::push) chunks as they arrive, split anywhere.
#[derive(Debug, Default)]
pub(crate) struct Parser {
    /// Bytes of the line not yet terminated.
    pending: Vec<u8>,
    /// How far `pending` has been searched for a terminator.
    scanned: usize,
    /// Whether the start of the stream (and its optional byte-order mark) is behind us.
    started: bool,
    event: String,
    data: String,
}

impl Parser {
    /// Parses `bytes`, appending every event they complete to `out`.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<Event>) -> Result<(), std::str::Utf8Error> {
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
            let line = std::str::from_utf8(&self.pending[start..end])?;
            Self::line(&mut self.event, &mut self.data, line, out);
            start = next;
            scanned = next;
        }
        if self.pending.get(scanned) != Some(&b'\r') {
            scanned = self.pending.len();
        }
        self.pending.drain(..start);
        self.scanned = scanned - start;
        Ok(())
    }

    fn line(event: &mut String, data: &mut String, line: &str, out: &mut Vec<Event>) {
        if line.is_empty() {
            let event = std::mem::take(event);
            if !data.is_empty() {
                let mut data = std::mem::take(data);
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
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "data" => {
                data.push_str(value);
                data.push('\n');
            }
            "event" => *event = value.to_owned(),
            // Comments (empty field name), `id` and `retry` mean nothing to a model
            // request, which is never resumed.
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in_chunks(bytes: &[u8], size: usize) -> Vec<Event> {
        let mut parser = Parser::default();
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
        let mut parser = Parser::default();
        assert!(parser.push(b"data: \xFF\n\n", &mut Vec::new()).is_err());
    }
}
