//! How a branch's bytes become arrays: which element type, which per-entry shape, which headers.

pub use super::array::DType;
use super::model::{model_of_type, object_array_model, Member, Model};
use super::packed::{Packing, K_DOUBLE32, K_FLOAT16};
use super::streamers::{find_element, StreamerInfo};
use super::tree::{BranchMeta, ElementMeta, LeafMeta, TreeMeta};

impl DType {
    fn from_leaf_class(class: &str, unsigned: bool) -> Option<Self> {
        Some(match (class, unsigned) {
            ("TLeafO", _) => DType::Bool,
            ("TLeafB", false) => DType::I8,
            ("TLeafB", true) => DType::U8,
            ("TLeafS", false) => DType::I16,
            ("TLeafS", true) => DType::U16,
            ("TLeafI", false) => DType::I32,
            ("TLeafI", true) => DType::U32,
            ("TLeafL" | "TLeafG", false) => DType::I64,
            ("TLeafL" | "TLeafG", true) => DType::U64,
            ("TLeafF", _) => DType::F32,
            ("TLeafD", _) => DType::F64,
            _ => return None,
        })
    }

    /// ROOT's streamer type codes (TVirtualStreamerInfo::EReadWrite), without array offsets.
    pub(crate) fn from_type_code(code: i32) -> Option<Self> {
        Some(match code {
            1 => DType::I8,
            2 => DType::I16,
            3 => DType::I32,
            4 | 16 => DType::I64,
            5 => DType::F32,
            // kCounter and kBits are read as unsigned, as uproot does.
            6 | 13 | 15 => DType::U32,
            8 => DType::F64,
            11 => DType::U8,
            12 => DType::U16,
            14 | 17 => DType::U64,
            18 => DType::Bool,
            _ => return None,
        })
    }

    /// Element type of `vector<T>` / `std::vector<T>` class names.
    pub(crate) fn from_cpp_name(name: &str) -> Option<Self> {
        Some(match name.trim() {
            "bool" | "Bool_t" => DType::Bool,
            "char" | "Char_t" | "int8_t" => DType::I8,
            "unsigned char" | "UChar_t" | "uint8_t" => DType::U8,
            "short" | "Short_t" | "int16_t" => DType::I16,
            "unsigned short" | "UShort_t" | "uint16_t" => DType::U16,
            "int" | "Int_t" | "int32_t" => DType::I32,
            "unsigned int" | "unsigned" | "UInt_t" | "uint32_t" => DType::U32,
            "long" | "Long_t" | "long long" | "Long64_t" | "int64_t" => DType::I64,
            "unsigned long" | "ULong_t" | "unsigned long long" | "ULong64_t" | "uint64_t" => {
                DType::U64
            }
            "float" | "Float_t" => DType::F32,
            "double" | "Double_t" => DType::F64,
            _ => return None,
        })
    }
}

/// How entries are laid out in a branch's baskets.
#[derive(Clone, Debug, PartialEq)]
pub enum Interpretation {
    /// Every entry holds `product(inner_shape)` items of `dtype` (stored packed when `packing`
    /// says so: Double32_t, Float16_t).
    Fixed {
        dtype: DType,
        inner_shape: Vec<usize>,
        packing: Option<Packing>,
    },
    /// Entries vary in length: `header_bytes`, then items of `dtype` (each of `inner_shape`).
    /// `count_branch` is the branch whose values count the items, when there is one.
    Jagged {
        dtype: DType,
        inner_shape: Vec<usize>,
        header_bytes: usize,
        count_branch: Option<usize>,
        packing: Option<Packing>,
    },
    /// One string per entry: `header_bytes`, a length byte (255 then a 4-byte length when longer),
    /// then the characters.
    Strings { header_bytes: usize },
    /// Several leaves per entry (a leaf list), each a fixed-size field.
    Record { fields: Vec<RecordField> },
    /// One object per entry, read with its model (uproot's AsObjects): STL containers, strings
    /// inside them, classes. `typename` is the C++ type.
    Objects { model: Model, typename: String },
    /// A split object read whole (uproot's AsGroup): a record of its sub-branches (`children`,
    /// indices into the tree's branches), each read as itself and named by its branch name.
    Group { children: Vec<usize> },
}

#[derive(Clone, Debug, PartialEq)]
pub struct RecordField {
    pub name: String,
    pub dtype: DType,
    pub inner_shape: Vec<usize>,
}

/// Bytes of one stored number.
pub fn stored_size(dtype: DType, packing: Option<Packing>) -> usize {
    packing.map_or(dtype.size(), Packing::stored_size)
}

impl Interpretation {
    /// Its family in one word, as listings and the bindings name it.
    pub fn kind(&self) -> &'static str {
        match self {
            Interpretation::Fixed { .. } => "fixed",
            Interpretation::Jagged { .. } => "jagged",
            Interpretation::Strings { .. } => "strings",
            Interpretation::Record { .. } => "record",
            Interpretation::Objects { .. } => "objects",
            Interpretation::Group { .. } => "group",
        }
    }

    /// Bytes per entry for fixed-size layouts.
    pub fn fixed_entry_bytes(&self) -> Option<usize> {
        match self {
            Interpretation::Fixed {
                dtype,
                inner_shape,
                packing,
            } => Some(stored_size(*dtype, *packing) * inner_shape.iter().product::<usize>()),
            Interpretation::Record { fields } => Some(
                fields
                    .iter()
                    .map(|f| f.dtype.size() * f.inner_shape.iter().product::<usize>())
                    .sum(),
            ),
            _ => None,
        }
    }

    /// A C++-like type name for listings: `float`, `int32_t[3]`, `float[]`, `std::vector<float>`.
    pub fn typename(&self) -> String {
        let dims = |shape: &[usize]| shape.iter().map(|d| format!("[{d}]")).collect::<String>();
        match self {
            Interpretation::Fixed {
                dtype, inner_shape, ..
            } => {
                format!("{}{}", dtype.cpp_name(), dims(inner_shape))
            }
            Interpretation::Jagged {
                dtype,
                inner_shape,
                header_bytes: 10,
                ..
            } if inner_shape.is_empty() => {
                format!("std::vector<{}>", dtype.cpp_name())
            }
            Interpretation::Jagged {
                dtype, inner_shape, ..
            } => format!("{}[]{}", dtype.cpp_name(), dims(inner_shape)),
            Interpretation::Strings { .. } => "string".to_string(),
            Interpretation::Objects { typename, .. } => typename.clone(),
            Interpretation::Group { children } => format!("group of {} branches", children.len()),
            Interpretation::Record { fields } => format!(
                "struct {{{}}}",
                fields
                    .iter()
                    .map(|f| format!("{} {}{};", f.dtype.cpp_name(), f.name, dims(&f.inner_shape)))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        }
    }
}

/// Why a branch cannot be read, and what it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported {
    pub typename: String,
    pub reason: String,
}

fn unsupported(typename: impl Into<String>, reason: impl Into<String>) -> Unsupported {
    Unsupported {
        typename: typename.into(),
        reason: reason.into(),
    }
}

// Streamer type codes.
const OFFSET_L: i32 = 20;
const OFFSET_P: i32 = 40;
const K_CHAR_STAR: i32 = 7;
const K_TSTRING: i32 = 65;
const K_STL: i32 = 300;
const K_STL_STRING: i32 = 365;
const K_OBJECT: i32 = 61;
const K_BITS: i32 = 15;
const K_ANY: i32 = 62;
// TBranchElement fType values.
const CLONES_MEMBER: i32 = 31;
const STL_MEMBER: i32 = 41;

/// The shape of a fixed-size array member of the objects in a split collection (`float x[6][3]`
/// in the class of a TClonesArray or a split `std::vector<Class>`). Its leaf's title names only
/// the collection's count (`x[cells_]`), so uproot, which takes dimensions from titles, reads
/// fLen items (`var * 18 * float32`); `Declared` keeps the class's (`var * 6 * 3 * float32`).
/// Members of split objects outside collections keep their dimensions either way. Leaf-list
/// Double32_t / Float16_t arrays (`x[2][3]/d[0,1,10]`) are alike: their leaf's title is the type
/// and range, so uproot reads fLen items (`6 * float64`) where `Declared` keeps `2 * 3 * float64`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MemberDims {
    #[default]
    Uproot,
    Declared,
}

/// Fixed dimensions from a leaf title such as `x[3]`, `x[2][3]` or `x[n][3]` (names are counts,
/// not dimensions); a title with no number in brackets but fLen > 1 gives `[fLen]`, as uproot.
fn title_dims(leaf: &LeafMeta) -> Vec<usize> {
    let title = if leaf.title.contains('[') {
        &leaf.title
    } else {
        &leaf.name
    };
    let mut dims = Vec::new();
    let mut rest = title.as_str();
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find(']') else {
            break;
        };
        if let Ok(d) = rest[open + 1..open + close].trim().parse::<usize>() {
            dims.push(d);
        }
        rest = &rest[open + close + 1..];
    }
    if dims.is_empty() && leaf.len > 1 {
        dims.push(leaf.len as usize);
    }
    dims
}

/// A member of a split object declared as a pointer (`TClonesArray *fHits`), by the streamer
/// info of the class that holds it.
fn is_pointer_member(e: &ElementMeta, infos: &[StreamerInfo]) -> bool {
    e.id >= 0
        && find_element(infos, &e.class_name, e.class_version, e.id)
            .is_some_and(|m| m.type_name.trim_end().ends_with('*'))
}

/// Members of the objects in a TClonesArray or a split `std::vector<Class>`: each entry holds
/// the member of every object, one after another, counted by the collection's branch.
fn is_collection_member(kind: i32) -> bool {
    kind == CLONES_MEMBER || kind == STL_MEMBER
}

/// Element type of `std::vector<T>` and of `ROOT::VecOps::RVec<T>` (RDataFrame's Snapshot), which
/// ROOT streams alike.
fn vector_element(class_name: &str) -> Option<DType> {
    let name = class_name.trim();
    let inner = name.strip_prefix("std::").unwrap_or(name);
    let inner = inner
        .strip_prefix("vector<")
        .or_else(|| name.strip_prefix("ROOT::VecOps::RVec<"))
        .or_else(|| name.strip_prefix("ROOT::RVec<"))?
        .strip_suffix('>')?;
    DType::from_cpp_name(inner)
}

fn is_string_class(name: &str) -> bool {
    matches!(
        name.trim(),
        "string" | "std::string" | "TString" | "basic_string<char>"
    )
}

/// Whether whole top-level objects of `class_name` read without the file's streamer infos
/// (strings and vectors of numbers); other classes are read through them.
pub(crate) fn read_without_streamers(class_name: &str) -> bool {
    is_string_class(class_name) || vector_element(class_name).is_some()
}

/// A basket holds at most 2 GiB, so no entry can be larger.
const MAX_ENTRY_BYTES: usize = 1 << 31;

/// Bytes of one item of `shape`, unless absurd (dimensions come from leaf titles).
fn checked_item_bytes(dtype: DType, shape: &[usize]) -> Option<usize> {
    shape
        .iter()
        .try_fold(dtype.size(), |n, &d| n.checked_mul(d))
        .filter(|&n| n <= MAX_ENTRY_BYTES)
}

/// Decide how to read branch `index` of `tree`; `dims` shapes the fixed-size array members of
/// split collections (see `MemberDims`).
pub fn interpret(
    tree: &TreeMeta,
    index: usize,
    infos: &[StreamerInfo],
    dims: MemberDims,
) -> Result<Interpretation, Unsupported> {
    let interp = interpret_branch(tree, index, infos, dims)?;
    let sane = match &interp {
        Interpretation::Fixed {
            dtype, inner_shape, ..
        }
        | Interpretation::Jagged {
            dtype, inner_shape, ..
        } => checked_item_bytes(*dtype, inner_shape).is_some(),
        Interpretation::Record { fields } => fields
            .iter()
            .try_fold(0usize, |n, f| {
                n.checked_add(checked_item_bytes(f.dtype, &f.inner_shape)?)
            })
            .is_some_and(|n| n <= MAX_ENTRY_BYTES),
        Interpretation::Strings { .. }
        | Interpretation::Objects { .. }
        | Interpretation::Group { .. } => true,
    };
    if !sane {
        return Err(unsupported(
            interp.typename(),
            format!("its dimensions make entries larger than {MAX_ENTRY_BYTES} bytes"),
        ));
    }
    Ok(interp)
}

fn interpret_branch(
    tree: &TreeMeta,
    index: usize,
    infos: &[StreamerInfo],
    dims: MemberDims,
) -> Result<Interpretation, Unsupported> {
    let branch = &tree.branches[index];
    let leaves: Vec<&LeafMeta> = branch.leaves.iter().map(|&l| &tree.leaves[l]).collect();
    let element = branch.element.as_ref();
    let declared = element
        .map(|e| e.class_name.clone())
        .unwrap_or_else(|| branch.class.clone());

    // A branch with data not filled along with its tree (uproot gives it its own number of
    // entries, which a table of the tree's entries cannot hold).
    let counts_clones = element.is_some_and(|e| {
        let holds_clones = (e.class_name == "TClonesArray" && e.id < 0) || e.kind == 3;
        holds_clones && !is_pointer_member(e, infos)
    });
    if (branch.children.is_empty() || counts_clones) && branch.entries != tree.entries {
        return Err(unsupported(
            declared,
            format!(
                "it holds {} entries where its tree holds {}",
                branch.entries, tree.entries
            ),
        ));
    }
    if !branch.children.is_empty() {
        // A TClonesArray's own branch holds the number of objects per entry (fType 3, a
        // TClonesArray node, whatever class holds it); a `TClonesArray*` member is read as the
        // record of its members, as uproot reads it.
        if counts_clones {
            return Ok(Interpretation::Fixed {
                dtype: DType::I32,
                inner_shape: vec![],
                packing: None,
            });
        }
        // Read whole when every member is read (uproot cannot read the others either).
        for &child in &branch.children {
            if let Err(refused) = interpret(tree, child, infos, dims) {
                return Err(unsupported(
                    declared,
                    format!(
                        "its member '{}' is refused ({}); read the other members instead",
                        tree.branches[child].name, refused.reason
                    ),
                ));
            }
        }
        return Ok(Interpretation::Group {
            children: branch.children.clone(),
        });
    }
    if branch.class == "TBranchObject" || branch.class == "TBranchSTL" {
        return Err(unsupported(
            declared,
            format!("{} branches hold whole objects", branch.class),
        ));
    }
    match leaves.as_slice() {
        [] => Err(unsupported(declared, "the branch has no leaves")),
        [leaf] => interpret_leaf(tree, branch, leaf, infos, dims),
        many => {
            let mut fields = Vec::new();
            for leaf in many {
                let dtype =
                    DType::from_leaf_class(&leaf.class, leaf.is_unsigned).ok_or_else(|| {
                        unsupported(
                            &leaf.title,
                            format!("leaf-list member '{}' is a {}", leaf.name, leaf.class),
                        )
                    })?;
                if leaf.count.is_some() {
                    return Err(unsupported(
                        &branch.title,
                        "a leaf list with a variable-length member",
                    ));
                }
                fields.push(RecordField {
                    name: leaf.name.clone(),
                    dtype,
                    inner_shape: title_dims(leaf),
                });
            }
            Ok(Interpretation::Record { fields })
        }
    }
}

fn interpret_leaf(
    tree: &TreeMeta,
    branch: &BranchMeta,
    leaf: &LeafMeta,
    infos: &[StreamerInfo],
    dims: MemberDims,
) -> Result<Interpretation, Unsupported> {
    let count_branch = leaf.count.and_then(|c| tree.leaves[c].branch);
    if leaf.class == "TLeafC" {
        return Ok(Interpretation::Strings { header_bytes: 0 });
    }
    // Leaf-list Double32_t / Float16_t (`x[2][3]/d[0,1,10]`): ROOT reads them with a streamer
    // element titled by the type after the slash, whose brackets hold the range (the brackets
    // before it are dimensions; go-hep titles the leaf with the type alone).
    let spec = leaf.title.rsplit('/').next().unwrap_or_default();
    let packed = match leaf.class.as_str() {
        "TLeafD32" => Packing::of(K_DOUBLE32, spec),
        "TLeafF16" => Packing::of(K_FLOAT16, spec),
        _ => None,
    };
    let dtype = packed
        .map(|(_, dtype)| dtype)
        .or_else(|| DType::from_leaf_class(&leaf.class, leaf.is_unsigned));
    if let Some(dtype) = dtype {
        let inner_shape = match (packed, dims) {
            (Some(_), MemberDims::Declared) => title_dims(&LeafMeta {
                title: branch.title.split('/').next().unwrap_or_default().into(),
                ..leaf.clone()
            }),
            _ => title_dims(leaf),
        };
        let packing = packed.map(|(packing, _)| packing);
        return Ok(match leaf.count {
            None => Interpretation::Fixed {
                dtype,
                inner_shape,
                packing,
            },
            Some(_) => Interpretation::Jagged {
                dtype,
                inner_shape,
                header_bytes: 0,
                count_branch,
                packing,
            },
        });
    }
    if leaf.class != "TLeafElement" {
        return Err(unsupported(
            &leaf.class,
            format!("leaves of class {} are not interpreted", leaf.class),
        ));
    }
    let Some(e) = branch.element.as_ref() else {
        return Err(unsupported(
            &leaf.class,
            "a TLeafElement outside a TBranchElement",
        ));
    };
    // Whole top-level objects: strings and vectors of numbers.
    if e.id < 0 {
        if is_string_class(&e.class_name) {
            return Ok(Interpretation::Strings { header_bytes: 0 });
        }
        if let Some(dtype) = vector_element(&e.class_name) {
            return Ok(Interpretation::Jagged {
                dtype,
                inner_shape: vec![],
                header_bytes: 10,
                count_branch: None,
                packing: None,
            });
        }
        return objects(&e.class_name, infos);
    }
    // A member of a split object (or of the objects in a TClonesArray).
    let member = find_element(infos, &e.class_name, e.class_version, e.id);
    let member_type = member
        .map(|m| m.type_name.clone())
        .unwrap_or_else(|| format!("{}::<member {}>", e.class_name, e.id));
    let code = e.streamer_type;
    if code == K_TSTRING && !is_collection_member(e.kind) {
        return Ok(Interpretation::Strings { header_bytes: 0 });
    }
    if (code == K_STL || code == K_STL_STRING) && !is_collection_member(e.kind) {
        if let Some(m) = member {
            if is_string_class(&m.type_name) {
                return Ok(Interpretation::Strings { header_bytes: 6 });
            }
            if let Some(dtype) = vector_element(&m.type_name) {
                return Ok(Interpretation::Jagged {
                    dtype,
                    inner_shape: vec![],
                    header_bytes: 10,
                    count_branch: None,
                    packing: None,
                });
            }
        }
        return match member {
            Some(m) => objects(&m.type_name, infos),
            None => Err(unsupported(member_type, "its streamer info is missing")),
        };
    }
    if (code == K_OBJECT || code == K_ANY) && !is_collection_member(e.kind) {
        if let Some(m) = member {
            return objects(&m.type_name, infos);
        }
    }
    if is_collection_member(e.kind) && code == K_BITS {
        // fBits of the objects: 4 bytes each, 6 for objects referenced by a TRef.
        return Ok(Interpretation::Objects {
            model: Model::Members {
                header: false,
                items: Box::new(Model::Bits),
            },
            typename: "UInt_t[]".to_string(),
        });
    }
    if is_collection_member(e.kind)
        && matches!(code, K_STL | K_STL_STRING | K_OBJECT | K_ANY | K_TSTRING)
    {
        // One member of each object in the collection, stored whole: STL members after one
        // header per entry, objects each with its own (uproot's AsArray / AsStridedObjects),
        // TStrings bare (a length, then the characters).
        let Some(m) = member else {
            return Err(unsupported(member_type, "its streamer info is missing"));
        };
        let stl = code == K_STL || code == K_STL_STRING;
        return members_of_each(&m.type_name, stl, model_of_type(&m.type_name, !stl, infos));
    }
    if code == OFFSET_L + K_OBJECT || code == OFFSET_L + K_ANY {
        // Fixed arrays of objects, each with its own header: each entry's list of arrays, one
        // per object of a collection or a single one outside collections (uproot's form).
        let Some(m) = member else {
            return Err(unsupported(member_type, "its streamer info is missing"));
        };
        return members_of_each(&m.type_name, false, object_array_model(m, infos));
    }
    let (base, array) = match code {
        c if c > OFFSET_P && c < OFFSET_P + OFFSET_L => (c - OFFSET_P, "pointer"),
        c if c > OFFSET_L && c < OFFSET_P => (c - OFFSET_L, "fixed"),
        c => (c, "scalar"),
    };
    let title = member.map_or("", |m| m.title.as_str());
    let (dtype, packing) = match Packing::of(base, title) {
        Some((packing, dtype)) => (dtype, Some(packing)),
        None => match DType::from_type_code(base).filter(|_| base != K_CHAR_STAR) {
            Some(dtype) => (dtype, None),
            None => {
                return Err(unsupported(
                    member_type,
                    format!("streamer type {code} is not interpreted"),
                ))
            }
        },
    };
    // Fixed arrays take their dimensions from the leaf title, as uproot does, or from the
    // streamer when asked to (the titles of collection members leave them out).
    let inner_shape = match member {
        Some(m) if array == "fixed" && !m.array_dims.is_empty() && dims == MemberDims::Declared => {
            m.array_dims.clone()
        }
        _ => title_dims(leaf),
    };
    let member_kind = if is_collection_member(e.kind) {
        CLONES_MEMBER
    } else {
        e.kind
    };
    Ok(match (array, member_kind) {
        ("pointer", CLONES_MEMBER) => {
            return Err(unsupported(
                member_type,
                "variable arrays inside TClonesArray members",
            ))
        }
        ("pointer", _) => Interpretation::Jagged {
            dtype,
            inner_shape: vec![],
            header_bytes: 1,
            count_branch,
            packing,
        },
        (_, CLONES_MEMBER) => Interpretation::Jagged {
            dtype,
            inner_shape,
            header_bytes: 0,
            count_branch,
            packing,
        },
        _ => Interpretation::Fixed {
            dtype,
            inner_shape,
            packing,
        },
    })
}

/// Values of `items` (of C++ type `type_name`) up to the end of each entry, after one header
/// per entry when `header`.
fn members_of_each(
    type_name: &str,
    header: bool,
    items: Result<Model, String>,
) -> Result<Interpretation, Unsupported> {
    match items {
        Ok(model) if streams_itself(&model) => Err(streams_itself_refusal(type_name)),
        Ok(items) => Ok(Interpretation::Objects {
            model: Model::Members {
                header,
                items: Box::new(items),
            },
            typename: format!("{}[]", type_name.trim()),
        }),
        Err(why) => Err(unsupported(type_name.trim(), why)),
    }
}

/// Objects of C++ type `name`, each with its header, read with a model of the streamer infos.
fn objects(name: &str, infos: &[StreamerInfo]) -> Result<Interpretation, Unsupported> {
    match model_of_type(name, true, infos) {
        Ok(model) if streams_itself(&model) => Err(streams_itself_refusal(name)),
        Ok(model) => Ok(Interpretation::Objects {
            model,
            typename: name.trim().to_string(),
        }),
        Err(why) => Err(unsupported(name.trim(), why)),
    }
}

/// Classes streamed by hand (TRef: no members in their streamer info but TObject) would read
/// as empty records, or not at all; uproot has models of its own for them.
fn streams_itself(model: &Model) -> bool {
    matches!(model, Model::Class { members, .. } if members.iter().all(|m| matches!(m, Member::TObject)))
}

fn streams_itself_refusal(name: &str) -> Unsupported {
    unsupported(
        name.trim(),
        "its class has no members in the streamer infos (it streams itself)",
    )
}

/// Copy big-endian items into native-endian `dst` (same length in bytes).
pub fn convert_big_endian(dtype: DType, src: &[u8], dst: &mut [u8]) {
    // SAFETY: initialized bytes viewed as possibly uninitialized ones, only ever written with
    // initialized values.
    let dst = unsafe { &mut *(dst as *mut [u8] as *mut [std::mem::MaybeUninit<u8>]) };
    convert_big_endian_into(dtype, src, dst);
}

/// `convert_big_endian` into bytes not written yet (see `array::Unwritten`): writes every one.
pub fn convert_big_endian_into(dtype: DType, src: &[u8], dst: &mut [std::mem::MaybeUninit<u8>]) {
    assert_eq!(src.len(), dst.len());
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        if src.len() >= super::array::STREAMED_OUTPUT_BYTES && matches!(dtype.size(), 2 | 4 | 8) {
            // SAFETY: the CPU has AVX2 (checked just above); the lengths are equal (asserted).
            return unsafe { swap_streamed_avx2(dtype, src, dst) };
        }
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { convert_avx2(dtype, src, dst) };
    }
    convert(dtype, src, dst)
}

/// `convert` of 2-, 4- or 8-byte numbers with AVX2, the 32-byte-aligned body of `dst` written
/// with non-temporal stores (one byte shuffle per 32 bytes), its ends as `convert` writes them.
///
/// # Safety
/// The CPU has AVX2; `src` and `dst` have the same length.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn swap_streamed_avx2(dtype: DType, src: &[u8], dst: &mut [std::mem::MaybeUninit<u8>]) {
    use std::arch::x86_64::*;
    let width = dtype.size();
    let lead = dst.as_ptr().align_offset(32).min(dst.len());
    if !lead.is_multiple_of(width) {
        // (An output not aligned to its numbers' size: not one the engine makes.)
        return convert(dtype, src, dst);
    }
    let body = (dst.len() - lead) / 32 * 32;
    let order: [u8; 32] =
        std::array::from_fn(|i| ((i / width) * width + width - 1 - i % width) as u8);
    // SAFETY: AVX2 (the caller's promise); every load reads 32 bytes of `src` and every store
    // writes 32 bytes of `dst` within `lead..lead + body` (equal lengths), the stores at
    // 32-byte-aligned addresses (`lead` reaches the first).
    unsafe {
        let order = _mm256_loadu_si256(order.as_ptr().cast());
        for at in (lead..lead + body).step_by(32) {
            let value = _mm256_loadu_si256(src.as_ptr().add(at).cast());
            _mm256_stream_si256(
                dst.as_mut_ptr().add(at).cast(),
                _mm256_shuffle_epi8(value, order),
            );
        }
        // The streamed stores are ordered before whatever hands `dst` on.
        _mm_sfence();
    }
    convert(dtype, &src[..lead], &mut dst[..lead]);
    convert(dtype, &src[lead + body..], &mut dst[lead + body..]);
}

/// `convert` compiled for AVX2: a byte swap is then one shuffle per 32 bytes (the portable
/// build assumes SSE2, which has no byte shuffle). It runs over every number a TTree read gives.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn convert_avx2(dtype: DType, src: &[u8], dst: &mut [std::mem::MaybeUninit<u8>]) {
    convert(dtype, src, dst)
}

#[inline(always)]
fn convert(dtype: DType, src: &[u8], dst: &mut [std::mem::MaybeUninit<u8>]) {
    macro_rules! swap {
        ($t:ty) => {{
            const N: usize = std::mem::size_of::<$t>();
            for (d, s) in dst.chunks_exact_mut(N).zip(src.chunks_exact(N)) {
                let value = <$t>::from_be_bytes(s.try_into().unwrap()).to_ne_bytes();
                // SAFETY: `d` holds exactly N bytes; `[u8; N]` has alignment 1.
                unsafe { d.as_mut_ptr().cast::<[u8; N]>().write(value) };
            }
        }};
    }
    match dtype.size() {
        1 if dtype == DType::Bool => {
            for (d, s) in dst.iter_mut().zip(src) {
                d.write((*s != 0) as u8);
            }
        }
        1 => {
            // SAFETY: `dst` holds `src.len()` bytes (asserted by the caller), not overlapping `src`.
            unsafe {
                std::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_mut_ptr().cast(), src.len())
            }
        }
        2 => swap!(u16),
        4 => swap!(u32),
        _ => swap!(u64),
    }
}

#[cfg(test)]
#[path = "interpretation_tests.rs"]
mod tests;
