//! What the engine reads: a TTree or an RNTuple, seen as a table of items (branches, or fields)
//! stored in units (baskets, or one column's pages in one cluster). The readers (`read`,
//! `prefetch.rs`, `lazy.rs`) are written once against this trait: plan the units of some items
//! over an entry range, fetch those not held in one vectored request, decode them on all cores,
//! assemble the items' arrays.

use super::file::RootFile;
use super::output::ReadStats;
use crate::error::{Error, Result};
use crate::source::ByteRange;
use async_trait::async_trait;
use bytes::Bytes;
use futures_util::StreamExt;
use rayon::prelude::*;
use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Stored bytes already in memory, by file offset: fetched together, decoded only when used.
pub type Held = HashMap<u64, Bytes>;

#[async_trait]
pub trait Table: Send + Sync + 'static {
    /// A unit of storage: a basket, or a column's pages in a cluster.
    type Unit: Copy + Eq + Hash + Debug + Send + Sync + 'static;
    /// A unit decompressed and decoded.
    type Decoded: Send + Sync + 'static;
    /// One item's array over an entry range.
    type Item: Send + 'static;

    fn file(&self) -> &RootFile;
    fn entries(&self) -> u64;
    fn item_count(&self) -> usize;
    /// How access profiles name an item (a branch path, a field path).
    fn path(&self, item: usize) -> String;
    /// `UnsupportedBranch` naming the first of `items` that cannot be read.
    fn check(&self, items: &[usize]) -> Result<()>;
    /// The units holding `items` over entries `[start, stop)`, in a stable order.
    async fn plan(&self, items: &[usize], start: u64, stop: u64) -> Result<Vec<Self::Unit>>;
    /// The byte ranges of a unit in the file (none if the metadata holds it).
    fn ranges(&self, unit: &Self::Unit) -> Vec<ByteRange>;
    /// Bytes the unit takes once decoded (an estimate, for memory budgets).
    fn decoded_estimate(&self, unit: &Self::Unit) -> u64;
    /// Decode a unit from its ranges' bytes (CPU work, run on the rayon pool).
    fn decode(&self, unit: &Self::Unit, stored: &[Bytes]) -> Result<Self::Decoded>;
    fn decoded_len(&self, decoded: &Self::Decoded) -> u64;
    /// The arrays of `items` over `[start, stop)` from their decoded units (as `plan` gave them).
    async fn assemble(
        &self,
        items: &[usize],
        start: u64,
        stop: u64,
        units: Vec<(Self::Unit, Arc<Self::Decoded>)>,
    ) -> Result<Vec<Self::Item>>;
    /// Bytes an item's array holds.
    fn item_len(&self, item: &Self::Item) -> u64;

    /// Items that share stored structure give the same key (a TTree's jagged branches of one
    /// counter, an RNTuple collection's fields): a read in parts keeps them in one part, where
    /// they share it (one offsets array, built once).
    fn shares_with(&self, _item: usize) -> Option<usize> {
        None
    }

    /// Decode `units` from their stored bytes (`stored[i]` holds `ranges(&units[i])`'s) and
    /// assemble `items` over `[start, stop)` from them, for a read that has these units to
    /// itself: a table may then decompress each unit straight into the arrays, one pass over
    /// the data. By default every unit is decoded on all cores, then the items assembled.
    async fn decode_and_assemble(
        &self,
        items: &[usize],
        start: u64,
        stop: u64,
        units: &[Self::Unit],
        stored: Vec<Vec<Bytes>>,
    ) -> Result<(Vec<Self::Item>, Decoding)> {
        let (decoded, mut decoding) = decode_all(self, units, stored).await?;
        let t = Instant::now();
        let units = units.iter().copied().zip(decoded).collect();
        let arrays = self.assemble(items, start, stop, units).await?;
        decoding.assemble_time += t.elapsed();
        Ok((arrays, decoding))
    }
}

/// What decoding a read's units took.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Decoding {
    pub units: u64,
    /// Bytes of the units decoded (as `Table::decoded_len` counts them).
    pub uncompressed_bytes: u64,
    /// Decompressing, summed over the threads.
    pub decompress_cpu: Duration,
    /// Placing decoded bytes into the arrays (byte order, entry offsets, copies): summed over
    /// the threads where that is done unit by unit, else the wall time of assembling.
    pub assemble_time: Duration,
}

pub fn check_entry_range<T: Table + ?Sized>(table: &T, start: u64, stop: u64) -> Result<()> {
    if start > stop || stop > table.entries() {
        return Err(Error::InvalidArgument(format!(
            "entry range {start}..{stop} is not inside 0..{}",
            table.entries()
        )));
    }
    Ok(())
}

/// Bytes `units` occupy in the file.
pub fn stored_bytes<T: Table + ?Sized>(table: &T, units: &[T::Unit]) -> u64 {
    units
        .iter()
        .flat_map(|u| table.ranges(u))
        .map(|r| r.len)
        .sum()
}

fn checked_ranges<T: Table + ?Sized>(table: &T, units: &[T::Unit]) -> Result<Vec<ByteRange>> {
    let file = table.file();
    let ranges: Vec<ByteRange> = units.iter().flat_map(|u| table.ranges(u)).collect();
    for r in &ranges {
        crate::format::directory::check_inside(r.offset, r.len, file.size, "a basket or page")
            .map_err(|e| e.in_file(file.name()))?;
    }
    Ok(ranges)
}

/// The stored bytes of `units` that `held` lacks, added to `held`: from the whole file when
/// opening read it, else in one request.
pub async fn fetch<T: Table + ?Sized>(table: &T, units: &[T::Unit], held: &mut Held) -> Result<()> {
    let file = table.file();
    let missing: Vec<ByteRange> = checked_ranges(table, units)?
        .into_iter()
        .filter(|r| !is_held(held, r))
        .collect();
    if let Some(whole) = file.whole() {
        held.extend(missing.iter().map(|r| (r.offset, slice_of(whole, r))));
        return Ok(());
    }
    if missing.is_empty() {
        return Ok(());
    }
    file.stats
        .record_request(missing.iter().map(|r| r.len).sum());
    let got = file.source.read_ranges(&missing).await?;
    file.stats.record_fetch(
        0,
        missing.iter().map(|r| r.len).sum(),
        0,
        Duration::ZERO,
        Duration::ZERO,
        Duration::ZERO,
    );
    held.extend(missing.iter().map(|r| r.offset).zip(got));
    Ok(())
}

fn is_held(held: &Held, r: &ByteRange) -> bool {
    held.get(&r.offset).is_some_and(|b| b.len() as u64 == r.len)
}

/// `r`'s bytes in the whole file (`r` checked inside it).
fn slice_of(whole: &Bytes, r: &ByteRange) -> Bytes {
    whole.slice(r.offset as usize..r.end() as usize)
}

/// The stored bytes of each of `units`: from `held`, from the whole file when opening read it,
/// else the rest fetched in one request. Returns them with the bytes this read brought (from the
/// source or the whole file) and the time it took.
pub async fn stored_of<T: Table + ?Sized>(
    table: &T,
    units: &[T::Unit],
    held: &Held,
) -> Result<(Vec<Vec<Bytes>>, u64, Duration)> {
    let file = table.file();
    let whole = file.whole();
    let ranges = checked_ranges(table, units)?;
    let missing: Vec<ByteRange> = ranges
        .iter()
        .copied()
        .filter(|r| !is_held(held, r))
        .collect();
    let t0 = Instant::now();
    let fetched_bytes = missing.iter().map(|r| r.len).sum();
    let mut fetched = if missing.is_empty() || whole.is_some() {
        Vec::new()
    } else {
        file.stats.record_request(fetched_bytes);
        file.source.read_ranges(&missing).await?
    }
    .into_iter();
    let mut bytes = ranges.iter().map(|r| match (held.get(&r.offset), whole) {
        (Some(b), _) if is_held(held, r) => b.clone(),
        (_, Some(whole)) => slice_of(whole, r),
        _ => fetched.next().unwrap_or_default(),
    });
    let stored = units
        .iter()
        .map(|u| bytes.by_ref().take(table.ranges(u).len()).collect())
        .collect();
    Ok((stored, fetched_bytes, t0.elapsed()))
}

/// Decode every unit from its stored bytes on all cores, in order.
pub async fn decode_all<T: Table + ?Sized>(
    table: &T,
    units: &[T::Unit],
    stored: Vec<Vec<Bytes>>,
) -> Result<(Vec<Arc<T::Decoded>>, Decoding)> {
    // Decompression is CPU work: let the runtime move its other tasks off this thread meanwhile.
    let timed: Vec<(T::Decoded, Duration)> = super::cpu_turns::cpu_work(|| {
        units
            .par_iter()
            .zip(stored.into_par_iter())
            .map(|(u, stored)| {
                let t = Instant::now();
                table.decode(u, &stored).map(|d| (d, t.elapsed()))
            })
            .collect::<Result<_>>()
    })
    .await?;
    let decompress_cpu = timed.iter().map(|(_, d)| *d).sum();
    let decoded: Vec<Arc<T::Decoded>> = timed.into_iter().map(|(d, _)| Arc::new(d)).collect();
    let decoding = Decoding {
        units: decoded.len() as u64,
        uncompressed_bytes: decoded.iter().map(|d| table.decoded_len(d)).sum(),
        decompress_cpu,
        assemble_time: Duration::ZERO,
    };
    Ok((decoded, decoding))
}

/// Count a read's fetching and decoding in the file's statistics and its own.
fn record<T: Table + ?Sized>(
    table: &T,
    fetched: (u64, Duration),
    decoding: &Decoding,
    decode_wall: Duration,
) -> ReadStats {
    let file = table.file();
    file.stats.record_fetch(
        decoding.units,
        fetched.0,
        decoding.uncompressed_bytes,
        fetched.1,
        decode_wall,
        decoding.decompress_cpu,
    );
    file.stats.record_assembly(decoding.assemble_time);
    ReadStats {
        baskets: decoding.units,
        compressed_bytes: fetched.0,
        uncompressed_bytes: decoding.uncompressed_bytes,
        fetch_seconds: fetched.1.as_secs_f64(),
        decode_seconds: decode_wall.as_secs_f64(),
        decompress_cpu_seconds: decoding.decompress_cpu.as_secs_f64(),
    }
}

/// Fetch the units' bytes that `held` lacks in one request, and decode all units in parallel,
/// in order.
pub async fn fetch_and_decode<T: Table + ?Sized>(
    table: &T,
    units: &[T::Unit],
    held: &Held,
) -> Result<(Vec<Arc<T::Decoded>>, ReadStats)> {
    let (stored, fetched_bytes, fetch_time) = stored_of(table, units, held).await?;
    let t = Instant::now();
    let (decoded, decoding) = decode_all(table, units, stored).await?;
    let stats = record(table, (fetched_bytes, fetch_time), &decoding, t.elapsed());
    Ok((decoded, stats))
}

/// Fetch the units' bytes that `held` lacks in one request, then decode them and assemble
/// `items` from them in one pass (`Table::decode_and_assemble`): for units no other read shares.
pub async fn fetch_and_assemble<T: Table + ?Sized>(
    table: &T,
    items: &[usize],
    start: u64,
    stop: u64,
    units: &[T::Unit],
    held: &Held,
) -> Result<(Vec<T::Item>, ReadStats)> {
    let (stored, fetched_bytes, fetch_time) = stored_of(table, units, held).await?;
    let t = Instant::now();
    let (arrays, decoding) = table
        .decode_and_assemble(items, start, stop, units, stored)
        .await?;
    let stats = record(table, (fetched_bytes, fetch_time), &decoding, t.elapsed());
    Ok((arrays, stats))
}

/// Read `items` over entries `[start, stop)`, taking the stored bytes found in `held` from there.
pub async fn read<T: Table + ?Sized>(
    table: &Arc<T>,
    items: &[usize],
    start: u64,
    stop: u64,
    held: &Held,
) -> Result<(Vec<T::Item>, ReadStats)> {
    check_entry_range(&**table, start, stop)?;
    table.check(items)?;
    table.file().stats.record_read_call();
    let plan = table.plan(items, start, stop).await?;
    let pipelined = held.is_empty()
        && items.len() > 1
        && table.file().source.report().round_trip == Some(Duration::ZERO)
        && stored_bytes(&**table, &plan) > PIPELINED_READ_BYTES;
    if pipelined {
        return read_pipelined(table, items, start, stop).await;
    }
    fetch_and_assemble(&**table, items, start, stop, &plan, held).await
}

/// Stored bytes above which a read from a source whose requests wait for no round trip (a local
/// file) is pipelined (see `read_pipelined`).
const PIPELINED_READ_BYTES: u64 = 8 << 20;

/// Stored bytes of each part of a pipelined read; the first is smaller, so that decompressing
/// starts after a short read.
const PIPELINED_PART_BYTES: u64 = 2 << 20;
const PIPELINED_FIRST_PART_BYTES: u64 = 512 << 10;

/// Parts of a pipelined read in flight: each read, then decoded on all cores; two at once, so
/// that one's serial steps (placing its baskets, finishing its arrays) and last jobs overlap the
/// other's parallel decoding, and each part's bytes are read while the part before decodes.
const PIPELINED_PARTS_AT_ONCE: usize = 2;

/// A large read from a source that costs no round trip, in parts of whole items of about
/// `PIPELINED_PART_BYTES` (items that share structure in one part: see `Table::shares_with`),
/// in the items' order, `PIPELINED_PARTS_AT_ONCE` at a time: reading the disk (a copy out of the
/// page cache, or the disk itself) overlaps decompressing instead of preceding it. One request
/// per part: from a local file, requests cost no round trip.
async fn read_pipelined<T: Table + ?Sized>(
    table: &Arc<T>,
    items: &[usize],
    start: u64,
    stop: u64,
) -> Result<(Vec<T::Item>, ReadStats)> {
    // Items sharing structure stay together (in the first one's place), whole in one part.
    let mut blocks: Vec<Vec<usize>> = Vec::new();
    let mut block_of: HashMap<usize, usize> = HashMap::new();
    for (position, &item) in items.iter().enumerate() {
        match table
            .shares_with(item)
            .map(|key| block_of.get(&key).copied().ok_or(key))
        {
            Some(Ok(block)) => blocks[block].push(position),
            Some(Err(key)) => {
                block_of.insert(key, blocks.len());
                blocks.push(vec![position]);
            }
            None => blocks.push(vec![position]),
        }
    }
    // Parts of whole blocks, by the positions of their items in `items`.
    let mut parts: Vec<(Vec<usize>, u64)> = Vec::new();
    for block in blocks {
        let mut bytes = 0;
        for &position in &block {
            let plan = table.plan(&[items[position]], start, stop).await?;
            bytes += stored_bytes(&**table, &plan);
        }
        let full = match parts.len() {
            1 => PIPELINED_FIRST_PART_BYTES,
            _ => PIPELINED_PART_BYTES,
        };
        match parts.last_mut() {
            Some((group, group_bytes)) if *group_bytes < full => {
                group.extend(block);
                *group_bytes += bytes;
            }
            _ => parts.push((block, bytes)),
        }
    }
    let mut planned = Vec::with_capacity(parts.len());
    for (positions, _) in parts {
        let part_items: Vec<usize> = positions.iter().map(|&p| items[p]).collect();
        // Planned as a whole: items may share units (an RNTuple collection's offsets).
        let units = table.plan(&part_items, start, stop).await?;
        planned.push((positions, part_items, units));
    }
    // A part's task keeps the order of need of the read it belongs to (a read-ahead step's).
    let need = super::cpu_turns::current_need();
    let part_task = |(positions, part_items, units): (Vec<usize>, Vec<usize>, Vec<T::Unit>)| {
        let table = table.clone();
        let work = async move {
            let file = table.file();
            let ranges = checked_ranges(&*table, &units)?;
            let part_bytes: u64 = ranges.iter().map(|r| r.len).sum();
            file.stats.record_request(part_bytes);
            let t = Instant::now();
            let got = file.source.read_ranges(&ranges).await?;
            let held: Held = ranges.iter().map(|r| r.offset).zip(got).collect();
            let decoding_from = Instant::now();
            file.stats.record_fetch(
                0,
                part_bytes,
                0,
                decoding_from - t,
                Duration::ZERO,
                Duration::ZERO,
            );
            let (arrays, part) =
                fetch_and_assemble(&*table, &part_items, start, stop, &units, &held).await?;
            let decoded = (decoding_from, Instant::now());
            Ok::<_, Error>((positions, arrays, part, part_bytes, decoded))
        };
        super::AbortOnDrop(tokio::spawn(super::cpu_turns::in_order_of(
            need.clone(),
            work,
        )))
    };
    let mut parts = futures_util::stream::iter(planned.into_iter().map(part_task))
        .buffered(PIPELINED_PARTS_AT_ONCE);
    let mut arrays: Vec<Option<T::Item>> = items.iter().map(|_| None).collect();
    let mut stats = ReadStats::default();
    let began = Instant::now();
    // The parts' decoding, from the end of each one's fetch to its arrays (they overlap).
    let mut decoding: Vec<(Instant, Instant)> = Vec::new();
    while let Some(done) = parts.next().await {
        let (positions, part_arrays, part, part_bytes, decoded) =
            done.map_err(|e| Error::io_caused(table.file().name(), "read task failed", e))??;
        for (position, array) in positions.into_iter().zip(part_arrays) {
            arrays[position] = Some(array);
        }
        stats.baskets += part.baskets;
        stats.compressed_bytes += part_bytes;
        stats.uncompressed_bytes += part.uncompressed_bytes;
        stats.decompress_cpu_seconds += part.decompress_cpu_seconds;
        decoding.push(decoded);
    }
    // Decoding: the wall time some part was decoding; fetching: the rest, when the read only
    // waited for bytes.
    decoding.sort_unstable();
    let mut decoding_wall = Duration::ZERO;
    let mut until = began;
    for (from, to) in decoding {
        decoding_wall += to.saturating_duration_since(from.max(until));
        until = until.max(to);
    }
    stats.decode_seconds = decoding_wall.as_secs_f64();
    stats.fetch_seconds = began.elapsed().saturating_sub(decoding_wall).as_secs_f64();
    let arrays = arrays.into_iter().flatten().collect::<Vec<_>>();
    if arrays.len() != items.len() {
        return Err(Error::Cancelled(
            "a part of the read gave fewer arrays than items".into(),
        ));
    }
    Ok((arrays, stats))
}
