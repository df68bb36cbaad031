//! Checks tooltrust against reference vectors: tool-call checksums and renderings, the
//! other tiers' renderings, and RFC 8785 input/output pairs. Used by the tests and by
//! `tooltrust conform`, so both judge a vector the same way.
//!
//! Deliberate differences from the reference, each checked as a refusal: a call whose
//! arguments the reference would read leniently (duplicate keys, lone surrogates) is
//! refused, and a body that contains its own live closer is never rendered. One is
//! checked as a difference: a peer's reasoning is closed by a closer that matches its
//! opener, where the reference writes `</peer_agent_output_{id}:peer>`.

use serde_json::Value;

use crate::block::Instruction;
use crate::call::{CallErrorReason, ToolCall};
use crate::canonical::{JsonError, canonical_json, parse_strict};
use crate::content::{RetrievedRecord, SourceTier};
use crate::envelope::{RETRIEVED_DIRECTIVE, RenderError, Renderer, unknown_tool_warning};
use crate::id::Id;
use crate::record::{Memory, Message, Sender, Thought, ThoughtKind};
use crate::tool::{OutputKind, Trust};

/// One field that did not match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The field checked (`checksum`, `rendered`…).
    pub field: String,
    /// What the vector expects.
    pub expected: String,
    /// What tooltrust produced.
    pub actual: String,
}

impl Mismatch {
    fn new(field: &str, expected: impl Into<String>, actual: impl Into<String>) -> Self {
        Mismatch {
            field: field.to_owned(),
            expected: expected.into(),
            actual: actual.into(),
        }
    }
}

/// Checks one entry of a vector file, recognised by its shape: a tool-call vector has
/// `args_json`, an envelope vector has `kind`. Anything else is a mismatch, never skipped.
pub fn check_entry(entry: &Value) -> Vec<Mismatch> {
    if entry.get("args_json").is_some() {
        check_tool_call(entry)
    } else if let Some(kind) = entry.get("kind").and_then(Value::as_str) {
        check_envelope(kind, entry)
    } else {
        vec![Mismatch::new(
            "entry",
            "a tool-call vector (with `args_json`) or an envelope vector (with `kind`)",
            compact(entry),
        )]
    }
}

/// Checks an RFC 8785 pair: the canonical form of `input` must be `output` exactly.
pub fn check_jcs(input: &str, output: &str) -> Vec<Mismatch> {
    match parse_strict(input) {
        Ok(value) => compare("canonical", output, &canonical_json(&value)),
        Err(error) => vec![Mismatch::new(
            "canonical",
            output,
            format!("error: {error}"),
        )],
    }
}

/// Checks a tool-call vector: `canonical` and `checksum` of the parsed call, and the
/// compat rendering of `rendered_body` as an untrusted (`rendered`) and a trusted
/// (`rendered_trusted`) result. Entries flagged `args_unrepresentable` must be refused
/// calls; entries with `rendered_error` must be refused (as calls or as renders).
pub fn check_tool_call(entry: &Value) -> Vec<Mismatch> {
    let field = |name: &str| entry.get(name).and_then(Value::as_str);
    let (Some(tool), Some(args_json)) = (field("tool"), field("args_json")) else {
        return vec![Mismatch::new(
            "tool",
            "`tool` and `args_json` strings",
            compact(entry),
        )];
    };
    let refused_call = entry
        .get("args_unrepresentable")
        .is_some_and(|flag| !matches!(flag, Value::Null | Value::Bool(false)));
    let call = match ToolCall::from_model(tool, args_json) {
        Ok(call) if refused_call => {
            return vec![Mismatch::new(
                "refusal",
                "refused as unrepresentable",
                format!("accepted, checksum {}", call.checksum()),
            )];
        }
        Ok(call) => call,
        Err(error) if refused_call => {
            // Refused for the reason the flag means, not merely as malformed.
            return match error.reason {
                CallErrorReason::Json(
                    JsonError::LoneSurrogate { .. }
                    | JsonError::DuplicateKey { .. }
                    | JsonError::NumberOutOfRange { .. },
                ) => Vec::new(),
                _ => vec![Mismatch::new(
                    "refusal",
                    "refused as unrepresentable (lone surrogate, duplicate key or overflowing number)",
                    format!("refused for another reason: {error}"),
                )],
            };
        }
        Err(error) => {
            let mismatches: Vec<Mismatch> = ["canonical", "checksum"]
                .into_iter()
                .filter_map(|name| field(name).map(|want| (name, want)))
                .map(|(name, want)| Mismatch::new(name, want, format!("refused: {error}")))
                .collect();
            return if mismatches.is_empty() {
                vec![Mismatch::new(
                    "args_json",
                    "a valid call",
                    format!("refused: {error}"),
                )]
            } else {
                mismatches
            };
        }
    };
    let mut mismatches = Vec::new();
    if field("canonical").is_none() && field("checksum").is_none() {
        mismatches.push(Mismatch::new(
            "vector",
            "a `canonical` or `checksum` to check",
            "neither",
        ));
    }
    if let Some(expected) = field("canonical") {
        mismatches.extend(compare("canonical", expected, &call.canonical()));
    }
    if let Some(expected) = field("checksum") {
        mismatches.extend(compare("checksum", expected, &call.checksum().to_hex()));
    }
    let body = field("rendered_body").unwrap_or_default();
    let renderer = Renderer::compat();
    let render = |trust| {
        renderer
            .tool_result(
                tool,
                call.id(),
                call.checksum(),
                trust,
                OutputKind::Data,
                body,
            )
            .map(|rendered| rendered.text)
    };
    if entry.get("rendered_error").is_some() {
        for trust in [Trust::Untrusted, Trust::Trusted] {
            if let Ok(text) = render(trust) {
                mismatches.push(Mismatch::new("rendered_error", "a refused render", text));
            }
        }
    }
    for (name, trust) in [
        ("rendered", Trust::Untrusted),
        ("rendered_trusted", Trust::Trusted),
    ] {
        if let Some(expected) = field(name) {
            mismatches.extend(compare_render(name, expected, render(trust)));
        }
    }
    mismatches
}

/// Checks an envelope vector of the reference's other renderers.
pub fn check_envelope(kind: &str, entry: &Value) -> Vec<Mismatch> {
    let input = entry.get("input").cloned().unwrap_or(Value::Null);
    let Some(expected) = entry.get("rendered").and_then(Value::as_str) else {
        return vec![Mismatch::new(
            "field `rendered`",
            "a string",
            compact(entry),
        )];
    };
    let renderer = Renderer::compat();
    let text = |key: &str| input.get(key).and_then(Value::as_str).map(str::to_owned);
    let actual: Result<String, Failure> = match kind {
        "standing_instructions" => {
            let items: Vec<Instruction> = input["items"]
                .as_array()
                .map(|items| {
                    items
                        .iter()
                        .filter_map(Value::as_str)
                        .map(Instruction::developer_authored)
                        .collect()
                })
                .unwrap_or_default();
            let version = input["attrs"]["version"].as_str();
            renderer
                .developer_policy(&items, version)
                .map_err(Failure::from)
        }
        "memories" => {
            let memories: Result<Vec<Memory>, Failure> = input["items"]
                .as_array()
                .map(|items| items.iter().map(memory_of).collect())
                .unwrap_or_else(|| Ok(Vec::new()));
            memories.and_then(|memories| render_text(renderer.memories(&memories)))
        }
        "retrievables" => match input["items"].as_array().map(|items| {
            items
                .iter()
                .map(record_of)
                .collect::<Option<Result<Vec<RetrievedRecord>, Failure>>>()
        }) {
            Some(Some(records)) => {
                records.and_then(|records| render_text(renderer.retrieved(&records)))
            }
            _ => Err(Failure::Input(
                "retrievables need `id`, `content` and a known `trustTier`".to_owned(),
            )),
        },
        "thought" => {
            let attrs = &input["attrs"];
            let kind = match attrs["kind"].as_str() {
                Some("self-reasoning") => Some(ThoughtKind::SelfReasoning),
                Some("peer-reasoning") => Some(ThoughtKind::PeerReasoning),
                Some("opaque-reasoning") => Some(ThoughtKind::OpaqueReasoning),
                _ => None,
            };
            // Opaque reasoning keeps a payload, never shown; the reference's summary
            // only says whether there is one.
            let content = match (kind, input.get("payload")) {
                (Some(ThoughtKind::OpaqueReasoning), Some(payload)) => payload.to_string(),
                (Some(ThoughtKind::OpaqueReasoning), None) => String::new(),
                _ => text("content").unwrap_or_default(),
            };
            match kind {
                Some(kind) => id_of("thought", attrs["nonce"].as_str().unwrap_or_default())
                    .and_then(|id| {
                        render_text(renderer.thought(&Thought {
                            id,
                            kind,
                            from: attrs["from"].as_str().unwrap_or_default().to_owned(),
                            created_at: attrs["createdAt"].as_str().map(str::to_owned),
                            content,
                            replay_compatibility:
                                attrs["replayCompatibility"].as_str().map(str::to_owned),
                        }))
                        .map(|text| peer_closer_as_the_reference_writes_it(kind, text))
                    }),
                None => Err(Failure::Input(format!(
                    "unknown thought kind {}",
                    attrs["kind"]
                ))),
            }
        }
        "timeline_message" => {
            let identifier = text("identifier").unwrap_or_default();
            let representation = text("representation").unwrap_or_default();
            let self_identity = text("selfIdentity").unwrap_or_default();
            let role = text("role");
            let own_turn = role.as_deref() == Some("assistant")
                && (identifier.is_empty() || identifier == self_identity);
            let sender = match role.as_deref() {
                Some("user") if !identifier.is_empty() => Some(Sender::User),
                Some("assistant") if !own_turn => Some(Sender::Peer),
                _ => None,
            };
            match sender {
                // The agent's own turn: its text alone, neutralised.
                None if own_turn => Ok(renderer
                    .own_turn(&text("content").unwrap_or_default())
                    .into_owned()),
                Some(sender) => id_of("message", &text("id").unwrap_or_default()).and_then(|id| {
                    render_text(renderer.message(&Message {
                        id,
                        sender,
                        from: if representation.is_empty() {
                            identifier
                        } else {
                            representation
                        },
                        created_at: text("createdAtIso").filter(|at| !at.is_empty()),
                        content: text("content").unwrap_or_default(),
                    }))
                }),
                None => Err(Failure::Input(
                    "a timeline message is a user's (with an identity), a peer's or the agent's own"
                        .to_owned(),
                )),
            }
        }
        "unknown_tool_warning" => Ok(unknown_tool_warning(&text("tool").unwrap_or_default())),
        "retrievable_safety_directive" => Ok(RETRIEVED_DIRECTIVE.to_owned()),
        other => {
            return vec![Mismatch::new(
                "kind",
                "a kind conform knows",
                format!("unknown kind {other:?}"),
            )];
        }
    };
    match actual {
        Err(Failure::Render(RenderError::LiveCloser { .. }))
            if expected_holds_live_body(expected) =>
        {
            Vec::new()
        }
        Err(Failure::Render(error)) => {
            vec![Mismatch::new(
                "rendered",
                expected,
                format!("error: {error}"),
            )]
        }
        Err(Failure::Input(error)) => {
            vec![Mismatch::new("input", "an input tooltrust renders", error)]
        }
        Ok(actual) => compare("rendered", expected, &actual),
    }
}

/// Why an envelope vector produced no text.
enum Failure {
    /// The renderer refused.
    Render(RenderError),
    /// The vector's input has no counterpart in tooltrust.
    Input(String),
}

impl From<RenderError> for Failure {
    fn from(error: RenderError) -> Self {
        Failure::Render(error)
    }
}

fn render_text(result: Result<crate::envelope::Rendered, RenderError>) -> Result<String, Failure> {
    result
        .map(|rendered| rendered.text)
        .map_err(Failure::Render)
}

/// The one closer compat mode does not reproduce (see [`Renderer::thought`]): the
/// reference closes a peer's reasoning with `</peer_agent_output_{id}:peer>`. The
/// checker writes it back so that every other byte is still compared.
fn peer_closer_as_the_reference_writes_it(kind: ThoughtKind, mut text: String) -> String {
    if kind == ThoughtKind::PeerReasoning {
        text.pop();
        text.push_str(":peer>");
    }
    text
}

/// Whether the reference's rendering holds a body that contains a closer of its own
/// envelope, which tooltrust refuses to render by design: some line of it, other than
/// the block's real last line, holds the closer that ends the text.
fn expected_holds_live_body(expected: &str) -> bool {
    let Some(last_line_start) = expected.rfind('\n') else {
        return false;
    };
    let closer = &expected[last_line_start + 1..];
    closer.starts_with("</") && expected[..last_line_start].contains(closer)
}

/// An id of the vectors, refused as the renderer refuses an invalid id.
fn id_of(what: &'static str, text: &str) -> Result<Id, Failure> {
    Id::new(text).map_err(|error| Failure::Render(RenderError::InvalidId { what, error }))
}

fn memory_of(item: &Value) -> Result<Memory, Failure> {
    let attrs = &item["attrs"];
    Ok(Memory {
        id: id_of("memory", attrs["nonce"].as_str().unwrap_or_default())?,
        content: item["content"].as_str().unwrap_or_default().to_owned(),
        source: attrs["source"].as_str().map(str::to_owned),
        created_at: attrs["createdAt"].as_str().map(str::to_owned),
        kind: attrs["kind"].as_str().map(str::to_owned),
        score: attrs["score"].as_f64(),
    })
}

fn record_of(item: &Value) -> Option<Result<RetrievedRecord, Failure>> {
    let tier = match item["trustTier"].as_str()? {
        "first-party" => SourceTier::FirstParty,
        "third-party-public" => SourceTier::ThirdPartyPublic,
        "third-party-private" => SourceTier::ThirdPartyPrivate,
        _ => return None,
    };
    let id = item["id"].as_str()?;
    let content = item["content"].as_str()?.to_owned();
    Some(id_of("retrieved record", id).map(|id| RetrievedRecord {
        id,
        content,
        tier,
        source: item["source"].as_str().map(str::to_owned),
        created_at: item["createdAt"].as_str().map(str::to_owned),
        kind: item["kind"].as_str().map(str::to_owned),
        score: item["score"].as_f64(),
    }))
}

fn compare(field: &str, expected: &str, actual: &str) -> Vec<Mismatch> {
    if expected == actual {
        Vec::new()
    } else {
        vec![Mismatch::new(field, expected, actual)]
    }
}

fn compare_render(
    field: &str,
    expected: &str,
    actual: Result<String, RenderError>,
) -> Vec<Mismatch> {
    match actual {
        Ok(actual) => compare(field, expected, &actual),
        Err(error) => vec![Mismatch::new(field, expected, format!("error: {error}"))],
    }
}

fn compact(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(200) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}
