use tooltrust::tool;
use tooltrust::tool::ArtifactHandle;

/// Returns the policy file.
#[tool(trusted, instruction, read_only)]
fn policy_file() -> ArtifactHandle {
    ArtifactHandle { id: "a1".into(), name: "policy.pdf".into(), mime: "application/pdf".into(), bytes: 1 }
}

fn main() {}
