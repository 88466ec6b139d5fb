//! Every RNTuple in ../shared/testdata opens, and every field either reads (as many entries as
//! the RNTuple, a valid array, the same over cluster-sized steps as at once) or is refused by
//! name. Values are compared with uproot by the Python suite.

use cherenkov_core::engine::file::RootFile;
use cherenkov_core::engine::ntuple::{Ntuple, ANCHOR_CLASS};
use cherenkov_core::engine::prefetch::StepReader;
use cherenkov_core::engine::runtime;
use cherenkov_core::engine::table::{read, Held, Table};
use cherenkov_core::Error;
use std::sync::Arc;
mod support;

#[test]
fn every_rntuple_in_testdata_reads_or_refuses_by_name() {
    let Some(dir) = support::shared_testdata() else {
        return;
    };
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_str().is_some_and(|s| s.contains("rntuple")))
        .collect();
    files.sort();
    let (mut read_ok, mut refused, mut ntuples) = (0, 0, 0);
    for path in files {
        let name = path.to_str().unwrap().to_string();
        let file = Arc::new(
            runtime()
                .block_on(RootFile::open_url(&name, &Default::default()))
                .unwrap_or_else(|e| panic!("{e}")),
        );
        let keys = runtime().block_on(file.all_keys()).unwrap();
        for (key_path, key) in keys.iter().filter(|(_, k)| k.class_name == ANCHOR_CLASS) {
            ntuples += 1;
            let ntuple = runtime()
                .block_on(Ntuple::open(
                    file.clone(),
                    &format!("{key_path};{}", key.cycle),
                ))
                .map(Arc::new)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let entries = ntuple.entries();
            let bounds = runtime().block_on(ntuple.cluster_boundaries()).unwrap();
            assert_eq!((bounds[0], *bounds.last().unwrap()), (0, entries), "{name}");
            let mut readable = Vec::new();
            for i in 0..ntuple.item_count() {
                match runtime().block_on(read(&ntuple, &[i], 0, entries, &Held::new())) {
                    Ok((arrays, _)) => {
                        let array = &arrays[0].array;
                        assert_eq!(array.len() as u64, entries, "{name} {}", ntuple.path(i));
                        assert!(array.is_valid(), "{name} {}", ntuple.path(i));
                        readable.push((i, arrays.into_iter().next().unwrap().array));
                        read_ok += 1;
                    }
                    Err(Error::UnsupportedBranch { branch, .. }) => {
                        assert_eq!(branch, ntuple.path(i));
                        refused += 1;
                    }
                    Err(e) => panic!("{name} {}: {e}", ntuple.path(i)),
                }
            }
            // The same fields over cluster-sized steps, read ahead, join to the whole.
            let steps: Vec<(u64, u64)> = bounds.windows(2).map(|w| (w[0], w[1])).collect();
            let items: Vec<usize> = readable.iter().map(|(i, _)| *i).collect();
            let mut pieces = vec![Vec::new(); items.len()];
            runtime().block_on(async {
                let mut reader =
                    StepReader::start(ntuple.clone(), items.clone(), steps, Default::default())
                        .await
                        .unwrap();
                while let Some(step) = reader.next().await {
                    for (p, a) in pieces.iter_mut().zip(step.unwrap().arrays) {
                        p.push(a.array);
                    }
                }
            });
            for ((i, whole), parts) in readable.iter().zip(pieces) {
                let joined: usize = parts.iter().map(|a| a.len()).sum();
                assert_eq!(joined as u64, entries, "{name} {}", ntuple.path(*i));
                if parts.len() == 1 {
                    assert_eq!(&parts[0], whole, "{name} {}", ntuple.path(*i));
                }
            }
        }
    }
    eprintln!("{ntuples} RNTuples: {read_ok} fields read, {refused} refused by name");
    assert!(ntuples > 0 && read_ok > 0);
}
