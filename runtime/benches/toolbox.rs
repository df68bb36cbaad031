//! Dispatch through a `#[toolbox]` method against dispatch through a free `#[tool]`
//! function doing the same work (issue 13): the same checksummed call, run through
//! `Tool::call` on a boxed tool as the registry runs it (arguments parsed from the
//! hashed text, contexts looked up, the body run, its value converted to content).
//! Goal: the method costs at most 1.1× the function.
//!
//! `cargo bench -p tooltrust --bench toolbox [-- FILTER]`

mod harness;

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll, Waker};

use harness::Goal;
use tooltrust::tool::{Contexts, Outcome, Tool, ToolInput, Toolbox};
use tooltrust::{Context, ToolCall, tool, toolbox};

/// Who the scope works for.
struct Caller {
    name: String,
}

/// The work both tools do, so that only the dispatch differs.
fn status(order: u64, region: &str, express: Option<bool>, caller: Option<&str>) -> String {
    let speed = if express == Some(true) {
        "express"
    } else {
        "standard"
    };
    match caller {
        Some(caller) => format!("order {order} of {caller} ships {speed} to {region}"),
        None => format!("order {order} ships {speed} to {region}"),
    }
}

/// Looks up an order.
#[tool(trusted, read_only)]
fn order_status(order: u64, region: String, express: Option<bool>) -> String {
    status(order, &region, express, None)
}

/// Looks up one of the caller's orders.
#[tool(trusted, read_only)]
fn caller_order_status(
    order: u64,
    region: String,
    express: Option<bool>,
    caller: Context<Caller>,
) -> String {
    status(order, &region, express, Some(&caller.name))
}

/// The same tools as methods of a toolbox with state.
struct Desk {
    lookups: std::sync::atomic::AtomicU64,
}

#[toolbox]
impl Desk {
    /// Looks up an order.
    #[tool(trusted, read_only)]
    fn order_status(&self, order: u64, region: String, express: Option<bool>) -> String {
        self.lookups
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        status(order, &region, express, None)
    }

    /// Looks up one of the caller's orders.
    #[tool(trusted, read_only)]
    fn caller_order_status(
        &self,
        order: u64,
        region: String,
        express: Option<bool>,
        caller: Context<Caller>,
    ) -> String {
        self.lookups
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        status(order, &region, express, Some(&caller.name))
    }
}

/// Polls a future that never waits (every tool here is ready at once).
fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = TaskContext::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
    }
}

fn dispatch(tool: &dyn Tool, call: &ToolCall, contexts: &Contexts) -> Outcome {
    match block_on(black_box(tool).call(ToolInput::new(call, contexts))) {
        Ok(outcome) => outcome,
        Err(error) => panic!("{error}"),
    }
}

fn main() {
    let desk = Arc::new(Desk {
        lookups: std::sync::atomic::AtomicU64::new(0),
    });
    let methods = desk.clone().tools();
    let method = |name: &str| {
        methods
            .iter()
            .find(|tool| tool.spec().name == name)
            .unwrap_or_else(|| panic!("the toolbox has {name}"))
    };
    let mut contexts = Contexts::new();
    contexts.insert(Caller {
        name: "ann@example.com".into(),
    });
    let args = r#"{"order": 4411, "region": "Lower Saxony", "express": true}"#;

    // Both sides are called through `&dyn Tool`, as the registry calls them.
    let free_order_status: &dyn Tool = &OrderStatus;
    let free_caller_order_status: &dyn Tool = &CallerOrderStatus;
    let cases = [
        (
            "order_status",
            free_order_status,
            method("order_status").as_ref(),
        ),
        (
            "caller_order_status",
            free_caller_order_status,
            method("caller_order_status").as_ref(),
        ),
    ];
    for (name, free, method) in cases {
        let call = match ToolCall::from_model(name, args) {
            Ok(call) => call,
            Err(error) => panic!("{error}"),
        };
        // Both run, and agree, before either is timed.
        let expected = dispatch(free, &call, &contexts);
        assert_eq!(dispatch(method, &call, &contexts), expected);
        assert!(matches!(expected, Outcome::Output(_)), "{expected:?}");
        let with = if name.starts_with("caller") {
            "3 arguments and a context"
        } else {
            "3 arguments"
        };
        harness::compare(
            &format!("toolbox/dispatch, #[toolbox] method ({with})"),
            "the same #[tool] free function",
            Goal::AtMost(1.1),
            || dispatch(free, &call, &contexts),
            || dispatch(method, &call, &contexts),
        );
    }
}
