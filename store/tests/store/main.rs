//! The store's tests in one binary (one link of the dependency tree instead of one per
//! file): the contract on SQLite and on PostgreSQL, each engine's own faults, and the
//! `injection_defense` example run as a person would. `tests/processes.rs` stays a binary
//! of its own: it runs copies of itself as child processes (`--child`), with a `main` of
//! its own (`harness = false`).

#[path = "../common/mod.rs"]
mod common;

mod example;
mod postgres;
mod resume;
mod sqlite;
mod upgrade;
