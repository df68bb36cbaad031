use tooltrust::{Retrieved, tool};

/// Returns the policy documents.
#[tool(trusted, instruction, read_only)]
fn policy_documents(topic: String) -> Result<Retrieved, std::io::Error> {
    let _ = topic;
    Ok(Retrieved::default())
}

fn main() {}
