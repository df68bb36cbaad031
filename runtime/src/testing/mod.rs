//! Test helpers (feature `testing`): a scripted model, and the conformance checks that
//! run the reference's vectors.

pub mod conformance;
mod scripted;

pub use scripted::ScriptedModel;
