use super::*;
use crate::format::tree::{parse_tree, BasketLocation, TreeMeta};

fn leaf(class: &'static str, name: &str, title: &str, len_type: i32) -> LeafRecord {
    LeafRecord {
        class,
        name: name.into(),
        title: title.into(),
        len: 1,
        len_type,
        is_unsigned: false,
        count: None,
        maximum: 0,
        is_range: false,
    }
}

fn branch(name: &str, title: &str, leaf: LeafRecord, baskets: &[(u64, u32, u64)]) -> BranchRecord {
    BranchRecord {
        name: name.into(),
        title: title.into(),
        compress: 505,
        basket_size: 32000,
        entry_offset_len: 0,
        entries: 7,
        tot_bytes: 300,
        zip_bytes: 200,
        baskets: baskets
            .iter()
            .map(|&(seek, bytes, entry_start)| BasketRecord {
                seek,
                bytes,
                entry_start,
            })
            .collect(),
        leaf,
        element: None,
    }
}

fn sample() -> TreeRecord {
    let mut n = leaf("TLeafI", "n", "n", 4);
    n.is_range = true;
    n.maximum = 5;
    let mut x = leaf("TLeafF", "x", "x[n]", 4);
    x.count = Some(0);
    let mut arr = leaf("TLeafD", "arr", "arr[3]", 8);
    arr.len = 3;
    let mut u = leaf("TLeafL", "u", "u", 8);
    u.is_unsigned = true;
    let two = [(1000, 50, 0), (5000, 60, 4)];
    let mut counted = branch("x", "x[n]/F", x, &two);
    counted.entry_offset_len = 1000;
    let mut vector = branch("v", "v", leaf("TLeafElement", "v", "v", 0), &two);
    vector.entry_offset_len = 1000;
    vector.element = Some(ElementRecord {
        class_name: "vector<float>".into(),
        checksum: stl_checksum("vector<float>"),
        class_version: 6,
        kind: 0,
        split_level: 99,
    });
    TreeRecord {
        name: "Events".into(),
        title: "a title".into(),
        entries: 7,
        tot_bytes: 1500,
        zip_bytes: 1000,
        flushed_bytes: 1000,
        auto_flush: 3,
        cluster_ranges: vec![(3, 4)],
        branches: vec![
            branch("n", "n/I", n, &two),
            counted,
            branch("arr", "arr[3]/D", arr, &two),
            branch("u", "u/l", u, &two),
            vector,
        ],
        aliases: vec![("pt".into(), "x*2".into())],
    }
}

#[test]
fn trees_round_trip_through_the_parser() {
    let tree = sample();
    let key_len = 70;
    let raw = write_tree(&tree, key_len);
    let meta: TreeMeta = parse_tree(&raw, key_len as usize, "TTree", "t", &[]).unwrap();
    assert_eq!(
        (meta.name.as_str(), meta.title.as_str()),
        ("Events", "a title")
    );
    assert_eq!((meta.entries, meta.version, meta.auto_flush), (7, 20, 3));
    assert_eq!((meta.tot_bytes, meta.zip_bytes), (1500, 1000));
    assert_eq!(meta.cluster_ranges, [(3, 4)]);
    assert_eq!(meta.cluster_boundaries(), [0, 4, 7]);
    assert_eq!(meta.top_branches, [0, 1, 2, 3, 4]);
    for (written, read) in tree.branches.iter().zip(&meta.branches) {
        assert_eq!(read.name, written.name);
        assert_eq!(read.title, written.title);
        assert_eq!(read.entries, 7);
        assert_eq!(read.compress, 505);
        assert_eq!(read.entry_offset_len, written.entry_offset_len);
        assert_eq!((read.tot_bytes, read.zip_bytes), (300, 200));
        let baskets = [
            BasketLocation {
                seek: 1000,
                bytes: 50,
                entry_start: 0,
                entry_stop: 4,
            },
            BasketLocation {
                seek: 5000,
                bytes: 60,
                entry_start: 4,
                entry_stop: 7,
            },
        ];
        assert_eq!(read.baskets, baskets);
        let leaf = &meta.leaves[read.leaves[0]];
        assert_eq!(
            (leaf.class.as_str(), leaf.name.as_str()),
            (written.leaf.class, written.leaf.name.as_str())
        );
        assert_eq!(
            (leaf.title.as_str(), leaf.len),
            (written.leaf.title.as_str(), written.leaf.len)
        );
        assert_eq!(leaf.is_unsigned, written.leaf.is_unsigned);
        assert_eq!(leaf.count, written.leaf.count, "{}", written.name);
        let element = read.element.as_ref().map(|e| {
            (
                e.class_name.as_str(),
                e.class_version,
                e.id,
                e.kind,
                e.streamer_type,
            )
        });
        let expected = written.element.as_ref().map(|e| {
            (
                e.class_name.as_str(),
                e.class_version as i32,
                -1,
                e.kind,
                -1,
            )
        });
        assert_eq!(element, expected);
    }
}

#[test]
fn empty_trees_round_trip() {
    let mut tree = sample();
    tree.entries = 0;
    tree.cluster_ranges.clear();
    tree.auto_flush = -30_000_000;
    tree.aliases.clear();
    for b in &mut tree.branches {
        b.entries = 0;
        b.baskets.clear();
    }
    let meta = parse_tree(&write_tree(&tree, 0), 0, "TTree", "t", &[]).unwrap();
    assert_eq!(meta.entries, 0);
    assert!(meta
        .branches
        .iter()
        .all(|b| b.baskets.is_empty() && b.embedded.is_empty()));
    assert_eq!(meta.cluster_boundaries(), [0]);
}

#[test]
fn stl_checksums_are_root_s() {
    // As ROOT 6.40 wrote them in a file's TBranchElement fCheckSum.
    assert_eq!(stl_checksum("vector<float>"), 89_790_107);
    assert_eq!(stl_checksum("vector<vector<float> >"), 2_170_935_584);
    assert_eq!(stl_checksum("vector<string>"), 269_382_332);
}

#[test]
fn cluster_sizes_round_trip_through_the_cluster_iterator() {
    for sizes in [
        vec![],
        vec![5],
        vec![4, 4, 4, 2],
        vec![3, 7, 7, 1],
        vec![10, 20, 30],
        vec![6, 6, 9],
    ] {
        let (ranges, auto_flush) = cluster_ranges(&sizes);
        let mut tree = sample();
        tree.entries = sizes.iter().sum();
        tree.cluster_ranges = ranges;
        tree.auto_flush = auto_flush;
        let mut start = 0;
        let baskets: Vec<BasketRecord> = sizes
            .iter()
            .map(|&n| {
                start += n;
                BasketRecord {
                    seek: 1000 + start,
                    bytes: 10,
                    entry_start: start - n,
                }
            })
            .collect();
        for b in &mut tree.branches {
            b.entries = tree.entries;
            b.baskets = baskets.clone();
        }
        let meta = parse_tree(&write_tree(&tree, 0), 0, "TTree", "t", &[]).unwrap();
        let mut expected = vec![0];
        for n in &sizes {
            expected.push(expected.last().unwrap() + n);
        }
        assert_eq!(meta.cluster_boundaries(), expected, "{sizes:?}");
    }
}
