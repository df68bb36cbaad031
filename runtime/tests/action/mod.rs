//! The action layer, end to end through the public API: sessions, scopes and taint, the
//! gate, review and quarantine, the registry, and the agent loop.

mod agent;
mod arguments;
mod budget;
mod laundering;
mod layer;
mod memory;
mod registry;
mod scenarios;
mod support;
mod toolbox;
