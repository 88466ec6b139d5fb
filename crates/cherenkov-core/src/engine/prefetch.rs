//! Reading a sequence of entry ranges ("steps") with the future known: while the consumer works
//! on step k, steps k+1.. are fetched and decompressed, up to a memory budget and a depth.
//! A basket that straddles steps is fetched and decompressed once. Dropping the reader cancels
//! everything in flight.

use super::assemble::assemble_all;
use super::fetch::fetch_and_decode;
use super::file::RootFile;
use super::output::{BranchArray, ReadStats};
use super::plan::{check_entry_range, interpretations, plan_baskets, Planned};
use crate::error::{Error, Result};
use crate::format::basket::Basket;
use crate::format::interpretation::Interpretation;
use crate::format::tree::TreeMeta;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, OnceCell, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

/// How far ahead to read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PrefetchOptions {
    /// Bytes (compressed plus estimated uncompressed) that steps read ahead may hold at once.
    pub memory_budget: u64,
    /// Steps in flight at most, the one being consumed included. 1 turns prefetching off.
    pub max_steps_ahead: usize,
}

impl Default for PrefetchOptions {
    fn default() -> Self {
        Self {
            memory_budget: 256 << 20,
            max_steps_ahead: 4,
        }
    }
}

/// One step's arrays. Holding it holds its share of the memory budget.
pub struct StepResult {
    pub start: u64,
    pub stop: u64,
    pub arrays: Vec<BranchArray>,
    pub stats: ReadStats,
    /// Its share of the memory budget and its place among the steps in flight, until dropped.
    _held: (OwnedSemaphorePermit, OwnedSemaphorePermit),
}

type Decoded = Arc<HashMap<Planned, Arc<Basket>>>;

struct Slot {
    /// Steps that still need baskets owned by this step (steps may finish out of order).
    users_left: usize,
    cell: Option<Arc<OnceCell<Decoded>>>,
}

struct Shared {
    file: Arc<RootFile>,
    tree: Arc<TreeMeta>,
    branches: Vec<usize>,
    interps: Vec<Interpretation>,
    /// Per step: the baskets it needs.
    plans: Vec<Vec<Planned>>,
    /// Per step: the baskets it fetches (those no earlier step needs), decoded once.
    owned: Vec<Vec<Planned>>,
    owner: HashMap<Planned, usize>,
    /// Per owning step: its decoded baskets, while some step still needs them.
    decoded: Mutex<Vec<Slot>>,
    steps: Vec<(u64, u64)>,
}

/// Yields the steps in order; see the module documentation.
pub struct StepReader {
    file: Arc<RootFile>,
    results: mpsc::Receiver<Result<StepResult>>,
    _driver: AbortOnDrop,
    /// Time `next` spent waiting for data the consumer needed now.
    pub blocked: Duration,
}

struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl StepReader {
    /// Start reading `branches` over `steps` (consecutive, increasing entry ranges). Must be
    /// called within the engine's runtime.
    pub fn start(
        file: Arc<RootFile>,
        tree: Arc<TreeMeta>,
        branches: Vec<usize>,
        steps: Vec<(u64, u64)>,
        options: PrefetchOptions,
    ) -> Result<StepReader> {
        for &(start, stop) in &steps {
            check_entry_range(&tree, start, stop)?;
        }
        if options.max_steps_ahead == 0 || options.memory_budget == 0 {
            return Err(Error::InvalidArgument(
                "prefetch depth and memory budget must be positive".into(),
            ));
        }
        let interps = interpretations(&file, &tree, &branches)?;
        let plans: Vec<Vec<Planned>> = steps
            .iter()
            .map(|&(a, b)| plan_baskets(&tree, &branches, a, b))
            .collect();
        let mut owner = HashMap::new();
        let mut owned = vec![Vec::new(); steps.len()];
        let mut users = vec![std::collections::HashSet::new(); steps.len()];
        for (k, plan) in plans.iter().enumerate() {
            for p in plan {
                let o = *owner.entry(*p).or_insert(k);
                if o == k {
                    owned[k].push(*p);
                }
                users[o].insert(k);
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
            file,
            tree,
            branches,
            interps,
            plans,
            owned,
            owner,
            steps,
        });
        let (tx, rx) = mpsc::channel(options.max_steps_ahead);
        let stats_file = shared.file.clone();
        let driver = tokio::spawn(drive(shared, options, tx));
        Ok(StepReader {
            file: stats_file,
            results: rx,
            _driver: AbortOnDrop(driver),
            blocked: Duration::ZERO,
        })
    }

    /// The next step, or `None` after the last.
    pub async fn next(&mut self) -> Option<Result<StepResult>> {
        let t = Instant::now();
        let out = self.results.recv().await;
        self.blocked += t.elapsed();
        self.file.stats.record_blocked(t.elapsed());
        out
    }
}

/// Memory a step will hold: its own baskets compressed, plus their estimated uncompressed size.
fn step_cost(shared: &Shared, k: usize) -> u64 {
    shared.owned[k]
        .iter()
        .map(|p| {
            let b = &shared.tree.branches[p.branch];
            let ratio = if b.zip_bytes > 0 {
                (b.tot_bytes as f64 / b.zip_bytes as f64).clamp(1.0, 100.0)
            } else {
                3.0
            };
            (p.stored_bytes() as f64 * (1.0 + ratio)) as u64
        })
        .sum()
}

async fn drive(
    shared: Arc<Shared>,
    options: PrefetchOptions,
    tx: mpsc::Sender<Result<StepResult>>,
) {
    // One permit per byte (acquire_many takes a u32, so budgets above 4 GiB are capped there).
    let budget_permits = options.memory_budget.min(u32::MAX as u64) as u32;
    let budget = Arc::new(Semaphore::new(budget_permits as usize));
    // A step larger than the whole budget still runs, alone.
    let permits_for = |cost: u64| -> u32 { cost.min(budget_permits as u64).max(1) as u32 };
    // A step holds one place from its start until the consumer drops it.
    let depth = Arc::new(Semaphore::new(options.max_steps_ahead));
    let mut in_flight: VecDeque<AbortOnDrop> = VecDeque::new();
    let mut results: VecDeque<tokio::sync::oneshot::Receiver<Result<StepResult>>> = VecDeque::new();
    let mut next = 0;
    loop {
        let can_start = next < shared.steps.len() && results.len() < options.max_steps_ahead;
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
                let (done_tx, done_rx) = tokio::sync::oneshot::channel();
                let task_shared = shared.clone();
                let k = next;
                in_flight.push_back(AbortOnDrop(tokio::spawn(async move {
                    let _ = done_tx.send(read_step(&task_shared, k, permit).await);
                })));
                results.push_back(done_rx);
                next += 1;
            }
            else => return,
        }
    }
}

/// Decode (once) the baskets step `k` owns.
async fn owned_baskets(shared: &Shared, k: usize) -> Result<Decoded> {
    let cell = shared.decoded.lock().unwrap()[k]
        .cell
        .clone()
        .ok_or_else(|| Error::Cancelled(format!("baskets of step {k} were freed early")))?;
    cell.get_or_try_init(|| async {
        let plan = &shared.owned[k];
        let (baskets, _) =
            fetch_and_decode(&shared.file, &shared.tree, plan, &Default::default()).await?;
        Ok::<_, Error>(Arc::new(
            plan.iter()
                .copied()
                .zip(baskets.into_iter().map(Arc::new))
                .collect(),
        ))
    })
    .await
    .cloned()
}

async fn read_step(
    shared: &Shared,
    k: usize,
    held: (OwnedSemaphorePermit, OwnedSemaphorePermit),
) -> Result<StepResult> {
    let (start, stop) = shared.steps[k];
    shared.file.stats.record_read_call();
    shared.file.stats.record_prefetched_step();
    let t0 = Instant::now();
    let mut by_owner: HashMap<usize, Decoded> = HashMap::new();
    for p in &shared.plans[k] {
        let o = shared.owner[p];
        if let std::collections::hash_map::Entry::Vacant(e) = by_owner.entry(o) {
            e.insert(owned_baskets(shared, o).await?);
        }
    }
    let fetched = t0.elapsed();
    let pairs: Vec<(&Planned, &Basket)> = shared.plans[k]
        .iter()
        .map(|p| (p, by_owner[&shared.owner[p]][p].as_ref()))
        .collect();
    let t1 = Instant::now();
    let arrays = assemble_all(
        &shared.file,
        &shared.tree,
        &shared.branches,
        shared.interps.clone(),
        &pairs,
        start,
        stop,
    )
    .await?;
    let stats = ReadStats {
        baskets: shared.owned[k].len() as u64,
        compressed_bytes: shared.owned[k].iter().map(|p| p.stored_bytes()).sum(),
        uncompressed_bytes: pairs
            .iter()
            .filter(|(p, _)| shared.owner[*p] == k)
            .map(|(_, b)| b.content.len() as u64)
            .sum(),
        fetch_seconds: fetched.as_secs_f64(),
        decode_seconds: t1.elapsed().as_secs_f64(),
        decompress_cpu_seconds: 0.0,
    };
    // Free decoded baskets that no later step needs.
    let mut slots = shared.decoded.lock().unwrap();
    for &o in by_owner.keys() {
        slots[o].users_left -= 1;
        if slots[o].users_left == 0 {
            slots[o].cell = None;
        }
    }
    drop(slots);
    Ok(StepResult {
        start,
        stop,
        arrays,
        stats,
        _held: held,
    })
}
