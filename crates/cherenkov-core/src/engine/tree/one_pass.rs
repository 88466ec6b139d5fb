//! Baskets decoded straight into their arrays, for a read that has its baskets to itself: each
//! basket is decompressed into a buffer its thread reuses, and its entries are converted (big-
//! to native-endian) into their place in the branch's final array, its entry offsets into the
//! array's offsets on the way. One pass over the data on all cores, instead of a buffer per
//! basket filled, then copied into the arrays by a second parallel pass.
//!
//! Where each basket's entries go is known before any is decompressed: fixed-size entries from
//! the entry numbers, jagged ones from the data length in the basket's header (fLast). Branches
//! of numbers (fixed-size, or counted jagged without per-entry headers: most of an analysis'
//! data) go so. The others (objects, strings, leaf lists, packed floats, baskets in the tree's
//! metadata or without entry offsets) are decoded and assembled as `assemble.rs` does, in the
//! same parallel pass.

use super::assemble::{assemble_all, check_coverage};
use super::plan::{interpretations, offsets_count_branch, BasketSource, Planned};
use super::{decode_planned, stored_branches, TreeTable};
use crate::engine::output::BranchArray;
use crate::engine::table::Decoding;
use crate::error::{Error, Result};
use crate::format::array::{Array, DType, Unwritten, UnwrittenBytes};
use crate::format::basket::{Basket, BasketLayout};
use crate::format::interpretation::{convert_big_endian_into, Interpretation};
use bytes::Bytes;
use rayon::prelude::*;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::mem::MaybeUninit;
use std::time::{Duration, Instant};

/// How a branch read in one pass lays its entries out.
#[derive(Clone, Copy)]
enum Shape {
    /// `entry_bytes` per entry.
    Fixed { dtype: DType, entry_bytes: usize },
    /// Entries of whole `item_bytes` items, bounded by the basket's entry offsets.
    Jagged { dtype: DType, item_bytes: usize },
}

impl Shape {
    fn of(interp: &Interpretation) -> Option<Shape> {
        match interp {
            Interpretation::Fixed {
                dtype,
                packing: None,
                ..
            } => Some(Shape::Fixed {
                dtype: *dtype,
                entry_bytes: interp.fixed_entry_bytes()?,
            }),
            Interpretation::Jagged {
                dtype,
                inner_shape,
                header_bytes: 0,
                packing: None,
                ..
            } => Some(Shape::Jagged {
                dtype: *dtype,
                item_bytes: dtype.size() * inner_shape.iter().product::<usize>().max(1),
            }),
            _ => None,
        }
    }
}

/// One basket's share of a branch read in one pass: the entries `first..last` of it, their
/// bytes' place in the content, and (jagged) the place of their ends in the offsets.
struct Placed<'a> {
    unit: usize,
    layout: BasketLayout,
    shape: Shape,
    first: usize,
    last: usize,
    content: &'a mut [MaybeUninit<u8>],
    /// Jagged: the offsets of the entries' ends, and the items before the first entry.
    ends: Option<(&'a mut [MaybeUninit<i64>], i64)>,
}

/// A unit's work in the parallel pass.
enum Job<'a> {
    Place(Placed<'a>),
    /// Decode the unit into a basket of its own (branches read as `assemble.rs` reads them).
    Decode(usize),
}

/// What the parallel pass makes of a unit.
enum Done {
    Placed,
    Decoded(usize, Basket),
}

thread_local! {
    /// Each thread decompresses into one buffer, grown to the largest basket it has seen.
    static PAYLOAD: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The arrays of `items` from `units` and their stored bytes (see the module documentation).
pub async fn decode_and_assemble(
    table: &TreeTable,
    items: &[usize],
    start: u64,
    stop: u64,
    units: &[Planned],
    stored: Vec<Vec<Bytes>>,
) -> Result<(Vec<BranchArray>, Decoding)> {
    let (file, tree) = (&*table.file, &*table.tree);
    let (branches, uses) = stored_branches(file, tree, items)?;
    let interps = interpretations(file, tree, &branches)?;
    let mut mine: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, p) in units.iter().enumerate() {
        mine.entry(p.branch).or_default().push(i);
    }
    let raw = |i: usize| stored[i].first().map(|b| &b[..]);
    let origin = |p: &Planned| match p.source {
        BasketSource::Disk(loc) => format!(
            "basket at file offset {} of branch '{}'",
            loc.seek,
            tree.branch_path(p.branch)
        ),
        BasketSource::Embedded(i) => format!(
            "embedded basket {i} of branch '{}'",
            tree.branch_path(p.branch)
        ),
    };

    // Which branches go in one pass: those of numbers whose baskets are all on disk, with entry
    // offsets where jagged. The others, and the count branches rebuilding their offsets, decode.
    let mut layouts: HashMap<usize, BasketLayout> = HashMap::new();
    let mut shapes: HashMap<usize, Shape> = HashMap::new();
    let mut decode_branches: HashSet<usize> = HashSet::new();
    for (&b, interp) in branches.iter().zip(&interps) {
        let baskets = mine.get(&b).map_or(&[][..], |v| &v[..]);
        let shape = Shape::of(interp).filter(|_| {
            offsets_count_branch(file, tree, b, interp).is_none()
                && baskets.iter().all(|&i| raw(i).is_some())
        });
        let Some(shape) = shape else {
            decode_branches.insert(b);
            if let Some(count) = offsets_count_branch(file, tree, b, interp) {
                decode_branches.insert(count);
            }
            continue;
        };
        let mut with_offsets = true;
        for &i in baskets {
            let layout = BasketLayout::parse(raw(i).unwrap(), &origin(&units[i]))
                .map_err(|e| e.in_file(file.name()))?;
            with_offsets &= layout.has_offsets();
            layouts.insert(i, layout);
        }
        match shape {
            // Without an offset table the baskets are read as `assemble.rs` reads them (which
            // rebuilds the offsets from a count branch, or says why it cannot).
            Shape::Jagged { .. } if !with_offsets => {
                decode_branches.insert(b);
            }
            _ => {
                shapes.insert(b, shape);
            }
        }
    }

    // A jagged basket read only in part holds its entries' bytes where only its own offsets
    // say: it is decoded first (in parallel), and placed from there.
    let partial: Vec<usize> = shapes
        .iter()
        .filter(|(_, shape)| matches!(shape, Shape::Jagged { .. }))
        .flat_map(|(b, _)| mine.get(b).into_iter().flatten().copied())
        .filter(|i| {
            let entries = layouts[i].entries;
            let (first, last) = local_range(units[*i].entry_start, entries, start, stop);
            first < last && (first > 0 || last < entries)
        })
        .collect();
    let early: HashMap<usize, Basket> = if partial.is_empty() {
        HashMap::new()
    } else {
        crate::engine::cpu_turns::cpu_work(|| {
            partial
                .par_iter()
                .map(|&i| Ok((i, decode_planned(file, tree, &units[i], raw(i))?)))
                .collect::<Result<_>>()
        })
        .await?
    };

    // Each branch's final buffers, and every basket's place in them.
    // Written by the parallel pass, every byte once (the places below cover each exactly).
    let mut buffers: Vec<(usize, Shape, UnwrittenBytes, Option<Unwritten<i64>>)> = Vec::new();
    let mut starts: Vec<Vec<(usize, usize, usize, usize)>> = Vec::new();
    for &b in &branches {
        let Some(&shape) = shapes.get(&b) else {
            continue;
        };
        let name = tree.branch_path(b);
        let bad =
            |what: String| Error::format(format!("branch '{name}'"), what).in_file(file.name());
        let baskets = mine.get(&b).map_or(&[][..], |v| &v[..]);
        let coverage = baskets
            .iter()
            .map(|&i| (units[i].entry_start, layouts[&i].entries));
        check_coverage(coverage, start, stop).map_err(bad)?;
        let mut places = Vec::new();
        let mut bytes = 0usize;
        for &i in baskets {
            let layout = &layouts[&i];
            let p = &units[i];
            check_entries(p, layout.entries, &origin(p)).map_err(|e| e.in_file(file.name()))?;
            let (first, last) = local_range(p.entry_start, layout.entries, start, stop);
            if first == last {
                continue;
            }
            let len = match (shape, early.get(&i)) {
                (Shape::Fixed { entry_bytes, .. }, _) => {
                    if last * entry_bytes > layout.border {
                        return Err(bad(format!(
                            "a basket of {} entries of {entry_bytes} bytes, found {} bytes",
                            layout.entries, layout.border
                        )));
                    }
                    (last - first) * entry_bytes
                }
                (Shape::Jagged { .. }, Some(basket)) => {
                    let offs = basket.offsets.as_deref().unwrap_or_default();
                    let (Some(a), Some(z)) = (offs.get(first), offs.get(last)) else {
                        return Err(layout.bad_offsets(&origin(p)).in_file(file.name()));
                    };
                    z.saturating_sub(*a) as usize
                }
                (Shape::Jagged { item_bytes, .. }, None) => {
                    if !layout.border.is_multiple_of(item_bytes) {
                        return Err(bad(format!(
                            "a basket of whole {item_bytes}-byte items, found {} bytes",
                            layout.border
                        )));
                    }
                    layout.border
                }
            };
            places.push((i, first, last, len));
            bytes += len;
        }
        let entries = (stop - start) as usize;
        let offsets = matches!(shape, Shape::Jagged { .. }).then(|| {
            let mut offsets = Unwritten::new(entries + 1);
            offsets.slots()[0].write(0);
            offsets
        });
        buffers.push((b, shape, UnwrittenBytes::new(bytes), offsets));
        starts.push(places);
    }

    let mut jobs: Vec<Job> = Vec::new();
    let mut placed_bytes = 0u64;
    for ((_, shape, content, offsets), places) in buffers.iter_mut().zip(&starts) {
        let mut content = content.bytes();
        let mut ends = offsets.as_mut().map(|o| &mut o.slots()[1..]);
        let mut items_before = 0i64;
        for &(unit, first, last, len) in places {
            let (here, rest) = std::mem::take(&mut content).split_at_mut(len);
            content = rest;
            let mine = ends.take().map(|e| {
                let (here, rest) = e.split_at_mut(last - first);
                ends = Some(rest);
                (here, items_before)
            });
            if let Shape::Jagged { item_bytes, .. } = shape {
                items_before += (len / *item_bytes) as i64;
            }
            placed_bytes += layouts[&unit].border as u64;
            jobs.push(Job::Place(Placed {
                unit,
                layout: layouts[&unit],
                shape: *shape,
                first,
                last,
                content: here,
                ends: mine,
            }));
        }
    }
    jobs.extend(
        (0..units.len())
            .filter(|&i| decode_branches.contains(&units[i].branch))
            .map(Job::Decode),
    );
    // The largest first, so that no core is left with a large one at the end.
    jobs.sort_by_key(|j| {
        let unit = match j {
            Job::Place(p) => p.unit,
            Job::Decode(i) => *i,
        };
        std::cmp::Reverse(units[unit].stored_bytes())
    });

    let timed: Vec<(Done, Duration, Duration)> = crate::engine::cpu_turns::cpu_work(|| {
        jobs.into_par_iter()
            .map(|job| match job {
                Job::Place(placed) => {
                    let unit = placed.unit;
                    let what = origin(&units[unit]);
                    let (unzip, place) = place(placed, raw(unit), early.get(&unit), &what)
                        .map_err(|e| e.in_file(file.name()))?;
                    Ok((Done::Placed, unzip, place))
                }
                Job::Decode(i) => {
                    let t = Instant::now();
                    let basket = decode_planned(file, tree, &units[i], raw(i))?;
                    Ok((Done::Decoded(i, basket), t.elapsed(), Duration::ZERO))
                }
            })
            .collect::<Result<_>>()
    })
    .await?;

    let mut decoding = Decoding {
        units: units.len() as u64,
        ..Decoding::default()
    };
    let mut decoded: HashMap<usize, Basket> = HashMap::new();
    for (done, unzip, place) in timed {
        decoding.decompress_cpu += unzip;
        decoding.assemble_time += place;
        if let Done::Decoded(i, basket) = done {
            decoded.insert(i, basket);
        }
    }
    decoding.uncompressed_bytes = placed_bytes
        + decoded
            .values()
            .map(|b| b.content.len() as u64)
            .sum::<u64>();

    // The branches read as `assemble.rs` reads them, from their decoded baskets.
    let t = Instant::now();
    let slow: Vec<usize> = branches
        .iter()
        .copied()
        .filter(|b| !shapes.contains_key(b))
        .collect();
    let mut arrays: HashMap<usize, BranchArray> = HashMap::new();
    if !slow.is_empty() {
        let pairs: Vec<(&Planned, &Basket)> = (0..units.len())
            .filter_map(|i| Some((&units[i], decoded.get(&i)?)))
            .collect();
        let interps = interpretations(file, tree, &slow)?;
        let slow_arrays = assemble_all(file, tree, &slow, interps, &pairs, start, stop).await?;
        arrays.extend(slow.iter().copied().zip(slow_arrays));
    }
    decoding.assemble_time += t.elapsed();
    for ((b, _, content, offsets), interp) in buffers.into_iter().zip(
        branches
            .iter()
            .zip(&interps)
            .filter(|(b, _)| shapes.contains_key(b))
            .map(|(_, i)| i.clone()),
    ) {
        let (dtype, inner_shape) = match &interp {
            Interpretation::Fixed {
                dtype, inner_shape, ..
            }
            | Interpretation::Jagged {
                dtype, inner_shape, ..
            } => (*dtype, inner_shape.clone()),
            _ => unreachable!("only numbers are read in one pass"),
        };
        // SAFETY: the parallel pass succeeded, so every place was written (see `buffers`).
        let (content, offsets) = unsafe {
            (
                content.assume_written(),
                offsets.map(|o| o.assume_written()),
            )
        };
        let numbers = Array::numpy(dtype, inner_shape, content);
        let array = match offsets {
            Some(offsets) => Array::list(offsets, numbers),
            None => numbers,
        };
        arrays.insert(
            b,
            BranchArray {
                branch: tree.branch_path(b),
                interpretation: interp,
                entries: stop - start,
                array,
            },
        );
    }
    let arrays = table.finish(items, arrays, uses, stop - start)?;
    Ok((arrays, decoding))
}

/// The entries `first..last` of a basket of `entries` starting at `entry_start` that
/// `[start, stop)` wants, as basket-local indices.
fn local_range(entry_start: u64, entries: usize, start: u64, stop: u64) -> (usize, usize) {
    let first = start.saturating_sub(entry_start).min(entries as u64) as usize;
    let last = (stop.min(entry_start + entries as u64)).saturating_sub(entry_start) as usize;
    (first, last.max(first))
}

fn check_entries(p: &Planned, found: usize, origin: &str) -> Result<()> {
    if let BasketSource::Disk(loc) = p.source {
        let expected = loc.entry_stop - loc.entry_start;
        if found as u64 != expected {
            return Err(Error::format(
                origin.to_string(),
                format!("{expected} entries as the branch says, found {found}"),
            ));
        }
    }
    Ok(())
}

/// Decompress one basket (or take it decoded) and place its entries; returns the time spent
/// decompressing and placing.
fn place(
    placed: Placed,
    raw: Option<&[u8]>,
    decoded: Option<&Basket>,
    origin: &str,
) -> Result<(Duration, Duration)> {
    if let Some(basket) = decoded {
        let t = Instant::now();
        let starts = Starts::Relative(basket.offsets.as_deref().unwrap_or_default());
        place_entries(placed, &basket.content, starts, origin)?;
        return Ok((Duration::ZERO, t.elapsed()));
    }
    let raw = raw.ok_or_else(|| Error::Cancelled(format!("{origin} was not fetched")))?;
    PAYLOAD.with(|cell| {
        let mut buffer = cell.borrow_mut();
        let layout = placed.layout;
        if buffer.len() < layout.objlen {
            // (`objlen` is what the basket's compression blocks declare: see `BasketLayout`.)
            buffer.resize(layout.objlen, 0);
        }
        let t0 = Instant::now();
        let payload = layout.payload(raw, &mut buffer[..layout.objlen], origin)?;
        let t1 = Instant::now();
        let starts = match layout.offset_table(payload, origin)? {
            Some(table) => Starts::Stored {
                table,
                keylen: layout.keylen as i64,
            },
            None => Starts::Relative(&[]),
        };
        place_entries(placed, &payload[..layout.border], starts, origin)?;
        Ok((t1 - t0, t1.elapsed()))
    })
}

/// Where each entry of a jagged basket starts in its content.
enum Starts<'a> {
    /// The basket's own table: big-endian `i32`s counted from the key's start.
    Stored { table: &'a [u8], keylen: i64 },
    /// Relative to the content, the content's end last (a decoded `Basket`'s).
    Relative(&'a [u32]),
}

impl Starts<'_> {
    /// Where entry `e` of a basket of `entries` starts (`entries`: where the content ends).
    fn get(&self, e: usize, entries: usize, border: usize) -> Option<i64> {
        match self {
            Starts::Stored { .. } if e == entries => Some(border as i64),
            Starts::Stored { table, keylen } => {
                let at = table.get(e * 4..e * 4 + 4)?;
                Some(i32::from_be_bytes(at.try_into().unwrap()) as i64 - keylen)
            }
            Starts::Relative(offsets) => offsets.get(e).map(|&o| o as i64),
        }
    }

    /// Fill `slots` with the ends of entries `first..last` (see `fill_ends`).
    fn fill(
        &self,
        slots: &mut [MaybeUninit<i64>],
        (first, last): (usize, usize),
        (entries, border): (usize, usize),
        begin: i64,
        items_before: i64,
        item_bytes: usize,
    ) -> Option<i64> {
        let (from, to) = (first + 1, last + 1);
        let border_at = border as i64;
        match self {
            Starts::Stored { table, keylen } if item_bytes.is_power_of_two() => {
                // The entries' starts in the table, then the data's end for the last entry.
                let stored = to.min(entries).max(from);
                let table = table.get(from * 4..stored * 4).unwrap_or_default();
                let (in_table, rest) = slots.split_at_mut((table.len() / 4).min(slots.len()));
                let mut ok = in_table.len() * 4 == table.len()
                    && fill_from_table(
                        in_table,
                        table,
                        *keylen,
                        begin,
                        border_at,
                        items_before,
                        item_bytes,
                    );
                let mut prev = match table.len() {
                    0 => begin,
                    n => i32::from_be_bytes(table[n - 4..].try_into().unwrap()) as i64 - keylen,
                };
                if let [slot] = rest {
                    ok &= to > entries
                        && fill_ends(
                            std::slice::from_mut(slot),
                            std::iter::once(border_at),
                            begin,
                            border_at,
                            items_before,
                            item_bytes,
                        )
                        .is_some();
                    prev = border_at;
                } else {
                    ok &= rest.is_empty();
                }
                ok.then_some(prev)
            }
            Starts::Stored { table, keylen } => {
                let stored = to.min(entries).max(from);
                let table = table.get(from * 4..stored * 4).unwrap_or_default();
                let last = (to > entries).then_some(border as i64);
                let ends = table
                    .chunks_exact(4)
                    .map(|c| i32::from_be_bytes(c.try_into().unwrap()) as i64 - keylen)
                    .chain(last);
                fill_ends(slots, ends, begin, border_at, items_before, item_bytes)
            }
            Starts::Relative(offsets) => {
                let ends = offsets.get(from..to).unwrap_or_default().iter();
                let ends = ends.map(|&o| o as i64);
                fill_ends(slots, ends, begin, border_at, items_before, item_bytes)
            }
        }
    }
}

/// Convert a basket's wanted entries into their place, and write their ends into the offsets.
fn place_entries(placed: Placed, content: &[u8], starts: Starts, origin: &str) -> Result<()> {
    let Placed {
        layout,
        shape,
        first,
        last,
        content: dst,
        ends,
        ..
    } = placed;
    match shape {
        Shape::Fixed { dtype, entry_bytes } => {
            let src = &content[first * entry_bytes..last * entry_bytes];
            convert_big_endian_into(dtype, src, dst);
        }
        Shape::Jagged { dtype, item_bytes } => {
            let (entries, border) = (layout.entries, layout.border);
            let (ends, items_before) = ends.expect("jagged branches have offsets");
            let begin = starts
                .get(first, entries, border)
                .ok_or_else(|| layout.bad_offsets(origin))?;
            if first == 0 && last == entries && begin != 0 {
                return Err(Error::format(
                    origin.to_string(),
                    format!("entry offsets starting where the data starts, found {begin}"),
                ));
            }
            let end = starts
                .fill(
                    ends,
                    (first, last),
                    (entries, border),
                    begin,
                    items_before,
                    item_bytes,
                )
                .ok_or_else(|| {
                    // Find the first entry at fault, to name it.
                    let mut prev = begin;
                    for e in first + 1..=last {
                        let end = starts.get(e, entries, border).unwrap_or(-1);
                        if end < prev
                            || end > border as i64
                            || (end - begin) % item_bytes as i64 != 0
                        {
                            return Error::format(
                                origin.to_string(),
                                format!(
                                    "entry {} of {prev}..{end} bytes to hold whole \
                                     {item_bytes}-byte items",
                                    e - 1
                                ),
                            );
                        }
                        prev = end;
                    }
                    layout.bad_offsets(origin)
                })?;
            let src = &content[begin as usize..end as usize];
            if src.len() != dst.len() {
                return Err(layout.bad_offsets(origin));
            }
            convert_big_endian_into(dtype, src, dst);
        }
    }
    Ok(())
}

/// `fill_ends` from a basket's table of entry starts (big-endian `i32`s from the key's start,
/// one per slot) when items are a power of two bytes: written and checked without branches or a
/// running value, so that the compiler vectorizes it (it runs over every entry read).
fn fill_from_table(
    slots: &mut [MaybeUninit<i64>],
    table: &[u8],
    keylen: i64,
    begin: i64,
    border: i64,
    items_before: i64,
    item_bytes: usize,
) -> bool {
    let (shift, mask) = (item_bytes.trailing_zeros(), item_bytes as i64 - 1);
    let at = |c: &[u8]| i32::from_be_bytes(c.try_into().unwrap()) as i64 - keylen;
    let Some(first) = table.get(..4) else {
        return slots.is_empty();
    };
    // Sign bits gather "before the previous end" and "past the data"; low bits, "not at a
    // whole item".
    let check =
        |end: i64, prev: i64| ((end - prev) | (border - end)) & i64::MIN | ((end - begin) & mask);
    let mut bad = check(at(first), begin);
    slots[0].write(items_before + ((at(first) - begin) >> shift));
    for ((slot, end), prev) in slots[1..]
        .iter_mut()
        .zip(table[4..].chunks_exact(4))
        .zip(table.chunks_exact(4))
    {
        let (end, prev) = (at(end), at(prev));
        bad |= check(end, prev);
        slot.write(items_before + ((end - begin) >> shift));
    }
    bad == 0
}

/// Write the offsets of each entry's end (`items_before` plus the items from `begin` to it);
/// the last end, or `None` when the ends are out of order, past `border` or not at whole items.
fn fill_ends(
    slots: &mut [MaybeUninit<i64>],
    ends: impl Iterator<Item = i64>,
    begin: i64,
    border: i64,
    items_before: i64,
    item_bytes: usize,
) -> Option<i64> {
    let (mut ok, mut prev, mut written) = (true, begin, 0);
    // Checks are gathered, not branched on: the loop runs over millions of entries.
    if item_bytes.is_power_of_two() {
        let (shift, mask) = (item_bytes.trailing_zeros(), item_bytes as i64 - 1);
        for (slot, end) in slots.iter_mut().zip(ends) {
            let bytes = end - begin;
            ok &= (end >= prev) & (end <= border) & (bytes & mask == 0);
            slot.write(items_before + (bytes >> shift));
            prev = end;
            written += 1;
        }
    } else {
        let size = item_bytes as i64;
        for (slot, end) in slots.iter_mut().zip(ends) {
            let bytes = end - begin;
            ok &= (end >= prev) & (end <= border) & (bytes % size == 0);
            slot.write(items_before + bytes / size);
            prev = end;
            written += 1;
        }
    }
    (ok && written == slots.len()).then_some(prev)
}
