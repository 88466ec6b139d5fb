//! One replica of a set: its source, its measured quality, its counters, and how a failure
//! disables it for a while; and the finder that may bring one more.

use super::quality::Quality;
use crate::error::Result;
use crate::source::{is_file_changed, ByteRange, SharedSource};
use async_trait::async_trait;
use bytes::Bytes;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// States of a replica in [`ReplicaReport::state`]: reading, not opened yet (see `opening`), or
/// left out for good.
pub const IN_USE: &str = "in use";
pub const OPENING: &str = "opening";
pub const DROPPED: &str = "dropped";

/// Finds one more replica of the file when every known one has failed.
#[async_trait]
pub trait ReplicaFinder: Send + Sync + std::fmt::Debug {
    /// A source on a server none of the replicas so far uses (the finder keeps track of them).
    async fn find(&self) -> Result<SharedSource>;
}

/// Per-replica counters and state, for statistics and plots.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(
    feature = "python",
    pyo3::pyclass(module = "cherenkov._core", get_all, frozen)
)]
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
    /// "in use", "opening" (not answered yet: it joins when it does) or "dropped" (could not be
    /// opened, or holds another file: `last_error` says why).
    pub state: String,
}

impl ReplicaReport {
    /// A replica named `name` that has done nothing yet.
    pub fn new(name: &str) -> ReplicaReport {
        ReplicaReport {
            name: name.to_string(),
            requests: 0,
            bytes: 0,
            errors: 0,
            hedges_won: 0,
            probes: 0,
            quality: Quality::prior(),
            disabled: false,
            last_error: None,
            state: IN_USE.to_string(),
        }
    }
}

#[derive(Debug)]
pub struct Replica {
    pub source: SharedSource,
    pub state: Mutex<ReplicaState>,
}

impl Replica {
    /// Read `ranges`, timing it for the quality estimate; a failure disables the replica for
    /// `disable_for`, doubled for each failure in a row; a file changed on its server drops it.
    pub async fn read_timed(
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
                if is_file_changed(e) {
                    // Its bytes are another file's now: never read from it again.
                    st.report.state = DROPPED.to_string();
                }
                st.failures_in_row += 1;
                let backoff = disable_for * 2u32.saturating_pow(st.failures_in_row.min(6) - 1);
                st.disabled_until = Some(Instant::now() + backoff);
                st.report.errors += 1;
                st.report.last_error = Some(e.to_string());
            }
        }
        answer
    }

    pub fn new(source: SharedSource) -> Replica {
        let prior = Quality::prior();
        Replica {
            state: Mutex::new(ReplicaState {
                quality: prior,
                disabled_until: None,
                failures_in_row: 0,
                report: ReplicaReport::new(source.name()),
            }),
            source,
        }
    }
}

#[derive(Debug)]
pub struct ReplicaState {
    pub quality: Quality,
    pub disabled_until: Option<Instant>,
    pub failures_in_row: u32,
    pub report: ReplicaReport,
}
