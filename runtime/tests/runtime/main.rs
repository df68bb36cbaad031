//! The runtime's integration tests in one binary (one link of the dependency tree instead
//! of one per area); each area keeps its directory. Binaries of their own, apart from this
//! one:
//!
//! - `tests/audit_faults/`: its tests start child processes, and a child holds the
//!   parent's open files (and so an audit log's lock) between fork and exec, which would
//!   disturb the tests here that reopen a log;
//! - `tests/tracing.rs`: it installs a subscriber, and tracing caches each callsite's
//!   interest process-wide, so a test here meeting the same callsites on another thread
//!   could leave them disabled for it.
//!
//! The DSL's compile-time checks (trybuild) are in the workspace's `tests/ui` crate.

#[path = "../action/mod.rs"]
mod action;
#[path = "../audit/mod.rs"]
mod audit;
#[path = "../canonical/mod.rs"]
mod canonical;
#[path = "../envelope/mod.rs"]
mod envelope;
#[path = "../providers/mod.rs"]
mod providers;
