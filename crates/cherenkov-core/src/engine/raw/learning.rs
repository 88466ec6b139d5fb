//! The learning of lazy chunks (`lazy.rs`), for a reader that asks for baskets by their bytes
//! (uproot): a request is a reader's *window* (the clusters its baskets are in), and per tree:
//!
//! - *learned set*: the branches read while the first file of a layout is read in its first window
//!   (training); later requests bring the learned set of their window along, and the windows
//!   after the current one are read ahead (see `RawReads`);
//! - *miss set*: branches read after training, outside the learned set; a request for one brings
//!   the whole miss set of its window (a trigger's set costs one round trip, not one per branch);
//! - *first miss*: a branch never read before, asked for alone (an analysis touching columns one
//!   at a time, as coffea's virtual arrays do), brings its collection (see `index::collections`)
//!   in the same request, unless the guesses' unused bytes are over the speculation budget;
//! - *speculation*: per branch of the miss set, how often the windows use it; those used in more
//!   than the threshold are read ahead with the learned set (`speculation::chosen`).
//!
//! The sets live in the `AccessProfile` of the tree's layout (`layouts.rs`), so that the next file
//! alike needs no training: its first window's sets are fetched as soon as its tree is known.

use super::index::TreeIndex;
use crate::engine::lazy::{AccessProfile, ProfileState};
use crate::engine::speculation::{self, Speculation};
use std::collections::BTreeSet;
use std::ops::RangeInclusive;
use std::sync::Arc;

/// Windows of the learned set read ahead of the reader's.
pub const WINDOWS_AHEAD: usize = 2;

/// Branches to read ahead (each with whether it is a guess) over a range of clusters.
pub type Ahead = (Vec<(usize, bool)>, RangeInclusive<usize>);

/// What kind of fetch a request was (the file's `startup_fetches`, `learned_fetches`,
/// `miss_fetches` counters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fetch {
    Startup,
    Learned,
    Miss,
}

/// What one file's reader of one tree is doing.
pub struct TreeLearning {
    pub profile: Arc<AccessProfile>,
    /// The training window, while the first file of the layout is read in it.
    training: Option<RangeInclusive<usize>>,
    window: Option<RangeInclusive<usize>>,
    /// Branches read in the current window.
    used: BTreeSet<usize>,
    /// Whether the last request asked for several branches (a reader that plans its reads).
    planned: bool,
    requests: u64,
}

impl TreeLearning {
    pub fn new(profile: Arc<AccessProfile>) -> Self {
        Self {
            profile,
            training: None,
            window: None,
            used: BTreeSet::new(),
            planned: false,
            requests: 0,
        }
    }

    /// A request for `asked` (branches) in `window`; `fetching` whether some of their baskets
    /// must be fetched, `guess` whether guessing is within the budget. Returns the branches to
    /// fetch with them over the window, each with whether it is a guess (the learned set is not),
    /// the kind of fetch, and whether the reader moved to another window.
    pub fn on_request(
        &mut self,
        index: &TreeIndex,
        asked: &BTreeSet<usize>,
        window: RangeInclusive<usize>,
        fetching: bool,
        guess: bool,
        options: &Speculation,
    ) -> (Vec<(usize, bool)>, Fetch, bool) {
        let profile = self.profile.clone();
        let mut p = profile.lock();
        let moved = self.window.as_ref() != Some(&window);
        if moved {
            if self.window.is_some() {
                self.end_window(&mut p, index, options);
            }
            self.window = Some(window.clone());
        }
        let first = self.requests == 0;
        self.requests += 1;
        if !p.trained {
            p.trained = true;
            self.training = Some(window.clone());
        }
        if first {
            p.first_window = Some(index.fraction_of(&window));
        }
        if (self.training.as_ref()).is_some_and(|t| !overlaps(t, &window)) {
            self.training = None;
        }
        self.planned = asked.len() > 1;
        let path = |b: usize| index.meta.branch_path(b);
        let known = |p: &ProfileState, b: usize| {
            let path = path(b);
            p.learned.contains(&path) || p.missed.contains(&path)
        };
        let new: Vec<usize> = asked.iter().copied().filter(|&b| !known(&p, b)).collect();
        let outside_learned = asked.iter().any(|&b| !p.learned.contains(&path(b)));
        for &b in asked {
            self.used.insert(b);
            match self.training.is_some() {
                true => p.learned.insert(path(b)),
                false if !p.learned.contains(&path(b)) => p.missed.insert(path(b)),
                false => false,
            };
        }
        let kind = match (first && self.training.is_some(), outside_learned) {
            (true, _) => Fetch::Startup,
            (false, false) => Fetch::Learned,
            (false, true) => Fetch::Miss,
        };
        if !fetching {
            return (Vec::new(), kind, moved);
        }
        let mut extra = sets(index, &p);
        if outside_learned {
            extra.extend(
                index
                    .branches_named(&p.missed)
                    .into_iter()
                    .map(|b| (b, true)),
            );
        }
        if let ([b], true) = (&new[..], asked.len() == 1 && guess) {
            extra.extend(index.collection_of(*b).map(|c| (c, true)));
        }
        extra.retain(|(b, _)| !asked.contains(b));
        (extra, kind, moved)
    }

    /// The window ended: update the miss set's usage rates and choose the speculated set (the
    /// worst set stops when the guesses' unused bytes are over the budget).
    fn end_window(&mut self, p: &mut ProfileState, index: &TreeIndex, options: &Speculation) {
        let used: BTreeSet<String> = (self.used.iter())
            .map(|&b| index.meta.branch_path(b))
            .collect();
        self.used.clear();
        p.record_use(&used, &BTreeSet::new(), options.threshold);
        p.speculated = speculation::chosen(options, &p.rates, &p.speculated, &p.stopped);
    }

    /// The worst speculated set stops being read ahead (guesses went over the budget).
    pub fn stop_worst(&self) {
        let mut p = self.profile.lock();
        let worst = speculation::worst(&p.rates, &p.speculated);
        p.stopped.extend(worst);
        let ProfileState {
            rates,
            speculated,
            stopped,
            ..
        } = &mut *p;
        speculated.retain(|s| !stopped.contains(s) && rates.contains_key(s));
    }

    /// The windows after the current one to read ahead, as clusters, and the branches (the learned
    /// and speculated sets, the latter as guesses): `WINDOWS_AHEAD` windows as wide as the
    /// current one. Not while training one branch at a time (the learned set is still growing:
    /// it is read ahead once the reader moves on); a reader asking for several branches together
    /// has said what it reads.
    pub fn ahead(&self, index: &TreeIndex) -> Option<Ahead> {
        if self.training.is_some() && !self.planned {
            return None;
        }
        let window = self.window.clone()?;
        let width = window.end() - window.start() + 1;
        let until = (window.end() + WINDOWS_AHEAD * width).min(index.clusters().saturating_sub(1));
        let from = window.end() + 1;
        let branches = sets(index, &self.profile.lock());
        (from <= until && !branches.is_empty()).then_some((branches, from..=until))
    }

    /// The first windows of a file whose layout was read before, and their branches: where the
    /// last file of the layout began (if it began at the start) and the windows after it, with
    /// the learned and speculated sets.
    pub fn on_the_way(&self, index: &TreeIndex) -> Option<Ahead> {
        let p = self.profile.lock();
        let (start, span) = p.first_window.filter(|_| p.trained)?;
        if start > 0.0 {
            return None; // a file read from elsewhere (a partition): where this one starts is unknown
        }
        let first = index.clusters_of_fraction(start, span)?;
        let width = first.end() - first.start() + 1;
        let until = (first.end() + WINDOWS_AHEAD * width).min(index.clusters().saturating_sub(1));
        let branches = sets(index, &p);
        (!branches.is_empty()).then_some((branches, *first.start()..=until))
    }
}

/// The learned set, and the speculated set as guesses.
fn sets(index: &TreeIndex, p: &ProfileState) -> Vec<(usize, bool)> {
    let learned = index.branches_named(&p.learned);
    let speculated = index.branches_named(p.speculated.difference(&p.learned));
    let mut out: Vec<(usize, bool)> = learned.into_iter().map(|b| (b, false)).collect();
    out.extend(speculated.into_iter().map(|b| (b, true)));
    out
}

fn overlaps(a: &RangeInclusive<usize>, b: &RangeInclusive<usize>) -> bool {
    a.start() <= b.end() && b.start() <= a.end()
}
