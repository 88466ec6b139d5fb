//! Several replicas of one file read as one source (the design of CMSSW's XrdAdaptor, measured):
//!
//! - each replica has a *quality*: recent-weighted estimates of its latency and throughput from
//!   real requests; its expected time for a request of `b` bytes is `latency + b / throughput`;
//! - up to `max_active` replicas (default 2) share each vectored request, split into contiguous
//!   parts sized so that they finish together, so every server sees sequential reads (a replica
//!   whose latency alone exceeds that time gets no part); the best replicas are chosen per
//!   request, so a better inactive one replaces a worse active one;
//! - inactive replicas are probed now and then with a copy of one small range (bounded by
//!   `probe_fraction` of the bytes read), so their quality stays known;
//! - the estimates a split is made with may be far off (a replica not measured yet, a server
//!   slowing down), so each part is cut into pieces, read two at a time: a replica done
//!   with its own pieces takes the unstarted ones of the others from their ends, then copies a
//!   piece still in flight elsewhere once it has taken twice what the idle replica needs for it
//!   (the first answer wins, and the time the abandoned one took counts against its replica);
//! - a piece slower than `hedge_factor` times its expected time is also sent to another replica
//!   at once, and the first answer wins;
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
    /// Ask every replica's server for the file's checksum (XRootD `kXR_query`), and take a
    /// replica only if it agrees with the others (a replica set is always checked for equal
    /// sizes). A server that cannot tell fails the open: nothing would be verified.
    pub verify_checksums: bool,
}

impl Default for MultiOptions {
    fn default() -> Self {
        Self {
            max_active: 2,
            hedge_factor: 4.0,
            probe_fraction: 0.02,
            disable_for: Duration::from_secs(10),
            find_more: 2,
            verify_checksums: false,
        }
    }
}

impl MultiOptions {
    /// The defaults, with checksums verified or not.
    pub fn verifying(verify_checksums: bool) -> Self {
        Self {
            verify_checksums,
            ..Self::default()
        }
    }
}

/// Weight of the newest sample in the recent-weighted averages.
const EWMA_WEIGHT: f64 = 0.3;
/// Before any sample: assume a fast, nearby server (so new replicas get tried).
const PRIOR_LATENCY: f64 = 0.01;
const PRIOR_THROUGHPUT: f64 = 100e6;
/// Requests smaller than this measure only latency.
const LATENCY_SAMPLE: u64 = 64 * 1024;
/// The smallest request that measures a replica's throughput for the first time: smaller ones
/// mostly measure the wait.
const FIRST_THROUGHPUT_SAMPLE: u64 = 1 << 20;
/// No hedge before this long: very fast requests vary too much to judge.
const MIN_HEDGE_DELAY: Duration = Duration::from_millis(50);

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quality {
    /// Seconds.
    pub latency: f64,
    /// Bytes per second.
    pub throughput: f64,
    pub samples: u64,
    /// Of which throughput samples (the others measured latency).
    pub throughput_samples: u64,
}

impl Quality {
    fn expected(&self, bytes: u64) -> f64 {
        self.latency + bytes as f64 / self.throughput
    }

    /// Whether a request of `bytes` has been measured enough to expect its time.
    fn knows(&self, bytes: u64) -> bool {
        if bytes < LATENCY_SAMPLE {
            self.samples > self.throughput_samples
        } else {
            self.throughput_samples > 0
        }
    }

    /// Whether a request of `bytes` mostly waits (so its time measures latency) rather than
    /// transfers. Until a large request (1 MiB) has measured the throughput, the prior's (fast)
    /// throughput cannot tell: size alone decides then.
    fn measures_latency(&self, bytes: u64) -> bool {
        bytes < LATENCY_SAMPLE
            || if self.throughput_samples > 0 {
                (bytes as f64 / self.throughput) < self.latency
            } else {
                bytes < FIRST_THROUGHPUT_SAMPLE
            }
    }

    /// A request still unanswered after `seconds` (abandoned, or being hedged): a lower bound on
    /// its time, which raises the estimate if that was lower. A throughput not measured yet is
    /// replaced by the bound, which then counts as a sample: a replica too slow to ever answer
    /// first must not keep the prior's.
    fn at_least(&mut self, bytes: u64, seconds: f64) {
        if self.measures_latency(bytes) {
            let transfer = bytes as f64 / self.throughput;
            self.latency = self.latency.max(seconds - transfer);
            return;
        }
        let rate = self.rate(bytes, seconds);
        if self.throughput_samples == 0 {
            self.throughput = rate.min(PRIOR_THROUGHPUT);
            self.throughput_samples += 1;
            self.samples += 1;
        } else {
            self.throughput = self.throughput.min(rate);
        }
    }

    /// The transfer rate of `bytes` in `seconds` once the known latency is taken off (at most 90 %
    /// of the time: the latency estimate may be high).
    fn rate(&self, bytes: u64, seconds: f64) -> f64 {
        bytes as f64 / (seconds - self.latency).max(seconds * 0.1).max(1e-6)
    }

    /// Split one observation (`bytes` in `seconds`) between latency and throughput (after taking
    /// the known latency off); the first sample of each kind replaces the prior.
    fn update(&mut self, bytes: u64, seconds: f64) {
        if self.measures_latency(bytes) {
            let first = self.samples == self.throughput_samples;
            let w = if first { 1.0 } else { EWMA_WEIGHT };
            let transfer = bytes as f64 / self.throughput;
            self.latency = (1.0 - w) * self.latency + w * (seconds - transfer).max(1e-6);
        } else {
            let w = if self.throughput_samples == 0 {
                1.0
            } else {
                EWMA_WEIGHT
            };
            self.throughput = (1.0 - w) * self.throughput + w * self.rate(bytes, seconds);
            self.throughput_samples += 1;
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
    /// Read `ranges`, timing it for the quality estimate; a failure disables the replica for
    /// `disable_for`, doubled for each failure in a row.
    async fn read_timed(
        &self,
        ranges: &[ByteRange],
        probe: bool,
        disable_for: Duration,
    ) -> Result<Vec<Bytes>> {
        let bytes: u64 = ranges.iter().map(|r| r.len).sum();
        let t = Instant::now();
        let answer = self.source.read_ranges(ranges).await;
        let mut st = self.state.lock().unwrap();
        match &answer {
            Ok(_) => {
                st.quality.update(bytes, t.elapsed().as_secs_f64());
                st.failures_in_row = 0;
                st.disabled_until = None;
                st.report.requests += 1;
                st.report.bytes += bytes;
                st.report.probes += probe as u64;
            }
            Err(e) => {
                st.failures_in_row += 1;
                let backoff = disable_for * 2u32.saturating_pow(st.failures_in_row.min(6) - 1);
                st.disabled_until = Some(Instant::now() + backoff);
                st.report.errors += 1;
                st.report.last_error = Some(e.to_string());
            }
        }
        answer
    }

    fn new(source: SharedSource) -> Replica {
        let prior = Quality {
            latency: PRIOR_LATENCY,
            throughput: PRIOR_THROUGHPUT,
            samples: 0,
            throughput_samples: 0,
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
    /// The checksum every replica's server gave, when verified.
    checksum: Option<String>,
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
        let checksum = match options.verify_checksums {
            true => Some(agreed_checksum(&name, &sources).await?),
            false => None,
        };
        let replicas = sources
            .into_iter()
            .map(|source| Arc::new(Replica::new(source)))
            .collect();
        Ok(MultiSource {
            name,
            size: sizes[0],
            checksum,
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

    /// Read `ranges` from replica `i`, timing it for the quality estimate.
    async fn read_from(&self, i: usize, ranges: &[ByteRange], probe: bool) -> Result<Vec<Bytes>> {
        self.replica(i)
            .read_timed(ranges, probe, self.options.disable_for)
            .await
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
            // A part is hedged only when its time can be expected: a large part on a replica
            // whose throughput has not been measured yet is not slow, only unknown (and a copy
            // would take the bandwidth of the backup's own part).
            let backup = self
                .ranked(bytes)
                .into_iter()
                .find(|&j| j != i && !tried.iter().any(|(t, _)| *t == j))
                .filter(|_| self.quality(i).knows(bytes));
            let first = self.read_from(i, ranges, false);
            let outcome = match backup {
                Some(j) => {
                    tokio::pin!(first);
                    tokio::select! {
                        r = &mut first => r.map_err(|e| (i, e)),
                        _ = tokio::time::sleep(expected) => {
                            // Slow: what it has taken so far is a lower bound on its time, and
                            // must count even if its answer is then abandoned.
                            let waited = expected.as_secs_f64();
                            self.replica(i).state.lock().unwrap().quality.at_least(bytes, waited);
                            // Race a copy on the backup; the first good answer wins.
                            let second = self.read_from(j, ranges, false);
                            tokio::pin!(second);
                            let won_by_backup = |v| {
                                self.won_hedge(j);
                                v
                            };
                            tokio::select! {
                                r = &mut first => match r {
                                    Ok(v) => Ok(v),
                                    Err(e) => {
                                        tried.push((i, e));
                                        second.await.map(won_by_backup).map_err(|e| (j, e))
                                    }
                                },
                                r = &mut second => match r {
                                    Ok(v) => Ok(won_by_backup(v)),
                                    Err(e) => {
                                        tried.push((j, e));
                                        first.await.map_err(|e| (i, e))
                                    }
                                },
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
        self.add_replica(finder.find().await?).await.map(Some)
    }

    /// Add one more replica, which must have the same size (and checksum, when verified); returns
    /// its index.
    pub async fn add_replica(&self, source: SharedSource) -> Result<usize> {
        let size = source.size().await?;
        if size != self.size {
            return Err(Error::io(
                source.name(),
                format!("this replica has {size} bytes, the others {}", self.size),
            ));
        }
        if let Some(expected) = &self.checksum {
            let got = agreed_checksum(source.name(), std::slice::from_ref(&source)).await?;
            if &got != expected {
                return Err(Error::io(
                    source.name(),
                    format!("this replica has checksum {got}, the others {expected}"),
                ));
            }
        }
        let mut replicas = self.replicas.write().unwrap();
        replicas.push(Arc::new(Replica::new(source)));
        Ok(replicas.len() - 1)
    }

    pub fn replica_count(&self) -> usize {
        self.replicas.read().unwrap().len()
    }

    /// Split ranges (in offset order) into contiguous parts, sized so that the replicas finish
    /// together (see [`finish_together`]): a replica too slow to help gets no part.
    fn split(&self, ranges: &[ByteRange], actives: &[usize]) -> Vec<(usize, Vec<usize>)> {
        let total: u64 = ranges.iter().map(|r| r.len).sum();
        let mut qualities: Vec<Quality> = actives.iter().map(|&i| self.quality(i)).collect();
        // A replica whose throughput is unmeasured is taken to be as fast as the measured ones:
        // the prior (a fast nearby server) would give it most of the bytes of a large read.
        let measured: Vec<f64> = qualities
            .iter()
            .filter(|q| q.throughput_samples > 0)
            .map(|q| q.throughput)
            .collect();
        if !measured.is_empty() {
            let typical = measured.iter().sum::<f64>() / measured.len() as f64;
            for q in qualities.iter_mut().filter(|q| q.throughput_samples == 0) {
                q.throughput = typical;
            }
        }
        let shares = finish_together(total as f64, &qualities);
        // Smallest share first, the largest last: it takes what rounding to whole ranges leaves.
        let mut by_share: Vec<usize> = (0..actives.len()).filter(|&n| shares[n] > 0.0).collect();
        by_share.sort_by(|&a, &b| shares[a].total_cmp(&shares[b]));
        let mut order: Vec<usize> = (0..ranges.len()).collect();
        order.sort_by_key(|&k| ranges[k].offset);
        let mut parts = Vec::new();
        let mut at = 0;
        for (n, &a) in by_share.iter().enumerate() {
            let last = n + 1 == by_share.len();
            let mut taken = 0.0;
            let mut part = Vec::new();
            // A range goes to this replica if most of it fits in the share.
            while at < order.len()
                && (last || taken + ranges[order[at]].len as f64 / 2.0 <= shares[a])
            {
                taken += ranges[order[at]].len as f64;
                part.push(order[at]);
                at += 1;
            }
            if !part.is_empty() {
                parts.push((actives[a], part));
            }
        }
        parts
    }
}

/// The checksum every source's server gives, which must agree (see
/// [`MultiOptions::verify_checksums`]); the error names each answer.
async fn agreed_checksum(name: &str, sources: &[SharedSource]) -> Result<String> {
    let answers = futures_util::future::join_all(sources.iter().map(|s| s.checksum())).await;
    let mut values = Vec::new();
    for (source, answer) in sources.iter().zip(answers) {
        let why = match answer {
            Ok(Some(value)) => {
                values.push((source.name(), value));
                continue;
            }
            Ok(None) => "this protocol has no checksum to ask for".to_string(),
            Err(e) => e.to_string(),
        };
        return Err(Error::io(
            source.name(),
            format!("cannot verify the replica's checksum: {why}"),
        ));
    }
    if values.iter().all(|(_, v)| *v == values[0].1) {
        return Ok(values.swap_remove(0).1);
    }
    let listing = values
        .iter()
        .map(|(n, v)| format!("{n} has {v}"))
        .collect::<Vec<_>>()
        .join("; ");
    Err(Error::io(
        name,
        format!("replicas differ in checksum: {listing}"),
    ))
}

/// Bytes for each replica so that they all finish at the same time `t` (`latency + bytes /
/// throughput = t`), adding up to `total`: the replicas start in order of latency, and one whose
/// latency alone reaches `t` gets nothing (a replica ten times farther away than the others only
/// slows a read it would share).
fn finish_together(total: f64, q: &[Quality]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..q.len()).collect();
    order.sort_by(|&a, &b| q[a].latency.total_cmp(&q[b].latency));
    let mut shares = vec![0.0; q.len()];
    for k in 1..=order.len() {
        let used = &order[..k];
        let rate: f64 = used.iter().map(|&i| q[i].throughput).sum();
        let head_start: f64 = used.iter().map(|&i| q[i].latency * q[i].throughput).sum();
        let t = (total + head_start) / rate;
        if order.get(k).is_none_or(|&next| t <= q[next].latency) {
            for &i in used {
                shares[i] = ((t - q[i].latency) * q[i].throughput).max(0.0);
            }
            break;
        }
    }
    shares
}

#[async_trait]
impl ByteSource for MultiSource {
    fn name(&self) -> &str {
        &self.name
    }

    async fn size(&self) -> Result<u64> {
        Ok(self.size)
    }

    async fn checksum(&self) -> Result<Option<String>> {
        match &self.checksum {
            Some(verified) => Ok(Some(verified.clone())),
            None => self.replica(0).source.checksum().await,
        }
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
        // A replica left without a part is probed like an inactive one.
        let used: Vec<usize> = parts.iter().map(|(replica, _)| *replica).collect();
        self.maybe_probe(ranges, &ranked, &used);
        let schedule = Mutex::new(Schedule::new(ranges, &parts));
        let all_done = tokio::sync::Notify::new();
        // Every worker's first piece is taken here, each replica's first before any second: a
        // worker that ran first would otherwise take the pieces of replicas not started yet.
        let mut firsts = Vec::new();
        for _ in 0..IN_FLIGHT {
            for (region, (replica, _)) in parts.iter().enumerate() {
                let first = schedule.lock().unwrap().take(region, *replica);
                firsts.push((region, *replica, first));
            }
        }
        let workers = firsts.into_iter().map(|(region, replica, first)| {
            self.work(ranges, &schedule, &all_done, region, replica, first)
        });
        tokio::select! {
            finished = futures_util::future::try_join_all(workers) => { finished?; }
            _ = all_done.notified() => {}
        }
        let mut schedule = schedule.into_inner().unwrap();
        // A piece its first reader did not answer (a copy was faster, or it is still in flight):
        // its time so far is a lower bound on that replica's, which must count (else a slow
        // replica would never be measured).
        for piece in &schedule.pieces {
            if let Some((reader, started)) = piece.started {
                if piece.answered_by != Some(reader) {
                    let elapsed = started.elapsed().as_secs_f64();
                    let replica = self.replica(reader);
                    replica
                        .state
                        .lock()
                        .unwrap()
                        .quality
                        .at_least(piece.bytes, elapsed);
                }
            }
        }
        self.bytes.fetch_add(total, Relaxed);
        Ok(std::mem::take(&mut schedule.out)
            .into_iter()
            .map(|b| b.expect("every range was in one piece"))
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
    /// One of the [`IN_FLIGHT`] workers of `replica` on a request: it reads `first`, then the
    /// pieces of its region in order, then takes the others' unstarted pieces from their ends,
    /// then copies a piece still in flight on another replica once that piece has taken
    /// [`LATE_FACTOR`] times what this replica needs for it (first answer wins). Returns when it
    /// has nothing left to do.
    async fn work(
        &self,
        ranges: &[ByteRange],
        schedule: &Mutex<Schedule>,
        all_done: &tokio::sync::Notify,
        region: usize,
        replica: usize,
        first: Option<usize>,
    ) -> Result<()> {
        let finish = |piece: usize, buffers: Vec<Bytes>| {
            let mut schedule = schedule.lock().unwrap();
            let first = schedule.finish(piece, replica, buffers);
            if schedule.left == 0 {
                all_done.notify_one();
            }
            first
        };
        let mut next = first;
        while let Some(piece) = next {
            let part = schedule.lock().unwrap().part(ranges, piece);
            let buffers = self.read_part(replica, &part).await?;
            finish(piece, buffers);
            next = schedule.lock().unwrap().take(region, replica);
        }
        loop {
            let quality = self.quality(replica);
            let late = schedule.lock().unwrap().late(replica, &quality);
            match late {
                Late::Copy(piece) => {
                    let part = schedule.lock().unwrap().part(ranges, piece);
                    // A failed copy costs nothing: the piece is still on its way elsewhere.
                    if let Ok(buffers) = self.read_from(replica, &part, false).await {
                        if finish(piece, buffers) {
                            self.won_hedge(replica);
                        }
                    }
                }
                Late::In(wait) => tokio::time::sleep(wait).await,
                Late::Nothing => return Ok(()),
            }
        }
    }

    /// Count a copy of a late request that `replica` answered first.
    fn won_hedge(&self, replica: usize) {
        self.replica(replica)
            .state
            .lock()
            .unwrap()
            .report
            .hedges_won += 1;
    }

    /// Copy the smallest range of this request to one inactive replica, within the probe budget.
    /// The probe runs on its own: a far replica's answer must not delay the read.
    fn maybe_probe(&self, ranges: &[ByteRange], ranked: &[usize], actives: &[usize]) {
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
        let replica = self.replica(inactive);
        let (range, disable_for) = (*small, self.options.disable_for);
        tokio::spawn(async move {
            let _ = replica.read_timed(&[range], true, disable_for).await;
        });
    }
}

/// Pieces of contiguous ranges a replica's part of a request is cut into (when large enough), so
/// that a replica done early takes over the unstarted pieces of a slower one: the estimates a part
/// was sized by may be far off (a replica not measured yet, a server slowing down).
const PIECES_PER_REGION: usize = 4;
/// No smaller pieces: fewer requests, and each measures a throughput.
const MIN_PIECE: u64 = FIRST_THROUGHPUT_SAMPLE;
/// Pieces in flight per replica: the next is on its way while the previous one arrives.
const IN_FLIGHT: usize = 2;
/// A piece is copied to a replica out of work once it has taken this many times what that replica
/// needs for it: twice, so that a replica about as fast as the copier is not copied at the end of
/// every request (a copy abandoned still takes bandwidth).
const LATE_FACTOR: f64 = 2.0;

/// The pieces of one request, and who reads what.
struct Schedule {
    pieces: Vec<Piece>,
    /// Per region (one per replica with a part): its unstarted pieces, in offset order.
    unstarted: Vec<std::collections::VecDeque<usize>>,
    /// Pieces not done.
    left: usize,
    /// Buffers by range index.
    out: Vec<Option<Bytes>>,
}

#[derive(Default)]
struct Piece {
    ranges: Vec<usize>,
    bytes: u64,
    /// Replica reading it, since when.
    started: Option<(usize, Instant)>,
    copied: bool,
    /// The replica whose answer was taken.
    answered_by: Option<usize>,
}

enum Late {
    Copy(usize),
    /// Nothing to copy yet: look again after this long.
    In(Duration),
    Nothing,
}

impl Schedule {
    fn new(ranges: &[ByteRange], parts: &[(usize, Vec<usize>)]) -> Schedule {
        let mut pieces = Vec::new();
        let mut unstarted = Vec::new();
        for (_, indices) in parts {
            let bytes: u64 = indices.iter().map(|&k| ranges[k].len).sum();
            let target = (bytes / PIECES_PER_REGION as u64).max(MIN_PIECE);
            let mut region = std::collections::VecDeque::new();
            let mut piece = Piece::default();
            for &k in indices {
                piece.ranges.push(k);
                piece.bytes += ranges[k].len;
                if piece.bytes >= target {
                    region.push_back(pieces.len());
                    pieces.push(std::mem::take(&mut piece));
                }
            }
            if !piece.ranges.is_empty() {
                region.push_back(pieces.len());
                pieces.push(piece);
            }
            unstarted.push(region);
        }
        Schedule {
            left: pieces.len(),
            pieces,
            unstarted,
            out: vec![None; ranges.len()],
        }
    }

    /// The next piece of `region`, else the last unstarted piece of the region with the most
    /// bytes left; started on `replica`.
    fn take(&mut self, region: usize, replica: usize) -> Option<usize> {
        let piece = match self.unstarted[region].pop_front() {
            Some(piece) => piece,
            None => {
                let pieces = &self.pieces;
                let bytes_left = |r: &std::collections::VecDeque<usize>| -> u64 {
                    r.iter().map(|&p| pieces[p].bytes).sum()
                };
                let richest = self
                    .unstarted
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| !r.is_empty())
                    .max_by_key(|(_, r)| bytes_left(r))?
                    .0;
                self.unstarted[richest].pop_back()?
            }
        };
        self.pieces[piece].started = Some((replica, Instant::now()));
        Some(piece)
    }

    fn part(&self, ranges: &[ByteRange], piece: usize) -> Vec<ByteRange> {
        self.pieces[piece]
            .ranges
            .iter()
            .map(|&k| ranges[k])
            .collect()
    }

    /// Store a piece's buffers from `replica` unless it was answered already; whether this answer
    /// was the first.
    fn finish(&mut self, piece: usize, replica: usize, buffers: Vec<Bytes>) -> bool {
        let p = &mut self.pieces[piece];
        if p.answered_by.is_some() {
            return false;
        }
        p.answered_by = Some(replica);
        self.left -= 1;
        for (&k, b) in p.ranges.iter().zip(buffers) {
            self.out[k] = Some(b);
        }
        true
    }

    /// A piece in flight on another replica that `replica` (of `quality`) should copy now.
    fn late(&mut self, replica: usize, quality: &Quality) -> Late {
        let mut wait: Option<Duration> = None;
        for (i, p) in self.pieces.iter_mut().enumerate() {
            let Some((reader, started)) = p.started else {
                continue;
            };
            if p.answered_by.is_some() || p.copied || reader == replica || !quality.knows(p.bytes) {
                continue;
            }
            let due = Duration::from_secs_f64(quality.expected(p.bytes) * LATE_FACTOR);
            match due.checked_sub(started.elapsed()) {
                None | Some(Duration::ZERO) => {
                    p.copied = true;
                    return Late::Copy(i);
                }
                Some(left) => wait = Some(wait.map_or(left, |w| w.min(left))),
            }
        }
        wait.map_or(Late::Nothing, Late::In)
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
            throughput_samples: 0,
        };
        q.update(1000, 0.1);
        assert!((q.latency - 0.1).abs() < 0.01, "{q:?}");
        for _ in 0..20 {
            q.update(50_000_000, 0.1 + 1.0); // 50 MB/s after 100 ms of latency
        }
        assert!((q.throughput - 50e6).abs() / 50e6 < 0.1, "{q:?}");
        assert!(q.expected(1000) < q.expected(10_000_000));
    }

    #[test]
    fn a_slow_link_is_not_taken_for_a_far_one() {
        // 4 MB/s and 10 ms away: requests of 160 kB and 2 MB take 50 ms and 510 ms.
        let mut q = Quality {
            latency: PRIOR_LATENCY,
            throughput: PRIOR_THROUGHPUT,
            samples: 0,
            throughput_samples: 0,
        };
        for _ in 0..5 {
            q.update(160_000, 0.05);
            q.update(2_000_000, 0.51);
            q.update(200, 0.01);
        }
        assert!(q.latency < 0.02, "{q:?}");
        assert!((q.throughput - 4e6).abs() / 4e6 < 0.3, "{q:?}");
    }

    #[test]
    fn parts_are_sized_to_finish_together() {
        let q = |latency, throughput| Quality {
            latency,
            throughput,
            samples: 1,
            throughput_samples: 1,
        };
        // Equal replicas: halves.
        let shares = finish_together(1e6, &[q(0.01, 1e6), q(0.01, 1e6)]);
        assert!((shares[0] - 5e5).abs() < 1.0 && (shares[1] - 5e5).abs() < 1.0);
        // Twice the throughput: twice the bytes (same latency).
        let shares = finish_together(3e6, &[q(0.01, 1e6), q(0.01, 2e6)]);
        assert!((shares[1] / shares[0] - 2.0).abs() < 1e-9, "{shares:?}");
        // Ten times the latency, and the fast one is done before the slow one would start.
        let shares = finish_together(1e6, &[q(0.1, 1e8), q(0.01, 1e8)]);
        assert_eq!(shares, [0.0, 1e6]);
        // A big read is worth sharing even with the far one; both end at the same time.
        let shares = finish_together(1e8, &[q(0.1, 1e8), q(0.01, 1e8)]);
        let ends = [0.1 + shares[0] / 1e8, 0.01 + shares[1] / 1e8];
        assert!(
            shares[0] > 0.0 && (ends[0] - ends[1]).abs() < 1e-9,
            "{shares:?}"
        );
        assert!((shares.iter().sum::<f64>() - 1e8).abs() < 1.0);
    }

    #[test]
    fn pieces_are_stolen_from_the_back_of_the_richest_region_and_copied_when_late() {
        let mib = 1 << 20;
        // Region 0: eight 1 MiB ranges (four pieces of 2 MiB); region 1: one small range.
        let ranges: Vec<ByteRange> = (0..9)
            .map(|k| ByteRange {
                offset: k * mib,
                len: if k < 8 { mib } else { 100 },
            })
            .collect();
        let parts = vec![(0, (0..8).collect()), (1, vec![8])];
        let mut s = Schedule::new(&ranges, &parts);
        assert_eq!(s.pieces.len(), 5);
        assert_eq!(s.pieces[0].ranges, [0, 1]);
        // Replica 1 does its own piece, then takes region 0's last piece, not its next one.
        assert_eq!(s.take(0, 0), Some(0));
        assert_eq!(s.take(1, 1), Some(4));
        assert!(s.finish(4, 1, vec![Bytes::new()]));
        assert_eq!(s.take(1, 1), Some(3));
        // A piece is answered once; the second answer is dropped.
        assert!(s.finish(3, 1, vec![Bytes::new(); 2]));
        assert!(!s.finish(3, 0, vec![Bytes::new(); 2]));
        // Replica 1 (10 ms, 100 MB/s: ~30 ms for a piece) copies replica 0's piece only once it
        // has run twice that long.
        let fast = Quality {
            latency: 0.01,
            throughput: 1e8,
            samples: 2,
            throughput_samples: 1,
        };
        assert!(matches!(s.late(1, &fast), Late::In(_)));
        s.pieces[0].started = Some((0, Instant::now() - Duration::from_millis(100)));
        assert!(matches!(s.late(1, &fast), Late::Copy(0)));
        // Copied once only; a replica does not copy its own piece.
        assert!(matches!(s.late(1, &fast), Late::Nothing));
        s.pieces[0].copied = false;
        assert!(matches!(s.late(0, &fast), Late::Nothing));
    }
}
