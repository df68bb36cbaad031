//! Envelopes and the neutraliser: compat vectors, sealed rendering and verification, and
//! the injection corpus against both.

mod common;
mod compat;
mod corpus;
mod neutralise_corpus;
mod neutralise_properties;
mod sealed;
