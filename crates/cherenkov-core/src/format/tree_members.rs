//! The members of TTree, TBranch and TBranchElement that a reader needs, read as their class
//! versions lay them out: the tree's counters and cluster settings, the pointer arrays of basket
//! sizes, entries and seeks (32-bit seeks before TBranch version 10), and what a branch element
//! holds.

use super::cursor::Cursor;
use super::objects::skip_object;
use super::tree::ElementMeta;
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

/// The TBranchElement members after its TBranch base, as class versions 1, 5, 7 and 8 to 10 lay
/// them out (ROOT's automatic streamer writes the persistent members in declaration order), and
/// how many branch pointers (fBranchCount, fBranchCount2) follow them.
///
/// - 1 (ROOT of early 2001, and Geant4's g4tools writer for its `std::vector` columns):
///   fClassName, fClassVersion, fID, fType, fStreamerType;
/// - 5 (spring 2001): fParentName and fClonesName after fClassName, fMaximum after
///   fStreamerType, then fBranchCount;
/// - 7 (from 2002): and fBranchCount2;
/// - 8 and 9: fCheckSum after fClonesName; 10: fClassVersion as a short.
///
/// Versions 2 to 4 and 6 lived for weeks in 2001 and are refused by name.
pub(super) fn read_element_members(cur: &mut Cursor, version: i16) -> Result<(ElementMeta, usize)> {
    if !matches!(version, 1 | 5 | 7..=10) {
        return Err(cur.error(format!(
            "TBranchElement class version 1, 5 or 7 to 10, found {version}"
        )));
    }
    let class_name = cur.string("TBranchElement fClassName")?;
    let (parent_name, clones_name) = match version {
        1 => (String::new(), String::new()),
        _ => (
            cur.string("TBranchElement fParentName")?,
            cur.string("TBranchElement fClonesName")?,
        ),
    };
    if version >= 8 {
        cur.u32("TBranchElement fCheckSum")?;
    }
    let class_version = match version {
        10 => cur.i16("TBranchElement fClassVersion")? as i32,
        _ => cur.i32("TBranchElement fClassVersion")?,
    };
    let id = cur.i32("TBranchElement fID")?;
    let kind = cur.i32("TBranchElement fType")?;
    let streamer_type = cur.i32("TBranchElement fStreamerType")?;
    if version > 1 {
        cur.i32("TBranchElement fMaximum")?;
    }
    let element = ElementMeta {
        class_name,
        parent_name,
        clones_name,
        class_version,
        id,
        kind,
        streamer_type,
    };
    let count_branches = match version {
        1 => 0,
        5 => 1,
        _ => 2,
    };
    Ok((element, count_branches))
}
