use super::*;
use crate::engine::file::RootFile;
use crate::engine::runtime;
use crate::engine::tree::{read_branches, TreeTable};
use crate::engine::writer::ColumnType;
use crate::format::array::{AlignedBytes, Layout};
use crate::format::writing::compression::Compression;
use std::sync::Arc;

fn scratch(name: &str) -> String {
    let dir = std::env::temp_dir().join(format!("cherenkov-tree-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name).to_string_lossy().into_owned()
}

fn numbers<T: Copy>(dtype: DType, values: &[T]) -> Array {
    let bytes = unsafe {
        std::slice::from_raw_parts(values.as_ptr() as *const u8, std::mem::size_of_val(values))
    };
    Array::numpy(dtype, vec![], AlignedBytes::from_slice(bytes))
}

fn column(name: &str, kind: ColumnType) -> Column {
    Column {
        name: name.into(),
        title: String::new(),
        kind,
    }
}

fn options(cluster_bytes: Option<u64>) -> TableOptions {
    TableOptions {
        title: "a tree".into(),
        compression: Compression::from_setting(505).unwrap(),
        cluster_bytes,
        memory_budget: 64 << 20,
    }
}

/// Entries as text, whatever the layout (numbers as f64), to compare what was written with
/// what is read.
fn render(a: &Array, i: usize) -> String {
    match &a.layout {
        Layout::Numpy {
            dtype,
            inner_shape,
            data,
        } => {
            let items: usize = inner_shape.iter().product();
            let size = dtype.size();
            let values: Vec<String> = (i * items..(i + 1) * items)
                .map(|k| {
                    let b = &data.as_bytes()[k * size..(k + 1) * size];
                    match dtype {
                        DType::F32 => f32::from_ne_bytes(b.try_into().unwrap()).to_string(),
                        DType::F64 => f64::from_ne_bytes(b.try_into().unwrap()).to_string(),
                        DType::I64 => i64::from_ne_bytes(b.try_into().unwrap()).to_string(),
                        DType::U64 => u64::from_ne_bytes(b.try_into().unwrap()).to_string(),
                        DType::I32 => i32::from_ne_bytes(b.try_into().unwrap()).to_string(),
                        DType::U32 => u32::from_ne_bytes(b.try_into().unwrap()).to_string(),
                        DType::I16 => i16::from_ne_bytes(b.try_into().unwrap()).to_string(),
                        DType::U16 => u16::from_ne_bytes(b.try_into().unwrap()).to_string(),
                        DType::I8 => (b[0] as i8).to_string(),
                        _ => b[0].to_string(),
                    }
                })
                .collect();
            if inner_shape.is_empty() {
                values.join("")
            } else {
                format!("{values:?}")
            }
        }
        Layout::Regular { size, content, .. } => {
            let items: Vec<String> = (i * size..(i + 1) * size)
                .map(|k| render(content, k))
                .collect();
            format!("{items:?}")
        }
        Layout::ListOffset {
            offsets, content, ..
        } => {
            let range = offsets[i] as usize..offsets[i + 1] as usize;
            if a.parameter("__array__") == Some("string") {
                let Layout::Numpy { data, .. } = &content.layout else {
                    panic!()
                };
                return String::from_utf8_lossy(&data.as_bytes()[range]).into_owned();
            }
            let items: Vec<String> = range.map(|k| render(content, k)).collect();
            format!("{items:?}")
        }
        other => panic!("{other:?}"),
    }
}

/// Write `columns` with `chunks` (arrays per `extend`), read every branch back.
fn round_trip(
    name: &str,
    columns: Vec<Column>,
    chunks: Vec<Vec<Array>>,
    cluster_bytes: Option<u64>,
) -> (Arc<crate::format::tree::TreeMeta>, Vec<(String, Array)>) {
    let path = scratch(name);
    let mut file = FileWriter::create(
        crate::sink::create(&path).unwrap(),
        "",
        Compression::from_setting(505).unwrap(),
    )
    .unwrap();
    let dir = file.root();
    let mut tree: Box<dyn TableWriter> = Box::new(
        TreeWriter::new(
            &file,
            dir,
            "Events",
            columns,
            options(cluster_bytes),
            vec![],
        )
        .unwrap(),
    );
    for chunk in chunks {
        tree.extend(&mut file, chunk).unwrap();
    }
    tree.finish(&mut file).unwrap();
    file.close().unwrap();
    runtime().block_on(async {
        let f = Arc::new(
            RootFile::open_url(&path, &Default::default())
                .await
                .unwrap(),
        );
        let meta = Arc::new(f.tree("Events").await.unwrap());
        let table = TreeTable::new(f, meta.clone());
        let all: Vec<usize> = (0..meta.branches.len()).collect();
        let (arrays, _) = read_branches(&table, &all, 0, meta.entries).await.unwrap();
        let out = arrays
            .into_iter()
            .map(|a| (a.branch.clone(), a.array))
            .collect();
        (meta, out)
    })
}

fn entries(a: &Array) -> Vec<String> {
    (0..a.len()).map(|i| render(a, i)).collect()
}

#[test]
fn numbers_arrays_counted_leaves_vectors_and_strings_read_back() {
    let jagged = |counter: Option<&str>| ColumnType::List {
        items: Box::new(ColumnType::Number(DType::F32)),
        counter: counter.map(str::to_string),
    };
    let columns = vec![
        column("i", ColumnType::Number(DType::I64)),
        column("b", ColumnType::Number(DType::Bool)),
        column("x", jagged(Some("nx"))),
        column("v", jagged(None)),
        column("s", ColumnType::String),
        column(
            "a",
            ColumnType::Fixed {
                items: Box::new(ColumnType::Number(DType::U16)),
                size: 2,
            },
        ),
        column(
            "vv",
            ColumnType::List {
                items: Box::new(ColumnType::List {
                    items: Box::new(ColumnType::Number(DType::F64)),
                    counter: None,
                }),
                counter: None,
            },
        ),
        column(
            "vs",
            ColumnType::List {
                items: Box::new(ColumnType::String),
                counter: None,
            },
        ),
    ];
    let floats = numbers(DType::F32, &[1.5f32, f32::NAN, -0.0, f32::MAX]);
    let arrays = vec![
        numbers(DType::I64, &[i64::MIN, 0, i64::MAX]),
        numbers(DType::Bool, &[1u8, 0, 1]),
        Array::list(vec![0, 0, 3, 4], floats.clone()),
        Array::list(vec![0, 2, 2, 4], floats),
        Array::strings(
            vec![0, 0, 3, 303],
            AlignedBytes::from_slice(&[b"abc".as_slice(), &[b'z'; 300]].concat()),
        ),
        Array::numpy(
            DType::U16,
            vec![2],
            AlignedBytes::from_slice(&[1u8, 0, 2, 0, 3, 0, 4, 0, 255, 255, 6, 0]),
        ),
        Array::list(
            vec![0, 1, 1, 3],
            Array::list(
                vec![0, 2, 2, 3],
                numbers(DType::F64, &[1.0f64, 2.0, f64::INFINITY]),
            ),
        ),
        Array::list(
            vec![0, 2, 2, 3],
            Array::strings(vec![0, 1, 1, 3], AlignedBytes::from_slice(b"abc")),
        ),
    ];
    let expected: Vec<Vec<String>> = arrays.iter().map(entries).collect();
    let (meta, read) = round_trip("types.root", columns, vec![arrays], None);
    assert_eq!(meta.entries, 3);
    let names: Vec<&str> = read.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["i", "b", "nx", "x", "v", "s", "a", "vv", "vs"]);
    let read: std::collections::HashMap<&str, &Array> =
        read.iter().map(|(n, a)| (n.as_str(), a)).collect();
    for (name, want) in ["i", "b", "x", "v", "s", "a", "vv", "vs"]
        .iter()
        .zip(&expected)
    {
        assert_eq!(&entries(read[name]), want, "{name}");
    }
    assert_eq!(entries(read["nx"]), ["0", "3", "1"]);
}

#[test]
fn clusters_close_by_bytes_and_hold_one_basket_per_branch() {
    let n = 10_000usize;
    let values: Vec<f64> = (0..n).map(|i| i as f64 * 0.25).collect();
    let counts: Vec<i64> = (0..=n as i64).map(|i| i / 3 * 3).collect();
    let items: Vec<f32> = (0..counts[n]).map(|i| i as f32).collect();
    let columns = vec![
        column("x", ColumnType::Number(DType::F64)),
        column(
            "j",
            ColumnType::List {
                items: Box::new(ColumnType::Number(DType::F32)),
                counter: Some("nj".into()),
            },
        ),
    ];
    // Three extends of uneven sizes; clusters of about 40 kB uncompressed.
    let chunk = |a: usize, b: usize| {
        let offsets: Vec<i64> = counts[a..=b].to_vec();
        vec![
            numbers(DType::F64, &values[a..b]),
            Array::list(offsets, numbers(DType::F32, &items)),
        ]
    };
    let (meta, read) = round_trip(
        "clusters.root",
        columns,
        vec![chunk(0, 1), chunk(1, 7000), chunk(7000, n)],
        Some(40_000),
    );
    let bounds = meta.cluster_boundaries();
    assert!(bounds.len() > 5, "{bounds:?}");
    for b in &meta.branches {
        assert_eq!(
            b.basket_boundaries(),
            bounds,
            "{}: one basket per cluster",
            b.name
        );
    }
    let x = &read.iter().find(|(n, _)| n == "x").unwrap().1;
    assert_eq!(entries(x), entries(&numbers(DType::F64, &values)));
    let j = &read.iter().find(|(n, _)| n == "j").unwrap().1;
    assert_eq!(
        entries(j),
        entries(&Array::list(counts.clone(), numbers(DType::F32, &items)))
    );
}

#[test]
fn empty_trees_and_empty_lists_read_back() {
    let columns = vec![column(
        "v",
        ColumnType::List {
            items: Box::new(ColumnType::Number(DType::I32)),
            counter: None,
        },
    )];
    let (meta, read) = round_trip("empty.root", columns.clone(), vec![], None);
    assert_eq!((meta.entries, meta.branches.len()), (0, 1));
    assert!(read[0].1.is_empty());
    let (meta, read) = round_trip(
        "empty-lists.root",
        columns,
        vec![vec![Array::list(
            vec![0, 0, 0],
            numbers(DType::I32, &[0i32; 0]),
        )]],
        None,
    );
    assert_eq!(meta.entries, 2);
    assert_eq!(entries(&read[0].1), ["[]", "[]"]);
}

#[test]
fn a_counter_column_that_disagrees_with_its_lists_is_an_error_naming_both() {
    let columns = vec![
        column("nJet", ColumnType::Number(DType::U32)),
        column(
            "Jet_pt",
            ColumnType::List {
                items: Box::new(ColumnType::Number(DType::F32)),
                counter: Some("nJet".into()),
            },
        ),
    ];
    let path = scratch("mismatch.root");
    let mut file =
        FileWriter::create(crate::sink::create(&path).unwrap(), "", Compression::NONE).unwrap();
    let dir = file.root();
    let mut tree = TreeWriter::new(&file, dir, "Events", columns, options(None), vec![]).unwrap();
    let arrays = vec![
        numbers(DType::U32, &[1u32, 2]),
        Array::list(vec![0, 1, 2], numbers(DType::F32, &[1.0f32, 2.0])),
    ];
    let e = tree.extend(&mut file, arrays).unwrap_err().to_string();
    assert!(
        e.contains("'Jet_pt'") && e.contains("'nJet'") && e.contains("entry 1"),
        "{e}"
    );
}
