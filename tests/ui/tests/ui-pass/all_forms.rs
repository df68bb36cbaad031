//! Every accepted form of the attribute compiles.
use tooltrust::{tool, tools};
use tooltrust::tool::{Media, Retrieved};

/// Plain sync tool.
#[tool(trusted, read_only)]
fn plain(x: i64) -> i64 {
    x
}

#[tool(untrusted, data, read_only, name = "renamed-tool", description = "Given by the attribute.")]
async fn r#async(r#type: String, limit: Option<u32>) -> Result<String, std::io::Error> {
    Ok(format!("{type}{limit:?}", type = r#type))
}

/// Untrusted tools may return media.
#[tool(untrusted, read_only)]
fn screenshot() -> Media {
    Media { mime: "image/png".into(), data: vec![], description: None }
}

/// Trusted data tools may return retrieved records; they are rendered untrusted anyway.
#[tool(trusted, read_only)]
fn search() -> Retrieved {
    Retrieved::default()
}

/// A consequential tool with no return value.
#[tool(trusted)]
pub(crate) fn log_event(message: String) {
    let _ = message;
}

/// A trusted instruction tool returning text from a Result.
#[tool(trusted, instruction, read_only)]
fn policy() -> Result<&'static str, std::fmt::Error> {
    Ok("Be kind.")
}

fn main() {
    let registry = tools![plain, r#async, screenshot, search, log_event, policy];
    assert!(registry.is_ok());
    let _ = plain(1);
}
