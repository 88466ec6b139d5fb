//! The engine: opens files through a byte source, fetches the baskets a read needs, and
//! decompresses and interprets them in parallel; and writes files (`writer/`) through a sink.

pub mod cpu_turns;
pub mod file;
pub mod lazy;
pub mod ntuple;
pub mod options;
pub mod output;
pub mod prefetch;
pub mod raw;
pub mod recycle;
pub mod speculation;
pub mod stats;
pub mod table;
pub mod tree;
pub mod writer;

use std::sync::OnceLock;

/// The runtime that drives byte sources. Decompression runs on rayon's pool, not here.
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("cherenkov-io")
            .enable_all()
            .build()
            .expect("the I/O runtime starts")
    })
}

/// A spawned task aborted when its handle is dropped: work given up (a read's parts, a
/// read-ahead's steps) stops instead of running on. Awaiting it awaits the task.
pub(crate) struct AbortOnDrop<T>(pub tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<T> std::future::Future for AbortOnDrop<T> {
    type Output = std::result::Result<T, tokio::task::JoinError>;
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(cx)
    }
}
