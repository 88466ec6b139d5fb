//! The members of TTree and TBranch that a reader needs, read as their class versions lay them
//! out: the tree's counters and cluster settings, and the pointer arrays of basket sizes, entries
//! and seeks (32-bit seeks before TBranch version 10).

use super::cursor::Cursor;
use super::objects::skip_object;
use crate::error::Result;

/// The TTree members before its branches that a reader needs.
pub(super) struct TreeCounts {
    pub(super) entries: i64,
    pub(super) tot_bytes: i64,
    pub(super) zip_bytes: i64,
    pub(super) auto_flush: i64,
    pub(super) cluster_ranges: Vec<(i64, i64)>,
}

/// TTree version 5 (ROOT 3.02 to 4.00, and Geant4's g4tools writer), read by its streamer info:
/// counters as doubles and ints, no weight, flush or cluster members.
pub(super) fn read_tree_v5_counts(cur: &mut Cursor) -> Result<TreeCounts> {
    let entries = cur.f64("TTree fEntries")?;
    let tot_bytes = cur.f64("TTree fTotBytes")?;
    let zip_bytes = cur.f64("TTree fZipBytes")?;
    cur.f64("TTree fSavedBytes")?;
    for what in [
        "TTree fTimerInterval",
        "TTree fScanField",
        "TTree fUpdate",
        "TTree fMaxEntryLoop",
        "TTree fMaxVirtualSize",
        "TTree fAutoSave",
        "TTree fEstimate",
    ] {
        cur.i32(what)?;
    }
    if !(0.0..=MAX_F64_COUNT).contains(&entries) {
        return Err(cur.error(format!("a TTree fEntries count, found {entries}")));
    }
    Ok(TreeCounts {
        entries: entries as i64,
        tot_bytes: tot_bytes as i64,
        zip_bytes: zip_bytes as i64,
        auto_flush: 0,
        cluster_ranges: Vec::new(),
    })
}

/// Counts stored as doubles by old class versions are exact integers up to 2^53.
pub(super) const MAX_F64_COUNT: f64 = 9_007_199_254_740_992.0;

/// TTree versions 16 (ROOT 5.22) to 20.
pub(super) fn read_tree_counts(cur: &mut Cursor, version: i16) -> Result<TreeCounts> {
    let entries = cur.i64("TTree fEntries")?;
    let tot_bytes = cur.i64("TTree fTotBytes")?;
    let zip_bytes = cur.i64("TTree fZipBytes")?;
    let _saved = cur.i64("TTree fSavedBytes")?;
    if version >= 18 {
        cur.i64("TTree fFlushedBytes")?;
    }
    cur.f64("TTree fWeight")?;
    for what in ["TTree fTimerInterval", "TTree fScanField", "TTree fUpdate"] {
        cur.i32(what)?;
    }
    if version >= 17 {
        cur.i32("TTree fDefaultEntryOffsetLen")?;
    }
    let pos = cur.pos();
    let n_ranges = if version >= 19 {
        cur.i32("TTree fNClusterRange")?
    } else {
        0
    };
    for what in [
        "TTree fMaxEntries",
        "TTree fMaxEntryLoop",
        "TTree fMaxVirtualSize",
        "TTree fAutoSave",
    ] {
        cur.i64(what)?;
    }
    let auto_flush = if version >= 18 {
        cur.i64("TTree fAutoFlush")?
    } else {
        0
    };
    cur.i64("TTree fEstimate")?;
    let n_ranges = cur.check_count(pos, n_ranges as i64, "TTree fNClusterRange", 16)?;
    let mut cluster_ranges = Vec::new();
    if version >= 19 {
        let ends = read_pointer_array_i64(cur, n_ranges, "TTree fClusterRangeEnd")?;
        let sizes = read_pointer_array_i64(cur, n_ranges, "TTree fClusterSize")?;
        cluster_ranges = ends.into_iter().zip(sizes).collect();
    }
    if version >= 20 {
        skip_object(cur, "TIOFeatures")?;
    }
    Ok(TreeCounts {
        entries,
        tot_bytes,
        zip_bytes,
        auto_flush,
        cluster_ranges,
    })
}

/// A `[count]` pointer array: a presence byte (0 for a null pointer), then the values.
pub(super) fn read_pointer_array_i64(cur: &mut Cursor, n: usize, what: &str) -> Result<Vec<i64>> {
    if cur.u8(what)? == 0 {
        return Ok(Vec::new());
    }
    cur.i64_array(n, what)
}

pub(super) fn read_pointer_array_i32(cur: &mut Cursor, n: usize, what: &str) -> Result<Vec<i32>> {
    if cur.u8(what)? == 0 {
        return Ok(Vec::new());
    }
    cur.i32_array(n, what)
}

/// fBasketSeek of TBranch versions before 10: a presence byte, 2 announcing 64-bit seeks.
pub(super) fn read_old_seeks(cur: &mut Cursor, n: usize) -> Result<Vec<i64>> {
    match cur.u8("TBranch fBasketSeek")? {
        0 => Ok(Vec::new()),
        2 => cur.i64_array(n, "TBranch fBasketSeek"),
        _ => Ok(cur
            .i32_array(n, "TBranch fBasketSeek")?
            .into_iter()
            .map(i64::from)
            .collect()),
    }
}
