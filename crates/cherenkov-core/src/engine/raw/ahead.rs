//! Read-ahead for raw byte access that follows no plan (a reader that decodes ROOT itself, fsspec
//! reading a file block by block): when the last reads of one range each make a sequential or
//! strided pattern (the same length, the same distance between starts), the next ranges of the
//! pattern are fetched ahead in one vectored request while the reader uses the current ones, and the reads that land
//! on them are served from memory. Every read-ahead batch fetches more ranges than the one before
//! while the pattern holds (up to `MAX_DEPTH` ranges and `MAX_AHEAD_BYTES`, and within the
//! budget: see `read_ahead`); a read off the pattern drops what was fetched ahead. The bytes
//! fetched ahead and never used are the cost, measured as for lazy chunks (`speculation.rs`).

use crate::engine::speculation::{Ledger, Speculation};
use crate::engine::stats::EngineStats;
use crate::error::Result;
use crate::source::{ByteRange, SharedSource};
use bytes::Bytes;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// Ranges of the first read-ahead batch; each next batch doubles it while the pattern holds.
const FIRST_DEPTH: usize = 4;
const MAX_DEPTH: usize = 64;
/// Bytes fetched ahead and not yet used, at most.
const MAX_AHEAD_BYTES: u64 = 64 << 20;

/// A batch's bytes once fetched; `None` if the read-ahead failed (the reads then go on demand and
/// report the error themselves).
type Fetched = Option<Arc<Option<Vec<Bytes>>>>;

/// One read-ahead request in flight or done.
struct Batch {
    ranges: Vec<ByteRange>,
    /// Per range: bytes of it served so far.
    used: Vec<u64>,
    /// Filled by a task of its own, which ends with its one request (a reader served from a
    /// batch dropped meanwhile still gets the bytes).
    data: watch::Receiver<Fetched>,
}

#[derive(Default)]
struct State {
    /// The last ranges read, oldest first (three make a pattern).
    history: VecDeque<ByteRange>,
    batches: VecDeque<Batch>,
    depth: usize,
    ledger: Ledger,
    /// Bytes the reader asked for (the budget's measure of bytes read).
    requested: u64,
}

/// A byte source read through a read-ahead window; see the module documentation.
pub struct RawReader {
    source: SharedSource,
    size: u64,
    options: Speculation,
    /// Read-ahead counters: `speculative_*`, `cache_hits` (ranges served from read-ahead) and
    /// `cache_misses` (ranges read on demand).
    pub stats: EngineStats,
    state: Mutex<State>,
}

/// Where one asked range comes from.
enum Served {
    Ahead {
        data: watch::Receiver<Fetched>,
        index: usize,
        skip: u64,
    },
    Demand,
}

impl RawReader {
    pub fn new(source: SharedSource, size: u64, options: Speculation) -> Self {
        Self {
            source,
            size,
            options,
            stats: EngineStats::default(),
            state: Mutex::new(State {
                depth: FIRST_DEPTH,
                ..Default::default()
            }),
        }
    }

    pub fn source(&self) -> &SharedSource {
        &self.source
    }

    /// Read `ranges` (inside the file), one buffer per range in order: from read-ahead where it
    /// holds them, the others in one request; then read further ahead if a pattern shows.
    pub async fn read_ranges(&self, ranges: &[ByteRange]) -> Result<Vec<Bytes>> {
        let plan: Vec<Served> = {
            let mut state = self.state.lock().unwrap();
            let plan = ranges
                .iter()
                .map(|r| lookup(&mut state, r, &self.stats))
                .collect();
            self.observe(&mut state, ranges);
            plan
        };
        let mut out: Vec<Option<Bytes>> = vec![None; ranges.len()];
        for (slot, (served, r)) in out.iter_mut().zip(plan.into_iter().zip(ranges)) {
            if let Served::Ahead {
                mut data,
                index,
                skip,
            } = served
            {
                let fetched = data
                    .wait_for(Option::is_some)
                    .await
                    .ok()
                    .and_then(|d| d.clone());
                if let Some(Some(buffers)) = fetched.as_deref() {
                    let (a, b) = (skip as usize, (skip + r.len) as usize);
                    *slot = Some(buffers[index].slice(a..b));
                }
            }
        }
        let demand: Vec<ByteRange> = ranges
            .iter()
            .zip(&out)
            .filter(|(_, got)| got.is_none())
            .map(|(r, _)| *r)
            .collect();
        let hits = (ranges.len() - demand.len()) as u64;
        self.stats.record_cache(hits, demand.len() as u64, 0, 0, 0);
        let mut fetched = match demand.is_empty() {
            true => Vec::new(),
            false => self.source.read_ranges(&demand).await?,
        }
        .into_iter();
        let out = out
            .into_iter()
            .map(|got| got.or_else(|| fetched.next()).unwrap_or_default())
            .collect();
        if ranges.len() == 1 {
            self.read_ahead();
        }
        Ok(out)
    }

    /// Record a read of one range; a read off the pattern drops what was read ahead. A vectored
    /// read of several ranges is a reader that plans its own reads: it is not guessed further.
    fn observe(&self, state: &mut State, ranges: &[ByteRange]) {
        let asked: u64 = ranges.iter().map(|r| r.len).sum();
        state.requested += asked;
        let [r] = ranges else { return };
        if r.len == 0 {
            return;
        }
        state.history.push_back(*r);
        if state.history.len() > 3 {
            state.history.pop_front();
        }
        match pattern(&state.history) {
            Some((_, stride, _)) => {
                // Ranges the reader has passed are settled.
                let last = state.history.back().map_or(0, |r| r.offset);
                let passed = |b: &Batch| b.ranges.last().is_none_or(|r| r.offset + stride <= last);
                while state.batches.front().is_some_and(passed) {
                    let batch = state.batches.pop_front().unwrap();
                    self.settle(state, batch);
                }
            }
            None => {
                for batch in std::mem::take(&mut state.batches) {
                    self.settle(state, batch);
                }
                state.depth = FIRST_DEPTH;
            }
        }
    }

    /// A batch dropped: what of it was never served is wasted.
    fn settle(&self, state: &mut State, batch: Batch) {
        for (r, used) in batch.ranges.iter().zip(batch.used) {
            state.ledger.settle(&self.stats, r.len - used, false);
        }
    }

    /// Fetch the next ranges of the pattern, if there is one and fewer than half a batch is left
    /// ahead of the reader, unless the bytes wasted so far exceed the budget's share of the bytes
    /// asked for. What is ahead never exceeds what the reader asked for so far (a first batch of
    /// `FIRST_DEPTH` ranges is always allowed): a reader that stops leaves at most that unused.
    fn read_ahead(&self) {
        let mut state = self.state.lock().unwrap();
        let Some((next, stride, len)) = pattern(&state.history) else {
            return;
        };
        if !self.options.enabled || state.ledger.over_budget(&self.options, state.requested) {
            return;
        }
        let ahead: Vec<(u64, u64)> = (state.batches.iter())
            .flat_map(|b| b.ranges.iter().zip(&b.used))
            .filter(|(r, _)| r.offset >= next)
            .map(|(r, used)| (r.offset, r.len - used))
            .collect();
        if ahead.len() >= state.depth / 2 {
            return;
        }
        let unused_ahead: u64 = ahead.iter().map(|(_, unused)| unused).sum();
        let allowed = (state.requested)
            .max(FIRST_DEPTH as u64 * len)
            .min(MAX_AHEAD_BYTES)
            .saturating_sub(unused_ahead);
        let from = ahead.iter().map(|(o, _)| o + stride).max().unwrap_or(next);
        let depth = state.depth.min((allowed / len.max(1)) as usize);
        if depth < (state.depth / 2).max(1) {
            return; // wait for room for half a batch at least: fewer, larger requests
        }
        let ranges: Vec<ByteRange> = (0..depth as u64)
            .map(|k| from + k * stride)
            .take_while(|&o| o < self.size)
            .map(|o| ByteRange::new(o, len.min(self.size - o)))
            .collect();
        if ranges.is_empty() {
            return;
        }
        state.depth = (state.depth * 2).min(MAX_DEPTH);
        state
            .ledger
            .fetched(&self.stats, ranges.iter().map(|r| r.len).sum());
        let (tx, rx) = watch::channel(None);
        let source = self.source.clone();
        let asked = ranges.clone();
        tokio::spawn(async move {
            let got = source.read_ranges(&asked).await.ok();
            let _ = tx.send(Some(Arc::new(got)));
        });
        state.batches.push_back(Batch {
            used: vec![0; ranges.len()],
            ranges,
            data: rx,
        });
    }
}

/// The batch range holding `r`, if any (its use is counted as it is served).
fn lookup(state: &mut State, r: &ByteRange, stats: &EngineStats) -> Served {
    for batch in &mut state.batches {
        for (index, b) in batch.ranges.iter().enumerate() {
            if b.offset <= r.offset && r.offset + r.len <= b.offset + b.len {
                let used = (batch.used[index] + r.len).min(b.len);
                state.ledger.settle(stats, used - batch.used[index], true);
                batch.used[index] = used;
                return Served::Ahead {
                    data: batch.data.clone(),
                    index,
                    skip: r.offset - b.offset,
                };
            }
        }
    }
    Served::Demand
}

/// The pattern of the last three ranges: the same length and the same forward distance between
/// starts (sequential when the distance is the length). Returns where the next range starts, the
/// distance and the length.
fn pattern(history: &VecDeque<ByteRange>) -> Option<(u64, u64, u64)> {
    let [a, b, c] = [history.front()?, history.get(1)?, history.get(2)?];
    let stride = b.offset.checked_sub(a.offset)?;
    let same = a.len == b.len && b.len == c.len && c.offset.checked_sub(b.offset) == Some(stride);
    (same && stride >= a.len && a.len > 0).then_some((c.offset + stride, stride, c.len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(ranges: &[(u64, u64)]) -> VecDeque<ByteRange> {
        ranges.iter().map(|&(o, l)| ByteRange::new(o, l)).collect()
    }

    #[test]
    fn patterns_are_sequential_or_strided_reads_of_one_length() {
        assert_eq!(
            pattern(&history(&[(0, 10), (10, 10), (20, 10)])),
            Some((30, 10, 10))
        );
        assert_eq!(
            pattern(&history(&[(0, 10), (100, 10), (200, 10)])),
            Some((300, 100, 10))
        );
        assert_eq!(pattern(&history(&[(0, 10), (100, 10)])), None);
        assert_eq!(pattern(&history(&[(0, 10), (100, 10), (150, 10)])), None);
        assert_eq!(pattern(&history(&[(0, 10), (10, 20), (30, 10)])), None);
        assert_eq!(pattern(&history(&[(200, 10), (100, 10), (0, 10)])), None);
        assert_eq!(pattern(&history(&[(0, 10), (5, 10), (10, 10)])), None);
    }
}
