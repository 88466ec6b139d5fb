//! The TTree record: the tree (class version 20) with its branches (TBranch 13, TBranchElement
//! 10) and their leaves (TLeaf 2 and its typed subclasses 1, TLeafElement 1), streamed as
//! ROOT 6.40 streams them and as `format::tree` parses them. Every basket is on disk
//! (`fBaskets` holds only null slots); a counted leaf refers to its counter's leaf, which must be
//! written first; the tree's `fLeaves` refers to the leaves written inside the branches.

use super::buffer::{Buffer, ObjectRef};
use crate::format::array::DType;

/// Class versions written.
const TTREE_VERSION: i16 = 20;
const TBRANCH_VERSION: i16 = 13;
const TBRANCHELEMENT_VERSION: i16 = 10;
const TLEAF_VERSION: i16 = 2;
const TLEAF_TYPED_VERSION: i16 = 1;
const TOBJARRAY_VERSION: i16 = 3;
const TLIST_VERSION: i16 = 5;
/// ROOT::TIOFeatures has no ClassDef: version 0, then its class checksum.
const TIOFEATURES_CHECKSUM: u32 = 0x1aa1_2f10;
/// fBits as ROOT writes them: the tree (kMustCleanup), branches, branch elements, and the
/// tree's array of branches (kIsOwner).
const TREE_BITS: u32 = 0x0000_0008;
const BRANCH_BITS: u32 = 0x0040_0000;
const BRANCH_ELEMENT_BITS: u32 = 0x0050_0000;
const OWNER_BITS: u32 = 0x0000_4000;
/// ROOT's constructor values for what a reader does not need.
const DEFAULT_ENTRY_OFFSET_LEN: i32 = 1000;
const AUTO_SAVE: i64 = -300_000_000;
const MAX_ENTRIES: i64 = 1_000_000_000_000;
const ESTIMATE: i64 = 1_000_000;
/// fMaxBaskets is at least this (TBranch::Streamer's floor).
const MIN_MAX_BASKETS: usize = 10;

/// A basket on disk: where, how many bytes, its first entry.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BasketRecord {
    pub seek: u64,
    pub bytes: u32,
    pub entry_start: u64,
}

/// A branch's one leaf.
#[derive(Clone, Debug, PartialEq)]
pub struct LeafRecord {
    /// TLeafO, TLeafB, TLeafS, TLeafI, TLeafL, TLeafF, TLeafD, or TLeafElement.
    pub class: &'static str,
    pub name: String,
    /// The name with its dimensions: `x`, `x[3]`, `x[nX]`, `x[nX][3]`.
    pub title: String,
    /// Items per entry (per counted item for a counted leaf).
    pub len: i32,
    /// Bytes of one item (0 for a TLeafElement).
    pub len_type: i32,
    pub is_unsigned: bool,
    /// The branch whose leaf counts this leaf's items (written before this one).
    pub count: Option<usize>,
    /// A counter's largest count (ROOT sizes its read buffers by it); 0 otherwise.
    pub maximum: i64,
    /// Whether other leaves are counted by this one (fIsRange).
    pub is_range: bool,
}

/// The TBranchElement part of a branch holding STL objects (`std::vector`, `std::string`).
#[derive(Clone, Debug, PartialEq)]
pub struct ElementRecord {
    pub class_name: String,
    pub checksum: u32,
    pub class_version: i16,
    /// fType: 0 for a collection read whole, -1 for a std::string.
    pub kind: i32,
    pub split_level: i32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct BranchRecord {
    pub name: String,
    /// The leaf list (`x/F`, `x[nX]/F`) or a description; an element branch's name.
    pub title: String,
    /// The compression setting, as ROOT spells it.
    pub compress: i32,
    pub basket_size: i32,
    /// Non-zero when baskets hold entry offsets (entries vary in size).
    pub entry_offset_len: i32,
    pub entries: u64,
    pub tot_bytes: i64,
    pub zip_bytes: i64,
    pub baskets: Vec<BasketRecord>,
    pub leaf: LeafRecord,
    pub element: Option<ElementRecord>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TreeRecord {
    pub name: String,
    pub title: String,
    pub entries: u64,
    pub tot_bytes: i64,
    pub zip_bytes: i64,
    /// fZipBytes at the last cluster closed (0: none was, then no cluster is recorded).
    pub flushed_bytes: i64,
    /// Entries per cluster of the last, open-ended range; negative for ROOT's byte watermark.
    pub auto_flush: i64,
    /// (last entry, entries per cluster) of each closed cluster range.
    pub cluster_ranges: Vec<(i64, i64)>,
    /// Branches, each counter before the leaves it counts.
    pub branches: Vec<BranchRecord>,
    /// (alias, expression) pairs (TTree::SetAlias).
    pub aliases: Vec<(String, String)>,
}

/// The leaf class, type letter and item bytes of a number type (`None`: a TTree leaf cannot
/// hold it).
pub fn leaf_type(dtype: DType) -> Option<(&'static str, char)> {
    Some(match dtype {
        DType::Bool => ("TLeafO", 'O'),
        DType::I8 => ("TLeafB", 'B'),
        DType::U8 => ("TLeafB", 'b'),
        DType::I16 => ("TLeafS", 'S'),
        DType::U16 => ("TLeafS", 's'),
        DType::I32 => ("TLeafI", 'I'),
        DType::U32 => ("TLeafI", 'i'),
        DType::I64 => ("TLeafL", 'L'),
        DType::U64 => ("TLeafL", 'l'),
        DType::F32 => ("TLeafF", 'F'),
        DType::F64 => ("TLeafD", 'D'),
        DType::F16 => return None,
    })
}

/// The C++ name ROOT gives a number type inside an STL class name (`vector<float>`).
pub fn cpp_type(dtype: DType) -> Option<&'static str> {
    Some(match dtype {
        DType::Bool => "bool",
        DType::I8 => "char",
        DType::U8 => "unsigned char",
        DType::I16 => "short",
        DType::U16 => "unsigned short",
        DType::I32 => "int",
        DType::U32 => "unsigned int",
        DType::I64 => "Long64_t",
        DType::U64 => "ULong64_t",
        DType::F32 => "float",
        DType::F64 => "double",
        DType::F16 => return None,
    })
}

/// TClass::GetCheckSum of an STL collection: its name's characters folded as `id * 3 + c`.
pub fn stl_checksum(class_name: &str) -> u32 {
    class_name
        .bytes()
        .fold(0u32, |id, c| id.wrapping_mul(3).wrapping_add(c as u32))
}

/// ROOT's default fAutoFlush (a byte watermark: no cluster size recorded).
pub const AUTO_FLUSH_DEFAULT: i64 = -30_000_000;

/// fClusterRangeEnd/fClusterSize pairs and fAutoFlush for clusters of these numbers of entries:
/// clusters of one size in a row make one range; the last range is open-ended (fAutoFlush), and
/// its last cluster may be shorter (the tree's remaining entries).
pub fn cluster_ranges(sizes: &[u64]) -> (Vec<(i64, i64)>, i64) {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for &size in sizes {
        match runs.last_mut() {
            Some((s, n)) if *s == size => *n += 1,
            _ => runs.push((size, 1)),
        }
    }
    if let [.., (before, n), (last, 1)] = runs[..] {
        if last < before {
            runs.pop();
            *runs.last_mut().expect("two runs") = (before, n + 1);
        }
    }
    let Some(&(open, _)) = runs.last() else {
        return (Vec::new(), AUTO_FLUSH_DEFAULT);
    };
    let mut entry = 0u64;
    let ranges = runs[..runs.len() - 1]
        .iter()
        .map(|&(size, n)| {
            entry += size * n;
            (entry as i64 - 1, size as i64)
        })
        .collect();
    (ranges, open as i64)
}

/// The streamed TTree (after its key header of `key_len` bytes).
pub fn write_tree(tree: &TreeRecord, key_len: u32) -> Vec<u8> {
    let mut b = Buffer::new(key_len);
    let m = b.begin(TTREE_VERSION);
    b.tnamed(&tree.name, &tree.title, TREE_BITS);
    let line = b.begin(2); // TAttLine: color 602, style 1, width 1
    b.i16(602);
    b.i16(1);
    b.i16(1);
    b.end(line);
    let fill = b.begin(2); // TAttFill: color 0, style 1001
    b.i16(0);
    b.i16(1001);
    b.end(fill);
    let marker = b.begin(3); // TAttMarker: color 1, style 1, size 1
    b.i16(1);
    b.i16(1);
    b.f32(1.0);
    b.end(marker);
    b.i64(tree.entries as i64);
    b.i64(tree.tot_bytes);
    b.i64(tree.zip_bytes);
    b.i64(0); // fSavedBytes
    b.i64(tree.flushed_bytes);
    b.f64(1.0); // fWeight
    b.i32(0); // fTimerInterval
    b.i32(25); // fScanField
    b.i32(0); // fUpdate
    b.i32(DEFAULT_ENTRY_OFFSET_LEN);
    b.i32(tree.cluster_ranges.len() as i32);
    b.i64(MAX_ENTRIES);
    b.i64(MAX_ENTRIES); // fMaxEntryLoop
    b.i64(0); // fMaxVirtualSize
    b.i64(AUTO_SAVE);
    b.i64(tree.auto_flush);
    b.i64(ESTIMATE);
    let ends: Vec<i64> = tree.cluster_ranges.iter().map(|r| r.0).collect();
    let sizes: Vec<i64> = tree.cluster_ranges.iter().map(|r| r.1).collect();
    pointer_array_i64(&mut b, &ends);
    pointer_array_i64(&mut b, &sizes);
    io_features(&mut b);
    let mut leaves: Vec<ObjectRef> = Vec::with_capacity(tree.branches.len());
    let branches = b.begin(TOBJARRAY_VERSION);
    b.tobject(OWNER_BITS);
    b.string("");
    b.i32(tree.branches.len() as i32);
    b.i32(0);
    for branch in &tree.branches {
        let class = if branch.element.is_some() {
            "TBranchElement"
        } else {
            "TBranch"
        };
        b.object(class, |b| write_branch(b, branch, &mut leaves));
    }
    b.end(branches);
    let all = b.begin(TOBJARRAY_VERSION);
    b.tobject(0);
    b.string("");
    b.i32(leaves.len() as i32);
    b.i32(0);
    for leaf in &leaves {
        b.reference(*leaf);
    }
    b.end(all);
    if tree.aliases.is_empty() {
        b.null();
    } else {
        b.object("TList", |b| {
            let list = b.begin(TLIST_VERSION);
            b.tobject(0);
            b.string("");
            b.i32(tree.aliases.len() as i32);
            for (alias, expression) in &tree.aliases {
                b.object("TNamed", |b| b.tnamed(alias, expression, 0));
                b.u8(0);
            }
            b.end(list);
        });
    }
    b.i32(0); // fIndexValues (TArrayD): no values
    b.i32(0); // fIndex (TArrayI)
    for _ in ["fTreeIndex", "fFriends", "fUserInfo", "fBranchRef"] {
        b.null();
    }
    b.end(m);
    b.into_bytes()
}

fn write_branch(b: &mut Buffer, branch: &BranchRecord, leaves: &mut Vec<ObjectRef>) {
    let element = branch
        .element
        .as_ref()
        .map(|_| b.begin(TBRANCHELEMENT_VERSION));
    let m = b.begin(TBRANCH_VERSION);
    let bits = if element.is_some() {
        BRANCH_ELEMENT_BITS
    } else {
        BRANCH_BITS
    };
    b.tnamed(&branch.name, &branch.title, bits);
    let fill = b.begin(2);
    b.i16(0);
    b.i16(1001);
    b.end(fill);
    let written = branch.baskets.len();
    b.i32(branch.compress);
    b.i32(branch.basket_size);
    b.i32(branch.entry_offset_len);
    b.i32(written as i32); // fWriteBasket
    b.i64(branch.entries as i64); // fEntryNumber
    io_features(b);
    b.i32(0); // fOffset
    let max_baskets = (written + 1).max(MIN_MAX_BASKETS);
    b.i32(max_baskets as i32);
    b.i32(branch.element.as_ref().map_or(0, |e| e.split_level));
    b.i64(branch.entries as i64);
    b.i64(0); // fFirstEntry
    b.i64(branch.tot_bytes);
    b.i64(branch.zip_bytes);
    empty_array(b, 0); // fBranches
    let leaf_list = b.begin(TOBJARRAY_VERSION);
    b.tobject(0);
    b.string("");
    b.i32(1);
    b.i32(0);
    let leaf = b.object(branch.leaf.class, |b| write_leaf(b, &branch.leaf, leaves));
    leaves.push(leaf);
    b.end(leaf_list);
    empty_array(b, written + 1); // fBaskets: null slots, the baskets are on disk
    let mut bytes = vec![0i32; max_baskets];
    let mut entry = vec![0i64; max_baskets];
    let mut seek = vec![0i64; max_baskets];
    for (i, basket) in branch.baskets.iter().enumerate() {
        bytes[i] = basket.bytes as i32;
        entry[i] = basket.entry_start as i64;
        seek[i] = basket.seek as i64;
    }
    entry[written] = branch.entries as i64;
    b.u8(1);
    for v in bytes {
        b.i32(v);
    }
    pointer_array_i64(b, &entry);
    pointer_array_i64(b, &seek);
    b.string(""); // fFileName: baskets in this file
    b.end(m);
    if let (Some(element_mark), Some(e)) = (element, &branch.element) {
        b.string(&e.class_name);
        b.string(""); // fParentName
        b.string(""); // fClonesName
        b.u32(e.checksum);
        b.i16(e.class_version);
        b.i32(-1); // fID: the whole object
        b.i32(e.kind);
        b.i32(-1); // fStreamerType
        b.i32(0); // fMaximum
        b.null(); // fBranchCount
        b.null(); // fBranchCount2
        b.end(element_mark);
    }
}

/// The leaves written so far, by branch: a counted leaf refers to its counter's (`count` indexes
/// the tree's branches, each with one leaf, in the order written).
fn write_leaf(b: &mut Buffer, leaf: &LeafRecord, written: &[ObjectRef]) {
    let typed = b.begin(TLEAF_TYPED_VERSION);
    let base = b.begin(TLEAF_VERSION);
    b.tnamed(&leaf.name, &leaf.title, 0);
    b.i32(leaf.len);
    b.i32(leaf.len_type);
    b.i32(0); // fOffset
    b.bool(leaf.is_range);
    b.bool(leaf.is_unsigned);
    match leaf.count.and_then(|i| written.get(i)) {
        Some(counter) => b.reference(*counter),
        None => b.null(),
    }
    b.end(base);
    match leaf.class {
        "TLeafElement" => {
            b.i32(-1); // fID
            b.i32(-1); // fType
        }
        class => {
            // fMinimum and fMaximum in the leaf's own type.
            for v in [0, leaf.maximum] {
                match class {
                    "TLeafO" => b.bool(v != 0),
                    "TLeafB" => b.u8(v as u8),
                    "TLeafS" => b.i16(v as i16),
                    "TLeafI" => b.i32(v as i32),
                    "TLeafL" => b.i64(v),
                    "TLeafF" => b.f32(v as f32),
                    _ => b.f64(v as f64),
                }
            }
        }
    }
    b.end(typed);
}

/// A TObjArray member of `slots` null pointers.
fn empty_array(b: &mut Buffer, slots: usize) {
    let m = b.begin(TOBJARRAY_VERSION);
    b.tobject(0);
    b.string("");
    b.i32(slots as i32);
    b.i32(0);
    for _ in 0..slots {
        b.null();
    }
    b.end(m);
}

/// A `[count]` pointer array: a presence byte, then the values (none: a 0 byte).
fn pointer_array_i64(b: &mut Buffer, values: &[i64]) {
    if values.is_empty() {
        b.u8(0);
        return;
    }
    b.u8(1);
    for &v in values {
        b.i64(v);
    }
}

/// ROOT::TIOFeatures with no feature set.
fn io_features(b: &mut Buffer) {
    let m = b.begin(0);
    b.u32(TIOFEATURES_CHECKSUM);
    b.u8(0);
    b.end(m);
}

#[cfg(test)]
#[path = "tree_tests.rs"]
mod tests;
