//! Fields to arrays: a field's node (see `fields.rs`) and its columns' decoded elements over
//! consecutive clusters become one `Array`. Index columns count from the start of each cluster;
//! the offsets here count from the first cluster read. Every count is checked against the
//! elements present, so inconsistent metadata is an error, never a wrong or out-of-bounds array.

use super::column::{ColumnType, Element, SWITCH_MEMORY_LEN};
use super::fields::{Node, Slot};
use crate::error::{Error, Result};
use crate::format::array::{AlignedBytes, Array, DType, IndexType, Layout, SharedBytes, Unwritten};
use std::mem::MaybeUninit;
use std::sync::Arc;

/// A column's elements in one cluster, in memory (`kind.element()`, native-endian).
#[derive(Clone, Debug, PartialEq)]
pub struct Decoded {
    pub kind: ColumnType,
    pub elements: u64,
    pub data: AlignedBytes,
    /// An index column's elements after a 0 (`data` views them there), checked never to
    /// decrease: the offsets of a read of this one cluster, shared as they are, not copied.
    pub ends: Option<Arc<Vec<i64>>>,
}

impl Decoded {
    /// An index column's decoded elements, `ends[1..]` after `ends[0] = 0`. `origin` names the
    /// column and cluster (called only for an error).
    pub fn index(
        kind: ColumnType,
        ends: Vec<i64>,
        origin: impl FnOnce() -> String,
    ) -> Result<Self> {
        debug_assert_eq!(ends.first(), Some(&0), "an index column's ends start at 0");
        // Checked in one pass that vectorizes; the place is looked for only when one decreases.
        let ordered = ends.windows(2).fold(true, |ok, w| ok & (w[0] <= w[1]));
        if !ordered {
            let (after, end) = first_decrease(&ends);
            return Err(Error::format(
                origin(),
                format!("offsets that never decrease, found {end} after {after}"),
            ));
        }
        let ends = Arc::new(ends);
        Ok(Decoded {
            kind,
            elements: ends.len() as u64 - 1,
            data: AlignedBytes::shared(Arc::new(Ends(ends.clone()))),
            ends: Some(ends),
        })
    }
}

/// The first two consecutive values of `values` where the second is the smaller.
fn first_decrease(values: &[i64]) -> (i64, i64) {
    values
        .windows(2)
        .map(|w| (w[0], w[1]))
        .find(|(a, b)| b < a)
        .unwrap_or_default()
}

/// The elements of `Decoded::ends` as bytes.
struct Ends(Arc<Vec<i64>>);

impl SharedBytes for Ends {
    fn bytes(&self) -> &[u8] {
        let elements = &self.0[1..];
        // SAFETY: the i64s' memory viewed as bytes (alignment 1, same length in bytes).
        unsafe { std::slice::from_raw_parts(elements.as_ptr().cast(), elements.len() * 8) }
    }
}

/// Where assembly finds decoded columns: the active column of `slot` in the `k`-th cluster read.
pub trait Columns: Sync {
    fn get(&self, slot: &Slot, k: usize) -> Result<Arc<Decoded>>;

    /// The offsets of the index column `slot` over clusters of `counts` entries. Fields of one
    /// collection share its index column: a source of columns may build them once for all.
    fn offsets(&self, slot: &Slot, counts: &[u64], origin: &str) -> Result<Arc<Offsets>> {
        offsets(slot, counts, self, origin).map(Arc::new)
    }

    /// An empty buffer for at least `n` offsets (a reader may hand out memory it keeps).
    fn offsets_buffer(&self, n: usize) -> Vec<i64> {
        Vec::with_capacity(n)
    }

    /// An index column's unit `offsets` copied from (a reader may keep its memory).
    fn copied(&self, _: Arc<Decoded>) {}
}

/// Assemble `node` over clusters holding `counts[k]` items of it each. `origin` names the field.
pub fn assemble(node: &Node, counts: &[u64], columns: &dyn Columns, origin: &str) -> Result<Array> {
    let bad = |what: String| Error::format(origin.to_string(), what);
    let total = counts.iter().try_fold(0u64, |a, &b| a.checked_add(b));
    let total = total.ok_or_else(|| bad("item counts that add up".into()))?;
    match node {
        Node::Numpy { slot, dtype } => {
            let data = numbers(slot, *dtype, counts, columns, origin)?;
            Ok(Array::numpy(*dtype, vec![], data))
        }
        Node::Cardinality { slot, dtype } => {
            let sizes = columns.offsets(slot, counts, origin)?;
            Ok(Array::numpy(
                *dtype,
                vec![],
                int_bytes(*dtype, &sizes.offsets),
            ))
        }
        Node::Strings {
            offsets: o, chars, ..
        } => {
            let o = columns.offsets(o, counts, origin)?;
            let bytes = numbers(chars, DType::U8, &o.child_counts, columns, origin)?;
            check_end(&o.offsets, bytes.len as u64, origin)?;
            let chars = Array::numpy(DType::U8, vec![], bytes).with_parameter("__array__", "char");
            Ok(Array::list_shared(o.offsets.clone(), chars).with_parameter("__array__", "string"))
        }
        Node::Regular { size, content } => {
            let child: Option<Vec<u64>> = counts
                .iter()
                .map(|&n| n.checked_mul(*size as u64))
                .collect();
            let child = child.ok_or_else(|| bad("array sizes that fit".into()))?;
            let content = assemble(content, &child, columns, origin)?;
            Ok(Array::regular(*size, total as usize, content))
        }
        Node::List {
            offsets: o,
            content,
            wide,
        } => {
            let o = columns.offsets(o, counts, origin)?;
            let content = assemble(content, &o.child_counts, columns, origin)?;
            check_end(&o.offsets, content.len() as u64, origin)?;
            Ok(Array::list_shared(o.offsets.clone(), content).with_index_type(index_type(*wide)))
        }
        Node::Optional {
            offsets: o,
            content,
            wide,
        } => {
            let o = columns.offsets(o, counts, origin)?;
            let content = assemble(content, &o.child_counts, columns, origin)?;
            check_end(&o.offsets, content.len() as u64, origin)?;
            let index = o
                .sizes()
                .zip(o.offsets.iter())
                .map(|(n, &at)| match n {
                    0 => Ok(-1),
                    1 => Ok(at),
                    n => Err(bad(format!("an optional value of 0 or 1 items, found {n}"))),
                })
                .collect::<Result<Vec<i64>>>()?;
            Ok(Array::option(index, content).with_index_type(index_type(*wide)))
        }
        Node::Record { names, contents } => {
            let contents = contents
                .iter()
                .map(|c| assemble(c, counts, columns, origin))
                .collect::<Result<Vec<_>>>()?;
            Ok(match names {
                Some(names) => Array::record(names.clone(), contents, total as usize),
                None => Array::tuple(contents, total as usize),
            })
        }
        Node::Variant { switch, contents } => variant(switch, contents, counts, columns, origin),
        Node::Unmasked(content) => {
            let content = assemble(content, counts, columns, origin)?;
            Ok(Layout::Unmasked {
                content: Box::new(content),
            }
            .into())
        }
    }
}

/// A slot's elements over the clusters, concatenated and converted to `dtype` (float
/// representations widen).
fn numbers(
    slot: &Slot,
    dtype: DType,
    counts: &[u64],
    columns: &dyn Columns,
    origin: &str,
) -> Result<AlignedBytes> {
    let mut chunks = Vec::with_capacity(counts.len());
    for (k, &n) in counts.iter().enumerate() {
        let chunk = columns.get(slot, k)?;
        check_elements(&chunk, n, k, origin)?;
        chunks.push(chunk);
    }
    // One cluster in its own dtype: hand its buffer over when nothing else holds it.
    if let [only] = chunks.as_slice() {
        if only.kind.element() == Some(Element::Number(dtype)) {
            let only = chunks.pop().unwrap();
            return Ok(Arc::try_unwrap(only)
                .map(|d| d.data)
                .unwrap_or_else(|a| a.data.clone()));
        }
    }
    let total: usize = counts.iter().map(|&n| n as usize).sum();
    let mut out = AlignedBytes::zeroed(total * dtype.size());
    let mut at = 0;
    for chunk in &chunks {
        let from = match chunk.kind.element() {
            Some(Element::Number(d)) => d,
            _ => {
                return Err(Error::format(
                    origin.to_string(),
                    format!("a number column, found {}", chunk.kind.name()),
                ))
            }
        };
        let n = chunk.elements as usize;
        let dst = &mut out.as_bytes_mut()[at..at + n * dtype.size()];
        widen(from, dtype, chunk.data.as_bytes(), dst);
        at += n * dtype.size();
    }
    Ok(out)
}

/// Copy `src` of `from` into `dst` of `to` (equal, or a wider float).
fn widen(from: DType, to: DType, src: &[u8], dst: &mut [u8]) {
    if from == to {
        dst.copy_from_slice(src);
        return;
    }
    let value = |s: &[u8]| -> f64 {
        match from {
            DType::F16 => half::f16::from_ne_bytes([s[0], s[1]]).to_f64(),
            DType::F32 => f32::from_ne_bytes(s.try_into().unwrap()) as f64,
            _ => f64::from_ne_bytes(s.try_into().unwrap()),
        }
    };
    for (s, d) in src
        .chunks_exact(from.size())
        .zip(dst.chunks_exact_mut(to.size()))
    {
        match to {
            DType::F32 => d.copy_from_slice(&(value(s) as f32).to_ne_bytes()),
            _ => d.copy_from_slice(&value(s).to_ne_bytes()),
        }
    }
}

/// An index column over consecutive clusters.
pub struct Offsets {
    /// `total + 1` offsets from the first cluster read.
    pub offsets: Arc<Vec<i64>>,
    /// Items of the content in each cluster.
    pub child_counts: Vec<u64>,
}

impl Offsets {
    /// Items of each entry.
    fn sizes(&self) -> impl ExactSizeIterator<Item = i64> + '_ {
        self.offsets.windows(2).map(|w| w[1] - w[0])
    }
}

/// An index column over the clusters: cluster-relative ends become offsets over all of them.
pub fn offsets(
    slot: &Slot,
    counts: &[u64],
    columns: &(impl Columns + ?Sized),
    origin: &str,
) -> Result<Offsets> {
    let mut chunks = Vec::with_capacity(counts.len());
    for (k, &n) in counts.iter().enumerate() {
        let chunk = columns.get(slot, k)?;
        check_elements(&chunk, n, k, origin)?;
        if !chunk.kind.is_index() {
            return Err(Error::format(
                origin.to_string(),
                format!("an index column, found {}", chunk.kind.name()),
            ));
        }
        chunks.push(chunk);
    }
    if let [only] = chunks.as_slice() {
        if let Some(ends) = &only.ends {
            // One cluster: its ends, after their 0, are the offsets (checked when decoded).
            return Ok(Offsets {
                offsets: ends.clone(),
                child_counts: vec![*ends.last().unwrap_or(&0) as u64],
            });
        }
    }
    let total: u64 = counts.iter().sum();
    let mut offsets = columns.offsets_buffer(total as usize + 1);
    let mut child_counts = Vec::with_capacity(counts.len());
    offsets.push(0i64);
    let mut base = 0i64;
    for (k, chunk) in chunks.iter().enumerate() {
        // Checked once after the loop, not entry by entry: it runs over every entry read.
        let (mut prev, mut ordered) = (0i64, true);
        offsets.extend(chunk.data.as_bytes().chunks_exact(8).map(|e| {
            let end = i64::from_ne_bytes(e.try_into().unwrap());
            ordered &= end >= prev;
            prev = end;
            base.wrapping_add(end)
        }));
        if !ordered {
            let ends = chunk.data.as_bytes().chunks_exact(8);
            let ends: Vec<i64> = ends
                .map(|e| i64::from_ne_bytes(e.try_into().unwrap()))
                .collect();
            let w = std::iter::once(0)
                .chain(ends.iter().copied())
                .collect::<Vec<_>>();
            let (after, end) = first_decrease(&w);
            return Err(Error::format(
                origin.to_string(),
                format!("offsets that never decrease in cluster {k}, found {end} after {after}"),
            ));
        }
        child_counts.push(prev as u64);
        base = base
            .checked_add(prev)
            .ok_or_else(|| Error::format(origin.to_string(), "offsets that fit 63 bits"))?;
    }
    for chunk in chunks {
        columns.copied(chunk);
    }
    Ok(Offsets {
        offsets: Arc::new(offsets),
        child_counts,
    })
}

fn variant(
    switch: &Slot,
    contents: &[Node],
    counts: &[u64],
    columns: &dyn Columns,
    origin: &str,
) -> Result<Array> {
    let bad = |what: String| Error::format(origin.to_string(), what);
    let total: u64 = counts.iter().sum();
    let mut tags = Vec::with_capacity(total as usize);
    let mut index = Vec::with_capacity(total as usize);
    // Per alternative: items in each cluster, and in the clusters before.
    let mut child_counts = vec![vec![0u64; counts.len()]; contents.len()];
    let mut base = vec![0i64; contents.len()];
    for (k, &n) in counts.iter().enumerate() {
        let chunk = columns.get(switch, k)?;
        check_elements(&chunk, n, k, origin)?;
        if chunk.kind != ColumnType::Switch {
            return Err(bad(format!("a Switch column, found {}", chunk.kind.name())));
        }
        let mut local = Vec::with_capacity(n as usize);
        for e in chunk.data.as_bytes().chunks_exact(SWITCH_MEMORY_LEN) {
            let at = i64::from_ne_bytes(e[..8].try_into().unwrap());
            let tag = u32::from_ne_bytes(e[8..12].try_into().unwrap()) as usize;
            if tag > contents.len() {
                return Err(bad(format!(
                    "a variant tag of at most {}, found {tag}",
                    contents.len()
                )));
            }
            if tag > 0 {
                child_counts[tag - 1][k] += 1;
            }
            local.push((tag, at));
        }
        for (tag, at) in local {
            tags.push(tag as i8);
            if tag == 0 {
                // The invalid state: the one missing value of the union's first member.
                index.push(0);
                continue;
            }
            // The index counts within the cluster; alternatives are concatenated over clusters.
            if at < 0 || at as u64 >= child_counts[tag - 1][k] {
                return Err(bad(format!(
                    "a variant index below {} in cluster {k}, found {at}",
                    child_counts[tag - 1][k]
                )));
            }
            index.push(base[tag - 1] + at);
        }
        for (b, c) in base.iter_mut().zip(&child_counts) {
            *b += c[k] as i64;
        }
    }
    let nones = Array::option(vec![-1], Layout::Empty.into());
    let mut members = vec![nones];
    for (node, counts) in contents.iter().zip(&child_counts) {
        members.push(assemble(node, counts, columns, origin)?);
    }
    Ok(Layout::Union {
        tags,
        index,
        contents: members,
    }
    .into())
}

fn check_elements(chunk: &Decoded, expected: u64, k: usize, origin: &str) -> Result<()> {
    if chunk.elements != expected {
        return Err(Error::format(
            origin.to_string(),
            format!(
                "{expected} elements of a {} column in cluster {k}, as its parent says, found {}",
                chunk.kind.name(),
                chunk.elements
            ),
        ));
    }
    Ok(())
}

fn check_end(offsets: &[i64], content: u64, origin: &str) -> Result<()> {
    let last = *offsets.last().unwrap_or(&0) as u64;
    if last != content {
        return Err(Error::format(
            origin.to_string(),
            format!("offsets ending at the content's {content} items, found {last}"),
        ));
    }
    Ok(())
}

fn index_type(wide: bool) -> IndexType {
    if wide {
        IndexType::I64
    } else {
        IndexType::I32
    }
}

fn int_bytes(dtype: DType, offsets: &[i64]) -> AlignedBytes {
    // Written in place, unzeroed: zeroing first was a pass of its own (a memset), and
    // collecting the bytes first and copying them cost more than the sizes.
    let n = offsets.len().saturating_sub(1);
    let width = if dtype == DType::I32 { 4 } else { 8 };
    let len = n * width;
    let mut words = Unwritten::<u64>::new(len.div_ceil(8));
    let slots = words.slots();
    // The padding after the last size belongs to no size.
    if let Some(last) = slots.last_mut() {
        last.write(0);
    }
    let sizes = offsets.windows(2).map(|w| w[1] - w[0]);
    // SAFETY: `len` bytes within the words, aligned for both widths; `n` sizes written each.
    unsafe {
        if width == 4 {
            write_each(slots, n, sizes.map(|size| size as i32));
        } else {
            write_each(slots, n, sizes);
        }
        AlignedBytes::from_words(words.assume_written(), len)
    }
}

/// Write `values` as the first `n` elements of type `T` over `slots`' memory.
///
/// # Safety
/// `n` elements of `T` must fit in `slots` and `T`'s alignment must divide 8.
unsafe fn write_each<T>(slots: &mut [MaybeUninit<u64>], n: usize, values: impl Iterator<Item = T>) {
    let out = std::slice::from_raw_parts_mut(slots.as_mut_ptr().cast::<MaybeUninit<T>>(), n);
    for (dst, value) in out.iter_mut().zip(values) {
        dst.write(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One index column's decoded ends in each cluster.
    struct Clusters(Vec<Arc<Decoded>>);

    impl Columns for Clusters {
        fn get(&self, _: &Slot, k: usize) -> Result<Arc<Decoded>> {
            Ok(self.0[k].clone())
        }
    }

    fn index(ends: &[i64]) -> Arc<Decoded> {
        let ends = std::iter::once(0).chain(ends.iter().copied()).collect();
        Arc::new(
            Decoded::index(ColumnType::SplitIndex64, ends, || {
                "column 0 cluster 0".into()
            })
            .unwrap(),
        )
    }

    #[test]
    fn one_clusters_offsets_are_its_decoded_ends_and_clusters_add_up() {
        let slot = Slot {
            candidates: vec![0],
        };
        let one = Clusters(vec![index(&[2, 5, 5])]);
        assert_eq!(one.0[0].data.as_bytes().len(), 24);
        let o = offsets(&slot, &[3], &one, "field").unwrap();
        assert_eq!(*o.offsets, [0, 2, 5, 5]);
        assert_eq!(o.child_counts, [5]);
        // Shared, not copied.
        assert!(Arc::ptr_eq(&o.offsets, one.0[0].ends.as_ref().unwrap()));

        let two = Clusters(vec![index(&[2, 5, 5]), index(&[1, 4])]);
        let o = offsets(&slot, &[3, 2], &two, "field").unwrap();
        assert_eq!(*o.offsets, [0, 2, 5, 5, 6, 9]);
        assert_eq!(o.child_counts, [5, 4]);
    }

    #[test]
    fn decreasing_ends_are_an_error_naming_where() {
        for ends in [vec![0, 3, 2], vec![0, -1]] {
            let e = Decoded::index(ColumnType::SplitIndex32, ends, || {
                "column 7 cluster 2".into()
            })
            .unwrap_err()
            .to_string();
            assert!(
                e.contains("column 7 cluster 2") && e.contains("offsets that never decrease"),
                "{e}"
            );
        }
        let e = Decoded::index(ColumnType::SplitIndex32, vec![0, 3, 2], || "c".into()).unwrap_err();
        assert!(e.to_string().contains("found 2 after 3"), "{e}");
    }
}
