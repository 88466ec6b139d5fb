//! The page list envelope of a cluster group (spec: "Page List Envelope"): per cluster, its entry
//! range, and per column the pages (element count, locator, whether a checksum follows), the
//! column's first element in the cluster and its compression, or that the column is suppressed
//! (a secondary representation, inactive in this cluster).

use super::envelope::{
    check_header_checksum, list_frame, locator, open_envelope, record_frame, EnvelopeKind, Locator,
};
use crate::error::Result;

/// Cluster summary flag reserved for sharded clusters, which readers must refuse.
const SHARDED: u64 = 0x01;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClusterSummary {
    pub first_entry: u64,
    pub entries: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PageInfo {
    pub elements: u32,
    pub locator: Locator,
    /// An XXH3-64 of the stored bytes follows the page (not counted in the locator's size).
    pub checksum: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ColumnPages {
    Stored {
        pages: Vec<PageInfo>,
        /// The index, within the column, of its first element in this cluster.
        first_element: u64,
        /// ROOT's compression settings (algorithm * 100 + level).
        compression: u32,
    },
    Suppressed,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageList {
    pub clusters: Vec<ClusterSummary>,
    /// Per cluster, per physical column. A cluster written before the schema was extended lists
    /// only the columns that existed then.
    pub columns: Vec<Vec<ColumnPages>>,
}

impl PageList {
    /// Parse the uncompressed page list envelope of the RNTuple whose header has `header_checksum`.
    pub fn parse(data: &[u8], header_checksum: u64, origin: &str) -> Result<PageList> {
        let (mut c, _) = open_envelope(data, EnvelopeKind::PageList, origin)?;
        check_header_checksum(&mut c, header_checksum)?;
        let (n, mut items) = list_frame(&mut c, "the list of cluster summaries", 24)?;
        let mut clusters = Vec::with_capacity(n);
        for _ in 0..n {
            let mut s = record_frame(&mut items, "a cluster summary")?;
            let first_entry = s.u64_le("the cluster's first entry")?;
            let at = s.pos();
            let entries_and_flags = s.u64_le("the cluster's number of entries")?;
            if (entries_and_flags >> 56) & SHARDED != 0 {
                return Err(s.error_at(at, "an unsharded cluster (sharded clusters are a feature this reader does not know)"));
            }
            clusters.push(ClusterSummary {
                first_entry,
                entries: entries_and_flags & ((1 << 56) - 1),
            });
        }
        let at = c.pos();
        let (n, mut cluster_items) = list_frame(&mut c, "the page locations", 12)?;
        if n != clusters.len() {
            return Err(c.error_at(
                at,
                format!(
                    "page locations for the {} cluster summaries, found {n} clusters",
                    clusters.len()
                ),
            ));
        }
        let mut columns = Vec::with_capacity(n);
        for _ in 0..n {
            // An inner list frame holds at least its header and the element offset.
            let (n, mut column_items) = list_frame(&mut cluster_items, "a cluster's columns", 20)?;
            let mut cluster = Vec::with_capacity(n);
            for _ in 0..n {
                // A page description holds at least its element count and a standard locator.
                let (n, mut c) = list_frame(&mut column_items, "a column's pages", 16)?;
                let mut pages = Vec::with_capacity(n);
                for _ in 0..n {
                    let elements = c.i32_le("a page's number of elements")?;
                    pages.push(PageInfo {
                        elements: elements.unsigned_abs(),
                        checksum: elements < 0,
                        locator: locator(&mut c, "a page locator")?,
                    });
                }
                let at = c.pos();
                let first_element = c.i64_le("the column's element offset")?;
                if first_element < 0 {
                    if !pages.is_empty() {
                        return Err(c.error_at(at, "no pages for a suppressed column"));
                    }
                    cluster.push(ColumnPages::Suppressed);
                } else {
                    cluster.push(ColumnPages::Stored {
                        pages,
                        first_element: first_element as u64,
                        compression: c.u32_le("the column's compression settings")?,
                    });
                }
            }
            columns.push(cluster);
        }
        Ok(PageList { clusters, columns })
    }
}
