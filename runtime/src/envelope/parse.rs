//! The strict verifier: turns a rendered prompt back into its blocks, and rejects any
//! prompt whose envelopes do not close exactly where the renderer closed them.

use std::borrow::Cow;

use memchr::memchr;
use serde::Serialize;

use super::neutralise::{neutral_until, neutralise};
use super::{Tier, nonce_domain, unescape_attr};
use crate::id::is_id_char;
use crate::nonce::SessionKey;

/// One block recovered from a prompt, borrowing its body from the prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ParsedBlock<'a> {
    /// The block's tier.
    pub tier: Tier,
    /// The nonce in its tag name (`None` for tiers without one).
    pub nonce: Option<&'a str>,
    /// Its attributes, unescaped, in order (including `nonce`).
    pub attrs: Vec<(&'a str, Cow<'a, str>)>,
    /// Its body exactly as rendered (empty for containers).
    pub body: &'a str,
    /// The child blocks of a container.
    pub children: Vec<ParsedBlock<'a>>,
    /// Byte offset of the opening `<` in the prompt.
    pub start: usize,
    /// Byte offset just past the closing `>`.
    pub end: usize,
}

impl ParsedBlock<'_> {
    /// The value of attribute `name`, if present.
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.as_ref())
    }
}

/// Why a prompt was rejected, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at byte {offset}: {fault}")]
pub struct ParseError {
    /// Byte offset of the fault in the prompt.
    pub offset: usize,
    /// What is wrong.
    pub fault: ParseFault,
}

/// What is wrong with a prompt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseFault {
    /// A closing tag with no open block.
    #[error("closing tag `</{0}>` with no open block")]
    StrayCloser(String),
    /// Something that starts like one of our tags (`<trusted_content_…`) but is not
    /// exactly one: what follows the name is neither ` ` nor `>` (only `>` after a
    /// closer's), or a nonce-keyed name has no nonce. The offset is that character's.
    #[error("`{0}` starts like one of our tags but is not one")]
    NearTag(String),
    /// A block whose closing tag never comes.
    #[error("block `{0}` is never closed")]
    Unclosed(String),
    /// Something that starts like one of our tags but is not a well-formed opener.
    #[error("malformed opening tag: {0}")]
    MalformedOpener(&'static str),
    /// The layout around a tag is not the renderer's (newline after the opener and
    /// before the closer).
    #[error("block `{0}` does not follow the envelope layout")]
    Layout(String),
    /// The `nonce` attribute differs from the nonce in the tag name.
    #[error("nonce attribute {attr:?} differs from the tag's nonce {tag:?}")]
    NonceMismatch {
        /// The nonce in the tag name.
        tag: String,
        /// The nonce in the attribute.
        attr: String,
    },
    /// A container holds something other than its children.
    #[error("container `{0}` holds something other than its child blocks")]
    BadChild(String),
    /// The nonce is not the one the session key derives for the block's identity.
    #[error("block `{0}` carries a nonce the session key did not derive")]
    ForgedNonce(String),
    /// The block lacks the attributes its nonce is derived from.
    #[error("block `{0}` lacks the identity attributes needed to authenticate its nonce")]
    Unauthenticated(String),
    /// A sealed body still holds tag vocabulary, so the renderer did not write it.
    #[error("block `{0}` holds tag vocabulary that sealed rendering neutralises")]
    NotNeutralised(String),
}

/// Parses `prompt` structurally: every opener of our vocabulary must be well formed and
/// closed by the first occurrence of its exact closer, which must sit on its own line;
/// no closer may appear outside its block.
pub fn parse(prompt: &str) -> Result<Vec<ParsedBlock<'_>>, ParseError> {
    Parser { prompt, key: None }.top_level()
}

/// Like [`parse`], and also authenticates a sealed prompt: every nonce must be the one
/// `key` derives for the block's identity attributes, and every data body must already be
/// neutral (sealed rendering neutralises all tag vocabulary).
pub fn parse_sealed<'a>(
    prompt: &'a str,
    key: &SessionKey,
) -> Result<Vec<ParsedBlock<'a>>, ParseError> {
    Parser {
        prompt,
        key: Some(key),
    }
    .top_level()
}

struct Parser<'a, 'k> {
    prompt: &'a str,
    key: Option<&'k SessionKey>,
}

/// Attribute names and unescaped values, borrowed from the prompt where no entity was
/// unescaped.
type Attrs<'a> = Vec<(&'a str, Cow<'a, str>)>;

/// A tag of our vocabulary found at some offset.
struct Tag<'a> {
    closing: bool,
    tier: Tier,
    /// The nonce in the tag name, for keyed tiers.
    nonce: Option<&'a str>,
    /// Offset just past the tier's name and nonce.
    name_end: usize,
}

impl<'a> Parser<'a, '_> {
    fn top_level(&self) -> Result<Vec<ParsedBlock<'a>>, ParseError> {
        let bytes = self.prompt.as_bytes();
        let mut blocks = Vec::new();
        let mut at = 0;
        while let Some(found) = memchr(b'<', &bytes[at..]) {
            let start = at + found;
            match self.tag_at(start)? {
                None => at = start + 1,
                Some(tag) if tag.closing => {
                    return Err(ParseError {
                        offset: start,
                        fault: ParseFault::StrayCloser(tag_name(tag.tier, tag.nonce)),
                    });
                }
                Some(tag) => {
                    let block = self.block(start, tag)?;
                    at = block.end;
                    blocks.push(block);
                }
            }
        }
        Ok(blocks)
    }

    /// Recognises `<` or `</` followed by one of our tag names at `start`: `None` when
    /// nothing there starts like one of our tags, an error when something does but is
    /// not exactly one (whatever character follows the name).
    fn tag_at(&self, start: usize) -> Result<Option<Tag<'a>>, ParseError> {
        let prompt = self.prompt;
        let bytes = prompt.as_bytes();
        let (closing, name_start) = if bytes.get(start + 1) == Some(&b'/') {
            (true, start + 2)
        } else {
            (false, start + 1)
        };
        let rest = bytes.get(name_start..).unwrap_or_default();
        let mut near = None;
        for tier in Tier::ALL {
            let Some(after) = rest.strip_prefix(tier.tag().as_bytes()) else {
                continue;
            };
            let mut name_end = name_start + tier.tag().len();
            let nonce = if tier.is_keyed() {
                let len = after
                    .iter()
                    .take_while(|&&b| b.is_ascii() && is_id_char(char::from(b)))
                    .count();
                name_end += len;
                if len == 0 {
                    near.get_or_insert((name_end, tier));
                    continue;
                }
                prompt.get(name_end - len..name_end)
            } else {
                None
            };
            let exact = match bytes.get(name_end) {
                Some(b'>') => true,
                Some(b' ') => !closing,
                _ => false,
            };
            if exact {
                return Ok(Some(Tag {
                    closing,
                    tier,
                    nonce,
                    name_end,
                }));
            }
            near.get_or_insert((name_end, tier));
        }
        match near {
            None => Ok(None),
            Some((offset, tier)) => Err(ParseError {
                offset,
                fault: ParseFault::NearTag(format!(
                    "{}{}",
                    if closing { "</" } else { "<" },
                    prompt.get(name_start..offset).unwrap_or(tier.tag())
                )),
            }),
        }
    }

    /// Parses the block whose opener starts at `start`.
    fn block(&self, start: usize, tag: Tag<'a>) -> Result<ParsedBlock<'a>, ParseError> {
        // The tag's name, for errors.
        let name = || tag_name(tag.tier, tag.nonce);
        let (attrs, open_end) = self.attrs(tag.name_end)?;
        if let (Some(nonce), Some((_, attr))) =
            (tag.nonce, attrs.iter().find(|(key, _)| *key == "nonce"))
            && attr != nonce
        {
            return Err(ParseError {
                offset: start,
                fault: ParseFault::NonceMismatch {
                    tag: nonce.to_owned(),
                    attr: attr.clone().into_owned(),
                },
            });
        }
        if self.prompt.as_bytes().get(open_end) != Some(&b'\n') {
            return Err(ParseError {
                offset: open_end,
                fault: ParseFault::Layout(name()),
            });
        }
        let body_start = open_end + 1;
        let close = Closer::of(tag.tier, tag.nonce.unwrap_or(""));
        let mut block = ParsedBlock {
            tier: tag.tier,
            nonce: tag.nonce,
            attrs,
            body: "",
            children: Vec::new(),
            start,
            end: 0,
        };
        let child_tier = match tag.tier {
            Tier::RetrievedCorpus => Some(Tier::Retrieved),
            Tier::Memories => Some(Tier::Memory),
            Tier::PeerOutput if block.attr("kind") == Some("reasoning") => Some(Tier::Thought),
            _ => None,
        };
        // Whether the scan that found the closer proved the body neutral.
        let mut body_neutral = false;
        let close_at = match child_tier {
            Some(child_tier) => self.children(&mut block, child_tier, body_start, close)?,
            None => {
                // A sealed data body must be neutral: one scan finds its closer and
                // proves it so, unless it finds something (then both are checked
                // apart, for the exact verdict).
                let neutral_to = match self.key {
                    Some(_) if tag.tier != Tier::DeveloperPolicy => {
                        self.prompt.get(body_start..).and_then(|rest| {
                            neutral_until(rest, |text| close.is_at(text)).map(|at| body_start + at)
                        })
                    }
                    _ => None,
                };
                body_neutral = neutral_to.is_some();
                let close_at = neutral_to
                    .or_else(|| find_closer(self.prompt.as_bytes(), body_start, close))
                    .ok_or_else(|| ParseError {
                        offset: start,
                        fault: ParseFault::Unclosed(name()),
                    })?;
                if close_at <= body_start || self.prompt.as_bytes()[close_at - 1] != b'\n' {
                    return Err(ParseError {
                        offset: close_at,
                        fault: ParseFault::Layout(name()),
                    });
                }
                block.body = &self.prompt[body_start..close_at - 1];
                close_at
            }
        };
        block.end = close_at + close.len();
        self.authenticate(&block, body_neutral)?;
        Ok(block)
    }

    /// Parses the children of a container, each on its own line, up to the container's
    /// closer; returns the closer's offset.
    fn children(
        &self,
        block: &mut ParsedBlock<'a>,
        child_tier: Tier,
        mut at: usize,
        close: Closer<'_>,
    ) -> Result<usize, ParseError> {
        let name = || tag_name(block.tier, block.nonce);
        loop {
            let child = self
                .tag_at(at)?
                .filter(|tag| !tag.closing && tag.tier == child_tier)
                .ok_or_else(|| ParseError {
                    offset: at,
                    fault: ParseFault::BadChild(name()),
                })?;
            let child = self.block(at, child)?;
            let after = child.end;
            block.children.push(child);
            if !self
                .prompt
                .get(after..)
                .is_some_and(|rest| rest.starts_with('\n'))
            {
                return Err(ParseError {
                    offset: after,
                    fault: ParseFault::Layout(name()),
                });
            }
            if close.is_at(self.prompt.as_bytes().get(after + 1..).unwrap_or_default()) {
                return Ok(after + 1);
            }
            if block.tier == Tier::PeerOutput {
                // A peer's reasoning holds exactly one thought.
                return Err(ParseError {
                    offset: after + 1,
                    fault: ParseFault::BadChild(name()),
                });
            }
            at = after + 1;
        }
    }

    /// Parses ` name="value"` pairs up to `>`; returns them and the offset past `>`.
    fn attrs(&self, mut at: usize) -> Result<(Attrs<'a>, usize), ParseError> {
        let prompt = self.prompt;
        let bytes = prompt.as_bytes();
        // Room for every attribute the renderer writes.
        let mut attrs = Vec::with_capacity(8);
        let malformed = |offset, why| ParseError {
            offset,
            fault: ParseFault::MalformedOpener(why),
        };
        loop {
            match bytes.get(at) {
                Some(b'>') => return Ok((attrs, at + 1)),
                Some(b' ') => at += 1,
                _ => return Err(malformed(at, "expected ` name=\"value\"` or `>`")),
            }
            let name_len = bytes[at..]
                .iter()
                .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_' || **b == b'-')
                .count();
            if name_len == 0 || bytes.get(at + name_len..at + name_len + 2) != Some(b"=\"") {
                return Err(malformed(at, "an attribute is `name=\"value\"`"));
            }
            let name = &prompt[at..at + name_len];
            let value_start = at + name_len + 2;
            let value_len = memchr(b'"', &bytes[value_start..])
                .ok_or_else(|| malformed(value_start, "unterminated attribute value"))?;
            let raw = &prompt[value_start..value_start + value_len];
            // Searched as bytes: a pattern of chars decodes every character.
            if memchr::memchr2(b'<', b'>', raw.as_bytes()).is_some() {
                return Err(malformed(
                    value_start,
                    "unescaped `<` or `>` in an attribute",
                ));
            }
            let value = if memchr(b'&', raw.as_bytes()).is_some() {
                Cow::Owned(
                    unescape_attr(raw).ok_or_else(|| malformed(value_start, "bad `&` entity"))?,
                )
            } else {
                Cow::Borrowed(raw)
            };
            if attrs.iter().any(|(existing, _)| *existing == name) {
                return Err(malformed(at, "duplicate attribute"));
            }
            attrs.push((name, value));
            at = value_start + value_len + 1;
        }
    }

    /// In sealed verification, checks the block's nonce against the key and its body
    /// for leftover tag vocabulary.
    fn authenticate(&self, block: &ParsedBlock<'_>, body_neutral: bool) -> Result<(), ParseError> {
        let Some(key) = self.key else {
            return Ok(());
        };
        let name = || tag_name(block.tier, block.nonce);
        let fault = |fault| ParseError {
            offset: block.start,
            fault,
        };
        if let Some(nonce) = block.nonce {
            let pair;
            let one;
            let identity: &[&str] = match (block.attr("call"), block.attr("checksum")) {
                (Some(call), Some(checksum)) => {
                    pair = [call, checksum];
                    &pair
                }
                _ => match block.attr("id") {
                    Some(id) => {
                        one = [id];
                        &one
                    }
                    None => return Err(fault(ParseFault::Unauthenticated(name()))),
                },
            };
            let domain = nonce_domain(block.tier, |name| block.attr(name));
            if !key.verify(&domain, identity, nonce) {
                return Err(fault(ParseFault::ForgedNonce(name())));
            }
        }
        // The developer's policy is not data: sealed rendering leaves it as written.
        if block.tier == Tier::DeveloperPolicy {
            return Ok(());
        }
        let neutral = |text: &str| neutralise(text).findings.is_empty();
        if !(body_neutral || neutral(block.body))
            || !block.attrs.iter().all(|(_, value)| neutral(value))
        {
            return Err(fault(ParseFault::NotNeutralised(name())));
        }
        Ok(())
    }
}

/// A block's closing tag, as [`closer`](super::render::closer) writes it, compared where it may stand rather
/// than built: a parse meets one per block, and an allocation each is a measurable part
/// of reading a block.
#[derive(Debug, Clone, Copy)]
struct Closer<'a> {
    tag: &'static str,
    nonce: &'a str,
}

impl<'a> Closer<'a> {
    fn of(tier: Tier, nonce: &'a str) -> Self {
        Closer {
            tag: tier.tag(),
            nonce: if tier.is_keyed() { nonce } else { "" },
        }
    }

    fn len(self) -> usize {
        self.tag.len() + self.nonce.len() + 3
    }

    /// Whether `text` starts with this closer.
    fn is_at(self, text: &[u8]) -> bool {
        text.strip_prefix(b"</")
            .and_then(|rest| rest.strip_prefix(self.tag.as_bytes()))
            .and_then(|rest| rest.strip_prefix(self.nonce.as_bytes()))
            .is_some_and(|rest| rest.first() == Some(&b'>'))
    }
}

/// The offset of the first `close` at or after `from`. It visits each `<` once, as a
/// `memchr` scan does, and the `/` that follows a closer's `<` rules out nearly every
/// other one before the whole closer is compared.
fn find_closer(prompt: &[u8], from: usize, close: Closer<'_>) -> Option<usize> {
    // Past this many slashes, stopping at every `<` instead is cheaper.
    const DENSE: usize = 8;
    let rest = prompt.get(from..)?;
    let closes_at = |at: usize| close.is_at(rest.get(at..).unwrap_or_default());
    // A closer's `/` is rarer than its `<` in prose and in code; a search pays a restart
    // per hit.
    // Every closer holds a `/`: with all of them checked, there is none.
    let mut lesses_from = rest.len();
    for (seen, slash) in memchr::memchr_iter(b'/', rest).enumerate() {
        if seen == DENSE {
            lesses_from = slash.saturating_sub(1);
            break;
        }
        if slash > 0 && closes_at(slash - 1) {
            return Some(from + slash - 1);
        }
    }
    memchr::memchr_iter(b'<', &rest[lesses_from..])
        .map(|at| lesses_from + at)
        .find(|&at| closes_at(at))
        .map(|at| from + at)
}

fn tag_name(tier: Tier, nonce: Option<&str>) -> String {
    tier.tag_name(nonce.unwrap_or(""))
}

#[cfg(test)]
mod tests {
    use super::{Closer, find_closer};
    use crate::envelope::Tier;
    use crate::envelope::render::closer;

    /// The search by slashes finds the first closer exactly where a plain search does,
    /// with few or many slashes and `<` around it, or none at all.
    #[test]
    fn the_closer_is_found_where_a_plain_search_finds_it() {
        let tier = Tier::UntrustedContent;
        let close = &closer(tier, "ab12");
        let close_in_place = Closer::of(tier, "ab12");
        assert_eq!(close_in_place.len(), close.len());
        let pieces = [
            "a",
            "/",
            "<",
            "</",
            "</untrusted_content_ab1>",
            "</untrusted_content_ab12",
            "</untrusted_content_ab123>",
            "é",
            " ",
            "\n",
            close,
        ];
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        for case in 0..2_000 {
            let mut text = String::new();
            let len = next(400);
            while text.len() < len {
                // Closers rare in some texts, slashes dense in others.
                let piece = pieces[next(if case % 2 == 0 {
                    pieces.len() - 1
                } else {
                    pieces.len()
                })];
                text.push_str(piece);
            }
            let mut from = next(text.len() + 1);
            while !text.is_char_boundary(from) {
                from -= 1;
            }
            let expected = text[from..].find(close).map(|at| from + at);
            assert_eq!(
                find_closer(text.as_bytes(), from, close_in_place),
                expected,
                "{text:?} from {from}"
            );
        }
    }
}
