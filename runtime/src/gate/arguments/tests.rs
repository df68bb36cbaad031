use serde_json::json;

use super::reading::{DEFAULT_IGNORABLE, fold};
use super::*;
use crate::gate::{NonceIndex, Policy, Ruling, ScopeRole, Taint};
use crate::registry::Registry;
use crate::tool::{DeclaredTrust, DynamicTool};
use crate::{Id, ToolCall};

fn registry() -> Registry {
    let send = DynamicTool::builder("send_email")
        .description("Sends an email.")
        .schema(json!({"type": "object"}))
        .trust(DeclaredTrust::Trusted)
        .handler(|_, _| async { Ok::<_, std::io::Error>("sent".to_owned()) })
        .build()
        .unwrap();
    Registry::builder().tool(send).build().unwrap()
}

fn policy() -> ArgumentPolicy {
    ArgumentPolicy::new("send_email")
        .allow(
            "to",
            Constraint::one_of([json!("ann@example.com"), json!("bob@example.com")]).unwrap(),
        )
        .unwrap()
        .allow("cc", Constraint::range(Some(0.0), Some(3.0)).unwrap())
        .unwrap()
        .deny("to", Constraint::pattern(r"@evil\.example$").unwrap())
}

fn decide_with(policy: ArgumentPolicy, taint: Taint, args: Value) -> Decision {
    let registry = registry();
    let call = ToolCall::from_value("send_email", args).unwrap();
    let scope = Id::new("s").unwrap();
    let cx = GateContext {
        call: &call,
        registry: &registry,
        scope: &scope,
        taint,
        role: ScopeRole::Agent,
        is_child: false,
        blocks: &[],
        repeats: 0,
    };
    Policy::new()
        .with_rule(policy)
        .decide(&cx, &NonceIndex::default())
}

fn decide(args: Value) -> Decision {
    decide_with(policy(), Taint::Tainted, args)
}

const NAME: &str = "send_email.argument-policy";

#[test]
fn allows_denies_or_leaves_it_to_the_defaults() {
    let allowed = decide(json!({"to": "ann@example.com", "cc": 2}));
    assert_eq!(
        (allowed.ruling, allowed.rule.as_str()),
        (Ruling::Allow, NAME)
    );
    let denied = decide(json!({"to": "eve@evil.example", "cc": 0}));
    assert_eq!((denied.ruling, denied.rule.as_str()), (Ruling::Deny, NAME));
    assert!(!denied.reason.contains("eve"), "{}", denied.reason);
    for held in [
        json!({"to": "carl@example.com", "cc": 0}),
        json!({"to": "ann@example.com", "cc": 4}),
        json!({"to": "ann@example.com"}),
        // An allow reads exactly: another spelling of an allowed value is not it.
        json!({"to": "ANN@example.com", "cc": 0}),
        json!({"to": "ann@example.com ", "cc": 0}),
        // An argument the allow does not name: free text has no way through.
        json!({"to": "ann@example.com", "cc": 1, "body": "anything"}),
    ] {
        let decision = decide(held.clone());
        assert_eq!(decision.ruling, Ruling::NeedsReview, "{held}: {decision:?}");
        assert_eq!(decision.rule, rule::TAINTED_CONSEQUENTIAL);
    }
}

/// The README's policy, as its proxy configuration writes it; `mcp`'s configuration
/// tests parse the README's own block and check the same calls end to end.
const README_POLICY: &str = r#"allow = { to = { one_of = ["ann@example.com"] }, body = { pattern = "^[A-Za-z0-9 .,:]{1,200}$" } }
deny = { to = { pattern = "@evil\\.example$" } }"#;

fn readme_policy() -> ArgumentPolicy {
    ArgumentPolicy::new("send_email")
        .allow(
            "to",
            Constraint::one_of([json!("ann@example.com")]).unwrap(),
        )
        .unwrap()
        .allow(
            "body",
            Constraint::pattern("^[A-Za-z0-9 .,:]{1,200}$").unwrap(),
        )
        .unwrap()
        .deny("to", Constraint::pattern(r"@evil\.example$").unwrap())
}

/// Every way of writing `eve@evil.example` the README's deny should see, in a clean
/// scope where the defaults would run the call with no one asked.
const EVASIONS: [&str; 20] = [
    "eve@EVIL.example",
    "EVE@EVIL.EXAMPLE",
    "eve@evil.example\n",
    " eve@evil.example\t",
    "eve@evil.example\u{0}",
    "eve@evil.example.",
    "eve@evil.example..\r\n",
    "ｅｖｅ＠ｅｖｉｌ．ｅｘａｍｐｌｅ",
    "eve@evil\u{FF61}example",
    "eve@evil\u{3002}example",
    "eve@evil.exam\u{AD}ple",
    "eve@evil.example\u{200B}",
    "eve@\u{202E}evil.example",
    "eve@evil.example\u{A0}",
    "eve@evil.\u{1D5BE}\u{1D5D1}ample",
    "Eve <eve@evil.example>",
    "eve@evil.example, ann@example.com",
    "eve@evil.example;",
    "ann@example.com;eve@evil.example.;",
    "mailto:eve@evil.example.",
];

#[test]
fn the_readmes_deny_sees_every_spelling_of_the_address() {
    let readme = include_str!("../../../../README.md");
    assert!(
        readme.contains(README_POLICY),
        "the README's argument policy changed: change README_POLICY and readme_policy()"
    );
    let deny = |args: Value| decide_with(readme_policy(), Taint::Clean, args);
    let mut values: Vec<Value> = EVASIONS.iter().map(|&to| json!(to)).collect();
    values.extend([
        json!(["eve@evil.example"]),
        json!(["ann@example.com", "eve@evil.example"]),
        json!({"x": "eve@evil.example"}),
        json!({"eve@evil.example": "x"}),
        json!([{"list": [["EVE@evil.example."]]}]),
    ]);
    for to in values {
        let decision = deny(json!({"to": to, "body": "Hi"}));
        assert_eq!(
            (decision.ruling, decision.rule.as_str()),
            (Ruling::Deny, NAME),
            "{to}"
        );
        assert!(!decision.reason.contains("evil"), "{}", decision.reason);
    }
    // What is not the address is not denied: another domain, a domain that only ends
    // like it, a lookalike in another script (another name: only an allow keeps it out).
    for to in [
        "bob@example.com",
        "eve@notevil.example.org",
        "eve@evil.example.org",
        "eve@еvil.example",
    ] {
        let decision = deny(json!({"to": to, "body": "Hi"}));
        assert_eq!(
            (decision.ruling, decision.rule.as_str()),
            (Ruling::Allow, rule::DEFAULT),
            "{to}"
        );
    }
    let allowed = deny(json!({"to": "ann@example.com", "body": "X1: 49 EUR."}));
    assert_eq!(
        (allowed.ruling, allowed.rule.as_str()),
        (Ruling::Allow, NAME)
    );
}

#[test]
fn a_value_of_a_type_an_allow_does_not_expect_is_held_even_in_a_clean_scope() {
    for (args, said) in [
        (json!({"to": ["ann@example.com"], "cc": 0}), "an array"),
        (
            json!({"to": {"a": "ann@example.com"}, "cc": 0}),
            "an object",
        ),
        (json!({"to": 7, "cc": 0}), "a number"),
        (json!({"to": null, "cc": 0}), "null"),
        (json!({"to": "ann@example.com", "cc": "2"}), "a string"),
        (json!({"to": "ann@example.com", "cc": [2]}), "an array"),
    ] {
        let decision = decide_with(policy(), Taint::Clean, args.clone());
        assert_eq!(
            (decision.ruling, decision.rule.as_str()),
            (Ruling::NeedsReview, NAME),
            "{args}"
        );
        assert!(
            decision.reason.contains(said),
            "{args}: {}",
            decision.reason
        );
        assert!(!decision.reason.contains("ann@"), "{}", decision.reason);
    }
    // A deny still wins over a value the allow cannot judge.
    let denied = decide_with(
        policy(),
        Taint::Clean,
        json!({"to": ["eve@evil.example"], "cc": "2"}),
    );
    assert_eq!(denied.ruling, Ruling::Deny);
}

#[test]
fn a_deny_set_compares_folded_text_and_numbers_whatever_their_spelling() {
    let policy = || {
        ArgumentPolicy::new("send_email")
            .deny(
                "to",
                Constraint::one_of([json!("Eve@Evil.Example"), json!("Straße@example.com")])
                    .unwrap(),
            )
            .deny(
                "account",
                Constraint::one_of([json!(1234), json!(true)]).unwrap(),
            )
    };
    let ruling = |args: Value| {
        let decision = decide_with(policy(), Taint::Clean, args);
        (decision.ruling, decision.rule)
    };
    let denied = (Ruling::Deny, NAME.to_owned());
    for to in [
        json!("eve@evil.example"),
        json!("EVE@EVIL.EXAMPLE."),
        json!(" Eve@Evil.Example\n"),
        json!(["x@example.com", "eVe@eViL.eXaMpLe"]),
        json!("STRASSE@example.com"),
        json!("strasse@example.com"),
        json!("Eve <eve@evil.example>"),
    ] {
        assert_eq!(ruling(json!({"to": to})), denied, "{to}");
    }
    for account in [
        json!(1234),
        json!(1234.0),
        json!("1234"),
        json!(" １２３４ "),
        json!("1_234"),
        json!("1.234e3"),
        json!([1, [1234]]),
        json!("TRUE"),
    ] {
        assert_eq!(ruling(json!({"account": account})), denied, "{account}");
    }
    let clean = (Ruling::Allow, rule::DEFAULT.to_owned());
    assert_eq!(ruling(json!({"to": "eve@evil.example.org"})), clean);
    assert_eq!(ruling(json!({"account": 1235})), clean);
    // Text a set of numbers cannot read as one is held, not left to the defaults.
    for account in [json!("12 34"), json!("0x4d2"), json!({"n": 1})] {
        assert_eq!(
            ruling(json!({"account": account})),
            (Ruling::NeedsReview, NAME.to_owned()),
            "{account}"
        );
    }
}

#[test]
fn a_deny_range_reads_numbers_written_as_text_and_holds_what_it_cannot_read() {
    let policy = || {
        ArgumentPolicy::new("send_email")
            .deny("copies", Constraint::range(Some(4.0), None).unwrap())
    };
    let ruling = |copies: Value| {
        let decision = decide_with(policy(), Taint::Clean, json!({"copies": copies}));
        (decision.ruling, decision.rule)
    };
    for copies in [
        json!(4),
        json!(1e9),
        json!("100"),
        json!(" 100\n"),
        json!("１００"),
        json!("+1e2"),
        json!("1_000"),
        json!("inf"),
        json!([1, 5]),
        json!({"n": 5}),
        json!({"5": null}),
    ] {
        assert_eq!(
            ruling(copies.clone()),
            (Ruling::Deny, NAME.to_owned()),
            "{copies}"
        );
    }
    for copies in [
        json!(3),
        json!("3"),
        json!(-1e9),
        json!([1, "2"]),
        json!(null),
    ] {
        assert_eq!(
            ruling(copies.clone()),
            (Ruling::Allow, rule::DEFAULT.to_owned()),
            "{copies}"
        );
    }
    for copies in [
        json!("many"),
        json!("0x10"),
        json!(true),
        json!("nan"),
        json!({"n": 1}),
    ] {
        let decision = decide_with(policy(), Taint::Clean, json!({"copies": copies}));
        assert_eq!(
            (decision.ruling, decision.rule.as_str()),
            (Ruling::NeedsReview, NAME),
            "{copies}"
        );
        assert!(decision.reason.contains("a number"), "{}", decision.reason);
    }
}

#[test]
fn a_deny_pattern_ignores_ascii_case_and_reads_numbers_and_keys() {
    let policy = || {
        ArgumentPolicy::new("send_email")
            .deny("to", Constraint::pattern(r"@EVIL\.Example$").unwrap())
            .deny("phone", Constraint::pattern("^555").unwrap())
            .deny(
                "url",
                Constraint::pattern(r"^https?://evil\.example(/|:|$)").unwrap(),
            )
    };
    let ruling = |args: Value| decide_with(policy(), Taint::Clean, args).ruling;
    assert_eq!(ruling(json!({"to": "eve@evil.example"})), Ruling::Deny);
    assert_eq!(ruling(json!({"phone": 5_551_234})), Ruling::Deny);
    assert_eq!(ruling(json!({"phone": {"5551234": true}})), Ruling::Deny);
    assert_eq!(ruling(json!({"phone": "１５５５"})), Ruling::Allow);
    for url in [
        "https://EVIL.example./page",
        "https://evil.example.:443/",
        "HTTPS://evil\u{3002}example",
        "see https://evil.example./",
    ] {
        assert_eq!(ruling(json!({"url": url})), Ruling::Deny, "{url}");
    }
    assert_eq!(
        ruling(json!({"url": "https://evil.example.org/"})),
        Ruling::Allow
    );
    // Nothing a pattern can be shown is unreadable to it.
    assert_eq!(ruling(json!({"phone": [null, false, 1]})), Ruling::Allow);
}

#[test]
fn folding_is_nfkc_with_full_case_folding_without_invisibles_and_trimmed() {
    for (text, folded) in [
        ("Eve@Example.COM", "eve@example.com"),
        ("\u{3000} ＥＶＥ\u{A0}", "eve"),
        ("Straße ẞ", "strasse ss"),
        ("ΣΊΣΥΦΟΣ ς", "σίσυφοσ σ"),
        ("\u{212A}\u{FB01}", "kfi"),
        ("e\u{301}", "\u{e9}"),
        ("a\u{200B}b\u{FE0F}c\u{2066}d\u{E0041}", "abcd"),
        ("\u{1D5BE}\u{2460}", "e1"),
        ("\u{0}x\u{7F}", "x"),
    ] {
        assert_eq!(fold(text), folded, "{text:?}");
    }
}

#[test]
fn default_ignorables_are_unicodes() {
    let hir = regex_syntax::parse(r"\p{Default_Ignorable_Code_Point}").unwrap();
    let regex_syntax::hir::HirKind::Class(regex_syntax::hir::Class::Unicode(class)) = hir.kind()
    else {
        panic!("a class: {hir:?}");
    };
    let ranges: Vec<(u32, u32)> = class
        .ranges()
        .iter()
        .map(|range| (u32::from(range.start()), u32::from(range.end())))
        .collect();
    assert_eq!(ranges, DEFAULT_IGNORABLE);
}

#[test]
fn an_allow_takes_only_closed_patterns() {
    for open in ["kettle", "^kettle", "kettle$", "^.*$", "^a|b$", "^[a-z]+$"] {
        let refused = ArgumentPolicy::new("t").allow("a", Constraint::pattern(open).unwrap());
        assert!(
            matches!(refused, Err(ArgumentPolicyError::OpenPattern { .. })),
            "{open}"
        );
    }
    assert!(
        ArgumentPolicy::new("t")
            .allow("a", Constraint::pattern("^[a-z]{1,8}$").unwrap())
            .is_ok()
    );
    assert!(Constraint::pattern("(").is_err());
    assert!(Constraint::one_of([json!({"a": 1})]).is_err());
    assert!(Constraint::one_of([]).is_err());
    assert!(Constraint::range(None, None).is_err());
    assert!(Constraint::range(Some(2.0), Some(1.0)).is_err());
    assert!(Constraint::range(Some(f64::NAN), None).is_err());
}
