//! A tooltrust scope's tools as rig run-time tools.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rig_core::message::{EmptyToolName, ToolName};
use rig_core::tool::{DynamicTool, ToolContext, ToolExecutionError, ToolOutput};
use tooltrust::session::SessionError;
use tooltrust::{CallOutcome, Id, Scope, ToolCall};

/// The tools of a scope's registry, guarded, for a rig agent.
///
/// Every call goes through [`ToolCall::from_model`] (checksum before anything runs), then
/// [`Scope::call`] (gate, run, render, record). A ran call answers with its enveloped
/// block (sealed by default); a held call answers with a note saying it is held, its id
/// and how it is decided; a denied call is a tool error naming the rule and why. The
/// scope's taint rises with every untrusted result, so a consequential call made after
/// reading untrusted content is held. Clones share the scope and the list of held calls.
///
/// ```no_run
/// # fn guard(session: tooltrust::Session, model: rig_core::test_utils::MockCompletionModel)
/// #     -> Result<(), Box<dyn std::error::Error>> {
/// let scope = session.open_scope(tooltrust::Id::new("support")?)?;
/// let guarded = tooltrust_rig::GuardedTools::new(scope);
/// let agent = rig_agent::AgentBuilder::new(model)
///     .dynamic_tools(guarded.rig_tools()?) // in place of your `.tool(...)` calls
///     .build();
/// # let _ = agent; Ok(()) }
/// ```
#[derive(Clone)]
pub struct GuardedTools {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    scope: Scope,
    held: Mutex<Vec<HeldCall>>,
    /// Each context document the model was sent (as rig renders it), and its block.
    pub(crate) documents: Mutex<HashMap<String, Id>>,
}

/// A call the gate sent to review while rig's agent ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldCall {
    /// The held call's id: what a review decides
    /// ([`Session::decide_call`](tooltrust::Session::decide_call), then
    /// [`Scope::run_pending`]; with a store, `tooltrust pending approve ID` or the console).
    pub id: Id,
    /// The tool the model named.
    pub tool: String,
    /// The rule that held it.
    pub rule: String,
    /// Why.
    pub reason: String,
}

/// Why the guarded tools could not be handed to rig.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GuardError {
    /// rig refused a tool's name.
    #[error("rig refuses the tool name `{name}`: {source}")]
    Name {
        /// The registry's name for the tool.
        name: String,
        /// rig's reason.
        #[source]
        source: EmptyToolName,
    },
}

impl GuardedTools {
    /// Guards the tools of `scope`'s registry, calling them in `scope`.
    pub fn new(scope: Scope) -> Self {
        GuardedTools {
            inner: Arc::new(Inner {
                scope,
                held: Mutex::new(Vec::new()),
                documents: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The scope every call runs in.
    pub fn scope(&self) -> &Scope {
        &self.inner.scope
    }

    pub(crate) fn inner(&self) -> &Inner {
        &self.inner
    }

    /// The calls held for review so far, in order.
    pub fn held(&self) -> Vec<HeldCall> {
        lock(&self.inner.held).clone()
    }

    /// Every tool of the registry as a rig run-time tool: its name, its description and
    /// its strict schema (the plain one where it has none, a map's keys cannot be listed).
    pub fn rig_tools(&self) -> Result<Vec<DynamicTool>, GuardError> {
        let registry = self.scope().session().registry();
        registry
            .catalog()
            .iter()
            .map(|entry| {
                let name =
                    ToolName::new(entry.name.as_str()).map_err(|source| GuardError::Name {
                        name: entry.name.clone(),
                        source,
                    })?;
                let parameters = entry
                    .strict_schema
                    .as_ref()
                    .map_or_else(|_| entry.schema.clone(), Clone::clone);
                let guard = self.clone();
                let tool = entry.name.clone();
                Ok(DynamicTool::new_with_context(
                    name,
                    entry.description.clone(),
                    parameters,
                    move |_context: &mut ToolContext, arguments| {
                        let guard = guard.clone();
                        let tool = tool.clone();
                        Box::pin(async move {
                            // rig hands over the arguments it parsed from the model's text;
                            // written back out, they canonicalise to the same checksum.
                            let text = serde_json::to_string(&arguments).map_err(|error| {
                                ToolExecutionError::invalid_args(error.to_string())
                            })?;
                            guard.call(&tool, &text).await
                        })
                    },
                ))
            })
            .collect()
    }

    /// Checksums, gates and runs one call as the model wrote it, and says what the model
    /// is shown: rig's [`ToolOutput`] or [`ToolExecutionError`].
    pub async fn call(
        &self,
        tool: &str,
        arguments: &str,
    ) -> Result<ToolOutput, ToolExecutionError> {
        let scope = self.scope();
        let call = match ToolCall::from_model(tool, arguments) {
            Ok(call) => call,
            Err(error) => {
                let text = error.to_string();
                let note = scope.note("call-refused", &text).map_err(failed)?;
                return Err(ToolExecutionError::invalid_args(text).with_model_feedback(note));
            }
        };
        let outcome = scope.call(call).await.map_err(failed)?;
        self.shown(tool, &outcome)
    }

    /// What the model is shown for `outcome` of a call to `tool`: the enveloped block of
    /// a call that ran (also one [`Scope::run_pending`] ran once approved), a note for a
    /// held call, an error for anything that did not run.
    pub fn shown(
        &self,
        tool: &str,
        outcome: &CallOutcome,
    ) -> Result<ToolOutput, ToolExecutionError> {
        let scope = self.scope();
        match outcome {
            CallOutcome::Ran { block, .. } => match scope.rendered_of(block).map_err(failed)? {
                Some(rendered) => Ok(ToolOutput::text(rendered)),
                None => Err(ToolExecutionError::other(format!(
                    "the output of `{tool}` is not in the scope's context"
                ))),
            },
            CallOutcome::Pending { id, decision } => {
                lock(&self.inner.held).push(HeldCall {
                    id: id.clone(),
                    tool: tool.to_owned(),
                    rule: decision.rule.clone(),
                    reason: decision.reason.clone(),
                });
                let text = format!(
                    "The call is held for review as {id} ({}): {}. It runs only if a reviewer \
                     approves it (`tooltrust pending approve {id}` or the review console when \
                     the session keeps a store; otherwise the host decides it); do not retry it.",
                    decision.rule, decision.reason
                );
                // Enveloped like every note: the reason quotes what the model asked for.
                Ok(ToolOutput::text(
                    scope.note("gate-decision", &text).map_err(failed)?,
                ))
            }
            CallOutcome::Denied(decision) => {
                let text = format!(
                    "The call was denied by the gate ({}): {}",
                    decision.rule, decision.reason
                );
                let note = scope.note("gate-decision", &text).map_err(failed)?;
                Err(ToolExecutionError::refused(text).with_model_feedback(note))
            }
            CallOutcome::Invalid { error, note } => {
                Err(ToolExecutionError::invalid_args(error.to_string())
                    .with_model_feedback(note.clone()))
            }
            CallOutcome::Withheld { error, note, .. } => {
                Err(ToolExecutionError::other(error.to_string()).with_model_feedback(note.clone()))
            }
            // `CallOutcome` may grow: whatever it is, it is not a result to show.
            _ => Err(ToolExecutionError::other(format!(
                "the call to `{tool}` ended in an outcome this adapter does not know"
            ))),
        }
    }
}

/// The lock, poisoned or not: each update under it is one push or insert, whole or absent.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The scope could not record or render: nothing the model may read about it.
fn failed(error: SessionError) -> ToolExecutionError {
    ToolExecutionError::from_error(error)
}
