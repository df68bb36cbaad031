//! Neutralisation alone against a plain copy of the same bytes, in the same run: 64 KiB of ordinary English (plain ASCII, and with typographic
//! punctuation), of `<`-dense code and of CJK text. The goals are those of sealed
//! rendering, of which neutralisation is the bulk (`benches/render.rs`).
//!
//! The neutraliser reads text through a table generated from the Unicode crates; a row
//! per text gives what reading it with the crates themselves would cost instead (the
//! UTS #39 skeleton of every character, `unicode-security`), against the same copy.
//! Two more rows give floors: the search for `<` and `[` alone, and (on x86-64) a pass
//! that flags every `<`, `[` and non-ASCII byte in vector registers, as a scan that
//! classified bytes sixteen at a time would, before it looked at anything it flagged.
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
        #[cfg(target_arch = "x86_64")]
        harness::compare(
            &format!("neutralise/{name}: flagging every `<`, `[` and non-ASCII byte alone (SSE2)"),
            "copy",
            Goal::None,
            || texts::copy(black_box(text.as_bytes())),
            || flag_bytes(black_box(text.as_bytes())),
        );
    }
}

/// One bit per `<`, `[` and non-ASCII byte of `bytes` (whole 64-byte blocks), folded into
/// a sum: SSE2 compares and byte masks through `safe_arch`, the baseline x86-64 vector
/// instructions that safe code can reach (the runtime forbids `unsafe`, and `std::arch`
/// needs it even for SSE2).
#[cfg(target_arch = "x86_64")]
fn flag_bytes(bytes: &[u8]) -> u64 {
    use safe_arch::{
        bitor_m128i, cmp_eq_mask_i8_m128i, load_unaligned_m128i, move_mask_i8_m128i,
        set_splat_i8_m128i,
    };
    let angle = set_splat_i8_m128i(0x3C);
    let square = set_splat_i8_m128i(0x5B);
    let mut sum = 0u64;
    for block in bytes.chunks_exact(64) {
        let mut flags = 0u64;
        for (k, sixteen) in block.chunks_exact(16).enumerate() {
            let Ok(sixteen) = <&[u8; 16]>::try_from(sixteen) else {
                continue;
            };
            let v = load_unaligned_m128i(sixteen);
            let brackets = bitor_m128i(
                cmp_eq_mask_i8_m128i(v, angle),
                cmp_eq_mask_i8_m128i(v, square),
            );
            // A byte's top bit marks it non-ASCII: the mask reads it straight from `v`.
            let mask = move_mask_i8_m128i(bitor_m128i(brackets, v));
            flags |= u64::from(mask as u16) << (16 * k);
        }
        sum = sum.wrapping_add(flags);
    }
    sum
}
