//! Provider wire formats kept in the core: the registry as MCP's `tools/list`. The
//! OpenAI-compatible and Anthropic formats and their HTTP clients are in the
//! `tooltrust-providers` crate.

#[cfg(feature = "mcp")]
pub mod mcp;
