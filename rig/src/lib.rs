//! tooltrust and [rig](https://github.com/0xPlaygrounds/rig), both ways.
//!
//! - [`GuardedTools`]: the tools of a tooltrust [`Scope`](tooltrust::Scope)'s registry as
//!   rig run-time tools ([`rig_core::tool::DynamicTool`]). Every call rig's agent makes is
//!   checksummed, gated, run, rendered and recorded by the scope, exactly as in
//!   tooltrust's own loop; rig hands its model the enveloped block, never the raw output.
//!   [`GuardedTools::agent`] also guards what rig's agent sends its model: each context
//!   document (static or retrieved) reaches it only as an untrusted block of the scope,
//!   which it taints, and the system text starts with tooltrust's standing explanation.
//! - [`RigModel`]: any rig completion model ([`rig_core::DynModel`] of
//!   [`Completion`](rig_core::operation::Completion)) as a [`tooltrust::Model`], so
//!   tooltrust's [`Agent`](tooltrust::Agent) reaches every provider rig reaches.
//!
//! Trust, output kind and effects always come from the tooltrust declarations; rig's tool
//! definitions carry only a name, a description and a schema.
//!
//! Pinned to the rig-core 0.44 line (and rig-agent 0.44, where rig's agent lives since
//! 0.42): the trait impls and constructors here fail to compile when that API drifts.
#![deny(missing_docs)]

mod context;
mod model;
mod tools;

pub use context::{CONTEXT_LAYER, ContextError};
pub use model::{RigModel, arguments_text};
pub use tools::{GuardError, GuardedTools, HeldCall};
