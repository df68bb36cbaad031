use tooltrust::tool;
use tooltrust::tool::Retrieved;

/// Returns the policy documents.
#[tool(trusted, instruction, read_only)]
fn policy_documents(topic: u32) -> Result<Retrieved, std::io::Error> {
    let _ = topic;
    Ok(Retrieved::default())
}

fn main() {}
