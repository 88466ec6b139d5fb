//! Descriptions of the ROOT classes a writer streams (TTree, TBranch, the leaves, the
//! collections they use), as ROOT 6.40 describes them in its files' streamer infos: the table the
//! StreamerInfo record is generated from. Readers check class versions and checksums against
//! their own, so these must be ROOT's (the checksums are TClass::GetCheckSum's).

use crate::format::streamers::{ElementTail, StreamerElement, StreamerInfo};

/// A class: name, version, checksum and its members in streaming order.
pub struct Class {
    pub name: &'static str,
    pub version: i32,
    pub checksum: u32,
    pub elements: &'static [Element],
}

/// One member (or base class) of a class.
pub struct Element {
    /// TStreamerBase, TStreamerBasicType, ...
    pub class: &'static str,
    pub name: &'static str,
    pub title: &'static str,
    pub type_code: i32,
    pub size: i32,
    pub type_name: &'static str,
    pub tail: Tail,
}

/// What the element's class adds (see `ElementTail`); a base keeps its class's checksum.
pub enum Tail {
    None,
    Base { version: i32, checksum: u32 },
    Counted(i32, &'static str, &'static str),
    Stl(i32, i32),
}

const fn define(
    name: &'static str,
    version: i32,
    checksum: u32,
    elements: &'static [Element],
) -> Class {
    Class {
        name,
        version,
        checksum,
        elements,
    }
}

const fn element(
    class: &'static str,
    name: &'static str,
    title: &'static str,
    type_code: i32,
    size: i32,
    type_name: &'static str,
    tail: Tail,
) -> Element {
    Element {
        class,
        name,
        title,
        type_code,
        size,
        type_name,
        tail,
    }
}

const fn base(
    name: &'static str,
    title: &'static str,
    type_code: i32,
    version: i32,
    checksum: u32,
) -> Element {
    let tail = Tail::Base { version, checksum };
    element("TStreamerBase", name, title, type_code, 0, "BASE", tail)
}

/// The element classes that add nothing to TStreamerElement.
const BASIC: &str = "TStreamerBasicType";
const STRING: &str = "TStreamerString";
const OBJECT: &str = "TStreamerObject";
const OBJECT_ANY: &str = "TStreamerObjectAny";
const OBJECT_POINTER: &str = "TStreamerObjectPointer";

const fn member(
    class: &'static str,
    name: &'static str,
    title: &'static str,
    type_code: i32,
    size: i32,
    type_name: &'static str,
) -> Element {
    element(class, name, title, type_code, size, type_name, Tail::None)
}

const fn counted(
    n: &'static str,
    t: &'static str,
    code: i32,
    size: i32,
    ty: &'static str,
    count: (i32, &'static str, &'static str),
) -> Element {
    let tail = Tail::Counted(count.0, count.1, count.2);
    element("TStreamerBasicPointer", n, t, code, size, ty, tail)
}

const fn stl(
    n: &'static str,
    t: &'static str,
    code: i32,
    size: i32,
    ty: &'static str,
    kind: (i32, i32),
) -> Element {
    element(
        "TStreamerSTL",
        n,
        t,
        code,
        size,
        ty,
        Tail::Stl(kind.0, kind.1),
    )
}

impl Class {
    /// The streamer info of this class, as a file's StreamerInfo record holds it.
    pub fn info(&self) -> StreamerInfo {
        StreamerInfo {
            class_name: self.name.to_string(),
            class_version: self.version,
            checksum: self.checksum,
            elements: self.elements.iter().map(Element::info).collect(),
        }
    }
}

impl Element {
    fn info(&self) -> StreamerElement {
        let (max_index, tail) = match self.tail {
            Tail::None => ([0; 5], ElementTail::None),
            Tail::Base { version, checksum } => {
                ([0, checksum as i32, 0, 0, 0], ElementTail::Base { version })
            }
            Tail::Counted(count_version, name, class) => (
                [0; 5],
                ElementTail::Counted {
                    count_version,
                    count_name: name.to_string(),
                    count_class: class.to_string(),
                },
            ),
            Tail::Stl(stl_type, content_type) => (
                [0; 5],
                ElementTail::Stl {
                    stl_type,
                    content_type,
                },
            ),
        };
        StreamerElement {
            class: self.class.to_string(),
            name: self.name.to_string(),
            type_code: self.type_code,
            type_name: self.type_name.to_string(),
            title: self.title.to_string(),
            size: self.size,
            array_length: 0,
            array_dims: Vec::new(),
            max_index,
            tail,
        }
    }
}

/// Every class described here, by name.
pub fn class(name: &str) -> Option<&'static Class> {
    ALL.iter().copied().find(|c| c.name == name)
}

const ALL: &[&Class] = &[
    &TOBJECT,
    &TNAMED,
    &TATTLINE,
    &TATTFILL,
    &TATTMARKER,
    &TIOFEATURES,
    &TLIST,
    &TSEQCOLLECTION,
    &TCOLLECTION,
    &TSTRING,
    &TOBJARRAY,
    &TTREE,
    &TBRANCH,
    &TBRANCHELEMENT,
    &TBRANCHREF,
    &TREFTABLE,
    &TLEAF,
    &TLEAFB,
    &TLEAFS,
    &TLEAFI,
    &TLEAFL,
    &TLEAFF,
    &TLEAFD,
    &TLEAFO,
    &TLEAFELEMENT,
    &RNTUPLE,
];

#[rustfmt::skip]
const TOBJECT: Class = define("TObject", 1, 2417737773, &[
        member(BASIC, "fUniqueID", "object unique identifier", 13, 4, "unsigned int"),
        member(BASIC, "fBits", "bit field status word", 15, 4, "unsigned int"),
]);

#[rustfmt::skip]
const TNAMED: Class = define("TNamed", 1, 3753331260, &[
        base("TObject", "Basic ROOT object", 66, 1, 2417737773),
        member(STRING, "fName", "object identifier", 65, 24, "TString"),
        member(STRING, "fTitle", "object title", 65, 24, "TString"),
]);

#[rustfmt::skip]
const TATTLINE: Class = define("TAttLine", 2, 2483504457, &[
        member(BASIC, "fLineColor", "Line color", 2, 2, "short"),
        member(BASIC, "fLineStyle", "Line style", 2, 2, "short"),
        member(BASIC, "fLineWidth", "Line width", 2, 2, "short"),
]);

#[rustfmt::skip]
const TATTFILL: Class = define("TAttFill", 2, 4292422290, &[
        member(BASIC, "fFillColor", "Fill area color", 2, 2, "short"),
        member(BASIC, "fFillStyle", "Fill area style", 2, 2, "short"),
]);

#[rustfmt::skip]
const TATTMARKER: Class = define("TAttMarker", 3, 689802220, &[
        member(BASIC, "fMarkerColor", "Marker color", 2, 2, "short"),
        member(BASIC, "fMarkerStyle", "Marker style", 2, 2, "short"),
        member(BASIC, "fMarkerSize", "Marker size", 5, 4, "float"),
]);

#[rustfmt::skip]
const TIOFEATURES: Class = define("ROOT::TIOFeatures", 1, 446770960, &[
        member(BASIC, "fIOBits", "", 11, 1, "unsigned char"),
]);

#[rustfmt::skip]
const TLIST: Class = define("TList", 5, 1774568379, &[
        base("TSeqCollection", "Sequenceable collection ABC", 0, 0, 4234951622),
]);

#[rustfmt::skip]
const TSEQCOLLECTION: Class = define("TSeqCollection", 0, 4234951622, &[
        base("TCollection", "Collection abstract base class", 0, 3, 1474546588),
]);

#[rustfmt::skip]
const TCOLLECTION: Class = define("TCollection", 3, 1474546588, &[
        base("TObject", "Basic ROOT object", 66, 1, 2417737773),
        member(STRING, "fName", "name of the collection", 65, 24, "TString"),
        member(BASIC, "fSize", "number of elements in collection", 3, 4, "int"),
]);

#[rustfmt::skip]
const TSTRING: Class = define("TString", 2, 95257, &[
]);

#[rustfmt::skip]
const TOBJARRAY: Class = define("TObjArray", 3, 2845730130, &[
        base("TSeqCollection", "Sequenceable collection ABC", 0, 0, 4234951622),
        member(BASIC, "fLowerBound", "Lower bound of the array", 3, 4, "int"),
        member(BASIC, "fLast", "Last element in array containing an object", 3, 4, "int"),
]);

#[rustfmt::skip]
const TTREE: Class = define("TTree", 20, 1919213695, &[
        base("TNamed", "The basis for a named object (name, title)", 67, 1, 3753331260),
        base("TAttLine", "Line attributes", 0, 2, 2483504457),
        base("TAttFill", "Fill area attributes", 0, 2, 4292422290),
        base("TAttMarker", "Marker attributes", 0, 3, 689802220),
        member(BASIC, "fEntries", "Number of entries", 16, 8, "long long"),
        member(BASIC, "fTotBytes", "Total number of bytes in all branches before compression", 16, 8, "long long"),
        member(BASIC, "fZipBytes", "Total number of bytes in all branches after compression", 16, 8, "long long"),
        member(BASIC, "fSavedBytes", "Number of autosaved bytes", 16, 8, "long long"),
        member(BASIC, "fFlushedBytes", "Number of auto-flushed bytes", 16, 8, "long long"),
        member(BASIC, "fWeight", "Tree weight (see TTree::SetWeight)", 8, 8, "double"),
        member(BASIC, "fTimerInterval", "Timer interval in milliseconds", 3, 4, "int"),
        member(BASIC, "fScanField", "Number of runs before prompting in Scan", 3, 4, "int"),
        member(BASIC, "fUpdate", "Update frequency for EntryLoop", 3, 4, "int"),
        member(BASIC, "fDefaultEntryOffsetLen", "Initial Length of fEntryOffset table in the basket buffers", 3, 4, "int"),
        member(BASIC, "fNClusterRange", "Number of Cluster range in addition to the one defined by 'AutoFlush'", 6, 4, "int"),
        member(BASIC, "fMaxEntries", "Maximum number of entries in case of circular buffers", 16, 8, "long long"),
        member(BASIC, "fMaxEntryLoop", "Maximum number of entries to process", 16, 8, "long long"),
        member(BASIC, "fMaxVirtualSize", "Maximum total size of buffers kept in memory", 16, 8, "long long"),
        member(BASIC, "fAutoSave", "Autosave tree when fAutoSave entries written or -fAutoSave (compressed) bytes produced", 16, 8, "long long"),
        member(BASIC, "fAutoFlush", "Auto-flush tree when fAutoFlush entries written or -fAutoFlush (compressed) bytes produced", 16, 8, "long long"),
        member(BASIC, "fEstimate", "Number of entries to estimate histogram limits", 16, 8, "long long"),
        counted("fClusterRangeEnd", "[fNClusterRange] Last entry of a cluster range.", 56, 8, "long long*", (20, "fNClusterRange", "TTree")),
        counted("fClusterSize", "[fNClusterRange] Number of entries in each cluster for a given range.", 56, 8, "long long*", (20, "fNClusterRange", "TTree")),
        member(OBJECT_ANY, "fIOFeatures", "IO features to define for newly-written baskets and branches.", 62, 1, "ROOT::TIOFeatures"),
        member(OBJECT, "fBranches", "List of Branches", 61, 64, "TObjArray"),
        member(OBJECT, "fLeaves", "Direct pointers to individual branch leaves", 61, 64, "TObjArray"),
        member(OBJECT_POINTER, "fAliases", "List of aliases for expressions based on the tree branches.", 64, 8, "TList*"),
        member(OBJECT_ANY, "fIndexValues", "Sorted index values", 62, 24, "TArrayD"),
        member(OBJECT_ANY, "fIndex", "Index of sorted values", 62, 24, "TArrayI"),
        member(OBJECT_POINTER, "fTreeIndex", "Pointer to the tree Index (if any)", 64, 8, "TVirtualIndex*"),
        member(OBJECT_POINTER, "fFriends", "pointer to list of friend elements", 64, 8, "TList*"),
        member(OBJECT_POINTER, "fUserInfo", "pointer to a list of user objects associated to this Tree", 64, 8, "TList*"),
        member(OBJECT_POINTER, "fBranchRef", "Branch supporting the TRefTable (if any)", 64, 8, "TBranchRef*"),
]);

#[rustfmt::skip]
const TBRANCH: Class = define("TBranch", 13, 278366892, &[
        base("TNamed", "The basis for a named object (name, title)", 67, 1, 3753331260),
        base("TAttFill", "Fill area attributes", 0, 2, 4292422290),
        member(BASIC, "fCompress", "Compression level and algorithm", 3, 4, "int"),
        member(BASIC, "fBasketSize", "Initial Size of  Basket Buffer", 3, 4, "int"),
        member(BASIC, "fEntryOffsetLen", "Initial Length of fEntryOffset table in the basket buffers", 3, 4, "int"),
        member(BASIC, "fWriteBasket", "Last basket number written", 3, 4, "int"),
        member(BASIC, "fEntryNumber", "Current entry number (last one filled in this branch)", 16, 8, "long long"),
        member(OBJECT_ANY, "fIOFeatures", "IO features for newly-created baskets.", 62, 1, "ROOT::TIOFeatures"),
        member(BASIC, "fOffset", "Offset of this branch", 3, 4, "int"),
        member(BASIC, "fMaxBaskets", "Maximum number of Baskets so far", 6, 4, "int"),
        member(BASIC, "fSplitLevel", "Branch split level", 3, 4, "int"),
        member(BASIC, "fEntries", "Number of entries", 16, 8, "long long"),
        member(BASIC, "fFirstEntry", "Number of the first entry in this branch", 16, 8, "long long"),
        member(BASIC, "fTotBytes", "Total number of bytes in all leaves before compression", 16, 8, "long long"),
        member(BASIC, "fZipBytes", "Total number of bytes in all leaves after compression", 16, 8, "long long"),
        member(OBJECT, "fBranches", "-> List of Branches of this branch", 61, 64, "TObjArray"),
        member(OBJECT, "fLeaves", "-> List of leaves of this branch", 61, 64, "TObjArray"),
        member(OBJECT, "fBaskets", "-> List of baskets of this branch", 61, 64, "TObjArray"),
        counted("fBasketBytes", "[fMaxBaskets] Length of baskets on file", 43, 4, "int*", (13, "fMaxBaskets", "TBranch")),
        counted("fBasketEntry", "[fMaxBaskets] Table of first entry in each basket", 56, 8, "long long*", (13, "fMaxBaskets", "TBranch")),
        counted("fBasketSeek", "[fMaxBaskets] Addresses of baskets on file", 56, 8, "long long*", (13, "fMaxBaskets", "TBranch")),
        member(STRING, "fFileName", "Name of file where buffers are stored (\"\" if in same file as Tree header)", 65, 24, "TString"),
]);

#[rustfmt::skip]
const TBRANCHELEMENT: Class = define("TBranchElement", 10, 3880738403, &[
        base("TBranch", "Branch descriptor", 0, 13, 278366892),
        member(STRING, "fClassName", "Class name of referenced object", 65, 24, "TString"),
        member(STRING, "fParentName", "Name of parent class", 65, 24, "TString"),
        member(STRING, "fClonesName", "Name of class in TClonesArray or (STL) collection (if any)", 65, 24, "TString"),
        member(BASIC, "fCheckSum", "CheckSum of class", 13, 4, "unsigned int"),
        member(BASIC, "fClassVersion", "Version number of class", 2, 2, "short"),
        member(BASIC, "fID", "element serial number in fInfo", 3, 4, "int"),
        member(BASIC, "fType", "Branch type", 3, 4, "int"),
        member(BASIC, "fStreamerType", "branch streamer type", 3, 4, "int"),
        member(BASIC, "fMaximum", "Maximum entries for a TClonesArray or variable array", 3, 4, "int"),
        member(OBJECT_POINTER, "fBranchCount", "pointer to primary branchcount branch", 64, 8, "TBranchElement*"),
        member(OBJECT_POINTER, "fBranchCount2", "pointer to secondary branchcount branch", 64, 8, "TBranchElement*"),
]);

#[rustfmt::skip]
const TBRANCHREF: Class = define("TBranchRef", 1, 593540093, &[
        base("TBranch", "Branch descriptor", 0, 13, 278366892),
        member(OBJECT_POINTER, "fRefTable", "pointer to the TRefTable", 64, 8, "TRefTable*"),
]);

#[rustfmt::skip]
const TREFTABLE: Class = define("TRefTable", 3, 2357812101, &[
        base("TObject", "Basic ROOT object", 66, 1, 2417737773),
        member(BASIC, "fSize", "dummy for backward compatibility", 3, 4, "int"),
        member(OBJECT_POINTER, "fParents", "array of Parent objects  (eg TTree branch) holding the referenced objects", 64, 8, "TObjArray*"),
        member(OBJECT_POINTER, "fOwner", "Object owning this TRefTable", 64, 8, "TObject*"),
        stl("fProcessGUIDs", "UUIDs of TProcessIDs used in fParentIDs", 500, 24, "vector<string>", (1, 61)),
]);

#[rustfmt::skip]
const TLEAF: Class = define("TLeaf", 2, 1830715730, &[
        base("TNamed", "The basis for a named object (name, title)", 67, 1, 3753331260),
        member(BASIC, "fLen", "Number of fixed length elements in the leaf's data.", 3, 4, "int"),
        member(BASIC, "fLenType", "Number of bytes for this data type", 3, 4, "int"),
        member(BASIC, "fOffset", "Offset in ClonesArray object (if one)", 3, 4, "int"),
        member(BASIC, "fIsRange", "(=true if leaf has a range, false otherwise).  This is equivalent to being a 'leafcount'.  For a TLeafElement the range information is actually store in the TBranchElement.", 18, 1, "bool"),
        member(BASIC, "fIsUnsigned", "(=true if unsigned, false otherwise)", 18, 1, "bool"),
        member(OBJECT_POINTER, "fLeafCount", "Pointer to Leaf count if variable length (we do not own the counter)", 64, 8, "TLeaf*"),
]);

/// A typed leaf class (TLeafB, ...): TLeaf, then fMinimum and fMaximum of its type (streamer type
/// code, bytes, C++ name).
macro_rules! leaf {
    ($const:ident, $name:literal, $checksum:literal, $code:literal, $size:literal, $type:literal) => {
        const $const: Class = define(
            $name,
            1,
            $checksum,
            &[
                base(
                    "TLeaf",
                    "Leaf: description of a Branch data type",
                    0,
                    2,
                    1830715730,
                ),
                member(
                    BASIC,
                    "fMinimum",
                    "Minimum value if leaf range is specified",
                    $code,
                    $size,
                    $type,
                ),
                member(
                    BASIC,
                    "fMaximum",
                    "Maximum value if leaf range is specified",
                    $code,
                    $size,
                    $type,
                ),
            ],
        );
    };
}

leaf!(TLEAFB, "TLeafB", 253643614, 1, 1, "char");
leaf!(TLEAFS, "TLeafS", 353169103, 2, 2, "short");
leaf!(TLEAFI, "TLeafI", 2120920601, 3, 4, "int");
leaf!(TLEAFL, "TLeafL", 3727820898, 16, 8, "long long");
leaf!(TLEAFF, "TLeafF", 987602290, 5, 4, "float");
leaf!(TLEAFD, "TLeafD", 294553462, 8, 8, "double");
leaf!(TLEAFO, "TLeafO", 44976339, 18, 1, "bool");

#[rustfmt::skip]
const TLEAFELEMENT: Class = define("TLeafElement", 1, 2689566867, &[
        base("TLeaf", "Leaf: description of a Branch data type", 0, 2, 1830715730),
        member(BASIC, "fID", "element serial number in fInfo", 3, 4, "int"),
        member(BASIC, "fType", "leaf type", 3, 4, "int"),
]);

/// The anchor of an RNTuple (ROOT's `RNTuple::Streamer` adds its checksum after these members).
#[rustfmt::skip]
const RNTUPLE: Class = define("ROOT::RNTuple", 2, 1268915189, &[
        member(BASIC, "fVersionEpoch", "", 12, 2, "unsigned short"),
        member(BASIC, "fVersionMajor", "", 12, 2, "unsigned short"),
        member(BASIC, "fVersionMinor", "", 12, 2, "unsigned short"),
        member(BASIC, "fVersionPatch", "", 12, 2, "unsigned short"),
        member(BASIC, "fSeekHeader", "", 17, 8, "unsigned long long"),
        member(BASIC, "fNBytesHeader", "", 17, 8, "unsigned long long"),
        member(BASIC, "fLenHeader", "", 17, 8, "unsigned long long"),
        member(BASIC, "fSeekFooter", "", 17, 8, "unsigned long long"),
        member(BASIC, "fNBytesFooter", "", 17, 8, "unsigned long long"),
        member(BASIC, "fLenFooter", "", 17, 8, "unsigned long long"),
        member(BASIC, "fMaxKeySize", "", 17, 8, "unsigned long long"),
]);
