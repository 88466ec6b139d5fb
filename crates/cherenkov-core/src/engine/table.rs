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

/// The stored bytes of `units` that `held` lacks, in one request, added to `held`.
pub async fn fetch<T: Table + ?Sized>(table: &T, units: &[T::Unit], held: &mut Held) -> Result<()> {
    let ranges = checked_ranges(table, units)?;
    let missing: Vec<ByteRange> = ranges.into_iter().filter(|r| !is_held(held, r)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let file = table.file();
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

/// Fetch the units' bytes that `held` lacks in one request, and decode all units in parallel,
/// in order.
pub async fn fetch_and_decode<T: Table + ?Sized>(
    table: &T,
    units: &[T::Unit],
    held: &Held,
) -> Result<(Vec<Arc<T::Decoded>>, ReadStats)> {
    let mut stats = ReadStats::default();
    let file = table.file();
    let ranges = checked_ranges(table, units)?;
    let missing: Vec<ByteRange> = ranges
        .iter()
        .copied()
        .filter(|r| !is_held(held, r))
        .collect();
    let t0 = Instant::now();
    let mut fetched = if missing.is_empty() {
        Vec::new()
    } else {
        file.stats
            .record_request(missing.iter().map(|r| r.len).sum());
        file.source.read_ranges(&missing).await?
    }
    .into_iter();
    let mut bytes = ranges.iter().map(|r| match held.get(&r.offset) {
        Some(b) if is_held(held, r) => b.clone(),
        _ => fetched.next().unwrap_or_default(),
    });
    let jobs: Vec<(&T::Unit, Vec<Bytes>)> = units
        .iter()
        .map(|u| (u, bytes.by_ref().take(table.ranges(u).len()).collect()))
        .collect();
    let fetch_time = t0.elapsed();
    stats.fetch_seconds = fetch_time.as_secs_f64();
    stats.compressed_bytes = missing.iter().map(|r| r.len).sum();

    let t1 = Instant::now();
    // Decompression is CPU work: let the runtime move its other tasks off this thread meanwhile.
    let timed: Vec<(T::Decoded, Duration)> = super::cpu_turns::cpu_work(|| {
        jobs.into_par_iter()
            .map(|(u, stored)| {
                let t = Instant::now();
                table.decode(u, &stored).map(|d| (d, t.elapsed()))
            })
            .collect::<Result<_>>()
    })
    .await?;
    let decompress_cpu: Duration = timed.iter().map(|(_, d)| *d).sum();
    stats.decompress_cpu_seconds = decompress_cpu.as_secs_f64();
    let decoded: Vec<Arc<T::Decoded>> = timed.into_iter().map(|(d, _)| Arc::new(d)).collect();
    stats.baskets = decoded.len() as u64;
    stats.uncompressed_bytes = decoded.iter().map(|d| table.decoded_len(d)).sum();
    let decode_time = t1.elapsed();
    stats.decode_seconds = decode_time.as_secs_f64();
    file.stats.record_fetch(
        stats.baskets,
        stats.compressed_bytes,
        stats.uncompressed_bytes,
        fetch_time,
        decode_time,
        decompress_cpu,
    );
    Ok((decoded, stats))
}

/// Read `items` over entries `[start, stop)`, taking the stored bytes found in `held` from there.
pub async fn read<T: Table + ?Sized>(
    table: &T,
    items: &[usize],
    start: u64,
    stop: u64,
    held: &Held,
) -> Result<(Vec<T::Item>, ReadStats)> {
    check_entry_range(table, start, stop)?;
    table.check(items)?;
    table.file().stats.record_read_call();
    let plan = table.plan(items, start, stop).await?;
    let (decoded, mut stats) = fetch_and_decode(table, &plan, held).await?;
    let t = Instant::now();
    let units = plan.into_iter().zip(decoded).collect();
    let arrays = table.assemble(items, start, stop, units).await?;
    stats.decode_seconds += t.elapsed().as_secs_f64();
    Ok((arrays, stats))
}
