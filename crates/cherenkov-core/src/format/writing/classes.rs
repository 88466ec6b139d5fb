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

const fn basic(
    n: &'static str,
    t: &'static str,
    code: i32,
    size: i32,
    ty: &'static str,
) -> Element {
    element("TStreamerBasicType", n, t, code, size, ty, Tail::None)
}

const fn string(
    n: &'static str,
    t: &'static str,
    code: i32,
    size: i32,
    ty: &'static str,
) -> Element {
    element("TStreamerString", n, t, code, size, ty, Tail::None)
}

const fn object(
    n: &'static str,
    t: &'static str,
    code: i32,
    size: i32,
    ty: &'static str,
) -> Element {
    element("TStreamerObject", n, t, code, size, ty, Tail::None)
}

const fn object_any(
    n: &'static str,
    t: &'static str,
    code: i32,
    size: i32,
    ty: &'static str,
) -> Element {
    element("TStreamerObjectAny", n, t, code, size, ty, Tail::None)
}

const fn object_pointer(
    n: &'static str,
    t: &'static str,
    code: i32,
    size: i32,
    ty: &'static str,
) -> Element {
    element("TStreamerObjectPointer", n, t, code, size, ty, Tail::None)
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
const TOBJECT: Class = Class {
    name: "TObject",
    version: 1,
    checksum: 2417737773,
    elements: &[
        basic("fUniqueID", "object unique identifier", 13, 4, "unsigned int"),
        basic("fBits", "bit field status word", 15, 4, "unsigned int"),
    ],
};

#[rustfmt::skip]
const TNAMED: Class = Class {
    name: "TNamed",
    version: 1,
    checksum: 3753331260,
    elements: &[
        base("TObject", "Basic ROOT object", 66, 1, 2417737773),
        string("fName", "object identifier", 65, 24, "TString"),
        string("fTitle", "object title", 65, 24, "TString"),
    ],
};

#[rustfmt::skip]
const TATTLINE: Class = Class {
    name: "TAttLine",
    version: 2,
    checksum: 2483504457,
    elements: &[
        basic("fLineColor", "Line color", 2, 2, "short"),
        basic("fLineStyle", "Line style", 2, 2, "short"),
        basic("fLineWidth", "Line width", 2, 2, "short"),
    ],
};

#[rustfmt::skip]
const TATTFILL: Class = Class {
    name: "TAttFill",
    version: 2,
    checksum: 4292422290,
    elements: &[
        basic("fFillColor", "Fill area color", 2, 2, "short"),
        basic("fFillStyle", "Fill area style", 2, 2, "short"),
    ],
};

#[rustfmt::skip]
const TATTMARKER: Class = Class {
    name: "TAttMarker",
    version: 3,
    checksum: 689802220,
    elements: &[
        basic("fMarkerColor", "Marker color", 2, 2, "short"),
        basic("fMarkerStyle", "Marker style", 2, 2, "short"),
        basic("fMarkerSize", "Marker size", 5, 4, "float"),
    ],
};

#[rustfmt::skip]
const TIOFEATURES: Class = Class {
    name: "ROOT::TIOFeatures",
    version: 1,
    checksum: 446770960,
    elements: &[
        basic("fIOBits", "", 11, 1, "unsigned char"),
    ],
};

#[rustfmt::skip]
const TLIST: Class = Class {
    name: "TList",
    version: 5,
    checksum: 1774568379,
    elements: &[
        base("TSeqCollection", "Sequenceable collection ABC", 0, 0, 4234951622),
    ],
};

#[rustfmt::skip]
const TSEQCOLLECTION: Class = Class {
    name: "TSeqCollection",
    version: 0,
    checksum: 4234951622,
    elements: &[
        base("TCollection", "Collection abstract base class", 0, 3, 1474546588),
    ],
};

#[rustfmt::skip]
const TCOLLECTION: Class = Class {
    name: "TCollection",
    version: 3,
    checksum: 1474546588,
    elements: &[
        base("TObject", "Basic ROOT object", 66, 1, 2417737773),
        string("fName", "name of the collection", 65, 24, "TString"),
        basic("fSize", "number of elements in collection", 3, 4, "int"),
    ],
};

#[rustfmt::skip]
const TSTRING: Class = Class {
    name: "TString",
    version: 2,
    checksum: 95257,
    elements: &[
    ],
};

#[rustfmt::skip]
const TOBJARRAY: Class = Class {
    name: "TObjArray",
    version: 3,
    checksum: 2845730130,
    elements: &[
        base("TSeqCollection", "Sequenceable collection ABC", 0, 0, 4234951622),
        basic("fLowerBound", "Lower bound of the array", 3, 4, "int"),
        basic("fLast", "Last element in array containing an object", 3, 4, "int"),
    ],
};

#[rustfmt::skip]
const TTREE: Class = Class {
    name: "TTree",
    version: 20,
    checksum: 1919213695,
    elements: &[
        base("TNamed", "The basis for a named object (name, title)", 67, 1, 3753331260),
        base("TAttLine", "Line attributes", 0, 2, 2483504457),
        base("TAttFill", "Fill area attributes", 0, 2, 4292422290),
        base("TAttMarker", "Marker attributes", 0, 3, 689802220),
        basic("fEntries", "Number of entries", 16, 8, "long long"),
        basic("fTotBytes", "Total number of bytes in all branches before compression", 16, 8, "long long"),
        basic("fZipBytes", "Total number of bytes in all branches after compression", 16, 8, "long long"),
        basic("fSavedBytes", "Number of autosaved bytes", 16, 8, "long long"),
        basic("fFlushedBytes", "Number of auto-flushed bytes", 16, 8, "long long"),
        basic("fWeight", "Tree weight (see TTree::SetWeight)", 8, 8, "double"),
        basic("fTimerInterval", "Timer interval in milliseconds", 3, 4, "int"),
        basic("fScanField", "Number of runs before prompting in Scan", 3, 4, "int"),
        basic("fUpdate", "Update frequency for EntryLoop", 3, 4, "int"),
        basic("fDefaultEntryOffsetLen", "Initial Length of fEntryOffset table in the basket buffers", 3, 4, "int"),
        basic("fNClusterRange", "Number of Cluster range in addition to the one defined by 'AutoFlush'", 6, 4, "int"),
        basic("fMaxEntries", "Maximum number of entries in case of circular buffers", 16, 8, "long long"),
        basic("fMaxEntryLoop", "Maximum number of entries to process", 16, 8, "long long"),
        basic("fMaxVirtualSize", "Maximum total size of buffers kept in memory", 16, 8, "long long"),
        basic("fAutoSave", "Autosave tree when fAutoSave entries written or -fAutoSave (compressed) bytes produced", 16, 8, "long long"),
        basic("fAutoFlush", "Auto-flush tree when fAutoFlush entries written or -fAutoFlush (compressed) bytes produced", 16, 8, "long long"),
        basic("fEstimate", "Number of entries to estimate histogram limits", 16, 8, "long long"),
        counted("fClusterRangeEnd", "[fNClusterRange] Last entry of a cluster range.", 56, 8, "long long*", (20, "fNClusterRange", "TTree")),
        counted("fClusterSize", "[fNClusterRange] Number of entries in each cluster for a given range.", 56, 8, "long long*", (20, "fNClusterRange", "TTree")),
        object_any("fIOFeatures", "IO features to define for newly-written baskets and branches.", 62, 1, "ROOT::TIOFeatures"),
        object("fBranches", "List of Branches", 61, 64, "TObjArray"),
        object("fLeaves", "Direct pointers to individual branch leaves", 61, 64, "TObjArray"),
        object_pointer("fAliases", "List of aliases for expressions based on the tree branches.", 64, 8, "TList*"),
        object_any("fIndexValues", "Sorted index values", 62, 24, "TArrayD"),
        object_any("fIndex", "Index of sorted values", 62, 24, "TArrayI"),
        object_pointer("fTreeIndex", "Pointer to the tree Index (if any)", 64, 8, "TVirtualIndex*"),
        object_pointer("fFriends", "pointer to list of friend elements", 64, 8, "TList*"),
        object_pointer("fUserInfo", "pointer to a list of user objects associated to this Tree", 64, 8, "TList*"),
        object_pointer("fBranchRef", "Branch supporting the TRefTable (if any)", 64, 8, "TBranchRef*"),
    ],
};

#[rustfmt::skip]
const TBRANCH: Class = Class {
    name: "TBranch",
    version: 13,
    checksum: 278366892,
    elements: &[
        base("TNamed", "The basis for a named object (name, title)", 67, 1, 3753331260),
        base("TAttFill", "Fill area attributes", 0, 2, 4292422290),
        basic("fCompress", "Compression level and algorithm", 3, 4, "int"),
        basic("fBasketSize", "Initial Size of  Basket Buffer", 3, 4, "int"),
        basic("fEntryOffsetLen", "Initial Length of fEntryOffset table in the basket buffers", 3, 4, "int"),
        basic("fWriteBasket", "Last basket number written", 3, 4, "int"),
        basic("fEntryNumber", "Current entry number (last one filled in this branch)", 16, 8, "long long"),
        object_any("fIOFeatures", "IO features for newly-created baskets.", 62, 1, "ROOT::TIOFeatures"),
        basic("fOffset", "Offset of this branch", 3, 4, "int"),
        basic("fMaxBaskets", "Maximum number of Baskets so far", 6, 4, "int"),
        basic("fSplitLevel", "Branch split level", 3, 4, "int"),
        basic("fEntries", "Number of entries", 16, 8, "long long"),
        basic("fFirstEntry", "Number of the first entry in this branch", 16, 8, "long long"),
        basic("fTotBytes", "Total number of bytes in all leaves before compression", 16, 8, "long long"),
        basic("fZipBytes", "Total number of bytes in all leaves after compression", 16, 8, "long long"),
        object("fBranches", "-> List of Branches of this branch", 61, 64, "TObjArray"),
        object("fLeaves", "-> List of leaves of this branch", 61, 64, "TObjArray"),
        object("fBaskets", "-> List of baskets of this branch", 61, 64, "TObjArray"),
        counted("fBasketBytes", "[fMaxBaskets] Length of baskets on file", 43, 4, "int*", (13, "fMaxBaskets", "TBranch")),
        counted("fBasketEntry", "[fMaxBaskets] Table of first entry in each basket", 56, 8, "long long*", (13, "fMaxBaskets", "TBranch")),
        counted("fBasketSeek", "[fMaxBaskets] Addresses of baskets on file", 56, 8, "long long*", (13, "fMaxBaskets", "TBranch")),
        string("fFileName", "Name of file where buffers are stored (\"\" if in same file as Tree header)", 65, 24, "TString"),
    ],
};

#[rustfmt::skip]
const TBRANCHELEMENT: Class = Class {
    name: "TBranchElement",
    version: 10,
    checksum: 3880738403,
    elements: &[
        base("TBranch", "Branch descriptor", 0, 13, 278366892),
        string("fClassName", "Class name of referenced object", 65, 24, "TString"),
        string("fParentName", "Name of parent class", 65, 24, "TString"),
        string("fClonesName", "Name of class in TClonesArray or (STL) collection (if any)", 65, 24, "TString"),
        basic("fCheckSum", "CheckSum of class", 13, 4, "unsigned int"),
        basic("fClassVersion", "Version number of class", 2, 2, "short"),
        basic("fID", "element serial number in fInfo", 3, 4, "int"),
        basic("fType", "Branch type", 3, 4, "int"),
        basic("fStreamerType", "branch streamer type", 3, 4, "int"),
        basic("fMaximum", "Maximum entries for a TClonesArray or variable array", 3, 4, "int"),
        object_pointer("fBranchCount", "pointer to primary branchcount branch", 64, 8, "TBranchElement*"),
        object_pointer("fBranchCount2", "pointer to secondary branchcount branch", 64, 8, "TBranchElement*"),
    ],
};

#[rustfmt::skip]
const TBRANCHREF: Class = Class {
    name: "TBranchRef",
    version: 1,
    checksum: 593540093,
    elements: &[
        base("TBranch", "Branch descriptor", 0, 13, 278366892),
        object_pointer("fRefTable", "pointer to the TRefTable", 64, 8, "TRefTable*"),
    ],
};

#[rustfmt::skip]
const TREFTABLE: Class = Class {
    name: "TRefTable",
    version: 3,
    checksum: 2357812101,
    elements: &[
        base("TObject", "Basic ROOT object", 66, 1, 2417737773),
        basic("fSize", "dummy for backward compatibility", 3, 4, "int"),
        object_pointer("fParents", "array of Parent objects  (eg TTree branch) holding the referenced objects", 64, 8, "TObjArray*"),
        object_pointer("fOwner", "Object owning this TRefTable", 64, 8, "TObject*"),
        stl("fProcessGUIDs", "UUIDs of TProcessIDs used in fParentIDs", 500, 24, "vector<string>", (1, 61)),
    ],
};

#[rustfmt::skip]
const TLEAF: Class = Class {
    name: "TLeaf",
    version: 2,
    checksum: 1830715730,
    elements: &[
        base("TNamed", "The basis for a named object (name, title)", 67, 1, 3753331260),
        basic("fLen", "Number of fixed length elements in the leaf's data.", 3, 4, "int"),
        basic("fLenType", "Number of bytes for this data type", 3, 4, "int"),
        basic("fOffset", "Offset in ClonesArray object (if one)", 3, 4, "int"),
        basic("fIsRange", "(=true if leaf has a range, false otherwise).  This is equivalent to being a 'leafcount'.  For a TLeafElement the range information is actually store in the TBranchElement.", 18, 1, "bool"),
        basic("fIsUnsigned", "(=true if unsigned, false otherwise)", 18, 1, "bool"),
        object_pointer("fLeafCount", "Pointer to Leaf count if variable length (we do not own the counter)", 64, 8, "TLeaf*"),
    ],
};

#[rustfmt::skip]
const TLEAFB: Class = Class {
    name: "TLeafB",
    version: 1,
    checksum: 253643614,
    elements: &[
        base("TLeaf", "Leaf: description of a Branch data type", 0, 2, 1830715730),
        basic("fMinimum", "Minimum value if leaf range is specified", 1, 1, "char"),
        basic("fMaximum", "Maximum value if leaf range is specified", 1, 1, "char"),
    ],
};

#[rustfmt::skip]
const TLEAFS: Class = Class {
    name: "TLeafS",
    version: 1,
    checksum: 353169103,
    elements: &[
        base("TLeaf", "Leaf: description of a Branch data type", 0, 2, 1830715730),
        basic("fMinimum", "Minimum value if leaf range is specified", 2, 2, "short"),
        basic("fMaximum", "Maximum value if leaf range is specified", 2, 2, "short"),
    ],
};

#[rustfmt::skip]
const TLEAFI: Class = Class {
    name: "TLeafI",
    version: 1,
    checksum: 2120920601,
    elements: &[
        base("TLeaf", "Leaf: description of a Branch data type", 0, 2, 1830715730),
        basic("fMinimum", "Minimum value if leaf range is specified", 3, 4, "int"),
        basic("fMaximum", "Maximum value if leaf range is specified", 3, 4, "int"),
    ],
};

#[rustfmt::skip]
const TLEAFL: Class = Class {
    name: "TLeafL",
    version: 1,
    checksum: 3727820898,
    elements: &[
        base("TLeaf", "Leaf: description of a Branch data type", 0, 2, 1830715730),
        basic("fMinimum", "Minimum value if leaf range is specified", 16, 8, "long long"),
        basic("fMaximum", "Maximum value if leaf range is specified", 16, 8, "long long"),
    ],
};

#[rustfmt::skip]
const TLEAFF: Class = Class {
    name: "TLeafF",
    version: 1,
    checksum: 987602290,
    elements: &[
        base("TLeaf", "Leaf: description of a Branch data type", 0, 2, 1830715730),
        basic("fMinimum", "Minimum value if leaf range is specified", 5, 4, "float"),
        basic("fMaximum", "Maximum value if leaf range is specified", 5, 4, "float"),
    ],
};

#[rustfmt::skip]
const TLEAFD: Class = Class {
    name: "TLeafD",
    version: 1,
    checksum: 294553462,
    elements: &[
        base("TLeaf", "Leaf: description of a Branch data type", 0, 2, 1830715730),
        basic("fMinimum", "Minimum value if leaf range is specified", 8, 8, "double"),
        basic("fMaximum", "Maximum value if leaf range is specified", 8, 8, "double"),
    ],
};

#[rustfmt::skip]
const TLEAFO: Class = Class {
    name: "TLeafO",
    version: 1,
    checksum: 44976339,
    elements: &[
        base("TLeaf", "Leaf: description of a Branch data type", 0, 2, 1830715730),
        basic("fMinimum", "Minimum value if leaf range is specified", 18, 1, "bool"),
        basic("fMaximum", "Maximum value if leaf range is specified", 18, 1, "bool"),
    ],
};

#[rustfmt::skip]
const TLEAFELEMENT: Class = Class {
    name: "TLeafElement",
    version: 1,
    checksum: 2689566867,
    elements: &[
        base("TLeaf", "Leaf: description of a Branch data type", 0, 2, 1830715730),
        basic("fID", "element serial number in fInfo", 3, 4, "int"),
        basic("fType", "leaf type", 3, 4, "int"),
    ],
};

/// The anchor of an RNTuple (ROOT's `RNTuple::Streamer` adds its checksum after these members).
#[rustfmt::skip]
const RNTUPLE: Class = Class {
    name: "ROOT::RNTuple",
    version: 2,
    checksum: 1268915189,
    elements: &[
        basic("fVersionEpoch", "", 12, 2, "unsigned short"),
        basic("fVersionMajor", "", 12, 2, "unsigned short"),
        basic("fVersionMinor", "", 12, 2, "unsigned short"),
        basic("fVersionPatch", "", 12, 2, "unsigned short"),
        basic("fSeekHeader", "", 17, 8, "unsigned long long"),
        basic("fNBytesHeader", "", 17, 8, "unsigned long long"),
        basic("fLenHeader", "", 17, 8, "unsigned long long"),
        basic("fSeekFooter", "", 17, 8, "unsigned long long"),
        basic("fNBytesFooter", "", 17, 8, "unsigned long long"),
        basic("fLenFooter", "", 17, 8, "unsigned long long"),
        basic("fMaxKeySize", "", 17, 8, "unsigned long long"),
    ],
};
