//! `tooltrust render`: renders JSON lines `{"text", "id"?, "tool"?, "args_json"?}` into
//! envelopes, one JSON line `{"rendered", "nonce", "neutralised"}` (or `{"error"}`) each.

use std::io::Write;
use std::path::Path;

use clap::ValueEnum;
use serde::Serialize;
use serde_json::Value;
use tooltrust::envelope::Finding;
use tooltrust::envelope::Renderer;
use tooltrust::tool::{OutputKind, RetrievedRecord, SourceTier};
use tooltrust::{Id, Message, Sender, ToolCall, Trust};

use crate::lines::{LinesError, answer_file, optional_string, required_string};

/// The tier each line is rendered into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Tier {
    /// An untrusted tool result: `text` is the result, `tool` and `args_json` the call,
    /// `id` the call id (random when absent).
    ToolResult,
    /// A trusted tool result, fields as for `tool-result`.
    TrustedToolResult,
    /// A user's message: `id` is required.
    Message,
    /// A retrieved record: `id` is required; `tier` (`first-party` by default,
    /// `third-party-public`, `third-party-private`), `source` and `kind` are optional.
    Retrieved,
}

#[derive(Serialize)]
struct Answer {
    rendered: String,
    nonce: Option<String>,
    neutralised: Vec<Finding>,
}

/// Renders every line of `file` (standard input when `None`) with `renderer`.
pub fn run(
    renderer: &Renderer,
    tier: Tier,
    file: Option<&Path>,
    out: &mut impl Write,
) -> Result<bool, LinesError> {
    answer_file(file, out, |line| render_line(renderer, tier, line))
}

fn render_line(renderer: &Renderer, tier: Tier, line: &Value) -> Result<Answer, String> {
    let text = required_string(line, "text")?;
    let id = optional_string(line, "id")?;
    let rendered = match tier {
        Tier::ToolResult | Tier::TrustedToolResult => {
            let tool = optional_string(line, "tool")?.unwrap_or_default();
            let args_json = optional_string(line, "args_json")?.unwrap_or_default();
            let call = match id {
                Some(id) => ToolCall::from_model_with_id(id, tool, args_json),
                None => ToolCall::from_model(tool, args_json),
            }
            .map_err(|e| e.to_string())?;
            let trust = if tier == Tier::TrustedToolResult {
                Trust::Trusted
            } else {
                Trust::Untrusted
            };
            renderer.tool_result(
                tool,
                call.id(),
                call.checksum(),
                trust,
                OutputKind::Data,
                text,
            )
        }
        Tier::Message => renderer.message(&Message {
            id: Id::new(id.ok_or("a message needs an `id`")?)
                .map_err(|e| format!("invalid message id: {e}"))?,
            sender: Sender::User,
            from: "user".into(),
            created_at: None,
            content: text.to_owned(),
        }),
        Tier::Retrieved => {
            let tier = match optional_string(line, "tier")?.unwrap_or("first-party") {
                "first-party" => SourceTier::FirstParty,
                "third-party-public" => SourceTier::ThirdPartyPublic,
                "third-party-private" => SourceTier::ThirdPartyPrivate,
                other => return Err(format!("unknown record tier {other:?}")),
            };
            renderer.retrieved(&[RetrievedRecord {
                id: Id::new(id.ok_or("a retrieved record needs an `id`")?)
                    .map_err(|e| format!("invalid retrieved record id: {e}"))?,
                content: text.to_owned(),
                tier,
                source: optional_string(line, "source")?.map(str::to_owned),
                created_at: None,
                kind: optional_string(line, "kind")?.map(str::to_owned),
                score: None,
            }])
        }
    }
    .map_err(|e| e.to_string())?;
    Ok(Answer {
        nonce: rendered.nonce().map(str::to_owned),
        rendered: rendered.text,
        neutralised: rendered.findings,
    })
}
