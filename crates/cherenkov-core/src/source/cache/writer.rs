//! Entries are written by one background thread per process, off the read path: a read hands
//! the bytes it fetched (shared, not copied) to the writer and goes on. The queue is bounded in
//! bytes; when the disk cannot keep up, a request is not cached rather than the read slowed.
//! Closing a file does not wait for its entries (a read of them meanwhile waits on their locks);
//! `flush` waits for them all, at the process's exit.

use super::super::ByteRange;
use super::store::{self, Stored};
use bytes::Bytes;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Duration;

/// Bytes waiting to be written, at most.
const MAX_QUEUED_BYTES: u64 = 256 << 20;

pub type Written = std::io::Result<(String, Vec<Stored>)>;

/// One fetched request to write as an entry; `done` runs after the entry is in place (or the
/// write failed), on the writer's thread.
pub struct Job {
    pub dir: PathBuf,
    /// Drop the entry from the page cache once written (see `source::direct`).
    pub direct_io: bool,
    pub ranges: Vec<ByteRange>,
    pub bytes: Vec<Bytes>,
    pub done: Box<dyn FnOnce(Written) + Send>,
}

static QUEUED_BYTES: AtomicU64 = AtomicU64::new(0);

fn queue() -> &'static Mutex<Option<Sender<Job>>> {
    static QUEUE: OnceLock<Mutex<Option<Sender<Job>>>> = OnceLock::new();
    QUEUE.get_or_init(|| {
        let (send, receive) = mpsc::channel::<Job>();
        let started = std::thread::Builder::new()
            .name("cherenkov-cache-writer".into())
            .spawn(move || {
                for job in receive {
                    let size: u64 = job.ranges.iter().map(|r| r.len).sum();
                    let written = store::write(&job.dir, &job.ranges, &job.bytes, job.direct_io);
                    drop(job.bytes);
                    QUEUED_BYTES.fetch_sub(size, Ordering::Relaxed);
                    (job.done)(written);
                    PENDING.done();
                }
            });
        Mutex::new(started.ok().map(|_| send))
    })
}

/// Queue `job`; gives it back when the queue is full (or there is no writer).
pub fn submit(job: Job) -> Result<(), Job> {
    let size: u64 = job.ranges.iter().map(|r| r.len).sum();
    if QUEUED_BYTES.fetch_add(size, Ordering::Relaxed) + size > MAX_QUEUED_BYTES {
        QUEUED_BYTES.fetch_sub(size, Ordering::Relaxed);
        return Err(job);
    }
    let queue = queue().lock().unwrap_or_else(|e| e.into_inner());
    PENDING.add();
    let sent = match &*queue {
        Some(send) => send.send(job).map_err(|e| e.0),
        None => Err(job),
    };
    if sent.is_err() {
        QUEUED_BYTES.fetch_sub(size, Ordering::Relaxed);
        PENDING.done();
    }
    sent
}

static PENDING: Pending = Pending {
    count: Mutex::new(0),
    changed: Condvar::new(),
};

/// Wait until every queued entry is written, or `limit` has passed.
pub fn flush(limit: Duration) {
    PENDING.wait(limit);
}

/// How many jobs are queued or being written.
struct Pending {
    count: Mutex<usize>,
    changed: Condvar,
}

impl Pending {
    fn add(&self) {
        *self.count.lock().unwrap_or_else(|e| e.into_inner()) += 1;
    }
    fn done(&self) {
        *self.count.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
        self.changed.notify_all();
    }
    /// Wait until none is left, or `limit` has passed.
    fn wait(&self, limit: Duration) {
        let count = self.count.lock().unwrap_or_else(|e| e.into_inner());
        let _ = self.changed.wait_timeout_while(count, limit, |n| *n > 0);
    }
}
