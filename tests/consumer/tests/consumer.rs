//! Runs the consumer crate's tools through a registry, with a std-only executor.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use tooltrust::tool::Content;
use tooltrust::{CallOutcome, Id, Session, ToolCall, Trust, tools};
use tooltrust_consumer_test::{add, greet};

/// Polls a future that never waits on I/O to completion.
fn run<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
    }
}

#[test]
fn tools_compile_and_run_with_only_tooltrust_as_a_dependency() {
    let registry = tools![add, greet].expect("unique, valid names");
    let session = Session::builder(registry).build().expect("session");
    let scope = session
        .open_scope(Id::new("agent").expect("id"))
        .expect("scope");
    let call_tool = |call| match run(scope.call(call)).expect("recorded") {
        CallOutcome::Ran { output, .. } => output,
        other => panic!("expected the call to run: {other:?}"),
    };

    let call = ToolCall::from_model("add", r#"{"a": 2, "b": 40}"#).expect("valid call");
    let output = call_tool(call);
    assert_eq!(output.content, Content::Json(42.into()));
    assert_eq!(output.trust, Trust::Trusted);

    let call = ToolCall::from_model("greet", r#"{"name": "Ann"}"#).expect("valid call");
    let output = call_tool(call);
    assert_eq!(output.content, Content::Text("Hello, Ann".into()));
    assert_eq!(output.trust, Trust::Untrusted);
}
