//! Verifying a rendered prompt of about 1 MiB against a `memchr` scan of it for `<`, in
//! the same run: `parse` (structure only) and `parse_sealed`
//! (structure, every nonce authenticated with the session key, every body checked to
//! be neutral). Goals: `parse` ≤ 2× the scan, `parse_sealed` ≤ 4×.
//!
//! Two prompts, in sealed mode: messages, tool results and retrieved records of ordinary
//! English, and the same mix of every kind of text (ordinary and typographic English,
//! `<`-dense code, CJK). `parse_sealed` runs the neutraliser over every body, so a row
//! gives that part alone.
//!
//! `cargo bench -p tooltrust --bench verify [-- FILTER]`

mod harness;
mod texts;

use std::hint::black_box;

use harness::Goal;
use tooltrust::call::Checksum;
use tooltrust::envelope::{Renderer, SessionKey};
use tooltrust::envelope::{neutralise, parse, parse_sealed};
use tooltrust::tool::{OutputKind, RetrievedRecord, SourceTier};
use tooltrust::{Id, Message, Sender, Trust};

const PROMPT_BYTES: usize = 1 << 20;

fn main() {
    let key = SessionKey::from_bytes([0x5a; 32]);
    let renderer = Renderer::sealed(key.clone());
    let all = texts::all();
    let english: Vec<String> = all
        .iter()
        .filter(|(name, _)| *name == "english")
        .map(|(_, text)| text.clone())
        .collect();
    let mixed: Vec<String> = all.into_iter().map(|(_, text)| text).collect();
    for (name, bodies) in [("english", english), ("mixed", mixed)] {
        let prompt = prompt(&renderer, &bodies);
        let blocks = match parse_sealed(&prompt, &key) {
            Ok(blocks) => blocks,
            Err(error) => panic!("the {name} prompt does not verify: {error}"),
        };
        let brackets = memchr::memchr_iter(b'<', prompt.as_bytes()).count();
        harness::note(&format!(
            "verify: the {name} prompt is {} B in {} top-level blocks, with {brackets} `<`",
            prompt.len(),
            blocks.len()
        ));
        let scan = || memchr::memchr_iter(b'<', black_box(prompt.as_bytes())).count();
        let size = format!("{name} prompt, {} B", prompt.len());
        harness::compare(
            &format!("verify/parse ({size})"),
            "memchr scan for `<`",
            Goal::AtMost(2.0),
            scan,
            || parse(black_box(&prompt)),
        );
        harness::compare(
            &format!("verify/parse_sealed ({size})"),
            "memchr scan for `<`",
            Goal::AtMost(4.0),
            scan,
            || parse_sealed(black_box(&prompt), &key),
        );
        let bodies: Vec<&str> = leaves(&blocks);
        harness::compare(
            &format!("verify/parse_sealed's part: neutralise every body ({size})"),
            "memchr scan for `<`",
            Goal::None,
            scan,
            || {
                bodies
                    .iter()
                    .filter(|body| neutralise(black_box(body)).findings.is_empty())
                    .count()
            },
        );
    }
    dense_with_brackets(&renderer, &key);
}

/// Dense text full of brackets, where the verifier's one pass over a body (which stops
/// at each `<` to look for the closer) could restart its dense searches at every one.
fn dense_with_brackets(renderer: &Renderer, key: &SessionKey) {
    let body = "日本語のテキスト、「引用」。a < b, ".repeat(1200);
    let call = Id::new("call_000001").expect("a valid id");
    let rendered = renderer.tool_result(
        "fetch_page",
        &call,
        Checksum::of(call.as_str().as_bytes()),
        Trust::Untrusted,
        OutputKind::Data,
        &body,
    );
    let prompt = match rendered {
        Ok(rendered) => rendered.text,
        Err(error) => panic!("{error}"),
    };
    harness::compare(
        &format!(
            "verify/parse_sealed of one body of CJK with a `<` every 64 B ({} B)",
            body.len()
        ),
        "neutralise the body",
        Goal::None,
        || neutralise(black_box(&body)),
        || parse_sealed(black_box(&prompt), key),
    );
}

/// The bodies of the leaf blocks.
fn leaves<'a>(blocks: &[tooltrust::envelope::ParsedBlock<'a>]) -> Vec<&'a str> {
    blocks
        .iter()
        .flat_map(|block| match block.children.is_empty() {
            true => vec![block.body],
            false => leaves(&block.children),
        })
        .collect()
}

/// About [`PROMPT_BYTES`] of blocks cut from `bodies` in turn, separated by blank lines.
fn prompt(renderer: &Renderer, bodies: &[String]) -> String {
    let mut prompt = String::with_capacity(PROMPT_BYTES + (64 << 10));
    let mut n = 0usize;
    while prompt.len() < PROMPT_BYTES {
        // Every kind of block gets every kind of text in turn.
        let text = &bodies[(n + n / 4) % bodies.len()];
        let rendered = match n % 4 {
            0 => renderer.message(&Message {
                id: Id::new(format!("msg-{n}")).expect("a valid id"),
                sender: Sender::User,
                from: "customer@example.com".to_owned(),
                created_at: Some("2025-01-01T00:00:00Z".to_owned()),
                content: excerpt(text, 2 << 10),
            }),
            1 => renderer.retrieved(
                &(0..3)
                    .map(|k| RetrievedRecord {
                        id: Id::new(format!("doc-{n}-{k}")).expect("a valid id"),
                        content: excerpt(text, 1 << 10),
                        tier: if k == 2 {
                            SourceTier::ThirdPartyPublic
                        } else {
                            SourceTier::FirstParty
                        },
                        source: Some(format!("kb/article-{k}.md")),
                        created_at: None,
                        kind: Some("faq".to_owned()),
                        score: Some(0.75),
                    })
                    .collect::<Vec<_>>(),
            ),
            _ => {
                let call = Id::new(format!("call_{n:06}")).expect("a valid id");
                renderer.tool_result(
                    "fetch_page",
                    &call,
                    Checksum::of(call.as_str().as_bytes()),
                    Trust::Untrusted,
                    OutputKind::Data,
                    &excerpt(text, 32 << 10),
                )
            }
        };
        match rendered {
            Ok(rendered) => prompt.push_str(&rendered.text),
            Err(error) => panic!("block {n}: {error}"),
        }
        prompt.push_str("\n\n");
        n += 1;
    }
    prompt
}

/// The first `len` bytes of `text`, cut back to a character boundary.
fn excerpt(text: &str, len: usize) -> String {
    let mut end = len.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}
