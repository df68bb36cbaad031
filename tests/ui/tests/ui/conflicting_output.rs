use tooltrust::tool;

/// Returns the style guide.
#[tool(trusted, data, instruction, read_only)]
fn style_guide() -> String {
    String::new()
}

fn main() {}
