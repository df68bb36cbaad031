//! Neutralisation alone against a plain copy of the same bytes, in the same run (DESIGN
//! §4; issue 8): 64 KiB of ordinary English (plain ASCII, and with typographic
//! punctuation), of `<`-dense code and of CJK text. The goals are those of sealed
//! rendering, of which neutralisation is the bulk (`benches/render.rs`).
//!
//! `cargo bench -p tooltrust --bench neutralise [-- FILTER]`

mod harness;
mod texts;

use std::hint::black_box;

use harness::Goal;
use tooltrust::envelope::neutralise;

fn main() {
    for (name, text) in texts::all() {
        let goal = match name {
            "code (< dense)" => Goal::AtMost(6.0),
            "cjk" => Goal::None,
            _ => Goal::AtMost(3.0),
        };
        let findings = neutralise(&text).findings.len();
        harness::compare(
            &format!("neutralise/{name} ({} B, {findings} findings)", text.len()),
            "copy",
            goal,
            || texts::copy(black_box(text.as_bytes())),
            || neutralise(black_box(&text)),
        );
        // Part of the work: finding every `<` and `[` (a floor for bracket-dense text).
        harness::compare(
            &format!("neutralise/{name}: the search for `<` and `[` alone (memchr2)"),
            "copy",
            Goal::None,
            || texts::copy(black_box(text.as_bytes())),
            || memchr::memchr2_iter(b'<', b'[', black_box(text.as_bytes())).count(),
        );
    }
}
