//! Sealed nonce derivation against one SHA-256 of the same message bytes, in the same
//! run. The nonce of a tool result is derived from its call id and
//! checksum; an HMAC costs the message's compressions plus one outer compression (the
//! key's inner and outer states are precomputed per session), and the nonce is written
//! as hex.
//!
//! `cargo bench -p tooltrust --bench nonce`

mod harness;

use std::hint::black_box;

use harness::Goal;
use sha2::{Digest, Sha256};
use tooltrust::ToolCall;
use tooltrust::envelope::SessionKey;

fn main() {
    let key = SessionKey::from_bytes([0x5a; 32]);
    let call = match ToolCall::from_model("fetch_page", r#"{"url":"https://example.com/a"}"#) {
        Ok(call) => call,
        Err(error) => panic!("{error}"),
    };
    let (call_id, checksum) = (call.id().as_str(), call.checksum().to_hex());
    for (domain, identity) in [
        ("tool-result", vec![call_id, checksum.as_str()]),
        ("message", vec!["msg-2f6c1e0a9b8d4c3e"]),
    ] {
        // The message the HMAC authenticates, byte for byte (see `SessionKey::nonce`).
        let mut message = b"tooltrust/v1\0".to_vec();
        message.extend_from_slice(domain.as_bytes());
        message.push(0);
        for part in &identity {
            message.extend_from_slice(&(part.len() as u64).to_be_bytes());
            message.extend_from_slice(part.as_bytes());
        }
        harness::compare(
            &format!("nonce/{domain} ({} B message)", message.len()),
            "SHA-256 of the message",
            Goal::AtMost(3.0),
            || Sha256::digest(black_box(&message)),
            || key.nonce(black_box(domain), black_box(&identity)),
        );
    }
}
