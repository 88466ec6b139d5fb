//! CPU work (decompression, assembly) of steps read ahead takes turns, the step needed first
//! first, each on all cores. A deep read-ahead gets the bytes of many steps at about the same
//! time; decoded all at once they would share the cores, and the step the consumer waits for
//! would be ready only with the last of them. Work outside a read-ahead (what the consumer asked
//! for now) does not wait for a turn.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use tokio::sync::oneshot;

/// Where a read-ahead step stands in the order of need: files in the order they were opened (a
/// dataset opens its next files ahead), then entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Need {
    pub file: u64,
    pub entry: u64,
}

tokio::task_local! {
    static NEED: Need;
}

/// Run `work` (a read-ahead step) with its place in the order of need.
pub fn in_order<F: Future>(need: Need, work: F) -> impl Future<Output = F::Output> {
    NEED.scope(need, work)
}

/// A number per opened file, increasing: its place in [`Need`].
pub fn next_file_number() -> u64 {
    static OPENED: AtomicU64 = AtomicU64::new(0);
    OPENED.fetch_add(1, Ordering::Relaxed)
}

/// Read-ahead steps doing CPU work at once. One: each step uses every core (its units decode in
/// parallel), so the first one needed is ready soonest.
const TURNS: usize = 1;

struct Queue {
    busy: usize,
    /// Waiting steps by need (and arrival, for equal needs), each with where to hand a turn.
    waiting: BTreeMap<(Need, u64), oneshot::Sender<Turn>>,
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

async fn take_turn(need: Need) -> Option<Turn> {
    let waiting = {
        let mut queue = QUEUE.lock().unwrap();
        if queue.busy < TURNS {
            queue.busy += 1;
            return Some(Turn);
        }
        let (to, from) = oneshot::channel();
        let arrival = queue.arrivals;
        queue.arrivals += 1;
        queue.waiting.insert((need, arrival), to);
        from
    };
    // (A waiting step's sender is only ever taken to hand it a turn.)
    waiting.await.ok()
}

/// Run CPU-heavy work from async code: in a read-ahead step, in its turn. On the multi-thread
/// runtime the worker hands its other tasks to the rest of the pool meanwhile.
pub async fn cpu_work<T>(work: impl FnOnce() -> T) -> T {
    let _turn = match NEED.try_with(|need| *need) {
        Ok(need) => take_turn(need).await,
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

    /// Steps of one file (a number no other test uses) that wait for a turn now.
    fn waiting_of(file: u64) -> usize {
        let queue = QUEUE.lock().unwrap();
        queue.waiting.keys().filter(|(n, _)| n.file == file).count()
    }

    async fn until(done: impl Fn() -> bool) {
        let began = Instant::now();
        while !done() {
            assert!(began.elapsed() < Duration::from_secs(10), "waited 10 s");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// A step that holds its turn (once it has it) until told to let go.
    async fn holder(file: u64) -> (tokio::task::JoinHandle<()>, mpsc::Sender<()>) {
        let (release, released) = mpsc::channel::<()>();
        let holding = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let has_turn = holding.clone();
        let need = Need { file, entry: 0 };
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

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn waiting_steps_get_their_turns_needed_first() {
        let file = next_file_number();
        let (first, release) = holder(file).await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut steps = Vec::new();
        for entry in [500, 300, 400, 100] {
            let order = order.clone();
            let need = Need { file, entry };
            steps.push(tokio::spawn(in_order(need, async move {
                cpu_work(|| order.lock().unwrap().push(entry)).await;
            })));
            // In the order they arrive, each after the last one waits.
            until(|| waiting_of(file) == steps.len()).await;
        }
        release.send(()).unwrap();
        first.await.unwrap();
        for step in steps {
            step.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![100, 300, 400, 500]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_step_that_stops_waiting_passes_its_turn_on() {
        let file = next_file_number();
        let (first, release) = holder(file).await;
        let stopped = tokio::spawn(in_order(Need { file, entry: 1 }, async {
            cpu_work(|| ()).await;
        }));
        until(|| waiting_of(file) == 1).await;
        stopped.abort();
        let _ = stopped.await;
        // The aborted step's place is still queued; the turn skips it.
        let next = tokio::spawn(in_order(Need { file, entry: 2 }, async {
            cpu_work(|| 7).await
        }));
        until(|| waiting_of(file) == 2).await;
        release.send(()).unwrap();
        first.await.unwrap();
        let got = tokio::time::timeout(Duration::from_secs(10), next).await;
        assert_eq!(got.expect("the turn reached the next step").unwrap(), 7);
        // And work outside a read-ahead never waits for a turn.
        assert_eq!(cpu_work(|| 8).await, 8);
    }
}
