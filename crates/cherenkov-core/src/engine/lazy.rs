//! Lazy chunks that learn which branches (or fields) an analysis uses (the successor of
//! TTreeCache's learning phase and CMSSW's startup and trigger caches), for any `Table`:
//!
//! - *startup*: the first branch touched in the first chunk fetches every readable branch of that
//!   chunk in one request (if they fit `startup_bytes`), and the branches actually used in that
//!   chunk become the learned set. As in TTreeCache, what such a read brings is held compressed
//!   and only the baskets of branches used are decompressed;
//! - *prefetch*: later chunks of the learned set are fetched and decompressed ahead of use; the
//!   branches the first chunk asks for together (`will_use`) from that moment, the others when
//!   it ends. That read-ahead starts as deep as the training chunk's pace says a round trip
//!   needs, and deepens while the reader waits for it (see `prefetch.rs`);
//! - *miss (trigger) cache*: the first time a chunk touches a branch never missed before, every
//!   branch of that chunk not read yet is fetched in one request (within `startup_bytes`), and the
//!   branches then used become the miss set; later, a miss fetches the miss set in one request.
//!   This is how conditional access ("all branches every 50th event") costs one round trip
//!   instead of hundreds;
//! - *speculation*: per branch of the miss set, how often the chunks use it; branches used in
//!   more than the threshold of chunks are fetched ahead of use, beside the learned set, so a
//!   conditional set used every other chunk costs no round trip of its own. A set starts at the
//!   threshold after its first chunk if a chunk of it fits the budget (a trigger that fired
//!   usually fires again). Its read-ahead keeps to a window of the depth asked for, however deep
//!   the learned set's goes (a set whose rate falls is not guessed far ahead), and to as many
//!   chunks as the budget allows were they all unused. The bytes fetched so and not used stay
//!   within a budget (see `speculation.rs`, the file's `speculation` options);
//! - the learned sets live in an [`AccessProfile`] that the next file of a dataset reuses, so it
//!   needs no training, and its learned set's read-ahead starts as deep as the last file's got.

mod guesses;

use super::prefetch::{ReadAhead, StepReader};
use super::speculation::Ledger;
use super::table::{fetch, read, stored_bytes, Held, Table};
use crate::error::{Error, Result};
use guesses::Ahead;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Which branches an analysis uses, by path; shared by the files of a dataset.
#[derive(Debug, Default)]
pub struct AccessProfile {
    state: Mutex<ProfileState>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProfileState {
    pub trained: bool,
    /// Used in the training chunk: prefetched for every chunk.
    pub learned: BTreeSet<String>,
    /// Touched later, outside the learned set: fetched together on the next miss.
    pub missed: BTreeSet<String>,
    /// Per branch of the miss set: how often the chunks since training used it (a moving rate).
    pub rates: BTreeMap<String, f64>,
    /// Branches of the miss set fetched with the learned set, ahead of use.
    pub speculated: BTreeSet<String>,
    /// Branches no longer speculated: their unused bytes went over the budget.
    pub stopped: BTreeSet<String>,
    /// Chunks ahead of use the learned set's read-ahead reached: the next file's starts there.
    pub depth: usize,
    /// Raw reads (`engine::raw`): where the last file's first read of the tree began and how much
    /// of it it spanned, as fractions of its entries; the next file's first window.
    pub first_window: Option<(f64, f64)>,
}

impl ProfileState {
    /// One chunk's or window's use folded into the miss set's rates: a branch of `first_use`
    /// (fetched on a guess at its first use) starts at `threshold`, the others move toward
    /// whether `used` holds them.
    pub fn record_use(
        &mut self,
        used: &BTreeSet<String>,
        first_use: &BTreeSet<String>,
        threshold: f64,
    ) {
        for path in self.missed.iter().filter(|p| !self.learned.contains(*p)) {
            let rate = match first_use.contains(path) {
                true => threshold,
                false => super::speculation::updated_rate(
                    self.rates.get(path).copied(),
                    used.contains(path),
                ),
            };
            self.rates.insert(path.clone(), rate);
        }
    }
}

impl AccessProfile {
    /// A profile that knows what `state` says (one trained elsewhere: a worker of a dataset
    /// starts where the first one's training left the sets).
    pub fn from_state(state: ProfileState) -> AccessProfile {
        AccessProfile {
            state: Mutex::new(state),
        }
    }

    pub fn snapshot(&self) -> ProfileState {
        self.state.lock().unwrap().clone()
    }

    /// The state itself, for the raw reads' learning (`engine::raw`).
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, ProfileState> {
        self.state.lock().unwrap()
    }

    /// The depth alone (read once a chunk by datasets: no copy of the sets).
    pub fn depth(&self) -> usize {
        self.state.lock().unwrap().depth
    }
}

/// Switches, so benchmarks can show what each part is worth.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LazyOptions {
    /// How far the learned branches are read ahead of use (`steps: 0`: when first used).
    pub read_ahead: ReadAhead,
    /// Learn the used set (and fetch all branches of the first chunk to learn it).
    pub learning: bool,
    /// The startup read (and the read of every unread branch when a trigger fires) is skipped when
    /// those branches of the chunk exceed this.
    pub startup_bytes: u64,
}

impl Default for LazyOptions {
    fn default() -> Self {
        Self {
            read_ahead: ReadAhead::default(),
            learning: true,
            startup_bytes: 64 << 20,
        }
    }
}

/// Counters of the caches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(module = "cherenkov._core", get_all, frozen)
)]
pub struct LazyStats {
    /// Branch accesses served from prefetched or startup data.
    pub hits: u64,
    /// Branch accesses that needed a fetch of their own.
    pub misses: u64,
    /// Fetches made for misses (each one request, however many branches it carried).
    pub miss_fetches: u64,
    pub startup_fetches: u64,
    /// Fetches of the learned set made on first use because it was not prefetched.
    pub learned_fetches: u64,
}

pub struct LazyReader<T: Table> {
    table: Arc<T>,
    steps: Vec<(u64, u64)>,
    profile: Arc<AccessProfile>,
    options: LazyOptions,
    readable: Vec<usize>,
    by_path: HashMap<String, usize>,
    /// Index of the current chunk in `steps` (None before the first `advance`).
    current: Option<usize>,
    cache: HashMap<usize, T::Item>,
    /// Stored units of this chunk from a startup or trigger read, and their items.
    held: Held,
    held_branches: BTreeSet<usize>,
    used: BTreeSet<usize>,
    /// Whether the current chunk is settled (and, if it trained, learned from) already.
    finished: bool,
    training: bool,
    /// When the training chunk began, and how long its startup read took (about a round trip):
    /// together they say how many chunks the reader uses in one round trip.
    training_began: Instant,
    startup_took: Duration,
    /// Whether this chunk already had its one read of every unread branch.
    triggered: bool,
    /// Read-aheads, oldest first: the last is the current set's; those before were halted when
    /// the set changed and yield the chunks they had started.
    pipelines: VecDeque<Pipeline<T>>,
    /// Branches of this chunk fetched ahead on speculation, with their bytes; settled (used or
    /// wasted) when the chunk ends.
    speculated_now: Vec<(usize, u64)>,
    /// Units counted as speculative in the previous chunk and in this one (a basket may span
    /// chunks): counted once.
    counted: (HashSet<T::Unit>, HashSet<T::Unit>),
    /// Speculated branches read ahead for chunks whose read-ahead started without them (they
    /// joined later), as far as the budget allows; and per branch, the chunk where that ends.
    ahead: Vec<Ahead<T>>,
    ahead_end: HashMap<usize, usize>,
    ledger: Ledger,
    pub stats: LazyStats,
}

/// Branches read ahead of use over chunks `first..` (`..end` once halted).
struct Pipeline<T: Table> {
    set: Vec<usize>,
    reader: StepReader<T>,
    first: usize,
    end: Option<usize>,
}

impl<T: Table> Pipeline<T> {
    /// Put the arrays of this read-ahead's next chunk in `cache`.
    async fn take_into(&mut self, cache: &mut HashMap<usize, T::Item>) -> Result<()> {
        let step = self
            .reader
            .next()
            .await
            .ok_or_else(|| Error::Cancelled("prefetch ended early".into()))??;
        for (&b, array) in self.set.iter().zip(step.arrays) {
            cache.insert(b, array);
        }
        Ok(())
    }
}

impl<T: Table> LazyReader<T> {
    pub fn new(
        table: Arc<T>,
        steps: Vec<(u64, u64)>,
        profile: Arc<AccessProfile>,
        options: LazyOptions,
    ) -> Self {
        let items = 0..table.item_count();
        let readable = items
            .clone()
            .filter(|&b| table.check(&[b]).is_ok())
            .collect();
        let by_path = items.map(|b| (table.path(b), b)).collect();
        Self {
            table,
            steps,
            profile,
            options,
            readable,
            by_path,
            current: None,
            cache: HashMap::new(),
            held: Held::new(),
            held_branches: BTreeSet::new(),
            used: BTreeSet::new(),
            finished: false,
            training: false,
            training_began: Instant::now(),
            startup_took: Duration::ZERO,
            triggered: false,
            pipelines: VecDeque::new(),
            speculated_now: Vec::new(),
            counted: Default::default(),
            ahead: Vec::new(),
            ahead_end: HashMap::new(),
            ledger: Ledger::default(),
            stats: LazyStats::default(),
        }
    }

    fn indices(&self, paths: &BTreeSet<String>) -> Vec<usize> {
        paths
            .iter()
            .filter_map(|p| self.by_path.get(p).copied())
            .collect()
    }

    /// End the training chunk now, as `advance` would first: the profile learns its set, so that
    /// other readers of it (a dataset's files opened ahead) start reading ahead before this one
    /// waits for its next chunk (a round trip later).
    pub async fn end_training(&mut self) -> Result<()> {
        if self.training {
            self.finish_chunk().await?;
        }
        Ok(())
    }

    /// Settle the current chunk (once) and, if it trained, learn its set.
    async fn finish_chunk(&mut self) -> Result<()> {
        if self.finished {
            return Ok(());
        }
        self.finished = true;
        if self.current.is_some_and(|k| k < self.steps.len()) {
            self.settle_chunk(!self.training).await?;
        }
        if self.training {
            let learned: BTreeSet<String> = self.used.iter().map(|&b| self.table.path(b)).collect();
            let depth = self.depth_for_round_trip();
            let mut state = self.profile.state.lock().unwrap();
            state.learned = learned;
            state.trained = true;
            state.depth = state.depth.max(depth);
            self.training = false;
        }
        Ok(())
    }

    /// Move to the next chunk; returns its entry range, or None after the last.
    pub async fn advance(&mut self) -> Result<Option<(u64, u64)>> {
        let next = self.current.map_or(0, |c| c + 1);
        self.finish_chunk().await?;
        let unused: u64 = self.cache.values().map(|a| self.table.item_len(a)).sum();
        let (start, stop) = self.current.map_or((0, 0), |k| self.steps[k]);
        let held_unused: Vec<usize> = self.held_branches.iter().copied().collect();
        let held_unused = if held_unused.is_empty() {
            0
        } else {
            let plan = self.table.plan(&held_unused, start, stop).await?;
            stored_bytes(&*self.table, &plan)
        };
        self.table.file().stats.record_unused(unused + held_unused);
        self.cache.clear();
        self.held.clear();
        self.held_branches.clear();
        self.used.clear();
        self.triggered = false;
        if next >= self.steps.len() {
            self.current = Some(self.steps.len());
            self.pipelines.clear();
            self.ahead.clear();
            return Ok(None);
        }
        self.current = Some(next);
        self.finished = false;
        let state = self.profile.snapshot();
        if self.options.learning && !state.trained {
            self.training = true;
            self.training_began = Instant::now();
        } else if self.options.read_ahead.steps > 0 {
            self.next_from_pipeline(&state, next).await?;
        }
        self.take_ahead(next).await?;
        Ok(Some(self.steps[next]))
    }

    /// The analysis is about to read `branches` of the current chunk (several in one call). While
    /// training, they are the learned set's first members: its read-ahead of the next chunks
    /// starts now, beside this chunk's first read, instead of when the chunk ends (a round trip
    /// the next chunk would wait for). Branches the chunk uses beyond them join at its end.
    pub async fn will_use(&mut self, branches: &[usize]) -> Result<()> {
        let Some(k) = self
            .current
            .filter(|_| self.training && self.pipelines.is_empty())
        else {
            return Ok(());
        };
        if self.options.read_ahead.steps == 0 || k + 1 >= self.steps.len() {
            return Ok(());
        }
        let mut set: Vec<usize> = (branches.iter().chain(&self.used).copied())
            .filter(|b| self.readable.contains(b))
            .collect();
        set.sort_unstable();
        set.dedup();
        if !set.is_empty() {
            self.start_pipeline(set, k + 1).await?;
        }
        Ok(())
    }

    /// Follow, for the chunks after the current one, the sets speculated since this reader's
    /// read-ahead started, and the depth the learned set's read-ahead reached meanwhile: a file
    /// opened ahead in a dataset starts before the file read now has found its conditional sets
    /// and its depth, and would otherwise miss those sets in its first chunks, and wait a round
    /// trip for the chunks after those.
    pub async fn follow_profile(&mut self) -> Result<()> {
        let Some(current) = self.current.filter(|&c| c < self.steps.len()) else {
            return Ok(());
        };
        if self.training || self.options.read_ahead.steps == 0 {
            return Ok(());
        }
        let state = self.profile.snapshot();
        self.follow_set(&state, current, true).await
    }

    /// Twice the chunks the reader uses, at the training chunk's pace, while the startup read
    /// took: how deep the learned set's read-ahead must start to stay ahead of it (instead of
    /// growing there by a wait at each doubling). Twice, as a stream keeps two bandwidth-delay
    /// products in flight: the chunks come in bursts, and a reader of chunks decoded ahead goes
    /// faster than the training chunk, which decoded its own. 0 without a startup read.
    fn depth_for_round_trip(&self) -> usize {
        let round_trip = self.startup_took.as_secs_f64();
        let chunk = (self.training_began.elapsed().as_secs_f64() - round_trip).max(1e-3);
        (2.0 * round_trip / chunk).ceil() as usize
    }

    /// Take chunk `next` of the learned set from the read-ahead.
    async fn next_from_pipeline(&mut self, state: &ProfileState, next: usize) -> Result<()> {
        self.follow_set(state, next, false).await?;
        let Some(p) = self.pipelines.front_mut() else {
            return Ok(());
        };
        p.take_into(&mut self.cache).await?;
        let mut state = self.profile.state.lock().unwrap();
        state.depth = state.depth.max(p.reader.depth());
        Ok(())
    }

    /// Read the profile's sets ahead of chunk `next` (in use, or about to be: `taken` says
    /// whether a read-ahead handed it out already). The learned set's read-ahead deepens while
    /// the reader waits for it. When that set changed, its read-ahead is halted (the chunks it
    /// started still come from it: nothing is asked for twice) and one of the new set starts
    /// after them; branches that joined are read for those started chunks too. The speculated
    /// branches are read ahead on their own, chunk by chunk, within the guess window however
    /// deep the learned set is read (see `read_ahead_joined`).
    async fn follow_set(&mut self, state: &ProfileState, next: usize, taken: bool) -> Result<()> {
        let mut learned = self.indices(&state.learned);
        learned.sort_unstable();
        if learned.is_empty() {
            return Ok(());
        }
        let untaken = next + usize::from(taken);
        self.drop_finished_pipelines(untaken);
        let (from, halted) = match self.pipelines.back_mut() {
            Some(p) if p.set == learned => (None, false),
            Some(p) => {
                let end = p.first + p.reader.halt();
                p.end = Some(end);
                (Some(end.max(untaken)), true)
            }
            None => (Some(untaken), false),
        };
        if let Some(from) = from.filter(|&f| f < self.steps.len()) {
            self.start_pipeline(learned.clone(), from).await?;
        }
        // As deep as the profile's learned set got (in the last file, or in the file read now
        // while this one was opened ahead): the reader would wait for the depth to grow again.
        if let Some(p) = self.pipelines.back_mut().filter(|p| p.end.is_none()) {
            p.reader.deepen_to(state.depth);
        }
        self.drop_finished_pipelines(untaken);
        // Learned branches that joined after a read-ahead started (training announced part of the
        // set: only a halted read-ahead can lack them), for the chunks it started; then the
        // speculated ones, on a guess.
        if halted {
            self.read_ahead_joined(&learned, next, false).await?;
        }
        let speculated = self.speculated_extras(state);
        self.read_ahead_joined(&speculated, next, true).await
    }

    /// Read `set` ahead over the chunks from `from` on.
    async fn start_pipeline(&mut self, set: Vec<usize>, from: usize) -> Result<()> {
        let reader = StepReader::start(
            self.table.clone(),
            set.clone(),
            self.steps[from..].to_vec(),
            self.options.read_ahead,
        )
        .await?;
        self.pipelines.push_back(Pipeline {
            set,
            reader,
            first: from,
            end: None,
        });
        Ok(())
    }

    /// Forget the halted read-aheads whose chunks all come before `next`.
    fn drop_finished_pipelines(&mut self, next: usize) {
        while (self.pipelines.front()).is_some_and(|p| p.end.is_some_and(|end| end <= next)) {
            self.pipelines.pop_front();
        }
    }

    /// The arrays of branch `b` in the current chunk (each branch once per chunk: callers keep it).
    pub async fn get(&mut self, b: usize) -> Result<T::Item> {
        let Some(k) = self.current.filter(|&k| k < self.steps.len()) else {
            return Err(Error::InvalidArgument(
                "no current chunk: call advance() first".into(),
            ));
        };
        let (start, stop) = self.steps[k];
        self.used.insert(b);
        if !self.training && self.options.learning {
            let path = self.table.path(b);
            let mut state = self.profile.state.lock().unwrap();
            if !state.learned.contains(&path) && self.has(b) {
                state.missed.insert(path); // served by a trigger read: part of the miss set
            }
        }
        if let Some(array) = self.take_hit(b, start, stop).await? {
            return Ok(array);
        }
        if self.training
            && self.stats.startup_fetches == 0
            && self.fits_startup(start, stop).await?
        {
            let all = self.readable.clone();
            let began = Instant::now();
            self.hold(&all, start, stop).await?;
            self.startup_took = began.elapsed();
            self.count(LazyStats {
                startup_fetches: 1,
                ..Default::default()
            });
            if let Some(array) = self.take_hit(b, start, stop).await? {
                return Ok(array);
            }
        }
        let path = self.table.path(b);
        let state = self.profile.snapshot();
        if !self.training && state.learned.contains(&path) {
            // Prefetch is off (or the learned set changed): fetch the learned set now, in one request.
            let speculated: Vec<usize> = self
                .speculated_extras(&state)
                .into_iter()
                .filter(|o| !self.has(*o))
                .collect();
            let learned: Vec<usize> = self
                .indices(&state.learned)
                .into_iter()
                .filter(|o| !self.cache.contains_key(o))
                .chain(speculated.iter().copied())
                .collect();
            self.fill(&learned, start, stop).await?;
            self.count_speculated(&speculated).await?;
            self.count(LazyStats {
                learned_fetches: 1,
                ..Default::default()
            });
            if let Some(array) = self.take_hit(b, start, stop).await? {
                return Ok(array);
            }
        }
        // A miss: fetch this branch with every branch missed before, in one request.
        self.count(LazyStats {
            misses: 1,
            miss_fetches: 1,
            ..Default::default()
        });
        let mut wanted = vec![b];
        if !self.training && self.options.learning {
            let (known, others) = {
                let mut state = self.profile.state.lock().unwrap();
                (!state.missed.insert(path), state.missed.clone())
            };
            // Branches this chunk already used were handed out (no longer in memory): not again.
            let unread: Vec<usize> = self
                .readable
                .iter()
                .copied()
                .filter(|&o| o == b || !(self.has(o) || self.used.contains(&o)))
                .collect();
            if !known && !self.triggered && self.fits_budget(&unread, start, stop).await? {
                // A branch never missed before: the analysis has started on a new set (a trigger
                // fired). Read every branch of this chunk not read yet, in one request, rather
                // than one round trip per branch; what it then uses is learned as the miss set.
                // A set that appears is likely used again next chunk: those branches of the next
                // chunk are read alongside if they fit the budget (else its first use decides).
                self.triggered = true;
                let speculation = self.table.file().speculation.enabled;
                if speculation && self.options.read_ahead.steps > 0 && k + 1 < self.steps.len() {
                    let guess: Vec<usize> = (unread.iter().copied())
                        .filter(|o| !state.learned.contains(&self.table.path(*o)))
                        .collect();
                    let guess = self.uncovered_at(k + 1, &guess);
                    if !guess.is_empty() {
                        self.start_ahead(guess, k + 1, k + 2, true).await?;
                    }
                }
                self.hold(&unread, start, stop).await?;
                return self.decode_held(b, start, stop).await;
            }
            wanted.extend(self.indices(&others).into_iter().filter(|o| {
                *o != b && !(self.has(*o) || self.used.contains(o)) && self.readable.contains(o)
            }));
        }
        let (arrays, _) = read(&self.table, &wanted, start, stop, &Held::new()).await?;
        let mut arrays = wanted.into_iter().zip(arrays);
        let (_, first) = arrays.next().expect("the branch asked for");
        self.cache.extend(arrays);
        Ok(first)
    }

    /// Whether branch `b` of this chunk is in memory (decoded, or held compressed).
    fn has(&self, b: usize) -> bool {
        self.cache.contains_key(&b) || self.held_branches.contains(&b)
    }

    /// Branch `b` from memory, decompressed now if it was held.
    async fn take_hit(&mut self, b: usize, start: u64, stop: u64) -> Result<Option<T::Item>> {
        let array = match self.cache.remove(&b) {
            Some(array) => array,
            None if self.held_branches.contains(&b) => self.decode_held(b, start, stop).await?,
            None => return Ok(None),
        };
        self.count(LazyStats {
            hits: 1,
            ..Default::default()
        });
        Ok(Some(array))
    }

    /// Decompress held branch `b` (no request: its baskets are held).
    async fn decode_held(&mut self, b: usize, start: u64, stop: u64) -> Result<T::Item> {
        self.held_branches.remove(&b);
        let (mut arrays, _) = read(&self.table, &[b], start, stop, &self.held).await?;
        Ok(arrays.remove(0))
    }

    /// Read the stored units of `branches` in this chunk, in one request, and hold them.
    async fn hold(&mut self, branches: &[usize], start: u64, stop: u64) -> Result<()> {
        let plan = self.table.plan(branches, start, stop).await?;
        fetch(&*self.table, &plan, &mut self.held).await?;
        self.held_branches.extend(branches.iter().copied());
        Ok(())
    }

    /// Read `branches` of the current chunk into the cache, in one request.
    async fn fill(&mut self, branches: &[usize], start: u64, stop: u64) -> Result<()> {
        let (arrays, _) = read(&self.table, branches, start, stop, &Held::new()).await?;
        self.cache.extend(branches.iter().copied().zip(arrays));
        Ok(())
    }

    /// Add to this reader's counters and to the file's.
    fn count(&mut self, d: LazyStats) {
        self.stats.hits += d.hits;
        self.stats.misses += d.misses;
        self.stats.miss_fetches += d.miss_fetches;
        self.stats.startup_fetches += d.startup_fetches;
        self.stats.learned_fetches += d.learned_fetches;
        self.table.file().stats.record_cache(
            d.hits,
            d.misses,
            d.miss_fetches,
            d.startup_fetches,
            d.learned_fetches,
        );
    }

    async fn fits_startup(&self, start: u64, stop: u64) -> Result<bool> {
        self.fits_budget(&self.readable, start, stop).await
    }

    async fn fits_budget(&self, branches: &[usize], start: u64, stop: u64) -> Result<bool> {
        let plan = self.table.plan(branches, start, stop).await?;
        Ok(stored_bytes(&*self.table, &plan) <= self.options.startup_bytes)
    }
}
