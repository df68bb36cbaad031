//! What a rig agent sends its model, guarded by the scope: every context document as
//! untrusted data of the scope (so it taints it), and the standing explanation first in
//! the system text.
//!
//! rig joins its documents (`.context`, `.dynamic_context`, a run's `.document`, a hook's
//! `extra_context`) into one request per model call, and the provider's encoder folds them
//! into the conversation as plain text after rig's own preparation. The one place that
//! still sees them as documents is the bus, between the agent and its model's handler:
//! the guard is a rig [`Intercept`] layer on that handler, which rewrites each request
//! before the model's driver sees it.

use std::collections::HashMap;

use rig_agent::AgentBuilder;
use rig_agent::agent::{Agent, WithBuilderTools};
use rig_core::DynModel;
use rig_core::completion::{CompletionRequest, Document};
use rig_core::effect::{EffectFamily, EffectId, EffectKind, Outcome};
use rig_core::error::ErrorReport;
use rig_core::message::Message;
use rig_core::operation::Completion;
use rig_core::serve::adapters::ModelAdapter;
use rig_core::serve::{Decision, ErasedHandler, Intercept, Verdict};
use tooltrust::Id;
use tooltrust::envelope::STANDING_EXPLANATION;
use tooltrust::session::SessionError;

use crate::tools::{GuardError, GuardedTools, lock};

/// The name the guard's layer carries in a handler's descriptor.
pub const CONTEXT_LAYER: &str = "tooltrust-context";

/// The `kind` of a context document's envelope.
const DOCUMENT_KIND: &str = "rig-document";

/// The label of the model [`GuardedTools::agent`] registers: rig's own default.
const DEFAULT_MODEL: &str = "default";

/// Why a request was not let through to the model, or an agent reaches a model unguarded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ContextError {
    /// A context document could not enter the scope (finished or forgotten scope, a
    /// record that failed, a body holding its own envelope's closer): the request is
    /// refused rather than sent with the document raw.
    #[error("context document `{document}` could not enter the scope: {source}")]
    Document {
        /// The document's id, as rig named it.
        document: String,
        /// Why.
        #[source]
        source: SessionError,
    },
    /// The scope took the document in but holds no envelope for it (it was forgotten
    /// meanwhile): the request is refused.
    #[error(
        "context document `{document}` entered the scope as block {block}, which it no longer holds"
    )]
    Unrendered {
        /// The document's id, as rig named it.
        document: String,
        /// The block it became.
        block: Id,
    },
    /// A completion model the agent can call is served without the guard, so its
    /// documents would reach that model raw.
    #[error(
        "the agent reaches the model `{key}` without tooltrust's guard: register it through \
         GuardedTools::agent or GuardedTools::model_handler"
    )]
    Unguarded {
        /// The handler's key on the agent's bus.
        key: String,
    },
}

impl GuardedTools {
    /// rig's agent builder over `model`, guarded: the guarded tools (as
    /// [`rig_tools`](Self::rig_tools)), and the model served through
    /// [`model_handler`](Self::model_handler), so every request rig's agent sends it
    /// goes through [`guard_request`](Self::guard_request), whatever put the documents
    /// there (`.context`, `.dynamic_context`, a run's `.document`, a hook).
    ///
    /// ```no_run
    /// # fn guard(session: tooltrust::Session, model: rig_core::test_utils::MockCompletionModel)
    /// #     -> Result<(), Box<dyn std::error::Error>> {
    /// let scope = session.open_scope(tooltrust::Id::new("support")?)?;
    /// let guarded = tooltrust_rig::GuardedTools::new(scope);
    /// let agent = guarded
    ///     .agent(model)? // in place of `AgentBuilder::new(model)` and your `.tool(...)` calls
    ///     .preamble("You are Acme's support agent.")
    ///     .context("Returns are accepted within 30 days.") // enveloped as untrusted, taints
    ///     .build();
    /// guarded.check(&agent)?;
    /// # Ok(()) }
    /// ```
    pub fn agent(
        &self,
        model: impl Into<DynModel<Completion>>,
    ) -> Result<AgentBuilder<WithBuilderTools>, GuardError> {
        let model = model.into();
        // rig registers the default model's own handler first and this one after it under
        // the same key, which replaces it: the agent's default model is served guarded.
        Ok(AgentBuilder::named_model(DEFAULT_MODEL, model.clone())
            .model_route_handler(DEFAULT_MODEL, self.model_handler(DEFAULT_MODEL, model))
            .dynamic_tools(self.rig_tools()?))
    }

    /// `model` as a rig completion handler under `label`, guarded: for
    /// `AgentBuilder::model_route_handler(label, …)` (each further model an agent may
    /// select) or a host's bus. A request whose documents cannot enter the scope is
    /// denied, and rig's run fails with the reason.
    pub fn model_handler(
        &self,
        label: &str,
        model: impl Into<DynModel<Completion>>,
    ) -> ErasedHandler {
        ErasedHandler::new(ModelAdapter::new(label, model)).layered(ContextLayer {
            guard: self.clone(),
        })
    }

    /// What rig's model may be sent of `request`: each document becomes one untrusted
    /// block of the scope (the scope is tainted from then on), and the model is sent that
    /// block's envelope, holding the document as rig would have shown it (its id, its
    /// metadata, its text), under the block's id and with no metadata of its own; the
    /// first system message starts with tooltrust's standing explanation (one is added
    /// when there is none). A document seen before is shown as the same block; a request
    /// already guarded is returned as it is. For requests built by hand and sent to a
    /// model directly; an agent built with [`agent`](Self::agent) does this on its own.
    pub fn guard_request(
        &self,
        mut request: CompletionRequest,
    ) -> Result<CompletionRequest, ContextError> {
        request.documents = std::mem::take(&mut request.documents)
            .into_iter()
            .map(|document| self.guard_document(document))
            .collect::<Result<_, _>>()?;
        explain(&mut request.chat_history);
        Ok(request)
    }

    /// Checks that every completion model `agent` is built to call (its default model and
    /// its routes) is served through the guard. A model a run selects by value
    /// (`using_model_value`, `Agent::set_model`) is registered later and is not seen here.
    pub fn check(&self, agent: &Agent) -> Result<(), ContextError> {
        agent
            .required_row()
            .iter()
            .filter(|(_, family)| **family == EffectFamily::Completion)
            .try_for_each(|(key, _)| {
                let guarded = agent.handler_descriptor(key).is_some_and(|handler| {
                    handler.layers.iter().any(|layer| layer == CONTEXT_LAYER)
                });
                if guarded {
                    Ok(())
                } else {
                    Err(ContextError::Unguarded {
                        key: key.to_string(),
                    })
                }
            })
    }

    fn guard_document(&self, document: Document) -> Result<Document, ContextError> {
        let scope = self.scope();
        let failed = |source| ContextError::Document {
            document: document.id.clone(),
            source,
        };
        if self.is_shown(&document).map_err(failed)? {
            return Ok(document);
        }
        // rig's own rendering: `<file id: …>`, the metadata, the text.
        let body = document.to_string().trim_end().to_owned();
        let mut shown = lock(&self.inner().documents);
        let known = match shown.get(&body) {
            Some(block) => scope
                .rendered_of(block)
                .map_err(failed)?
                .map(|text| (block.clone(), text)),
            None => None,
        };
        let (block, text) = match known {
            Some(known) => known,
            None => {
                let block = scope
                    .add_untrusted(DOCUMENT_KIND, body.clone())
                    .map_err(failed)?;
                let text = scope.rendered_of(&block).map_err(failed)?.ok_or_else(|| {
                    ContextError::Unrendered {
                        document: document.id.clone(),
                        block: block.clone(),
                    }
                })?;
                shown.insert(body, block.clone());
                (block, text)
            }
        };
        Ok(Document {
            id: block.to_string(),
            text,
            additional_props: HashMap::new(),
        })
    }

    /// Whether `document` is already one of the scope's envelopes, as this guard sends it.
    fn is_shown(&self, document: &Document) -> Result<bool, SessionError> {
        let Ok(block) = Id::new(document.id.as_str()) else {
            return Ok(false);
        };
        if !document.additional_props.is_empty() {
            return Ok(false);
        }
        Ok(self.scope().rendered_of(&block)?.as_deref() == Some(document.text.as_str()))
    }
}

/// Puts the standing explanation first in the system text, once.
fn explain(history: &mut Vec<Message>) {
    match history.first_mut() {
        Some(Message::System { content }) if content.starts_with(STANDING_EXPLANATION) => {}
        Some(Message::System { content }) if content.is_empty() => {
            STANDING_EXPLANATION.clone_into(content);
        }
        Some(Message::System { content }) => {
            *content = format!("{STANDING_EXPLANATION}\n\n{content}");
        }
        _ => history.insert(0, Message::system(STANDING_EXPLANATION)),
    }
}

/// The guard as a rig layer on a completion handler.
struct ContextLayer {
    guard: GuardedTools,
}

impl Intercept for ContextLayer {
    fn name(&self) -> String {
        CONTEXT_LAYER.to_owned()
    }

    async fn before(&self, _id: EffectId, kind: &EffectKind) -> Decision {
        let EffectKind::Completion { request, stream } = kind else {
            // Only completion handlers are layered: anything else here is refused.
            return Decision::deny(format!("{CONTEXT_LAYER} guards completion requests only"));
        };
        match self.guard.guard_request(request.clone()) {
            Ok(request) => Decision::Patch(EffectKind::Completion {
                request,
                stream: *stream,
            }),
            Err(error) => Decision::deny(error.to_string()),
        }
    }

    async fn after(
        &self,
        _id: EffectId,
        _kind: &EffectKind,
        _outcome: &Result<Outcome, ErrorReport>,
    ) -> Verdict {
        Verdict::Keep
    }
}
