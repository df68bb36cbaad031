//! tooltrust-rig's tests in one binary (one link of the dependency tree instead of one per
//! file): offline with rig's scripted model, the `rig_agent` example's real-model run
//! against a local Chat Completions server, and rig's context documents guarded.

#[path = "../../examples/rig_agent/scenario.rs"]
mod scenario;

mod agents;
mod context;
mod openai;
