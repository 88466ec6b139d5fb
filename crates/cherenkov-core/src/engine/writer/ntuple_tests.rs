//! RNTuples written to a file and read back by the engine's reader: every type over one and many
//! clusters and pages, in every compression, and 0 entries; the file's keys as ROOT lays them out.

use super::file::FileWriter;
use super::ntuple::{NtupleLayout, NtupleWriter, ANCHOR_CLASS};
use super::{Column, ColumnType, TableOptions, TableWriter};
use crate::engine::file::RootFile;
use crate::engine::ntuple::Ntuple;
use crate::engine::runtime;
use crate::engine::table::{read, Held, Table};
use crate::format::array::Array;
use crate::format::rntuple::writing::model::FieldType;
use crate::format::rntuple::writing::round_trip::sample;
use crate::format::writing::compression::Compression;
use std::sync::Arc;

/// The column type of the format's field type (the inverse of the writer's mapping).
fn column_type(t: &FieldType) -> ColumnType {
    match t {
        FieldType::Number(d) => ColumnType::Number(*d),
        FieldType::String => ColumnType::String,
        FieldType::Vector(t) => ColumnType::List {
            items: Box::new(column_type(t)),
            counter: None,
        },
        FieldType::Array(t, n) => ColumnType::Fixed {
            items: Box::new(column_type(t)),
            size: *n,
        },
        FieldType::Record(m) => {
            ColumnType::Record(m.iter().map(|(n, t)| (n.clone(), column_type(t))).collect())
        }
    }
}

/// Write `arrays` in `batches` extend calls, then read every field back whole.
fn write_and_read(
    path: &std::path::Path,
    fields: &[(String, FieldType)],
    arrays: &[Array],
    batches: usize,
    options: &TableOptions,
    layout: NtupleLayout,
) -> (Vec<Array>, Vec<u64>) {
    let columns: Vec<Column> = fields
        .iter()
        .map(|(name, t)| Column {
            name: name.clone(),
            title: format!("the {name}"),
            kind: column_type(t),
        })
        .collect();
    let sink = crate::sink::create(path.to_str().unwrap()).unwrap();
    let mut file = FileWriter::create(sink, "", options.compression).unwrap();
    let dir = file.root();
    let mut writer: Box<dyn TableWriter> =
        Box::new(NtupleWriter::new(&file, dir, "Events", columns, options, layout).unwrap());
    let n = arrays[0].len();
    let step = n.div_ceil(batches.max(1)).max(1);
    for start in (0..n).step_by(step) {
        let stop = (start + step).min(n);
        let part = arrays
            .iter()
            .map(|a| a.clone().slice(start, stop))
            .collect();
        writer.extend(&mut file, part).unwrap();
    }
    assert_eq!(writer.entries(), n as u64);
    writer.finish(&mut file).unwrap();
    file.close().unwrap();
    let name = path.to_str().unwrap().to_string();
    let file = Arc::new(
        runtime()
            .block_on(RootFile::open_url(&name, &Default::default()))
            .unwrap(),
    );
    let keys = runtime().block_on(file.all_keys()).unwrap();
    assert!(keys
        .iter()
        .any(|(p, k)| p == "Events" && k.class_name == ANCHOR_CLASS));
    let ntuple = Arc::new(runtime().block_on(Ntuple::open(file, "Events")).unwrap());
    assert_eq!(ntuple.entries(), n as u64);
    let bounds = runtime().block_on(ntuple.cluster_boundaries()).unwrap();
    let read_back = fields
        .iter()
        .map(|(name, _)| {
            let i = (0..ntuple.item_count())
                .find(|&i| ntuple.path(i) == *name)
                .unwrap();
            let (arrays, _) = runtime()
                .block_on(read(&ntuple, &[i], 0, n as u64, &Held::new()))
                .unwrap();
            arrays.into_iter().next().unwrap().array
        })
        .collect();
    (read_back, bounds)
}

fn options(setting: i32) -> TableOptions {
    TableOptions {
        title: "a test".into(),
        compression: Compression::from_setting(setting).unwrap(),
        cluster_bytes: None,
        memory_budget: 1 << 30,
    }
}

/// NaN is not equal to itself: arrays compare by their debug text.
fn same(a: &[Array], b: &[Array]) -> bool {
    format!("{a:?}") == format!("{b:?}")
}

#[test]
fn every_type_reads_back_over_one_and_many_clusters_in_every_compression() {
    let dir = tempdir("types");
    let (fields, arrays) = sample();
    for setting in [505, 404, 101, 207, 0] {
        let path = dir.join(format!("w{setting}.root"));
        let default = NtupleLayout::default();
        let (back, bounds) = write_and_read(&path, &fields, &arrays, 1, &options(setting), default);
        assert_eq!(bounds, [0, 7], "{setting}: one cluster");
        assert!(same(&back, &arrays), "{setting}");
        // Clusters of a few hundred bytes and pages of 16: many of each, across extend calls.
        let small = NtupleLayout {
            page_bytes: 16,
            ..NtupleLayout::default()
        };
        let clusters = TableOptions {
            cluster_bytes: Some(300),
            ..options(setting)
        };
        let (back, bounds) = write_and_read(&path, &fields, &arrays, 3, &clusters, small);
        assert!(bounds.len() > 3, "{setting}: {bounds:?}");
        assert!(same(&back, &arrays), "{setting}");
    }
}

#[test]
fn zero_entries_make_a_readable_rntuple() {
    let dir = tempdir("empty");
    let (fields, arrays) = sample();
    let empty: Vec<Array> = arrays.into_iter().map(|a| a.slice(0, 0)).collect();
    let path = dir.join("empty.root".into());
    let default = NtupleLayout::default();
    let (back, bounds) = write_and_read(&path, &fields, &empty, 1, &options(505), default);
    assert_eq!(bounds, [0]);
    assert!(back.iter().all(|a| a.is_empty()));
}

/// A folder of its own for each test, removed when the test ends.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn join(&self, name: String) -> std::path::PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempdir(test: &str) -> TempDir {
    let dir = std::env::temp_dir().join(format!("cherenkov-ntuple-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    TempDir(dir)
}
