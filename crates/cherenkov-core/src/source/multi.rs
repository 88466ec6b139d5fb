//! Several replicas of one file read as one source (the design of CMSSW's XrdAdaptor, measured):
//!
//! - each replica has a *quality*: recent-weighted estimates of its latency and throughput from
//!   real requests; its expected time for a request of `b` bytes is `latency + b / throughput`;
//! - up to `max_active` replicas (default 2) share each vectored request, split into contiguous
//!   parts in proportion to their speed, so every server sees sequential reads; the best replicas
//!   are chosen per request, so a better inactive one replaces a worse active one;
//! - inactive replicas are probed now and then with a copy of one small range (bounded by
//!   `probe_fraction` of the bytes read), so their quality stays known;
//! - a part slower than `hedge_factor` times its expected time is also sent to another replica,
//!   and the first answer wins;
//! - a failed part goes to another replica at once; the failing replica is disabled for
//!   `disable_for` (doubling on repeated failures);
//! - when every replica has failed a part, a [`ReplicaFinder`] (if any) is asked for one more (an
//!   XRootD redirector, asked again with `tried=` naming the servers in use), at most `find_more`
//!   times; the read fails only when no replica can serve it, with an error that lists what each
//!   one answered.

use super::{ByteRange, ByteSource, SharedSource, SourceCounters, SourceLimits};
use crate::error::{Error, Result};
use async_trait::async_trait;
use bytes::Bytes;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MultiOptions {
    pub max_active: usize,
    pub hedge_factor: f64,
    pub probe_fraction: f64,
    pub disable_for: Duration,
    /// Replicas a [`ReplicaFinder`] may add over the source's life.
    pub find_more: usize,
}

impl Default for MultiOptions {
    fn default() -> Self {
        Self {
            max_active: 2,
            hedge_factor: 4.0,
            probe_fraction: 0.02,
            disable_for: Duration::from_secs(10),
            find_more: 2,
        }
    }
}

/// Weight of the newest sample in the recent-weighted averages.
const EWMA_WEIGHT: f64 = 0.3;
/// Before any sample: assume a fast, nearby server (so new replicas get tried).
const PRIOR_LATENCY: f64 = 0.01;
const PRIOR_THROUGHPUT: f64 = 100e6;
/// No hedge before this long: very fast requests vary too much to judge.
const MIN_HEDGE_DELAY: Duration = Duration::from_millis(50);

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quality {
    /// Seconds.
    pub latency: f64,
    /// Bytes per second.
    pub throughput: f64,
    pub samples: u64,
}

impl Quality {
    fn expected(&self, bytes: u64) -> f64 {
        self.latency + bytes as f64 / self.throughput
    }

    /// Split one observation (`bytes` in `seconds`) between latency and throughput: small requests
    /// measure latency, large ones throughput (after taking the known latency off).
    fn update(&mut self, bytes: u64, seconds: f64) {
        let w = if self.samples == 0 { 1.0 } else { EWMA_WEIGHT };
        let transfer = bytes as f64 / self.throughput;
        if transfer < self.latency || bytes < 64 * 1024 {
            self.latency = (1.0 - w) * self.latency + w * (seconds - transfer).max(1e-6);
        } else {
            let rate = bytes as f64 / (seconds - self.latency).max(seconds * 0.1).max(1e-6);
            self.throughput = (1.0 - w) * self.throughput + w * rate;
        }
        self.samples += 1;
    }
}

/// Finds one more replica of the file when every known one has failed.
#[async_trait]
pub trait ReplicaFinder: Send + Sync + std::fmt::Debug {
    /// A source on a server none of the replicas so far uses (the finder keeps track of them).
    async fn find(&self) -> Result<SharedSource>;
}

/// Per-replica counters and state, for statistics and plots.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplicaReport {
    pub name: String,
    pub requests: u64,
    pub bytes: u64,
    pub errors: u64,
    pub hedges_won: u64,
    pub probes: u64,
    pub quality: Quality,
    pub disabled: bool,
    pub last_error: Option<String>,
}

#[derive(Debug)]
struct Replica {
    source: SharedSource,
    state: Mutex<ReplicaState>,
}

impl Replica {
    fn new(source: SharedSource) -> Replica {
        let prior = Quality {
            latency: PRIOR_LATENCY,
            throughput: PRIOR_THROUGHPUT,
            samples: 0,
        };
        Replica {
            state: Mutex::new(ReplicaState {
                quality: prior,
                disabled_until: None,
                failures_in_row: 0,
                report: ReplicaReport {
                    name: source.name().to_string(),
                    requests: 0,
                    bytes: 0,
                    errors: 0,
                    hedges_won: 0,
                    probes: 0,
                    quality: prior,
                    disabled: false,
                    last_error: None,
                },
            }),
            source,
        }
    }
}

#[derive(Debug)]
struct ReplicaState {
    quality: Quality,
    disabled_until: Option<Instant>,
    failures_in_row: u32,
    report: ReplicaReport,
}

#[derive(Debug)]
pub struct MultiSource {
    name: String,
    size: u64,
    /// Only ever appended to (by the finder): an index names the same replica for good.
    replicas: RwLock<Vec<Arc<Replica>>>,
    options: MultiOptions,
    finder: Option<Arc<dyn ReplicaFinder>>,
    /// Held while the finder runs: parts that fail together wait for one new replica.
    finding: tokio::sync::Mutex<()>,
    finds: AtomicUsize,
    requests: AtomicU64,
    ranges: AtomicU64,
    bytes: AtomicU64,
    probe_bytes: AtomicU64,
}

impl MultiSource {
    /// Combine sources that must be replicas of one file: their sizes must agree.
    pub async fn new(sources: Vec<SharedSource>, options: MultiOptions) -> Result<MultiSource> {
        if sources.is_empty() {
            return Err(Error::InvalidArgument(
                "a replica set needs at least one source".into(),
            ));
        }
        let name = sources
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .join(" | ");
        let mut sizes = Vec::new();
        for s in &sources {
            sizes.push(s.size().await?);
        }
        if sizes.iter().any(|&s| s != sizes[0]) {
            let listing = sources
                .iter()
                .zip(&sizes)
                .map(|(s, n)| format!("{} has {n} bytes", s.name()))
                .collect::<Vec<_>>()
                .join("; ");
            return Err(Error::io(
                &name,
                format!("replicas differ in size: {listing}"),
            ));
        }
        let replicas = sources
            .into_iter()
            .map(|source| Arc::new(Replica::new(source)))
            .collect();
        Ok(MultiSource {
            name,
            size: sizes[0],
            replicas: RwLock::new(replicas),
            options,
            finder: None,
            finding: tokio::sync::Mutex::new(()),
            finds: AtomicUsize::new(0),
            requests: AtomicU64::new(0),
            ranges: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            probe_bytes: AtomicU64::new(0),
        })
    }

    /// Ask `finder` for one more replica when every known one has failed a read.
    pub fn with_finder(mut self, finder: Arc<dyn ReplicaFinder>) -> Self {
        self.finder = Some(finder);
        self
    }

    fn replica(&self, i: usize) -> Arc<Replica> {
        self.replicas.read().unwrap()[i].clone()
    }

    fn all(&self) -> Vec<Arc<Replica>> {
        self.replicas.read().unwrap().clone()
    }

    pub fn reports(&self) -> Vec<ReplicaReport> {
        self.all()
            .iter()
            .map(|r| {
                let st = r.state.lock().unwrap();
                ReplicaReport {
                    quality: st.quality,
                    disabled: st.disabled_until.is_some_and(|t| t > Instant::now()),
                    ..st.report.clone()
                }
            })
            .collect()
    }

    fn usable(&self, i: usize) -> bool {
        self.replica(i)
            .state
            .lock()
            .unwrap()
            .disabled_until
            .is_none_or(|t| t <= Instant::now())
    }

    fn quality(&self, i: usize) -> Quality {
        self.replica(i).state.lock().unwrap().quality
    }

    /// Usable replicas, fastest first for a request of `bytes`.
    fn ranked(&self, bytes: u64) -> Vec<usize> {
        let count = self.replicas.read().unwrap().len();
        let mut usable: Vec<usize> = (0..count).filter(|&i| self.usable(i)).collect();
        usable.sort_by(|&a, &b| {
            self.quality(a)
                .expected(bytes)
                .total_cmp(&self.quality(b).expected(bytes))
        });
        usable
    }

    fn record_success(&self, i: usize, bytes: u64, seconds: f64, probe: bool) {
        let replica = self.replica(i);
        let mut st = replica.state.lock().unwrap();
        st.quality.update(bytes, seconds);
        st.failures_in_row = 0;
        st.disabled_until = None;
        st.report.requests += 1;
        st.report.bytes += bytes;
        st.report.probes += probe as u64;
    }

    fn record_failure(&self, i: usize, error: &Error) {
        let replica = self.replica(i);
        let mut st = replica.state.lock().unwrap();
        st.failures_in_row += 1;
        let backoff = self.options.disable_for * 2u32.saturating_pow(st.failures_in_row.min(6) - 1);
        st.disabled_until = Some(Instant::now() + backoff);
        st.report.errors += 1;
        st.report.last_error = Some(error.to_string());
    }

    /// Read `ranges` from replica `i`, timing it for the quality estimate.
    async fn read_from(&self, i: usize, ranges: &[ByteRange], probe: bool) -> Result<Vec<Bytes>> {
        let bytes: u64 = ranges.iter().map(|r| r.len).sum();
        let t = Instant::now();
        let source = self.replica(i).source.clone();
        match source.read_ranges(ranges).await {
            Ok(out) => {
                self.record_success(i, bytes, t.elapsed().as_secs_f64(), probe);
                Ok(out)
            }
            Err(e) => {
                self.record_failure(i, &e);
                Err(e)
            }
        }
    }

    /// One part on the best replica, hedged on the next if it is slow, failing over on errors.
    async fn read_part(&self, preferred: usize, ranges: &[ByteRange]) -> Result<Vec<Bytes>> {
        let bytes: u64 = ranges.iter().map(|r| r.len).sum();
        let mut tried: Vec<(usize, Error)> = Vec::new();
        let mut finder_error = None;
        let mut next = Some(preferred);
        while let Some(i) = next {
            let expected = Duration::from_secs_f64(
                self.quality(i).expected(bytes) * self.options.hedge_factor,
            )
            .max(MIN_HEDGE_DELAY);
            let backup = self
                .ranked(bytes)
                .into_iter()
                .find(|&j| j != i && !tried.iter().any(|(t, _)| *t == j));
            let first = self.read_from(i, ranges, false);
            let outcome = match backup {
                Some(j) => {
                    tokio::pin!(first);
                    tokio::select! {
                        r = &mut first => r.map_err(|e| (i, e)),
                        _ = tokio::time::sleep(expected) => {
                            // Slow: what it has taken so far is a lower bound on its time, and
                            // must count even if its answer is then abandoned.
                            self.replica(i).state.lock().unwrap().quality.update(bytes, expected.as_secs_f64());
                            // Race a copy on the backup; the first good answer wins.
                            let second = self.read_from(j, ranges, false);
                            tokio::pin!(second);
                            tokio::select! {
                                r = &mut first => match r { Ok(v) => Ok(v), Err(e) => { tried.push((i, e)); second.await.map(|v| { self.replica(j).state.lock().unwrap().report.hedges_won += 1; v }).map_err(|e| (j, e)) } },
                                r = &mut second => match r { Ok(v) => { self.replica(j).state.lock().unwrap().report.hedges_won += 1; Ok(v) }, Err(e) => { tried.push((j, e)); first.await.map_err(|e| (i, e)) } },
                            }
                        }
                    }
                }
                None => first.await.map_err(|e| (i, e)),
            };
            match outcome {
                Ok(v) => return Ok(v),
                Err((who, e)) => tried.push((who, e)),
            }
            next = self
                .ranked(bytes)
                .into_iter()
                .find(|&j| !tried.iter().any(|(t, _)| *t == j));
            if next.is_none() {
                let tried: Vec<usize> = tried.iter().map(|(t, _)| *t).collect();
                match self.find_replica(&tried).await {
                    Ok(found) => next = found,
                    Err(e) => finder_error = Some(e),
                }
            }
        }
        let mut listing = tried
            .iter()
            .map(|(i, e)| format!("{}: {e}", self.replica(*i).source.name()))
            .collect::<Vec<_>>();
        listing.extend(finder_error.map(|e| format!("finding another replica: {e}")));
        let listing = listing.join("; ");
        Err(Error::io(
            &self.name,
            format!(
                "no replica could serve {} ranges ({bytes} bytes): {listing}",
                ranges.len()
            ),
        ))
    }

    /// A replica not in `tried`: one another read found meanwhile, or a new one from the finder
    /// (within `find_more`). `None` when there is no finder or it may find no more.
    async fn find_replica(&self, tried: &[usize]) -> Result<Option<usize>> {
        let Some(finder) = &self.finder else {
            return Ok(None);
        };
        let _one_at_a_time = self.finding.lock().await;
        let count = self.replicas.read().unwrap().len();
        if let Some(i) = (0..count).find(|i| !tried.contains(i) && self.usable(*i)) {
            return Ok(Some(i));
        }
        if self.finds.load(Relaxed) >= self.options.find_more {
            return Ok(None);
        }
        self.finds.fetch_add(1, Relaxed);
        let source = finder.find().await?;
        let size = source.size().await?;
        if size != self.size {
            return Err(Error::io(
                source.name(),
                format!(
                    "the replica found has {size} bytes, the others {}",
                    self.size
                ),
            ));
        }
        let mut replicas = self.replicas.write().unwrap();
        replicas.push(Arc::new(Replica::new(source)));
        Ok(Some(replicas.len() - 1))
    }

    /// Split ranges (in offset order) into contiguous parts sized by each replica's speed.
    fn split(&self, ranges: &[ByteRange], actives: &[usize]) -> Vec<(usize, Vec<usize>)> {
        let total: u64 = ranges.iter().map(|r| r.len).sum();
        let speeds: Vec<f64> = actives
            .iter()
            .map(|&i| 1.0 / self.quality(i).expected(total / actives.len() as u64))
            .collect();
        let sum: f64 = speeds.iter().sum();
        let mut order: Vec<usize> = (0..ranges.len()).collect();
        order.sort_by_key(|&k| ranges[k].offset);
        let mut parts = Vec::new();
        let mut at = 0;
        for (n, (&replica, speed)) in actives.iter().zip(&speeds).enumerate() {
            let share = if n + 1 == actives.len() {
                u64::MAX
            } else {
                (total as f64 * speed / sum) as u64
            };
            let mut taken = 0u64;
            let mut part = Vec::new();
            while at < order.len() && (taken < share || part.is_empty() && n + 1 == actives.len()) {
                taken += ranges[order[at]].len;
                part.push(order[at]);
                at += 1;
            }
            if !part.is_empty() {
                parts.push((replica, part));
            }
        }
        parts
    }
}

#[async_trait]
impl ByteSource for MultiSource {
    fn name(&self) -> &str {
        &self.name
    }

    async fn size(&self) -> Result<u64> {
        Ok(self.size)
    }

    async fn read_ranges(&self, ranges: &[ByteRange]) -> Result<Vec<Bytes>> {
        self.requests.fetch_add(1, Relaxed);
        self.ranges.fetch_add(ranges.len() as u64, Relaxed);
        let total: u64 = ranges.iter().map(|r| r.len).sum();
        let ranked = self.ranked(total);
        let ranked = if ranked.is_empty() {
            (0..self.replicas.read().unwrap().len()).collect()
        } else {
            ranked
        };
        let actives: Vec<usize> = ranked
            .iter()
            .copied()
            .take(self.options.max_active.max(1).min(ranges.len().max(1)))
            .collect();
        let parts = self.split(ranges, &actives);
        let reads = parts.iter().map(|(replica, idx)| {
            let part: Vec<ByteRange> = idx.iter().map(|&k| ranges[k]).collect();
            async move { self.read_part(*replica, &part).await }
        });
        let probe = self.maybe_probe(ranges, &ranked, &actives);
        let (results, _) = tokio::join!(futures_util::future::try_join_all(reads), probe);
        let mut out: Vec<Option<Bytes>> = vec![None; ranges.len()];
        for ((_, idx), buffers) in parts.iter().zip(results?) {
            for (&k, b) in idx.iter().zip(buffers) {
                out[k] = Some(b);
            }
        }
        self.bytes.fetch_add(total, Relaxed);
        Ok(out
            .into_iter()
            .map(|b| b.expect("every range was in one part"))
            .collect())
    }

    fn limits(&self) -> SourceLimits {
        // The tightest of the replicas: a part may go to any of them.
        self.all()
            .iter()
            .map(|r| r.source.limits())
            .fold(SourceLimits::UNLIMITED, |a, b| SourceLimits {
                max_ranges_per_request: a.max_ranges_per_request.min(b.max_ranges_per_request),
                max_range_len: a.max_range_len.min(b.max_range_len),
                max_request_bytes: a.max_request_bytes.min(b.max_request_bytes),
            })
    }

    fn counters(&self) -> SourceCounters {
        let requests = self.requests.load(Relaxed);
        SourceCounters {
            requests,
            round_trips: requests,
            ranges: self.ranges.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
        }
    }

    fn replicas(&self) -> Option<Vec<ReplicaReport>> {
        Some(self.reports())
    }
}

impl MultiSource {
    /// Copy the smallest range of this request to one inactive replica, within the probe budget.
    async fn maybe_probe(&self, ranges: &[ByteRange], ranked: &[usize], actives: &[usize]) {
        let Some(&inactive) = ranked.iter().find(|i| !actives.contains(i)) else {
            return;
        };
        let Some(small) = ranges.iter().min_by_key(|r| r.len) else {
            return;
        };
        let budget = (self.bytes.load(Relaxed) as f64 * self.options.probe_fraction) as u64;
        let spent = self.probe_bytes.load(Relaxed);
        let first_probe = self.quality(inactive).samples == 0;
        if !first_probe && spent + small.len > budget {
            return;
        }
        self.probe_bytes.fetch_add(small.len, Relaxed);
        let _ = self
            .read_from(inactive, std::slice::from_ref(small), true)
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quality_learns_latency_from_small_requests_and_throughput_from_large_ones() {
        let mut q = Quality {
            latency: PRIOR_LATENCY,
            throughput: PRIOR_THROUGHPUT,
            samples: 0,
        };
        q.update(1000, 0.1);
        assert!((q.latency - 0.1).abs() < 0.01, "{q:?}");
        for _ in 0..20 {
            q.update(50_000_000, 0.1 + 1.0); // 50 MB/s after 100 ms of latency
        }
        assert!((q.throughput - 50e6).abs() / 50e6 < 0.1, "{q:?}");
        assert!(q.expected(1000) < q.expected(10_000_000));
    }
}
