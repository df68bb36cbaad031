//! Rendering against a plain copy of the body, in the same run (rendering should cost a
//! small multiple of copying the body):
//!
//! - a 64 KiB tool result in compat mode (goal ≤ 2.2× a copy: a copy and one scan for
//!   closers, fused so the body is read from memory once) and in sealed mode, where the
//!   body is also neutralised (goal ≤ 3× for ordinary English, ≤ 5× for typographic
//!   English, `<`-dense code and CJK);
//! - prompts of 10, 1,000 and 100,000 tool results in sealed mode, in ns per byte of
//!   the prompt: rendering is linear in its bytes when the figure stays flat.
//!
//! `cargo bench -p tooltrust --bench render [-- FILTER]`

mod harness;
mod texts;

use std::hint::black_box;

use harness::Goal;
use tooltrust::call::Checksum;
use tooltrust::envelope::{Renderer, SessionKey};
use tooltrust::tool::OutputKind;
use tooltrust::{Id, Trust};

const TOOL: &str = "fetch_page";

fn main() {
    let key = SessionKey::from_bytes([0x5a; 32]);
    let renderers = [
        ("compat", Renderer::compat()),
        ("sealed", Renderer::sealed(key)),
    ];
    let call_id = id("call_0aF9c81e2d4b6a8f0e2");
    let checksum = Checksum::of(b"the call's canonical bytes");

    for (mode, renderer) in &renderers {
        for (name, body) in texts::all() {
            let goal = match (*mode, name) {
                ("compat", _) => Goal::AtMost(2.2),
                (_, "english") => Goal::AtMost(3.0),
                _ => Goal::AtMost(5.0),
            };
            let render = || {
                renderer.tool_result(
                    TOOL,
                    &call_id,
                    checksum,
                    Trust::Untrusted,
                    OutputKind::Data,
                    black_box(&body),
                )
            };
            if let Err(error) = render() {
                panic!("{mode} {name}: {error}");
            }
            harness::compare(
                &format!("render/{mode} tool result, {name} ({} B)", body.len()),
                "copy of the body",
                goal,
                || texts::copy(black_box(body.as_bytes())),
                render,
            );
        }
    }

    // The least a renderer that refuses live closers can do: copy the body and look at
    // every `<` in it once.
    let english = texts::english(false);
    harness::compare(
        &format!(
            "render/floor: copy + one memchr scan for `<`, english ({} B)",
            english.len()
        ),
        "copy of the body",
        Goal::None,
        || texts::copy(black_box(english.as_bytes())),
        || {
            let bytes = black_box(english.as_bytes());
            (texts::copy(bytes), memchr::memchr_iter(b'<', bytes).count())
        },
    );

    // Linearity: the same mix of bodies (32 to 512 bytes, every kind of text) cycled
    // through prompts of growing length.
    let bodies = mixed_bodies();
    let (_, sealed) = &renderers[1];
    for blocks in [10, 1_000, 100_000] {
        let calls: Vec<(Id, Checksum)> = (0..blocks)
            .map(|i| {
                let call = id(&format!("call_{i:08}"));
                let checksum = Checksum::of(call.as_str().as_bytes());
                (call, checksum)
            })
            .collect();
        let render_prompt = || {
            let mut prompt = String::new();
            for ((call, checksum), body) in calls.iter().zip(bodies.iter().cycle()) {
                let rendered = sealed.tool_result(
                    TOOL,
                    call,
                    *checksum,
                    Trust::Untrusted,
                    OutputKind::Data,
                    black_box(body),
                );
                match rendered {
                    Ok(rendered) => {
                        prompt.push_str(&rendered.text);
                        prompt.push('\n');
                    }
                    Err(error) => panic!("{error}"),
                }
            }
            prompt
        };
        let prompt = render_prompt();
        harness::compare_per_byte(
            &format!(
                "render/sealed prompt of {blocks} blocks ({} B)",
                prompt.len()
            ),
            "copy of the prompt",
            Goal::None,
            prompt.len(),
            || texts::copy(black_box(prompt.as_bytes())),
            render_prompt,
        );
    }
}

fn id(text: &str) -> Id {
    match Id::new(text) {
        Ok(id) => id,
        Err(error) => panic!("{text}: {error}"),
    }
}

/// 64 bodies of 32 to 512 bytes cut from every kind of text, at character boundaries.
fn mixed_bodies() -> Vec<String> {
    let sources = texts::all();
    let mut rng = texts::Rng(3);
    (0..64)
        .map(|i| {
            let (_, text) = &sources[i % sources.len()];
            let len = 32 << rng.below(5);
            let mut start = rng.below(text.len() - len);
            while !text.is_char_boundary(start) {
                start -= 1;
            }
            let mut end = start + len;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text[start..end].to_owned()
        })
        .collect()
}
