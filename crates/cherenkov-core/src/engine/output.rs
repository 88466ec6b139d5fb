//! What reads hand out: each branch's arrays, and what the read cost.

use crate::format::array::Array;
use crate::format::interpretation::Interpretation;
use std::time::Duration;

/// The array of one branch over the entries read.
#[derive(Clone, Debug, PartialEq)]
pub struct BranchArray {
    pub branch: String,
    pub interpretation: Interpretation,
    pub entries: u64,
    pub array: Array,
}

/// What a read cost.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ReadStats {
    pub baskets: u64,
    pub compressed_bytes: u64,
    pub uncompressed_bytes: u64,
    pub fetch_time: Duration,
    /// Wall time of decompression and assembly.
    pub decode_time: Duration,
    /// Decompression time summed over threads.
    pub decompress_cpu: Duration,
}
