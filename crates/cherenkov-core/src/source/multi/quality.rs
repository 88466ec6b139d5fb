//! A replica's quality: recent-weighted estimates of its latency and throughput, learned from
//! real requests; the expected time of a request of `b` bytes is `latency + b / throughput`.

/// Weight of the newest sample in the recent-weighted averages.
const EWMA_WEIGHT: f64 = 0.3;
/// Before any sample: assume a fast, nearby server (so new replicas get tried).
const PRIOR_LATENCY: f64 = 0.01;
const PRIOR_THROUGHPUT: f64 = 100e6;
/// Requests smaller than this measure only latency.
const LATENCY_SAMPLE: u64 = 64 * 1024;
/// The smallest request that measures a replica's throughput for the first time: smaller ones
/// mostly measure the wait.
pub const FIRST_THROUGHPUT_SAMPLE: u64 = 1 << 20;
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(module = "cherenkov._core", get_all, frozen)
)]
pub struct Quality {
    /// Seconds.
    pub latency: f64,
    /// Bytes per second.
    pub throughput: f64,
    pub samples: u64,
    /// Of which throughput samples (the others measured latency).
    pub throughput_samples: u64,
}

impl Quality {
    /// Before any sample: a fast server nearby (so new replicas get tried).
    pub fn prior() -> Quality {
        Quality {
            latency: PRIOR_LATENCY,
            throughput: PRIOR_THROUGHPUT,
            samples: 0,
            throughput_samples: 0,
        }
    }

    pub fn expected(&self, bytes: u64) -> f64 {
        self.latency + bytes as f64 / self.throughput
    }

    /// Whether a request of `bytes` has been measured enough to expect its time.
    pub fn knows(&self, bytes: u64) -> bool {
        if bytes < LATENCY_SAMPLE {
            self.samples > self.throughput_samples
        } else {
            self.throughput_samples > 0
        }
    }

    /// Whether a request of `bytes` mostly waits (so its time measures latency) rather than
    /// transfers. Until a large request (1 MiB) has measured the throughput, the prior's (fast)
    /// throughput cannot tell: size alone decides then.
    fn measures_latency(&self, bytes: u64) -> bool {
        bytes < LATENCY_SAMPLE
            || if self.throughput_samples > 0 {
                (bytes as f64 / self.throughput) < self.latency
            } else {
                bytes < FIRST_THROUGHPUT_SAMPLE
            }
    }

    /// A request still unanswered after `seconds` (abandoned, or being hedged): a lower bound on
    /// its time, which raises the estimate if that was lower. A throughput not measured yet is
    /// replaced by the bound, which then counts as a sample: a replica too slow to ever answer
    /// first must not keep the prior's.
    pub fn at_least(&mut self, bytes: u64, seconds: f64) {
        if self.measures_latency(bytes) {
            let transfer = bytes as f64 / self.throughput;
            self.latency = self.latency.max(seconds - transfer);
            return;
        }
        let rate = self.rate(bytes, seconds);
        if self.throughput_samples == 0 {
            self.throughput = rate.min(PRIOR_THROUGHPUT);
            self.throughput_samples += 1;
            self.samples += 1;
        } else {
            self.throughput = self.throughput.min(rate);
        }
    }

    /// The transfer rate of `bytes` in `seconds` once the known latency is taken off (at most 90 %
    /// of the time: the latency estimate may be high).
    fn rate(&self, bytes: u64, seconds: f64) -> f64 {
        bytes as f64 / (seconds - self.latency).max(seconds * 0.1).max(1e-6)
    }

    /// Split one observation (`bytes` in `seconds`) between latency and throughput (after taking
    /// the known latency off); the first sample of each kind replaces the prior.
    pub fn update(&mut self, bytes: u64, seconds: f64) {
        if self.measures_latency(bytes) {
            let first = self.samples == self.throughput_samples;
            let w = if first { 1.0 } else { EWMA_WEIGHT };
            let transfer = bytes as f64 / self.throughput;
            self.latency = (1.0 - w) * self.latency + w * (seconds - transfer).max(1e-6);
        } else {
            let w = if self.throughput_samples == 0 {
                1.0
            } else {
                EWMA_WEIGHT
            };
            self.throughput = (1.0 - w) * self.throughput + w * self.rate(bytes, seconds);
            self.throughput_samples += 1;
        }
        self.samples += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quality_learns_latency_from_small_requests_and_throughput_from_large_ones() {
        let mut q = Quality::prior();
        q.update(1000, 0.1);
        assert!((q.latency - 0.1).abs() < 0.01, "{q:?}");
        for _ in 0..20 {
            q.update(50_000_000, 0.1 + 1.0); // 50 MB/s after 100 ms of latency
        }
        assert!((q.throughput - 50e6).abs() / 50e6 < 0.1, "{q:?}");
        assert!(q.expected(1000) < q.expected(10_000_000));
    }

    #[test]
    fn a_slow_link_is_not_taken_for_a_far_one() {
        // 4 MB/s and 10 ms away: requests of 160 kB and 2 MB take 50 ms and 510 ms.
        let mut q = Quality::prior();
        for _ in 0..5 {
            q.update(160_000, 0.05);
            q.update(2_000_000, 0.51);
            q.update(200, 0.01);
        }
        assert!(q.latency < 0.02, "{q:?}");
        assert!((q.throughput - 4e6).abs() / 4e6 < 0.3, "{q:?}");
    }
}
