//! One answer of a provider, read the same way whether it came whole or streamed.

use tooltrust::agent::{AssistantMessage, ModelError, ModelFuture};

use crate::error::{ProviderError, RefusalKind};

/// How the model stopped, as tooltrust reads the provider's stop reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Stop {
    /// A complete answer: text, calls, or both.
    Complete,
    /// Cut off at the token limit.
    Length,
    /// Stopped by the provider's content filter.
    ContentFilter,
    /// The model refused.
    Refusal,
    /// A reason tooltrust does not accept as a complete answer.
    Other,
}

/// Token counts the provider reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// Tokens read (cached ones included).
    pub input_tokens: Option<u64>,
    /// Tokens written.
    pub output_tokens: Option<u64>,
}

/// A provider's answer with what it says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// The text and the calls, each call's arguments exactly as the model wrote them
    /// (Anthropic's `input` objects as canonical JSON).
    pub message: AssistantMessage,
    /// OpenAI's `message.refusal` text, if the model refused that way.
    pub refusal: Option<String>,
    /// The provider's stop reason, as it wrote it.
    pub finish_reason: Option<String>,
    /// What the stop reason means.
    pub stop: Stop,
    /// Token counts.
    pub usage: Usage,
    /// The provider's id of the response.
    pub id: Option<String>,
    /// The model that answered.
    pub model: Option<String>,
}

impl Completion {
    /// The message, if it is a complete answer; a refusal, a cut-off or an unexpected stop
    /// is a typed error, and the calls of such an answer never reach the gate.
    pub fn into_message(self) -> Result<AssistantMessage, ProviderError> {
        if let Some(message) = self.refusal {
            return Err(ProviderError::Refusal {
                kind: RefusalKind::Model,
                message: Some(message),
            });
        }
        match self.stop {
            Stop::Complete => Ok(self.message),
            Stop::Length => Err(ProviderError::Length {
                content: self.message.content,
            }),
            Stop::ContentFilter => Err(ProviderError::Refusal {
                kind: RefusalKind::ContentFilter,
                message: None,
            }),
            Stop::Refusal => Err(ProviderError::Refusal {
                kind: RefusalKind::Model,
                message: self.message.content,
            }),
            Stop::Other => Err(ProviderError::UnexpectedStop {
                reason: self.finish_reason.unwrap_or_default(),
            }),
        }
    }
}

/// `text`, unless it is empty (an answer with no text has no content).
pub(crate) fn non_empty(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
}

/// The [`ModelFuture`] of a client's `complete`: the message of a complete answer, every
/// failure as a [`ModelError`] whose source is the [`ProviderError`].
pub(crate) fn respond<'a>(
    completion: impl Future<Output = Result<Completion, ProviderError>> + Send + 'a,
) -> ModelFuture<'a> {
    Box::pin(async move {
        completion
            .await
            .and_then(Completion::into_message)
            .map_err(ModelError::new)
    })
}
