//! RNTuple, ROOT's columnar format (specification: root-project/root
//! `tree/ntuple/doc/BinaryFormatSpecification.md`, format 1.0.x.x). The anchor is a classic
//! big-endian key object; everything it points to is little-endian. Reading goes anchor ->
//! header and footer (`Descriptor`) -> page lists of the cluster groups needed -> pages of the
//! columns selected (`clusters.rs`), decoded (`column.rs`) and assembled into arrays
//! (`fields.rs`, `assemble.rs`).

pub mod anchor;
pub mod assemble;
pub mod blob;
pub mod clusters;
pub mod column;
pub mod descriptor;
pub mod envelope;
pub mod fields;
pub mod footer;
pub mod header;
pub mod page;
pub mod page_list;
pub mod schema;
pub mod writing;
