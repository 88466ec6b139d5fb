//! The read engine on an in-memory source (`source::memory`), in seconds and without servers:
//! how reads are planned into requests, how prefetching is bounded and cancelled, what each
//! learning cache costs in requests, and how replicas share and survive a read.

mod support;

use cherenkov_core::engine::file::RootFile;
use cherenkov_core::engine::lazy::{AccessProfile, LazyOptions, LazyReader};
use cherenkov_core::engine::prefetch::{ReadAhead, StepReader};
use cherenkov_core::engine::tree::{read_branches, TreeTable};
use cherenkov_core::format::tree::TreeMeta;
use cherenkov_core::source::memory::MemorySource;
use cherenkov_core::source::multi::{MultiOptions, MultiSource};
use cherenkov_core::source::{ByteSource, Opened, SharedSource};
use std::sync::Arc;
use std::time::Duration;
use support::{bounded, shared_testdata};

/// 2000 entries in 4 clusters of 500, NanoAOD's schema, written by ROOT 6.40.
const FILE: &str = "nanolike-root6.40-zstd-4clusters.root";

/// The test file as a memory source, opened; `None` (skipped) without the shared test data.
async fn open() -> Option<(Arc<MemorySource>, Arc<TreeTable>, Arc<TreeMeta>)> {
    let bytes = std::fs::read(shared_testdata()?.join(FILE)).expect("read the test file");
    let source = Arc::new(MemorySource::new(FILE, bytes));
    let (table, tree) = tree_of(source.clone()).await;
    Some((source, table, tree))
}

/// The tree of the test file read through `source`.
async fn tree_of(source: SharedSource) -> (Arc<TreeTable>, Arc<TreeMeta>) {
    let file = Arc::new(
        RootFile::open(Opened::plain(source), &Default::default())
            .await
            .expect("open"),
    );
    let tree = Arc::new(file.tree("Events").await.expect("the tree"));
    (Arc::new(TreeTable::new(file, tree.clone())), tree)
}

/// Indices of the first `n` branches that hold numbers directly (no sub-branches).
fn some_branches(tree: &TreeMeta, n: usize) -> Vec<usize> {
    (0..tree.branches.len())
        .filter(|&b| tree.branches[b].children.is_empty() && !tree.branches[b].baskets.is_empty())
        .take(n)
        .collect()
}

fn clusters(tree: &TreeMeta) -> Vec<(u64, u64)> {
    let b = tree.cluster_boundaries();
    b.windows(2).map(|w| (w[0], w[1])).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_of_many_branches_is_one_request_of_their_baskets() {
    bounded(async {
        let Some((source, table, tree)) = open().await else {
            return;
        };
        let branches = some_branches(&tree, 40);
        let (start, stop) = clusters(&tree)[1];
        let before = source.requests().len();
        let (arrays, stats) = read_branches(&table, &branches, start, stop).await.unwrap();
        let requests = &source.requests()[before..];
        assert_eq!(requests.len(), 1, "one request for the whole read");
        assert_eq!(requests[0].len() as u64, stats.baskets);
        assert!(arrays.iter().all(|a| a.array.len() as u64 == stop - start));
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefetching_reads_ahead_within_its_depth_and_a_dropped_reader_stops() {
    bounded(async {
        let Some((source, table, tree)) = open().await else {
            return;
        };
        source.set_delay(Duration::from_millis(100));
        let branches = some_branches(&tree, 20);
        let options = ReadAhead {
            memory_budget: 1 << 30,
            steps: 2,
            ..ReadAhead::default()
        };
        let before = source.requests().len();
        let mut reader = StepReader::start(table.clone(), branches, clusters(&tree), options)
            .await
            .unwrap();
        let first = reader.next().await.unwrap().unwrap();
        assert_eq!((first.start, first.stop), clusters(&tree)[0]);
        // While the first step is held, the next ones are on their way together.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(source.most_in_flight() >= 2, "{}", source.most_in_flight());
        assert!(
            source.requests().len() - before <= 3,
            "at most 3 steps in flight"
        );
        drop(first);
        drop(reader);
        let sent = source.requests().len();
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(
            source.requests().len(),
            sent,
            "nothing is sent after the reader is dropped"
        );
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_memory_budget_reads_one_step_at_a_time() {
    bounded(async {
        let Some((source, table, tree)) = open().await else {
            return;
        };
        source.set_delay(Duration::from_millis(20));
        let branches = some_branches(&tree, 20);
        let options = ReadAhead {
            memory_budget: 1,
            steps: 3,
            ..ReadAhead::default()
        };
        let mut reader = StepReader::start(table.clone(), branches, clusters(&tree), options)
            .await
            .unwrap();
        let mut steps = 0;
        while let Some(step) = reader.next().await {
            step.unwrap();
            steps += 1;
        }
        assert_eq!(steps, 4);
        assert_eq!(
            source.most_in_flight(),
            1,
            "no step read ahead beyond the budget"
        );
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_larger_than_the_budget_is_read_in_parts_of_whole_branches() {
    bounded(async {
        let Some((source, table, tree)) = open().await else {
            return;
        };
        let branches = some_branches(&tree, 40);
        let whole = (0, tree.entries);
        let (expected, stats) = read_branches(&table, &branches, whole.0, whole.1)
            .await
            .unwrap();
        // A budget of a quarter of what the step holds: at least four parts, each one request.
        let budget = (stats.compressed_bytes + stats.uncompressed_bytes) / 4;
        let options = ReadAhead {
            memory_budget: budget,
            steps: 3,
            ..ReadAhead::default()
        };
        let before = source.requests().len();
        let mut reader = StepReader::start(table.clone(), branches, vec![whole], options)
            .await
            .unwrap();
        let step = reader.next().await.unwrap().unwrap();
        let requests = &source.requests()[before..];
        assert!(requests.len() >= 4, "{} parts", requests.len());
        let largest: u64 = requests
            .iter()
            .map(|r| r.iter().map(|range| range.len).sum::<u64>())
            .max()
            .unwrap();
        assert!(largest <= budget, "a part of {largest} bytes");
        assert_eq!(step.arrays, expected, "the same arrays as one read");
        assert_eq!(step.stats.baskets, stats.baskets);
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_learning_caches_cost_one_request_each() {
    bounded(async {
        let Some((source, table, tree)) = open().await else {
            return;
        };
        let used = some_branches(&tree, 3);
        let trigger = some_branches(&tree, 10)[9];
        let profile = Arc::new(AccessProfile::default());
        let mut lazy = LazyReader::new(
            table.clone(),
            clusters(&tree),
            profile.clone(),
            LazyOptions::default(),
        );
        let mut requests_per_chunk = Vec::new();
        let mut k = 0;
        while lazy.advance().await.unwrap().is_some() {
            let before = source.requests().len();
            for &b in &used {
                lazy.get(b).await.unwrap();
            }
            if k == 2 {
                lazy.get(trigger).await.unwrap(); // a trigger fires in one chunk
            }
            requests_per_chunk.push(source.requests().len() - before);
            k += 1;
        }
        // Startup: every branch of the first chunk in one request; then the learned set is
        // prefetched (requests sent ahead, none while the chunk is used); the trigger costs one.
        assert_eq!(requests_per_chunk[0], 1, "{requests_per_chunk:?}");
        assert_eq!(lazy.stats.startup_fetches, 1);
        assert_eq!(lazy.stats.miss_fetches, 1);
        assert!(lazy.stats.hits >= 3 * used.len() as u64, "{:?}", lazy.stats);
        let learned = profile.snapshot().learned;
        assert!(used.iter().all(|&b| learned.contains(&tree.branch_path(b))));
        assert!(profile
            .snapshot()
            .missed
            .contains(&tree.branch_path(trigger)));
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_a_read_and_survive_a_failing_one() {
    bounded(async {
        let Some((_, table, tree)) = open().await else {
            return;
        };
        let bytes = std::fs::read(shared_testdata().unwrap().join(FILE)).unwrap();
        let near = Arc::new(MemorySource::new("near", bytes.clone()));
        let far = Arc::new(MemorySource::new("far", bytes.clone()));
        near.set_delay(Duration::from_millis(5));
        far.set_delay(Duration::from_millis(300));
        let sources: Vec<SharedSource> = vec![near.clone(), far.clone()];
        let multi = MultiSource::new(sources, MultiOptions::default())
            .await
            .unwrap();
        let (replicas, _) = tree_of(Arc::new(multi)).await;
        let branches = some_branches(&tree, 200);
        // Learn the qualities, then read: the far replica serves little or nothing.
        for &(start, stop) in &clusters(&tree)[..2] {
            read_branches(&replicas, &branches, start, stop)
                .await
                .unwrap();
        }
        let (start, stop) = clusters(&tree)[2];
        let far_bytes = far.report().counters.bytes;
        let (got, _) = read_branches(&replicas, &branches, start, stop)
            .await
            .unwrap();
        let (want, _) = read_branches(&table, &branches, start, stop).await.unwrap();
        assert_eq!(got, want);
        let replica_reports = replicas.file.source.report().replicas.unwrap();
        assert!(
            replica_reports[0].bytes > replica_reports[1].bytes,
            "{replica_reports:?}"
        );
        assert!(far.report().counters.bytes - far_bytes < near.report().counters.bytes / 4);
        // The near one fails: the read goes to the far one, and the near one is disabled.
        near.fail_next(100);
        let (start, stop) = clusters(&tree)[3];
        let (got, _) = read_branches(&replicas, &branches, start, stop)
            .await
            .unwrap();
        let (want, _) = read_branches(&table, &branches, start, stop).await.unwrap();
        assert_eq!(got, want);
        let reports = replicas.file.source.report().replicas.unwrap();
        assert!(reports[0].errors >= 1 && reports[0].disabled, "{reports:?}");
    })
    .await
}
