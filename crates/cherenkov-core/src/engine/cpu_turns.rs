//! CPU work (decompression, assembly) of steps read ahead takes turns, the step needed first
//! first, each on all cores. A deep read-ahead gets the bytes of many steps at about the same
//! time; decoded all at once they would share the cores, and the step the consumer waits for
//! would be ready only with the last of them. Work outside a read-ahead (what the consumer asked
//! for now) does not wait for a turn.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// Where a file stands in the order its steps are needed: the files a dataset reads, in the order
/// it began them, then every file not begun (read ahead, or read on its own: they tie, and their
/// steps go by entry).
#[derive(Debug)]
pub struct FileOrder(AtomicU64);

impl Default for FileOrder {
    fn default() -> Self {
        FileOrder(AtomicU64::new(NOT_BEGUN))
    }
}

const NOT_BEGUN: u64 = u64::MAX;

impl FileOrder {
    /// The file's steps are needed now, after those of the files begun before it.
    pub fn begin(&self) {
        static BEGUN: AtomicU64 = AtomicU64::new(0);
        let place = BEGUN.fetch_add(1, Ordering::Relaxed);
        let _ = (self.0).compare_exchange(NOT_BEGUN, place, Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// A read-ahead step's place in the order of need: its file's, then its first entry.
#[derive(Clone, Debug)]
pub struct Need {
    pub file: Arc<FileOrder>,
    pub entry: u64,
}

tokio::task_local! {
    static NEED: Need;
}

/// Run `work` (a read-ahead step) with its place in the order of need.
pub fn in_order<F: Future>(need: Need, work: F) -> impl Future<Output = F::Output> {
    NEED.scope(need, work)
}

/// The place in the order of need of the step the current task works for, if any.
pub fn current_need() -> Option<Need> {
    NEED.try_with(Need::clone).ok()
}

/// `work` in the order of need `need`, when there is one (work spawned for a step keeps its
/// place).
pub async fn in_order_of<F: Future>(need: Option<Need>, work: F) -> F::Output {
    match need {
        Some(need) => in_order(need, work).await,
        None => work.await,
    }
}

/// Read-ahead steps doing CPU work at once. Each uses every core (its units decode in parallel),
/// but not to its end: its last units and its assembly leave cores idle, which a second step
/// fills. Two, whatever the cores: more would share them again. (Measured on 2 cores: one turn made
/// local reads of few branches a fifth slower; two were as fast as no turns.)
const TURNS: usize = 2;

struct Queue {
    busy: usize,
    /// Waiting steps by need (file, entry; then arrival), each with where to hand a turn.
    waiting: BTreeMap<(u64, u64, u64), oneshot::Sender<Turn>>,
    arrivals: u64,
}

static QUEUE: Mutex<Queue> = Mutex::new(Queue {
    busy: 0,
    waiting: BTreeMap::new(),
    arrivals: 0,
});

/// One of the [`TURNS`]; dropping it hands it to the waiting step needed first. A turn sent to a
/// step that stopped waiting is dropped with the channel, and so handed on too.
struct Turn;

impl Drop for Turn {
    fn drop(&mut self) {
        let mut queue = QUEUE.lock().unwrap();
        while let Some((_, to)) = queue.waiting.pop_first() {
            match to.send(Turn) {
                Ok(()) => return,
                // That step stopped waiting: this turn stays ours, and goes to the next.
                Err(turn) => std::mem::forget(turn),
            }
        }
        queue.busy -= 1;
    }
}

/// A turn for a step at `place` (its file's, then its entry) in the order of need.
async fn take_turn(place: (u64, u64)) -> Option<Turn> {
    let waiting = {
        let mut queue = QUEUE.lock().unwrap();
        if queue.busy < TURNS {
            queue.busy += 1;
            return Some(Turn);
        }
        let (to, from) = oneshot::channel();
        let arrival = queue.arrivals;
        queue.arrivals += 1;
        queue.waiting.insert((place.0, place.1, arrival), to);
        from
    };
    // (A waiting step's sender is only ever taken to hand it a turn.)
    waiting.await.ok()
}

/// Run CPU-heavy work from async code: in a read-ahead step, in its turn. On the multi-thread
/// runtime the worker hands its other tasks to the rest of the pool meanwhile.
pub async fn cpu_work<T>(work: impl FnOnce() -> T) -> T {
    // A file's place is read when its step starts waiting (a dataset may begin it meanwhile).
    let _turn = match NEED.try_with(|need| (need.file.0.load(Ordering::Relaxed), need.entry)) {
        Ok(place) => take_turn(place).await,
        Err(_) => None,
    };
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(work),
        _ => work(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{mpsc, Arc};
    use std::time::{Duration, Instant};

    /// A file begun by one test alone: its place is its own.
    fn file() -> Arc<FileOrder> {
        let file = Arc::new(FileOrder::default());
        file.begin();
        file
    }

    /// Steps of `file` that wait for a turn now.
    fn waiting_of(file: &FileOrder) -> usize {
        let place = file.0.load(Ordering::Relaxed);
        let queue = QUEUE.lock().unwrap();
        queue.waiting.keys().filter(|(f, _, _)| *f == place).count()
    }

    async fn until(done: impl Fn() -> bool) {
        let began = Instant::now();
        while !done() {
            assert!(began.elapsed() < Duration::from_secs(10), "waited 10 s");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// A step holding a turn, and how to tell it to let go.
    type Holder = (tokio::task::JoinHandle<()>, mpsc::Sender<()>);

    /// A step that holds its turn (once it has it) until told to let go.
    async fn holder(file: &Arc<FileOrder>) -> Holder {
        let (release, released) = mpsc::channel::<()>();
        let holding = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let has_turn = holding.clone();
        let need = Need {
            file: file.clone(),
            entry: 0,
        };
        let task = tokio::spawn(in_order(need, async move {
            cpu_work(move || {
                has_turn.store(true, Ordering::Release);
                released.recv().unwrap()
            })
            .await;
        }));
        until(|| holding.load(Ordering::Acquire)).await;
        (task, release)
    }

    /// The turns are the process's: tests that hold them all run one at a time.
    static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

    /// Steps holding every turn.
    async fn hold_every_turn() -> Vec<Holder> {
        let file = file();
        let mut held = Vec::new();
        for _ in 0..TURNS {
            held.push(holder(&file).await);
        }
        held
    }

    /// Let go of one held turn: the waiting steps then run one at a time.
    async fn let_go(held: &mut Vec<Holder>) {
        let (task, release) = held.pop().unwrap();
        release.send(()).unwrap();
        task.await.unwrap();
    }

    /// With every turn held, queue a step per need, in this order (each once `waiting` counts
    /// the one before), then let one turn go: the entries of the steps in the order they ran.
    async fn run_one_at_a_time(needs: Vec<Need>, waiting: impl Fn() -> usize) -> Vec<u64> {
        let mut held = hold_every_turn().await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut steps = Vec::new();
        for need in needs {
            let (order, entry) = (order.clone(), need.entry);
            steps.push(tokio::spawn(in_order(need, async move {
                cpu_work(|| order.lock().unwrap().push(entry)).await;
            })));
            until(|| waiting() == steps.len()).await;
        }
        let_go(&mut held).await;
        for step in steps {
            step.await.unwrap();
        }
        while !held.is_empty() {
            let_go(&mut held).await;
        }
        let order = order.lock().unwrap().clone();
        order
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn waiting_steps_get_their_turns_needed_first() {
        let _alone = ONE_AT_A_TIME.lock().await;
        let file = file();
        let needs = [500, 300, 400, 100].map(|entry| Need {
            file: file.clone(),
            entry,
        });
        let order = run_one_at_a_time(needs.to_vec(), || waiting_of(&file)).await;
        assert_eq!(order, vec![100, 300, 400, 500]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_step_that_stops_waiting_passes_its_turn_on() {
        let _alone = ONE_AT_A_TIME.lock().await;
        let file = file();
        let mut held = hold_every_turn().await;
        let need = |entry| Need {
            file: file.clone(),
            entry,
        };
        let stopped = tokio::spawn(in_order(need(1), async {
            cpu_work(|| ()).await;
        }));
        until(|| waiting_of(&file) == 1).await;
        stopped.abort();
        let _ = stopped.await;
        // The aborted step's place is still queued; the turn skips it.
        let next = tokio::spawn(in_order(need(2), async { cpu_work(|| 7).await }));
        until(|| waiting_of(&file) == 2).await;
        let_go(&mut held).await;
        let got = tokio::time::timeout(Duration::from_secs(10), next).await;
        assert_eq!(got.expect("the turn reached the next step").unwrap(), 7);
        while !held.is_empty() {
            let_go(&mut held).await;
        }
        // And work outside a read-ahead never waits for a turn.
        assert_eq!(cpu_work(|| 8).await, 8);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_file_read_ahead_waits_for_the_files_begun() {
        let _alone = ONE_AT_A_TIME.lock().await;
        let (begun, ahead) = (file(), Arc::new(FileOrder::default()));
        // Entries no other test uses: how this test finds its steps among the files not begun.
        let (early, late) = (u64::MAX - 2, u64::MAX - 1);
        let needs = vec![
            Need {
                file: ahead,
                entry: early,
            },
            Need {
                file: begun,
                entry: late,
            },
        ];
        let waiting = || {
            let queue = QUEUE.lock().unwrap();
            let mine = |(_, e, _): &&(u64, u64, u64)| *e == early || *e == late;
            queue.waiting.keys().filter(mine).count()
        };
        // the begun file's later entry first
        assert_eq!(run_one_at_a_time(needs, waiting).await, vec![late, early]);
    }
}
