//! How many connections (XRootD) or requests in flight (HTTP) a file uses, adapted to the link.
//!
//! One TCP connection carries at most its window per round trip, and servers and links often cap
//! each connection: far away, more parallel streams are the only way to fill the link. But on a link
//! whose capacity is shared (or a server that is the bottleneck) more streams only add load. So the
//! count is found by trying, as one finds a bandwidth-delay product: the source measures its
//! throughput over steps of busy time (bytes received while requests were in flight); after a step at
//! `n` streams it tries `2n` (up to `max`); when the doubling brought less than
//! [`GROWTH_THAT_HELPS`] more throughput, it goes back to the count that did as well and stays
//! there. A server that pushes back (XRootD `kXR_wait`, HTTP 503/429, a refused connection) halves
//! the count and caps it there.
//!
//! `adaptive = false` keeps the configured count (what every source did before).

use super::{SourceCounters, SourceReport};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Most streams by default.
pub const DEFAULT_MAX_STREAMS: usize = 16;
/// A doubling must bring this much more throughput to be kept (a perfect one brings 2x).
pub const GROWTH_THAT_HELPS: f64 = 1.3;
/// A doubling that brought this much more throughput (of 2x) was limited by the streams alone.
const LINEAR_GROWTH: f64 = 1.8;
/// A step measures throughput once it holds this many bytes ...
const STEP_BYTES: u64 = 2 << 20;
/// ... and at least this much busy time (shorter ones, on fast links, are mostly noise) ...
const STEP_MIN_BUSY: Duration = Duration::from_millis(50);
/// ... and this many round trips of busy time (so that the wait for the first answer of a busy
/// period does not dominate).
const STEP_ROUND_TRIPS: f64 = 2.0;
/// Pushbacks closer together than this count as one.
const PUSHBACK_QUIET: Duration = Duration::from_millis(200);
/// Before any measurement, reads at least this large are spread over the streams.
pub const SPREAD_UNMEASURED: u64 = 16 << 20;
/// Requests are cut no smaller than this to spread a read over the streams.
pub const MIN_PIECE: u64 = 512 << 10;
/// With a queue in front of the streams (see [`Streams::pieces`]), before any measurement: reads
/// are cut in pieces of this size.
const QUEUED_PIECE_UNMEASURED: u64 = 1 << 20;
/// A stream is kept busy with this many of its bandwidth-delay products in flight ...
const WINDOW_PRODUCTS: f64 = 2.0;
/// ... and at least this many bytes (also before any measurement).
const WINDOW_MIN: u64 = 2 << 20;

/// One measurement step: `streams` in use, bytes received over `seconds` of busy time.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(module = "cherenkov._core", get_all, frozen)
)]
pub struct StreamStep {
    pub streams: u64,
    pub bytes: u64,
    pub seconds: f64,
    /// Bytes per second.
    pub throughput: f64,
    /// What the step decided: "grow", "keep", "back" (the doubling did not help), "pushback".
    pub decision: &'static str,
}

#[cfg(feature = "python")]
#[pyo3::pymethods]
impl StreamStep {
    fn __repr__(&self) -> String {
        format!("{self:?}")
    }
}

/// The stream count of one source and what it measured.
#[derive(Debug)]
pub struct Streams {
    adaptive: bool,
    /// The source tells when requests wait for a stream (see [`Streams::with_queue`]).
    queued: bool,
    max: usize,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    current: usize,
    peak: usize,
    /// Streams that can serve now (an XRootD connection still logging in cannot): the step's
    /// measure is of these.
    ready: usize,
    /// No growth beyond this any more (the doubling did not help, or the server pushed back).
    ceiling: usize,
    /// Throughput measured at each count tried (bytes/s), by count.
    measured: Vec<(usize, f64)>,
    /// The shortest request seen, and the bytes it carried: the round trip plus their transfer.
    shortest: Option<(Duration, u64)>,
    /// What a byte adds to a request's time on one stream, as a rate (bytes/s): measured from
    /// requests of other sizes than the shortest (see [`Step::extra_bytes`]); None until sizes
    /// differed.
    transfer_rate: Option<f64>,
    /// What one stream carried in the last step (bytes/s): the transfer rate, never below the
    /// streams' share of the step's throughput. A request's round trip is latency, not
    /// bandwidth; counted in, every read longer than one request would look bandwidth-bound.
    last_rate: Option<f64>,
    /// A count whose step brought too little once: one more step there decides (one step alone
    /// may have measured the ramp of new connections, or a pause of the reader).
    doubted: Option<usize>,
    /// When the count was last halved for a pushback.
    pushed_back: Option<Instant>,
    in_flight: usize,
    busy_since: Option<Instant>,
    step: Step,
    steps: Vec<StreamStep>,
}

#[derive(Debug)]
struct Step {
    /// When the step began: a request sent earlier counts with the share of its time since.
    began: Instant,
    /// Set when the count changed: requests sent before went to the old streams (and delay the
    /// new ones queued behind them), so the step starts once they are all done.
    since: Option<Instant>,
    /// Requests sent before `since` still in flight.
    settling: usize,
    bytes: u64,
    busy: Duration,
    /// Bytes by which the step's requests differed from the shortest request before each, and
    /// the time the larger took for them (s): what a byte adds. All of a request's time past the
    /// shortest one's would count the shortest's own transfer as latency when every request
    /// carries about as much (a narrow link's equal steps): then nothing is measured here.
    extra_bytes: f64,
    extra_seconds: f64,
    /// Requests waited for a stream during the step: the streams, not the reader, set the pace.
    backlog: bool,
}

impl Step {
    fn new() -> Step {
        Step {
            began: Instant::now(),
            since: None,
            settling: 0,
            bytes: 0,
            busy: Duration::ZERO,
            extra_bytes: 0.0,
            extra_seconds: 0.0,
            backlog: false,
        }
    }

    /// The step after a change of the count, with `in_flight` requests sent before it.
    fn after_change(in_flight: usize) -> Step {
        Step {
            since: Some(Instant::now()),
            settling: in_flight,
            ..Step::new()
        }
    }
}

/// Steps kept for the statistics (the first ones tell the story; later ones repeat it).
const STEPS_KEPT: usize = 64;

impl Streams {
    /// Start at `initial` streams; with `adaptive`, between 1 and `max` (at least `initial`).
    pub fn new(initial: usize, max: usize, adaptive: bool) -> Streams {
        let initial = initial.max(1);
        let max = if adaptive { max.max(initial) } else { initial };
        Streams {
            adaptive,
            queued: false,
            max,
            state: Mutex::new(State {
                current: initial,
                peak: initial,
                ready: initial,
                ceiling: max,
                measured: Vec::new(),
                shortest: None,
                transfer_rate: None,
                last_rate: None,
                pushed_back: None,
                doubted: None,
                in_flight: 0,
                busy_since: None,
                step: Step::new(),
                steps: Vec::new(),
            }),
        }
    }

    /// For a source with a queue in front of its streams, which reports through
    /// [`Streams::backlog`] when requests wait: a step without a backlog measured what the reader
    /// asked for, not what the streams can carry, and decides nothing (more streams would not be
    /// used; fewer might not carry a later burst).
    pub fn with_queue(mut self) -> Streams {
        self.queued = true;
        self
    }

    /// Requests are waiting for a stream now.
    pub fn backlog(&self) {
        self.lock().step.backlog = true;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn adaptive(&self) -> bool {
        self.adaptive
    }

    /// Streams to use now.
    pub fn current(&self) -> usize {
        self.lock().current
    }

    /// Most streams ever used.
    pub fn peak(&self) -> usize {
        self.lock().peak
    }

    /// Most streams this source may ever use (what to size pools for).
    pub fn max(&self) -> usize {
        self.max
    }

    /// The link's round trip, once a request was answered (see [`State::round_trip`]).
    pub fn round_trip(&self) -> Option<Duration> {
        self.lock().round_trip()
    }

    /// The steps measured so far.
    pub fn steps(&self) -> Vec<StreamStep> {
        self.lock().steps.clone()
    }

    /// The report of a source reading through these streams: its `counters` with the streams
    /// in use, and the round trip and steps they measured.
    pub fn report(&self, counters: SourceCounters) -> SourceReport {
        let state = self.lock();
        SourceReport {
            counters: SourceCounters {
                streams: state.current as u64,
                streams_peak: state.peak as u64,
                ..counters
            },
            round_trip: state.round_trip(),
            stream_steps: state.steps.clone(),
            replicas: None,
        }
    }

    /// How many streams are ready to serve (the step in progress is dropped when this changes:
    /// it would mix two counts). A step still waiting for the requests sent before a change of the
    /// count keeps waiting; otherwise the new step starts now (a stream that just became ready has
    /// nothing in flight to wait for).
    pub fn set_ready(&self, ready: usize) {
        let mut s = self.lock();
        if s.ready != ready {
            s.ready = ready;
            if s.step.settling == 0 {
                s.step = Step::new();
            }
            if let Some(since) = s.busy_since.as_mut() {
                *since = Instant::now();
            }
        }
    }

    /// A request goes out.
    pub fn started(&self) {
        let mut s = self.lock();
        if s.in_flight == 0 {
            s.busy_since = Some(Instant::now());
        }
        s.in_flight += 1;
    }

    /// A request that went out at `sent` is over, with `bytes` received (0 if it failed). Returns
    /// the new stream count when this closed a step that changed it.
    pub fn finished(&self, sent: Instant, bytes: u64) -> Option<usize> {
        let now = Instant::now();
        let mut s = self.lock();
        s.in_flight = s.in_flight.saturating_sub(1);
        let took = now - sent;
        let shortest_before = s.shortest;
        if s.shortest.is_none_or(|(t, _)| took < t) {
            s.shortest = Some((took, bytes));
        }
        if s.in_flight == 0 {
            if let Some(since) = s.busy_since.take() {
                s.step.busy += now - since;
            }
        }
        if s.step.settling > 0 {
            if s.step.since.is_some_and(|since| sent < since) {
                s.step.settling -= 1;
            }
            if s.step.settling == 0 {
                // The old requests are done: the step at the new count starts now.
                s.step = Step::new();
                if s.busy_since.is_some() {
                    s.busy_since = Some(now);
                }
            }
            return None;
        }
        // A request sent before the step carried part of its bytes before it (a stream that
        // became ready restarts the step with requests in flight): only its share since counts,
        // or a burst of answers finishing together would measure more than the link carries.
        let share = match sent < s.step.began {
            true => (now - s.step.began).as_secs_f64() / took.as_secs_f64().max(1e-9),
            false => 1.0,
        };
        let share = share.min(1.0);
        s.step.bytes += (bytes as f64 * share) as u64;
        // This answer and the shortest before it, if their sizes differ enough: what the larger
        // carried beyond the smaller, and the time that took (a larger answer as fast as the
        // shortest, or a little faster, shows that bytes add no time).
        if let Some((shortest, shortest_bytes)) = shortest_before {
            let (more, longer) = match bytes >= shortest_bytes {
                true => (bytes - shortest_bytes, took.saturating_sub(shortest)),
                false => (shortest_bytes - bytes, shortest.saturating_sub(took)),
            };
            if more >= MIN_PIECE {
                s.step.extra_bytes += more as f64 * share;
                s.step.extra_seconds += longer.as_secs_f64() * share;
            }
        }
        let busy = s.step.busy + s.busy_since.map_or(Duration::ZERO, |t| now - t);
        let enough_time = s.round_trip().unwrap_or_default().as_secs_f64() * STEP_ROUND_TRIPS;
        if s.step.bytes < STEP_BYTES || busy.as_secs_f64() < enough_time || busy < STEP_MIN_BUSY {
            return None;
        }
        let streams = s.ready;
        let throughput = s.step.bytes as f64 / busy.as_secs_f64();
        let bytes = s.step.bytes;
        // No slower than the streams' share of the step's throughput; larger answers that took
        // no longer than the shortest one measure no bandwidth limit.
        let per_stream = throughput / streams.max(1) as f64;
        if s.step.extra_bytes > 0.0 {
            s.transfer_rate = Some(s.step.extra_bytes / s.step.extra_seconds.max(1e-6));
        }
        let paced_by_streams = !self.queued || s.step.backlog;
        s.step = Step::new();
        let before = s.current;
        if s.busy_since.is_some() {
            s.busy_since = Some(now);
        }
        s.last_rate = Some(s.transfer_rate.map_or(per_stream, |r| r.max(per_stream)));
        let decision = match (self.adaptive, paced_by_streams) {
            (true, true) => decide(&mut s, streams, throughput, self.max),
            (true, false) => "keep",
            (false, _) => "fixed",
        };
        if s.steps.len() < STEPS_KEPT {
            s.steps.push(StreamStep {
                streams: streams as u64,
                bytes,
                seconds: busy.as_secs_f64(),
                throughput,
                decision,
            });
        }
        if s.current != before {
            s.step = Step::after_change(s.in_flight);
            return Some(s.current);
        }
        None
    }

    /// The server pushed back: halve the count, and never grow past it again. Returns the new count.
    /// The refusals of one burst (every request in flight may get one) halve it once: a pushback
    /// within [`PUSHBACK_QUIET`] (or a round trip, if longer) of the last one is the same.
    pub fn pushback(&self) -> usize {
        let mut s = self.lock();
        let quiet = s.round_trip().unwrap_or_default().max(PUSHBACK_QUIET);
        if !self.adaptive || s.pushed_back.is_some_and(|t| t.elapsed() < quiet) {
            return s.current;
        }
        s.pushed_back = Some(Instant::now());
        let halved = (s.current / 2).max(1);
        if halved < s.current {
            s.current = halved;
            s.ceiling = halved;
            s.step = Step::new();
            let streams = s.ready as u64;
            if s.steps.len() < STEPS_KEPT {
                s.steps.push(StreamStep {
                    streams,
                    bytes: 0,
                    seconds: 0.0,
                    throughput: 0.0,
                    decision: "pushback",
                });
            }
        }
        s.current
    }
}

impl State {
    /// The round trip: the shortest request's time, less its own bytes' transfer once the
    /// transfer rate is known (on a narrow link every request carries bytes for a while).
    fn round_trip(&self) -> Option<Duration> {
        let (took, bytes) = self.shortest?;
        let transfer = self.transfer_rate.map_or(0.0, |r| bytes as f64 / r);
        Some(took.saturating_sub(Duration::from_secs_f64(transfer.min(took.as_secs_f64()))))
    }

    /// No growth left (the ceiling is reached) and every stream asked for is ready.
    fn settled(&self) -> bool {
        self.current >= self.ceiling && self.ready >= self.current
    }
}

/// After a step at `streams` measured `throughput`: grow, keep, or go back.
fn decide(s: &mut State, streams: usize, throughput: f64, max: usize) -> &'static str {
    if streams < s.current {
        // Still waiting for the streams asked for: nothing to decide, nor to compare with later
        // (a count between two tried ones would make the next doubling look useless).
        return "keep";
    }
    let best = match s.measured.iter_mut().find(|(n, _)| *n == streams) {
        Some((_, t)) => {
            *t = t.max(throughput);
            *t
        }
        None => {
            s.measured.push((streams, throughput));
            throughput
        }
    };
    // The best smaller count measured, to compare the growth against.
    let below = s
        .measured
        .iter()
        .filter(|(n, _)| *n < streams)
        .max_by_key(|(n, _)| *n)
        .copied();
    if let Some((fewer, before)) = below {
        if best < before * GROWTH_THAT_HELPS {
            if s.doubted != Some(streams) && s.current == streams {
                s.doubted = Some(streams);
                return "keep";
            }
            // More streams did not help, twice: the link or the server is the limit, not the
            // streams. After a jump of two doublings, the one between is tried next.
            let back = (streams / 2).max(fewer);
            s.ceiling = s.ceiling.min(back);
            if s.current > back {
                s.current = back;
                return "back";
            }
            return "keep";
        }
    }
    // Throughput that grew with the streams (each stream is capped, not the link): jump two
    // doublings at once, the measure after it tells whether that was too far.
    let linear = below.is_some_and(|(fewer, before)| {
        throughput >= before * LINEAR_GROWTH * (streams as f64 / fewer as f64) / 2.0
    });
    let factor = if linear { 4 } else { 2 };
    let next = (streams * factor).min(max).min(s.ceiling);
    if next > s.current {
        s.current = next;
        s.peak = s.peak.max(next);
        return "grow";
    }
    "keep"
}

impl Streams {
    /// The byte budget per request to cut a read of `total` bytes, planned as `requests`
    /// requests, into about as many as there are streams, or None to keep it as planned. Only
    /// where the link is measured to be bandwidth-bound: one stream would take longer than a
    /// round trip to carry the read; before any measurement, for reads of [`SPREAD_UNMEASURED`]
    /// bytes or more.
    pub fn spread(&self, total: u64, requests: usize) -> Option<u64> {
        let s = self.lock();
        let bandwidth_bound = match (s.last_rate, s.round_trip()) {
            (Some(rate), Some(round_trip)) => total as f64 / rate >= round_trip.as_secs_f64(),
            _ => total >= SPREAD_UNMEASURED,
        };
        if !bandwidth_bound {
            return None;
        }
        spread_bytes(total, requests, s.current)
    }
}

impl Streams {
    /// With a queue in front of the streams (XRootD: a connection takes a request only while it
    /// has room, see `xrootd::dispatch`), the byte budget per request to cut a read of `total`
    /// bytes planned as `requests` (fewer than there are streams): pieces of about one stream's
    /// bandwidth-delay product (at least [`MIN_PIECE`]), and at least as many as there are
    /// streams, so that every stream — and every stream added while the read is under way —
    /// takes a part. Only for reads one stream would need more than a round trip to carry; before
    /// any measurement, reads of [`SPREAD_UNMEASURED`] or more, in pieces of
    /// [`QUEUED_PIECE_UNMEASURED`]. Fixed or settled counts cut as [`Streams::spread`] does.
    pub fn pieces(&self, total: u64, requests: usize) -> Option<u64> {
        if !self.adaptive || self.lock().settled() {
            return self.spread(total, requests);
        }
        let s = self.lock();
        if requests >= s.current {
            return None;
        }
        let piece = match (s.last_rate, s.round_trip()) {
            (Some(rate), Some(round_trip)) => {
                if (total as f64 / rate) < round_trip.as_secs_f64() {
                    return None;
                }
                (rate * round_trip.as_secs_f64()) as u64
            }
            _ if total >= SPREAD_UNMEASURED => QUEUED_PIECE_UNMEASURED,
            _ => return None,
        };
        let by_size = total / piece.max(MIN_PIECE);
        let pieces = by_size.max(s.current as u64).min(total / MIN_PIECE);
        (pieces > requests as u64).then(|| total.div_ceil(pieces.max(1)))
    }

    /// Most bytes one stream should have in flight with a queue in front of the streams: about
    /// [`WINDOW_PRODUCTS`] of its bandwidth-delay products, at least [`WINDOW_MIN`]. None (no
    /// limit: everything goes out at once) for fixed counts, before the first measurement (no
    /// stream can join before it: the first reads, the file's opening ones, would wait a round
    /// trip for nothing), and once the count has settled: no stream will join to take queued
    /// work, and a window measured through a queueing link would only hold it back.
    pub fn window(&self) -> Option<u64> {
        let s = self.lock();
        if !self.adaptive || s.settled() {
            return None;
        }
        let (rate, round_trip) = (s.last_rate?, s.round_trip()?);
        let product = rate * round_trip.as_secs_f64() * WINDOW_PRODUCTS;
        Some((product as u64).max(WINDOW_MIN))
    }

    /// Streams to have ready ahead of need: the next doubling's (never past the ceiling).
    pub fn ahead(&self) -> usize {
        let s = self.lock();
        (2 * s.current).min(s.ceiling).max(s.current)
    }
}

/// Pieces of at least [`MIN_PIECE`] bytes, about `streams` of them, if more than `requests`.
fn spread_bytes(total: u64, requests: usize, streams: usize) -> Option<u64> {
    if streams <= 1 || requests >= streams || total < 2 * MIN_PIECE {
        return None;
    }
    let pieces = streams.min((total / MIN_PIECE) as usize).max(1) as u64;
    (pieces > requests as u64).then(|| total.div_ceil(pieces))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(streams: &Streams, n: usize, throughput: f64) -> usize {
        let mut s = streams.lock();
        decide(&mut s, n, throughput, streams.max);
        s.current
    }

    /// A request of `bytes` that took `ms`, over now.
    fn answer_on(streams: &Streams, ms: u64, bytes: u64) -> Option<usize> {
        streams.started();
        streams.finished(Instant::now() - Duration::from_millis(ms), bytes)
    }

    #[test]
    fn grows_while_throughput_grows_and_goes_back_when_it_stops() {
        // Each connection capped at 10 MB/s, the link at 45 MB/s.
        let streams = Streams::new(2, 16, true);
        assert_eq!(step(&streams, 2, 20e6), 4);
        assert_eq!(step(&streams, 4, 30e6), 8, "1.5x: one doubling more");
        assert_eq!(step(&streams, 8, 45e6), 16);
        assert_eq!(
            step(&streams, 16, 47e6),
            16,
            "one step alone does not go back"
        );
        assert_eq!(step(&streams, 16, 46e6), 8);
        // and stays there
        assert_eq!(step(&streams, 8, 44e6), 8);
        assert_eq!(streams.peak(), 16);
        // growth that keeps pace with the streams jumps two doublings
        let streams = Streams::new(2, 16, true);
        assert_eq!(step(&streams, 2, 20e6), 4);
        assert_eq!(step(&streams, 4, 40e6), 16);
        assert_eq!(step(&streams, 16, 45e6), 16);
        assert_eq!(step(&streams, 16, 45e6), 8, "too far: the count between");
        assert_eq!(step(&streams, 8, 44e6), 8);
        assert_eq!(step(&streams, 8, 44e6), 4, "no better than 4");
        assert_eq!(step(&streams, 4, 41e6), 4);
    }

    #[test]
    fn a_shared_cap_keeps_the_count_and_pushback_halves_it() {
        let streams = Streams::new(2, 16, true);
        assert_eq!(step(&streams, 2, 20e6), 4);
        assert_eq!(step(&streams, 4, 14e6), 4, "noise, maybe: measured again");
        assert_eq!(step(&streams, 4, 21e6), 2);
        assert_eq!(step(&streams, 2, 20e6), 2);
        let streams = Streams::new(8, 16, true);
        assert_eq!(streams.pushback(), 4);
        assert_eq!(streams.pushback(), 4, "one burst of refusals halves once");
        assert_eq!(step(&streams, 4, 40e6), 4, "no growth past a pushback");
        assert_eq!(streams.steps()[0].decision, "pushback");
    }

    #[test]
    fn fixed_counts_do_not_move() {
        let streams = Streams::new(2, 16, false);
        assert_eq!(streams.max(), 2);
        assert_eq!(streams.pushback(), 2);
        let t = Instant::now();
        for _ in 0..10 {
            streams.started();
            std::thread::sleep(Duration::from_millis(1));
            assert_eq!(streams.finished(t, 10 << 20), None);
        }
        assert_eq!(streams.current(), 2);
        assert!(streams.steps().iter().all(|s| s.decision == "fixed"));
    }

    #[test]
    fn steps_are_measured_from_requests() {
        let streams = Streams::new(2, 16, true);
        // A first answer as short as the round trip: 10 ms.
        answer_on(&streams, 10, 0);
        let sent = Instant::now();
        streams.started();
        streams.started();
        // Busy for 60 ms (the step has its two round trips), 50 of them carrying bytes.
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(streams.finished(sent, 1 << 20), None);
        // 4 MiB in the busy time: a step, and a first one grows.
        assert_eq!(streams.finished(sent, 3 << 20), Some(4));
        let steps = streams.steps();
        assert_eq!((steps[0].streams, steps[0].bytes), (2, 4 << 20));
        assert!(steps[0].throughput > 0.0);
        // Measured at about 40 MB/s per stream past 10 ms round trips: a read that one stream
        // carries within a round trip stays whole, a larger one is spread.
        assert_eq!(streams.spread(512 << 10, 1), None);
        assert_eq!(streams.spread(100 << 20, 1), Some(25 << 20));
        // Growing (4 asked, 2 ready): a queue in front of the streams gets pieces of about one
        // stream's bandwidth-delay product (here the smallest piece), and a window.
        assert_eq!(streams.pieces(100 << 20, 1), Some(MIN_PIECE));
        assert_eq!(streams.pieces(512 << 10, 1), None);
        assert_eq!(streams.window(), Some(WINDOW_MIN));
        assert_eq!(streams.ahead(), 8);
        // Settled (4 did no better: back to 2, which is ready): cut as for a fixed count, no window.
        streams.set_ready(4);
        assert_eq!(step(&streams, 4, 1.0), 4);
        assert_eq!(step(&streams, 4, 1.0), 2);
        streams.set_ready(2);
        assert_eq!(streams.window(), None);
        assert_eq!(streams.pieces(100 << 20, 1), Some(50 << 20));
        assert_eq!(streams.ahead(), 2);
        // A fixed count never queues.
        assert_eq!(Streams::new(2, 16, false).window(), None);
    }

    #[test]
    fn answers_as_short_as_a_round_trip_measure_no_bandwidth_limit() {
        // A small answer and 2 MiB ones all took the round trip (20 ms) and no longer: the link
        // is latency-bound, and a large read is not cut for the streams.
        let streams = Streams::new(2, 16, true);
        answer_on(&streams, 20, 64 << 10);
        streams.started();
        std::thread::sleep(Duration::from_millis(60));
        for _ in 0..4 {
            answer_on(&streams, 20, 2 << 20);
        }
        assert_eq!(streams.steps().len(), 1);
        assert_eq!(streams.spread(100 << 20, 1), None);
        assert_eq!(streams.pieces(100 << 20, 1), None);
    }

    #[test]
    fn equal_answers_on_a_narrow_link_are_not_taken_for_latency() {
        // 40 MB/s per stream, 30 ms away: 2 MB answers take 80 ms, 4 MB ones 130 ms. The
        // shortest request carried bytes for 50 ms: the round trip is 30 ms, the rate 40 MB/s,
        // so a stream's window is a couple of its products, not everything at once.
        let streams = Streams::new(2, 16, true).with_queue();
        answer_on(&streams, 80, 2_000_000);
        streams.started();
        std::thread::sleep(Duration::from_millis(200));
        answer_on(&streams, 130, 4_000_000);
        answer_on(&streams, 80, 2_000_000);
        assert_eq!(streams.steps().len(), 1);
        let s = streams.lock();
        let rate = s.transfer_rate.unwrap();
        assert!((rate - 40e6).abs() < 4e6, "{rate}");
        let round_trip = s.round_trip().unwrap().as_secs_f64();
        assert!((round_trip - 0.03).abs() < 0.005, "{round_trip}");
        drop(s);
        let window = streams.window().unwrap();
        assert!(window < 4_000_000, "{window}");
        // The same when the larger answer comes first (a file's opening reads).
        let streams = Streams::new(2, 16, true).with_queue();
        streams.started();
        std::thread::sleep(Duration::from_millis(200));
        answer_on(&streams, 130, 4_000_000);
        answer_on(&streams, 80, 2_000_000);
        let rate = streams.lock().transfer_rate.unwrap();
        assert!((rate - 40e6).abs() < 4e6, "{rate}");
    }

    #[test]
    fn with_a_queue_only_steps_with_a_backlog_decide() {
        let streams = Streams::new(2, 16, true).with_queue();
        let busy_step = |backlog: bool| {
            streams.started();
            std::thread::sleep(Duration::from_millis(60));
            if backlog {
                streams.backlog();
            }
            streams.finished(Instant::now() - Duration::from_millis(10), 4 << 20)
        };
        assert_eq!(
            busy_step(false),
            None,
            "the reader set the pace: nothing to decide"
        );
        assert_eq!(streams.steps()[0].decision, "keep");
        assert_eq!(
            busy_step(true),
            Some(4),
            "requests waited for the streams: grow"
        );
    }

    #[test]
    fn reads_are_spread_only_when_large_and_too_few() {
        assert_eq!(spread_bytes(100 << 20, 1, 4), Some(25 << 20));
        assert_eq!(spread_bytes(100 << 20, 4, 4), None);
        assert_eq!(
            spread_bytes(600 << 10, 1, 8),
            None,
            "pieces would be too small"
        );
        assert_eq!(spread_bytes(2 << 20, 1, 8), Some(512 << 10));
        assert_eq!(spread_bytes(100 << 20, 1, 1), None);
    }
}
