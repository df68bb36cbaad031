use tooltrust::toolbox;

struct Mailer;

#[toolbox]
impl Mailer {
    /// Sends an email.
    #[tool(trusted)]
    fn send_email(&self, to: String) -> String {
        to
    }

    /// Sends an email, another way.
    #[tool(trusted, name = "send_email")]
    fn send_email_fast(&self, to: String) -> String {
        to
    }
}

fn main() {}
