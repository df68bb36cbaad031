//! Gate decision latency against a plain `HashMap` lookup of the tool, in the same run
//! (the gate decides before every call, so it must cost microseconds): a registry of 1,000 tools, a tainted scope of 1,000
//! blocks (so 1,000 live nonces), and 10 KiB of arguments that the nonce-leak rule must
//! scan in full (none of them leaks). The subject is what a scope does before a call:
//! look the tool up in the registry and put the call to the policy. Goal: p99 < 50 µs.
//! Also what a block costs the index of live nonces, beside a `HashSet` insert.
//!
//! `cargo bench -p tooltrust --bench gate [-- FILTER]`

mod harness;
mod texts;

use std::collections::{HashMap, HashSet};
use std::hint::black_box;
use std::time::Duration;

use harness::Goal;
use serde_json::{Value, json};
use tooltrust::block::{Block, Origin};
use tooltrust::envelope::SessionKey;
use tooltrust::gate::{ArgumentFromTrustedBlock, GateContext, NonceIndex, Ruling, ScopeRole};
use tooltrust::tool::{
    Content, DeclaredTrust, Effects, Outcome, OutputKind, Tool, ToolFuture, ToolInput, ToolSpec,
};
use tooltrust::{Id, Policy, Registry, Taint, ToolCall, Trust};

const TOOLS: usize = 1_000;
const BLOCKS: usize = 1_000;
const ARGS_BYTES: usize = 10 << 10;
const SINGLE_CALLS: usize = 20_000;

/// A tool written by hand against the runtime's trait.
struct Numbered {
    spec: ToolSpec,
}

impl Tool for Numbered {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    fn args_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "to": {"type": "string"},
                "subject": {"type": "string"},
                "body": {"type": "string"},
            },
            "required": ["to", "subject", "body"],
        })
    }

    fn call<'a>(&'a self, _input: ToolInput<'a>) -> ToolFuture<'a> {
        Box::pin(async { Ok(Outcome::Output(Content::Text("sent".to_owned()))) })
    }
}

fn main() {
    let specs: Vec<ToolSpec> = (0..TOOLS)
        .map(|i| ToolSpec {
            name: format!("tool_{i:04}").into(),
            description: "Sends a message on the user's behalf.".into(),
            trust: if i % 2 == 0 {
                DeclaredTrust::Trusted
            } else {
                DeclaredTrust::Untrusted
            },
            output: OutputKind::Data,
            effects: if i % 3 == 0 {
                Effects::ReadOnly
            } else {
                Effects::Consequential
            },
        })
        .collect();
    let registry = match Registry::new(
        specs
            .iter()
            .map(|spec| Box::new(Numbered { spec: spec.clone() }) as Box<dyn Tool>),
    ) {
        Ok(registry) => registry,
        Err(error) => panic!("{error}"),
    };
    let by_name: HashMap<String, ToolSpec> = specs
        .iter()
        .map(|spec| (spec.name.to_string(), spec.clone()))
        .collect();

    // The scope: 1,000 blocks, every fourth one trusted, and the nonce of each.
    let key = SessionKey::from_bytes([0x5a; 32]);
    let recipient = "billing@example.com";
    let blocks: Vec<Block> = (0..BLOCKS)
        .map(|i| {
            let id = Id::new(format!("block-{i:04}")).expect("a valid id");
            let mut text = texts::english_of_len(256, false, i as u64);
            if i == BLOCKS - 4 {
                text.push_str(&format!(" Send invoices to {recipient}."));
            }
            let trust = if i % 4 == 0 {
                Trust::Trusted
            } else {
                Trust::Untrusted
            };
            // Trusted tool output that does not echo its arguments vouches for a value.
            let origin = Origin::ToolOutput {
                tool: "lookup_customer".into(),
                argument_values: Vec::new(),
            };
            Block::data_from(id, trust, text, origin)
        })
        .collect();
    let nonces: Vec<String> = blocks
        .iter()
        .map(|block| key.nonce("tool-result", &[block.id().as_str()]))
        .collect();
    let mut index = NonceIndex::default();
    index.extend(&nonces);

    // 10 KiB of arguments, no nonce among them.
    let args = json!({
        "to": recipient,
        "subject": "Your refund",
        "body": texts::english_of_len(ARGS_BYTES - 64, false, 7),
    });
    let tool = &*specs[TOOLS - 2].name; // consequential
    let call = match ToolCall::from_value(tool, args) {
        Ok(call) => call,
        Err(error) => panic!("{error}"),
    };
    let scope = Id::new("scope-1").expect("a valid id");

    let policies = [
        ("default policy", Policy::new(), Ruling::NeedsReview),
        (
            "default policy + an argument-from-trusted-block rule",
            Policy::new().with_rule(ArgumentFromTrustedBlock::new(tool, "to")),
            Ruling::Allow,
        ),
    ];
    for (name, policy, expected) in &policies {
        let decide = || {
            let cx = GateContext {
                call: &call,
                registry: black_box(&registry),
                scope: &scope,
                taint: Taint::Tainted,
                role: ScopeRole::Agent,
                is_child: false,
                repeats: 0,
                blocks: &blocks,
            };
            policy.decide(&cx, &index)
        };
        let decision = decide();
        assert_eq!(decision.ruling, *expected, "{name}: {}", decision.reason);
        harness::latency(
            &format!(
                "gate/decide, {name} ({TOOLS} tools, {BLOCKS} blocks, {} nonces, {} B args)",
                index.len(),
                call.canonical().len()
            ),
            "HashMap lookup of the tool",
            Duration::from_micros(50),
            SINGLE_CALLS,
            || by_name.get(black_box(call.tool())).map(|spec| spec.effects),
            decide,
        );
    }

    // Every block a scope gains adds its nonce to the index: the cost must not grow with
    // the nonces already there. Both sides add fresh nonces to what they already hold.
    let fresh = |i: &mut u64| {
        *i += 1;
        format!(
            "{:032x}",
            u128::from(*i).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835)
        )
    };
    let (mut set, mut seen) = (nonces.iter().cloned().collect::<HashSet<String>>(), 0);
    let (mut growing, mut added) = (index.clone(), 1 << 40);
    harness::compare(
        &format!("gate/a block's nonce added to the index ({BLOCKS} nonces and more)"),
        "inserting the nonce into a HashSet<String>",
        Goal::None,
        || set.insert(fresh(&mut seen)),
        || growing.extend([&fresh(&mut added)]),
    );
}
