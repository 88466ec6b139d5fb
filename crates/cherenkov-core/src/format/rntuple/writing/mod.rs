//! RNTuple serialization, beside the parsers of `format/rntuple/` and parsed back equal by them:
//! frames and envelopes (`frames.rs`), the schema description (`schema.rs`), header, footer and
//! page lists (`envelopes.rs`), the anchor (`anchor.rs`), page encodings (`column.rs`), pages as
//! stored, compressed and checksummed (`page.rs`), the fields and columns a type is written as
//! (`model.rs`) and values cut into those columns (`shred.rs`). Pure: bytes out, no I/O; where things go in
//! a file is the engine's writer's business.

pub mod anchor;
pub mod column;
pub mod envelopes;
pub mod frames;
pub mod model;
pub mod page;
pub mod schema;
pub mod shred;

#[cfg(test)]
pub(crate) mod round_trip;
