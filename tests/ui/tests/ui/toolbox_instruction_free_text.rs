use tooltrust::toolbox;

struct Policies;

#[toolbox]
impl Policies {
    /// Returns the policy for a topic.
    #[tool(trusted, instruction, read_only)]
    fn policy(&self, topic: String) -> String {
        topic
    }
}

fn main() {}
