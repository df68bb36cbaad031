use tooltrust::tool;

/// Returns the policies for some topics.
#[tool(trusted, instruction, read_only)]
fn policies(topics: Vec<String>) -> String {
    topics.join(", ")
}

fn main() {}
