//! What reads hand out: each branch's or field's array, and what the read cost.

use crate::format::array::Array;
use crate::format::interpretation::Interpretation;

/// The array of one branch over the entries read.
#[derive(Clone, Debug, PartialEq)]
pub struct BranchArray {
    pub branch: String,
    pub interpretation: Interpretation,
    pub entries: u64,
    pub array: Array,
}

/// The array of one RNTuple field (with the collections that enclose it) over the entries read.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldArray {
    /// The field's path ("jets.pt").
    pub field: String,
    pub entries: u64,
    pub array: Array,
}

/// What a read cost.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(module = "cherenkov._core", get_all, frozen)
)]
pub struct ReadStats {
    pub baskets: u64,
    pub compressed_bytes: u64,
    pub uncompressed_bytes: u64,
    pub fetch_seconds: f64,
    /// Wall time of decompression and assembly.
    pub decode_seconds: f64,
    /// Decompression time summed over threads.
    pub decompress_cpu_seconds: f64,
}
