//! What reads hand out: each branch's arrays, and what the read cost.

use crate::format::array::AlignedBytes;
use crate::format::interpretation::{DType, Interpretation};
use std::time::Duration;

/// One column of output. `content` holds native-endian items (or string bytes); `offsets` has
/// `entries + 1` item (or byte, for strings) boundaries for variable-length data.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    pub name: String,
    pub dtype: DType,
    pub inner_shape: Vec<usize>,
    pub content: AlignedBytes,
    pub offsets: Option<Vec<i64>>,
    pub is_string: bool,
}

/// The arrays of one branch: one column, or one per field for leaf lists.
#[derive(Clone, Debug, PartialEq)]
pub struct BranchArray {
    pub branch: String,
    pub interpretation: Interpretation,
    pub entries: u64,
    pub columns: Vec<Column>,
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
