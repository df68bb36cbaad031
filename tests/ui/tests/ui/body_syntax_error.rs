use tooltrust::tool;

/// Sends an email.
#[tool(trusted)]
fn send_email(to: String) -> String {
    let = to;
}

fn main() {}
