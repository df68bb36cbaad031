//! Neutralisation alone against a plain copy of the same bytes, in the same run (DESIGN
//! §4; issue 8): 64 KiB of ordinary English (plain ASCII, and with typographic
//! punctuation), of `<`-dense code and of CJK text. The goals are those of sealed
//! rendering, of which neutralisation is the bulk (`benches/render.rs`).
//!
//! The neutraliser reads text through a table generated from the Unicode crates; a row
//! per text gives what reading it with the crates themselves would cost instead (the
//! UTS #39 skeleton of every character, `unicode-security`), against the same copy.
//!
//! `cargo bench -p tooltrust --bench neutralise [-- FILTER]`

mod harness;
mod texts;

use std::hint::black_box;

use harness::Goal;
use tooltrust::envelope::neutralise;
use unicode_security::confusable_detection::skeleton;

fn main() {
    for (name, text) in texts::all() {
        let goal = match name {
            "english" => Goal::AtMost(3.0),
            _ => Goal::AtMost(5.0),
        };
        let findings = neutralise(&text).findings.len();
        harness::compare(
            &format!("neutralise/{name} ({} B, {findings} findings)", text.len()),
            "copy",
            goal,
            || texts::copy(black_box(text.as_bytes())),
            || neutralise(black_box(&text)),
        );
        // The crate instead of the table: the skeleton of the whole text.
        harness::compare(
            &format!("neutralise/{name}: its UTS #39 skeleton by unicode-security, for comparison"),
            "copy",
            Goal::None,
            || texts::copy(black_box(text.as_bytes())),
            || skeleton(black_box(&text)).count(),
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
