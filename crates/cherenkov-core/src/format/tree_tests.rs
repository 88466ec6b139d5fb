//! Tests of TTree parsing, with hand-made streamed objects for old class versions.

use super::*;
use crate::format::streamers::{ElementTail, StreamerElement};

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

/// TLeafElement version 1 around TLeaf version 2, as g4tools writes for a `std::vector` column.
fn leaf_element_v1(w: &mut Writer) {
    let at = w.begin(1);
    let leaf = w.begin(2);
    w.tnamed("v");
    w.i32s(&[0, 8, 0]); // fLen, fLenType, fOffset
    w.put(&[0, 0]); // fIsRange, fIsUnsigned
    w.i32s(&[0]); // fLeafCount: null
    w.end(leaf);
    w.i32s(&[-1, 0]); // fID, fType
    w.end(at);
}

/// TBranchElement version 1 (g4tools' `std_vector_be`, ROOT of early 2001) around TBranch 8:
/// after the base, only fClassName, fClassVersion, fID, fType and fStreamerType.
fn branch_element_v1(w: &mut Writer) {
    let at = w.begin(1);
    let base = w.begin(8);
    w.tnamed("v");
    w.empty(1); // TAttFill
    w.i32s(&[1, 32000, 0, 1, 5, 0, 2, 0]); // fCompress .. fSplitLevel (2 basket slots)
    w.f64s(&[5.0, 120.0, 100.0]); // fEntries, fTotBytes, fZipBytes
    w.array(&[]);
    w.array(&[("TLeafElement", &leaf_element_v1)]);
    w.array(&[]);
    for values in [[100, 0], [0, 0], [2000, 0]] {
        w.put(&[1]);
        w.i32s(&values); // fBasketBytes, fBasketEntry, fBasketSeek
    }
    w.string(""); // fFileName
    w.end(base);
    w.string("vector<double>");
    w.i32s(&[0, -1, 0, -1]); // fClassVersion, fID, fType, fStreamerType
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
fn a_g4tools_vector_column_is_a_branch_element_of_version_1() {
    let mut w = Writer::default();
    let at = w.begin(5);
    w.tnamed("t");
    for _att in 0..3 {
        w.empty(1);
    }
    w.f64s(&[5.0, 240.0, 200.0, 0.0]); // fEntries, fTotBytes, fZipBytes, fSavedBytes
    w.i32s(&[0, 25, 0, 1_000_000, 0, 0, 1_000_000]); // fTimerInterval .. fEstimate
    w.array(&[
        ("TBranch", &branch_v8),
        ("TBranchElement", &branch_element_v1),
    ]);
    w.array(&[]);
    w.end(at);
    let tree = parse_tree(&w.0, 0, "TTree", "test", &[]).unwrap();
    let names: Vec<&str> = tree.branches.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["x", "v"]);
    let vector = &tree.branches[1];
    assert_eq!(
        vector.element,
        Some(ElementMeta {
            class_name: "vector<double>".into(),
            id: -1,
            streamer_type: -1,
            ..ElementMeta::default()
        })
    );
    assert_eq!(vector.baskets[0].seek, 2000);
    assert_eq!(tree.leaves[vector.leaves[0]].class, "TLeafElement");

    // A version whose layout is not known is refused by name, never read as another one.
    let mut w = Writer::default();
    branch_element_v1(&mut w);
    w.0[4..6].copy_from_slice(&6i16.to_be_bytes());
    let mut cur = Cursor::new(&w.0, "test", 0);
    let (version, error) = match read_version(&mut cur, "TBranchElement") {
        Ok(v) => (
            v.version,
            read_element_members(&mut cur, v.version).unwrap_err(),
        ),
        Err(e) => panic!("{e}"),
    };
    assert_eq!(version, 6);
    assert!(
        error.to_string().contains("1, 5 or 7 to 10, found 6"),
        "{error}"
    );
}

#[test]
fn unknown_tree_versions_are_named_in_the_error() {
    for (version, says) in [
        (4, "found 4"),
        (13, "streamer info for TTree class version 13"),
    ] {
        let mut data = ntuple_v5();
        data[10..12].copy_from_slice(&i16::to_be_bytes(version));
        let e = parse_tree(&data, 0, "TNtuple", "test", &[]).unwrap_err();
        assert!(e.to_string().contains(says), "{e}");
    }
}

/// TBranchElement version 7 (ROOT 3.03 to 3.10): no fCheckSum, around a TBranch of version 7
/// (no TAttFill), for member `id` of class `Event`.
fn branch_element_v7(w: &mut Writer) {
    let at = w.begin(7);
    let branch = w.begin(7);
    w.tnamed("fNtrack");
    w.i32s(&[1, 32000, 0, 1, 5, 0, 2, 1]); // fCompress .. fSplitLevel (2 basket slots)
    w.f64s(&[5.0, 120.0, 100.0]); // fEntries, fTotBytes, fZipBytes
    w.array(&[]);
    w.array(&[("TLeafI", &leaf_i)]);
    w.array(&[]);
    for values in [[100, 0], [0, 0], [1000, 0]] {
        w.put(&[1]);
        w.i32s(&values); // fBasketBytes, fBasketEntry, fBasketSeek
    }
    w.string(""); // fFileName
    w.end(branch);
    for s in ["Event", "", ""] {
        w.string(s); // fClassName, fParentName, fClonesName
    }
    w.i32s(&[2, 4, 0, 3, -1]); // fClassVersion, fID, fType, fStreamerType, fMaximum
    w.i32s(&[0, 0]); // fBranchCount, fBranchCount2: null
    w.end(at);
}

/// A TTree of `version` whose members before the branches are written by `members`, holding one
/// branch written by `branch`.
fn tree_of(version: i16, members: &dyn Fn(&mut Writer), branch: (&str, Body)) -> Vec<u8> {
    let mut w = Writer::default();
    let at = w.begin(version);
    w.tnamed("T");
    for _att in 0..3 {
        w.empty(1);
    }
    members(&mut w);
    w.array(&[branch]);
    w.array(&[]);
    w.end(at);
    w.0
}

/// Members of TTree versions 8 to 12: doubles, then fWeight, then 32-bit settings.
fn members_v8(w: &mut Writer) {
    w.f64s(&[5.0, 120.0, 100.0, 0.0, 1.0]); // fEntries .. fSavedBytes, fWeight
    w.i32s(&[0, 25, 0, 1_000_000, 0, 0, 1_000_000]); // fTimerInterval .. fEstimate
}

/// Members of TTree versions 15 and 16: 64-bit counters, fWeight, fMaxEntries and the settings.
fn members_v15(w: &mut Writer) {
    for v in [5i64, 120, 100, 0] {
        w.put(&v.to_be_bytes()); // fEntries .. fSavedBytes
    }
    w.f64s(&[1.0]); // fWeight
    w.i32s(&[0, 25, 0]); // fTimerInterval, fScanField, fUpdate
    for v in [1_000_000_000_000i64, 1_000_000, 0, 0, 1_000_000] {
        w.put(&v.to_be_bytes()); // fMaxEntries .. fEstimate
    }
}

/// A TTree class version and what writes its members.
type VersionCase<'a> = (i16, &'a dyn Fn(&mut Writer));

#[test]
fn tree_versions_of_roots_releases_are_read_by_their_layouts() {
    let cases: [VersionCase; 7] = [
        (6, &|w| {
            w.f64s(&[5.0, 120.0, 100.0, 0.0]);
            w.i32s(&[0, 25, 0, 1_000_000, 0, 0, 1_000_000]);
        }),
        (8, &members_v8),
        (9, &members_v8),
        (10, &members_v8),
        (12, &members_v8),
        (15, &members_v15),
        (16, &members_v15),
    ];
    for (version, members) in cases {
        let data = tree_of(version, members, ("TBranch", &branch_v8));
        let tree = parse_tree(&data, 0, "TTree", "test", &[]).unwrap();
        assert_eq!(
            (tree.version, tree.entries, tree.tot_bytes),
            (version, 5, 120)
        );
        assert_eq!(tree.branches[0].baskets.len(), 1, "version {version}");
        assert_eq!(tree.cluster_boundaries(), vec![0, 5]);
    }
}

#[test]
fn branch_elements_of_version_7_are_read() {
    let data = tree_of(8, &members_v8, ("TBranchElement", &branch_element_v7));
    let tree = parse_tree(&data, 0, "TTree", "test", &[]).unwrap();
    let branch = &tree.branches[0];
    assert_eq!((branch.name.as_str(), branch.entries), ("fNtrack", 5));
    let element = branch.element.as_ref().unwrap();
    assert_eq!(
        (
            element.class_name.as_str(),
            element.class_version,
            element.id,
            element.streamer_type
        ),
        ("Event", 2, 4, 3)
    );
}

/// A streamer element as the file's streamer infos describe it.
fn element(
    class: &str,
    name: &str,
    type_code: i32,
    type_name: &str,
    title: &str,
) -> StreamerElement {
    StreamerElement {
        class: class.into(),
        name: name.into(),
        type_code,
        type_name: type_name.into(),
        title: title.into(),
        size: 0,
        array_length: 0,
        array_dims: vec![],
        max_index: [0; 5],
        tail: ElementTail::None,
    }
}

#[test]
fn other_tree_versions_are_read_by_the_files_streamer_info() {
    // A version between releases, laid out as its streamer info says (an invented member list:
    // 64-bit counters, a string, a counted array of 64-bit integers, an object).
    let mut elements: Vec<StreamerElement> = ["TNamed", "TAttLine", "TAttFill", "TAttMarker"]
        .into_iter()
        .map(|b| element("TStreamerBase", b, 0, "BASE", ""))
        .collect();
    elements.extend([
        element("TStreamerBasicType", "fEntries", 16, "Long64_t", ""),
        element("TStreamerBasicType", "fTotBytes", 16, "Long64_t", ""),
        element("TStreamerBasicType", "fZipBytes", 8, "Double_t", ""),
        element("TStreamerString", "fLabel", 65, "TString", ""),
        element("TStreamerBasicType", "fNRange", 6, "Int_t", ""),
        element(
            "TStreamerBasicPointer",
            "fRangeEnd",
            56,
            "Long64_t*",
            "[fNRange] ends",
        ),
        element("TStreamerObjectAny", "fExtra", 62, "TExtra", ""),
        element("TStreamerObject", "fBranches", 61, "TObjArray", ""),
    ]);
    let info = StreamerInfo {
        class_name: "TTree".into(),
        class_version: 13,
        checksum: 0,
        elements,
    };
    let members = |w: &mut Writer| {
        for v in [5i64, 120] {
            w.put(&v.to_be_bytes());
        }
        w.f64s(&[100.0]);
        w.string("label");
        w.i32s(&[2]);
        w.put(&[1]);
        for v in [3i64, 5] {
            w.put(&v.to_be_bytes());
        }
        w.empty(1); // fExtra
    };
    let data = tree_of(13, &members, ("TBranch", &branch_v8));
    let tree = parse_tree(&data, 0, "TTree", "test", std::slice::from_ref(&info)).unwrap();
    assert_eq!((tree.version, tree.entries, tree.zip_bytes), (13, 5, 100));
    assert_eq!(tree.branches[0].name, "x");
    // Without it, the version is named.
    let e = parse_tree(&data, 0, "TTree", "test", &[]).unwrap_err();
    assert!(e.to_string().contains("TTree class version 13"), "{e}");
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

#[test]
fn a_branch_has_the_boundaries_its_baskets_list() {
    let basket = |start, stop| BasketLocation {
        seek: 100 + start,
        bytes: 10,
        entry_start: start,
        entry_stop: stop,
    };
    let embedded = |entries| EmbeddedBasket {
        entries,
        content: vec![],
        offsets: None,
    };
    let branches = [
        BranchMeta::default(),
        BranchMeta {
            baskets: vec![basket(0, 5), basket(5, 12), basket(12, 30)],
            ..Default::default()
        },
        BranchMeta {
            baskets: vec![basket(0, 5), basket(5, 12)],
            embedded: vec![embedded(4), embedded(3)],
            ..Default::default()
        },
        BranchMeta {
            embedded: vec![embedded(6)],
            ..Default::default()
        },
    ];
    for b in &branches {
        let listed = b.basket_boundaries();
        for entry in 0..=31 {
            assert_eq!(
                b.has_boundary(entry),
                listed.contains(&entry),
                "entry {entry} of {listed:?}"
            );
        }
    }
}
