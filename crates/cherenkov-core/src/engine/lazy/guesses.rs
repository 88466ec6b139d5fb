//! The guesses of lazy chunks: the branches of the miss set read ahead of use on their own
//! (speculated, or learned after the learned set's read-ahead started), within the budget and a
//! window of chunks; what they cost is counted, settled when a chunk ends, and the speculated set
//! chosen from the usage rates (see `speculation.rs`).

use super::{LazyReader, Pipeline, ProfileState};
use crate::engine::prefetch::{ReadAhead, StepReader};
use crate::engine::speculation;
use crate::engine::table::{stored_bytes, Table};
use crate::error::Result;
use std::collections::{BTreeSet, VecDeque};

/// A read-ahead of branches the learned set's does not carry (speculated, or learned after it
/// started) over chunks `read.first..read.end`, and per chunk not taken yet the bytes `guessed`
/// (they count against the budget until settled; 0 for learned branches).
pub(super) struct Ahead<T: Table> {
    pub(super) read: Pipeline<T>,
    pub(super) guessed: bool,
    pub(super) bytes: VecDeque<u64>,
}

impl<T: Table> LazyReader<T> {
    /// Put chunk `next` of the branches read ahead on their own in the cache.
    pub(super) async fn take_ahead(&mut self, next: usize) -> Result<()> {
        let mut fetched_ahead = Vec::new();
        for a in self.ahead.iter_mut().filter(|a| a.read.first <= next) {
            a.read.take_into(&mut self.cache).await?;
            a.bytes.pop_front();
            if a.guessed {
                fetched_ahead.extend(&a.read.set);
            }
        }
        self.ahead.retain(|a| !a.bytes.is_empty());
        self.count_speculated(&fetched_ahead).await
    }

    /// Branches that the read-aheads of chunks after `next` do not carry (speculated, or learned
    /// after those started): read them ahead for the first such chunks, in one read-ahead. Chunk
    /// `next` is not read: it is in use, a miss fetches it if needed. Learned branches are read
    /// for every chunk started without them. A `guess` stays within the budget and a window,
    /// however deep the learned set is read, so that a set whose rate falls stops being guessed
    /// before far chunks are fetched for it: a set read ahead already keeps the depth asked for
    /// plus one chunk ahead of the chunk in use (a file opened ahead has its first chunk taken
    /// already, so its read-ahead reaches one further); one that joins now reaches the depth
    /// further (the reader may be near, and it must not wait a round trip at each of its chunks).
    pub(super) async fn read_ahead_joined(
        &mut self,
        joined: &[usize],
        next: usize,
        guess: bool,
    ) -> Result<()> {
        let steps = self.options.read_ahead.steps.max(1);
        let depth = next + 1 + steps;
        let read_ahead_already =
            (joined.iter()).any(|b| self.ahead_end.get(b).is_some_and(|&end| end > next + 1));
        let window = match guess {
            true if read_ahead_already => depth + 1,
            true => depth + 1 + steps,
            false => (self.pipelines.back()).map_or(depth, |p| {
                depth.max(p.end.unwrap_or_else(|| p.first + p.reader.started()))
            }),
        };
        let window = window.min(self.steps.len());
        let Some((first, branches)) = (next + 1..window)
            .map(|c| (c, self.uncovered_at(c, joined)))
            .find(|(_, m)| !m.is_empty())
        else {
            return Ok(());
        };
        let mut until = first + 1;
        while until < window && self.uncovered_at(until, joined) == branches {
            until += 1;
        }
        self.start_ahead(branches, first, until, guess).await
    }

    /// Whether `more` bytes may be fetched on a guess: were they, the guesses in flight and those
    /// not settled yet all unused, the wasted bytes would stay within the budget of the bytes
    /// asked for so far (reads in flight included: they will be read).
    pub(super) fn may_guess(&self, more: u64) -> bool {
        let file = self.table.file();
        let in_flight: u64 = self.ahead.iter().flat_map(|a| &a.bytes).sum();
        let bytes_read = file.stats.snapshot().requested_bytes;
        (self.ledger).fits(&file.speculation, bytes_read, in_flight + more)
    }

    /// Of `branches`, those that no read-ahead carries for chunk `c`.
    pub(super) fn uncovered_at(&self, c: usize, branches: &[usize]) -> Vec<usize> {
        let carried = self
            .pipelines
            .iter()
            .find(|p| p.first <= c && p.end.is_none_or(|end| c < end))
            .map_or(&[][..], |p| &p.set[..]);
        branches
            .iter()
            .copied()
            .filter(|b| !carried.contains(b))
            .filter(|b| self.ahead_end.get(b).is_none_or(|&end| end <= c))
            .collect()
    }

    /// Read `branches` ahead over chunks `first..until`; on a `guess`, over as many of them as
    /// the budget allows were they all unused (none if the first does not fit).
    pub(super) async fn start_ahead(
        &mut self,
        branches: Vec<usize>,
        first: usize,
        until: usize,
        guess: bool,
    ) -> Result<()> {
        let mut bytes = VecDeque::new();
        for (start, stop) in &self.steps[first..until] {
            if !guess {
                bytes.push_back(0);
                continue;
            }
            let plan = self.table.plan(&branches, *start, *stop).await?;
            let more = stored_bytes(&*self.table, &plan);
            if !self.may_guess(bytes.iter().sum::<u64>() + more) {
                break;
            }
            bytes.push_back(more);
        }
        let end = first + bytes.len();
        if end == first {
            return Ok(());
        }
        // Every chunk at once: the window and the budget bound them already.
        let read_ahead = ReadAhead {
            steps: end - first,
            ..self.options.read_ahead
        };
        let reader = StepReader::start(
            self.table.clone(),
            branches.clone(),
            self.steps[first..end].to_vec(),
            read_ahead,
        )
        .await?;
        for &b in &branches {
            self.ahead_end.insert(b, end);
        }
        self.ahead.push(Ahead {
            read: Pipeline {
                set: branches,
                reader,
                first,
                end: Some(end),
            },
            guessed: guess,
            bytes,
        });
        Ok(())
    }

    /// Branches of the speculated set this reader can read, outside the learned set.
    pub(super) fn speculated_extras(&self, state: &ProfileState) -> Vec<usize> {
        if !self.table.file().speculation.enabled {
            return Vec::new();
        }
        self.indices(&state.speculated)
            .into_iter()
            .filter(|b| self.readable.contains(b) && !state.learned.contains(&self.table.path(*b)))
            .collect()
    }

    /// Count the bytes of `branches` in this chunk as fetched on speculation (each unit once).
    pub(super) async fn count_speculated(&mut self, branches: &[usize]) -> Result<()> {
        let (start, stop) = self.steps[self.current.expect("a current chunk")];
        for &b in branches {
            let plan = self.table.plan(&[b], start, stop).await?;
            let (before, now) = &mut self.counted;
            let new: Vec<T::Unit> = plan
                .into_iter()
                .filter(|u| !before.contains(u) && now.insert(*u))
                .collect();
            let bytes = stored_bytes(&*self.table, &new);
            self.ledger.fetched(&self.table.file().stats, bytes);
            self.speculated_now.push((b, bytes));
        }
        Ok(())
    }

    /// At the end of a chunk: settle what was speculated (used or wasted); after training, update
    /// the usage rates of the miss set and choose the speculated set for the next chunks, stopping
    /// the worst set if unused bytes went over the budget. A set used for the first time starts
    /// at the threshold (fetched ahead at once) if a chunk of it fits the budget: waiting for its
    /// rate to climb would cost a round trip per chunk meanwhile.
    pub(super) async fn settle_chunk(&mut self, trained: bool) -> Result<()> {
        self.counted.0 = std::mem::take(&mut self.counted.1);
        let file = self.table.file();
        let (mut wasting, mut wasting_bytes) = (BTreeSet::new(), 0);
        for (b, bytes) in std::mem::take(&mut self.speculated_now) {
            let used = self.used.contains(&b);
            self.ledger.settle(&file.stats, bytes, used);
            if !used {
                wasting.insert(self.table.path(b));
                wasting_bytes += bytes;
            }
        }
        if !trained || !self.options.learning {
            return Ok(());
        }
        let used: BTreeSet<String> = self.used.iter().map(|&b| self.table.path(b)).collect();
        let options = file.speculation;
        let first_use = self.first_use_fitting(&used).await?;
        let mut state = self.profile.state.lock().unwrap();
        state.record_use(&used, &first_use, options.threshold);
        let ProfileState {
            rates,
            speculated,
            stopped,
            ..
        } = &mut *state;
        // The next chunk is already read with this set: stop a set if two more chunks wasting
        // as this one did would take the unused bytes over the budget.
        let bytes_read = file.stats.snapshot().compressed_bytes;
        if wasting_bytes > 0
            && self
                .ledger
                .would_exceed(&options, bytes_read, 2 * wasting_bytes)
        {
            stopped.extend(speculation::worst(rates, &wasting));
        }
        *speculated = speculation::chosen(&options, rates, speculated, stopped);
        Ok(())
    }

    /// The branches of the miss set that this chunk used for the first time (no rate yet), if
    /// their bytes in this chunk could be fetched on a guess within the budget; else none.
    pub(super) async fn first_use_fitting(
        &self,
        used: &BTreeSet<String>,
    ) -> Result<BTreeSet<String>> {
        let speculation = self.table.file().speculation;
        let new: BTreeSet<String> = {
            let state = self.profile.state.lock().unwrap();
            (state.missed.iter())
                .filter(|p| used.contains(*p) && !state.learned.contains(*p))
                .filter(|p| !state.rates.contains_key(*p) && !state.stopped.contains(*p))
                .cloned()
                .collect()
        };
        let Some(k) = self
            .current
            .filter(|_| speculation.enabled && !new.is_empty())
        else {
            return Ok(BTreeSet::new());
        };
        let (start, stop) = self.steps[k];
        let plan = self.table.plan(&self.indices(&new), start, stop).await?;
        let bytes = stored_bytes(&*self.table, &plan);
        match self.may_guess(bytes) {
            true => Ok(new),
            false => Ok(BTreeSet::new()),
        }
    }
}
