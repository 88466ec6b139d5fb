//! Reading RNTuple fields: a `Table` whose units are one column's pages in one cluster. A
//! step's plan is the pages of the columns its fields read, in its clusters; each unit decodes
//! (pages decompressed and unpacked in parallel) into one buffer; fields are assembled over
//! whole clusters and cut to the entries asked for.

use super::Ntuple;
use crate::engine::file::RootFile;
use crate::engine::output::FieldArray;
use crate::engine::recycle::OutputBytes;
use crate::engine::table::Table;
use crate::error::{Error, Result};
use crate::format::rntuple::assemble::{assemble, offsets, Columns, Decoded, Offsets};
use crate::format::rntuple::clusters::{column_range, Cluster, ColumnRange, PageSource};
use crate::format::rntuple::column::Coding;
use crate::format::rntuple::fields::{slots, Node, Slot};
use crate::format::rntuple::page::{check_page, packed_page_into, stored_len, Packed};
use crate::format::rntuple::page_list::PageInfo;
use crate::source::ByteRange;
use async_trait::async_trait;
use bytes::Bytes;
use rayon::prelude::*;
use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::sync::{Arc, Mutex};

thread_local! {
    /// Each thread decompresses pages into one buffer, grown to the largest page it has seen.
    static PAGE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Elements a unit may hold of zeros that no page stores (a deferred column before its first
/// element): bounded, since only the cluster's entry count, not data, says how many.
const MAX_ZERO_BYTES: u64 = 1 << 32;

/// One column's pages in one cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ColumnChunk {
    /// The physical column (the representation active in the cluster).
    pub column: usize,
    /// The cluster's index among all clusters.
    pub cluster: usize,
}

impl Ntuple {
    fn range_of(&self, unit: &ColumnChunk) -> Result<ColumnRange> {
        let cluster = self.cluster(unit.cluster).ok_or_else(|| {
            Error::Cancelled(format!(
                "cluster {} read before its page list",
                unit.cluster
            ))
        })?;
        column_range(&self.desc, &[unit.column], &cluster, &self.origin)
    }

    fn coding(&self, column: usize) -> Coding {
        self.desc.schema.columns[column].coding()
    }

    /// The unit of `slot` in `cluster`: its active column there.
    fn unit(&self, slot: &Slot, cluster: &Cluster) -> Result<ColumnChunk> {
        let range = column_range(&self.desc, &slot.candidates, cluster, &self.origin)?;
        Ok(ColumnChunk {
            column: range.column,
            cluster: cluster.index,
        })
    }
}

#[async_trait]
impl Table for Ntuple {
    type Unit = ColumnChunk;
    type Decoded = Decoded;
    type Item = FieldArray;

    fn file(&self) -> &RootFile {
        &self.file
    }

    fn entries(&self) -> u64 {
        self.desc.entries()
    }

    fn item_count(&self) -> usize {
        self.items.len()
    }

    fn path(&self, item: usize) -> String {
        self.items[item].0.clone()
    }

    fn check(&self, items: &[usize]) -> Result<()> {
        for &i in items {
            let (path, field, node) = self.items.get(i).ok_or_else(|| {
                Error::InvalidArgument(format!("no field number {i} in {}", self.origin))
            })?;
            if let Err(u) = node {
                return Err(Error::UnsupportedBranch {
                    file: self.file.name().to_string(),
                    branch: path.clone(),
                    typename: self.desc.field(*field).type_name.clone(),
                    reason: if u.field == *field {
                        u.reason.clone()
                    } else {
                        format!(
                            "its field '{}': {}",
                            self.desc.field(u.field).name,
                            u.reason
                        )
                    },
                });
            }
        }
        Ok(())
    }

    async fn plan(&self, items: &[usize], start: u64, stop: u64) -> Result<Vec<ColumnChunk>> {
        self.check(items)?;
        if start >= stop {
            return Ok(Vec::new());
        }
        let clusters = self.clusters(start, stop).await?;
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        for &i in items {
            let Ok(node) = &self.items[i].2 else { continue };
            for slot in slots(node) {
                for c in &clusters {
                    let unit = self
                        .unit(slot, c)
                        .map_err(|e| e.in_file(self.file.name()))?;
                    if seen.insert(unit) {
                        out.push(unit);
                    }
                }
            }
        }
        Ok(out)
    }

    fn ranges(&self, unit: &ColumnChunk) -> Vec<ByteRange> {
        let Ok(range) = self.range_of(unit) else {
            return Vec::new();
        };
        range
            .pages
            .iter()
            .filter_map(|p| match p {
                PageSource::Stored(page) => {
                    Some(ByteRange::new(page.locator.offset, stored_len(page)))
                }
                PageSource::Zeros(_) => None,
            })
            .collect()
    }

    fn decoded_estimate(&self, unit: &ColumnChunk) -> u64 {
        let size = self
            .coding(unit.column)
            .kind
            .element()
            .map_or(0, |e| e.size() as u64);
        self.range_of(unit)
            .map_or(0, |r| r.elements.saturating_mul(size))
    }

    fn decode(&self, unit: &ColumnChunk, stored: &[Bytes]) -> Result<Decoded> {
        self.decode_unit(unit, stored)
            .map_err(|e| e.in_file(self.file.name()))
    }

    fn decoded_len(&self, decoded: &Decoded) -> u64 {
        decoded.data.len as u64
    }

    async fn assemble(
        &self,
        items: &[usize],
        start: u64,
        stop: u64,
        units: Vec<(ColumnChunk, Arc<Decoded>)>,
    ) -> Result<Vec<FieldArray>> {
        let clusters = if start < stop {
            self.clusters(start, stop).await?
        } else {
            Vec::new()
        };
        let counts: Vec<u64> = clusters.iter().map(|c| c.summary.entries).collect();
        let base = clusters.first().map_or(start, |c| c.summary.first_entry);
        let mut next = base;
        for c in &clusters {
            if c.summary.first_entry != next {
                return Err(Error::format(
                    format!("{} cluster {}", self.origin, c.index),
                    format!(
                        "a cluster starting at entry {next}, found {}",
                        c.summary.first_entry
                    ),
                )
                .in_file(self.file.name()));
            }
            next += c.summary.entries;
        }
        if start < stop && (base > start || next < stop) {
            return Err(Error::format(
                self.origin.clone(),
                format!("clusters holding entries {start}..{stop}, found {base}..{next}"),
            )
            .in_file(self.file.name()));
        }
        let nodes: Vec<(String, &crate::format::rntuple::fields::Node)> = items
            .iter()
            .filter_map(|&i| {
                self.items[i]
                    .2
                    .as_ref()
                    .ok()
                    .map(|n| (self.items[i].0.clone(), n))
            })
            .collect();
        let columns = UnitMap::new(&clusters, units, nodes.iter().map(|(_, n)| *n));
        let origin = |path: &str| format!("{} field '{path}'", self.origin);
        let (from, to) = ((start - base) as usize, (stop - base) as usize);
        crate::engine::cpu_turns::cpu_work(|| {
            nodes
                .par_iter()
                .map(|(path, node)| {
                    let array = assemble(node, &counts, &columns, &origin(path))
                        .map_err(|e| e.in_file(self.file.name()))?;
                    Ok(FieldArray {
                        field: path.clone(),
                        entries: stop - start,
                        array: array.slice(from, to),
                    })
                })
                .collect()
        })
        .await
    }

    fn item_len(&self, item: &FieldArray) -> u64 {
        item.array.nbytes() as u64
    }

    /// The index column of a collection's field or size (they share its offsets).
    fn shares_with(&self, item: usize) -> Option<usize> {
        match self.items.get(item)?.2.as_ref().ok()? {
            Node::Cardinality { slot: offsets, .. }
            | Node::List { offsets, .. }
            | Node::Strings { offsets, .. }
            | Node::Optional { offsets, .. } => offsets.candidates.first().copied(),
            _ => None,
        }
    }
}

impl Ntuple {
    fn decode_unit(&self, unit: &ColumnChunk, stored: &[Bytes]) -> Result<Decoded> {
        let range = self.range_of(unit)?;
        let coding = self.coding(unit.column);
        let origin = |what: &str| {
            format!(
                "{} column {} (field '{}') cluster {} {what}",
                self.origin,
                unit.column,
                self.desc
                    .field(self.desc.schema.columns[unit.column].field)
                    .name,
                unit.cluster
            )
        };
        let element = coding
            .kind
            .element()
            .ok_or_else(|| {
                Error::format(
                    origin(""),
                    format!(
                        "a column type this reader knows, found {}",
                        coding.kind.name()
                    ),
                )
            })?
            .size();
        let zeros: u64 = range
            .pages
            .iter()
            .map(|p| match p {
                PageSource::Zeros(n) => *n,
                PageSource::Stored(_) => 0,
            })
            .sum();
        if zeros.saturating_mul(element as u64) > MAX_ZERO_BYTES {
            return Err(Error::format(
                origin(""),
                format!("at most {MAX_ZERO_BYTES} bytes of a deferred column's zeros, found {zeros} elements"),
            ));
        }
        // Every stored page is checked to hold its elements' bytes (raw, or as its compression
        // blocks declare) before the output is sized from their counts.
        let mut stored = stored.iter();
        let mut pages = Vec::with_capacity(range.pages.len());
        for p in &range.pages {
            let bytes = match p {
                PageSource::Stored(page) => {
                    let bytes = stored.next().ok_or_else(|| {
                        Error::Cancelled(format!(
                            "the page at file offset {} was not fetched",
                            page.locator.offset
                        ))
                    })?;
                    check_page(&coding, page, bytes, "").map_err(|e| at_page(e, &origin, page))?;
                    Some(bytes)
                }
                PageSource::Zeros(_) => None,
            };
            pages.push((*p, bytes));
        }
        let len = range.elements as usize * element;
        if coding.kind.is_index() {
            // After a 0: one cluster's offsets as they are (`Decoded::ends`), from the pool.
            let mut ends = crate::engine::recycle::offsets_buffer(range.elements as usize + 1);
            let spare = &mut ends.spare_capacity_mut()[..range.elements as usize + 1];
            spare[0].write(0);
            // SAFETY: the unwritten i64s viewed as unwritten bytes (`len` of them after the 0).
            let out = unsafe {
                std::slice::from_raw_parts_mut(
                    spare[1..].as_mut_ptr().cast::<MaybeUninit<u8>>(),
                    len,
                )
            };
            decode_pages(&coding, element, pages, out, &origin)?;
            // SAFETY: the 0 and every element were written.
            unsafe { ends.set_len(range.elements as usize + 1) };
            return Decoded::index(coding.kind, ends, || origin(""));
        }
        // Not zeroed: the pages' decoding writes every byte (their elements add up to the range's).
        let mut data = OutputBytes::new(len);
        decode_pages(&coding, element, pages, data.bytes(), &origin)?;
        Ok(Decoded {
            kind: coding.kind,
            elements: range.elements,
            // SAFETY: every page's decoding wrote its part, and the parts cover the data.
            data: unsafe { data.assume_written() },
            ends: None,
        })
    }
}

/// Each of `pages` (stored, with its bytes, or zeros) decompressed into its thread's buffer and
/// decoded into its place in `out`, in parallel; their elements of `element` bytes fill `out`.
fn decode_pages(
    coding: &Coding,
    element: usize,
    pages: Vec<(PageSource, Option<&Bytes>)>,
    out: &mut [MaybeUninit<u8>],
    origin: &(dyn Fn(&str) -> String + Sync),
) -> Result<()> {
    let mut rest = out;
    let mut jobs = Vec::with_capacity(pages.len());
    for (p, bytes) in pages {
        let n = match p {
            PageSource::Stored(page) => page.elements as usize,
            PageSource::Zeros(n) => n as usize,
        };
        let (head, tail) = rest.split_at_mut(n * element);
        jobs.push((p, bytes, n, head));
        rest = tail;
    }
    assert!(rest.is_empty(), "a column range's pages hold its elements");
    jobs.into_par_iter()
        .try_for_each(|(p, bytes, n, out)| match (p, bytes) {
            (PageSource::Stored(page), Some(bytes)) => PAGE.with(|cell| {
                let mut buffer = cell.borrow_mut();
                let packed = packed_page_into(coding, &page, bytes, &mut buffer, "")
                    .map_err(|e| at_page(e, origin, &page))?;
                let packed = match packed {
                    Packed::Stored(body) => body,
                    Packed::Decompressed(n) => &buffer[..n],
                };
                coding.decode_into(packed, n, out);
                Ok(())
            }),
            _ => {
                coding.decode_into(&vec![0u8; coding.packed_len(n as u64) as usize], n, out);
                Ok(())
            }
        })
}

/// An error of a page's checks or decompression, raised with an empty origin, placed at the
/// page: named only when it fails (naming every page up front was two `format!`s per page,
/// about 1.5 % of a read's samples with their allocations).
fn at_page(e: Error, origin: &(dyn Fn(&str) -> String + Sync), page: &PageInfo) -> Error {
    match e {
        Error::Format {
            file,
            location,
            expected,
        } => Error::Format {
            file,
            // The page functions' locations start with the origin they were given ("").
            location: origin(&format!(
                "page at file offset {}{location}",
                page.locator.offset
            )),
            expected,
        },
        other => other,
    }
}

/// The decoded units of a read, handed to assembly: each one given away on its last use, so
/// that a buffer used once moves into its array instead of being copied.
struct UnitMap {
    /// Per (column, position of the cluster in the read): the unit and its uses left.
    units: Mutex<HashMap<(usize, usize), WithUsesLeft>>,
    /// Offsets built so far, by index column and the clusters' entries: the fields of one
    /// collection share them.
    offsets: Mutex<HashMap<OffsetsKey, Arc<Offsets>>>,
}

type WithUsesLeft = (Arc<Decoded>, usize);

impl Drop for UnitMap {
    fn drop(&mut self) {
        let units = self.units.get_mut().unwrap_or_else(|e| e.into_inner());
        for (_, (unit, _)) in units.drain() {
            give_back_ends(unit);
        }
    }
}

/// An index column's ends that no array shares (a read of several clusters copies them into
/// its offsets) back to the pool they came from, as other outputs go back when dropped.
fn give_back_ends(unit: Arc<Decoded>) {
    if let Ok(Decoded {
        data,
        ends: Some(ends),
        ..
    }) = Arc::try_unwrap(unit)
    {
        drop(data); // it views the ends
        if let Ok(ends) = Arc::try_unwrap(ends) {
            crate::engine::recycle::give_back_offsets(ends);
        }
    }
}

/// An index column's candidates and the clusters' entries: what one collection's offsets are built from.
type OffsetsKey = (Vec<usize>, Vec<u64>);

impl UnitMap {
    fn new<'a>(
        clusters: &[Cluster],
        units: Vec<(ColumnChunk, Arc<Decoded>)>,
        nodes: impl Iterator<Item = &'a crate::format::rntuple::fields::Node>,
    ) -> Self {
        let position: HashMap<usize, usize> = clusters
            .iter()
            .enumerate()
            .map(|(k, c)| (c.index, k))
            .collect();
        let mut map: HashMap<(usize, usize), (Arc<Decoded>, usize)> = units
            .into_iter()
            .filter_map(|(u, d)| Some(((u.column, *position.get(&u.cluster)?), (d, 0))))
            .collect();
        for node in nodes {
            for slot in slots(node) {
                for k in 0..clusters.len() {
                    if let Some(c) = slot.candidates.iter().find(|&&c| map.contains_key(&(c, k))) {
                        map.get_mut(&(*c, k)).unwrap().1 += 1;
                    }
                }
            }
        }
        UnitMap {
            units: Mutex::new(map),
            offsets: Mutex::new(HashMap::new()),
        }
    }
}

impl Columns for UnitMap {
    fn get(&self, slot: &Slot, k: usize) -> Result<Arc<Decoded>> {
        let mut units = self.units.lock().unwrap();
        let key = slot
            .candidates
            .iter()
            .map(|&c| (c, k))
            .find(|key| units.contains_key(key))
            .ok_or_else(|| {
                Error::Cancelled(format!(
                    "columns {:?} of cluster {k} were not decoded",
                    slot.candidates
                ))
            })?;
        let (decoded, uses) = units.get_mut(&key).unwrap();
        *uses = uses.saturating_sub(1);
        if *uses == 0 {
            return Ok(units.remove(&key).unwrap().0);
        }
        Ok(decoded.clone())
    }

    fn offsets_buffer(&self, n: usize) -> Vec<i64> {
        crate::engine::recycle::offsets_buffer(n)
    }

    fn copied(&self, unit: Arc<Decoded>) {
        give_back_ends(unit);
    }

    fn offsets(&self, slot: &Slot, counts: &[u64], origin: &str) -> Result<Arc<Offsets>> {
        let key = (slot.candidates.clone(), counts.to_vec());
        if let Some(built) = self.offsets.lock().unwrap().get(&key) {
            return Ok(built.clone());
        }
        // Built outside the lock (fields assemble in parallel); the first one built is kept.
        let built = Arc::new(offsets(slot, counts, self, origin)?);
        Ok(self
            .offsets
            .lock()
            .unwrap()
            .entry(key)
            .or_insert(built)
            .clone())
    }
}
