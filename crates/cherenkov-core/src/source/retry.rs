//! The one retry schedule of every byte source: when a request that failed in a way that may pass
//! (a refused or reset connection, a timeout, a server error) is tried again, on a new connection.
//!
//! Waits grow exponentially from [`FIRST_WAIT`] to at most [`LONGEST_WAIT`], each drawn at random
//! between half and all of its step ("equal jitter"), so that clients that failed together do not
//! come back together. Retries stop when `retries` are spent or when the next would start more
//! than `window` after the first failure: a blip shorter than the window (a connection reset, a
//! server restart) costs a delay, not the read; a server that stays down fails the read within the
//! window (plus the request timeouts of the attempts).

use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, Instant};

/// The first wait; each next one doubles.
pub const FIRST_WAIT: Duration = Duration::from_millis(200);
/// No wait is longer (before jitter).
pub const LONGEST_WAIT: Duration = Duration::from_secs(2);

/// How long and how often a failed request is tried again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// At most this many extra attempts. Default 8.
    pub retries: u32,
    /// No retry starts later than this after the first failure. Default 5 s: the waits before the
    /// fifth retry add up to at least 1.5 s and at most 3 s, so a blip of a second or two is
    /// ridden out whatever the jitter drew.
    pub window: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            retries: 8,
            window: Duration::from_secs(5),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry `n` (1 for the first), `since_first_failure` after the first failed
    /// attempt; `None` when no retry is left.
    pub fn wait_before(&self, n: u32, since_first_failure: Duration) -> Option<Duration> {
        if n == 0 || n > self.retries {
            return None;
        }
        let wait = step(n).mul_f64(0.5 + 0.5 * random_fraction());
        (since_first_failure + wait <= self.window).then_some(wait)
    }
}

/// The retries of one request: after each failure, [`Retries::after_failure`] says how long to wait
/// before the next attempt, or that there is none.
#[derive(Debug)]
pub struct Retries {
    policy: RetryPolicy,
    failures: u32,
    first_failure: Option<Instant>,
}

impl Retries {
    pub fn new(policy: RetryPolicy) -> Retries {
        Retries {
            policy,
            failures: 0,
            first_failure: None,
        }
    }

    /// Count a failure; the wait before trying again, or `None` when no retry is left.
    pub fn after_failure(&mut self) -> Option<Duration> {
        self.failures += 1;
        let since = self
            .first_failure
            .get_or_insert_with(Instant::now)
            .elapsed();
        self.policy.wait_before(self.failures, since)
    }

    /// "3 attempts over 1.4 s": for the error once retries are spent.
    pub fn describe(&self) -> String {
        let over = self.first_failure.map_or(Duration::ZERO, |t| t.elapsed());
        format!(
            "{} attempts over {:.1} s",
            self.failures,
            over.as_secs_f64()
        )
    }
}

/// The exponential step of retry `n` (1 for the first), before jitter.
fn step(n: u32) -> Duration {
    FIRST_WAIT
        .saturating_mul(1 << n.saturating_sub(1).min(16))
        .min(LONGEST_WAIT)
}

/// A number in [0, 1): std's randomly keyed hasher (a new key per call) is random enough for
/// jitter and needs no generator of its own.
fn random_fraction() -> f64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(0);
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_grow_with_jitter_up_to_a_ceiling() {
        let policy = RetryPolicy {
            retries: 100,
            window: Duration::from_secs(1000),
        };
        for n in [1, 3, 30] {
            let full = step(n);
            let waits: Vec<Duration> = (0..50)
                .map(|_| policy.wait_before(n, Duration::ZERO).unwrap())
                .collect();
            assert!(
                waits.iter().all(|w| *w >= full / 2 && *w <= full),
                "{waits:?}"
            );
            assert!(waits.iter().any(|w| *w != waits[0]), "no jitter: {waits:?}");
        }
        assert_eq!(step(1), FIRST_WAIT);
        assert_eq!(step(3), FIRST_WAIT * 4);
        assert_eq!(step(30), LONGEST_WAIT);
    }

    #[test]
    fn retries_stop_at_the_count_or_the_window() {
        let policy = RetryPolicy {
            retries: 2,
            window: Duration::from_secs(5),
        };
        assert!(policy.wait_before(2, Duration::ZERO).is_some());
        assert_eq!(policy.wait_before(3, Duration::ZERO), None);
        assert_eq!(policy.wait_before(1, Duration::from_secs(5)), None);
        let none = RetryPolicy {
            retries: 0,
            ..policy
        };
        assert_eq!(none.wait_before(1, Duration::ZERO), None);
    }

    #[test]
    fn the_default_window_outlasts_a_blip_of_a_second() {
        // Whatever the jitter draws, the retries the window allows span more than a second.
        let policy = RetryPolicy::default();
        for _ in 0..50 {
            let mut elapsed = Duration::ZERO;
            let mut n = 1;
            while let Some(wait) = policy.wait_before(n, elapsed) {
                elapsed += wait;
                n += 1;
            }
            assert!(elapsed > Duration::from_millis(1500), "{elapsed:?}");
            assert!(elapsed <= policy.window);
        }
    }
}
