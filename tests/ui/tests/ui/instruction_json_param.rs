use tooltrust::tool;

/// Returns the policy a filter selects.
#[tool(trusted, instruction, read_only)]
fn policy(filter: serde_json::Value) -> String {
    filter.to_string()
}

fn main() {}
