//! The members of TTree, TBranch and TBranchElement that a reader needs, read as their class
//! versions lay them out: the tree's counters and cluster settings (by the version's member list,
//! built in or from the file's streamer info), the pointer arrays of basket sizes, entries and
//! seeks (32-bit seeks before TBranch version 10), and what a branch element holds.

use super::cursor::Cursor;
use super::objects::skip_object;
use super::streamers::{StreamerElement, StreamerInfo};
use crate::error::Result;
use std::collections::HashMap;

/// The TBranchElement part of a branch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ElementMeta {
    pub class_name: String,
    pub parent_name: String,
    pub clones_name: String,
    pub class_version: i32,
    pub id: i32,
    pub kind: i32,
    pub streamer_type: i32,
}

/// The TTree members before its branches that a reader needs.
pub(super) struct TreeCounts {
    pub(super) entries: i64,
    pub(super) tot_bytes: i64,
    pub(super) zip_bytes: i64,
    pub(super) auto_flush: i64,
    pub(super) cluster_ranges: Vec<(i64, i64)>,
}

/// Counts stored as doubles by old class versions are exact integers up to 2^53.
pub(super) const MAX_F64_COUNT: f64 = 9_007_199_254_740_992.0;

/// How a TTree member between its base classes and its branches is stored. TTree versions from
/// 5 on are streamed member by member as their streamer info says (`TTree::Streamer` calls
/// `ReadClassBuffer`), so a version's layout is its member list.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Stored {
    /// A big-endian integer of this many bytes.
    Int(usize),
    Float,
    Double,
    /// A fixed array of items of this many bytes.
    Fixed {
        item_bytes: usize,
        len: usize,
    },
    /// A `[count]` array of 8-byte integers behind a presence byte (fClusterRangeEnd).
    Int64s {
        count: String,
    },
    /// A pointer array of other items, skipped.
    Items {
        item_bytes: usize,
        count: String,
    },
    /// An object with a byte count (fIOFeatures), skipped.
    Object,
    TString,
}

/// One member of a TTree layout.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Member {
    pub(crate) name: String,
    pub(crate) stored: Stored,
}

/// The layouts of TTree versions that ROOT's history fixes: 5 and 6 (ROOT 3.02, counters as
/// doubles), 8 to 12 (ROOT 3.03 to 4.00: fWeight added), 15 and 16 (ROOT 4.02 to 5.21: 64-bit
/// counters, fMaxEntries), 17 (fDefaultEntryOffsetLen), 18 (fFlushedBytes, fAutoFlush), 19
/// (cluster ranges) and 20 (fIOFeatures). Versions 7, 13 and 14 lived between releases; they,
/// and any other, are read by the file's own streamer info (`layout_from_info`).
pub(crate) fn builtin_layout(version: i16) -> Option<Vec<Member>> {
    use Stored::*;
    let mut m: Vec<(&str, Stored)> = Vec::new();
    match version {
        5 | 6 | 8..=12 => {
            for name in ["fEntries", "fTotBytes", "fZipBytes", "fSavedBytes"] {
                m.push((name, Double));
            }
            if version >= 8 {
                m.push(("fWeight", Double));
            }
            for name in [
                "fTimerInterval",
                "fScanField",
                "fUpdate",
                "fMaxEntryLoop",
                "fMaxVirtualSize",
                "fAutoSave",
                "fEstimate",
            ] {
                m.push((name, Int(4)));
            }
        }
        15..=20 => {
            for name in ["fEntries", "fTotBytes", "fZipBytes", "fSavedBytes"] {
                m.push((name, Int(8)));
            }
            if version >= 18 {
                m.push(("fFlushedBytes", Int(8)));
            }
            m.push(("fWeight", Double));
            for name in ["fTimerInterval", "fScanField", "fUpdate"] {
                m.push((name, Int(4)));
            }
            if version >= 17 {
                m.push(("fDefaultEntryOffsetLen", Int(4)));
            }
            if version >= 19 {
                m.push(("fNClusterRange", Int(4)));
            }
            for name in [
                "fMaxEntries",
                "fMaxEntryLoop",
                "fMaxVirtualSize",
                "fAutoSave",
            ] {
                m.push((name, Int(8)));
            }
            if version >= 18 {
                m.push(("fAutoFlush", Int(8)));
            }
            m.push(("fEstimate", Int(8)));
            if version >= 19 {
                for name in ["fClusterRangeEnd", "fClusterSize"] {
                    let count = "fNClusterRange".to_string();
                    m.push((name, Int64s { count }));
                }
            }
            if version >= 20 {
                m.push(("fIOFeatures", Object));
            }
        }
        _ => return None,
    }
    Some(
        m.into_iter()
            .map(|(name, stored)| Member {
                name: name.to_string(),
                stored,
            })
            .collect(),
    )
}

/// The base classes every TTree version streams first (read before the layout's members).
const TREE_BASES: [&str; 4] = ["TNamed", "TAttLine", "TAttFill", "TAttMarker"];

/// The layout of a TTree version from the file's streamer info for it: its members after the
/// base classes and before fBranches.
pub(crate) fn layout_from_info(info: &StreamerInfo) -> std::result::Result<Vec<Member>, String> {
    let elements = &info.elements;
    let bases: Vec<&str> = elements
        .iter()
        .take_while(|e| e.class == "TStreamerBase")
        .map(|e| e.name.as_str())
        .collect();
    if bases != TREE_BASES {
        return Err(format!("base classes {TREE_BASES:?}, found {bases:?}"));
    }
    let mut out = Vec::new();
    for e in elements[bases.len()..]
        .iter()
        .take_while(|e| e.name != "fBranches")
    {
        let stored = stored_of(e).ok_or_else(|| {
            format!(
                "member {} ({}, streamer type {}) of a kind TTree members have",
                e.name, e.type_name, e.type_code
            )
        })?;
        out.push(Member {
            name: e.name.clone(),
            stored,
        });
    }
    Ok(out)
}

/// How a streamer element of a TTree is stored (ROOT's TStreamerInfo type codes).
fn stored_of(e: &StreamerElement) -> Option<Stored> {
    const OFFSET_L: i32 = 20;
    const OFFSET_P: i32 = 40;
    let basic = |code: i32| -> Option<Stored> {
        Some(match code {
            1 | 11 | 18 => Stored::Int(1),
            2 | 12 => Stored::Int(2),
            3 | 6 | 13 | 15 => Stored::Int(4),
            // Long_t is written as 8 bytes whatever its size in memory.
            4 | 14 | 16 | 17 => Stored::Int(8),
            5 => Stored::Float,
            8 => Stored::Double,
            _ => return None,
        })
    };
    let bytes = |s: &Stored| match s {
        Stored::Int(n) => *n,
        Stored::Float => 4,
        _ => 8,
    };
    match e.type_code {
        c if (1..OFFSET_L).contains(&c) => basic(c),
        c if (OFFSET_L + 1..OFFSET_P).contains(&c) => {
            let item = basic(c - OFFSET_L)?;
            let len = e.array_dims.iter().product();
            Some(Stored::Fixed {
                item_bytes: bytes(&item),
                len,
            })
        }
        c if (OFFSET_P + 1..OFFSET_P + OFFSET_L).contains(&c) => {
            let item = basic(c - OFFSET_P)?;
            let count = e
                .title
                .strip_prefix('[')?
                .split(']')
                .next()?
                .trim()
                .to_string();
            Some(match item {
                Stored::Int(8) => Stored::Int64s { count },
                other => Stored::Items {
                    item_bytes: bytes(&other),
                    count,
                },
            })
        }
        61 | 62 => Some(Stored::Object),
        65 => Some(Stored::TString),
        _ => None,
    }
}

/// A member's value, kept when a reader needs it.
#[derive(Clone, Debug)]
enum Value {
    Int(i64),
    Double(f64),
    Int64s(Vec<i64>),
}

/// Read the members of `layout` and keep the counters a reader needs.
pub(super) fn read_tree_members(cur: &mut Cursor, layout: &[Member]) -> Result<TreeCounts> {
    let mut values: HashMap<&str, (usize, Value)> = HashMap::new();
    for m in layout {
        let what = format!("TTree {}", m.name);
        let pos = cur.pos();
        let value = match &m.stored {
            Stored::Int(n) => {
                let raw = cur.bytes(*n, &what)?;
                let mut v = if raw[0] & 0x80 != 0 { -1i64 } else { 0 };
                for b in raw {
                    v = (v << 8) | i64::from(*b);
                }
                Value::Int(v)
            }
            Stored::Float => Value::Double(f64::from(cur.f32(&what)?)),
            Stored::Double => Value::Double(cur.f64(&what)?),
            Stored::Fixed { item_bytes, len } => {
                cur.skip(item_bytes.saturating_mul(*len))?;
                continue;
            }
            Stored::Int64s { count } | Stored::Items { count, .. } => {
                let item_bytes = match &m.stored {
                    Stored::Items { item_bytes, .. } => *item_bytes,
                    _ => 8,
                };
                let n = match values.get(count.as_str()) {
                    Some((at, Value::Int(n))) => cur.check_count(*at, *n, count, item_bytes)?,
                    _ => {
                        return Err(
                            cur.error(format!("{what} counted by a member {count} before it"))
                        )
                    }
                };
                match &m.stored {
                    Stored::Int64s { .. } => Value::Int64s(read_pointer_array_i64(cur, n, &what)?),
                    Stored::Items { item_bytes, .. } => {
                        if cur.u8(&what)? != 0 {
                            cur.skip(item_bytes.saturating_mul(n))?;
                        }
                        continue;
                    }
                    _ => unreachable!(),
                }
            }
            Stored::Object => {
                skip_object(cur, &m.name)?;
                continue;
            }
            Stored::TString => {
                cur.string(&what)?;
                continue;
            }
        };
        values.insert(&m.name, (pos, value));
    }
    let count = |name: &str| -> Result<i64> {
        match values.get(name) {
            Some((_, Value::Int(v))) => Ok(*v),
            Some((at, Value::Double(v))) => {
                if (0.0..=MAX_F64_COUNT).contains(v) {
                    Ok(*v as i64)
                } else {
                    Err(cur.error_at(*at, format!("a TTree {name} count, found {v}")))
                }
            }
            _ => Ok(0),
        }
    };
    let (entries, tot_bytes, zip_bytes) =
        (count("fEntries")?, count("fTotBytes")?, count("fZipBytes")?);
    let auto_flush = match values.get("fAutoFlush") {
        Some((_, Value::Int(v))) => *v,
        _ => 0,
    };
    let ints = |name: &str| match values.get(name) {
        Some((_, Value::Int64s(v))) => v.clone(),
        _ => Vec::new(),
    };
    let cluster_ranges = ints("fClusterRangeEnd")
        .into_iter()
        .zip(ints("fClusterSize"))
        .collect();
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

/// Streamed big-endian integers of 4 or 8 bytes, read in place: a branch's basket tables (three
/// per branch, parsed for every input of a merge) then cost no allocation.
#[derive(Clone, Copy)]
pub(super) struct Numbers<'a> {
    raw: &'a [u8],
    width: usize,
}

impl Numbers<'_> {
    pub(super) fn len(&self) -> usize {
        self.raw.len() / self.width
    }

    /// Number `i` (< `len`).
    pub(super) fn get(&self, i: usize) -> i64 {
        let at = &self.raw[i * self.width..(i + 1) * self.width];
        match self.width {
            4 => i64::from(i32::from_be_bytes(at.try_into().expect("4 bytes"))),
            _ => i64::from_be_bytes(at.try_into().expect("8 bytes")),
        }
    }
}

/// A `[count]` pointer array of `n` numbers of `width` bytes: a presence byte (0 for a null
/// pointer, then none), then the numbers.
pub(super) fn read_pointer_numbers<'a>(
    cur: &mut Cursor<'a>,
    n: usize,
    width: usize,
    what: &str,
) -> Result<Numbers<'a>> {
    let n = if cur.u8(what)? == 0 { 0 } else { n };
    let len = n.checked_mul(width).ok_or_else(|| cur.error(what))?;
    Ok(Numbers {
        raw: cur.bytes(len, what)?,
        width,
    })
}

/// fBasketSeek of TBranch versions before 10: a presence byte, 2 announcing 64-bit seeks.
pub(super) fn read_old_seeks<'a>(cur: &mut Cursor<'a>, n: usize) -> Result<Numbers<'a>> {
    let what = "TBranch fBasketSeek";
    let (n, width) = match cur.u8(what)? {
        0 => (0, 4),
        2 => (n, 8),
        _ => (n, 4),
    };
    let len = n.checked_mul(width).ok_or_else(|| cur.error(what))?;
    Ok(Numbers {
        raw: cur.bytes(len, what)?,
        width,
    })
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
