//! The TTree writer: entries fill one basket per branch until the layout policy closes the
//! cluster; a closed cluster's baskets compress on every core (rayon) while the next one fills,
//! and are written together when it closes in turn, so a cluster's baskets lie side by side. The
//! tree's metadata (and, at close, the streamer infos and keys list) is written after the last
//! cluster, in the file's tail.

use super::branches::{flat_arrays, leaf_title, plan, Branch, Source, Storage};
use super::file::{DirectoryId, FileWriter};
use super::fill::{bytes, fill, integers, lengths, BasketBuffer, MAX_BASKET};
use super::layout::ClusterPolicy;
use super::{
    check_arrays, map_largest_first, spawn_compression, Column, TableOptions, TableWriter,
};
use crate::error::{Error, Result};
use crate::format::array::{Array, DType};
use crate::format::directory::Key;
use crate::format::streamers::StreamerInfo;
use crate::format::writing::basket::{
    basket_key_len, write_basket_header, write_entry_offsets, BasketFields,
};
use crate::format::writing::classes::class;
use crate::format::writing::directory::{datime_now, BIG_KEY_VERSION};
use crate::format::writing::tree::{
    cluster_ranges, cpp_type, leaf_type, stl_checksum, write_tree, BasketRecord, BranchRecord,
    ElementRecord, LeafRecord, TreeRecord,
};
use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::mpsc;

/// fEntryOffsetLen of branches whose entries vary in size (ROOT's default).
const ENTRY_OFFSET_LEN: i32 = 1000;
/// ROOT's std::string class version and checksum, as TBranchElement records them.
const STRING_VERSION: i16 = 2;
const STRING_CHECKSUM: u32 = 1_852_773_892;
/// The class version ROOT gives STL collections in a TBranchElement.
const COLLECTION_CLASS_VERSION: i16 = 6;

/// What is on disk of one branch.
#[derive(Default)]
pub(super) struct Written {
    pub baskets: Vec<BasketRecord>,
    pub tot_bytes: i64,
    pub zip_bytes: i64,
    pub basket_size: usize,
    /// A counter's largest count.
    pub maximum: i64,
}

/// A basket compressed (or stored as it is, when compression does not shrink it).
struct Packed {
    object_len: usize,
    stored: Vec<u8>,
    fields: BasketFields,
}

/// A closed cluster compressing in the background.
struct Pending {
    baskets: mpsc::Receiver<Vec<Packed>>,
    first_entry: u64,
}

pub struct TreeWriter {
    pub(super) name: String,
    pub(super) dir: DirectoryId,
    columns: Vec<Column>,
    options: TableOptions,
    aliases: Vec<(String, String)>,
    pub(super) branches: Vec<Branch>,
    /// Bytes of one number of each branch (1 for strings).
    pub(super) sizes: Vec<usize>,
    pub(super) keylens: Vec<u32>,
    pub(super) written: Vec<Written>,
    filling: Vec<BasketBuffer>,
    pub(super) filling_entries: u64,
    filling_bytes: u64,
    pending: Option<Pending>,
    pub(super) entries: u64,
    /// Entries of each cluster written or compressing.
    pub(super) clusters: Vec<u64>,
    policy: ClusterPolicy,
}

impl TreeWriter {
    /// A tree `name` in `dir` with these columns (records split into prefixed branches, lists
    /// with a counter as counted leaves); `aliases` are (alias, expression) pairs.
    pub fn new(
        file: &FileWriter,
        dir: DirectoryId,
        name: &str,
        columns: Vec<Column>,
        options: TableOptions,
        aliases: Vec<(String, String)>,
    ) -> Result<Self> {
        let bad = |what: &str| Error::InvalidArgument(format!("{}: {what}", file.name()));
        if name.is_empty() || name.contains('/') || name.contains(';') {
            return Err(bad(&format!("'{name}' cannot name a tree")));
        }
        for c in &columns {
            if c.name.is_empty() || c.name.contains(['/', '[', ']', ';']) {
                return Err(bad(&format!(
                    "tree '{name}': '{}' cannot name a branch",
                    c.name
                )));
            }
        }
        let branches = plan(name, &columns).map_err(|e| e.in_file(file.name()))?;
        let sizes = branches
            .iter()
            .map(|b| match b.storage {
                Storage::Numbers { dtype, .. }
                | Storage::Counted { dtype, .. }
                | Storage::Vector(dtype)
                | Storage::VectorVector(dtype) => dtype.size(),
                Storage::String | Storage::VectorString => 1,
            })
            .collect();
        let keylens = branches
            .iter()
            .map(|b| basket_key_len(&b.name, name) as u32)
            .collect();
        let n = branches.len();
        Ok(Self {
            name: name.to_string(),
            dir,
            columns,
            policy: ClusterPolicy::new(&options),
            options,
            aliases,
            branches,
            sizes,
            keylens,
            written: (0..n).map(|_| Written::default()).collect(),
            filling: (0..n).map(|_| BasketBuffer::default()).collect(),
            filling_entries: 0,
            filling_bytes: 0,
            pending: None,
            entries: 0,
            clusters: Vec::new(),
        })
    }

    /// Bytes entries `a..b` of `entries` take in the baskets.
    fn bytes(&self, entries: &impl Serialize, a: usize, b: usize) -> u64 {
        self.branches
            .iter()
            .zip(&self.sizes)
            .enumerate()
            .map(|(i, (branch, &size))| entries.bytes(i, branch, size, a, b) as u64)
            .sum()
    }

    /// The most entries from `a` (at most `n`) that fit in `room` bytes.
    fn fit(&self, entries: &impl Serialize, a: usize, n: usize, room: u64) -> usize {
        if self.bytes(entries, a, n) <= room {
            return n - a;
        }
        let (mut lo, mut hi) = (0, n - a); // lo fits, hi does not
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.bytes(entries, a, a + mid) <= room {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Append the `n` entries of `entries` to the baskets being filled, closing clusters where
    /// the layout policy says (arrays given to `extend`, or serialized entries moved by
    /// `raw::rewrite_trees`).
    pub(super) fn append(
        &mut self,
        file: &mut FileWriter,
        n: usize,
        entries: &impl Serialize,
    ) -> Result<()> {
        let mut at = 0;
        while at < n {
            let room = self.policy.threshold().saturating_sub(self.filling_bytes);
            let mut k = self.fit(entries, at, n, room);
            if k == 0 {
                if self.filling_entries > 0 {
                    self.close_cluster(file)?;
                    continue;
                }
                k = 1; // one entry larger than a cluster: a cluster of its own
            }
            let added = self.bytes(entries, at, at + k);
            let (branches, sizes) = (&self.branches, &self.sizes);
            self.filling
                .par_iter_mut()
                .enumerate()
                .try_for_each(|(i, buffer)| {
                    entries.fill(i, &branches[i], sizes[i], at, at + k, buffer)
                })?;
            at += k;
            self.entries += k as u64;
            self.filling_entries += k as u64;
            self.filling_bytes += added;
            if at < n {
                self.close_cluster(file)?;
            }
        }
        Ok(())
    }

    /// Lists sharing a counter must agree with it (and with each other), entry by entry; the
    /// largest count is kept for the counter's leaf.
    fn check_counters(&mut self, arrays: &[Array]) -> Result<()> {
        let mut counted: HashMap<usize, Vec<i64>> = HashMap::new();
        for (i, branch) in self.branches.iter().enumerate() {
            let (Some(c), Source::Array(list)) = (branch.counter, branch.source) else {
                continue;
            };
            let counter = &self.branches[c];
            match counter.source {
                Source::Lengths(reference) if reference == list => {}
                Source::Lengths(reference) => {
                    if lengths(&arrays[reference]).ne(lengths(&arrays[list])) {
                        let entry = lengths(&arrays[reference])
                            .zip(lengths(&arrays[list]))
                            .position(|(x, y)| x != y)
                            .unwrap_or(0);
                        return Err(self.mismatch(i, c, entry));
                    }
                }
                Source::Array(values) => {
                    let counts = counted
                        .entry(values)
                        .or_insert_with(|| integers(&arrays[values]));
                    if let Some(entry) = lengths(&arrays[list])
                        .zip(counts.iter())
                        .position(|(n, &count)| count != n)
                    {
                        return Err(self.mismatch(i, c, entry));
                    }
                }
            }
        }
        for (i, branch) in self.branches.iter().enumerate() {
            if !branch.is_counter {
                continue;
            }
            let max = match branch.source {
                Source::Lengths(list) => lengths(&arrays[list]).max(),
                Source::Array(values) => match counted.get(&values) {
                    Some(counts) => counts.iter().copied().max(),
                    None => integers(&arrays[values]).into_iter().max(),
                },
            };
            let w = &mut self.written[i];
            w.maximum = w.maximum.max(max.unwrap_or(0));
        }
        Ok(())
    }

    fn mismatch(&self, branch: usize, counter: usize, entry: usize) -> Error {
        Error::InvalidArgument(format!(
            "tree '{}': branch '{}' has another number of items than its counter '{}' in entry {}",
            self.name,
            self.branches[branch].name,
            self.branches[counter].name,
            self.entries + entry as u64
        ))
    }

    /// Close the cluster being filled: wait for the one compressing and write it, then compress
    /// this one in the background.
    pub(super) fn close_cluster(&mut self, file: &mut FileWriter) -> Result<()> {
        let entries = self.filling_entries;
        let buffers = std::mem::replace(
            &mut self.filling,
            (0..self.branches.len())
                .map(|_| BasketBuffer::default())
                .collect(),
        );
        self.filling_entries = 0;
        self.filling_bytes = 0;
        let mut jobs = Vec::with_capacity(buffers.len());
        for (i, buffer) in buffers.into_iter().enumerate() {
            let branch = &self.branches[i];
            let keylen = self.keylens[i];
            let data_len = buffer.data.len();
            let mut object = buffer.data;
            let nev_buf_size = if branch.varies() {
                write_entry_offsets(&mut object, &buffer.starts, keylen);
                ENTRY_OFFSET_LEN
            } else {
                (data_len as u64).checked_div(entries).unwrap_or(0) as i32
            };
            if object.len() as u64 + keylen as u64 > MAX_BASKET as u64 {
                return Err(Error::InvalidArgument(format!(
                    "tree '{}': the basket of branch '{}' would take {} bytes, more than a TBasket holds (give the tree a smaller cluster_bytes)",
                    self.name, branch.name, object.len()
                )));
            }
            let fields = BasketFields {
                buffer_size: object.len() as i32,
                nev_buf_size,
                entries: entries as i32,
                last: keylen as i32 + data_len as i32,
            };
            jobs.push((object, fields));
        }
        let compression = self.options.compression;
        let (send, baskets) = mpsc::sync_channel(1);
        spawn_compression(move || {
            let packed = map_largest_first(
                jobs,
                |(object, _)| object.len(),
                |(object, fields)| Packed {
                    object_len: object.len(),
                    stored: compression.compress(&object).unwrap_or(object),
                    fields,
                },
            );
            let _ = send.send(packed);
        });
        // The previous cluster is written only once this one compresses too: waiting for it
        // first would leave a core idle while its last baskets compress.
        let previous = self.pending.replace(Pending {
            baskets,
            first_entry: self.entries - entries,
        });
        self.clusters.push(entries);
        match previous {
            Some(previous) => self.write_cluster(file, previous),
            None => Ok(()),
        }
    }

    /// Wait for the cluster compressing, and write its baskets.
    pub(super) fn write_pending(&mut self, file: &mut FileWriter) -> Result<()> {
        match self.pending.take() {
            Some(pending) => self.write_cluster(file, pending),
            None => Ok(()),
        }
    }

    /// Wait for `pending`'s compression, and write its baskets side by side.
    fn write_cluster(&mut self, file: &mut FileWriter, pending: Pending) -> Result<()> {
        let baskets = pending
            .baskets
            .recv()
            .map_err(|_| Error::Cancelled(format!("tree '{}': compression stopped", self.name)))?;
        let (mut uncompressed, mut compressed) = (0u64, 0u64);
        let seek_pdir = file.directory_seek(self.dir);
        for (i, packed) in baskets.into_iter().enumerate() {
            let keylen = self.keylens[i] as usize;
            let nbytes = keylen + packed.stored.len();
            let seek = file.allocate(nbytes as u64);
            let w = &mut self.written[i];
            let key = Key {
                nbytes: nbytes as u32,
                version: BIG_KEY_VERSION,
                objlen: packed.object_len as u32,
                datime: datime_now(),
                keylen: keylen as u16,
                cycle: w.baskets.len() as i16,
                seek_key: seek,
                seek_pdir,
                class_name: "TBasket".into(),
                name: self.branches[i].name.clone(),
                title: self.name.clone(),
            };
            let name = &self.branches[i].name;
            let context = |e: Error| {
                e.map_io_message(|m| format!("tree '{}', branch '{name}': {m}", self.name))
            };
            file.write_at(seek, &write_basket_header(&key, &packed.fields))
                .map_err(context)?;
            file.write_at(seek + keylen as u64, &packed.stored)
                .map_err(context)?;
            w.baskets.push(BasketRecord {
                seek,
                bytes: nbytes as u32,
                entry_start: pending.first_entry,
            });
            w.tot_bytes += (keylen + packed.object_len) as i64;
            w.zip_bytes += nbytes as i64;
            w.basket_size = w.basket_size.max(packed.object_len);
            uncompressed += packed.object_len as u64;
            compressed += packed.stored.len() as u64;
        }
        self.policy.observe(uncompressed, compressed);
        Ok(())
    }

    /// The tree's record, from what was written.
    fn record(&self) -> TreeRecord {
        let (ranges, auto_flush) = cluster_ranges(&self.clusters);
        let branches: Vec<BranchRecord> = self
            .branches
            .iter()
            .zip(&self.written)
            .map(|(b, w)| self.branch_record(b, w))
            .collect();
        let tot_bytes = branches.iter().map(|b| b.tot_bytes).sum();
        let zip_bytes = branches.iter().map(|b| b.zip_bytes).sum();
        TreeRecord {
            name: self.name.clone(),
            title: self.options.title.clone(),
            entries: self.entries,
            tot_bytes,
            zip_bytes,
            flushed_bytes: if self.clusters.is_empty() {
                0
            } else {
                zip_bytes
            },
            auto_flush,
            cluster_ranges: ranges,
            branches,
            aliases: self.aliases.clone(),
        }
    }

    fn branch_record(&self, b: &Branch, w: &Written) -> BranchRecord {
        let counter = b.counter.map(|c| self.branches[c].name.as_str());
        let (leaf, element) = match &b.storage {
            Storage::Numbers { dtype, dims } | Storage::Counted { dtype, dims } => {
                let (class, letter) = leaf_type(*dtype).expect("checked by plan");
                let leaf = LeafRecord {
                    class,
                    name: b.name.clone(),
                    title: leaf_title(&b.name, counter, dims),
                    len: dims.iter().product::<usize>() as i32,
                    len_type: dtype.size() as i32,
                    is_unsigned: letter.is_ascii_lowercase(),
                    count: b.counter,
                    maximum: w.maximum,
                    is_range: b.is_counter,
                };
                (leaf, None)
            }
            other => {
                let (class_name, kind, split_level) = match other {
                    Storage::Vector(d) => (format!("vector<{}>", cpp(*d)), 0, 99),
                    Storage::VectorVector(d) => (format!("vector<vector<{}> >", cpp(*d)), 0, 99),
                    Storage::VectorString => ("vector<string>".to_string(), 0, 99),
                    _ => ("string".to_string(), -1, 0),
                };
                let (checksum, class_version) = if class_name == "string" {
                    (STRING_CHECKSUM, STRING_VERSION)
                } else {
                    (stl_checksum(&class_name), COLLECTION_CLASS_VERSION)
                };
                let leaf = LeafRecord {
                    class: "TLeafElement",
                    name: b.name.clone(),
                    title: b.name.clone(),
                    len: 1,
                    len_type: 0,
                    is_unsigned: false,
                    count: None,
                    maximum: 0,
                    is_range: false,
                };
                let element = ElementRecord {
                    class_name,
                    checksum,
                    class_version,
                    kind,
                    split_level,
                };
                (leaf, Some(element))
            }
        };
        BranchRecord {
            name: b.name.clone(),
            title: b.title.clone(),
            compress: self.options.compression.setting(),
            basket_size: w.basket_size.clamp(512, i32::MAX as usize) as i32,
            entry_offset_len: if b.varies() { ENTRY_OFFSET_LEN } else { 0 },
            entries: self.entries,
            tot_bytes: w.tot_bytes,
            zip_bytes: w.zip_bytes,
            baskets: w.baskets.clone(),
            leaf,
            element,
        }
    }

    /// The streamer infos of the classes this tree is made of.
    fn streamers(&self, record: &TreeRecord) -> Vec<StreamerInfo> {
        let mut names = vec![
            "TTree",
            "TNamed",
            "TObject",
            "TAttLine",
            "TAttFill",
            "TAttMarker",
            "ROOT::TIOFeatures",
            "TBranch",
            "TLeaf",
        ];
        for b in &record.branches {
            if !names.contains(&b.leaf.class) {
                names.push(b.leaf.class);
            }
        }
        if record.branches.iter().any(|b| b.element.is_some()) {
            names.push("TBranchElement");
        }
        names.extend([
            "TList",
            "TSeqCollection",
            "TCollection",
            "TString",
            "TBranchRef",
            "TRefTable",
            "TObjArray",
        ]);
        names
            .into_iter()
            .map(|n| class(n).expect("described in classes.rs").info())
            .collect()
    }
}

/// Entries to append to the baskets being filled, branch by branch (`i` the branch's index,
/// `size` the bytes of one of its numbers): arrays, or serialized entries of input baskets.
pub(super) trait Serialize: Sync {
    /// Bytes entries `a..b` of branch `i` take in its basket, offset table included.
    fn bytes(&self, i: usize, branch: &Branch, size: usize, a: usize, b: usize) -> usize;

    /// Append entries `a..b` of branch `i` to its basket.
    fn fill(
        &self,
        i: usize,
        branch: &Branch,
        size: usize,
        a: usize,
        b: usize,
        out: &mut BasketBuffer,
    ) -> Result<()>;
}

/// The flattened arrays `extend` was given, serialized as the branches store them.
struct Arrays<'a>(&'a [Array]);

impl Serialize for Arrays<'_> {
    fn bytes(&self, _: usize, branch: &Branch, size: usize, a: usize, b: usize) -> usize {
        bytes(branch, size, self.0, a, b)
    }

    fn fill(
        &self,
        _: usize,
        branch: &Branch,
        size: usize,
        a: usize,
        b: usize,
        out: &mut BasketBuffer,
    ) -> Result<()> {
        fill(branch, size, self.0, a, b, out)
    }
}

fn cpp(dtype: DType) -> &'static str {
    cpp_type(dtype).expect("checked by plan")
}

impl TableWriter for TreeWriter {
    fn name(&self) -> &str {
        &self.name
    }

    fn columns(&self) -> &[Column] {
        &self.columns
    }

    fn entries(&self) -> u64 {
        self.entries
    }

    fn extend(&mut self, file: &mut FileWriter, arrays: Vec<Array>) -> Result<()> {
        let n =
            check_arrays(&self.name, &self.columns, &arrays).map_err(|e| e.in_file(file.name()))?;
        if n == 0 {
            return Ok(());
        }
        let arrays = flat_arrays(&self.columns, arrays);
        self.check_counters(&arrays)
            .map_err(|e| e.in_file(file.name()))?;
        self.append(file, n, &Arrays(&arrays))
    }

    fn as_tree(&mut self) -> Option<&mut TreeWriter> {
        Some(self)
    }

    fn finish(mut self: Box<Self>, file: &mut FileWriter) -> Result<()> {
        if self.filling_entries > 0 {
            self.close_cluster(file)?;
        }
        self.write_pending(file)?;
        let record = self.record();
        file.add_streamers(self.streamers(&record));
        file.write_object(
            self.dir,
            "TTree",
            &self.name,
            &self.options.title,
            |keylen| write_tree(&record, keylen),
        )?;
        Ok(())
    }
}

#[cfg(test)]
#[path = "tree_tests.rs"]
mod tests;
