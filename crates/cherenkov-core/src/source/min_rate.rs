//! The slowest transfer accepted, as curl's low-speed limit (`CURLOPT_LOW_SPEED_LIMIT` bytes a
//! second over `CURLOPT_LOW_SPEED_TIME`): a transfer still waiting for bytes that received fewer
//! than `min_rate × window` of them over the last `window` is abandoned at once, whatever its
//! size, and retried (on a new connection, or on another replica). The window is the request
//! timeout: silence for that long is the case of no byte at all, so one rule bounds both.
//!
//! A server dripping its answer never goes silent. Bounding a request by its size instead
//! (`timeout + bytes / min_rate`) let one dripping answer to a 20 MB vector read hold the read for
//! more than ten minutes; the window finds it after `timeout`, whatever the size.
//!
//! HTTP watches each request (one request per connection at a time); XRootD watches each
//! connection while requests wait on it, since one connection answers its requests one after
//! another: a request queued behind others gets no byte of its own while the connection works.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// How often, per window, a transfer's progress is sampled: one turning slow is found at most
/// `window / SLICES` after a whole window of slowness.
const SLICES: u32 = 8;

/// The rule: at least `min_rate` bytes a second over any `window` while a transfer lasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MinRate {
    pub min_rate: u64,
    pub window: Duration,
}

impl MinRate {
    /// At least `min_rate` bytes a second over any `timeout`: the window is the request timeout.
    pub fn over_timeout(min_rate: u64, timeout: Duration) -> MinRate {
        MinRate {
            min_rate,
            window: timeout,
        }
    }

    /// Fewer than this over a window is too slow (and at least one byte: silence always is).
    fn min_bytes(&self) -> u64 {
        ((self.min_rate as f64 * self.window.as_secs_f64()) as u64).max(1)
    }

    fn slice(&self) -> Duration {
        (self.window / SLICES).max(Duration::from_millis(1))
    }
}

/// Bytes received so far by a transfer (or a connection), counted where they arrive.
#[derive(Debug, Default)]
pub struct Progress(AtomicU64);

impl Progress {
    pub fn add(&self, bytes: u64) {
        self.0.fetch_add(bytes, Ordering::Relaxed);
    }
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Why a transfer was abandoned; its text says what was received and what is accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TooSlow {
    pub received: u64,
    pub rule: MinRate,
}

impl std::fmt::Display for TooSlow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let window = self.rule.window.as_secs_f64();
        match self.received {
            0 => write!(f, "no answer for {window:.1} s (the request timeout)"),
            got => write!(
                f,
                "the answer came too slowly: {got} byte{} in the last {window:.1} s, below the \
                 slowest transfer accepted ({} bytes/s over the request timeout)",
                if got == 1 { "" } else { "s" },
                self.rule.min_rate
            ),
        }
    }
}

/// A transfer's progress, sampled every slice of the window: the verdict over the last window.
#[derive(Debug)]
pub struct RateWindow {
    rule: MinRate,
    /// (when, bytes received by then), oldest first; the oldest is at or before a window ago.
    samples: VecDeque<(Instant, u64)>,
}

impl RateWindow {
    /// A transfer that starts at `now`, having received `bytes` (of the connection) by then.
    pub fn new(rule: MinRate, now: Instant, bytes: u64) -> RateWindow {
        RateWindow {
            rule,
            samples: VecDeque::from([(now, bytes)]),
        }
    }

    /// Note that `bytes` were received by `now`: `Some` when the last whole window proves the
    /// transfer too slow. No verdict before a whole window has passed.
    pub fn sample(&mut self, now: Instant, bytes: u64) -> Option<TooSlow> {
        self.samples.push_back((now, bytes));
        let window_start = now.checked_sub(self.rule.window)?;
        while self.samples.len() > 1 && self.samples[1].0 <= window_start {
            self.samples.pop_front();
        }
        let (oldest, then) = self.samples[0];
        let received = bytes.saturating_sub(then);
        (oldest <= window_start && received < self.rule.min_bytes()).then_some(TooSlow {
            received,
            rule: self.rule,
        })
    }
}

/// Returns once `progress` shows the transfer too slow, never otherwise: race it against the
/// transfer (`tokio::select!`), which it then abandons.
pub async fn too_slow(rule: MinRate, progress: &Progress) -> TooSlow {
    let start = Instant::now();
    let mut window = RateWindow::new(rule, start, progress.get());
    let mut ticks = tokio::time::interval_at(start + rule.slice(), rule.slice());
    loop {
        let now = ticks.tick().await;
        if let Some(slow) = window.sample(now, progress.get()) {
            return slow;
        }
    }
}

/// How often a connection-wide watch (see `xrootd::streams`) samples its progress.
pub fn sampling(rule: MinRate) -> Duration {
    rule.slice()
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: MinRate = MinRate {
        min_rate: 100,
        window: Duration::from_secs(8),
    };

    /// Feed a window one sample a second, `rate(t)` bytes in second t; the second it says slow.
    fn slow_after(rate: impl Fn(u64) -> u64) -> Option<u64> {
        let start = Instant::now();
        let mut window = RateWindow::new(RULE, start, 0);
        let mut total = 0;
        (1..=60).find(|&t| {
            total += rate(t);
            window
                .sample(start + Duration::from_secs(t), total)
                .is_some()
        })
    }

    #[test]
    fn a_drip_is_found_after_one_window_whatever_is_left_to_come() {
        assert_eq!(slow_after(|_| 1), Some(8));
        assert_eq!(slow_after(|_| 0), Some(8), "silence is the case of no byte");
    }

    #[test]
    fn a_transfer_at_the_rate_is_never_slow() {
        assert_eq!(slow_after(|_| 100), None);
        // bursts: 800 bytes every eighth second still make 100 a second over every window
        assert_eq!(slow_after(|t| if t % 8 == 0 { 800 } else { 0 }), None);
    }

    #[test]
    fn a_transfer_turning_slow_is_found_one_window_later() {
        assert_eq!(slow_after(|t| if t <= 20 { 10_000 } else { 1 }), Some(28));
    }

    #[test]
    fn the_verdict_says_what_came_and_what_is_accepted() {
        let slow = TooSlow {
            received: 8,
            rule: RULE,
        };
        let text = slow.to_string();
        assert!(text.contains("8 bytes in the last 8.0 s") && text.contains("100 bytes/s"));
        let silent = TooSlow {
            received: 0,
            ..slow
        };
        assert_eq!(
            silent.to_string(),
            "no answer for 8.0 s (the request timeout)"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_watch_fires_one_window_after_the_transfer_stalls() {
        let progress = Progress::default();
        let started = Instant::now();
        let slow = tokio::select! {
            slow = too_slow(RULE, &progress) => slow,
            _ = async {
                for _ in 0..5 {
                    progress.add(1000);
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                std::future::pending::<()>().await
            } => unreachable!(),
        };
        assert_eq!(slow.received, 0);
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_secs(12) && waited <= Duration::from_secs(14),
            "{waited:?}"
        );
    }
}
