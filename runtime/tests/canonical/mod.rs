//! Canonical JSON and call checksums: the reference's vectors and property tests.

mod properties;
mod reference;
mod vectors;
