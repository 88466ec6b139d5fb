//! Baskets fetched before the reader asked for them (with another basket's request, or read ahead
//! on their own), held as stored until asked for, within a memory budget. A basket read ahead is
//! held from the moment its request is sent: a reader asking for it meanwhile waits for that
//! request instead of sending its own. What was fetched on a guess and dropped unused is the
//! cost of guessing, settled in the speculation ledger.

use super::index::BasketAt;
use crate::engine::speculation::Ledger;
use crate::engine::stats::EngineStats;
use bytes::Bytes;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use tokio::sync::watch;

/// A read-ahead request's answer once it came (`None` inside if it failed: the baskets are then
/// read on demand, which reports the error itself).
pub type Answer = Option<Arc<Option<Vec<Bytes>>>>;

/// Where a held basket's bytes are.
#[derive(Clone)]
pub enum Slot {
    Ready(Bytes),
    /// The `index`-th range of a request in flight.
    Pending(watch::Receiver<Answer>, usize),
}

impl Slot {
    /// The bytes, once they came (`None` if their request failed).
    pub async fn bytes(self) -> Option<Bytes> {
        match self {
            Slot::Ready(b) => Some(b),
            Slot::Pending(mut rx, index) => {
                let answer = rx.wait_for(Option::is_some).await.ok()?.clone()?;
                answer.as_ref().as_ref().map(|all| all[index].clone())
            }
        }
    }
}

struct Entry {
    len: u64,
    slot: Slot,
    at: BasketAt,
    /// Fetched on a guess: counted in the ledger until asked for or dropped.
    guessed: bool,
    served: bool,
}

/// The held baskets of one file, oldest first.
#[derive(Default)]
pub struct Held {
    entries: HashMap<u64, Entry>,
    order: VecDeque<u64>,
    bytes: u64,
    pub ledger: Ledger,
}

impl Held {
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn contains(&self, offset: u64) -> bool {
        self.entries.contains_key(&offset)
    }

    /// The bytes of the basket at `offset` (of `len` bytes), if held; its guess is settled as used.
    pub fn take(&mut self, offset: u64, len: u64, stats: &EngineStats) -> Option<Slot> {
        let entry = self.entries.get_mut(&offset).filter(|e| e.len == len)?;
        if entry.guessed && !entry.served {
            self.ledger.settle(stats, entry.len, true);
        }
        entry.served = true;
        Some(entry.slot.clone())
    }

    /// Hold a basket; `guessed` ones count as fetched ahead in the ledger.
    pub fn put(
        &mut self,
        offset: u64,
        len: u64,
        at: BasketAt,
        slot: Slot,
        guessed: bool,
        stats: &EngineStats,
    ) {
        if self.entries.contains_key(&offset) {
            return;
        }
        if guessed {
            self.ledger.fetched(stats, len);
        }
        let entry = Entry {
            len,
            slot,
            at,
            guessed,
            served: false,
        };
        self.entries.insert(offset, entry);
        self.order.push_back(offset);
        self.bytes += len;
    }

    /// Drop what the reader has passed (baskets of `tree` in clusters before `cluster`, served or
    /// not), then the oldest baskets while more than `budget` bytes are held.
    pub fn trim(&mut self, tree: usize, cluster: usize, budget: u64, stats: &EngineStats) {
        let passed: Vec<u64> = (self.entries.iter())
            .filter(|(_, e)| e.at.tree == tree && e.at.cluster < cluster)
            .map(|(&o, _)| o)
            .collect();
        for offset in passed {
            self.drop_entry(offset, stats);
        }
        while self.bytes > budget {
            let Some(offset) = self.order.pop_front() else {
                break;
            };
            self.drop_entry(offset, stats);
        }
        if self.order.len() > 2 * self.entries.len() + 64 {
            let entries = &self.entries;
            self.order.retain(|o| entries.contains_key(o));
        }
    }

    /// Drop everything (the file is closed): guesses never asked for are wasted.
    pub fn clear(&mut self, stats: &EngineStats) {
        let all: Vec<u64> = self.entries.keys().copied().collect();
        for offset in all {
            self.drop_entry(offset, stats);
        }
        self.order.clear();
    }

    fn drop_entry(&mut self, offset: u64, stats: &EngineStats) {
        if let Some(e) = self.entries.remove(&offset) {
            self.bytes -= e.len;
            match (e.served, e.guessed) {
                (true, _) => {}
                (false, true) => self.ledger.settle(stats, e.len, false),
                (false, false) => stats.record_unused(e.len),
            }
        }
    }
}
