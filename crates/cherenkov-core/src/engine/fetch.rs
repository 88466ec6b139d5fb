//! Fetching planned baskets: one vectored request for those not already held, then
//! decompression of all of them in parallel.

use super::file::RootFile;
use super::output::ReadStats;
use super::plan::{BasketSource, Planned};
use crate::error::{Error, Result};
use crate::format::basket::{decode_basket, Basket};
use crate::format::tree::TreeMeta;
use crate::source::ByteRange;
use bytes::Bytes;
use rayon::prelude::*;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Compressed baskets already in memory, by file offset: read together in one request, and
/// decompressed only if a branch of theirs is used (see `lazy.rs`).
pub type HeldBaskets = HashMap<u64, Bytes>;

/// The planned baskets' bytes (those stored on disk), in one request, keyed by offset.
pub async fn fetch_baskets(file: &RootFile, plan: &[Planned]) -> Result<HeldBaskets> {
    let ranges = disk_ranges(file, plan)?;
    let raw = fetch_ranges(file, &ranges).await?;
    file.stats.record_fetch(
        0,
        ranges.iter().map(|r| r.len).sum(),
        0,
        Duration::ZERO,
        Duration::ZERO,
        Duration::ZERO,
    );
    Ok(ranges.iter().map(|r| r.offset).zip(raw).collect())
}

fn disk_ranges(file: &RootFile, plan: &[Planned]) -> Result<Vec<ByteRange>> {
    let ranges: Vec<ByteRange> = plan
        .iter()
        .filter_map(|p| match p.source {
            BasketSource::Disk(loc) => Some(ByteRange::new(loc.seek, loc.bytes as u64)),
            BasketSource::Embedded(_) => None,
        })
        .collect();
    for r in &ranges {
        crate::format::directory::check_inside(r.offset, r.len, file.size, "a basket")
            .map_err(|e| e.in_file(file.name()))?;
    }
    Ok(ranges)
}

async fn fetch_ranges(file: &RootFile, ranges: &[ByteRange]) -> Result<Vec<Bytes>> {
    if ranges.is_empty() {
        return Ok(Vec::new());
    }
    file.source.read_ranges(ranges).await
}

/// Fetch the planned baskets not `held` in one request and decompress them all in parallel, in
/// plan order.
pub async fn fetch_and_decode(
    file: &RootFile,
    tree: &TreeMeta,
    plan: &[Planned],
    held: &HeldBaskets,
) -> Result<(Vec<Basket>, ReadStats)> {
    let mut stats = ReadStats::default();
    let ranges = disk_ranges(file, plan)?;
    let is_held = |r: &ByteRange| held.get(&r.offset).is_some_and(|b| b.len() as u64 == r.len);
    let missing: Vec<ByteRange> = ranges.iter().copied().filter(|r| !is_held(r)).collect();
    let t0 = Instant::now();
    let mut fetched = fetch_ranges(file, &missing).await?.into_iter();
    let raw: Vec<Bytes> = ranges
        .iter()
        .map(|r| match held.get(&r.offset).filter(|_| is_held(r)) {
            Some(bytes) => bytes.clone(),
            None => fetched.next().unwrap_or_default(),
        })
        .collect();
    let fetch_time = t0.elapsed();
    stats.fetch_seconds = fetch_time.as_secs_f64();
    stats.compressed_bytes = missing.iter().map(|r| r.len).sum();

    let t1 = Instant::now();
    let mut raw_iter = raw.into_iter();
    let jobs: Vec<(&Planned, Option<bytes::Bytes>)> = plan
        .iter()
        .map(|p| {
            (
                p,
                matches!(p.source, BasketSource::Disk(_))
                    .then(|| raw_iter.next())
                    .flatten(),
            )
        })
        .collect();
    // Decompression is CPU work: let the runtime move its other tasks off this thread meanwhile.
    let timed: Vec<(Basket, Duration)> = super::cpu_work(|| {
        jobs.into_par_iter()
            .map(|(p, raw)| {
                let t = Instant::now();
                decode_planned(file, tree, p, raw.as_deref()).map(|b| (b, t.elapsed()))
            })
            .collect::<Result<_>>()
    })?;
    let decompress_cpu: Duration = timed.iter().map(|(_, d)| *d).sum();
    stats.decompress_cpu_seconds = decompress_cpu.as_secs_f64();
    let decoded: Vec<Basket> = timed.into_iter().map(|(b, _)| b).collect();
    stats.baskets = decoded.len() as u64;
    stats.uncompressed_bytes = decoded.iter().map(|b| b.content.len() as u64).sum();
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

fn decode_planned(
    file: &RootFile,
    tree: &TreeMeta,
    p: &Planned,
    raw: Option<&[u8]>,
) -> Result<Basket> {
    let meta = &tree.branches[p.branch];
    match (&p.source, raw) {
        (BasketSource::Disk(loc), Some(raw)) => {
            let origin = format!(
                "basket at file offset {} of branch '{}'",
                loc.seek,
                tree.branch_path(p.branch)
            );
            let basket = decode_basket(raw, &origin).map_err(|e| e.in_file(file.name()))?;
            let expected = loc.entry_stop - loc.entry_start;
            if basket.entries as u64 != expected {
                return Err(Error::format(
                    origin,
                    format!(
                        "{expected} entries as the branch says, found {}",
                        basket.entries
                    ),
                )
                .in_file(file.name()));
            }
            Ok(basket)
        }
        (BasketSource::Embedded(i), _) => {
            let e = &meta.embedded[*i];
            Ok(Basket {
                entries: e.entries,
                content: e.content.clone(),
                offsets: e.offsets.clone(),
            })
        }
        _ => unreachable!("every disk basket was fetched"),
    }
}
