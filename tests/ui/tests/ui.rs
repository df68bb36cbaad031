//! Compile-time checks of the `#[tool]` DSL: every misuse is an error with a span on the
//! offending token and a remedy (the `.stderr` files are the messages users read).

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
    cases.pass("tests/ui-pass/*.rs");
}
