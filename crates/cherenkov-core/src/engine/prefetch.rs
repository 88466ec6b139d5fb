//! Reading a sequence of entry ranges ("steps") with the future known: while the consumer works
//! on step k, steps k+1.. are fetched and decompressed, up to a memory budget and a depth.
//! Their decompression takes turns, the step needed first first (`cpu_turns`).
//! A unit (basket, cluster of a column) that straddles steps is fetched and decoded once.
//! A step whose units alone exceed the budget is read in parts of whole items (branches, fields),
//! each fetched, decoded and assembled before the next: what it holds beyond its arrays stays
//! within the budget. From the second step on, the depth covers two round trips of the
//! consumer's pace; when the consumer still waits for bytes of a step read ahead (the link's
//! round trip is longer than the steps ahead take to use), it doubles, up to every step, within
//! the budget: a depth asked for is where it starts, as a TCP window starts small.
//! Dropping the reader cancels everything in flight. Works on any `Table`.

use super::cpu_turns::{in_order, Need};
use super::output::ReadStats;
use super::table::{
    check_entry_range, fetch, fetch_and_assemble, fetch_and_decode, stored_bytes, Held, Table,
};
use super::AbortOnDrop;
use crate::error::{Error, Result};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, OnceCell, OwnedSemaphorePermit, Semaphore};

/// How far ahead of the step in use to read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReadAhead {
    /// Bytes (compressed plus estimated uncompressed) that steps read ahead may hold at once,
    /// besides the arrays of the steps handed out or being assembled. A step needing more is read
    /// alone, in parts of whole items within the budget.
    pub memory_budget: u64,
    /// Steps read ahead of the one in use, to start with (more while the consumer waits for the
    /// network); 0 reads each step only when it is asked for.
    pub steps: usize,
    /// `steps` is a default, not a choice: start twice as deep on a far link (see
    /// `StepReader::deepen_for_link`).
    pub deeper_when_far: bool,
}

impl Default for ReadAhead {
    fn default() -> Self {
        Self {
            memory_budget: 256 << 20,
            steps: 3,
            deeper_when_far: false,
        }
    }
}

impl ReadAhead {
    /// Steps in flight at most, the one in use included.
    fn in_flight(&self) -> usize {
        self.steps + 1
    }
}

/// One step's arrays. Holding it holds its share of the memory budget.
pub struct StepResult<I> {
    pub start: u64,
    pub stop: u64,
    pub arrays: Vec<I>,
    pub stats: ReadStats,
    /// Its share of the memory budget and its place among the steps in flight, until dropped.
    _held: (OwnedSemaphorePermit, OwnedSemaphorePermit),
}

type DecodedUnits<T> = Arc<HashMap<<T as Table>::Unit, Arc<<T as Table>::Decoded>>>;

struct Slot<T: Table> {
    /// Steps that still need units owned by this step (steps may finish out of order).
    users_left: usize,
    cell: Option<Arc<OnceCell<DecodedUnits<T>>>>,
}

struct Shared<T: Table> {
    table: Arc<T>,
    items: Vec<usize>,
    /// Per step: the units it needs.
    plans: Vec<Vec<T::Unit>>,
    /// Per step: the units it fetches (those no earlier step needs), decoded once.
    owned: Vec<Vec<T::Unit>>,
    owner: HashMap<T::Unit, usize>,
    /// Per step: the steps owning the units it needs.
    owners: Vec<Vec<usize>>,
    /// Per step: the units it owns are fetched (decoding may still run).
    fetched: Vec<AtomicBool>,
    /// Per owning step: its decoded units, while some step still needs them.
    decoded: Mutex<Vec<Slot<T>>>,
    steps: Vec<(u64, u64)>,
    /// Per step: read in parts of whole items (its units exceed the budget; they are its own,
    /// shared with no other step).
    in_parts: Vec<bool>,
    memory_budget: u64,
    /// When the reader started; how long after it the first step's bytes were in (about a round
    /// trip), and how long they took to decode then (see `StepReader::deepen_for_pace`).
    began: Instant,
    first_step: std::sync::OnceLock<(Duration, Duration)>,
}

/// Whether more steps may start, and how many did.
#[derive(Debug, Default)]
struct Gate {
    halted: bool,
    started: usize,
}

/// Yields the steps in order; see the module documentation.
pub struct StepReader<T: Table> {
    shared: Arc<Shared<T>>,
    results: mpsc::Receiver<Result<StepResult<T::Item>>>,
    gate: Arc<Mutex<Gate>>,
    /// One place per step in flight (the one in use included); places are added to deepen.
    depth: Arc<Semaphore>,
    places: usize,
    handed_out: usize,
    /// When the last step was handed out: the consumer's pace is the time until it asks again.
    handed_at: Option<Instant>,
    _driver: AbortOnDrop<()>,
    /// Time `next` spent waiting for data the consumer needed now.
    pub blocked: Duration,
}

impl<T: Table> StepReader<T> {
    /// Start reading `items` over `steps` (consecutive, increasing entry ranges). Must be
    /// called within the engine's runtime.
    pub async fn start(
        table: Arc<T>,
        items: Vec<usize>,
        steps: Vec<(u64, u64)>,
        options: ReadAhead,
    ) -> Result<StepReader<T>> {
        for &(start, stop) in &steps {
            check_entry_range(&*table, start, stop)?;
        }
        if options.memory_budget == 0 {
            return Err(Error::InvalidArgument(
                "the memory budget must be positive".into(),
            ));
        }
        table.check(&items)?;
        let mut plans = Vec::with_capacity(steps.len());
        for &(a, b) in &steps {
            plans.push(table.plan(&items, a, b).await?);
        }
        let in_parts: Vec<bool> = plans
            .iter()
            .map(|plan| held_cost(&*table, plan) > options.memory_budget)
            .collect();
        let mut owner = HashMap::new();
        let mut owned = vec![Vec::new(); steps.len()];
        let mut users = vec![HashSet::new(); steps.len()];
        let mut owners = vec![Vec::new(); steps.len()];
        for (k, plan) in plans.iter().enumerate().filter(|(k, _)| !in_parts[*k]) {
            for u in plan {
                let o = *owner.entry(*u).or_insert(k);
                if o == k {
                    owned[k].push(*u);
                }
                if users[o].insert(k) {
                    owners[k].push(o);
                }
            }
        }
        let slots = users
            .iter()
            .map(|u| Slot {
                users_left: u.len(),
                cell: Some(Arc::new(OnceCell::new())),
            })
            .collect();
        let shared = Arc::new(Shared {
            decoded: Mutex::new(slots),
            table: table.clone(),
            items,
            plans,
            owned,
            owner,
            owners,
            fetched: (0..steps.len()).map(|_| AtomicBool::new(false)).collect(),
            steps,
            in_parts,
            memory_budget: options.memory_budget,
            began: Instant::now(),
            first_step: Default::default(),
        });
        // The places bound the steps in flight; the channel never holds more.
        let (tx, rx) = mpsc::channel(shared.steps.len().max(1));
        let gate = Arc::new(Mutex::new(Gate::default()));
        let depth = Arc::new(Semaphore::new(options.in_flight()));
        let driver = tokio::spawn(drive(
            shared.clone(),
            options,
            tx,
            gate.clone(),
            depth.clone(),
        ));
        let mut reader = StepReader {
            shared,
            results: rx,
            gate,
            depth,
            places: options.in_flight(),
            handed_out: 0,
            handed_at: None,
            _driver: AbortOnDrop(driver),
            blocked: Duration::ZERO,
        };
        if options.deeper_when_far {
            reader.deepen_for_link();
        }
        Ok(reader)
    }

    /// The next step, or `None` after the last.
    pub async fn next(&mut self) -> Option<Result<StepResult<T::Item>>> {
        let k = self.handed_out;
        self.handed_out += 1;
        self.deepen_for_pace();
        let out = match self.results.try_recv() {
            Ok(ready) => Some(ready),
            Err(_) => {
                // The first step waits for the network whatever the depth; a later one only when
                // too few steps were read ahead to cover the round trip.
                if k > 0
                    && k < self.shared.steps.len()
                    && self.can_deepen()
                    && self.waits_for_bytes(k)
                {
                    self.deepen();
                }
                let t = Instant::now();
                let out = self.results.recv().await;
                self.blocked += t.elapsed();
                self.shared.table.file().stats.record_blocked(t.elapsed());
                out
            }
        };
        self.handed_at = Some(Instant::now());
        out
    }

    /// Read as deep as two round trips of the consumer's pace, as lazy chunks start: the steps
    /// read ahead come in bursts, and waiting for the consumer to run dry before doubling costs a
    /// round trip per doubling. The pace is the time the consumer took with the last step, or
    /// the first step's decoding if longer (steps come no faster); the round trip, how long the
    /// first step's bytes took. A consumer slower than the round trip, or bytes faster than
    /// decoding (a local file), keep the depth.
    fn deepen_for_pace(&mut self) {
        let (Some(handed_at), Some((round_trip, decode))) =
            (self.handed_at, self.shared.first_step.get())
        else {
            return;
        };
        self.deepen_to(steps_covering(
            *round_trip,
            handed_at.elapsed().max(*decode),
        ));
    }

    /// Before the first step, when no depth was chosen: twice as deep where two round trips of
    /// the link (measured while the file opened) outlast decoding the steps read ahead at best.
    /// The first steps' bytes come together, so with only the steps asked for in that first wave
    /// a fast consumer would wait a round trip for the next ones. Not deeper: before the link's
    /// width is measured, bytes asked for go to the first connections and stay there, so a deep
    /// first wave on a narrow link would keep the read on them. Sources that measure no round
    /// trip (local files) keep the depth.
    fn deepen_for_link(&mut self) {
        let shared = &self.shared;
        let Some(round_trip) = shared.table.file().source.report().round_trip else {
            return;
        };
        let Some(first) = shared.plans.first() else {
            return;
        };
        let decoded: u64 = first.iter().map(|u| shared.table.decoded_estimate(u)).sum();
        let rate = DECODE_RATE_PER_CORE * rayon::current_num_threads() as f64;
        let steps = steps_covering(round_trip, Duration::from_secs_f64(decoded as f64 / rate));
        self.deepen_to(steps.min(2 * self.places - 1));
    }

    /// Whether step `k` still waits for bytes (not only for decoding).
    fn waits_for_bytes(&self, k: usize) -> bool {
        let shared = &self.shared;
        !shared.in_parts[k]
            && (shared.owners[k].iter()).any(|&o| !shared.fetched[o].load(Ordering::Acquire))
    }

    /// Whether the depth may grow: not off (a reader with no read-ahead stays so), not at every
    /// step yet.
    fn can_deepen(&self) -> bool {
        self.places >= 2 && self.places < self.shared.steps.len()
    }

    /// Double the steps in flight, up to every step.
    fn deepen(&mut self) {
        self.deepen_to(2 * self.places - 1);
    }

    /// Read up to `steps` ahead of the step in use (up to every step), if the depth may grow: the
    /// depth another reader of the same items reached, or that a measured round trip needs.
    pub fn deepen_to(&mut self, steps: usize) {
        let places = steps.saturating_add(1).min(self.shared.steps.len());
        if self.can_deepen() && places > self.places {
            self.depth.add_permits(places - self.places);
            self.places = places;
        }
    }

    /// Steps read ahead of the one in use, at most, now.
    pub fn depth(&self) -> usize {
        self.places - 1
    }

    /// How many steps started so far.
    pub fn started(&self) -> usize {
        self.gate.lock().unwrap().started
    }

    /// Start no more steps; returns how many started (those are still read and yielded, in
    /// order). A reader whose set changes hands over to a new one without asking twice for steps
    /// already in flight.
    pub fn halt(&self) -> usize {
        let mut gate = self.gate.lock().unwrap();
        gate.halted = true;
        gate.started
    }
}

/// Bytes a second one core decodes at best: a guess that sets the depth before the first step
/// is measured (a guess too fast reads deeper, within the memory budget).
const DECODE_RATE_PER_CORE: f64 = 500e6;

/// Steps that keep a consumer going for two round trips at `pace` a step.
fn steps_covering(round_trip: Duration, pace: Duration) -> usize {
    (2.0 * round_trip.as_secs_f64() / pace.as_secs_f64().max(1e-4)).ceil() as usize
}

/// Memory units take while read: as stored, plus their estimated decoded size.
fn held_cost<T: Table>(table: &T, units: &[T::Unit]) -> u64 {
    stored_bytes(table, units) + units.iter().map(|u| table.decoded_estimate(u)).sum::<u64>()
}

/// Memory a step will hold beyond its arrays: its own units, or the whole budget when it is read
/// in parts (so it runs alone).
fn step_cost<T: Table>(shared: &Shared<T>, k: usize) -> u64 {
    match shared.in_parts[k] {
        true => shared.memory_budget,
        false => held_cost(&*shared.table, &shared.owned[k]),
    }
}

async fn drive<T: Table>(
    shared: Arc<Shared<T>>,
    options: ReadAhead,
    tx: mpsc::Sender<Result<StepResult<T::Item>>>,
    gate: Arc<Mutex<Gate>>,
    depth: Arc<Semaphore>,
) {
    // One permit per byte (acquire_many takes a u32, so budgets above 4 GiB are capped there).
    let budget_permits = options.memory_budget.min(u32::MAX as u64) as u32;
    let budget = Arc::new(Semaphore::new(budget_permits as usize));
    // A step larger than the whole budget still runs, alone.
    let permits_for = |cost: u64| -> u32 { cost.min(budget_permits as u64).max(1) as u32 };
    // A step holds one place (of `depth`) from its start until the consumer drops it.
    let mut in_flight: VecDeque<AbortOnDrop<()>> = VecDeque::new();
    let mut results: VecDeque<tokio::sync::oneshot::Receiver<Result<StepResult<T::Item>>>> =
        VecDeque::new();
    let mut next = 0;
    loop {
        let can_start = next < shared.steps.len() && !gate.lock().unwrap().halted;
        tokio::select! {
            biased;
            done = async { results.front_mut().unwrap().await }, if !results.is_empty() => {
                results.pop_front();
                in_flight.pop_front();
                let result = done.unwrap_or_else(|_| Err(Error::Cancelled("a read step was cancelled".into())));
                let failed = result.is_err();
                if tx.send(result).await.is_err() || failed {
                    return;
                }
            }
            // (select! builds every branch's future before checking guards: keep this one lazy.)
            permits = async {
                let place = depth.clone().acquire_owned().await;
                let bytes = budget.clone().acquire_many_owned(permits_for(step_cost(&shared, next))).await;
                (bytes, place)
            }, if can_start => {
                let permit = match permits {
                    (Ok(bytes), Ok(place)) => (bytes, place),
                    _ => unreachable!("the semaphores are never closed"),
                };
                {
                    let mut gate = gate.lock().unwrap();
                    if gate.halted {
                        continue; // halted while waiting for room: the permits go back
                    }
                    gate.started += 1;
                }
                let (done_tx, done_rx) = tokio::sync::oneshot::channel();
                let task_shared = shared.clone();
                let k = next;
                let file = shared.table.file().order.clone();
                let need = Need { file, entry: shared.steps[k].0 };
                in_flight.push_back(AbortOnDrop(tokio::spawn(in_order(need, async move {
                    let _ = done_tx.send(read_step(&task_shared, k, permit).await);
                }))));
                results.push_back(done_rx);
                next += 1;
                // Let the step just spawned send its request before the next one is spawned: the
                // runtime runs the newest task first, which would send the later steps' requests
                // ahead of the earlier ones (and where a server takes few at once, the step needed
                // first would wait).
                tokio::task::yield_now().await;
            }
            else => return,
        }
    }
}

/// Decode (once) the units step `k` owns.
async fn owned_units<T: Table>(shared: &Shared<T>, k: usize) -> Result<DecodedUnits<T>> {
    let cell = shared.decoded.lock().unwrap()[k]
        .cell
        .clone()
        .ok_or_else(|| Error::Cancelled(format!("units of step {k} were freed early")))?;
    cell.get_or_try_init(|| async {
        let plan = &shared.owned[k];
        let mut held = Held::new();
        fetch(&*shared.table, plan, &mut held).await?;
        shared.fetched[k].store(true, Ordering::Release);
        let bytes_in = (k == 0).then(|| shared.began.elapsed());
        let (decoded, _) = fetch_and_decode(&*shared.table, plan, &held).await?;
        if let Some(bytes_in) = bytes_in {
            let decode = shared.began.elapsed() - bytes_in;
            let _ = shared.first_step.set((bytes_in, decode));
        }
        Ok::<_, Error>(Arc::new(plan.iter().copied().zip(decoded).collect()))
    })
    .await
    .cloned()
}

async fn read_step<T: Table>(
    shared: &Shared<T>,
    k: usize,
    held: (OwnedSemaphorePermit, OwnedSemaphorePermit),
) -> Result<StepResult<T::Item>> {
    let (start, stop) = shared.steps[k];
    let stats = &shared.table.file().stats;
    stats.record_read_call();
    stats.record_prefetched_step();
    let (arrays, stats) = match shared.in_parts[k] {
        true => read_in_parts(shared, k).await?,
        false => read_whole(shared, k).await?,
    };
    Ok(StepResult {
        start,
        stop,
        arrays,
        stats,
        _held: held,
    })
}

/// Step `k`'s arrays from the units it owns and those earlier steps decoded for it.
async fn read_whole<T: Table>(shared: &Shared<T>, k: usize) -> Result<(Vec<T::Item>, ReadStats)> {
    if shared.owners[k] == [k] && shared.decoded.lock().unwrap()[k].users_left == 1 {
        return read_alone(shared, k).await;
    }
    let (start, stop) = shared.steps[k];
    let table = &*shared.table;
    let t0 = Instant::now();
    let mut by_owner: HashMap<usize, DecodedUnits<T>> = HashMap::new();
    for u in &shared.plans[k] {
        let o = shared.owner[u];
        if let std::collections::hash_map::Entry::Vacant(e) = by_owner.entry(o) {
            e.insert(owned_units(shared, o).await?);
        }
    }
    let fetched = t0.elapsed();
    // Free the decoded units no later step needs first: this step then holds them alone, and
    // assembly may take their buffers instead of copying them.
    {
        let mut slots = shared.decoded.lock().unwrap();
        for &o in by_owner.keys() {
            slots[o].users_left -= 1;
            if slots[o].users_left == 0 {
                slots[o].cell = None;
            }
        }
    }
    let mut maps: HashMap<usize, HashMap<T::Unit, Arc<T::Decoded>>> = by_owner
        .into_iter()
        .map(|(o, m)| (o, Arc::try_unwrap(m).unwrap_or_else(|m| (*m).clone())))
        .collect();
    let units: Vec<(T::Unit, Arc<T::Decoded>)> = shared.plans[k]
        .iter()
        .filter_map(|u| {
            let d = maps.get_mut(&shared.owner[u])?.remove(u)?;
            Some((*u, d))
        })
        .collect();
    let uncompressed_bytes = units
        .iter()
        .filter(|(u, _)| shared.owner[u] == k)
        .map(|(_, d)| table.decoded_len(d))
        .sum();
    let t1 = Instant::now();
    let arrays = table.assemble(&shared.items, start, stop, units).await?;
    let stats = ReadStats {
        baskets: shared.owned[k].len() as u64,
        compressed_bytes: stored_bytes(table, &shared.owned[k]),
        uncompressed_bytes,
        fetch_seconds: fetched.as_secs_f64(),
        decode_seconds: t1.elapsed().as_secs_f64(),
        decompress_cpu_seconds: 0.0,
    };
    Ok((arrays, stats))
}

/// Step `k` when it needs only the units it owns and no other step needs them (steps of whole
/// clusters): fetched, then decoded straight into its arrays (`Table::decode_and_assemble`).
async fn read_alone<T: Table>(shared: &Shared<T>, k: usize) -> Result<(Vec<T::Item>, ReadStats)> {
    let (start, stop) = shared.steps[k];
    let plan = &shared.owned[k];
    let t0 = Instant::now();
    let mut held = Held::new();
    fetch(&*shared.table, plan, &mut held).await?;
    shared.fetched[k].store(true, Ordering::Release);
    let (fetched, bytes_in) = (t0.elapsed(), shared.began.elapsed());
    let (arrays, mut stats) =
        fetch_and_assemble(&*shared.table, &shared.items, start, stop, plan, &held).await?;
    if k == 0 {
        let _ = shared
            .first_step
            .set((bytes_in, shared.began.elapsed() - bytes_in));
    }
    shared.decoded.lock().unwrap()[k].cell = None;
    stats.compressed_bytes = stored_bytes(&*shared.table, plan);
    stats.fetch_seconds = fetched.as_secs_f64();
    Ok((arrays, stats))
}

/// A step whose units exceed the memory budget: its items in consecutive groups whose units fit
/// in the budget (an item larger than it makes a group alone), each fetched, decoded and assembled
/// before the next is fetched, so that the step holds its arrays so far plus one group's units.
async fn read_in_parts<T: Table>(
    shared: &Shared<T>,
    k: usize,
) -> Result<(Vec<T::Item>, ReadStats)> {
    let (start, stop) = shared.steps[k];
    let table = &*shared.table;
    let mut groups: Vec<(Vec<usize>, u64)> = Vec::new();
    for &item in &shared.items {
        let cost = held_cost(table, &table.plan(&[item], start, stop).await?);
        match groups.last_mut() {
            Some((items, group_cost)) if *group_cost + cost <= shared.memory_budget => {
                items.push(item);
                *group_cost += cost;
            }
            _ => groups.push((vec![item], cost)),
        }
    }
    let mut arrays = Vec::with_capacity(shared.items.len());
    let mut stats = ReadStats::default();
    for (items, _) in groups {
        // Planned as a whole: items may share units (an RNTuple collection's offsets).
        let units = table.plan(&items, start, stop).await?;
        let (part_arrays, part) =
            fetch_and_assemble(table, &items, start, stop, &units, &Held::new()).await?;
        arrays.extend(part_arrays);
        stats.baskets += part.baskets;
        stats.compressed_bytes += part.compressed_bytes;
        stats.uncompressed_bytes += part.uncompressed_bytes;
        stats.fetch_seconds += part.fetch_seconds;
        stats.decode_seconds += part.decode_seconds;
        stats.decompress_cpu_seconds += part.decompress_cpu_seconds;
    }
    Ok((arrays, stats))
}
