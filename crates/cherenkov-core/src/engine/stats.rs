//! What a file's reads did, accumulated over its lifetime (TTreePerfStats and more). Byte-source
//! counters (requests, round trips) live with the source; these are the engine's own.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Thread-safe counters, updated by every read of a file.
#[derive(Debug, Default)]
pub struct EngineStats {
    read_calls: AtomicU64,
    baskets: AtomicU64,
    compressed_bytes: AtomicU64,
    uncompressed_bytes: AtomicU64,
    fetch_ns: AtomicU64,
    decompress_wall_ns: AtomicU64,
    decompress_cpu_ns: AtomicU64,
    blocked_ns: AtomicU64,
    prefetched_steps: AtomicU64,
    cache_hits: AtomicU64,
    cache_misses: AtomicU64,
    miss_fetches: AtomicU64,
    startup_fetches: AtomicU64,
    learned_fetches: AtomicU64,
    unused_bytes: AtomicU64,
}

/// A copy of the counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StatsSnapshot {
    /// Reads asked of the engine (one `arrays()` call, one prefetched step, one cache fill).
    pub read_calls: u64,
    pub baskets: u64,
    /// Basket bytes fetched (as stored, usually compressed).
    pub compressed_bytes: u64,
    /// Basket bytes after decompression.
    pub uncompressed_bytes: u64,
    /// Time spent waiting for basket bytes, summed over reads (overlapping reads overlap here).
    pub fetch_time: Duration,
    /// Wall time of the parallel decompression phases.
    pub decompress_wall: Duration,
    /// Decompression time summed over the threads that did it.
    pub decompress_cpu: Duration,
    /// Time the consumer waited for data it needed now (what prefetching hides).
    pub blocked_time: Duration,
    pub prefetched_steps: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub miss_fetches: u64,
    pub startup_fetches: u64,
    pub learned_fetches: u64,
    /// Bytes of arrays read ahead (startup, trigger, prefetch) and dropped unused.
    pub unused_bytes: u64,
}

fn ns(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

impl EngineStats {
    pub fn record_fetch(
        &self,
        baskets: u64,
        compressed: u64,
        uncompressed: u64,
        fetch: Duration,
        wall: Duration,
        cpu: Duration,
    ) {
        self.baskets.fetch_add(baskets, Relaxed);
        self.compressed_bytes.fetch_add(compressed, Relaxed);
        self.uncompressed_bytes.fetch_add(uncompressed, Relaxed);
        self.fetch_ns.fetch_add(ns(fetch), Relaxed);
        self.decompress_wall_ns.fetch_add(ns(wall), Relaxed);
        self.decompress_cpu_ns.fetch_add(ns(cpu), Relaxed);
    }
    pub fn record_read_call(&self) {
        self.read_calls.fetch_add(1, Relaxed);
    }
    pub fn record_blocked(&self, d: Duration) {
        self.blocked_ns.fetch_add(ns(d), Relaxed);
    }
    pub fn record_prefetched_step(&self) {
        self.prefetched_steps.fetch_add(1, Relaxed);
    }
    pub fn record_cache(
        &self,
        hits: u64,
        misses: u64,
        miss_fetches: u64,
        startup_fetches: u64,
        learned_fetches: u64,
    ) {
        self.cache_hits.fetch_add(hits, Relaxed);
        self.cache_misses.fetch_add(misses, Relaxed);
        self.miss_fetches.fetch_add(miss_fetches, Relaxed);
        self.startup_fetches.fetch_add(startup_fetches, Relaxed);
        self.learned_fetches.fetch_add(learned_fetches, Relaxed);
    }

    pub fn record_unused(&self, bytes: u64) {
        self.unused_bytes.fetch_add(bytes, Relaxed);
    }

    pub fn snapshot(&self) -> StatsSnapshot {
        let d = |a: &AtomicU64| Duration::from_nanos(a.load(Relaxed));
        StatsSnapshot {
            read_calls: self.read_calls.load(Relaxed),
            baskets: self.baskets.load(Relaxed),
            compressed_bytes: self.compressed_bytes.load(Relaxed),
            uncompressed_bytes: self.uncompressed_bytes.load(Relaxed),
            fetch_time: d(&self.fetch_ns),
            decompress_wall: d(&self.decompress_wall_ns),
            decompress_cpu: d(&self.decompress_cpu_ns),
            blocked_time: d(&self.blocked_ns),
            prefetched_steps: self.prefetched_steps.load(Relaxed),
            cache_hits: self.cache_hits.load(Relaxed),
            cache_misses: self.cache_misses.load(Relaxed),
            miss_fetches: self.miss_fetches.load(Relaxed),
            startup_fetches: self.startup_fetches.load(Relaxed),
            learned_fetches: self.learned_fetches.load(Relaxed),
            unused_bytes: self.unused_bytes.load(Relaxed),
        }
    }
}
