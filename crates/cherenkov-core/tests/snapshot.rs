//! A file opened again from the metadata snapshot of an earlier open (what a dataset's driver
//! hands its workers) reads none of its metadata again and reads the same values, TTree and
//! RNTuple alike; the snapshot is a small part of what the first open read; a file whose size or
//! version is not the snapshot's is refused as changed.

mod support;

use bytes::Bytes;
use cherenkov_core::engine::file::{MetadataSnapshot, RootFile};
use cherenkov_core::engine::ntuple::Ntuple;
use cherenkov_core::engine::table::{read, Held, Table};
use cherenkov_core::engine::tree::TreeTable;
use cherenkov_core::source::memory::MemorySource;
use cherenkov_core::source::{is_file_changed, ByteSource, Opened};
use std::sync::Arc;
use support::{bounded, shared_testdata};

const TREE_FILE: &str = "nanolike-root6.40-zstd-4clusters.root";
const NTUPLE_FILE: &str = "test_multiple_cluster_groups_rntuple_v1-0-0-0.root";

fn memory(name: &str) -> Option<Arc<MemorySource>> {
    let bytes = std::fs::read(shared_testdata()?.join(name)).expect("read the test file");
    Some(Arc::new(MemorySource::new(name, bytes)))
}

/// `source`'s file opened as `known` says, checked to have asked for nothing.
async fn reopen(source: &Arc<MemorySource>, known: &MetadataSnapshot) -> Arc<RootFile> {
    let bytes = known.to_bytes();
    let known = MetadataSnapshot::from_bytes(&bytes).expect("the snapshot reads back");
    let opened = Opened::plain(source.clone());
    let file = RootFile::open_as_known(opened, &Default::default(), known)
        .await
        .expect("open from the snapshot");
    Arc::new(file)
}

fn bytes_asked(source: &MemorySource) -> u64 {
    source.requests().iter().flatten().map(|r| r.len).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_opened_from_its_snapshot_reads_no_metadata_and_the_same_values() {
    bounded(async {
        let Some(first) = memory(TREE_FILE) else {
            return;
        };
        let file = Arc::new(
            RootFile::open(Opened::plain(first.clone()), &Default::default())
                .await
                .unwrap(),
        );
        let tree = Arc::new(file.tree("Events").await.unwrap());
        let snapshot = file.snapshot();
        let opening_read = bytes_asked(&first);
        // The tree's metadata and a few hundred bytes, not the head and tail read around them.
        assert!(snapshot.region_bytes() < opening_read / 2, "{snapshot:?}");
        assert_eq!(snapshot.size, first.size());

        let again = memory(TREE_FILE).unwrap();
        let reopened = reopen(&again, &snapshot).await;
        let same_tree = Arc::new(reopened.tree("Events").await.unwrap());
        assert!(again.requests().is_empty(), "{:?}", again.requests());
        assert_eq!(same_tree.cluster_boundaries(), tree.cluster_boundaries());
        assert_eq!(
            reopened.snapshot(),
            snapshot,
            "a snapshot of a snapshot is itself"
        );

        let branches: Vec<usize> = (0..tree.branches.len())
            .filter(|&b| {
                tree.branches[b].children.is_empty() && !tree.branches[b].baskets.is_empty()
            })
            .take(30)
            .collect();
        let entries = tree.entries;
        let (a, _) = read(
            &Arc::new(TreeTable::new(file, tree)),
            &branches,
            0,
            entries,
            &Held::new(),
        )
        .await
        .unwrap();
        let (b, _) = read(
            &Arc::new(TreeTable::new(reopened, same_tree)),
            &branches,
            0,
            entries,
            &Held::new(),
        )
        .await
        .unwrap();
        assert_eq!(again.requests().len(), 1, "one request, for the data only");
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(format!("{:?}", x.array), format!("{:?}", y.array));
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ntuple_opened_from_its_snapshot_reads_no_metadata_and_the_same_values() {
    bounded(async {
        let Some(first) = memory(NTUPLE_FILE) else {
            return;
        };
        let file = Arc::new(
            RootFile::open(Opened::plain(first.clone()), &Default::default())
                .await
                .unwrap(),
        );
        let ntuple = Arc::new(Ntuple::open(file.clone(), "ntuple").await.unwrap());
        let bounds = ntuple.cluster_boundaries().await.unwrap();
        let snapshot = file.snapshot();

        let again = memory(NTUPLE_FILE).unwrap();
        let reopened = reopen(&again, &snapshot).await;
        let same = Arc::new(Ntuple::open(reopened, "ntuple").await.unwrap());
        assert_eq!(same.cluster_boundaries().await.unwrap(), bounds);
        assert!(again.requests().is_empty(), "{:?}", again.requests());
        let items: Vec<usize> = (0..ntuple.item_count()).collect();
        let entries = ntuple.entries();
        let (a, _) = read(&ntuple, &items, 0, entries, &Held::new())
            .await
            .unwrap();
        let (b, _) = read(&same, &items, 0, entries, &Held::new()).await.unwrap();
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(format!("{:?}", x.array), format!("{:?}", y.array));
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_of_another_size_or_version_than_its_snapshot_is_refused_as_changed() {
    bounded(async {
        let Some(source) = memory(TREE_FILE) else {
            return;
        };
        let file = RootFile::open(Opened::plain(source.clone()), &Default::default())
            .await
            .unwrap();
        file.tree("Events").await.unwrap();
        let snapshot = file.snapshot();
        let versioned = |version: &str| Opened {
            version: Some(version.into()),
            ..Opened::plain(source.clone())
        };
        let cases = [
            (
                Opened::plain(Arc::new(MemorySource::new(
                    TREE_FILE,
                    Bytes::from(vec![0u8; source.size() as usize + 1]),
                ))),
                None,
            ),
            (versioned("etag b"), Some("etag a")),
        ];
        for (opened, known_version) in cases {
            let known = MetadataSnapshot {
                version: known_version.map(str::to_string),
                ..snapshot.clone()
            };
            let e = RootFile::open_as_known(opened, &Default::default(), known)
                .await
                .unwrap_err();
            assert!(is_file_changed(&e), "{e}");
            assert!(
                e.to_string().contains("when its metadata was learned"),
                "{e}"
            );
        }
        // The same version (or none known on one side) opens.
        let known = MetadataSnapshot {
            version: Some("etag a".into()),
            ..snapshot
        };
        RootFile::open_as_known(versioned("etag a"), &Default::default(), known)
            .await
            .unwrap();
    })
    .await
}
