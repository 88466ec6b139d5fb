//! What a file's reads did, accumulated over its lifetime (TTreePerfStats and more). Byte-source
//! counters (requests, round trips) live with the source; these are the engine's own.
//!
//! Each counter is declared once, in [`engine_counters!`]: the thread-safe accumulator, the
//! snapshot (a typed Python class, `cherenkov.EngineCounters`, when built with the `python`
//! feature), the sum over files and the list of names all come from that one declaration.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

macro_rules! engine_counters {
    (
        counts { $($(#[doc = $cdoc:literal])* $count:ident,)* }
        seconds { $($(#[doc = $sdoc:literal])* $secs:ident,)* }
    ) => {
        /// Thread-safe counters, updated by every read of a file (times in nanoseconds).
        #[derive(Debug, Default)]
        pub struct EngineStats {
            $($count: AtomicU64,)*
            $($secs: AtomicU64,)*
        }

        /// A copy of the counters at one moment.
        #[derive(Clone, Copy, Debug, Default, PartialEq)]
        #[cfg_attr(
            feature = "python",
            pyo3::pyclass(module = "cherenkov._core", name = "EngineCounters", get_all, frozen)
        )]
        pub struct StatsSnapshot {
            $($(#[doc = $cdoc])* pub $count: u64,)*
            $($(#[doc = $sdoc])* pub $secs: f64,)*
        }

        impl StatsSnapshot {
            /// The counters' names, in declaration order.
            pub const FIELDS: &'static [&'static str] = &[$(stringify!($count),)* $(stringify!($secs),)*];
        }

        impl std::ops::Add for StatsSnapshot {
            type Output = StatsSnapshot;
            fn add(self, other: StatsSnapshot) -> StatsSnapshot {
                StatsSnapshot {
                    $($count: self.$count + other.$count,)*
                    $($secs: self.$secs + other.$secs,)*
                }
            }
        }

        impl EngineStats {
            pub fn snapshot(&self) -> StatsSnapshot {
                StatsSnapshot {
                    $($count: self.$count.load(Relaxed),)*
                    $($secs: Duration::from_nanos(self.$secs.load(Relaxed)).as_secs_f64(),)*
                }
            }
        }
    };
}

engine_counters! {
    counts {
        /// Reads asked of the engine (one `arrays()` call, one prefetched step, one cache fill).
        read_calls,
        baskets,
        /// Basket bytes fetched (as stored, usually compressed).
        compressed_bytes,
        /// Basket bytes asked for, counted when the request is sent (reads in flight included):
        /// what speculation weighs a guess against.
        requested_bytes,
        /// Basket bytes after decompression.
        uncompressed_bytes,
        prefetched_steps,
        cache_hits,
        cache_misses,
        miss_fetches,
        startup_fetches,
        learned_fetches,
        /// Bytes of arrays read ahead (startup, trigger, prefetch) and dropped unused.
        unused_bytes,
        /// Stored bytes fetched ahead of any request on a guess (speculated sets of lazy chunks,
        /// read-ahead of raw reads); see `engine::speculation`.
        speculative_bytes,
        /// Of those, bytes then used.
        speculative_used_bytes,
        /// Of those, bytes dropped unused (the cost of speculation, kept within its budget).
        speculative_wasted_bytes,
    }
    seconds {
        /// Time spent waiting for basket bytes, summed over reads (overlapping reads overlap here).
        fetch_seconds,
        /// Wall time of the parallel decompression phases.
        decompress_wall_seconds,
        /// Decompression time summed over the threads that did it.
        decompress_cpu_seconds,
        /// Time placing decoded bytes into the arrays (byte order, entry offsets, copies):
        /// summed over threads where that is done unit by unit, else assembly's wall time.
        assemble_seconds,
        /// Time the consumer waited for data it needed now (what prefetching hides).
        blocked_seconds,
    }
}

#[cfg(feature = "python")]
#[pyo3::pymethods]
impl StatsSnapshot {
    /// All zero: the start of a sum over files.
    #[new]
    fn zero() -> StatsSnapshot {
        StatsSnapshot::default()
    }
    fn __add__(&self, other: &StatsSnapshot) -> StatsSnapshot {
        *self + *other
    }
    fn __repr__(&self) -> String {
        format!("{self:?}")
    }
}

fn add_time(counter: &AtomicU64, d: Duration) {
    counter.fetch_add(d.as_nanos().min(u64::MAX as u128) as u64, Relaxed);
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
        add_time(&self.fetch_seconds, fetch);
        add_time(&self.decompress_wall_seconds, wall);
        add_time(&self.decompress_cpu_seconds, cpu);
    }
    pub fn record_assembly(&self, time: Duration) {
        add_time(&self.assemble_seconds, time);
    }
    pub fn record_request(&self, bytes: u64) {
        self.requested_bytes.fetch_add(bytes, Relaxed);
    }
    pub fn record_read_call(&self) {
        self.read_calls.fetch_add(1, Relaxed);
    }
    pub fn record_blocked(&self, d: Duration) {
        add_time(&self.blocked_seconds, d);
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

    pub fn record_speculative(&self, fetched: u64, used: u64, wasted: u64) {
        self.speculative_bytes.fetch_add(fetched, Relaxed);
        self.speculative_used_bytes.fetch_add(used, Relaxed);
        self.speculative_wasted_bytes.fetch_add(wasted, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_add_up_and_name_every_counter() {
        let stats = EngineStats::default();
        stats.record_fetch(
            2,
            10,
            30,
            Duration::from_millis(5),
            Duration::ZERO,
            Duration::ZERO,
        );
        let one = stats.snapshot();
        assert_eq!((one.baskets, one.compressed_bytes), (2, 10));
        assert!((one.fetch_seconds - 0.005).abs() < 1e-9);
        let two = one + one;
        assert_eq!(two.uncompressed_bytes, 60);
        let names: std::collections::HashSet<_> = StatsSnapshot::FIELDS.iter().collect();
        assert_eq!(names.len(), StatsSnapshot::FIELDS.len());
        for name in [
            "blocked_seconds",
            "requested_bytes",
            "speculative_wasted_bytes",
        ] {
            assert!(StatsSnapshot::FIELDS.contains(&name), "{name}");
        }
    }
}
