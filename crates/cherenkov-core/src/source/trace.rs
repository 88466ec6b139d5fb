//! Recording what a source was asked: every request's ranges with the time it was sent and the
//! time its answer arrived. Plots ("read offset against time") and trace replay use it.

use super::{ByteRange, ByteSource, SharedSource, SourceCounters, SourceLimits};
use crate::error::Result;
use async_trait::async_trait;
use bytes::Bytes;
use std::sync::Mutex;
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

/// A source that records every request made through it.
#[derive(Debug)]
pub struct TracingSource {
    inner: SharedSource,
    began: Instant,
    events: Mutex<Vec<TraceEvent>>,
    next_request: std::sync::atomic::AtomicU64,
}

/// Ranges kept at most, so a long job's trace stays bounded (about 48 bytes each).
pub const MAX_TRACE_EVENTS: usize = 10_000_000;

impl TracingSource {
    pub fn new(inner: SharedSource) -> Self {
        Self {
            inner,
            began: Instant::now(),
            events: Mutex::new(Vec::new()),
            next_request: Default::default(),
        }
    }

    pub fn events(&self) -> Vec<TraceEvent> {
        self.events.lock().unwrap().clone()
    }
}

#[async_trait]
impl ByteSource for TracingSource {
    fn name(&self) -> &str {
        self.inner.name()
    }
    async fn size(&self) -> Result<u64> {
        self.inner.size().await
    }
    async fn read_ranges(&self, ranges: &[ByteRange]) -> Result<Vec<Bytes>> {
        let request = self
            .next_request
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let sent = self.began.elapsed();
        let out = self.inner.read_ranges(ranges).await;
        let answered = self.began.elapsed();
        let mut events = self.events.lock().unwrap();
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
    fn counters(&self) -> SourceCounters {
        self.inner.counters()
    }
    fn opening_reads(&self) -> Vec<(ByteRange, Bytes)> {
        self.inner.opening_reads()
    }
    fn version(&self) -> Option<String> {
        self.inner.version()
    }
    fn trace(&self) -> Option<Vec<TraceEvent>> {
        Some(self.events())
    }
    fn replicas(&self) -> Option<Vec<super::multi::ReplicaReport>> {
        self.inner.replicas()
    }
    fn stream_steps(&self) -> Vec<super::adaptive::StreamStep> {
        self.inner.stream_steps()
    }
    fn round_trip(&self) -> Option<std::time::Duration> {
        self.inner.round_trip()
    }
    async fn checksum(&self) -> Result<Option<String>> {
        self.inner.checksum().await
    }
}
