use super::*;
use crate::engine::file::RootFile;
use crate::engine::tree::{read_branches, TreeTable};
use crate::engine::writer::{Column, ColumnType, TableOptions, TableWriter};
use crate::format::array::{AlignedBytes, Array, DType};
use crate::format::writing::compression::Compression;
use std::sync::Arc;

fn scratch(name: &str) -> String {
    let dir = std::env::temp_dir().join(format!("cherenkov-raw-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name).to_string_lossy().into_owned()
}

fn bytes_of<T: Copy>(values: &[T]) -> AlignedBytes {
    let bytes = unsafe {
        std::slice::from_raw_parts(values.as_ptr() as *const u8, std::mem::size_of_val(values))
    };
    AlignedBytes::from_slice(bytes)
}

fn columns() -> Vec<Column> {
    let list = |items: ColumnType, counter: Option<&str>| ColumnType::List {
        items: Box::new(items),
        counter: counter.map(str::to_string),
    };
    [
        ("i", ColumnType::Number(DType::I64)),
        ("x", list(ColumnType::Number(DType::F32), Some("nx"))),
        ("v", list(ColumnType::Number(DType::F64), None)),
        ("s", ColumnType::String),
        ("vs", list(ColumnType::String, None)),
        (
            "a",
            ColumnType::Fixed {
                items: Box::new(ColumnType::Number(DType::U16)),
                size: 3,
            },
        ),
    ]
    .into_iter()
    .map(|(name, kind)| Column {
        name: name.into(),
        title: String::new(),
        kind,
    })
    .collect()
}

/// `n` entries of `columns()`, from `seed`.
fn arrays(n: usize, seed: i64) -> Vec<Array> {
    let counts: Vec<i64> = (0..n as i64).map(|k| (k * 7 + seed) % 5).collect();
    let offsets: Vec<i64> = std::iter::once(0)
        .chain(counts.iter().scan(0, |t, c| {
            *t += c;
            Some(*t)
        }))
        .collect();
    let items = offsets[n] as usize;
    let floats: Vec<f32> = (0..items).map(|k| k as f32 + seed as f32).collect();
    let doubles: Vec<f64> = (0..items).map(|k| -(k as f64) * 0.5).collect();
    let text: Vec<u8> = (0..items).map(|k| b'a' + (k % 26) as u8).collect();
    let shorts: Vec<u16> = (0..3 * n).map(|k| (k as u16).wrapping_mul(31)).collect();
    vec![
        Array::numpy(
            DType::I64,
            vec![],
            bytes_of(&(0..n as i64).map(|k| k + 1000 * seed).collect::<Vec<_>>()),
        ),
        Array::list(
            offsets.clone(),
            Array::numpy(DType::F32, vec![], bytes_of(&floats)),
        ),
        Array::list(
            offsets.clone(),
            Array::numpy(DType::F64, vec![], bytes_of(&doubles)),
        ),
        Array::strings(offsets.clone(), AlignedBytes::from_slice(&text)),
        Array::list(
            offsets.clone(),
            Array::strings(
                (0..=items as i64).collect(),
                AlignedBytes::from_slice(&text),
            ),
        ),
        Array::numpy(DType::U16, vec![3], bytes_of(&shorts)),
    ]
}

fn options(cluster_bytes: Option<u64>) -> TableOptions {
    TableOptions {
        title: String::new(),
        compression: Compression::from_setting(505).unwrap(),
        cluster_bytes,
        memory_budget: 64 << 20,
    }
}

/// A file of tree "Events" written by `fill`.
fn write(
    path: &str,
    cluster_bytes: Option<u64>,
    fill: impl FnOnce(&mut TreeWriter, &mut FileWriter),
) {
    let mut file = FileWriter::create(
        crate::sink::create(path).unwrap(),
        "",
        Compression::from_setting(505).unwrap(),
    )
    .unwrap();
    let dir = file.root();
    let mut tree = TreeWriter::new(
        &file,
        dir,
        "Events",
        columns(),
        options(cluster_bytes),
        vec![],
    )
    .unwrap();
    fill(&mut tree, &mut file);
    Box::new(tree).finish(&mut file).unwrap();
    file.close().unwrap();
}

fn open(path: &str) -> (Arc<RootFile>, Arc<TreeMeta>) {
    runtime().block_on(async {
        let f = Arc::new(RootFile::open_url(path, &Default::default()).await.unwrap());
        let meta = Arc::new(f.tree("Events").await.unwrap());
        (f, meta)
    })
}

/// Every branch's entries, read back by the engine.
fn read(path: &str) -> Vec<(String, Array)> {
    let (f, meta) = open(path);
    runtime().block_on(async {
        let table = TreeTable::new(f, meta.clone());
        let all: Vec<usize> = (0..meta.branches.len()).collect();
        let (arrays, _) = read_branches(&table, &all, 0, meta.entries).await.unwrap();
        arrays
            .into_iter()
            .map(|a| (a.branch.clone(), a.array))
            .collect()
    })
}

#[test]
fn moved_entries_read_back_as_written_from_arrays_and_reclustered() {
    // Inputs of many small clusters (baskets of 1 kB), in steps of 4 kB (the tests' STEP_BYTES).
    let inputs = [scratch("in0.root"), scratch("in1.root")];
    for (k, path) in inputs.iter().enumerate() {
        write(path, Some(1_000), |t, f| {
            t.extend(f, arrays(700, k as i64)).unwrap();
        });
    }
    let moved = scratch("moved.root");
    write(&moved, None, |t, f| {
        let plans: Vec<_> = inputs
            .iter()
            .map(|p| {
                let (file, meta) = open(p);
                assert!(meta.cluster_boundaries().len() > 20);
                let plan = t.raw_plan(&meta).unwrap();
                assert!(plan.steps.len() > 5, "{} steps", plan.steps.len());
                (file.clone(), plan)
            })
            .collect();
        rewrite_trees(t, f, plans).unwrap();
        let nx = t.branches.iter().position(|b| b.name == "nx").unwrap();
        assert_eq!(t.written[nx].maximum, 4); // the counter leaf's largest count
    });
    let direct = scratch("direct.root");
    write(&direct, None, |t, f| {
        t.extend(f, arrays(700, 0)).unwrap();
        t.extend(f, arrays(700, 1)).unwrap();
    });
    assert_eq!(read(&moved), read(&direct));
    let (_, meta) = open(&moved);
    assert_eq!(meta.entries, 1400);
    assert_eq!(meta.cluster_boundaries(), [0, 1400]);
}

#[test]
fn inputs_stored_otherwise_are_refused_with_the_branch_named() {
    let path = scratch("other.root");
    let mut file =
        FileWriter::create(crate::sink::create(&path).unwrap(), "", Compression::NONE).unwrap();
    let dir = file.root();
    let mut cols = columns();
    cols.truncate(1);
    let mut tree = TreeWriter::new(&file, dir, "Events", cols, options(None), vec![]).unwrap();
    tree.extend(&mut file, vec![arrays(3, 0).remove(0)])
        .unwrap();
    Box::new(tree).finish(&mut file).unwrap();
    file.close().unwrap();
    let (_, meta) = open(&path);
    let out = FileWriter::create(
        crate::sink::create(&scratch("out.root")).unwrap(),
        "",
        Compression::NONE,
    )
    .unwrap();
    let mut wide =
        TreeWriter::new(&out, out.root(), "Events", columns(), options(None), vec![]).unwrap();
    let Err(why) = wide.raw_plan(&meta) else {
        panic!("planned")
    };
    assert!(why.contains("no top-level branch 'nx'"), "{why}");
    let floats = ColumnType::Number(DType::F32);
    let other = vec![Column {
        name: "i".into(),
        title: String::new(),
        kind: floats,
    }];
    wide = TreeWriter::new(&out, out.root(), "Events", other, options(None), vec![]).unwrap();
    let Err(why) = wide.raw_plan(&meta) else {
        panic!("planned")
    };
    assert!(why.starts_with("branch 'i'"), "{why}");
}

#[test]
fn a_damaged_basket_is_named_in_the_error() {
    let path = scratch("damaged.root");
    write(&path, None, |t, f| t.extend(f, arrays(50, 0)).unwrap());
    let (_, meta) = open(&path);
    let v = meta.branches.iter().position(|b| b.name == "v").unwrap();
    let seek = meta.branches[v].baskets[0].seek as usize;
    let mut bytes = std::fs::read(&path).unwrap();
    let keylen = u16::from_be_bytes([bytes[seek + 14], bytes[seek + 15]]) as usize;
    bytes[seek + keylen..seek + keylen + 2].copy_from_slice(b"XX"); // no compression header
    std::fs::write(&path, bytes).unwrap();
    let (file, meta) = open(&path);
    let mut out_file = FileWriter::create(
        crate::sink::create(&scratch("damaged-out.root")).unwrap(),
        "",
        Compression::NONE,
    )
    .unwrap();
    let mut tree = TreeWriter::new(
        &out_file,
        out_file.root(),
        "Events",
        columns(),
        options(None),
        vec![],
    )
    .unwrap();
    let plan = tree.raw_plan(&meta).unwrap();
    let Err(e) = rewrite_trees(&mut tree, &mut out_file, vec![(file.clone(), plan)]) else {
        panic!("rewritten")
    };
    let message = e.to_string();
    assert!(
        message.contains(&format!("basket of branch 'v' at offset {seek}")),
        "{message}"
    );
}

#[test]
fn baskets_beyond_what_opening_read_are_read_from_the_source() {
    // Small files are held whole after opening (head and tail): a larger one is not.
    let input = scratch("large.root");
    write(&input, Some(200_000), |t, f| {
        t.extend(f, arrays(60_000, 3)).unwrap();
    });
    let moved = scratch("large-moved.root");
    write(&moved, None, |t, f| {
        let (file, meta) = open(&input);
        let unread = meta.branches.iter().flat_map(|b| &b.baskets);
        assert!(unread
            .filter(|b| file.held(&ByteRange::new(b.seek, b.bytes as u64)).is_none())
            .any(|b| b.bytes > 0));
        // A range across what opening read: its head and tail served, the middle read.
        let whole = ByteRange::new(0, file.size);
        let parts = file.held_parts(&whole);
        assert!(parts.len() >= 3 && parts[0].1.is_some() && parts.last().unwrap().1.is_some());
        assert!(parts.iter().any(|(_, held)| held.is_none()));
        let bytes = runtime().block_on(read_unheld(&file, &[whole])).unwrap();
        assert_eq!(bytes[0][..], std::fs::read(&input).unwrap()[..]);
        let plan = t.raw_plan(&meta).unwrap();
        rewrite_trees(t, f, vec![(file.clone(), plan)]).unwrap();
    });
    assert_eq!(read(&moved), read(&input));
}
