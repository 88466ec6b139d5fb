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
use super::ends::{Span, Starts};
use super::plan::{interpretations, offsets_count_branch, BasketSource, Planned};
use super::{decode_planned, stored_branches, TreeTable};
use crate::engine::output::BranchArray;
use crate::engine::recycle::OutputBytes;
use crate::engine::table::Decoding;
use crate::error::{Error, Result};
use crate::format::array::{Array, DType, Unwritten};
use crate::format::basket::{Basket, BasketLayout};
use crate::format::interpretation::{convert_big_endian_into, Interpretation};
use bytes::Bytes;
use rayon::prelude::*;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::mem::MaybeUninit;
use std::sync::Arc;
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
    /// Jagged: where the entries' ends go, and the items before the first entry.
    ends: Option<(EndsTo<'a>, i64)>,
}

/// Where a jagged basket's entry ends go.
enum EndsTo<'a> {
    /// Into the branch's own offsets.
    Write(&'a mut [MaybeUninit<i64>]),
    /// Checked against its counter's offsets, which the branch then shares.
    Check(&'a [i64]),
}

/// A branch read in one pass: its final buffers, and the place of each basket read in them.
struct Output {
    branch: usize,
    shape: Shape,
    content: OutputBytes,
    /// Its own offsets (jagged), unless it shares its counter's.
    offsets: Option<Unwritten<i64>>,
    /// The count branch of a jagged branch: the branches of a counter share its offsets.
    counter: Option<usize>,
    /// Checks its ends against the offsets the first branch of its counter wrote.
    follows: bool,
    /// Per basket: the unit, the entries `first..last` of it read, their bytes.
    places: Vec<(usize, usize, usize, usize)>,
}

impl Output {
    /// The jobs placing this branch's baskets: their ends written into its own offsets, or
    /// checked against `known` (its counter's offsets over the read).
    fn jobs<'a>(
        &'a mut self,
        known: Option<&'a [i64]>,
        layouts: &HashMap<usize, BasketLayout>,
    ) -> Vec<Job<'a>> {
        let mut content = self.content.bytes();
        let mut write = self.offsets.as_mut().map(|o| &mut o.slots()[1..]);
        let mut check = known.map(|k| &k[1..]);
        let mut items_before = 0i64;
        let mut jobs = Vec::with_capacity(self.places.len());
        for &(unit, first, last, len) in &self.places {
            let (here, rest) = std::mem::take(&mut content).split_at_mut(len);
            content = rest;
            let n = last - first;
            let ends = if let Some(slots) = write.take() {
                let (here, rest) = slots.split_at_mut(n);
                write = Some(rest);
                Some((EndsTo::Write(here), items_before))
            } else if let Some(known) = check.take() {
                let (here, rest) = known.split_at(n);
                check = Some(rest);
                Some((EndsTo::Check(here), items_before))
            } else {
                None
            };
            if let Shape::Jagged { item_bytes, .. } = self.shape {
                items_before += (len / item_bytes) as i64;
            }
            jobs.push(Job::Place(Placed {
                unit,
                layout: layouts[&unit],
                shape: self.shape,
                first,
                last,
                content: here,
                ends,
            }));
        }
        jobs
    }
}

/// Offsets for `entries` entries, the first (0) written.
fn own_offsets(entries: u64) -> Unwritten<i64> {
    let mut offsets = crate::engine::recycle::offsets(entries as usize + 1);
    offsets.slots()[0].write(0);
    offsets
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
    /// A basket of this branch whose ends differ from its counter's offsets (not placed).
    Differs(usize),
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

    // Each branch's final buffers, and every basket's place in them, written by the parallel
    // passes below, every byte once (the places cover each exactly). The first jagged branch
    // of a counter gets offsets, the others of that counter check their ends against them.
    let mut outputs: Vec<Output> = Vec::new();
    let mut counters_seen: HashSet<usize> = HashSet::new();
    for (&b, interp) in branches.iter().zip(&interps) {
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
        let counter = match (shape, interp) {
            (Shape::Jagged { .. }, Interpretation::Jagged { count_branch, .. }) => *count_branch,
            _ => None,
        };
        let follows = counter.is_some_and(|c| !counters_seen.insert(c));
        let offsets =
            (matches!(shape, Shape::Jagged { .. }) && !follows).then(|| own_offsets(stop - start));
        outputs.push(Output {
            branch: b,
            shape,
            content: OutputBytes::new(bytes),
            offsets,
            counter,
            follows,
            places,
        });
    }
    let placed_bytes: u64 = outputs
        .iter()
        .flat_map(|o| &o.places)
        .map(|&(unit, ..)| layouts[&unit].border as u64)
        .sum();

    let run = |mut jobs: Vec<Job>| -> Result<Vec<(Done, Duration, Duration)>> {
        // The largest first, so that no core is left with a large one at the end.
        jobs.sort_by_key(|j| {
            let unit = match j {
                Job::Place(p) => p.unit,
                Job::Decode(i) => *i,
            };
            std::cmp::Reverse(units[unit].stored_bytes())
        });
        jobs.into_par_iter()
            .map(|job| match job {
                Job::Place(placed) => {
                    let unit = placed.unit;
                    let what = origin(&units[unit]);
                    let (kept, unzip, place) = place(placed, raw(unit), early.get(&unit), &what)
                        .map_err(|e| e.in_file(file.name()))?;
                    let done = if kept {
                        Done::Placed
                    } else {
                        Done::Differs(units[unit].branch)
                    };
                    Ok((done, unzip, place))
                }
                Job::Decode(i) => {
                    let t = Instant::now();
                    let basket = decode_planned(file, tree, &units[i], raw(i))?;
                    Ok((Done::Decoded(i, basket), t.elapsed(), Duration::ZERO))
                }
            })
            .collect()
    };
    let (timed, shared) = crate::engine::cpu_turns::cpu_work(|| -> Result<_> {
        // First every branch that writes its own offsets (and the baskets decoded whole)...
        let mut jobs: Vec<Job> = (0..units.len())
            .filter(|&i| decode_branches.contains(&units[i].branch))
            .map(Job::Decode)
            .collect();
        for o in outputs.iter_mut().filter(|o| !o.follows) {
            jobs.extend(o.jobs(None, &layouts));
        }
        let mut timed = run(jobs)?;
        let mut shared: HashMap<usize, Arc<Vec<i64>>> = HashMap::new();
        for o in outputs.iter_mut().filter(|o| !o.follows) {
            let Some(c) = o.counter else { continue };
            if let Some(offsets) = o.offsets.take() {
                // SAFETY: the pass succeeded, so every basket wrote its entries' ends.
                shared.insert(c, Arc::new(unsafe { offsets.assume_written() }));
            }
        }
        // ... then the branches sharing a counter's offsets, checking their ends against them.
        let mut jobs = Vec::new();
        for o in outputs.iter_mut().filter(|o| o.follows) {
            // (Each counter followed has its first branch's offsets: `follows` says so.)
            let known = o.counter.map_or(&[][..], |c| shared[&c].as_slice());
            jobs.extend(o.jobs(Some(known), &layouts));
        }
        timed.extend(run(jobs)?);
        // A branch whose ends differ keeps offsets of its own (its baskets, its values).
        let differ: HashSet<usize> = timed
            .iter()
            .filter_map(|(done, ..)| match done {
                Done::Differs(b) => Some(*b),
                _ => None,
            })
            .collect();
        let mut jobs = Vec::new();
        for o in outputs.iter_mut().filter(|o| differ.contains(&o.branch)) {
            o.offsets = Some(own_offsets(stop - start));
            jobs.extend(o.jobs(None, &layouts));
        }
        timed.extend(run(jobs)?);
        Ok((timed, shared))
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
    for (out, interp) in outputs.into_iter().zip(
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
        // SAFETY: the passes succeeded, so every place was written (see `outputs`): a branch
        // whose ends differed from its counter's was placed again whole, with its own offsets.
        let content = unsafe { out.content.assume_written() };
        let numbers = Array::numpy(dtype, inner_shape, content);
        let array = match (out.offsets, out.counter) {
            // SAFETY: as above.
            (Some(own), _) => Array::list(unsafe { own.assume_written() }, numbers),
            (None, Some(c)) => Array::list_shared(shared[&c].clone(), numbers),
            (None, None) => numbers,
        };
        arrays.insert(
            out.branch,
            BranchArray {
                branch: tree.branch_path(out.branch),
                interpretation: interp,
                entries: stop - start,
                array,
            },
        );
    }
    drop(shared); // each counter's offsets now held by its arrays alone
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

/// Decompress one basket (or take it decoded) and place its entries; returns whether they
/// were placed (see `place_entries`) and the time spent decompressing and placing.
fn place(
    placed: Placed,
    raw: Option<&[u8]>,
    decoded: Option<&Basket>,
    origin: &str,
) -> Result<(bool, Duration, Duration)> {
    if let Some(basket) = decoded {
        let t = Instant::now();
        let starts = Starts::Relative(basket.offsets.as_deref().unwrap_or_default());
        let kept = place_entries(placed, &basket.content, starts, origin)?;
        return Ok((kept, Duration::ZERO, t.elapsed()));
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
        let kept = place_entries(placed, &payload[..layout.border], starts, origin)?;
        Ok((kept, t1 - t0, t1.elapsed()))
    })
}

/// Convert a basket's wanted entries into their place, and put their ends into the offsets
/// (written, or checked); false when they differ from offsets checked against (nothing placed).
fn place_entries(placed: Placed, content: &[u8], starts: Starts, origin: &str) -> Result<bool> {
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
            let checking = matches!(ends, EndsTo::Check(_));
            let begin = starts
                .get(first, entries, border)
                .ok_or_else(|| layout.bad_offsets(origin))?;
            if first == 0 && last == entries && begin != 0 {
                return Err(Error::format(
                    origin.to_string(),
                    format!("entry offsets starting where the data starts, found {begin}"),
                ));
            }
            let span = Span {
                wanted: (first, last),
                basket: (entries, border),
                begin,
                items_before,
                item_bytes,
            };
            let filled = match ends {
                EndsTo::Write(slots) => starts.fill(slots, span),
                EndsTo::Check(slots) => starts.fill(slots, span),
            };
            if filled.is_none() && checking {
                return Ok(false);
            }
            let end = filled.ok_or_else(|| {
                // Find the first entry at fault, to name it.
                let mut prev = begin;
                for e in first + 1..=last {
                    let end = starts.get(e, entries, border).unwrap_or(-1);
                    if end < prev || end > border as i64 || (end - begin) % item_bytes as i64 != 0 {
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
    Ok(true)
}
