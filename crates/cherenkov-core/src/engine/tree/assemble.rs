//! Assembling decoded baskets into each branch's native-endian arrays, entry offsets rebuilt
//! from count branches where the writer left them out. No I/O: the plan brought every basket
//! needed, count branches' included (see `plan::plan_baskets`).

use super::plan::Planned;
use crate::engine::file::RootFile;
use crate::engine::output::BranchArray;
use crate::error::{Error, Result};
use crate::format::array::{AlignedBytes, Array, Layout};
use crate::format::basket::Basket;
use crate::format::deserialize::{read_entries, Builder};
use crate::format::interpretation::{
    convert_big_endian, interpret, stored_size, DType, Interpretation,
};
use crate::format::packed::Packing;
use crate::format::tree::TreeMeta;
use rayon::prelude::*;

/// A planned basket with its decoded content.
type Decoded<'a> = (&'a Planned, &'a Basket);

/// Assemble each branch's arrays from the decoded baskets (`baskets` holds those of every
/// branch, count branches' included).
pub async fn assemble_all(
    file: &RootFile,
    tree: &TreeMeta,
    branches: &[usize],
    interps: Vec<Interpretation>,
    baskets: &[(&Planned, &Basket)],
    start: u64,
    stop: u64,
) -> Result<Vec<BranchArray>> {
    let mut prepared = Vec::with_capacity(branches.len());
    for (&b, interp) in branches.iter().zip(interps) {
        let mine: Vec<(&Planned, &Basket)> = baskets
            .iter()
            .filter(|(p, _)| p.branch == b)
            .copied()
            .collect();
        let offsets = match &interp {
            Interpretation::Jagged {
                dtype,
                inner_shape,
                header_bytes,
                count_branch,
                packing,
            } => {
                let item_bytes =
                    stored_size(*dtype, *packing) * inner_shape.iter().product::<usize>().max(1);
                let name = tree.branch_path(b);
                Some(basket_offsets(
                    file,
                    tree,
                    &mine,
                    baskets,
                    (start, stop),
                    *count_branch,
                    item_bytes,
                    *header_bytes,
                    &name,
                )?)
            }
            _ => None,
        };
        prepared.push((b, interp, mine, offsets));
    }
    crate::engine::cpu_turns::cpu_work(|| {
        prepared
            .into_par_iter()
            .map(|(b, interp, mine, offsets)| {
                assemble(file, tree, b, interp, &mine, offsets, start, stop)
            })
            .collect()
    })
    .await
}

/// Per basket: the entries of it that the read wants, as local indices.
fn local_range(p: &Planned, b: &Basket, start: u64, stop: u64) -> (usize, usize) {
    let first = start.saturating_sub(p.entry_start).min(b.entries as u64) as usize;
    let last = (stop.min(p.entry_start + b.entries as u64)).saturating_sub(p.entry_start) as usize;
    (first, last.max(first))
}

/// Assemble one branch; `offsets` are the per-basket entry offsets of jagged branches.
#[allow(clippy::too_many_arguments)]
fn assemble(
    file: &RootFile,
    tree: &TreeMeta,
    branch: usize,
    interp: Interpretation,
    baskets: &[(&Planned, &Basket)],
    offsets: Option<Vec<std::borrow::Cow<'_, [u32]>>>,
    start: u64,
    stop: u64,
) -> Result<BranchArray> {
    let name = tree.branch_path(branch);
    let entries = stop - start;
    let bad = |what: String| Error::format(format!("branch '{name}'"), what).in_file(file.name());
    let coverage = baskets
        .iter()
        .map(|(p, b)| (p.entry_start, b.entries as usize));
    check_coverage(coverage, start, stop).map_err(bad)?;
    let array = match &interp {
        Interpretation::Fixed {
            dtype,
            inner_shape,
            packing,
        } => {
            let entry_bytes = interp.fixed_entry_bytes().unwrap();
            let mut pieces = Vec::new();
            for (p, b) in baskets {
                let (first, last) = local_range(p, b, start, stop);
                let src = b
                    .content
                    .get(first * entry_bytes..last * entry_bytes)
                    .ok_or_else(|| {
                        bad(format!(
                            "a basket of {} entries of {entry_bytes} bytes, found {} bytes",
                            b.entries,
                            b.content.len()
                        ))
                    })?;
                pieces.push(src);
            }
            Array::numpy(
                *dtype,
                inner_shape.clone(),
                convert_pieces(*dtype, *packing, &pieces),
            )
        }
        Interpretation::Record { fields } => {
            let entry_bytes = interp.fixed_entry_bytes().unwrap();
            let mut field_offset = 0;
            let mut contents = Vec::new();
            for f in fields {
                let fbytes = f.dtype.size() * f.inner_shape.iter().product::<usize>();
                // Sized by the data present: the entry count comes from the file.
                let present = baskets.iter().map(|(_, b)| b.content.len()).sum::<usize>();
                let mut gathered = Vec::with_capacity(
                    fbytes * (entries as usize).min(present / entry_bytes.max(1)),
                );
                for (p, b) in baskets {
                    let (first, last) = local_range(p, b, start, stop);
                    if b.content.len() < last * entry_bytes {
                        return Err(bad(format!(
                            "a basket of {} entries of {entry_bytes} bytes, found {} bytes",
                            b.entries,
                            b.content.len()
                        )));
                    }
                    for e in first..last {
                        let at = e * entry_bytes + field_offset;
                        gathered.extend_from_slice(&b.content[at..at + fbytes]);
                    }
                }
                field_offset += fbytes;
                contents.push(Array::numpy(
                    f.dtype,
                    f.inner_shape.clone(),
                    convert_pieces(f.dtype, None, &[&gathered]),
                ));
            }
            let names = fields.iter().map(|f| f.name.clone()).collect();
            Array::record(names, contents, entries as usize)
        }
        Interpretation::Jagged {
            dtype,
            inner_shape,
            header_bytes,
            packing,
            ..
        } => {
            let item_bytes =
                stored_size(*dtype, *packing) * inner_shape.iter().product::<usize>().max(1);
            let offsets_per_basket = offsets.expect("prepared for jagged branches");
            let mut pieces: Vec<&[u8]> = Vec::new();
            let mut out_offsets = Vec::with_capacity(entries as usize + 1);
            out_offsets.push(0i64);
            let mut items = 0i64;
            for ((p, b), offs) in baskets.iter().zip(&offsets_per_basket) {
                let (first, last) = local_range(p, b, start, stop);
                for e in first..last {
                    let (lo, hi) = (offs[e] as usize + header_bytes, offs[e + 1] as usize);
                    if hi < lo || (hi - lo) % item_bytes != 0 || hi > b.content.len() {
                        return Err(bad(format!("entry {} of {}..{} bytes to hold whole {item_bytes}-byte items after a {header_bytes}-byte header", p.entry_start + e as u64, offs[e], offs[e + 1])));
                    }
                    items += ((hi - lo) / item_bytes) as i64;
                    out_offsets.push(items);
                    if *header_bytes > 0 {
                        pieces.push(&b.content[lo..hi]);
                    }
                }
                // Without per-entry headers the wanted entries are one contiguous run.
                if *header_bytes == 0 && last > first {
                    pieces.push(&b.content[offs[first] as usize..offs[last] as usize]);
                }
            }
            let content = Array::numpy(
                *dtype,
                inner_shape.clone(),
                convert_pieces(*dtype, *packing, &pieces),
            );
            Array::list(out_offsets, content)
        }
        Interpretation::Group { .. } => {
            return Err(bad(
                "a branch with its own data (groups are read as their members)".into(),
            ))
        }
        Interpretation::Objects { model, .. } => {
            let mut out = Builder::new(model);
            for (p, b) in baskets {
                let origin = format!("branch '{name}' basket of entries from {}", p.entry_start);
                let range = local_range(p, b, start, stop);
                read_entries(
                    model,
                    &b.content,
                    b.offsets.as_deref(),
                    range,
                    &origin,
                    &mut out,
                )
                .map_err(|e| match e {
                    Error::UnsupportedBranch {
                        typename, reason, ..
                    } => Error::UnsupportedBranch {
                        file: file.name().to_string(),
                        branch: name.clone(),
                        typename,
                        reason,
                    },
                    e => e.in_file(file.name()),
                })?;
            }
            out.finish()
        }
        Interpretation::Strings { header_bytes } => {
            let mut content = Vec::new();
            let mut out_offsets = vec![0i64];
            for (p, b) in baskets {
                // Baskets written without entry offsets (fEntryOffsetLen 0) hold the strings
                // one after another, each giving its own length.
                let walked;
                let offs = match b.offsets.as_ref() {
                    Some(offs) => offs,
                    None => {
                        walked = walk_strings(&b.content, b.entries as usize, *header_bytes)
                            .ok_or_else(|| {
                                bad(format!(
                                    "{} length-prefixed strings in a basket without entry offsets",
                                    b.entries
                                ))
                            })?;
                        &walked
                    }
                };
                let (first, last) = local_range(p, b, start, stop);
                for e in first..last {
                    let entry = b
                        .content
                        .get(offs[e] as usize..offs[e + 1] as usize)
                        .unwrap_or_default();
                    let s = string_of_entry(entry, *header_bytes).ok_or_else(|| {
                        bad(format!(
                            "entry {} to hold a length-prefixed string",
                            p.entry_start + e as u64
                        ))
                    })?;
                    content.extend_from_slice(s);
                    out_offsets.push(content.len() as i64);
                }
            }
            Array::strings(out_offsets, AlignedBytes::from_slice(&content))
        }
    };
    Ok(BranchArray {
        branch: name,
        interpretation: interp,
        entries,
        array,
    })
}

/// The baskets (each its first entry and entry count, in order) must hold each entry of
/// `[start, stop)` once, in order: a corrupt basket table (gaps, overlaps, a branch shorter than
/// its tree) would otherwise give arrays of the wrong length.
pub fn check_coverage(
    baskets: impl Iterator<Item = (u64, usize)>,
    start: u64,
    stop: u64,
) -> std::result::Result<(), String> {
    let mut next = start;
    for (entry_start, entries) in baskets {
        let first = start.saturating_sub(entry_start).min(entries as u64);
        let last = (stop.min(entry_start + entries as u64)).saturating_sub(entry_start);
        if first >= last {
            continue;
        }
        let basket_start = entry_start + first;
        if basket_start != next {
            return Err(format!(
                "baskets holding entries {start}..{stop} in order, found one starting at entry {basket_start} after entry {next}"
            ));
        }
        next = entry_start + last;
    }
    if next != stop {
        return Err(format!(
            "baskets holding entries {start}..{stop}, found entries only up to {next}"
        ));
    }
    Ok(())
}

/// Entry boundaries of `entries` strings stored back to back, each `header` bytes then a length
/// byte (255 then a 4-byte length when longer) and the characters.
fn walk_strings(content: &[u8], entries: usize, header: usize) -> Option<Vec<u32>> {
    let mut out = Vec::with_capacity(entries.min(content.len()) + 1);
    let mut at = 0usize;
    out.push(0);
    for _ in 0..entries {
        let rest = content.get(at..)?;
        let len = string_of_entry(rest, header)?.len();
        let long = rest.get(header).is_some_and(|&b| b == 255);
        at += header + if long { 5 } else { 1 } + len;
        out.push(u32::try_from(at).ok()?);
    }
    Some(out)
}

fn string_of_entry(entry: &[u8], header: usize) -> Option<&[u8]> {
    let rest = entry.get(header..)?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first == 255 {
        let (n, rest) = rest.split_at_checked(4)?;
        (u32::from_be_bytes(n.try_into().ok()?) as usize, rest)
    } else {
        (first as usize, rest)
    };
    rest.get(..len)
}

/// Entry boundaries for each basket of a jagged branch (`mine`, of `all` the baskets read): from
/// the basket, or rebuilt from the count branch's baskets when the writer left them out (ROOT's
/// kGenerateOffsetMap).
#[allow(clippy::too_many_arguments)]
fn basket_offsets<'a>(
    file: &RootFile,
    tree: &TreeMeta,
    mine: &[Decoded<'a>],
    all: &[Decoded<'_>],
    (start, stop): (u64, u64),
    count_branch: Option<usize>,
    item_bytes: usize,
    header_bytes: usize,
    name: &str,
) -> Result<Vec<std::borrow::Cow<'a, [u32]>>> {
    let bad = |what: String| Error::format(format!("branch '{name}'"), what).in_file(file.name());
    let mut counts: Vec<i64> = Vec::new();
    let mut counts_start = 0;
    if mine.iter().any(|(_, b)| b.offsets.is_none()) {
        let cb = count_branch.ok_or_else(|| {
            bad(
                "entry offsets in its baskets (and there is no count branch to rebuild them)"
                    .into(),
            )
        })?;
        // A count branch that is itself jagged would recurse (forever, if it counts itself).
        let count_interp = interpret(tree, cb, file.streamers_read(), file.member_dims);
        if !matches!(count_interp, Ok(Interpretation::Fixed { .. })) {
            return Err(bad(format!(
                "a count branch of one number per entry, found '{}'",
                tree.branch_path(cb)
            )));
        }
        let theirs: Vec<(&Planned, &Basket)> = all
            .iter()
            .filter(|(p, _)| p.branch == cb)
            .copied()
            .collect();
        let (Some(first), Some(last)) = (theirs.first(), theirs.last()) else {
            return Err(bad(format!(
                "entry offsets in its baskets, as its metadata says (its count branch '{}' was \
                 not read with it)",
                tree.branch_path(cb)
            )));
        };
        counts_start = first.0.entry_start;
        let counts_stop = (last.0.entry_start + last.1.entries as u64).min(tree.entries);
        let interp = count_interp.expect("checked above");
        let count_array = assemble(
            file,
            tree,
            cb,
            interp,
            &theirs,
            None,
            counts_start,
            counts_stop,
        )?;
        counts = numbers_as_i64(&count_array.array);
    }
    mine.iter()
        .map(|(p, b)| match &b.offsets {
            Some(o) => Ok(std::borrow::Cow::Borrowed(o.as_slice())),
            None => {
                // Offsets up to the last entry read, each from its count (absurd counts give
                // offsets past the basket's data, which assembling rejects).
                let (_, last) = local_range(p, b, start, stop);
                let mut offs = vec![0u32];
                let mut at = 0u64;
                for e in 0..last as u64 {
                    let entry = p.entry_start + e;
                    let n = entry
                        .checked_sub(counts_start)
                        .and_then(|i| counts.get(i as usize))
                        .ok_or_else(|| bad(format!("a count for entry {entry}")))?;
                    at = at
                        .saturating_add(header_bytes as u64)
                        .saturating_add(((*n).max(0) as u64).saturating_mul(item_bytes as u64));
                    offs.push(at.min(u32::MAX as u64) as u32);
                }
                Ok(std::borrow::Cow::Owned(offs))
            }
        })
        .collect()
}

/// The values of a count branch (one number per entry); none for other layouts.
fn numbers_as_i64(a: &Array) -> Vec<i64> {
    let Layout::Numpy { dtype, data, .. } = &a.layout else {
        return Vec::new();
    };
    let b = data.as_bytes();
    macro_rules! conv {
        ($t:ty) => {
            b.chunks_exact(std::mem::size_of::<$t>())
                .map(|x| <$t>::from_ne_bytes(x.try_into().unwrap()) as i64)
                .collect()
        };
    }
    match dtype {
        DType::Bool | DType::U8 => b.iter().map(|&x| x as i64).collect(),
        DType::I8 => b.iter().map(|&x| x as i8 as i64).collect(),
        DType::I16 => conv!(i16),
        DType::U16 => conv!(u16),
        DType::I32 => conv!(i32),
        DType::U32 => conv!(u32),
        DType::I64 => conv!(i64),
        DType::U64 => conv!(u64),
        DType::F16 => b
            .chunks_exact(2)
            .map(|x| half::f16::from_ne_bytes([x[0], x[1]]).to_f32() as i64)
            .collect(),
        DType::F32 => conv!(f32),
        DType::F64 => conv!(f64),
    }
}

/// Concatenate big-endian pieces into one native-endian buffer, converting in parallel (packed
/// numbers are unpacked, one after another).
fn convert_pieces(dtype: DType, packing: Option<Packing>, pieces: &[&[u8]]) -> AlignedBytes {
    if let Some(packing) = packing {
        let mut out = Vec::new();
        for p in pieces {
            packing.decode(dtype, p, &mut out);
        }
        return AlignedBytes::from_slice(&out);
    }
    let total: usize = pieces.iter().map(|p| p.len()).sum();
    let mut out = AlignedBytes::zeroed(total);
    let mut rest = out.as_bytes_mut();
    let mut targets = Vec::with_capacity(pieces.len());
    for p in pieces {
        let (head, tail) = rest.split_at_mut(p.len());
        targets.push(head);
        rest = tail;
    }
    // Small pieces are grouped so each rayon task does a worthwhile amount of work.
    const GRAIN: usize = 256 * 1024;
    if total < GRAIN {
        for (dst, src) in targets.into_iter().zip(pieces) {
            convert_big_endian(dtype, src, dst);
        }
    } else {
        targets
            .into_par_iter()
            .zip(pieces.par_iter())
            .with_min_len(16)
            .for_each(|(dst, src)| convert_big_endian(dtype, src, dst));
    }
    out
}
