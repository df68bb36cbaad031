//! The providers' clients and wire formats in one test binary (one link of the dependency
//! tree instead of one per file): the wire formats against the documented shapes, and the
//! clients against a real HTTP server on the loopback interface. `tests/telemetry.rs`
//! stays a binary of its own: it runs requests under a subscriber of its own, and tracing
//! caches each callsite's interest process-wide, so a test here meeting the same callsites
//! on another thread could leave them disabled for it.

#[path = "../common/mod.rs"]
mod common;

mod agent_loop;
mod anthropic;
mod hostile_endpoint;
mod openai;
mod wire;
