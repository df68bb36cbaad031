use tooltrust::tool;

/// Adds two numbers.
#[tool(trusted, read_only)]
fn add((a, b): (i64, i64)) -> i64 {
    a + b
}

fn main() {}
