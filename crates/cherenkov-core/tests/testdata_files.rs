//! Every TTree in ../shared/testdata opens, and every branch either reads (with the tree's number
//! of entries) or is refused as unsupported by name. Values are compared with uproot by the
//! Python suite; this checks the Rust core on its own.

use cherenkov_core::engine::file::RootFile;
use cherenkov_core::engine::runtime;
use cherenkov_core::engine::tree::{read_branches, TreeTable};
use cherenkov_core::Error;
mod support;

use support::shared_testdata as testdata;

#[test]
fn every_tree_in_testdata_reads_or_refuses_by_name() {
    let Some(dir) = testdata() else { return };
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "root"))
        .collect();
    files.sort();
    let (mut read, mut refused, mut trees) = (0, 0, 0);
    for path in files {
        let name = path.to_str().unwrap().to_string();
        let file = std::sync::Arc::new(
            runtime()
                .block_on(RootFile::open_url(&name, &Default::default()))
                .unwrap_or_else(|e| panic!("{e}")),
        );
        let keys = runtime().block_on(file.all_keys()).unwrap();
        for (key_path, key) in keys.iter().filter(|(_, k)| k.class_name == "TTree") {
            trees += 1;
            let tree = runtime()
                .block_on(file.tree(&format!("{key_path};{}", key.cycle)))
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(
                !tree.branches.is_empty() || tree.entries == 0,
                "{name}: {key_path}"
            );
            let bounds = tree.cluster_boundaries();
            assert_eq!(
                (bounds[0], *bounds.last().unwrap()),
                (0, tree.entries),
                "{name} {key_path}"
            );
            let table = TreeTable::new(file.clone(), std::sync::Arc::new(tree.clone()));
            for b in 0..tree.branches.len() {
                match runtime().block_on(read_branches(&table, &[b], 0, tree.entries)) {
                    Ok((arrays, _)) => {
                        assert_eq!(arrays[0].entries, tree.entries);
                        let array = &arrays[0].array;
                        assert_eq!(
                            array.len() as u64,
                            tree.entries,
                            "{name} {}",
                            tree.branch_path(b)
                        );
                        assert!(array.is_valid(), "{name} {}", tree.branch_path(b));
                        read += 1;
                    }
                    Err(Error::UnsupportedBranch { branch, .. }) => {
                        assert_eq!(branch, tree.branch_path(b));
                        refused += 1;
                    }
                    Err(e) => panic!("{name} branch {}: {e}", tree.branch_path(b)),
                }
            }
        }
    }
    eprintln!("{trees} trees, {read} branches read, {refused} refused as unsupported");
    assert!(trees > 30 && read > 4000);
}

/// Opening reads the head and tail in one request and whatever that missed in one more; reading a
/// tree's metadata then costs at most one request, none when the tail held it.
#[test]
fn opening_and_listing_a_tree_takes_few_requests() {
    let Some(dir) = testdata() else { return };
    for (name, tree, max_requests) in [
        ("nanolike-root6.40-zstd-4clusters.root", "Events", 2),
        ("uproot-HZZ.root", "events", 1),
        ("nanoAOD_2015_CMS_Open_Data_ttbar.root", "Events", 2),
        ("uproot-sample-5.30.00-zlib.root", "sample", 2),
    ] {
        let path = dir.join(name);
        let file = runtime()
            .block_on(RootFile::open_url(
                path.to_str().unwrap(),
                &Default::default(),
            ))
            .unwrap();
        let opened = file.requests();
        runtime().block_on(file.tree(tree)).unwrap();
        eprintln!(
            "{name}: {opened} requests to open, {} with the tree",
            file.requests()
        );
        assert!(
            file.requests() <= max_requests,
            "{name}: {} requests",
            file.requests()
        );
    }
}
