use tooltrust::tool;
use tooltrust::tool::Media;

/// Returns the screenshot that explains the policy.
#[tool(trusted, instruction, read_only)]
fn policy_screenshot(page: u32) -> Media {
    Media { mime: "image/png".into(), data: vec![page as u8], description: None }
}

fn main() {}
