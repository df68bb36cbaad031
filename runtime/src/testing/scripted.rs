//! A model that follows a script, for tests and examples.

use std::sync::{Mutex, PoisonError};

use crate::agent::{AssistantMessage, Model, ModelError, ModelFuture, ModelRequest, ModelToolCall};

type Step = Box<dyn Fn(&ModelRequest) -> AssistantMessage + Send + Sync>;

/// A model that follows a script: step `n` answers the `n`th request. Each step sees the
/// request, so a script can act on what the context holds (as a fooled model would).
#[derive(Default)]
pub struct ScriptedModel {
    steps: Vec<Step>,
    next: Mutex<usize>,
}

impl ScriptedModel {
    /// An empty script.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a step that answers from the request.
    pub fn step(
        mut self,
        step: impl Fn(&ModelRequest) -> AssistantMessage + Send + Sync + 'static,
    ) -> Self {
        self.steps.push(Box::new(step));
        self
    }

    /// Adds a step that asks for one call.
    pub fn call(self, name: &str, arguments: &str) -> Self {
        let call = ModelToolCall {
            id: format!("call_{}", self.steps.len()),
            name: name.to_owned(),
            arguments: arguments.to_owned(),
        };
        self.step(move |_| AssistantMessage {
            content: None,
            tool_calls: vec![call.clone()],
        })
    }

    /// Adds a step that answers with text.
    pub fn answer(self, text: &str) -> Self {
        let text = text.to_owned();
        self.step(move |_| AssistantMessage {
            content: Some(text.clone()),
            tool_calls: Vec::new(),
        })
    }
}

impl Model for ScriptedModel {
    fn respond<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a> {
        let index = {
            let mut next = self.next.lock().unwrap_or_else(PoisonError::into_inner);
            let index = *next;
            *next += 1;
            index
        };
        let answer = match self.steps.get(index) {
            Some(step) => Ok(step(request)),
            None => Err(ModelError::msg(format!("the script has no step {index}"))),
        };
        Box::pin(async move { answer })
    }
}
