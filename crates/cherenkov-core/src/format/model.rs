//! Models of objects stored whole in a branch (uproot's `AsObjects`): STL containers, strings and
//! classes, built from C++ type names and the file's streamer infos. `deserialize.rs` reads entries
//! with them into arrays of the layouts uproot gives.

use super::array::DType;
use super::packed::{Packing, K_DOUBLE32, K_FLOAT16};
use super::streamers::{StreamerElement, StreamerInfo};

/// How one value is stored, and so read.
#[derive(Clone, Debug, PartialEq)]
pub enum Model {
    /// A big-endian number.
    Number(DType),
    /// TObject's fBits (u32), followed by a 2-byte process id when the object is referenced.
    Bits,
    /// A packed Double32_t / Float16_t read as `DType`.
    Packed(Packing, DType),
    /// A C array of fixed dimensions (outermost first).
    FixedArray(Box<Model>, Vec<usize>),
    /// A length (one byte, or 255 and four bytes) then characters; `header` says whether a byte
    /// count and version come first (std::string members and branches).
    String { header: bool },
    /// std::vector, ROOT::VecOps::RVec, std::set, std::list...: a count, then the items;
    /// `set` marks sets (awkward's `__array__: "set"`).
    Sequence {
        header: bool,
        items: Box<Model>,
        set: bool,
    },
    /// One member of each object of a split collection (TClonesArray or std::vector<Class>),
    /// stored whole: no count, values up to the end of the header's byte count (`header`, STL
    /// members) or of the entry (objects, each with its own header).
    Members { header: bool, items: Box<Model> },
    /// std::map: a count, then the keys, then the values (ROOT writes maps' pairs member by
    /// member). `keys` and `values` are read without headers of their own; `column_headers` says
    /// which of the two columns starts with one byte count and version for all its items (STL
    /// strings and collections do; numbers, TString and classes do not).
    Map {
        header: bool,
        keys: Box<Model>,
        values: Box<Model>,
        column_headers: [bool; 2],
    },
    /// A class: byte count and version (unless `header` is false: classes whose own streamer
    /// writes their members bare), then its bases' and its own members. Members of a TObject
    /// base are read and left out (as uproot does).
    Class {
        name: String,
        version: i32,
        header: bool,
        members: Vec<Member>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub enum Member {
    /// A named field of the record.
    Field(String, Model),
    /// A base class whose members become fields of the derived record.
    Base(Model),
    /// TObject's version, fUniqueID and fBits (read, not kept).
    TObject,
}

/// Classes nested deeper than this are refused (a class that holds itself cannot be an array).
const MAX_DEPTH: usize = 12;

/// The model of C++ type `name` stored with a header when `header` (as a branch or a class
/// member); `Err` says why it cannot be read.
pub fn model_of_type(name: &str, header: bool, infos: &[StreamerInfo]) -> Result<Model, String> {
    type_model(&normalize(name), header, infos, 0)
}

fn normalize(name: &str) -> String {
    let mut s = name.trim().replace("std::", "");
    for (from, to) in [("> >", ">>"), (" >", ">"), ("< ", "<"), (", ", ",")] {
        while s.contains(from) {
            s = s.replace(from, to);
        }
    }
    s
}

/// Template arguments of `outer<...>`, split at top-level commas.
fn template_args<'a>(name: &'a str, outer: &str) -> Option<Vec<&'a str>> {
    let inner = name
        .strip_prefix(outer)?
        .strip_prefix('<')?
        .strip_suffix('>')?;
    let (mut depth, mut start, mut out) = (0i32, 0, Vec::new());
    for (i, c) in inner.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            ',' if depth == 0 => {
                out.push(inner[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(inner[start..].trim());
    Some(out)
}

fn type_model(
    name: &str,
    header: bool,
    infos: &[StreamerInfo],
    depth: usize,
) -> Result<Model, String> {
    if depth > MAX_DEPTH {
        return Err(format!(
            "{name} nests classes deeper than {MAX_DEPTH} levels"
        ));
    }
    if let Some(dtype) = DType::from_cpp_name(name) {
        return Ok(Model::Number(dtype));
    }
    if let Some(model) = tarray(name) {
        return Ok(model);
    }
    match name {
        "string" => return Ok(Model::String { header }),
        "TString" => return Ok(Model::String { header: false }),
        "Double32_t" | "Float16_t" => {
            return Err(format!("{name} inside a container (uproot refuses it too)"))
        }
        _ => {}
    }
    for (outer, set) in [
        ("vector", false),
        ("ROOT::VecOps::RVec", false),
        ("ROOT::RVec", false),
        ("list", false),
        ("deque", false),
        ("set", true),
        ("unordered_set", true),
    ] {
        if let Some(args) = template_args(name, outer) {
            let items = type_model(args[0], false, infos, depth + 1)?;
            return Ok(Model::Sequence {
                header,
                items: Box::new(items),
                set,
            });
        }
    }
    for outer in ["map", "unordered_map"] {
        if let Some(args) = template_args(name, outer) {
            let [k, v] = args.as_slice() else {
                return Err(format!("{name}: a map of two types"));
            };
            let keys = type_model(k, true, infos, depth + 1)?;
            let values = type_model(v, true, infos, depth + 1)?;
            let (keys, key_header) = without_header(keys);
            let (values, value_header) = without_header(values);
            return Ok(Model::Map {
                header,
                keys: Box::new(keys),
                values: Box::new(values),
                column_headers: [key_header, value_header],
            });
        }
    }
    // Other templates (ElementLink<DataVector<T>>, pair<A,B>) are classes when the file
    // describes them.
    if name.ends_with('*') || (name.contains('<') && find_info(name, infos).is_none()) {
        return Err(format!("{name} is not a type cherenkov reads as objects"));
    }
    class_model(name, infos, depth)
}

/// A fixed array of objects (`TLorentzVector p[5]`: streamer type kOffsetL + kObject or
/// kOffsetL + kAny), as element `e` of its class declares it: each object with its own byte
/// count and version.
pub fn object_array_model(e: &StreamerElement, infos: &[StreamerInfo]) -> Result<Model, String> {
    object_array(e, infos, 0)
}

fn object_array(
    e: &StreamerElement,
    infos: &[StreamerInfo],
    depth: usize,
) -> Result<Model, String> {
    if e.array_dims.is_empty() {
        return Err(format!(
            "member {} ({}): a fixed array without dimensions",
            e.name, e.type_name
        ));
    }
    let items = class_model(&normalize(&e.type_name), infos, depth + 1)?;
    Ok(Model::FixedArray(Box::new(items), e.array_dims.clone()))
}

/// TArrayC, TArrayS, TArrayI, TArrayF, TArrayD, TArrayL64: TArray::Streamer writes fN, then
/// the numbers, with no byte count or version (their streamer infos, an `fArray` pointer
/// counted by the base's fN, do not describe what is written).
fn tarray(name: &str) -> Option<Model> {
    let dtype = match name {
        "TArrayC" => DType::I8,
        "TArrayS" => DType::I16,
        "TArrayI" => DType::I32,
        "TArrayF" => DType::F32,
        "TArrayD" => DType::F64,
        "TArrayL64" => DType::I64,
        _ => return None,
    };
    Some(Model::Sequence {
        header: false,
        items: Box::new(Model::Number(dtype)),
        set: false,
    })
}

/// A model read without its own header, and whether it had one (STL strings and collections).
fn without_header(model: Model) -> (Model, bool) {
    match model {
        Model::String { header } => (Model::String { header: false }, header),
        Model::Sequence { header, items, set } => (
            Model::Sequence {
                header: false,
                items,
                set,
            },
            header,
        ),
        Model::Map {
            header,
            keys,
            values,
            column_headers,
        } => (
            Model::Map {
                header: false,
                keys,
                values,
                column_headers,
            },
            header,
        ),
        other => (other, false),
    }
}

/// The streamer info of class `name` (spelled as `normalize` spells it).
fn find_info<'a>(name: &str, infos: &'a [StreamerInfo]) -> Option<&'a StreamerInfo> {
    infos.iter().find(|i| normalize(&i.class_name) == name)
}

fn class_model(name: &str, infos: &[StreamerInfo], depth: usize) -> Result<Model, String> {
    let info = find_info(name, infos)
        .ok_or_else(|| format!("the file has no streamer info for class {name}"))?;
    let mut members = Vec::new();
    for e in &info.elements {
        members.push(member_model(e, infos, depth)?);
    }
    Ok(Model::Class {
        name: name.to_string(),
        version: info.class_version,
        header: !BARE_CLASSES.contains(&name),
        members,
    })
}

/// Classes whose hand-written streamer writes their members with no byte count or version
/// (TDatime::Streamer is `b << fDatime`); their streamer infos still list the members.
const BARE_CLASSES: [&str; 1] = ["TDatime"];

// Streamer type codes (TVirtualStreamerInfo::EReadWrite).
const K_BASE: i32 = 0;
const K_OFFSET_L: i32 = 20;
const K_OBJECT: i32 = 61;
const K_ANY: i32 = 62;
const K_TSTRING: i32 = 65;
const K_TOBJECT: i32 = 66;
const K_TNAMED: i32 = 67;
const K_STL: i32 = 300;
const K_STL_STRING: i32 = 365;
const K_STREAMER: i32 = 500;

fn member_model(
    e: &StreamerElement,
    infos: &[StreamerInfo],
    depth: usize,
) -> Result<Member, String> {
    let what = |why: &str| format!("member {} ({}): {why}", e.name, e.type_name);
    let field = |m: Model| Ok(Member::Field(e.name.clone(), m));
    match e.type_code {
        K_BASE if e.name == "TObject" => Ok(Member::TObject),
        K_BASE => Ok(Member::Base(class_model(
            &normalize(&e.name),
            infos,
            depth + 1,
        )?)),
        K_TOBJECT => Ok(Member::TObject),
        K_TSTRING => field(Model::String { header: false }),
        // STL members written by the collection's own streamer (kStreamer) carry the same
        // header and layout.
        K_STL | K_STL_STRING => field(type_model(
            &normalize(&e.type_name),
            true,
            infos,
            depth + 1,
        )?),
        K_STREAMER if e.class.starts_with("TStreamerSTL") => field(type_model(
            &normalize(&e.type_name),
            true,
            infos,
            depth + 1,
        )?),
        K_OBJECT | K_ANY | K_TNAMED => {
            let name = normalize(&e.type_name);
            match tarray(&name) {
                Some(model) => field(model),
                None => field(class_model(&name, infos, depth + 1)?),
            }
        }
        code if code == K_OFFSET_L + K_OBJECT || code == K_OFFSET_L + K_ANY => {
            field(object_array(e, infos, depth)?)
        }
        code @ 1..=19 | code @ 21..=39 => {
            let base = if code > K_OFFSET_L {
                code - K_OFFSET_L
            } else {
                code
            };
            let number = match Packing::of(base, &e.title) {
                Some((packing, dtype)) if base == K_DOUBLE32 || base == K_FLOAT16 => {
                    Model::Packed(packing, dtype)
                }
                _ => match DType::from_type_code(base) {
                    Some(dtype) => Model::Number(dtype),
                    None => return Err(what(&format!("streamer type {code}"))),
                },
            };
            if code > K_OFFSET_L {
                if e.array_dims.is_empty() {
                    return Err(what("a fixed array without dimensions"));
                }
                field(Model::FixedArray(Box::new(number), e.array_dims.clone()))
            } else {
                field(number)
            }
        }
        code => Err(what(&format!(
            "streamer type {code} is not read as objects"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_stl_names_give_nested_models() {
        let m = model_of_type("std::vector<std::vector<int> >", true, &[]).unwrap();
        let Model::Sequence {
            header: true,
            items,
            set: false,
        } = m
        else {
            panic!("{m:?}")
        };
        assert_eq!(
            *items,
            Model::Sequence {
                header: false,
                items: Box::new(Model::Number(DType::I32)),
                set: false
            }
        );
        let m = model_of_type("map<int, double>", true, &[]).unwrap();
        assert!(matches!(m, Model::Map { header: true, .. }), "{m:?}");
        let m = model_of_type("map<int, std::vector<std::string> >", true, &[]).unwrap();
        let Model::Map {
            values,
            column_headers,
            ..
        } = m
        else {
            panic!("{m:?}")
        };
        assert_eq!(column_headers, [false, true]);
        assert!(matches!(*values, Model::Sequence { header: false, .. }));
    }

    fn element(name: &str, type_code: i32, type_name: &str, dims: Vec<usize>) -> StreamerElement {
        StreamerElement {
            class: String::new(),
            name: name.into(),
            type_code,
            type_name: type_name.into(),
            title: String::new(),
            size: 0,
            array_length: dims.iter().product::<usize>() as i32,
            array_dims: dims,
            max_index: [0; 5],
            tail: Default::default(),
        }
    }

    #[test]
    fn fixed_arrays_of_objects_hold_classes_each_with_its_header() {
        let info = |name: &str, elements| StreamerInfo {
            class_name: name.into(),
            class_version: 1,
            checksum: 0,
            elements,
        };
        let infos = [
            info("Pt", vec![element("x", 5, "float", vec![])]),
            info(
                "Track",
                vec![element("q", K_OFFSET_L + K_ANY, "Pt", vec![3])],
            ),
        ];
        let Model::Class { members, .. } = model_of_type("Track", true, &infos).unwrap() else {
            panic!()
        };
        let [Member::Field(name, Model::FixedArray(items, dims))] = members.as_slice() else {
            panic!("{members:?}")
        };
        assert_eq!((name.as_str(), dims.as_slice()), ("q", &[3][..]));
        assert!(
            matches!(**items, Model::Class { header: true, .. }),
            "{items:?}"
        );
        let no_dims = element("q", K_OFFSET_L + K_OBJECT, "Pt", vec![]);
        assert!(object_array_model(&no_dims, &infos).is_err());
    }

    #[test]
    fn tarrays_are_their_count_and_numbers_bare() {
        assert_eq!(
            model_of_type("TArrayD", true, &[]),
            Ok(Model::Sequence {
                header: false,
                items: Box::new(Model::Number(DType::F64)),
                set: false,
            })
        );
    }

    #[test]
    fn classes_without_streamer_infos_are_refused_with_the_reason() {
        let why = model_of_type("vector<Hit>", true, &[]).unwrap_err();
        assert!(why.contains("no streamer info for class Hit"), "{why}");
    }
}
