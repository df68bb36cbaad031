//! The console's tests in one binary (one link of the dependency tree instead of one per
//! file): who may use it, every route over real HTTP, and the browser tests in a real
//! headless Chromium.

#[path = "../common/mod.rs"]
mod common;

mod access;
mod browser;
mod confusables;
mod http;
