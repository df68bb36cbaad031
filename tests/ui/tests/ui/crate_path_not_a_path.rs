use tooltrust::tool;

/// Adds two numbers.
#[tool(trusted, read_only, crate = "not a path!")]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

fn main() {}
