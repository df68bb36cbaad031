//! Tools declared by a crate whose only dependency is `tooltrust`.

use tooltrust::tool;

/// Adds two integers.
#[tool(trusted, read_only)]
pub fn add(
    /// The first addend.
    a: i64,
    /// The second addend.
    b: i64,
) -> i64 {
    a + b
}

/// Greets someone, optionally by title.
#[tool(untrusted, read_only)]
pub async fn greet(name: String, title: Option<String>) -> Result<String, std::fmt::Error> {
    Ok(match title {
        Some(title) => format!("Hello, {title} {name}"),
        None => format!("Hello, {name}"),
    })
}
