//! A registry as an MCP server: every `tools/call` goes through the scope exactly as the
//! agent loop's calls do (checksum → gate → run → render → record).

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Map, Value, json};
use tooltrust::registry::CatalogEntry;
use tooltrust::tool::{DeclaredTrust, Effects, OutputKind};
use tooltrust::{CallOutcome, Scope, ToolCall};

/// Serves one scope's tools to an MCP client. Build it with [`ScopeServer::new`] and run it
/// with [`crate::serve`] (or `rmcp::ServiceExt::serve` on any transport).
#[derive(Clone)]
pub struct ScopeServer {
    scope: Arc<Scope>,
}

impl ScopeServer {
    /// Serves `scope`'s session's registry; calls are made, and decided, in `scope`.
    pub fn new(scope: Scope) -> Self {
        ScopeServer {
            scope: Arc::new(scope),
        }
    }

    /// The scope the calls are made in.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// Answers one call: a tool result whose text is the enveloped output, or an error
    /// result (`isError`) that says what the gate did and why. Never a protocol error: hosts
    /// show those as crashes, and the model could not read them.
    pub async fn answer(
        &self,
        name: &str,
        arguments: Option<&Map<String, Value>>,
    ) -> CallToolResult {
        let text = match arguments {
            Some(arguments) => Value::Object(arguments.clone()).to_string(),
            None => String::new(),
        };
        let call = match ToolCall::from_model(name, &text) {
            Ok(call) => call,
            Err(error) => {
                return refusal(format!("the call was refused before the gate: {error}"));
            }
        };
        match self.scope.call(call).await {
            Ok(outcome) => self.shown(&outcome),
            Err(error) => refusal(format!("the call could not be made: {error}")),
        }
    }

    fn shown(&self, outcome: &CallOutcome) -> CallToolResult {
        match outcome {
            CallOutcome::Ran { block, .. } => match self.scope.rendered_of(block) {
                Ok(Some(text)) => CallToolResult::success(vec![ContentBlock::text(text)]),
                Ok(None) => refusal("the call ran but its output is not in the scope".to_owned()),
                Err(error) => refusal(format!("the call ran but its output is lost: {error}")),
            },
            CallOutcome::Denied(decision) => refusal(format!(
                "denied by the gate ({}): {}",
                decision.rule, decision.reason
            )),
            CallOutcome::Pending { id, decision } => refusal(format!(
                "held for review as {id} ({}): {}. It runs only if a reviewer approves it (`tooltrust pending approve {id}`); do not retry it.",
                decision.rule, decision.reason
            )),
            CallOutcome::Invalid { note, .. } | CallOutcome::Withheld { note, .. } => {
                refusal(note.clone())
            }
            _ => refusal("the call ended in a way this server does not know".to_owned()),
        }
    }
}

/// An error result: `isError: true`, with a text the model and the person can read.
fn refusal(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// A catalog entry as an MCP tool: its annotations come from the declaration alone.
pub fn tool_of(entry: &CatalogEntry) -> Tool {
    let schema = match &entry.schema {
        Value::Object(schema) => schema.clone(),
        _ => Map::new(),
    };
    let read_only = entry.effects == Effects::ReadOnly;
    let untrusted = entry.trust == DeclaredTrust::Untrusted;
    let annotations = ToolAnnotations::new()
        .read_only(read_only)
        .destructive(!read_only)
        .open_world(untrusted);
    let meta = json!({
        "tooltrust": {
            "trust": if untrusted { "untrusted" } else { "trusted" },
            "effects": if read_only { "read_only" } else { "consequential" },
            "output": if entry.output == OutputKind::Instruction { "instruction" } else { "data" },
        }
    });
    let mut tool = Tool::new(
        entry.name.clone(),
        entry.description.clone(),
        Arc::new(schema),
    )
    .with_annotations(annotations);
    if let Ok(meta) = serde_json::from_value(meta) {
        tool = tool.with_meta(meta);
    }
    tool
}

impl ServerHandler for ScopeServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self
            .scope
            .session()
            .registry()
            .catalog()
            .iter()
            .map(tool_of)
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(self
            .answer(&request.name, request.arguments.as_ref())
            .await
            .into())
    }
}
