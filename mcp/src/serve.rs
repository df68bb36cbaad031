//! A registry as an MCP server: every `tools/call` goes through the scope exactly as the
//! agent loop's calls do (checksum → gate → run → render → record).

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Map, Value};
use tooltrust::gate::Decision;
use tooltrust::registry::CatalogEntry;
use tooltrust::review::Verdict;
use tooltrust::{CallOutcome, Id, Scope, ToolCall};

/// Serves one scope's tools to an MCP client. Build it with [`ScopeServer::new`] and run it
/// with [`crate::serve`] (or `rmcp::ServiceExt::serve` on any transport).
#[derive(Clone)]
pub struct ScopeServer {
    scope: Arc<Scope>,
    asker: Option<Id>,
    queue: Option<Arc<ReviewQueue>>,
    listing: Option<Arc<dyn Listing>>,
}

/// What `tools/list` leaves out and adds to its `_meta`: the guarding proxy's withheld
/// tools and unavailable upstreams.
pub(crate) trait Listing: Send + Sync {
    /// Whether the tool is listed.
    fn listed(&self, name: &str) -> bool;
    /// The list's `_meta`, if any.
    fn meta(&self) -> Option<Map<String, Value>>;
}

/// A review queue for held calls a client cannot be asked about: a person decides them from
/// any terminal (`tooltrust pending approve ID …`), and an approved call runs, once, when
/// the same call is made again.
pub struct ReviewQueue {
    store: tooltrust_store::Store,
    /// How the `tooltrust pending` commands name the store (`--sqlite PATH`).
    flag: String,
}

impl ReviewQueue {
    /// A queue in `store`, which `tooltrust pending` reaches with `flag`
    /// (`--sqlite PATH` or `--postgres URL`).
    pub fn new(store: tooltrust_store::Store, flag: impl Into<String>) -> Self {
        ReviewQueue {
            store,
            flag: flag.into(),
        }
    }
}

/// A person's answer to "run this held call?", asked through MCP elicitation.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct Approval {
    /// Whether the held call may run.
    approve: bool,
}

rmcp::elicit_safe!(Approval);

impl ScopeServer {
    /// Serves `scope`'s session's registry; calls are made, and decided, in `scope`.
    pub fn new(scope: Scope) -> Self {
        ScopeServer {
            scope: Arc::new(scope),
            asker: None,
            queue: None,
            listing: None,
        }
    }

    /// Lists only the tools `listing` shows, with its `_meta`.
    pub(crate) fn listing(mut self, listing: Arc<dyn Listing>) -> Self {
        self.listing = Some(listing);
        self
    }

    /// Keeps the held calls no one could be asked about in `queue`, and runs an approved
    /// one when the same call (the same checksum) is made again in a scope of the same
    /// author.
    pub fn review_queue(mut self, queue: ReviewQueue) -> Self {
        self.queue = Some(Arc::new(queue));
        self
    }

    /// Asks the person at the client, through MCP elicitation, whether a held call may
    /// run, and records their answer as `reviewer`'s verdict (who must not be the scope's
    /// author). Declining or cancelling rejects it. A client that cannot elicit gets the
    /// held result, as without this.
    pub fn ask_about_held_calls(mut self, reviewer: Id) -> Self {
        self.asker = Some(reviewer);
        self
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
        self.answer_asking(name, arguments, None).await
    }

    async fn answer_asking(
        &self,
        name: &str,
        arguments: Option<&Map<String, Value>>,
        context: Option<&RequestContext<RoleServer>>,
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
        if let Some(queue) = &self.queue {
            match self.run_approved(queue, &call).await {
                Ok(Some(outcome)) => return self.shown(&outcome),
                Ok(None) => {}
                Err(error) => return refusal(error),
            }
        }
        let (tool, args) = (call.tool().to_owned(), call.canonical_args().to_owned());
        let outcome = match self.scope.call(call.clone()).await {
            Ok(outcome) => outcome,
            Err(error) => return refusal(format!("the call could not be made: {error}")),
        };
        let outcome = match (outcome, &self.asker, context) {
            (CallOutcome::Pending { id, decision }, Some(reviewer), Some(context))
                if !context.peer.supported_elicitation_modes().is_empty() =>
            {
                let question = self.question(&tool, &args, &decision);
                match self.ask(context, &id, reviewer, question).await {
                    Ok(outcome) => outcome,
                    Err(error) => return refusal(error),
                }
            }
            (CallOutcome::Pending { id, decision }, _, _) if self.queue.is_some() => {
                return match self.queue_held(&call, &id, &decision).await {
                    Ok(text) => refusal(text),
                    Err(error) => refusal(error),
                };
            }
            (outcome, _, _) => outcome,
        };
        self.shown(&outcome)
    }

    /// Puts a held call in the review queue; the text tells how to approve it.
    async fn queue_held(
        &self,
        call: &ToolCall,
        id: &Id,
        decision: &Decision,
    ) -> Result<String, String> {
        let Some(queue) = &self.queue else {
            return Err("no review queue".to_owned());
        };
        let author = self.scope.author().map_err(|error| error.to_string())?;
        let mut held = tooltrust_store::PendingCall::new(
            call,
            queue.store.tenant().clone(),
            decision.rule.to_string(),
            decision.reason.clone(),
            self.scope.id().clone(),
            author,
        );
        held.id = id.clone();
        held.context = self.scope.context().ok();
        if let Some(entry) = self
            .scope
            .session()
            .registry()
            .catalog()
            .iter()
            .find(|entry| entry.name == held.tool)
        {
            held = held.declared(entry);
        }
        queue
            .store
            .hold(&held)
            .await
            .map_err(|error| format!("the held call could not be queued: {error}"))?;
        Ok(format!(
            "held for review as {id} ({}): {}. A person can approve it in the review console (`tooltrust console {} --reviewer NAME`) or from any terminal with `tooltrust pending approve {id} --reviewer NAME --reason TEXT {}`; then make the same call again, and it runs once.",
            decision.rule, decision.reason, queue.flag, queue.flag
        ))
    }

    /// Runs `call` if a person approved the same call in the queue for this scope (same
    /// tenant, scope, tool and checksum) and no one ran it yet: the gate decides it again
    /// first, and the approval is claimed only if the gate holds it for the rule the
    /// person approved, so a denial or an error leaves it unspent.
    async fn run_approved(
        &self,
        queue: &ReviewQueue,
        call: &ToolCall,
    ) -> Result<Option<CallOutcome>, String> {
        let filter = tooltrust_store::ListFilter {
            status: Some(tooltrust_store::HeldStatus::Approved),
            tool: Some(call.tool().to_owned()),
            scope: Some(self.scope.id().clone()),
            tenant: Some(queue.store.tenant().clone()),
            ..Default::default()
        };
        let approved = queue
            .store
            .list(&filter)
            .await
            .map_err(|error| format!("the review queue could not be read: {error}"))?;
        let Some(candidate) = approved
            .into_iter()
            .find(|candidate| candidate.checksum == call.checksum())
        else {
            return Ok(None);
        };
        match queue
            .store
            .run_approved(&self.scope, &candidate, candidate.upstream.as_deref())
            .await
        {
            Ok(outcome) => Ok(Some(outcome)),
            // Claimed by another process first: it runs there; this call is decided afresh.
            Err(tooltrust_store::RunApprovedError::Claim(
                tooltrust_store::ClaimError::AlreadyClaimed { .. },
            )) => Ok(None),
            Err(error) => Err(format!("the approved call could not run: {error}")),
        }
    }

    /// Puts a held call to the person at the client; runs it once if they approve.
    async fn ask(
        &self,
        context: &RequestContext<RoleServer>,
        id: &Id,
        reviewer: &Id,
        question: String,
    ) -> Result<CallOutcome, String> {
        let approved = matches!(
            context.peer.elicit::<Approval>(question).await,
            Ok(Some(Approval { approve: true }))
        );
        let verdict = if approved {
            Verdict::approve("approved by the person at the MCP client")
        } else {
            Verdict::reject("declined by the person at the MCP client")
        };
        self.scope
            .session()
            .decide_call(id, reviewer.clone(), verdict)
            .map_err(|error| format!("the decision could not be recorded: {error}"))?;
        if !approved {
            return Ok(CallOutcome::Denied(Decision::deny(
                "review",
                format!(
                    "the held call {id} was declined by the person at the MCP client; it did not run"
                ),
            )));
        }
        self.scope
            .run_pending(id)
            .await
            .map_err(|error| format!("the approved call could not run: {error}"))
    }

    /// What the person is shown: the tool, the canonical arguments, the rule and reason,
    /// and the untrusted content that tainted the session.
    fn question(&self, tool: &str, args: &str, decision: &Decision) -> String {
        let tainted_by: Vec<String> = self
            .scope
            .blocks()
            .unwrap_or_default()
            .iter()
            .filter(|block| block.trust() == tooltrust::Trust::Untrusted)
            .map(|block| folded(block.text(), 400))
            .collect();
        format!(
            "A call was held for review ({}: {}).\n\nTool: {tool}\nArguments: {}\n\nThe session holds untrusted content:\n{}\n\nRun it?",
            decision.rule,
            decision.reason,
            folded(args, 2000),
            tainted_by.join("\n---\n"),
        )
    }

    fn shown(&self, outcome: &CallOutcome) -> CallToolResult {
        match outcome {
            CallOutcome::Ran { block, output, .. } => match self.scope.rendered_of(block) {
                // A tool that failed (a remote server gone, say) ran, but is an error to
                // the client; its text is still an envelope.
                Ok(Some(text)) if output.failed => {
                    CallToolResult::error(vec![ContentBlock::text(text)])
                }
                Ok(Some(text)) => CallToolResult::success(vec![ContentBlock::text(text)]),
                Ok(None) => refusal("the call ran but its output is not in the scope".to_owned()),
                Err(error) => refusal(format!("the call ran but its output is lost: {error}")),
            },
            CallOutcome::Denied(decision) => refusal(format!(
                "denied by the gate ({}): {}",
                decision.rule, decision.reason
            )),
            CallOutcome::Pending { id, decision } => refusal(format!(
                "held for review as {id} ({}): {}. It runs only if a reviewer approves it; do not retry it.",
                decision.rule, decision.reason
            )),
            CallOutcome::Invalid { note, .. } | CallOutcome::Withheld { note, .. } => {
                refusal(note.clone())
            }
            _ => refusal("the call ended in a way this server does not know".to_owned()),
        }
    }
}

/// At most `max` bytes of `text`, cut at a character boundary, marked when cut.
fn folded(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &text[..end], text.len())
}

/// An error result: `isError: true`, with a text the model and the person can read.
fn refusal(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// A catalog entry as an MCP tool: the runtime's `tools/list` shape
/// ([`tooltrust::providers::mcp::tool`]), whose annotations come from the declaration
/// alone.
pub fn tool_of(entry: &CatalogEntry) -> Tool {
    serde_json::from_value(tooltrust::providers::mcp::tool(entry)).unwrap_or_else(|_| {
        // The shape is the runtime's own; should rmcp's model ever refuse it, the tool is
        // still listed, with no annotation that could overstate it.
        let schema = match &entry.schema {
            Value::Object(schema) => schema.clone(),
            _ => Map::new(),
        };
        Tool::new(
            entry.name.clone(),
            entry.description.clone(),
            Arc::new(schema),
        )
    })
}

impl ServerHandler for ScopeServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder().enable_tools();
        // The proxy tells the host when it withholds a tool it listed.
        ServerConfig::new(match self.listing {
            Some(_) => capabilities.enable_tool_list_changed().build(),
            None => capabilities.build(),
        })
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let listing = self.listing.as_deref();
        let tools = self
            .scope
            .session()
            .registry()
            .catalog()
            .iter()
            .filter(|entry| listing.is_none_or(|listing| listing.listed(&entry.name)))
            .map(tool_of)
            .collect();
        let mut result = ListToolsResult::with_all_items(tools);
        result.meta = listing.and_then(Listing::meta).map(rmcp::model::MetaObject);
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(self
            .answer_asking(&request.name, request.arguments.as_ref(), Some(&context))
            .await
            .into())
    }
}
