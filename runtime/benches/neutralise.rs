//! Neutralisation against a plain copy of the same bytes, measured in the same run
//! (DESIGN §4; issue 8): 64 KiB of ordinary English (plain ASCII, and with typographic
//! punctuation), of `<`-dense code and of CJK text.
//!
//! `cargo bench -p tooltrust --bench neutralise`

use std::hint::black_box;
use std::time::Instant;

use tooltrust::envelope::neutralise;

const ROUNDS: usize = 11;
const TARGET_BYTES: usize = 64 * 1024;
/// Bytes processed per timed sample, so a sample lasts long enough to time.
const SAMPLE_BYTES: usize = 64 * 1024 * 1024;

const CODE: &str = include_str!("../tests/data/perf/result64k.txt");

/// A deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) % n as u64) as usize
    }
}

/// Sentences of common English words, with typographic apostrophes, dashes and quotes
/// (about one non-ASCII character per 100 bytes; the plain variant drops them).
fn english(typographic: bool) -> String {
    const WORDS: &str = "the of and to in is was that for with as on by report customer refund policy \
        order shipping weather meeting tomorrow please review account balance transfer \
        information travel hotel restaurant calendar document summary results because \
        however would could should between through during";
    let words: Vec<&str> = WORDS.split_whitespace().collect();
    let mut rng = Rng(1);
    let mut text = String::with_capacity(TARGET_BYTES + 64);
    while text.len() < TARGET_BYTES {
        let sentence = 8 + rng.below(14);
        for i in 0..sentence {
            let word = words[rng.below(words.len())];
            if i == 0 {
                let mut chars = word.chars();
                text.extend(chars.next().map(|c| c.to_ascii_uppercase()));
                text.push_str(chars.as_str());
            } else {
                text.push_str(word);
            }
            match (rng.below(40), typographic) {
                (0, _) => text.push_str(", "),
                (1, true) => text.push_str(" \u{2014} "),
                (2, true) => text.push_str("\u{2019}s "),
                _ => text.push(' '),
            }
        }
        text.pop();
        text.push_str(if rng.below(6) == 0 { ".\n\n" } else { ". " });
        if typographic && rng.below(10) == 0 {
            text.push_str("\u{201C}Quoted,\u{201D} they said. ");
        }
    }
    text
}

/// Chinese and Japanese prose with their punctuation.
fn cjk() -> String {
    const HAN: &str = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处理府研质";
    const KANA: &str = "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをんアイウエオカキクケコサシスセソタチツテト";
    const PUNCTUATION: &[&str] = &["，", "。", "、", "「", "」", "！", "？", "：", "（", "）"];
    let han: Vec<char> = HAN.chars().collect();
    let kana: Vec<char> = KANA.chars().collect();
    let mut rng = Rng(2);
    let mut text = String::with_capacity(TARGET_BYTES + 64);
    while text.len() < TARGET_BYTES {
        for _ in 0..(4 + rng.below(10)) {
            let pool = if rng.below(3) == 0 { &kana } else { &han };
            text.push(pool[rng.below(pool.len())]);
        }
        text.push_str(PUNCTUATION[rng.below(PUNCTUATION.len())]);
        if rng.below(12) == 0 {
            text.push('\n');
        }
    }
    text
}

/// Nanoseconds per run of `f`, over enough runs to make `SAMPLE_BYTES`.
fn sample(len: usize, mut f: impl FnMut()) -> f64 {
    let runs = (SAMPLE_BYTES / len.max(1)).max(1);
    let start = Instant::now();
    for _ in 0..runs {
        f();
    }
    start.elapsed().as_nanos() as f64 / runs as f64
}

fn min_median(samples: &mut [f64]) -> (f64, f64) {
    samples.sort_by(f64::total_cmp);
    (samples[0], samples[samples.len() / 2])
}

fn main() {
    // `cargo bench --bench neutralise -- cjk` runs only the bodies whose name contains `cjk`.
    let filter = std::env::args().skip(1).find(|arg| !arg.starts_with('-'));
    let plain = english(false);
    let typographic = english(true);
    let cjk = cjk();
    println!("neutralise vs Vec::extend_from_slice copy, {ROUNDS} rounds, ns per body");
    println!(
        "{:<16} {:>7} {:>9} {:>10} {:>10} {:>10} {:>10} {:>7}",
        "body", "bytes", "findings", "copy min", "copy med", "neut min", "neut med", "ratio"
    );
    for (name, text) in [
        ("english", plain.as_str()),
        ("english typogr.", typographic.as_str()),
        ("code (< dense)", CODE),
        ("cjk", cjk.as_str()),
    ] {
        if filter
            .as_ref()
            .is_some_and(|filter| !name.contains(filter.as_str()))
        {
            continue;
        }
        let bytes = text.as_bytes();
        let findings = neutralise(text).findings.len();
        let mut copy = Vec::with_capacity(ROUNDS);
        let mut neut = Vec::with_capacity(ROUNDS);
        for _ in 0..ROUNDS {
            copy.push(sample(bytes.len(), || {
                let mut out = Vec::with_capacity(bytes.len());
                out.extend_from_slice(black_box(bytes));
                black_box(out);
            }));
            neut.push(sample(bytes.len(), || {
                black_box(neutralise(black_box(text)));
            }));
        }
        let (copy_min, copy_med) = min_median(&mut copy);
        let (neut_min, neut_med) = min_median(&mut neut);
        println!(
            "{name:<16} {:>7} {findings:>9} {copy_min:>10.0} {copy_med:>10.0} {neut_min:>10.0} {neut_med:>10.0} {:>6.2}x",
            bytes.len(),
            neut_med / copy_med
        );
    }
}
