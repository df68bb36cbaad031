//! The command-line tool's tests in one binary (one link of the dependency tree instead of
//! one per file), each running the built `tooltrust` binary as a user would. The AgentDojo
//! tests (`tests/agentdojo.rs`, `tests/agentdojo_agent.rs`) stay binaries of their own:
//! they drive the Python harness in `bench/agentdojo` and are run and skipped on their own
//! (`TOOLTRUST_TEST_AGENTDOJO`).

#[path = "../common/mod.rs"]
mod common;

mod audit;
mod canon;
mod checksum;
mod conform;
mod console;
mod mcp_proxy;
mod mcp_shown;
mod pending;
mod render_verify;
mod sandbox;
