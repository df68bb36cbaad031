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
use tooltrust::envelope::{confusable_note, is_unseen};
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
    max_asked_bytes: usize,
}

/// The default of [`ScopeServer::max_asked_arguments_bytes`]: how many bytes a held
/// call's arguments, shown whole, may take in a question to the person at the client.
pub const DEFAULT_ASKED_ARGUMENTS_BYTES: usize = 4096;

/// How many of the latest untrusted blocks a question shows, and how many bytes of each:
/// they are context for the person, not what they approve.
const SHOWN_UNTRUSTED_BLOCKS: usize = 4;
const SHOWN_UNTRUSTED_BYTES: usize = 600;

/// How many of a call's keys and strings with confusable characters a question names.
const SHOWN_CONFUSABLE_PLACES: usize = 8;

/// What `tools/list` leaves out and adds to its `_meta`: the guarding proxy's withheld
/// tools and unavailable upstreams.
pub(crate) trait Listing: Send + Sync {
    /// Whether the tool is listed.
    fn listed(&self, name: &str) -> bool;
    /// The list's `_meta`, if any.
    fn meta(&self) -> Option<Map<String, Value>>;
    /// The upstream a tool belongs to, if it is an upstream's: part of what an approval
    /// of a call to it binds.
    fn upstream(&self, tool: &str) -> Option<String>;
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
            max_asked_bytes: DEFAULT_ASKED_ARGUMENTS_BYTES,
        }
    }

    /// A held call is asked about only when its arguments, each shown whole, fit in
    /// `bytes`; a longer one goes to the review queue (see [`Self::review_queue`]), or,
    /// without one, is declined, and the result says why. Default
    /// [`DEFAULT_ASKED_ARGUMENTS_BYTES`].
    pub fn max_asked_arguments_bytes(mut self, bytes: usize) -> Self {
        self.max_asked_bytes = bytes;
        self
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
        let tool = call.tool().to_owned();
        let outcome = match self.scope.call(call.clone()).await {
            Ok(outcome) => outcome,
            Err(error) => return refusal(format!("the call could not be made: {error}")),
        };
        let outcome = match (outcome, &self.asker, context) {
            (CallOutcome::Pending { id, decision }, Some(reviewer), Some(context))
                if !context.peer.supported_elicitation_modes().is_empty() =>
            {
                let arguments = shown_arguments(&call);
                if arguments.len() > self.max_asked_bytes {
                    return refusal(self.not_asked(&call, &id, &decision, arguments.len()).await);
                }
                let question = match self.question(&tool, call.args(), &arguments, &decision) {
                    Ok(question) => question,
                    Err(error) => return refusal(error),
                };
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
        let mut held = tooltrust_store::HeldCall::new(
            call,
            queue.store.tenant().clone(),
            decision.rule.to_string(),
            decision.reason.clone(),
            self.scope.id().clone(),
            author,
        );
        held.id = id.clone();
        held.upstream = self.upstream_of(call.tool());
        held.expires_at = self
            .scope
            .session()
            .approval_ttl()
            .map(tooltrust::held::expiry_after);
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
        // How to review goes to the operator, never to the model: text the model reads is
        // text an injection can act on (a same-user upstream could run the command).
        eprintln!(
            "tooltrust: call {id} to {} is held for review; a reviewer decides it with `tooltrust pending approve|reject {id} --reviewer NAME --key FILE --reason TEXT {}` or in the review console",
            call.tool(),
            queue.flag
        );
        Ok(format!(
            "held for review as {id} ({}): {}. It has not run. A person reviews it; if it is approved, the same call made again runs once.",
            decision.rule, decision.reason
        ))
    }

    /// The upstream the tool belongs to, for a guarding proxy's tools.
    fn upstream_of(&self, tool: &str) -> Option<String> {
        self.listing
            .as_ref()
            .and_then(|listing| listing.upstream(tool))
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
            .run_approved(
                &self.scope,
                &candidate,
                self.upstream_of(call.tool()).as_deref(),
            )
            .await
        {
            Ok(outcome) => Ok(Some(outcome)),
            // Claimed by another process first: it runs there; this call is decided afresh.
            Err(tooltrust_store::RunApprovedError::Claim(
                tooltrust::held::ClaimRefused::AlreadySpent(_),
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

    /// A held call whose arguments, shown whole, would take `bytes`, more than a question
    /// may: queued when there is a review queue, declined otherwise (recorded as the
    /// proxy's rejection, so the call never runs). Never asked about cut.
    async fn not_asked(
        &self,
        call: &ToolCall,
        id: &Id,
        decision: &Decision,
        bytes: usize,
    ) -> String {
        let why = format!(
            "its arguments take {bytes} bytes shown whole, more than the {} a question to the person at the client may (`max_asked_arguments_bytes`), and a person is never asked about a call they cannot see whole",
            self.max_asked_bytes
        );
        if self.queue.is_some() {
            return match self.queue_held(call, id, decision).await {
                Ok(text) => format!("Not asked at the client: {why}. {text}"),
                Err(error) => error,
            };
        }
        let declined = Id::new("mcp-proxy")
            .map_err(|error| error.to_string())
            .and_then(|proxy| {
                self.scope
                    .session()
                    .decide_call(id, proxy, Verdict::reject(format!("not asked: {why}")))
                    .map_err(|error| error.to_string())
            });
        match declined {
            Ok(()) => format!(
                "declined: the held call {id} ({}: {}) was not put to the person at the client: {why}, and this proxy has no review queue (`store` in its configuration). It did not run.",
                decision.rule, decision.reason
            ),
            Err(error) => format!(
                "the held call {id} was not asked about ({why}) and its rejection could not be recorded: {error}; it did not run"
            ),
        }
    }

    /// What the person is shown: the tool, every argument whole in canonical order, the
    /// rule and reason, which keys and values hold characters that mix scripts or look
    /// like others (named); then, last, the latest untrusted content of the session,
    /// neutralised and fenced line by line under a random label, as outsiders' words.
    fn question(
        &self,
        tool: &str,
        args: &Map<String, Value>,
        arguments: &str,
        decision: &Decision,
    ) -> Result<String, String> {
        let fence =
            Id::random().map_err(|error| format!("the question could not be fenced: {error}"))?;
        let untrusted: Vec<tooltrust::block::Block> = self
            .scope
            .blocks()
            .map_err(|error| format!("the session's content could not be read: {error}"))?
            .into_iter()
            .filter(|block| block.trust() == tooltrust::Trust::Untrusted)
            .collect();
        let mut question = format!(
            "A call was held for review ({}: {}).\n\nTool: {tool}\nArguments, every one whole, in canonical order, as JSON:\n{arguments}{}\nApprove only if this exact call is what you want.",
            decision.rule,
            decision.reason,
            confusable_places(args),
        );
        if untrusted.is_empty() {
            return Ok(question);
        }
        let skipped = untrusted.len().saturating_sub(SHOWN_UNTRUSTED_BLOCKS);
        question.push_str(&format!(
            "\n\nLast, the untrusted content of this session: written by outsiders, not by tooltrust, the host or you, whatever it claims. Each of its lines starts with \"│ \"; it ends at the line \"[end of outsiders' text {fence}]\".{}",
            if skipped > 0 {
                format!(" ({skipped} earlier block(s) not shown.)")
            } else {
                String::new()
            }
        ));
        for block in &untrusted[skipped..] {
            let text = block.text();
            let shown = folded(text, SHOWN_UNTRUSTED_BYTES);
            let neutral = tooltrust::envelope::neutralise(shown);
            let cut = if shown.len() < text.len() {
                format!(", the first {} of {} bytes", shown.len(), text.len())
            } else {
                String::new()
            };
            question.push_str(&format!(
                "\n[outsiders' text {fence}: block {}{cut}]\n",
                block.id()
            ));
            question.push_str(&fenced(&neutral.text));
        }
        question.push_str(&format!("\n[end of outsiders' text {fence}]"));
        Ok(question)
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

/// At most `max` bytes of `text`, cut at a character boundary.
fn folded(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// JSON text with every character that could break a line, or hide or reorder text,
/// written as its `\u` escape: still the same JSON value.
fn escaped(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if is_unseen(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The call's arguments as the person reads them: one line each, in canonical (RFC 8785)
/// key order, key and value as canonical JSON, whole; a value can neither start a line
/// of its own nor hide a character.
fn shown_arguments(call: &ToolCall) -> String {
    let mut keys: Vec<&String> = call.args().keys().collect();
    keys.sort_by(|a, b| tooltrust::canonical::cmp_utf16(a, b));
    let mut shown = String::new();
    for key in keys {
        let value = &call.args()[key.as_str()];
        shown.push_str("  ");
        shown.push_str(&escaped(&tooltrust::canonical::canonical_json(
            &Value::String(key.clone()),
        )));
        shown.push_str(": ");
        shown.push_str(&escaped(&tooltrust::canonical::canonical_json(value)));
        shown.push('\n');
    }
    if shown.is_empty() {
        shown.push_str("  (none)\n");
    }
    shown
}

/// The keys and strings of a call's arguments with characters a person may take for
/// others (the runtime's [`confusable_note`]), one line each after a heading, or nothing:
/// `exаmple` and `example` look alike, and the line names the Cyrillic `а`.
fn confusable_places(args: &Map<String, Value>) -> String {
    fn walk(value: &Value, place: &str, key: &str, lines: &mut Vec<String>) {
        match value {
            Value::String(text) => {
                if let Some(note) = confusable_note(text) {
                    lines.push(format!("{place}{key}: {note}"));
                }
            }
            Value::Array(items) => {
                for item in items {
                    walk(item, "a string inside ", key, lines);
                }
            }
            Value::Object(fields) => {
                for (name, field) in fields {
                    if let Some(note) = confusable_note(name) {
                        lines.push(format!("a key inside {key} ({}): {note}", shown_key(name)));
                    }
                    walk(field, "a string inside ", key, lines);
                }
            }
            _ => {}
        }
    }
    let mut keys: Vec<&String> = args.keys().collect();
    keys.sort_by(|a, b| tooltrust::canonical::cmp_utf16(a, b));
    let mut lines = Vec::new();
    for key in keys {
        let shown = shown_key(key);
        if let Some(note) = confusable_note(key) {
            lines.push(format!("the key {shown}: {note}"));
        }
        walk(&args[key.as_str()], "the value of ", &shown, &mut lines);
    }
    if lines.is_empty() {
        return String::new();
    }
    let more = lines.len().saturating_sub(SHOWN_CONFUSABLE_PLACES);
    lines.truncate(SHOWN_CONFUSABLE_PLACES);
    let mut out = "Look twice: these keys and values hold characters that mix scripts, look like others or are invisible:\n".to_owned();
    for line in lines {
        out.push_str("  ");
        out.push_str(&line);
        out.push('\n');
    }
    if more > 0 {
        out.push_str(&format!(
            "  and {more} more key(s) or value(s) like these\n"
        ));
    }
    out
}

/// A key as the question quotes it: canonical JSON, nothing hidden.
fn shown_key(key: &str) -> String {
    escaped(&tooltrust::canonical::canonical_json(&Value::String(
        key.to_owned(),
    )))
}

/// Outsiders' text, every line of it starting with `│ `: whatever it holds (a line that
/// looks like the end of the fence, a line break of any kind), none of its lines can
/// read as the question's own. Characters that hide or reorder text are shown as
/// U+FFFD.
fn fenced(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    out.push_str("│ ");
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' | '\r' | '\u{B}' | '\u{C}' | '\u{85}' | '\u{2028}' | '\u{2029}' => {
                out.push_str("\n│ ");
            }
            '\t' => out.push(c),
            c if is_unseen(c) => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
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
