//! Verifying a rendered prompt of about 1 MiB against a `memchr` scan of it for `<`, in
//! the same run (DESIGN §3.5; issue 8): `parse` (structure only) and `parse_sealed`
//! (structure, every nonce authenticated with the session key, every body checked to
//! be neutral). Goal: ≤ 3× the scan.
//!
//! The prompt mixes messages, tool results and retrieved records of every kind of text
//! (ordinary and typographic English, `<`-dense code, CJK), in sealed mode.
//!
//! `cargo bench -p tooltrust --bench verify [-- FILTER]`

mod harness;
mod texts;

use std::hint::black_box;

use harness::Goal;
use tooltrust::envelope::{parse, parse_sealed};
use tooltrust::{
    Checksum, Id, Message, OutputKind, Renderer, RetrievedRecord, Sender, SessionKey, SourceTier,
    Trust,
};

const PROMPT_BYTES: usize = 1 << 20;

fn main() {
    let key = SessionKey::from_bytes([0x5a; 32]);
    let renderer = Renderer::sealed(key.clone());
    let prompt = prompt(&renderer);
    let blocks = match parse_sealed(&prompt, &key) {
        Ok(blocks) => blocks.len(),
        Err(error) => panic!("the prompt does not verify: {error}"),
    };
    let brackets = memchr::memchr_iter(b'<', prompt.as_bytes()).count();
    harness::note(&format!(
        "verify: the prompt is {} B in {blocks} top-level blocks, with {brackets} `<`",
        prompt.len()
    ));
    let scan = || memchr::memchr_iter(b'<', black_box(prompt.as_bytes())).count();
    harness::compare(
        &format!("verify/parse ({} B prompt)", prompt.len()),
        "memchr scan for `<`",
        Goal::AtMost(3.0),
        scan,
        || parse(black_box(&prompt)),
    );
    harness::compare(
        &format!("verify/parse_sealed ({} B prompt)", prompt.len()),
        "memchr scan for `<`",
        Goal::AtMost(3.0),
        scan,
        || parse_sealed(black_box(&prompt), &key),
    );
}

/// About [`PROMPT_BYTES`] of blocks, separated by blank lines.
fn prompt(renderer: &Renderer) -> String {
    let bodies = texts::all();
    let mut prompt = String::with_capacity(PROMPT_BYTES + (64 << 10));
    let mut n = 0usize;
    while prompt.len() < PROMPT_BYTES {
        let (_, text) = &bodies[n % bodies.len()];
        let rendered = match n % 4 {
            0 => renderer.message(&Message {
                id: format!("msg-{n}"),
                sender: Sender::User,
                from: "customer@example.com".to_owned(),
                created_at: Some("2025-01-01T00:00:00Z".to_owned()),
                content: excerpt(text, 2 << 10),
            }),
            1 => renderer.retrieved(
                &(0..3)
                    .map(|k| RetrievedRecord {
                        id: format!("doc-{n}-{k}"),
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
                let call = Id::new(format!("call_{n:06}")).unwrap_or_else(|_| Id::random());
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
