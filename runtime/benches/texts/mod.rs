//! Deterministic bodies for the rendering benchmarks: about 64 KiB each of ordinary
//! English (plain ASCII, and with typographic punctuation), of `<`-dense code and of CJK
//! text.

#![allow(dead_code, reason = "each bench uses the bodies it needs")]

/// The size of each body.
pub const TARGET_BYTES: usize = 64 * 1024;

/// A 64 KiB tool result dense with `<` (source code), from the project's perf fixtures.
pub const CODE: &str = include_str!("../../tests/data/perf/result64k.txt");

/// The bodies, by name: `english`, `english typographic`, `code (< dense)`, `cjk`.
pub fn all() -> [(&'static str, String); 4] {
    [
        ("english", english(false)),
        ("english typographic", english(true)),
        ("code (< dense)", CODE.to_owned()),
        ("cjk", cjk()),
    ]
}

/// A deterministic generator (SplitMix64).
pub struct Rng(pub u64);

impl Rng {
    /// A number below `n`.
    pub fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) % n as u64) as usize
    }
}

/// Sentences of common English words, with typographic apostrophes, dashes and quotes
/// (about one non-ASCII character per 100 bytes; the plain variant drops them).
pub fn english(typographic: bool) -> String {
    english_of_len(TARGET_BYTES, typographic, 1)
}

/// Like [`english`], about `len` bytes, from generator `seed`.
pub fn english_of_len(len: usize, typographic: bool, seed: u64) -> String {
    const WORDS: &str = "the of and to in is was that for with as on by report customer refund policy \
        order shipping weather meeting tomorrow please review account balance transfer \
        information travel hotel restaurant calendar document summary results because \
        however would could should between through during";
    let words: Vec<&str> = WORDS.split_whitespace().collect();
    let mut rng = Rng(seed);
    let mut text = String::with_capacity(len + 64);
    while text.len() < len {
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
pub fn cjk() -> String {
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

/// A plain copy of `bytes` into a fresh buffer: the raw work rendering cannot avoid.
pub fn copy(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    out.extend_from_slice(bytes);
    out
}
