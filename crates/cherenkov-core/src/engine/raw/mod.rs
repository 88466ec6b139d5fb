//! Raw reads: byte ranges for readers that decode ROOT themselves (uproot through
//! `cherenkov.uproot.Source`, or over fsspec's `cherenkov://`), which ask for bytes without
//! saying what they are. For a ROOT file each range asked for is known here as what it is:
//!
//! - metadata the engine read already (the opening's head and tail, a tree's key, the streamer
//!   infos): served from memory;
//! - a basket of one of the file's TTrees (see `index.rs`; a tree is indexed when its key is first
//!   read, the streamer infos fetched with it): the engine's learning applies (`learning.rs`),
//!   what it brings is held until asked for (`held.rs`), and a file whose trees are laid out as
//!   an earlier file's has its first window fetched as soon as its tree is known (`layouts.rs`);
//! - anything else: read as asked, small regions kept as metadata.
//!
//! Learning and read-ahead follow the file's `speculate` switch: off, every range is read as asked
//! (metadata still from memory). Any file, ROOT or not: `ahead.rs` reads sequential and strided
//! patterns ahead.

pub mod ahead;
mod file;
mod held;
mod index;
pub mod layouts;
mod learning;

use super::file::RootFile;
use crate::error::{Error, Result};
use crate::format::tree::TreeMeta;
use crate::source::ByteRange;
use bytes::Bytes;
pub use file::RawFile;
use held::{Answer, Held, Slot};
use index::{BasketAt, TreeIndex};
use learning::{Fetch, TreeLearning};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// Bytes of baskets held ahead of the reader, at most, per file.
const HELD_BUDGET: u64 = 256 << 20;
/// Bytes one request may bring beyond what was asked (as lazy chunks' startup reads).
const EXTRA_BYTES: u64 = 64 << 20;
/// Bytes of trees' keys fetched before uproot asks for them, at most.
const PREPARED_BYTES: u64 = 16 << 20;

/// A ROOT file read by a reader that decodes it itself; see the module documentation.
pub struct RawReads {
    file: Arc<RootFile>,
    prepared: tokio::sync::OnceCell<()>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    trees: Vec<(TreeIndex, TreeLearning)>,
    by_offset: HashMap<u64, (BasketAt, u64)>,
    /// Keys of trees indexed, or tried (a tree that cannot be parsed is read as plain bytes).
    indexed: HashSet<u64>,
    held: Held,
    /// Bytes the reader asked for: what the guesses' unused bytes are weighed against.
    requested: u64,
}

/// What a request needs: per range asked, its bytes if held; the ranges to fetch now (those asked
/// first, then what comes with them); and read-aheads to start.
struct Plan {
    served: Vec<Option<Slot>>,
    fetch: Vec<ByteRange>,
    asked: usize,
    /// What comes with the asked ranges, and whether each is a guess.
    extras: Vec<(BasketAt, bool)>,
    ahead: Vec<Vec<(ByteRange, BasketAt, bool)>>,
}

impl RawReads {
    pub fn new(file: Arc<RootFile>) -> Self {
        Self {
            file,
            prepared: Default::default(),
            state: Mutex::default(),
        }
    }

    pub fn file(&self) -> &Arc<RootFile> {
        &self.file
    }

    /// Read `ranges` (inside the file), one buffer per range in order, in at most one request of
    /// the reader's own (read-aheads go on requests of their own).
    pub async fn read_ranges(&self, ranges: &[ByteRange]) -> Result<Vec<Bytes>> {
        self.file.check_raw(ranges)?;
        self.prepared.get_or_init(|| self.prepare()).await;
        let learning = self.file.speculation.enabled;
        if learning {
            self.index_trees(ranges).await;
        }
        let plan = self.plan(ranges, learning);
        for batch in plan.ahead {
            self.read_ahead(batch);
        }
        let mut fetched = Vec::new();
        if !plan.fetch.is_empty() {
            let bytes: u64 = plan.fetch.iter().map(|r| r.len).sum();
            self.file.stats.record_request(bytes);
            fetched = self.file.source.read_ranges(&plan.fetch).await?;
            let mut st = self.state.lock().unwrap();
            let st = &mut *st;
            for ((r, b), (at, guessed)) in (plan.fetch.iter().zip(&fetched))
                .skip(plan.asked)
                .zip(&plan.extras)
            {
                st.held.put(
                    r.offset,
                    r.len,
                    *at,
                    Slot::Ready(b.clone()),
                    *guessed,
                    &self.file.stats,
                );
            }
        }
        let mut fetched = fetched.into_iter();
        let mut out = Vec::with_capacity(ranges.len());
        let mut failed = Vec::new();
        for (i, (r, served)) in ranges.iter().zip(plan.served).enumerate() {
            let bytes = match served {
                Some(slot) => slot.bytes().await,
                None => {
                    let b = fetched.next();
                    if let (Some(b), true) = (&b, learning) {
                        self.remember_unless_basket(r, b);
                    }
                    b
                }
            };
            if bytes.is_none() {
                failed.push(i);
            }
            out.push(bytes.unwrap_or_default());
        }
        if !failed.is_empty() {
            // A read-ahead failed: its baskets are read now, and report the error if it lasts.
            let again: Vec<ByteRange> = failed.iter().map(|&i| ranges[i]).collect();
            for (i, b) in failed
                .into_iter()
                .zip(self.file.source.read_ranges(&again).await?)
            {
                out[i] = b;
            }
        }
        for (b, r) in out.iter().zip(ranges) {
            if b.len() as u64 != r.len {
                return Err(Error::io(
                    self.file.name(),
                    format!("range {}..{} was not returned whole", r.offset, r.end()),
                ));
            }
        }
        Ok(out)
    }

    /// Forget what is held (the reader closed the file): guesses never asked for are wasted.
    pub fn close(&self) {
        self.state.lock().unwrap().held.clear(&self.file.stats);
    }

    /// What the trees of this file read so far taught: per tree path, its profile's learned set.
    pub fn learned(&self) -> BTreeMap<String, Vec<String>> {
        let st = self.state.lock().unwrap();
        (st.trees.iter())
            .map(|(index, learning)| {
                let p = learning.profile.snapshot();
                (index.meta.name.clone(), p.learned.into_iter().collect())
            })
            .collect()
    }

    fn remember_unless_basket(&self, r: &ByteRange, b: &Bytes) {
        if !self.state.lock().unwrap().by_offset.contains_key(&r.offset) {
            self.file.remember(*r, b);
        }
    }

    /// What uproot reads of a file's metadata beyond what opening read (the streamer infos, the
    /// top-level trees' keys), fetched once, in one request, at
    /// the first raw read: uproot's own reads of them are then served from memory instead of
    /// costing a round trip each.
    async fn prepare(&self) {
        let file = &self.file;
        let mut wanted = Vec::new();
        if file.header.seek_info > 0 {
            wanted.push(ByteRange::new(
                file.header.seek_info,
                file.header.info_bytes as u64,
            ));
        }
        let mut room = PREPARED_BYTES;
        for k in file.keys.iter().filter(|k| is_tree(k)) {
            if (k.nbytes as u64) <= room {
                room -= k.nbytes as u64;
                wanted.push(ByteRange::new(k.seek_key, k.nbytes as u64));
            }
        }
        wanted.retain(|r| r.len > 0 && r.end() <= file.size && !file.holds(r));
        if !wanted.is_empty() {
            // A failure leaves the reader's own reads to report it.
            let _ = file.read_metadata(&wanted).await;
        }
    }

    /// Index the trees whose keys `ranges` read (uproot reading a tree's metadata): the engine
    /// parses the tree from the key `prepare` fetched.
    async fn index_trees(&self, ranges: &[ByteRange]) {
        let keys: Vec<_> = {
            let mut st = self.state.lock().unwrap();
            let inside = |k: &crate::format::directory::Key, r: &ByteRange| {
                r.offset < k.seek_key + k.nbytes as u64 && k.seek_key < r.end()
            };
            let keys: Vec<_> = (self.file.keys.iter())
                .filter(|k| is_tree(k) && !st.indexed.contains(&k.seek_key))
                .filter(|k| ranges.iter().any(|r| inside(k, r)))
                .cloned()
                .collect();
            st.indexed.extend(keys.iter().map(|k| k.seek_key));
            keys
        };
        for key in keys {
            let path = format!("{};{}", key.name, key.cycle);
            if let Ok(meta) = self.file.tree(&path).await {
                self.add_tree(&key.name, meta);
            }
        }
    }

    /// Index a parsed tree; if its layout was read before, fetch its first window now.
    fn add_tree(&self, name: &str, meta: TreeMeta) {
        let index = TreeIndex::new(name, Arc::new(meta));
        let learning = TreeLearning::new(layouts::profile_of(index.layout));
        let first = learning.on_the_way(&index);
        let batch = {
            let mut st = self.state.lock().unwrap();
            let t = st.trees.len();
            for (branch, cluster, r) in index.all_baskets() {
                let at = BasketAt {
                    tree: t,
                    branch,
                    cluster,
                };
                st.by_offset.insert(r.offset, (at, r.len));
            }
            let batch = first
                .map(|(branches, clusters)| self.batch(&st, t, &index, &branches, clusters))
                .unwrap_or_default();
            st.trees.push((index, learning));
            batch
        };
        self.read_ahead(batch);
    }

    /// The baskets of `branches` (each with whether it is a guess) of tree `t` in `clusters`
    /// not held yet (nor in the opening's tail), within the room left.
    fn batch(
        &self,
        st: &State,
        t: usize,
        index: &TreeIndex,
        branches: &[(usize, bool)],
        clusters: std::ops::RangeInclusive<usize>,
    ) -> Vec<(ByteRange, BasketAt, bool)> {
        let mut room = HELD_BUDGET.saturating_sub(st.held.bytes());
        let mut out = Vec::new();
        for &(branch, guessed) in branches {
            for (cluster, r) in index.ranges(branch, clusters.clone()) {
                if st.held.contains(r.offset) || r.len > room || self.file.holds(&r) {
                    continue;
                }
                room -= r.len;
                let at = BasketAt {
                    tree: t,
                    branch,
                    cluster,
                };
                out.push((r, at, guessed));
            }
        }
        out
    }

    /// Fetch `batch` on a request of its own; its baskets are held from now on.
    fn read_ahead(&self, batch: Vec<(ByteRange, BasketAt, bool)>) {
        if batch.is_empty() {
            return;
        }
        let ranges: Vec<ByteRange> = batch.iter().map(|(r, _, _)| *r).collect();
        let (tx, rx) = watch::channel::<Answer>(None);
        {
            let mut st = self.state.lock().unwrap();
            for (i, (r, at, guessed)) in batch.into_iter().enumerate() {
                let slot = Slot::Pending(rx.clone(), i);
                st.held
                    .put(r.offset, r.len, at, slot, guessed, &self.file.stats);
            }
        }
        let file = self.file.clone();
        tokio::spawn(async move {
            file.stats
                .record_request(ranges.iter().map(|r| r.len).sum());
            let got = file.source.read_ranges(&ranges).await.ok();
            let _ = tx.send(Some(Arc::new(got)));
        });
    }

    /// Serve what memory holds, and decide what to fetch with the rest and what to read ahead.
    fn plan(&self, ranges: &[ByteRange], learning: bool) -> Plan {
        let stats = &self.file.stats;
        let mut st = self.state.lock().unwrap();
        let st = &mut *st;
        st.requested += ranges.iter().map(|r| r.len).sum::<u64>();
        let mut served: Vec<Option<Slot>> = Vec::with_capacity(ranges.len());
        let mut fetch = Vec::new();
        // Per tree: the branches asked, the clusters they span, whether some must be fetched.
        let mut trees: BTreeMap<usize, (BTreeSet<usize>, usize, usize, bool)> = BTreeMap::new();
        let (mut hits, mut misses) = (0, 0);
        for r in ranges {
            let basket = (st.by_offset.get(&r.offset))
                .filter(|(_, len)| learning && *len == r.len)
                .map(|(at, _)| *at);
            let e = basket.map(|at| {
                let e = (trees.entry(at.tree)).or_insert((
                    BTreeSet::new(),
                    at.cluster,
                    at.cluster,
                    false,
                ));
                e.0.insert(at.branch);
                (e.1, e.2) = (e.1.min(at.cluster), e.2.max(at.cluster));
                e
            });
            // Metadata, or a basket the opening's head or tail holds.
            if let Some(b) = self.file.held(r) {
                served.push(Some(Slot::Ready(b)));
                continue;
            }
            if let Some(e) = e {
                if let Some(slot) = st.held.take(r.offset, r.len, stats) {
                    hits += 1;
                    served.push(Some(slot));
                    continue;
                }
                misses += 1;
                e.3 = true;
            }
            served.push(None);
            fetch.push(*r);
        }
        let asked = fetch.len();
        let mut seen: HashSet<u64> = fetch.iter().map(|r| r.offset).collect();
        let guess = !(st.held.ledger).over_budget(&self.file.speculation, st.requested);
        let (mut extras, mut ahead) = (Vec::new(), Vec::new());
        let mut kinds = [0u64; 3];
        for (t, (branches, lo, hi, fetching)) in trees {
            let (index, learning) = &mut st.trees[t];
            let speculation = &self.file.speculation;
            let (more, kind, moved) =
                learning.on_request(index, &branches, lo..=hi, fetching, guess, speculation);
            if fetching {
                kinds[match kind {
                    Fetch::Startup => 0,
                    Fetch::Learned => 1,
                    Fetch::Miss => 2,
                }] += 1;
            }
            let mut bytes = 0;
            for (branch, guessed) in more {
                for (cluster, r) in index.ranges(branch, lo..=hi) {
                    let skip = st.held.contains(r.offset)
                        || bytes + r.len > EXTRA_BYTES
                        || self.file.holds(&r);
                    if skip || !seen.insert(r.offset) {
                        continue;
                    }
                    bytes += r.len;
                    fetch.push(r);
                    extras.push((
                        BasketAt {
                            tree: t,
                            branch,
                            cluster,
                        },
                        guessed,
                    ));
                }
            }
            if !guess {
                learning.stop_worst();
            }
            let next = (moved || fetching).then(|| learning.ahead(index)).flatten();
            st.held.trim(t, lo, HELD_BUDGET, stats);
            if let Some((branches, clusters)) = next {
                let (index, _) = &st.trees[t];
                ahead.push(self.batch(st, t, index, &branches, clusters));
            }
        }
        let [startup, learned, miss] = kinds;
        stats.record_cache(hits, misses, miss, startup, learned);
        Plan {
            served,
            fetch,
            asked,
            extras,
            ahead,
        }
    }
}

fn is_tree(key: &crate::format::directory::Key) -> bool {
    matches!(key.class_name.as_str(), "TTree" | "TNtuple" | "TNtupleD")
}
