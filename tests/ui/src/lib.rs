//! Compile-time checks of tooltrust's `#[tool]` DSL, in `tests/ui.rs`: every misuse is an
//! error with a span on the offending token and a remedy (the `.stderr` files beside the
//! cases are the messages users read), and every supported form compiles.
//!
//! A crate of its own so that trybuild, which builds each case with the crate's
//! dev-dependencies from scratch, builds only what the cases need.
