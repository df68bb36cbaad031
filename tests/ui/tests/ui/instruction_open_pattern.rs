use tooltrust::tool;

/// A country code and a number; the pattern has no `$`, so any text may follow.
#[derive(tooltrust::ClosedVocabulary)]
#[vocabulary(pattern = "^[A-Z]{2}[0-9]")]
struct Code(String);

/// `^` anchors only the first alternative and `$` only the last.
#[derive(tooltrust::ClosedVocabulary)]
#[vocabulary(pattern = "^GB|FR$")]
struct Country(String);

/// No upper bound on the length.
#[derive(tooltrust::ClosedVocabulary)]
#[vocabulary(pattern = "^[A-Z ]+$")]
struct Words(String);

/// Returns the policy for a code.
#[tool(trusted, instruction, read_only)]
fn policy(code: Code, country: Country, words: Words) -> String {
    format!("Policy {} {} {}", code.0, country.0, words.0)
}

fn main() {}
