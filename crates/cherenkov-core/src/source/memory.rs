//! A file held in memory, answering after a delay and failing when told to: the engine's planning,
//! prefetching, caches and replica scheduling are tested with it in milliseconds, without servers.
//! It records every request, and the most requests it ever had in flight at once.

use super::{ByteRange, ByteSource, SourceCounters, SourceLimits, SourceReport};
use crate::error::{Error, Result};
use async_trait::async_trait;
use bytes::Bytes;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;
use std::time::Duration;

#[derive(Debug)]
pub struct MemorySource {
    name: String,
    data: Bytes,
    /// How long each request takes.
    delay: Mutex<Duration>,
    /// Requests still to fail before the source answers again.
    failures_left: AtomicU64,
    /// Every request, in the order they were sent.
    log: Mutex<Vec<Vec<ByteRange>>>,
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
    bytes: AtomicU64,
}

impl MemorySource {
    pub fn new(name: &str, data: impl Into<Bytes>) -> MemorySource {
        MemorySource {
            name: name.to_string(),
            data: data.into(),
            delay: Mutex::new(Duration::ZERO),
            failures_left: AtomicU64::new(0),
            log: Mutex::new(Vec::new()),
            in_flight: AtomicUsize::new(0),
            most_in_flight: AtomicUsize::new(0),
            bytes: AtomicU64::new(0),
        }
    }

    /// Answer every request after `delay` from now on.
    pub fn set_delay(&self, delay: Duration) {
        *self.delay.lock().unwrap() = delay;
    }

    /// Fail the next `n` requests (after their delay), as a lost connection would.
    pub fn fail_next(&self, n: u64) {
        self.failures_left.store(n, SeqCst);
    }

    /// The requests so far, each the list of ranges it asked for.
    pub fn requests(&self) -> Vec<Vec<ByteRange>> {
        self.log.lock().unwrap().clone()
    }

    /// The most requests that were ever in flight at once.
    pub fn most_in_flight(&self) -> usize {
        self.most_in_flight.load(SeqCst)
    }
}

/// Counts a request in flight until dropped, even when the request is cancelled.
struct Flight<'a>(&'a AtomicUsize);

impl Drop for Flight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, SeqCst);
    }
}

#[async_trait]
impl ByteSource for MemorySource {
    fn name(&self) -> &str {
        &self.name
    }

    fn size(&self) -> u64 {
        self.data.len() as u64
    }

    async fn read_ranges(&self, ranges: &[ByteRange]) -> Result<Vec<Bytes>> {
        self.log.lock().unwrap().push(ranges.to_vec());
        let now = self.in_flight.fetch_add(1, SeqCst) + 1;
        self.most_in_flight.fetch_max(now, SeqCst);
        let _flight = Flight(&self.in_flight);
        let delay = *self.delay.lock().unwrap();
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let failing = self
            .failures_left
            .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if failing {
            return Err(Error::io(&self.name, "the connection was lost (injected)"));
        }
        let size = self.data.len() as u64;
        ranges
            .iter()
            .map(|r| match r.offset.checked_add(r.len) {
                Some(end) if end <= size => {
                    self.bytes.fetch_add(r.len, SeqCst);
                    Ok(self.data.slice(r.offset as usize..end as usize))
                }
                _ => Err(Error::io(
                    &self.name,
                    format!(
                        "range {}..+{} is past the end ({size} bytes)",
                        r.offset, r.len
                    ),
                )),
            })
            .collect()
    }

    fn limits(&self) -> SourceLimits {
        SourceLimits::UNLIMITED
    }

    fn report(&self) -> SourceReport {
        let log = self.log.lock().unwrap();
        let requests = log.len() as u64;
        SourceReport {
            counters: SourceCounters {
                requests,
                round_trips: requests,
                ranges: log.iter().map(|r| r.len() as u64).sum(),
                bytes: self.bytes.load(SeqCst),
                ..SourceCounters::default()
            },
            ..SourceReport::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn answers_records_and_fails_when_told() {
        let source = MemorySource::new("mem", (0u8..100).collect::<Vec<_>>());
        let got = source
            .read_ranges(&[ByteRange::new(10, 3), ByteRange::new(98, 2)])
            .await
            .unwrap();
        assert_eq!(
            (&got[0][..], &got[1][..]),
            (&[10, 11, 12][..], &[98, 99][..])
        );
        assert!(source.read_ranges(&[ByteRange::new(99, 2)]).await.is_err());
        source.fail_next(1);
        assert!(source.read_ranges(&[ByteRange::new(0, 1)]).await.is_err());
        assert!(source.read_ranges(&[ByteRange::new(0, 1)]).await.is_ok());
        assert_eq!(source.requests().len(), 4);
        assert_eq!(source.report().counters.bytes, 6);
    }
}
