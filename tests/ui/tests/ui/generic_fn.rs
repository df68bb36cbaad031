use tooltrust::tool;

/// Echoes its input.
#[tool(trusted, read_only)]
fn echo<T: ToString>(value: T) -> String {
    value.to_string()
}

fn main() {}
