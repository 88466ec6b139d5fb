//! The layout policy: when a cluster closes, and so how large the baskets are.
//!
//! ROOT's default (`TTree::SetAutoFlush(-30000000)`, `TTree::Fill`) closes the first cluster
//! once the tree's compressed baskets pass 30 MB, then keeps that cluster's number of entries.
//! Each flush writes one basket per branch, contiguous: the unit a reader fetches, and (with
//! `OptimizeBaskets`) each branch's basket is its share of the cluster. cherenkov writes every
//! cluster that way: a cluster's branches are serialized into one basket each, and the cluster
//! closes when its baskets would pass 30 MB compressed. Baskets are compressed after their
//! cluster closes (in parallel, while the next one fills), so the compressed size is estimated
//! from the compression ratio of the clusters written so far (the first cluster closes at 30 MB
//! uncompressed). A cluster holds at most a third of `memory_budget`: the cluster filling, the
//! one compressing and its compressed copy then fit in the budget, whatever the file's size.
//! `cluster_bytes` fixes the uncompressed size instead.
//!
//! RNTuples follow the same policy with ROOT's RNTuple target instead of AutoFlush's
//! (`RNTupleWriteOptions::ApproxZippedClusterSize`, 128 MiB), so within the default budget their
//! clusters are a third of it.

use super::TableOptions;

/// ROOT's AutoFlush default, in compressed bytes.
pub const AUTO_FLUSH_BYTES: u64 = 30_000_000;
/// ROOT's RNTuple cluster target, in compressed bytes (`ApproxZippedClusterSize`).
pub const RNTUPLE_CLUSTER_BYTES: u64 = 128 << 20;
/// Memory a writer holds by default (the reader's default budget too).
pub const DEFAULT_MEMORY_BUDGET: u64 = 256 << 20;
/// The smallest cluster a budget makes (below it, baskets get too small to read well).
const MIN_CLUSTER_BYTES: u64 = 1 << 20;

#[derive(Clone, Debug)]
pub struct ClusterPolicy {
    /// Compressed bytes a cluster aims at.
    target: u64,
    /// `cluster_bytes`, when given.
    fixed: Option<u64>,
    /// A third of the memory budget.
    cap: u64,
    /// Bytes of the clusters written so far, before and after compression.
    uncompressed: u64,
    compressed: u64,
}

impl ClusterPolicy {
    /// A TTree's policy (AutoFlush).
    pub fn new(options: &TableOptions) -> Self {
        Self::aiming_at(AUTO_FLUSH_BYTES, options)
    }

    /// Clusters of about `target` compressed bytes.
    pub fn aiming_at(target: u64, options: &TableOptions) -> Self {
        Self {
            target,
            fixed: options.cluster_bytes.map(|b| b.max(1)),
            cap: (options.memory_budget / 3).max(MIN_CLUSTER_BYTES),
            uncompressed: 0,
            compressed: 0,
        }
    }

    /// Uncompressed bytes at which the cluster being filled closes.
    pub fn threshold(&self) -> u64 {
        let target = self.fixed.unwrap_or_else(|| {
            if self.compressed == 0 {
                self.target
            } else {
                (self.target as f64 * self.uncompressed as f64 / self.compressed as f64) as u64
            }
        });
        target.min(self.cap)
    }

    /// A cluster was written: `uncompressed` bytes stored in `compressed`.
    pub fn observe(&mut self, uncompressed: u64, compressed: u64) {
        self.uncompressed += uncompressed;
        self.compressed += compressed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::writing::compression::Compression;

    fn options(cluster_bytes: Option<u64>, memory_budget: u64) -> TableOptions {
        TableOptions {
            title: String::new(),
            compression: Compression::NONE,
            cluster_bytes,
            memory_budget,
        }
    }

    #[test]
    fn clusters_aim_at_30_mb_compressed_once_the_ratio_is_known() {
        let mut p = ClusterPolicy::new(&options(None, 1 << 30));
        assert_eq!(p.threshold(), AUTO_FLUSH_BYTES);
        p.observe(30_000_000, 12_000_000); // compresses 2.5x
        assert_eq!(p.threshold(), 75_000_000);
    }

    #[test]
    fn the_budget_caps_clusters_and_cluster_bytes_fixes_them() {
        let mut p = ClusterPolicy::new(&options(None, 90_000_000));
        p.observe(10, 1);
        assert_eq!(p.threshold(), 30_000_000);
        let p = ClusterPolicy::new(&options(Some(5_000), 1 << 30));
        assert_eq!(p.threshold(), 5_000);
    }
}
