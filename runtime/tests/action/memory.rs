//! A long-lived session stays small: finished scopes are forgotten, and what they held
//! goes with them. Bytes are counted per thread by this binary's allocator, so other
//! tests running in parallel do not disturb the count.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;

use tooltrust::event::{Event, RecordError, Recorder};
use tooltrust::quarantine::Exit;
use tooltrust::{Id, Message, Sender, Session, ToolCall, tool, tools};

/// Counts the bytes live on each thread (allocated there minus freed there).
struct PerThread;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
}

fn count(delta: isize) {
    // During thread teardown the counter may be gone; nothing to count then.
    let _ = LIVE.try_with(|live| live.set(live.get() + delta));
}

// SAFETY: every call is forwarded to the system allocator unchanged; the counter only
// observes sizes.
unsafe impl GlobalAlloc for PerThread {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        // SAFETY: `ptr` was allocated by `System` with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size as isize - layout.size() as isize);
        // SAFETY: the caller's contract for `realloc` is passed on as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: PerThread = PerThread;

fn live_bytes() -> isize {
    LIVE.with(Cell::get)
}

/// Keeps nothing: the host's own recorder would write events elsewhere.
struct Discard;

impl Recorder for Discard {
    fn record(&self, _event: &Event) -> Result<(), RecordError> {
        Ok(())
    }
}

/// Looks up an order.
#[tool(trusted, read_only)]
fn order_status(order: u32) -> String {
    format!("order {order} shipped")
}

/// Fetches a web page.
#[tool(untrusted, read_only)]
fn fetch_page(url: String) -> String {
    format!("{url}: a page")
}

/// One short piece of work: a scope that reads, calls, finishes and is forgotten.
fn short_scope(session: &Session, n: u32) {
    let scope = session.open_scope(Id::new("worker").unwrap()).unwrap();
    scope
        .add_message(&Message {
            id: Id::new(format!("m{n}")).unwrap(),
            sender: Sender::Principal,
            from: "ann".into(),
            created_at: None,
            content: "Where is my order?".into(),
        })
        .unwrap();
    let call = ToolCall::from_model("order_status", &format!(r#"{{"order": {n}}}"#)).unwrap();
    pollster::block_on(scope.call(call)).unwrap();
    if n.is_multiple_of(2) {
        let call = ToolCall::from_model("fetch_page", r#"{"url": "https://x.example"}"#).unwrap();
        pollster::block_on(scope.call(call)).unwrap();
    }
    scope.finish("done", Exit::Success).unwrap();
    session.forget(scope.id()).unwrap();
}

#[test]
fn a_hundred_thousand_short_scopes_keep_the_session_flat() {
    let session = Session::builder(tools![order_status, fetch_page].unwrap())
        .recorder(Arc::new(Discard))
        .build()
        .unwrap();
    // Warm up: the maps reach the size one live scope needs.
    for n in 0..1_000 {
        short_scope(&session, n);
    }
    let before = live_bytes();
    for n in 1_000..101_000 {
        short_scope(&session, n);
    }
    let grown = live_bytes() - before;
    let occupancy = session.occupancy();
    assert_eq!(
        (occupancy.scopes, occupancy.pending, occupancy.reviews),
        (0, 0, 0)
    );
    // Tainted scopes quarantine their output; it stays until reviewed (the host decides),
    // so it is the one thing that grows, and only by its small record.
    assert_eq!(occupancy.outputs, 50_500);
    let per_scope = grown as f64 / 100_000.0;
    assert!(
        per_scope < 400.0,
        "the session grew by {grown} bytes over 100,000 forgotten scopes ({per_scope:.0} per scope)"
    );
}

#[test]
fn forgetting_needs_a_finished_scope_and_then_the_scope_is_gone() {
    let session = Session::builder(tools![order_status].unwrap())
        .build()
        .unwrap();
    let scope = session.open_scope(Id::new("worker").unwrap()).unwrap();
    assert!(matches!(
        session.forget(scope.id()),
        Err(tooltrust::session::SessionError::NotFinished(_))
    ));
    scope.finish("done", Exit::Success).unwrap();
    session.forget(scope.id()).unwrap();
    assert!(matches!(
        scope.taint(),
        Err(tooltrust::session::SessionError::UnknownScope(_))
    ));
    assert_eq!(session.occupancy().scopes, 0);
}
