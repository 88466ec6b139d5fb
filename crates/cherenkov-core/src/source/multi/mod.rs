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

mod checksum;
mod opening;
mod quality;
mod replica;
mod schedule;

use self::checksum::agreed_checksum;
pub use self::quality::Quality;
use self::replica::Replica;
pub use self::replica::{ReplicaFinder, ReplicaReport};
use self::schedule::{split_into_parts, Late, Schedule, IN_FLIGHT};
use super::{
    ByteRange, ByteSource, Opened, OpeningHint, SharedSource, SourceCounters, SourceLimits,
    SourceReport, Tally,
};
use crate::error::{Error, IoKind, Result};
use async_trait::async_trait;
use bytes::Bytes;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// A replica being opened, with the name (URL) it is reported by.
pub type Opening = (
    String,
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<Opened>> + Send>>,
);

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
    /// The head and tail of the file every replica must hold the same bytes in (see
    /// `opening`). Default nothing: only sizes are compared.
    pub compare: OpeningHint,
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
            compare: OpeningHint::default(),
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

/// No hedge before this long: very fast requests vary too much to judge.
const MIN_HEDGE_DELAY: Duration = Duration::from_millis(50);

#[derive(Debug)]
pub struct MultiSource {
    name: String,
    size: u64,
    /// The checksum every replica's server gave, when verified.
    checksum: Option<String>,
    /// Only ever appended to (by the finder): an index names the same replica for good.
    replicas: RwLock<Vec<Arc<Replica>>>,
    /// Replicas not in the set: still opening, or dropped (see `opening`).
    unjoined: Mutex<Vec<ReplicaReport>>,
    /// The first replica's head and tail, compared with the others' (see `MultiOptions::compare`).
    opening: Vec<(ByteRange, Bytes)>,
    /// The replicas' names in the order given, which reports keep (they join in any order).
    order: Vec<String>,
    options: MultiOptions,
    finder: std::sync::OnceLock<Arc<dyn ReplicaFinder>>,
    /// Held while the finder runs: parts that fail together wait for one new replica.
    finding: tokio::sync::Mutex<()>,
    finds: AtomicUsize,
    tally: Tally,
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
            sizes.push(s.size());
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
            unjoined: Mutex::new(Vec::new()),
            opening: Vec::new(),
            order: Vec::new(),
            options,
            finder: std::sync::OnceLock::new(),
            finding: tokio::sync::Mutex::new(()),
            finds: AtomicUsize::new(0),
            tally: Tally::default(),
            probe_bytes: AtomicU64::new(0),
        })
    }

    /// Ask `finder` for one more replica when every known one has failed a read.
    pub fn with_finder(self, finder: Arc<dyn ReplicaFinder>) -> Self {
        self.set_finder(finder);
        self
    }

    /// [`Self::with_finder`] on a set already shared (see `open_first`); the first one set stays.
    pub fn set_finder(&self, finder: Arc<dyn ReplicaFinder>) {
        let _ = self.finder.set(finder);
    }

    fn replica(&self, i: usize) -> Arc<Replica> {
        self.replicas.read().unwrap()[i].clone()
    }

    fn all(&self) -> Vec<Arc<Replica>> {
        self.replicas.read().unwrap().clone()
    }

    /// Every replica, in the order given (those a finder added last).
    pub fn reports(&self) -> Vec<ReplicaReport> {
        let mut reports: Vec<ReplicaReport> = self
            .all()
            .iter()
            .map(|r| {
                let st = r.state.lock().unwrap();
                ReplicaReport {
                    quality: st.quality,
                    disabled: st.disabled_until.is_some_and(|t| t > Instant::now()),
                    ..st.report.clone()
                }
            })
            .collect();
        reports.extend(self.unjoined.lock().unwrap().iter().cloned());
        let position = |r: &ReplicaReport| self.order.iter().position(|n| *n == r.name);
        reports.sort_by_key(|r| position(r).unwrap_or(usize::MAX));
        reports
    }

    fn usable(&self, i: usize) -> bool {
        !self.dropped(i)
            && self
                .replica(i)
                .state
                .lock()
                .unwrap()
                .disabled_until
                .is_none_or(|t| t <= Instant::now())
    }

    /// Dropped for good (its file changed on the server).
    fn dropped(&self, i: usize) -> bool {
        self.replica(i).state.lock().unwrap().report.state == replica::DROPPED
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

    /// One piece on the best replica, hedged on the next if it is slow, failing over on errors.
    async fn read_piece(&self, preferred: usize, ranges: &[ByteRange]) -> Result<Vec<Bytes>> {
        let bytes: u64 = ranges.iter().map(|r| r.len).sum();
        let mut tried: Vec<(usize, Error)> = Vec::new();
        let mut finder_error = None;
        let mut next = Some(preferred);
        while let Some(i) = next {
            let expected = Duration::from_secs_f64(
                self.quality(i).expected(bytes) * self.options.hedge_factor,
            )
            .max(MIN_HEDGE_DELAY);
            // A piece is hedged only when its time can be expected: a large piece on a replica
            // whose throughput has not been measured yet is not slow, only unknown (and a copy
            // would take the bandwidth of the backup's own piece).
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
        let kind = IoKind::common(tried.iter().map(|(_, e)| e.io_kind()));
        Err(Error::io_of(
            kind,
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
        let Some(finder) = self.finder.get() else {
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

    pub fn replica_count(&self) -> usize {
        self.replicas.read().unwrap().len()
    }
}

#[async_trait]
impl ByteSource for MultiSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn size(&self) -> u64 {
        self.size
    }

    async fn checksum(&self) -> Result<Option<String>> {
        match &self.checksum {
            Some(verified) => Ok(Some(verified.clone())),
            None => self.replica(0).source.checksum().await,
        }
    }

    async fn read_ranges(&self, ranges: &[ByteRange]) -> Result<Vec<Bytes>> {
        let tally = &self.tally;
        tally.requests.fetch_add(1, Relaxed);
        tally.round_trips.fetch_add(1, Relaxed);
        tally.ranges.fetch_add(ranges.len() as u64, Relaxed);
        let total: u64 = ranges.iter().map(|r| r.len).sum();
        let ranked = self.ranked(total);
        let ranked = if ranked.is_empty() {
            // All disabled for a while: try them anyway, except those dropped for good.
            let count = self.replicas.read().unwrap().len();
            let left: Vec<usize> = (0..count).filter(|&i| !self.dropped(i)).collect();
            if left.is_empty() {
                return Err(Error::io(
                    &self.name,
                    "every replica was dropped: the file changed on their servers since it was opened",
                ));
            }
            left
        } else {
            ranked
        };
        let actives: Vec<usize> = ranked
            .iter()
            .copied()
            .take(self.options.max_active.max(1).min(ranges.len().max(1)))
            .collect();
        let qualities = actives.iter().map(|&i| self.quality(i)).collect();
        let parts = split_into_parts(ranges, &actives, qualities);
        // A replica left without a part is probed like an inactive one.
        let used: Vec<usize> = parts.iter().map(|(replica, _)| *replica).collect();
        self.maybe_probe(ranges, &ranked, &used);
        let schedule = Mutex::new(Schedule::new(ranges, &parts));
        let all_done = tokio::sync::Notify::new();
        // Every worker's first piece is taken here, each replica's first before any second: a
        // worker that ran first would otherwise take the pieces of replicas not started yet.
        let mut firsts = Vec::new();
        for _ in 0..IN_FLIGHT {
            for (part, (replica, _)) in parts.iter().enumerate() {
                let first = schedule.lock().unwrap().take(part, *replica);
                firsts.push((part, *replica, first));
            }
        }
        let workers = firsts.into_iter().map(|(part, replica, first)| {
            self.work(ranges, &schedule, &all_done, part, replica, first)
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
        self.tally.bytes.fetch_add(total, Relaxed);
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

    /// Its own counters (a request split over replicas counts once; each replica's are in its
    /// report), the nearest replica's round trip (reads go to it first), and every replica's
    /// stream steps.
    fn report(&self) -> SourceReport {
        let theirs: Vec<SourceReport> = self.all().iter().map(|r| r.source.report()).collect();
        SourceReport {
            counters: SourceCounters {
                retries: theirs.iter().map(|r| r.counters.retries).sum(),
                ..self.tally.counters()
            },
            round_trip: theirs.iter().filter_map(|r| r.round_trip).min(),
            stream_steps: theirs.into_iter().flat_map(|r| r.stream_steps).collect(),
            replicas: Some(self.reports()),
        }
    }
}

impl MultiSource {
    /// The first replica's head and tail, which opening read (see `opening`).
    pub fn opening_reads(&self) -> Vec<(ByteRange, Bytes)> {
        self.opening.clone()
    }
}

impl MultiSource {
    /// One of the [`IN_FLIGHT`] workers of `replica` on a request: it reads `first`, then the
    /// pieces of its part in order, then takes the others' unstarted pieces from their ends,
    /// then copies a piece still in flight on another replica once that piece has taken
    /// [`LATE_FACTOR`] times what this replica needs for it (first answer wins). Returns when it
    /// has nothing left to do.
    async fn work(
        &self,
        ranges: &[ByteRange],
        schedule: &Mutex<Schedule>,
        all_done: &tokio::sync::Notify,
        part: usize,
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
            let piece_ranges = schedule.lock().unwrap().ranges_of(ranges, piece);
            let buffers = self.read_piece(replica, &piece_ranges).await?;
            finish(piece, buffers);
            next = schedule.lock().unwrap().take(part, replica);
        }
        loop {
            let quality = self.quality(replica);
            let late = schedule.lock().unwrap().late(replica, &quality);
            match late {
                Late::Copy(piece) => {
                    let piece_ranges = schedule.lock().unwrap().ranges_of(ranges, piece);
                    // A failed copy costs nothing: the piece is still on its way elsewhere.
                    if let Ok(buffers) = self.read_from(replica, &piece_ranges, false).await {
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
        let budget = (self.tally.bytes.load(Relaxed) as f64 * self.options.probe_fraction) as u64;
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
