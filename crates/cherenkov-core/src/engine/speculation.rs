//! Speculation: fetching ahead what an analysis has not asked for yet but probably will, within a
//! budget of bytes read for nothing. Two users share the policy and its accounts:
//!
//! - lazy chunks (`lazy.rs`): per branch outside the learned set, how often the chunks use it (a
//!   moving rate). Branches used in more than `threshold` of the chunks are fetched with the
//!   learned set, in the same vectored read, ahead of use; the others stay on demand. A set seen
//!   for the first time starts at the threshold when a chunk of it fits the budget. Branches of
//!   one conditional set (a trigger's extras) share their history and so their rate, and enter or
//!   leave together;
//! - raw byte reads (`raw/`): baskets of the learned and speculated sets read ahead of a reader
//!   that decodes ROOT itself, its first misses' collections, and sequential or strided reads
//!   of any file (`raw/ahead.rs`).
//!
//! What was fetched ahead is settled once it is known to be used or not (used bytes, wasted
//! bytes), as Furano's cache window strategies are measured. When the wasted bytes exceed `budget`
//! of the bytes read, the worst set (the lowest rate) stops being speculated; lazy chunks stop it
//! one chunk early, as the next chunk is already in flight.

use super::stats::EngineStats;
use std::collections::{BTreeMap, BTreeSet};

/// The switches of speculation (`cherenkov.open(..., speculate=..., speculate_threshold=...,
/// speculate_budget=...)`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Speculation {
    pub enabled: bool,
    /// A set used in more than this fraction of chunks is fetched ahead with the learned set.
    pub threshold: f64,
    /// Bytes fetched ahead and never used may reach at most this fraction of the bytes read.
    pub budget: f64,
}

impl Default for Speculation {
    fn default() -> Self {
        Self {
            enabled: true,
            threshold: 0.3,
            budget: 0.2,
        }
    }
}

/// Weight of the latest chunk in a branch's usage rate: the rate follows about the last four
/// chunks, so a set used every other chunk sits near 0.5 and one used every tenth stays below
/// 0.3, and a change of pattern is followed within a few chunks.
const LATEST_WEIGHT: f64 = 0.25;

/// A branch speculated keeps being so while its rate stays above this fraction of the threshold:
/// a set near the threshold does not enter and leave every other chunk (each change restarts the
/// read-ahead of the next chunks).
const KEEP_FRACTION: f64 = 0.5;

/// The rate after one more chunk, `used` or not (a branch never seen starts from 0).
pub fn updated_rate(rate: Option<f64>, used: bool) -> f64 {
    let old = rate.unwrap_or(0.0);
    old + LATEST_WEIGHT * (f64::from(u8::from(used)) - old)
}

/// The branches (by path) to speculate on from now on: those of `rates` at or above the threshold,
/// or above its `KEEP_FRACTION` if `current` already has them; never those in `stopped`.
pub fn chosen(
    options: &Speculation,
    rates: &BTreeMap<String, f64>,
    current: &BTreeSet<String>,
    stopped: &BTreeSet<String>,
) -> BTreeSet<String> {
    if !options.enabled {
        return BTreeSet::new();
    }
    rates
        .iter()
        .filter(|(path, &rate)| {
            let bar = match current.contains(*path) {
                true => options.threshold * KEEP_FRACTION,
                false => options.threshold,
            };
            rate >= bar && rate > 0.0 && !stopped.contains(*path)
        })
        .map(|(path, _)| path.clone())
        .collect()
}

/// The worst set among `current`: the branches with the lowest rate (a set's branches share it).
pub fn worst(rates: &BTreeMap<String, f64>, current: &BTreeSet<String>) -> BTreeSet<String> {
    let rate = |p: &String| rates.get(p).copied().unwrap_or(0.0);
    let Some(lowest) = current.iter().map(rate).min_by(f64::total_cmp) else {
        return BTreeSet::new();
    };
    current
        .iter()
        .filter(|p| rate(p) <= lowest + 1e-9)
        .cloned()
        .collect()
}

/// What one reader fetched ahead, and what became of it. Every amount is also added to the
/// file's counters (`speculative_*` in `EngineStats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ledger {
    pub fetched: u64,
    pub used: u64,
    pub wasted: u64,
}

impl Ledger {
    /// `bytes` were fetched ahead.
    pub fn fetched(&mut self, stats: &EngineStats, bytes: u64) {
        self.fetched += bytes;
        stats.record_speculative(bytes, 0, 0);
    }

    /// `bytes` fetched ahead turned out `used`, or were dropped unused.
    pub fn settle(&mut self, stats: &EngineStats, bytes: u64, used: bool) {
        if used {
            self.used += bytes;
            stats.record_speculative(0, bytes, 0);
        } else {
            self.wasted += bytes;
            stats.record_speculative(0, 0, bytes);
        }
    }

    /// Whether the wasted bytes exceed the budget's share of `bytes_read`.
    pub fn over_budget(&self, options: &Speculation, bytes_read: u64) -> bool {
        self.would_exceed(options, bytes_read, 0)
    }

    /// Whether `more` bytes fetched ahead and wasted would take the wasted bytes over the budget.
    pub fn would_exceed(&self, options: &Speculation, bytes_read: u64, more: u64) -> bool {
        (self.wasted + more) as f64 > options.budget * (bytes_read + more) as f64
    }

    /// Whether `more` bytes may still be fetched on a guess: were they, and everything fetched
    /// ahead and not settled yet, all unused, the wasted bytes would stay within the budget.
    pub fn fits(&self, options: &Speculation, bytes_read: u64, more: u64) -> bool {
        let unsettled = self.fetched - self.used - self.wasted;
        let wasted = self.wasted + unsettled + more;
        wasted as f64 <= options.budget * (bytes_read + more) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate_after(pattern: impl Iterator<Item = bool>) -> Vec<f64> {
        let mut rate = None;
        pattern
            .map(|used| {
                rate = Some(updated_rate(rate, used));
                rate.unwrap()
            })
            .collect()
    }

    #[test]
    fn every_other_chunk_passes_the_default_threshold_and_every_tenth_never_does() {
        let threshold = Speculation::default().threshold;
        let every_other = rate_after((0..40).map(|i| i % 2 == 0));
        assert!(every_other[4..]
            .iter()
            .all(|&r| r >= threshold * KEEP_FRACTION));
        assert!(every_other[2] >= threshold, "{every_other:?}");
        let every_tenth = rate_after((0..100).map(|i| i % 10 == 0));
        assert!(
            every_tenth.iter().all(|&r| r < threshold),
            "{every_tenth:?}"
        );
        // stops a few chunks after the set is no longer used
        let stopped = rate_after((0..20).map(|i| i < 10 && i % 2 == 0));
        assert!(stopped[16] < threshold * KEEP_FRACTION);
    }

    #[test]
    fn chosen_keeps_a_set_near_the_threshold_and_never_a_stopped_one() {
        let options = Speculation::default();
        let rates: BTreeMap<String, f64> = [("a", 0.5), ("b", 0.2), ("c", 0.1), ("d", 0.9)]
            .map(|(p, r)| (p.to_string(), r))
            .into();
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        assert_eq!(
            chosen(&options, &rates, &set(&[]), &set(&[])),
            set(&["a", "d"])
        );
        assert_eq!(
            chosen(&options, &rates, &set(&["b", "c"]), &set(&["d"])),
            set(&["a", "b"])
        );
        let off = Speculation {
            enabled: false,
            ..options
        };
        assert!(chosen(&off, &rates, &set(&["a"]), &set(&[])).is_empty());
        assert_eq!(worst(&rates, &set(&["a", "b", "d"])), set(&["b"]));
    }

    #[test]
    fn the_ledger_settles_into_the_file_counters_and_checks_the_budget() {
        let stats = EngineStats::default();
        let mut ledger = Ledger::default();
        ledger.fetched(&stats, 300);
        ledger.settle(&stats, 100, true);
        ledger.settle(&stats, 200, false);
        let s = stats.snapshot();
        assert_eq!(
            (
                s.speculative_bytes,
                s.speculative_used_bytes,
                s.speculative_wasted_bytes
            ),
            (300, 100, 200)
        );
        let options = Speculation::default();
        assert!(ledger.over_budget(&options, 999));
        assert!(!ledger.over_budget(&options, 1000));
        // 200 wasted: 100 more on a guess fit 20 % of 1400 + 100 read, not of 1300 + 100
        assert!(ledger.fits(&options, 1400, 100));
        assert!(!ledger.fits(&options, 1300, 100));
        ledger.fetched(&stats, 50); // not settled yet: counted as if wasted
        assert!(!ledger.fits(&options, 1400, 100));
    }
}
