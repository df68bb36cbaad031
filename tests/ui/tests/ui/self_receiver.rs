use tooltrust::tool;

struct Mailer;

impl Mailer {
    /// Sends an email.
    #[tool(trusted)]
    fn send(&self, to: String) -> String {
        to
    }
}

fn main() {}
