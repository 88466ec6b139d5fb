//! Entries into baskets: each branch's entries serialized as ROOT stores them (big-endian
//! numbers; a `std::vector` as a byte count, version, length and items; a string as its length
//! and bytes), with the start of each entry when they vary in size.

use super::branches::{Branch, Source, Storage};
use crate::error::{Error, Result};
use crate::format::array::{Array, Layout};
use crate::format::objects::BYTE_COUNT_MASK;
use crate::format::writing::buffer::write_string;

/// The version ROOT writes before a collection's items (TStreamerInfo's class version).
const COLLECTION_VERSION: u16 = 9;
/// Byte count and version before a collection's items, then its length.
const COLLECTION_HEADER: usize = 10;
/// The most entry bytes a basket holds: its length, key header and offset table are 32-bit.
pub(super) const MAX_BASKET: u32 = i32::MAX as u32 - (1 << 20);

/// A branch's basket being filled.
#[derive(Debug, Default)]
pub(super) struct BasketBuffer {
    pub data: Vec<u8>,
    /// Where each entry starts in `data`, when entries vary in size.
    pub starts: Vec<u32>,
    pub entries: u64,
}

/// The numbers of an array of (nested) fixed-size arrays of numbers: their bytes and how many
/// numbers an entry holds.
fn numbers(array: &Array) -> (&[u8], usize) {
    match &array.layout {
        Layout::Numpy {
            data, inner_shape, ..
        } => (data.as_bytes(), inner_shape.iter().product()),
        Layout::Regular { size, content, .. } => {
            let (bytes, items) = numbers(content);
            (bytes, size * items)
        }
        _ => unreachable!("checked by check_arrays"),
    }
}

fn list(array: &Array) -> (&[i64], &Array) {
    match &array.layout {
        Layout::ListOffset {
            offsets, content, ..
        } => (offsets, content),
        _ => unreachable!("checked by check_arrays"),
    }
}

/// Bytes entries `a..b` of `branch` take in its basket, offset table included (an estimate for
/// strings longer than 254 bytes, which take 4 bytes more each).
pub(super) fn bytes(branch: &Branch, size: usize, arrays: &[Array], a: usize, b: usize) -> usize {
    let entries = b - a;
    let table = if branch.varies() { 4 * entries } else { 0 };
    let array = match branch.source {
        Source::Array(i) => &arrays[i],
        Source::Lengths(_) => return 4 * entries,
    };
    table
        + match &branch.storage {
            Storage::Numbers { .. } => entries * size * numbers(array).1,
            Storage::Counted { .. } => {
                let (offsets, content) = list(array);
                (offsets[b] - offsets[a]) as usize * size * numbers(content).1
            }
            Storage::Vector(_) => {
                let (offsets, _) = list(array);
                entries * COLLECTION_HEADER + (offsets[b] - offsets[a]) as usize * size
            }
            Storage::String => {
                let (offsets, _) = list(array);
                entries + (offsets[b] - offsets[a]) as usize
            }
            Storage::VectorVector(_) | Storage::VectorString => {
                let (outer, content) = list(array);
                let (inner, _) = list(content);
                let (i, j) = (outer[a] as usize, outer[b] as usize);
                let per_inner = if matches!(branch.storage, Storage::VectorString) {
                    1
                } else {
                    4
                };
                let item = if matches!(branch.storage, Storage::VectorString) {
                    1
                } else {
                    size
                };
                entries * COLLECTION_HEADER
                    + (j - i) * per_inner
                    + (inner[j] - inner[i]) as usize * item
            }
        }
}

/// Append entries `a..b` of `branch` to its basket. `size` is the bytes of one number.
pub(super) fn fill(
    branch: &Branch,
    size: usize,
    arrays: &[Array],
    a: usize,
    b: usize,
    out: &mut BasketBuffer,
) -> Result<()> {
    out.entries += (b - a) as u64;
    // Sized once: grown by doubling, a cluster's buffers would be copied and faulted in again.
    out.data.reserve(bytes(branch, size, arrays, a, b));
    if branch.varies() {
        out.starts.reserve(b - a);
    }
    let array = match branch.source {
        Source::Array(i) => &arrays[i],
        Source::Lengths(i) => {
            let (offsets, _) = list(&arrays[i]);
            for w in offsets[a..=b].windows(2) {
                out.data
                    .extend_from_slice(&((w[1] - w[0]) as i32).to_be_bytes());
            }
            return Ok(());
        }
    };
    match &branch.storage {
        Storage::Numbers { .. } => {
            let (bytes, items) = numbers(array);
            let per_entry = items * size;
            put_be(&mut out.data, &bytes[a * per_entry..b * per_entry], size);
        }
        Storage::Counted { .. } => {
            let (offsets, content) = list(array);
            let (bytes, items) = numbers(content);
            let per_item = items * size;
            for w in offsets[a..=b].windows(2) {
                out.starts.push(start(out, branch)?);
                put_be(
                    &mut out.data,
                    &bytes[w[0] as usize * per_item..w[1] as usize * per_item],
                    size,
                );
            }
        }
        Storage::Vector(_) => {
            let (offsets, content) = list(array);
            let (bytes, _) = numbers(content);
            for w in offsets[a..=b].windows(2) {
                out.starts.push(start(out, branch)?);
                let items = &bytes[w[0] as usize * size..w[1] as usize * size];
                collection_header(&mut out.data, items.len() + 4, branch)?;
                out.data
                    .extend_from_slice(&((w[1] - w[0]) as i32).to_be_bytes());
                put_be(&mut out.data, items, size);
            }
        }
        Storage::String => {
            let (offsets, content) = list(array);
            let (chars, _) = numbers(content);
            for w in offsets[a..=b].windows(2) {
                out.starts.push(start(out, branch)?);
                write_string(&mut out.data, &chars[w[0] as usize..w[1] as usize]);
            }
        }
        Storage::VectorVector(_) | Storage::VectorString => {
            let strings = matches!(branch.storage, Storage::VectorString);
            let (outer, content) = list(array);
            let (inner, items) = list(content);
            let (bytes, _) = numbers(items);
            let item = if strings { 1 } else { size };
            for w in outer[a..=b].windows(2) {
                out.starts.push(start(out, branch)?);
                let at = out.data.len();
                out.data.extend_from_slice(&[0; 6]);
                out.data
                    .extend_from_slice(&((w[1] - w[0]) as i32).to_be_bytes());
                for v in inner[w[0] as usize..=w[1] as usize].windows(2) {
                    let values = &bytes[v[0] as usize * item..v[1] as usize * item];
                    if strings {
                        write_string(&mut out.data, values);
                    } else {
                        out.data
                            .extend_from_slice(&((v[1] - v[0]) as i32).to_be_bytes());
                        put_be(&mut out.data, values, size);
                    }
                }
                let count = out.data.len() - at - 4;
                let mut header = Vec::with_capacity(6);
                collection_header(&mut header, count - 2, branch)?;
                out.data[at..at + 6].copy_from_slice(&header);
            }
        }
    }
    Ok(())
}

/// Where the next entry starts (a basket's entries are addressed by 32-bit offsets).
fn start(out: &BasketBuffer, branch: &Branch) -> Result<u32> {
    u32::try_from(out.data.len())
        .ok()
        .filter(|&s| s < MAX_BASKET)
        .ok_or_else(|| too_large(branch))
}

fn too_large(branch: &Branch) -> Error {
    Error::InvalidArgument(format!(
        "branch '{}': a basket would pass 2 GiB, more than a TBasket holds (give the tree a smaller cluster_bytes)",
        branch.name
    ))
}

/// A collection's byte count (covering its version and `len` bytes after) and version.
fn collection_header(out: &mut Vec<u8>, len: usize, branch: &Branch) -> Result<()> {
    let count = u32::try_from(len + 2)
        .ok()
        .filter(|&c| c < BYTE_COUNT_MASK)
        .ok_or_else(|| too_large(branch))?;
    out.extend_from_slice(&(count | BYTE_COUNT_MASK).to_be_bytes());
    out.extend_from_slice(&COLLECTION_VERSION.to_be_bytes());
    Ok(())
}

/// Append native-endian numbers of `size` bytes as big-endian ones.
pub(super) fn put_be(out: &mut Vec<u8>, src: &[u8], size: usize) {
    let at = out.len();
    out.resize(at + src.len(), 0);
    let dst = &mut out[at..];
    match size {
        2 => swap::<2>(dst, src),
        4 => swap::<4>(dst, src),
        8 => swap::<8>(dst, src),
        _ => dst.copy_from_slice(src),
    }
}

fn swap<const N: usize>(dst: &mut [u8], src: &[u8]) {
    for (d, s) in dst.chunks_exact_mut(N).zip(src.chunks_exact(N)) {
        let mut v: [u8; N] = s.try_into().expect("chunk of N");
        if cfg!(target_endian = "little") {
            v.reverse();
        }
        d.copy_from_slice(&v);
    }
}

/// The entries of an array of integers (a counter column), as i64.
pub(super) fn integers(array: &Array) -> Vec<i64> {
    let Layout::Numpy { dtype, data, .. } = &array.layout else {
        unreachable!("checked by plan")
    };
    fn each<const N: usize>(bytes: &[u8], f: impl Fn([u8; N]) -> i64) -> Vec<i64> {
        bytes
            .chunks_exact(N)
            .map(|b| f(b.try_into().expect("chunk of N")))
            .collect()
    }
    let bytes = data.as_bytes();
    use crate::format::array::DType::*;
    match dtype {
        I8 => each::<1>(bytes, |b| b[0] as i8 as i64),
        U8 | Bool => each::<1>(bytes, |b| b[0] as i64),
        I16 => each::<2>(bytes, |b| i16::from_ne_bytes(b) as i64),
        U16 => each::<2>(bytes, |b| u16::from_ne_bytes(b) as i64),
        I32 => each::<4>(bytes, |b| i32::from_ne_bytes(b) as i64),
        U32 => each::<4>(bytes, |b| u32::from_ne_bytes(b) as i64),
        I64 | U64 => each::<8>(bytes, i64::from_ne_bytes),
        F16 | F32 | F64 => unreachable!("counters are integers"),
    }
}

/// The list lengths of entries of a list array.
pub(super) fn lengths(array: &Array) -> impl Iterator<Item = i64> + '_ {
    list(array).0.windows(2).map(|w| w[1] - w[0])
}
