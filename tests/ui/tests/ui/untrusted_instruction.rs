use tooltrust::tool;

/// Reads the user's inbox.
#[tool(untrusted, instruction, read_only)]
fn read_inbox(folder: String) -> String {
    folder
}

fn main() {}
