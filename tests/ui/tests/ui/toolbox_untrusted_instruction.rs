use tooltrust::toolbox;

struct Mailer;

#[toolbox]
impl Mailer {
    /// Reads the inbox.
    #[tool(untrusted, instruction, read_only)]
    fn read_inbox(&self) -> String {
        String::new()
    }

    /// Sends an email.
    #[tool(read_only)]
    fn send_email(&self, to: String) -> String {
        to
    }
}

fn main() {}
