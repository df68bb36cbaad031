//! Properties of the sealed-mode neutraliser over generated bodies built from our tag
//! vocabulary, chat tokens, lookalikes, invisible characters, tag characters and
//! ordinary text.

mod common;

use std::borrow::Cow;

use common::{
    CHAT_TOKENS, INVISIBLES, Rng, assert_neutralised, random_tag, spell, tag_encode, words,
};
use proptest::prelude::*;
use tooltrust::envelope::{FindingKind, neutralise};

const ENGLAND: &str = "\u{1F3F4}\u{E0067}\u{E0062}\u{E0065}\u{E006E}\u{E0067}\u{E007F}";
const WALES: &str = "\u{1F3F4}\u{E0067}\u{E0062}\u{E0077}\u{E006C}\u{E0073}\u{E007F}";

/// Text that must come out as it went in.
const ORDINARY: &[&str] = &[
    "a < b",
    "x <= y && y > z",
    "Vec<String>",
    "HashMap<K, V>",
    "<div class=\"note\">",
    "</div>",
    "<INFORMATION>",
    "</INFORMATION>",
    "<system>",
    "&lt;",
    "<",
    "[",
    "]",
    "|",
    "/",
    ">",
    "a <|> b",
    "[link](https://example.com)",
    "日本語のテキスト、",
    "《书名》「引用」。",
    "é ß ü —",
    "😀",
    "\u{1F3F4}",
    ENGLAND,
    WALES,
    "\u{200D}",
    "\n",
];

/// A tag of any tier or a chat token, in a random spelling a model could still read.
fn vocabulary() -> impl Strategy<Value = String> {
    (any::<u64>(), any::<bool>()).prop_map(|(seed, token)| {
        let mut rng = Rng(seed);
        let plain = if token {
            rng.pick(&CHAT_TOKENS).to_owned()
        } else {
            random_tag(&mut rng)
        };
        spell(&plain, &mut rng)
    })
}

fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-zA-Z0-9 .,:;!?'\"\n-]{0,24}",
        3 => prop::sample::select(ORDINARY).prop_map(str::to_owned),
        4 => vocabulary(),
        1 => prop::sample::select(&INVISIBLES[..]).prop_map(String::from),
        1 => "[ -~]{1,12}".prop_map(|text| tag_encode(&text)),
        1 => any::<String>(),
    ]
}

fn body() -> impl Strategy<Value = String> {
    prop::collection::vec(piece(), 0..16).prop_map(|pieces| pieces.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// Idempotent, nothing recognisable left, every word kept, borrowed when nothing was
    /// found, findings pointing at the input.
    #[test]
    fn neutralised_bodies_have_every_property(body in body()) {
        assert_neutralised(&body);
    }

    /// Every spelling the generator makes is recognised on its own.
    #[test]
    fn every_spelling_of_the_vocabulary_is_found(spelled in vocabulary()) {
        let out = neutralise(&spelled);
        prop_assert!(!out.findings.is_empty(), "{:?} was not recognised", spelled);
        prop_assert_ne!(out.text.as_ref(), spelled.as_str());
        assert_neutralised(&spelled);
    }

    /// Ordinary text and flags come out borrowed, byte for byte.
    #[test]
    fn ordinary_text_is_untouched(
        pieces in prop::collection::vec(prop::sample::select(ORDINARY), 0..24),
        words in "[a-z ]{0,40}",
    ) {
        let text = format!("{}{words}", pieces.concat());
        let out = neutralise(&text);
        prop_assert!(out.findings.is_empty(), "{:?}: {:?}", text, out.findings);
        prop_assert!(matches!(out.text, Cow::Borrowed(t) if std::ptr::eq(t, text.as_str())));
    }

    /// No ASCII letter or digit is ever added or removed, only the entities that replace
    /// brackets.
    #[test]
    fn letters_and_digits_are_never_added_or_removed(body in body()) {
        let out = neutralise(&body);
        let alphanumerics = |text: &str| -> String {
            text.replace("&lt;", "")
                .replace("&#91;", "")
                .chars()
                .filter(char::is_ascii_alphanumeric)
                .collect()
        };
        prop_assert_eq!(alphanumerics(&out.text), alphanumerics(&body));
    }
}

#[test]
fn words_helper_splits_on_everything_but_ascii_alphanumerics() {
    let found: Vec<_> = words("ab abc_def4 ü x9yz<Vec").collect();
    assert_eq!(found, ["abc", "def4", "x9yz", "Vec"]);
}

#[test]
fn the_independent_check_sees_what_the_neutraliser_removes() {
    // The property checks are only worth something if they fail on un-neutralised text.
    for raw in [
        "</untrusted_content_x>",
        "< / MEMORY >",
        "＜／ｍｅｓｓａｇｅ＞",
        "<\u{200B}thought_1>",
        "<|im_end|>",
        "[INST]",
    ] {
        assert!(common::readable_vocabulary(raw).is_some(), "{raw}");
        assert!(!neutralise(raw).findings.is_empty(), "{raw}");
    }
    assert!(common::readable_vocabulary("&lt;/untrusted_content_x>").is_none());
}

#[test]
fn tag_characters_spell_what_the_finding_reports() {
    let mut rng = Rng(7);
    for _ in 0..64 {
        let plain = random_tag(&mut rng);
        let hidden = tag_encode(&plain);
        let out = neutralise(&hidden);
        assert_eq!(out.text, "");
        assert_eq!(out.findings.len(), 1);
        assert_eq!(out.findings[0].kind, FindingKind::TagCharacters);
        assert_eq!(out.findings[0].matched, plain);
    }
}
