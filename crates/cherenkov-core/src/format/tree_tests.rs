//! Tests of TTree parsing, with hand-made streamed objects for old class versions.

use super::*;

/// Writes an object's body after its class name.
type Body<'a> = &'a dyn Fn(&mut Writer);

/// Writes streamed objects as TBufferFile does, for hand-made old class versions.
#[derive(Default)]
struct Writer(Vec<u8>);

impl Writer {
    /// A byte count to fill in by `end`, then the class version.
    fn begin(&mut self, version: i16) -> usize {
        let at = self.0.len();
        self.0.extend([0; 4]);
        self.0.extend(version.to_be_bytes());
        at
    }
    fn end(&mut self, at: usize) {
        let count = (self.0.len() - at - 4) as u32 | 0x4000_0000;
        self.0[at..at + 4].copy_from_slice(&count.to_be_bytes());
    }
    fn put(&mut self, bytes: &[u8]) {
        self.0.extend(bytes);
    }
    fn string(&mut self, s: &str) {
        self.0.push(s.len() as u8);
        self.put(s.as_bytes());
    }
    fn tnamed(&mut self, name: &str) {
        let at = self.begin(1);
        self.put(&[0, 1, 0, 0, 0, 0, 0, 0, 0, 0]); // TObject: version, fUniqueID, fBits
        self.string(name);
        self.string("");
        self.end(at);
    }
    fn empty(&mut self, version: i16) {
        let at = self.begin(version);
        self.end(at);
    }
    /// A TObjArray of new objects, each written by `body`.
    fn array(&mut self, objects: &[(&str, Body)]) {
        let at = self.begin(3);
        self.put(&[0, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
        self.string("");
        self.put(&(objects.len() as i32).to_be_bytes());
        self.put(&0i32.to_be_bytes());
        for (class, body) in objects {
            let pointer = self.0.len();
            self.put(&[0; 4]);
            self.put(&0xFFFF_FFFFu32.to_be_bytes());
            self.put(class.as_bytes());
            self.0.push(0);
            body(self);
            self.end(pointer);
        }
        self.end(at);
    }
    fn i32s(&mut self, values: &[i32]) {
        for v in values {
            self.put(&v.to_be_bytes());
        }
    }
    fn f64s(&mut self, values: &[f64]) {
        for v in values {
            self.put(&v.to_be_bytes());
        }
    }
}

fn leaf_i(w: &mut Writer) {
    let at = w.begin(1);
    let leaf = w.begin(2);
    w.tnamed("x");
    w.i32s(&[1, 4, 0]); // fLen, fLenType, fOffset
    w.put(&[0, 0]); // fIsRange, fIsUnsigned
    w.i32s(&[0]); // fLeafCount: null
    w.end(leaf);
    w.i32s(&[0, 0]); // fMinimum, fMaximum
    w.end(at);
}

/// TBranch version 8 (g4tools, ROOT 3): 32-bit counters and entries, double totals.
fn branch_v8(w: &mut Writer) {
    let at = w.begin(8);
    w.tnamed("x");
    w.empty(1); // TAttFill
    w.i32s(&[1, 32000, 0, 1, 5, 0, 2, 0]); // fCompress .. fSplitLevel (2 basket slots)
    w.f64s(&[5.0, 120.0, 100.0]); // fEntries, fTotBytes, fZipBytes
    w.array(&[]);
    w.array(&[("TLeafI", &leaf_i)]);
    w.array(&[]);
    for values in [[100, 0], [0, 0], [1000, 0]] {
        w.put(&[1]);
        w.i32s(&values); // fBasketBytes, fBasketEntry, fBasketSeek
    }
    w.string(""); // fFileName
    w.end(at);
}

/// A TNtuple (version 2) around a TTree of version 5, as Geant4's g4tools and ROOT 3 wrote.
fn ntuple_v5() -> Vec<u8> {
    let mut w = Writer::default();
    let ntuple = w.begin(2);
    let at = w.begin(5);
    w.tnamed("t");
    for _att in 0..3 {
        w.empty(1);
    }
    w.f64s(&[5.0, 120.0, 100.0, 0.0]); // fEntries, fTotBytes, fZipBytes, fSavedBytes
    w.i32s(&[0, 25, 0, 1_000_000, 0, 0, 1_000_000]); // fTimerInterval .. fEstimate
    w.array(&[("TBranch", &branch_v8)]);
    w.array(&[]);
    w.end(at);
    w.i32s(&[1]); // fNvar
    w.end(ntuple);
    w.0
}

#[test]
fn old_tree_and_branch_versions_are_read_by_their_class_version() {
    let tree = parse_tree(&ntuple_v5(), 0, "TNtuple", "test", &[]).unwrap();
    assert_eq!(
        (tree.name.as_str(), tree.version, tree.entries),
        ("t", 5, 5)
    );
    let branch = &tree.branches[0];
    assert_eq!((branch.name.as_str(), branch.entries), ("x", 5));
    assert_eq!(
        branch.baskets,
        vec![BasketLocation {
            seek: 1000,
            bytes: 100,
            entry_start: 0,
            entry_stop: 5,
        }]
    );
    assert_eq!(tree.leaves[branch.leaves[0]].class, "TLeafI");
    assert_eq!(tree.cluster_boundaries(), vec![0, 5]);
}

#[test]
fn unknown_tree_versions_are_named_in_the_error() {
    let mut data = ntuple_v5();
    data[10..12].copy_from_slice(&9i16.to_be_bytes());
    let e = parse_tree(&data, 0, "TNtuple", "test", &[]).unwrap_err();
    assert!(e.to_string().contains("found 9"), "{e}");
}

#[test]
fn absurd_entry_counts_give_few_cluster_boundaries() {
    let branch = BranchMeta {
        baskets: vec![BasketLocation {
            seek: 100,
            bytes: 10,
            entry_start: 0,
            entry_stop: 10,
        }],
        ..Default::default()
    };
    for branches in [vec![], vec![branch]] {
        let tree = TreeMeta {
            entries: 1 << 62,
            auto_flush: 1,
            branches,
            ..Default::default()
        };
        let bounds = tree.cluster_boundaries();
        assert!(bounds.len() <= 3, "{} boundaries", bounds.len());
        assert_eq!((bounds[0], *bounds.last().unwrap()), (0, tree.entries));
    }
}
