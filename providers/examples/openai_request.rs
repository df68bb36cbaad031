//! Prints the exact JSON request body a host would send to OpenAI's Chat Completions
//! API after one tool round, and how the host reads the answer back. No network: these
//! are the bytes `tooltrust_providers::OpenAiClient` sends, for a host that sends them
//! with its own HTTP client (`live_agent` sends them for real).
//!
//! `cargo run --example openai_request`

use tooltrust::agent::{Agent, ChatMessage, ModelError, ModelFuture, ModelRequest};
use tooltrust::{Id, Instruction, Message, Model, Sender, Session, tool, tools};
use tooltrust_providers::openai;

/// Looks up an order's status.
#[tool(trusted, read_only)]
fn order_status(
    /// The order number.
    order: u64,
) -> String {
    format!("order {order}: shipped on 2026-11-20, arriving 2026-11-24")
}

/// Stands in for a host's HTTP client: it shows the body it would POST, and answers as
/// the API would.
struct PrintingClient;

impl Model for PrintingClient {
    fn respond<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a> {
        let body = match openai::request_body(request, &openai::RequestOptions::new("gpt-4o")) {
            Ok(body) => body,
            Err(error) => return Box::pin(async move { Err(ModelError::new(error)) }),
        };
        let turn = request
            .messages
            .iter()
            .filter(|m| matches!(m, ChatMessage::Assistant { .. }))
            .count();
        println!("== POST /v1/chat/completions (turn {})", turn + 1);
        println!(
            "{}",
            serde_json::to_string_pretty(&body).unwrap_or_default()
        );
        // What the API would answer; a real host reads it with `openai::parse_response`.
        let response = if turn == 0 {
            r#"{"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,
              "tool_calls":[{"id":"call_7Xq2","type":"function","function":{"name":"order_status","arguments":"{\"order\": 4411}"}}]}}]}"#
        } else {
            r#"{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Your order shipped and arrives on 24 November."}}]}"#
        };
        let answer = openai::parse_response(response)
            .and_then(|completion| completion.into_message())
            .map_err(ModelError::new);
        Box::pin(async move { answer })
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let session = Session::builder(tools![order_status]?).build()?;
    let agent = Agent::new(
        session.open_scope(Id::new("support-agent")?)?,
        vec![Instruction::new(
            "You are the support agent of Acme. Be brief.",
        )],
    );
    let message = Message {
        id: Id::new("m1")?,
        sender: Sender::Principal,
        from: "Ann".into(),
        created_at: Some("2026-11-22T09:00:00Z".into()),
        content: "Where is my order 4411?".into(),
    };
    let transcript = pollster::block_on(agent.run(&PrintingClient, &message))?;
    println!("\n== answer: {}", transcript.answer.unwrap_or_default());
    Ok(())
}
