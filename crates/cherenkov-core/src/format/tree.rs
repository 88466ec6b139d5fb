//! TTree, TBranch, TBranchElement and TLeaf* models, read from the streamed TTree object. Class
//! versions from ROOT 3 (TTree 5, TBranch 6, TBranchElement 1) to 6.40 (TTree 20, TBranch 13,
//! TBranchElement 10), and Geant4's g4tools writer; the members each version lays out
//! differently are read in `tree_members.rs`.

use super::basket::{parse_embedded_basket, EmbeddedBasket};
use super::cursor::Cursor;
use super::objects::{
    read_obj_array, read_tnamed, read_version, skip_object, Pointer, PointerReader, Version,
};
use super::streamers::StreamerInfo;
pub use super::tree_members::ElementMeta;
use super::tree_members::{
    builtin_layout, layout_from_info, read_element_members, read_old_seeks, read_pointer_numbers,
    read_tree_members, TreeCounts, MAX_F64_COUNT,
};
use crate::error::Result;

/// Where a basket is in the file, and which entries it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BasketLocation {
    pub seek: u64,
    pub bytes: u32,
    pub entry_start: u64,
    pub entry_stop: u64,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct LeafMeta {
    pub class: String,
    pub name: String,
    pub title: String,
    pub len: i32,
    pub is_unsigned: bool,
    /// Index (in `TreeMeta::leaves`) of the leaf counting this one's entries.
    pub count: Option<usize>,
    /// Index of the branch that owns this leaf.
    pub branch: Option<usize>,
    /// TLeafElement's type code (ROOT's EDataType-like streamer codes).
    pub element_type: i32,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct BranchMeta {
    pub class: String,
    pub name: String,
    pub title: String,
    pub parent: Option<usize>,
    pub children: Vec<usize>,
    pub leaves: Vec<usize>,
    pub compress: i32,
    pub entry_offset_len: i32,
    /// The baskets leave out their entry offsets, to be rebuilt from the count branch
    /// (TIOFeatures' kGenerateOffsetMap, ROOT 6.12 and later).
    pub offsets_from_counts: bool,
    pub entries: u64,
    pub tot_bytes: i64,
    pub zip_bytes: i64,
    pub baskets: Vec<BasketLocation>,
    pub embedded: Vec<EmbeddedBasket>,
    pub element: Option<ElementMeta>,
}

impl BranchMeta {
    /// Bytes on disk: the baskets' keys, plus the data of embedded baskets.
    pub fn compressed_bytes(&self) -> u64 {
        self.baskets.iter().map(|b| b.bytes as u64).sum::<u64>()
            + self
                .embedded
                .iter()
                .map(|e| e.content.len() as u64)
                .sum::<u64>()
    }

    /// Bytes once decompressed (fTotBytes, which leaves out baskets never flushed to disk).
    pub fn uncompressed_bytes(&self) -> u64 {
        (self.tot_bytes.max(0) as u64)
            .max(self.embedded.iter().map(|e| e.content.len() as u64).sum())
    }

    pub fn num_baskets(&self) -> usize {
        self.baskets.len() + self.embedded.len()
    }

    /// Whether `entry` is one of `basket_boundaries`, found without making them (a merge asks
    /// it of every branch of every input).
    pub fn has_boundary(&self, entry: u64) -> bool {
        match self.baskets.last() {
            _ if !self.embedded.is_empty() => {
                self.basket_boundaries().binary_search(&entry).is_ok()
            }
            None => entry == 0,
            Some(last) => {
                entry == last.entry_stop
                    || self
                        .baskets
                        .binary_search_by_key(&entry, |b| b.entry_start)
                        .is_ok()
            }
        }
    }

    /// Entry boundaries of all baskets, normal then embedded.
    pub fn basket_boundaries(&self) -> Vec<u64> {
        let mut out = vec![0];
        for b in &self.baskets {
            *out.last_mut().unwrap() = b.entry_start;
            out.push(b.entry_stop);
        }
        for e in &self.embedded {
            let last = *out.last().unwrap();
            out.push(last + e.entries as u64);
        }
        out
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct TreeMeta {
    pub name: String,
    pub title: String,
    pub version: i16,
    pub entries: u64,
    pub tot_bytes: i64,
    pub zip_bytes: i64,
    pub auto_flush: i64,
    /// (last entry of the range, cluster size in the range), from fClusterRangeEnd/fClusterSize.
    pub cluster_ranges: Vec<(i64, i64)>,
    pub branches: Vec<BranchMeta>,
    pub leaves: Vec<LeafMeta>,
    /// Branches directly under the tree.
    pub top_branches: Vec<usize>,
}

impl TreeMeta {
    /// Whether interpreting some branch takes the file's streamer infos: members of split
    /// objects (element id 0 or more) do.
    pub fn needs_streamers(&self) -> bool {
        self.branches.iter().any(|b| {
            b.element.as_ref().is_some_and(|e| {
                e.id >= 0 || !super::interpretation::read_without_streamers(&e.class_name)
            })
        })
    }

    /// Cluster boundaries `[0, b1, ..., entries]`: entry ranges whose baskets align across branches.
    /// Follows TTree's cluster iterator (ranges, then fAutoFlush); without either (old or
    /// hand-written files), falls back to the entry boundaries shared by every branch's baskets.
    pub fn cluster_boundaries(&self) -> Vec<u64> {
        let n = self.entries;
        // Each cluster holds a basket of every branch with data, so the baskets bound the number
        // of clusters (a corrupt entry count or cluster size could otherwise ask for billions).
        let max_bounds = self
            .data_branches()
            .map(|b| b.num_baskets())
            .max()
            .unwrap_or(0)
            + 2;
        let mut out = vec![0u64];
        let next = |start: u64, size: u64, last_inclusive: u64, out: &mut Vec<u64>| -> u64 {
            let mut s = start;
            while s <= last_inclusive && s < n && out.len() < max_bounds {
                s = (s + size).min(last_inclusive + 1).min(n);
                out.push(s);
            }
            s
        };
        let mut start = 0u64;
        let mut usable = true;
        for &(end, size) in &self.cluster_ranges {
            let size = if size > 0 { size } else { self.auto_flush };
            if size <= 0 || end < 0 {
                usable = false;
                break;
            }
            start = next(start, size as u64, end as u64, &mut out);
        }
        if usable && start < n {
            if self.auto_flush > 0 {
                next(start, self.auto_flush as u64, n - 1, &mut out);
            } else {
                usable = false;
            }
        }
        if usable && out.last() == Some(&n) && self.shares_boundaries(&out) {
            return out;
        }
        self.common_basket_boundaries()
    }

    fn data_branches(&self) -> impl Iterator<Item = &BranchMeta> {
        self.branches.iter().filter(|b| b.num_baskets() > 0)
    }

    fn shares_boundaries(&self, bounds: &[u64]) -> bool {
        self.data_branches().all(|b| {
            bounds
                .iter()
                .all(|&x| x == self.entries || b.has_boundary(x))
        })
    }

    fn common_basket_boundaries(&self) -> Vec<u64> {
        let mut common: Option<Vec<u64>> = None;
        for b in self.data_branches() {
            let bb = b.basket_boundaries();
            common = Some(match common {
                None => bb,
                Some(c) => c
                    .into_iter()
                    .filter(|x| bb.binary_search(x).is_ok())
                    .collect(),
            });
        }
        let mut out = common.unwrap_or_else(|| vec![0]);
        out.retain(|&x| x <= self.entries);
        if out.first() != Some(&0) {
            out.insert(0, 0);
        }
        if out.last() != Some(&self.entries) {
            out.push(self.entries);
        }
        out.dedup();
        out
    }

    /// The branch's full path: parent names joined with '/'.
    pub fn branch_path(&self, index: usize) -> String {
        let mut parts = vec![self.branches[index].name.as_str()];
        let mut at = self.branches[index].parent;
        while let Some(p) = at {
            parts.push(&self.branches[p].name);
            at = self.branches[p].parent;
        }
        parts.reverse();
        parts.join("/")
    }
}

/// What a pointer inside the TTree refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Item {
    Branch(usize),
    Leaf(usize),
    Embedded(usize),
    Other,
}

struct TreeParser {
    branches: Vec<BranchMeta>,
    leaves: Vec<LeafMeta>,
    embedded: Vec<Option<EmbeddedBasket>>,
}

type Ptrs = PointerReader<Item>;

/// Streamed bytes per branch or leaf, about, for the room the object map starts with.
const OBJECT_BYTES: usize = 256;

/// The class version of a streamed TTree (or TNtuple, `class`).
pub fn tree_version(data: &[u8], class: &str, origin: &str) -> Result<i16> {
    let mut cur = Cursor::new(data, origin, 0);
    if class != "TTree" {
        read_version(&mut cur, class)?;
    }
    Ok(read_version(&mut cur, "TTree")?.version)
}

/// Whether reading a TTree of this class version takes the file's streamer infos: versions
/// from 5 on whose layout ROOT's history does not fix are read by the file's streamer info.
pub fn tree_needs_streamer_infos(version: i16) -> bool {
    version > 5 && builtin_layout(version).is_none()
}

/// Parse a streamed TTree (or TNtuple, `class`). `data` is the uncompressed object; `key_len` the
/// key header length (pointer tags count from the key start); `origin` names the object for errors;
/// `infos` the file's streamer infos when the version needs them (`tree_needs_streamer_infos`).
pub fn parse_tree(
    data: &[u8],
    key_len: usize,
    class: &str,
    origin: &str,
    infos: &[StreamerInfo],
) -> Result<TreeMeta> {
    let mut cur = Cursor::new(data, origin, 0);
    // Room for the objects of a tree like NanoAOD's (a branch and its leaf take about 550
    // bytes): growing the branches' table copies it and touches fresh pages at every doubling.
    let objects = data.len() / OBJECT_BYTES;
    let mut ptrs = Ptrs::with_capacity(key_len, objects);
    let mut p = TreeParser {
        branches: Vec::with_capacity(objects / 2),
        leaves: Vec::with_capacity(objects / 2),
        embedded: Vec::new(),
    };

    if class != "TTree" {
        // TNtuple/TNtupleD: their own version header, then the TTree (fNvar follows, unread).
        read_version(&mut cur, class)?;
    }
    let version_at = cur.pos();
    let v = read_version(&mut cur, "TTree")?;
    // Versions before 5 were streamed by hand (ROOT 2); from 5 on, member by member.
    let layout = match builtin_layout(v.version) {
        Some(layout) => layout,
        None if v.version < 5 => {
            return Err(cur.error_at(
                version_at,
                format!(
                    "TTree class version 5 or later (ROOT 3 and later), found {}",
                    v.version
                ),
            ))
        }
        None => {
            let info = infos
                .iter()
                .find(|i| i.class_name == "TTree" && i.class_version == i32::from(v.version))
                .ok_or_else(|| {
                    cur.error_at(
                        version_at,
                        format!(
                            "the file's streamer info for TTree class version {} (not one of ROOT's releases)",
                            v.version
                        ),
                    )
                })?;
            layout_from_info(info).map_err(|why| {
                cur.error_at(
                    version_at,
                    format!("a streamer info for TTree version {} with {why}", v.version),
                )
            })?
        }
    };
    let (name, title) = read_tnamed(&mut cur)?;
    for base in ["TAttLine", "TAttFill", "TAttMarker"] {
        skip_object(&mut cur, base)?;
    }
    let counts = read_tree_members(&mut cur, &layout)?;
    let TreeCounts {
        entries,
        tot_bytes,
        zip_bytes,
        auto_flush,
        cluster_ranges,
    } = counts;
    let top = p.read_items(&mut cur, &mut ptrs)?;
    let _tree_leaves = p.read_items(&mut cur, &mut ptrs)?;
    if entries < 0 {
        return Err(cur.error(format!("a non-negative number of entries, found {entries}")));
    }
    let top_branches: Vec<usize> = top
        .iter()
        .filter_map(|i| {
            if let Item::Branch(b) = i {
                Some(*b)
            } else {
                None
            }
        })
        .collect();
    Ok(TreeMeta {
        name,
        title,
        version: v.version,
        entries: entries as u64,
        tot_bytes,
        zip_bytes,
        auto_flush,
        cluster_ranges,
        branches: shrunk(p.branches),
        leaves: shrunk(p.leaves),
        top_branches,
    })
}

impl TreeParser {
    fn read_items(&mut self, cur: &mut Cursor, ptrs: &mut Ptrs) -> Result<Vec<Item>> {
        read_obj_array(cur, ptrs, &mut |ptrs, cur, class, end| {
            self.read_body(ptrs, cur, class, end)
        })
    }

    fn read_pointer(&mut self, cur: &mut Cursor, ptrs: &mut Ptrs) -> Result<Pointer<Item>> {
        ptrs.read(cur, &mut |ptrs, cur, class, end| {
            self.read_body(ptrs, cur, class, end)
        })
    }

    fn read_body(
        &mut self,
        ptrs: &mut Ptrs,
        cur: &mut Cursor,
        class: &str,
        end: Option<usize>,
    ) -> Result<Item> {
        match class {
            "TBranch" | "TBranchElement" | "TBranchObject" | "TBranchSTL" => {
                self.read_branch(cur, ptrs, class)
            }
            c if c.starts_with("TLeaf") => self.read_leaf(cur, ptrs, class),
            "TBasket" => {
                self.embedded.push(parse_embedded_basket(cur)?);
                Ok(Item::Embedded(self.embedded.len() - 1))
            }
            _ => match end {
                Some(end) => {
                    cur.seek(end)?;
                    Ok(Item::Other)
                }
                None => Err(cur.error(format!("a byte count to skip an object of class {class}"))),
            },
        }
    }

    fn read_branch(&mut self, cur: &mut Cursor, ptrs: &mut Ptrs, class: &str) -> Result<Item> {
        let v = read_version(cur, class)?;
        let index = self.branches.len();
        self.branches.push(BranchMeta {
            class: class.to_string(),
            ..Default::default()
        });
        if class == "TBranch" {
            self.read_tbranch_members(cur, ptrs, v, index)?;
        } else {
            let base = read_version(cur, "TBranch")?;
            self.read_tbranch_members(cur, ptrs, base, index)?;
            if let Some(end) = base.end {
                cur.seek(end)?;
            }
            if class == "TBranchElement" {
                let (element, count_branches) = read_element_members(cur, v.version)?;
                for _count_branch in 0..count_branches {
                    self.read_pointer(cur, ptrs)?;
                }
                self.branches[index].element = Some(element);
            }
        }
        if let Some(end) = v.end {
            cur.seek(end)?;
        }
        Ok(Item::Branch(index))
    }

    fn read_tbranch_members(
        &mut self,
        cur: &mut Cursor,
        ptrs: &mut Ptrs,
        v: Version,
        index: usize,
    ) -> Result<()> {
        if !(6..=13).contains(&v.version) {
            return Err(cur.error(format!(
                "TBranch class version 6 to 13 (ROOT 3 and later), found {}",
                v.version
            )));
        }
        let old = v.version < 10;
        let (name, title) = read_tnamed(cur)?;
        if v.version > 7 {
            skip_object(cur, "TAttFill")?;
        }
        let compress = cur.i32("TBranch fCompress")?;
        cur.i32("TBranch fBasketSize")?;
        let entry_offset_len = cur.i32("TBranch fEntryOffsetLen")?;
        let write_basket = cur.i32("TBranch fWriteBasket")?;
        if old {
            cur.i32("TBranch fEntryNumber")?;
        } else {
            cur.i64("TBranch fEntryNumber")?;
        }
        let offsets_from_counts = v.version >= 13 && read_io_bits(cur)? & GENERATE_OFFSET_MAP != 0;
        cur.i32("TBranch fOffset")?;
        let max_pos = cur.pos();
        let max_baskets = cur.i32("TBranch fMaxBaskets")?;
        if v.version > 6 {
            cur.i32("TBranch fSplitLevel")?;
        }
        // Before version 10 (TBranch::Streamer's manual branch), counters are doubles.
        let entries = if old {
            let e = cur.f64("TBranch fEntries")?;
            if !(0.0..=MAX_F64_COUNT).contains(&e) {
                return Err(cur.error(format!(
                    "branch '{name}' with a non-negative number of entries, found {e}"
                )));
            }
            e as i64
        } else {
            cur.i64("TBranch fEntries")?
        };
        if v.version >= 11 {
            cur.i64("TBranch fFirstEntry")?;
        }
        let (tot_bytes, zip_bytes) = if old {
            (
                cur.f64("TBranch fTotBytes")? as i64,
                cur.f64("TBranch fZipBytes")? as i64,
            )
        } else {
            (cur.i64("TBranch fTotBytes")?, cur.i64("TBranch fZipBytes")?)
        };
        let children = self.read_items(cur, ptrs)?;
        let leaves = self.read_items(cur, ptrs)?;
        let baskets = self.read_items(cur, ptrs)?;
        // Each basket slot holds a size, a first entry and a seek: 4-byte entries and seeks
        // before version 10.
        let slot_bytes = if old { 12 } else { 16 };
        let max_baskets = cur.check_count(
            max_pos,
            max_baskets as i64,
            "TBranch fMaxBaskets",
            slot_bytes,
        )?;
        let basket_bytes = read_pointer_numbers(cur, max_baskets, 4, "TBranch fBasketBytes")?;
        let (basket_entry, basket_seek) = if old {
            // 32-bit entries; seeks 64-bit when the presence byte says 2 (large files).
            let entry = read_pointer_numbers(cur, max_baskets, 4, "TBranch fBasketEntry")?;
            (entry, read_old_seeks(cur, max_baskets)?)
        } else {
            (
                read_pointer_numbers(cur, max_baskets, 8, "TBranch fBasketEntry")?,
                read_pointer_numbers(cur, max_baskets, 8, "TBranch fBasketSeek")?,
            )
        };
        if entries < 0 {
            return Err(cur.error(format!(
                "branch '{name}' with a non-negative number of entries, found {entries}"
            )));
        }

        // Normal baskets: leading non-zero seeks before fWriteBasket.
        let n_normal = (0..basket_seek.len())
            .take(write_basket.max(0) as usize)
            .take_while(|&i| basket_seek.get(i) != 0)
            .count()
            .min(basket_bytes.len())
            .min(basket_entry.len());
        let mut locations = Vec::with_capacity(n_normal);
        for i in 0..n_normal {
            let start = basket_entry.get(i);
            let stop = if i + 1 < basket_entry.len()
                && (i + 1 < n_normal || basket_entry.get(i + 1) > 0)
            {
                basket_entry.get(i + 1)
            } else {
                entries
            };
            let (seek, bytes) = (basket_seek.get(i), basket_bytes.get(i));
            if start < 0 || stop < start || stop > entries || seek < 0 || bytes <= 0 {
                return Err(cur.error(format!(
                    "basket {i} of branch '{name}' with sane entries and location (entries {start}..{stop} of {entries}, seek {seek}, {bytes} bytes)"
                )));
            }
            locations.push(BasketLocation {
                seek: seek as u64,
                bytes: bytes as u32,
                entry_start: start as u64,
                entry_stop: stop as u64,
            });
        }
        let embedded: Vec<EmbeddedBasket> = baskets
            .iter()
            .filter_map(|item| {
                if let Item::Embedded(i) = item {
                    self.embedded[*i].take()
                } else {
                    None
                }
            })
            .collect();

        let b = &mut self.branches[index];
        b.name = name;
        b.title = title;
        b.compress = compress;
        b.entry_offset_len = entry_offset_len;
        b.offsets_from_counts = offsets_from_counts;
        b.entries = entries as u64;
        b.tot_bytes = tot_bytes;
        b.zip_bytes = zip_bytes;
        b.baskets = locations;
        b.embedded = embedded;
        for item in children {
            // Sub-branches are read inside their parent, so come after it; a reference to any
            // other branch (a hostile file) would make the branches a cycle.
            if let Item::Branch(child) = item {
                if child <= index || self.branches[child].parent.is_some() {
                    continue;
                }
                self.branches[child].parent = Some(index);
                self.branches[index].children.push(child);
            }
        }
        for item in leaves {
            if let Item::Leaf(leaf) = item {
                self.leaves[leaf].branch = Some(index);
                self.branches[index].leaves.push(leaf);
            }
        }
        Ok(())
    }

    fn read_leaf(&mut self, cur: &mut Cursor, ptrs: &mut Ptrs, class: &str) -> Result<Item> {
        let v = read_version(cur, class)?;
        let index = self.leaves.len();
        self.leaves.push(LeafMeta::default());
        let base = if class == "TLeaf" {
            v
        } else {
            read_version(cur, "TLeaf")?
        };
        let (name, title) = read_tnamed(cur)?;
        let len = cur.i32("TLeaf fLen")?;
        cur.i32("TLeaf fLenType")?;
        cur.i32("TLeaf fOffset")?;
        cur.bool("TLeaf fIsRange")?;
        let is_unsigned = cur.bool("TLeaf fIsUnsigned")?;
        let count = match self.read_pointer(cur, ptrs)? {
            Pointer::Object(Item::Leaf(l)) => Some(l),
            _ => None,
        };
        if let Some(end) = base.end {
            cur.seek(end)?;
        }
        let element_type = if class == "TLeafElement" {
            cur.i32("TLeafElement fID")?;
            cur.i32("TLeafElement fType")?
        } else {
            0
        };
        if let Some(end) = v.end {
            cur.seek(end)?;
        }
        self.leaves[index] = LeafMeta {
            class: class.to_string(),
            name,
            title,
            len,
            is_unsigned,
            count,
            branch: None,
            element_type,
        };
        Ok(Item::Leaf(index))
    }
}

/// `v` without the room reserved beyond its items (a tree's metadata holding embedded baskets
/// is larger than its branches need).
fn shrunk<T>(mut v: Vec<T>) -> Vec<T> {
    v.shrink_to_fit();
    v
}

/// TIOFeatures' bit for baskets written without entry offsets (TBasket's kGenerateOffsetMap).
const GENERATE_OFFSET_MAP: u8 = 1;

/// The bits of a streamed TIOFeatures (its fIOBits). ROOT writes a zero byte when no feature
/// is set, else four bytes before the bits.
fn read_io_bits(cur: &mut Cursor) -> Result<u8> {
    let v = read_version(cur, "TIOFeatures")?;
    let bits = match cur.u8("TIOFeatures header")? {
        0 => 0,
        _ => {
            cur.skip(3)?;
            cur.u8("TIOFeatures fIOBits")?
        }
    };
    v.skip_to_end(cur, "TIOFeatures")?;
    Ok(bits)
}

#[cfg(test)]
#[path = "tree_tests.rs"]
mod tests;
