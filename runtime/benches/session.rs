//! What a session holds per scope: bytes per live scope against the bytes of the content
//! it holds (the rendered envelopes and the blocks' text), and what is left once finished
//! scopes are forgotten. Bytes are counted by this binary's allocator.

mod harness;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};

use harness::{Goal, Row, Side, note};
use tooltrust::event::{Event, RecordError, Recorder};
use tooltrust::quarantine::Exit;
use tooltrust::{Id, Message, Scope, Sender, Session, ToolCall, tool, tools};

/// Counts live bytes (the bench is single-threaded).
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; the counter only
// observes sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: `ptr` was allocated by `System` with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: the caller's contract for `realloc` is passed on as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

struct Discard;

impl Recorder for Discard {
    fn record(&self, _event: &Event) -> Result<(), RecordError> {
        Ok(())
    }
}

/// Looks up an order.
#[tool(trusted, read_only)]
fn order_status(order: u32) -> String {
    format!("Order {order} shipped on Monday and arrives on Thursday by courier.")
}

const SCOPES: u32 = 10_000;

/// A typical short scope: the principal's message and one tool result.
fn short_scope(session: &Session, n: u32) -> Scope {
    let scope = session
        .open_scope(Id::new("worker").expect("an id"))
        .expect("open");
    scope
        .add_message(&Message {
            id: Id::new(format!("m{n}")).expect("an id"),
            sender: Sender::Principal,
            from: "ann@example.com".into(),
            created_at: None,
            content: "Where is my order? It should have arrived by now.".into(),
        })
        .expect("message");
    let call = ToolCall::from_model("order_status", &format!(r#"{{"order": {n}}}"#)).expect("call");
    pollster::block_on(scope.call(call)).expect("call");
    scope
}

fn main() {
    if !harness::selected("session/bytes per live scope") {
        return;
    }
    let rounds = harness::rounds(5);
    let (mut subject, mut baseline, mut left) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let session = Session::builder(tools![order_status].expect("tools"))
            .recorder(Arc::new(Discard))
            .build()
            .expect("session");
        let before = live();
        let scopes: Vec<Scope> = (0..SCOPES).map(|n| short_scope(&session, n)).collect();
        let held = live() - before;
        // The content itself: each block's text and its rendered envelope.
        let content: usize = scopes
            .iter()
            .map(|scope| {
                let blocks = scope.blocks().expect("blocks");
                let rendered = scope.rendered_blocks().expect("rendered");
                blocks.iter().map(|b| b.text().len()).sum::<usize>()
                    + rendered.iter().map(String::len).sum::<usize>()
            })
            .sum();
        subject.push(held as f64 / f64::from(SCOPES));
        baseline.push(content as f64 / f64::from(SCOPES));
        for scope in &scopes {
            scope.finish("done", Exit::Success).expect("finish");
            session.forget(scope.id()).expect("forget");
        }
        drop(scopes);
        left.push((live() - before) as f64 / f64::from(SCOPES));
    }
    let row = |values: &[f64]| Side {
        median: median(values),
        best: values.iter().copied().fold(f64::INFINITY, f64::min),
        p99: None,
    };
    Row {
        name: format!("session/bytes per live scope ({SCOPES} scopes: a message, a tool result)"),
        baseline_name: "bytes of the content they hold (block text + envelopes)".to_owned(),
        unit: "B/scope",
        subject: row(&subject),
        baseline: row(&baseline),
        ratio: median(&subject) / median(&baseline),
        ratio_of_bests: row(&subject).best / row(&baseline).best,
        goal: Goal::None,
    }
    .print();
    note(&format!(
        "session: after finishing and forgetting them, {:.1} B per scope remain (median of {rounds} rounds)",
        median(&left)
    ));
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}
