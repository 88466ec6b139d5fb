//! Recording what a source was asked: every request's ranges with the time it was sent and the
//! time its answer arrived. Plots ("read offset against time") and trace replay use it.

use super::{ByteRange, ByteSource, SharedSource, SourceLimits, SourceReport};
use crate::error::Result;
use async_trait::async_trait;
use bytes::Bytes;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One range of one request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TraceEvent {
    /// Numbered in the order requests were sent.
    pub request: u64,
    pub offset: u64,
    pub len: u64,
    /// Since the trace began.
    pub sent: Duration,
    pub answered: Duration,
    pub ok: bool,
}

/// The requests recorded for one file, shared by its tracing source and whoever reads them.
#[derive(Debug)]
pub struct TraceLog {
    began: Instant,
    events: Mutex<Vec<TraceEvent>>,
    next_request: AtomicU64,
}

/// Ranges kept at most, so a long job's trace stays bounded (about 48 bytes each).
pub const MAX_TRACE_EVENTS: usize = 10_000_000;

impl TraceLog {
    pub fn events(&self) -> Vec<TraceEvent> {
        self.events.lock().unwrap().clone()
    }
}

/// A source that records every request made through it in its [`TraceLog`].
#[derive(Debug)]
pub struct TracingSource {
    inner: SharedSource,
    log: Arc<TraceLog>,
}

impl TracingSource {
    /// Trace `inner`; the log is what the trace's readers keep.
    pub fn new(inner: SharedSource) -> (Self, Arc<TraceLog>) {
        let log = Arc::new(TraceLog {
            began: Instant::now(),
            events: Mutex::new(Vec::new()),
            next_request: AtomicU64::new(0),
        });
        let log_ = log.clone();
        (Self { inner, log }, log_)
    }
}

#[async_trait]
impl ByteSource for TracingSource {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    async fn read_ranges(&self, ranges: &[ByteRange]) -> Result<Vec<Bytes>> {
        let log = &self.log;
        let request = log.next_request.fetch_add(1, Ordering::Relaxed);
        let sent = log.began.elapsed();
        let out = self.inner.read_ranges(ranges).await;
        let answered = log.began.elapsed();
        let mut events = log.events.lock().unwrap();
        let room = MAX_TRACE_EVENTS.saturating_sub(events.len());
        events.extend(ranges.iter().take(room).map(|r| TraceEvent {
            request,
            offset: r.offset,
            len: r.len,
            sent,
            answered,
            ok: out.is_ok(),
        }));
        out
    }
    fn limits(&self) -> SourceLimits {
        self.inner.limits()
    }
    fn report(&self) -> SourceReport {
        self.inner.report()
    }
    async fn checksum(&self) -> Result<Option<String>> {
        self.inner.checksum().await
    }
}
