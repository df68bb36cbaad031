//! Test support: tool wrappers that observe or script a tool per test, since tests run in
//! parallel and never share state (a counter, a log, a mailbox).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use tooltrust::tool::{Content, Outcome, Tool, ToolFuture, ToolInput, ToolSpec};

/// Runs `inner`, counting each run in `runs`.
pub struct Counted<T> {
    pub inner: T,
    pub runs: Arc<AtomicUsize>,
}

impl<T> Counted<T> {
    /// `inner`, and the counter of its runs.
    pub fn new(inner: T) -> (Self, Arc<AtomicUsize>) {
        let runs = Arc::new(AtomicUsize::new(0));
        (
            Counted {
                inner,
                runs: runs.clone(),
            },
            runs,
        )
    }
}

impl<T: Tool> Tool for Counted<T> {
    fn spec(&self) -> ToolSpec {
        self.inner.spec()
    }

    fn args_schema(&self) -> Value {
        self.inner.args_schema()
    }

    fn call<'a>(&'a self, input: ToolInput<'a>) -> ToolFuture<'a> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        self.inner.call(input)
    }
}

/// What ran, as `tool {canonical arguments}`, in order.
pub type Log = Arc<Mutex<Vec<String>>>;

/// Runs `inner`, logging each run in `log`.
pub struct Logged<T> {
    pub inner: T,
    pub log: Log,
}

impl<T: Tool> Tool for Logged<T> {
    fn spec(&self) -> ToolSpec {
        self.inner.spec()
    }

    fn args_schema(&self) -> Value {
        self.inner.args_schema()
    }

    fn call<'a>(&'a self, input: ToolInput<'a>) -> ToolFuture<'a> {
        let entry = format!(
            "{} {}",
            self.inner.spec().name,
            tooltrust::canonical::canonical_json(&serde_json::Value::Object(input.args().clone()))
        );
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(entry);
        self.inner.call(input)
    }
}

/// `inner`'s declaration and schema, answering with `reply(arguments)` instead of
/// running: a reading tool whose content the test chooses.
pub struct Replying<T> {
    pub inner: T,
    pub reply: Box<dyn Fn(&Value) -> String + Send + Sync>,
}

impl<T: Tool> Tool for Replying<T> {
    fn spec(&self) -> ToolSpec {
        self.inner.spec()
    }

    fn args_schema(&self) -> Value {
        self.inner.args_schema()
    }

    fn call<'a>(&'a self, input: ToolInput<'a>) -> ToolFuture<'a> {
        let text = (self.reply)(&Value::Object(input.args().clone()));
        Box::pin(async move { Ok(Outcome::Output(Content::Text(text))) })
    }
}
