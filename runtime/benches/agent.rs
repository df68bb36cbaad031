//! Building a model request from a scope's context of 50, 200 and 800 blocks (about 1 KB
//! each) against rendering those blocks once: the request must stay a small multiple of
//! one rendering as the conversation grows (no re-rendering, nothing quadratic).

mod harness;

use std::hint::black_box;

use harness::{Goal, compare, note};
use tooltrust::{Agent, Id, Instruction, Session, Trust, tool, tools};

/// Does nothing; the request carries its declaration.
#[tool(trusted, read_only)]
fn lookup(order: u64) -> String {
    format!("order {order}")
}

/// About 1 KB of plain English.
fn page(n: usize) -> String {
    let sentence = "The kettle boils a litre of water in ninety seconds and stays quiet. ";
    format!("Review {n}: {}", sentence.repeat(14))
}

fn main() {
    for blocks in [50, 200, 800] {
        let name = format!("agent/request from a context of {blocks} blocks");
        if !harness::selected(&name) {
            continue;
        }
        let session = Session::builder(tools![lookup].expect("tools"))
            .build()
            .expect("session");
        let scope = session
            .open_scope(Id::new("agent").expect("id"))
            .expect("scope");
        let texts: Vec<String> = (0..blocks).map(page).collect();
        for text in &texts {
            scope.add_untrusted("page", text.clone()).expect("block");
        }
        let agent = Agent::new(scope, vec![Instruction::new("Answer from the reviews.")]);
        let ids: Vec<Id> = (0..blocks)
            .map(|n| Id::new(format!("b{n}")).expect("id"))
            .collect();
        let renderer = session.renderer();
        let row = compare(
            &name,
            &format!("rendering the {blocks} blocks once"),
            if blocks == 200 {
                Goal::AtMost(1.5)
            } else {
                Goal::None
            },
            || {
                for (id, text) in ids.iter().zip(&texts) {
                    black_box(
                        renderer
                            .data(Trust::Untrusted, "page", id, text)
                            .expect("render"),
                    );
                }
            },
            || black_box(agent.request().expect("request")),
        );
        if let Some(row) = row {
            note(&format!(
                "agent: {blocks} blocks: {:.0} ns per block for the request, {:.0} ns per block rendered",
                row.subject.median / blocks as f64,
                row.baseline.median / blocks as f64
            ));
        }
    }
}
