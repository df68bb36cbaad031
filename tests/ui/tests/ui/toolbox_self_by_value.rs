use tooltrust::toolbox;

struct Mailer;

#[toolbox]
impl Mailer {
    /// Sends an email.
    #[tool(trusted)]
    fn send_email(self, to: String) -> String {
        to
    }
}

fn main() {}
