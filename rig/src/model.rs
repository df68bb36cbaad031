//! Any rig completion model as a tooltrust [`Model`].

use rig_core::DynModel;
use rig_core::completion::{CompletionRequest, CompletionResponse, ToolDefinition};
use rig_core::message::{
    AssistantContent, AssistantMessage, CallId, Message, ToolCall as RigToolCall, ToolFunction,
    ToolName, ToolResult, ToolResultContent, UserContent,
};
use rig_core::operation::Completion;
use serde_json::Value;
use tooltrust::Model;
use tooltrust::agent::{
    AssistantMessage as Reply, ChatMessage, ModelError, ModelFuture, ModelRequest, ModelToolCall,
};
use tooltrust::registry::CatalogEntry;

/// A rig completion model (any provider rig reaches) answering tooltrust's
/// [`Agent`](tooltrust::Agent).
///
/// Each request goes to rig whole: the system text as the preamble, the enveloped
/// conversation as rig messages, and the registry's tools with their strict schemas.
/// Tool calls come back with the argument text the model wrote where rig keeps it (see
/// [`arguments_text`]), so the checksum is taken over what the model wrote.
#[derive(Clone, Debug)]
pub struct RigModel {
    model: DynModel<Completion>,
    max_tokens: Option<u64>,
}

impl RigModel {
    /// Wraps `model`: a rig `Model<Wire, Transport>` of the completion operation, or one
    /// already erased.
    pub fn new(model: impl Into<DynModel<Completion>>) -> Self {
        RigModel {
            model: model.into(),
            max_tokens: None,
        }
    }

    /// Caps each answer at `max_tokens` (some providers, Anthropic's, require a cap).
    pub fn max_tokens(mut self, max_tokens: u64) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// The rig request for `request`.
    pub fn rig_request(&self, request: &ModelRequest) -> Result<CompletionRequest, ModelError> {
        let mut messages = rig_messages(&request.messages)?;
        let Some(last) = messages.pop() else {
            return Err(ModelError::msg("the conversation is empty"));
        };
        let tools = request
            .tools
            .iter()
            .map(definition)
            .collect::<Result<Vec<_>, _>>()?;
        let mut rig = CompletionRequest::new(last)
            .messages(messages)
            .tools(tools)
            .max_tokens(self.max_tokens);
        if !request.system.is_empty() {
            rig = rig.preamble(request.system.as_str());
        }
        Ok(rig)
    }
}

impl Model for RigModel {
    fn respond<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a> {
        Box::pin(async move {
            let rig = self.rig_request(request)?;
            let response = self.model.call(rig).await.map_err(ModelError::new)?;
            reply(&response)
        })
    }
}

/// A tool's definition as rig sends it: the registry's description and strict schema
/// (the plain one where it has none: a map's keys cannot be listed).
fn definition(entry: &CatalogEntry) -> Result<ToolDefinition, ModelError> {
    let schema = entry
        .strict_schema
        .as_ref()
        .map_or_else(|_| entry.schema.clone(), Clone::clone);
    Ok(ToolDefinition::new(
        tool_name(&entry.name)?,
        entry.description.as_str(),
        schema,
    ))
}

fn tool_name(name: &str) -> Result<ToolName, ModelError> {
    ToolName::new(name).map_err(ModelError::new)
}

/// tooltrust's chat as rig's messages. Consecutive tool answers go in one user message,
/// the shape every provider accepts.
fn rig_messages(chat: &[ChatMessage]) -> Result<Vec<Message>, ModelError> {
    let mut messages: Vec<Message> = Vec::with_capacity(chat.len());
    for message in chat {
        match message {
            ChatMessage::User { content } => messages.push(Message::user(content.as_str())),
            ChatMessage::Assistant {
                content,
                tool_calls,
            } => {
                let mut blocks = Vec::with_capacity(tool_calls.len() + 1);
                if let Some(text) = content.as_deref().filter(|text| !text.is_empty()) {
                    blocks.push(AssistantContent::text(text));
                }
                for call in tool_calls {
                    // `parse` keeps text that is not an object in `invalid_arguments`.
                    let function = ToolFunction::parse(tool_name(&call.name)?, &call.arguments);
                    blocks.push(AssistantContent::ToolCall(RigToolCall::from_wire(
                        call.id.as_str(),
                        function,
                    )));
                }
                messages.push(Message::Assistant(AssistantMessage::new(blocks)));
            }
            ChatMessage::Tool {
                call_id,
                name,
                content,
            } => {
                let result = UserContent::ToolResult(ToolResult {
                    call: CallId::from_wire(call_id.as_str()),
                    name: tool_name(name)?,
                    content: vec![ToolResultContent::text(content.as_str())],
                    is_error: false,
                });
                match messages.last_mut() {
                    Some(Message::User { content })
                        if content
                            .iter()
                            .all(|item| matches!(item, UserContent::ToolResult(_))) =>
                    {
                        content.push(result)
                    }
                    _ => messages.push(Message::User {
                        content: vec![result],
                    }),
                }
            }
        }
    }
    Ok(messages)
}

/// rig's answer as tooltrust's.
fn reply(response: &CompletionResponse) -> Result<Reply, ModelError> {
    if let Some(error) = &response.error {
        return Err(ModelError::msg(format!("the provider reported: {error}")));
    }
    let text = response.text();
    let tool_calls = response
        .tool_calls()
        .map(|call| ModelToolCall {
            id: call.id.wire().into_owned(),
            name: call.function.name.to_string(),
            arguments: arguments_text(call),
        })
        .collect();
    Ok(Reply {
        content: (!text.is_empty()).then_some(text),
        tool_calls,
    })
}

/// The argument text of a rig tool call, as close to what the model wrote as rig keeps.
///
/// rig parses arguments into a map as they arrive, so the text comes, in order: from
/// `invalid_arguments` (text that was not an object, kept verbatim: tooltrust refuses
/// it); from the provider's own item (`native`), when it holds the arguments as a string
/// that reads as the same object (OpenAI's and compatible APIs do; duplicate keys survive
/// there, so tooltrust refuses them); otherwise the map written back out. That last case
/// has the same canonical checksum as the model's text unless the model repeated a key,
/// which the provider's parser has already resolved.
pub fn arguments_text(call: &RigToolCall) -> String {
    if let Some(text) = &call.function.invalid_arguments {
        return text.clone();
    }
    let parsed = Value::Object(call.function.arguments.clone());
    let native = call
        .native
        .as_ref()
        .and_then(|native| native_arguments(&native.item))
        .filter(|text| serde_json::from_str::<Value>(text).is_ok_and(|value| value == parsed));
    match native {
        Some(text) => text.to_owned(),
        None => parsed.to_string(),
    }
}

/// The argument string in a provider's tool-call item: `function.arguments` (Chat
/// Completions) or `arguments` (Responses).
fn native_arguments(item: &Value) -> Option<&str> {
    item.pointer("/function/arguments")
        .or_else(|| item.get("arguments"))
        .and_then(Value::as_str)
}
