//! What each field becomes: a tree of nodes in awkward's vocabulary, shaped as uproot's RNTuple
//! reader shapes them (coffea's schemas key on those forms). Element types follow the column
//! types, as uproot's do: a `double` stored as Real32Trunc reads as float32, a cardinality as the
//! integer of its index column.

use super::column::{ColumnType, Element};
use super::descriptor::Descriptor;
use super::schema::Role;
use crate::format::array::DType;

/// One column position of a field: the column at that position in each representation
/// (`candidates[r]` for representation `r`); each cluster reads the one active there.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Slot {
    pub candidates: Vec<usize>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    /// Numbers, one column.
    Numpy { slot: Slot, dtype: DType },
    /// A collection's sizes (`ROOT::RNTupleCardinality`), from its index column.
    Cardinality { slot: Slot, dtype: DType },
    /// `std::string`: offsets and characters.
    Strings {
        offsets: Slot,
        chars: Slot,
        wide: bool,
    },
    /// Fixed-size arrays: `std::array`, C arrays, `std::bitset`.
    Regular { size: usize, content: Box<Node> },
    /// Collections; `wide` offsets are 64-bit (Index64 columns), else 32-bit.
    List {
        offsets: Slot,
        wide: bool,
        content: Box<Node>,
    },
    /// `std::optional`: a collection of zero or one item, read as an option.
    Optional {
        offsets: Slot,
        wide: bool,
        content: Box<Node>,
    },
    /// Records, user classes (base class members flattened in), `std::pair`, `std::tuple`;
    /// `names` is `None` for tuples.
    Record {
        names: Option<Vec<String>>,
        contents: Vec<Node>,
    },
    /// `std::variant`: a union whose first member is the invalid state (no value).
    Variant { switch: Slot, contents: Vec<Node> },
    /// A variant's alternative that is neither an option nor a union.
    Unmasked(Box<Node>),
}

/// Why a field cannot be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported {
    pub field: usize,
    pub reason: String,
}

type Plan = Result<Node, Unsupported>;

/// The node of field `f`. `keep(g)` says whether member `g` of a record is selected (a record
/// keeps only its selected members, as uproot's forms do).
pub fn plan(d: &Descriptor, f: usize, keep: &dyn Fn(usize) -> bool) -> Plan {
    let rec = d.field(f);
    let refuse = |reason: String| Err(Unsupported { field: f, reason });
    match rec.role {
        Role::Leaf if rec.repetition == 0 => {
            let src = d.source(f);
            if rec.type_name.contains("RNTupleCardinality") {
                let slot = slot(d, src, 0).ok_or_else(|| unsupported(f, "no index column"))?;
                let wide = index_width(d, &slot, f)?;
                let dtype = if wide { DType::I64 } else { DType::I32 };
                return Ok(Node::Cardinality { slot, dtype });
            }
            // std::atomic and enums: no column of their own, one subfield with the value.
            if d.columns(src).is_empty() && d.children(src).len() == 1 {
                return plan(d, d.children(src)[0], keep);
            }
            leaf(d, f, src)
        }
        Role::Leaf => {
            let size = usize::try_from(rec.repetition)
                .map_err(|_| unsupported(f, "an array size that fits memory"))?;
            let content = match d.children(f) {
                [child] => plan(d, *child, keep)?,
                [] => leaf(d, f, f)?,
                _ => return refuse("a fixed-size array of more than one item field".into()),
            };
            Ok(Node::Regular {
                size,
                content: Box::new(content),
            })
        }
        Role::Collection => {
            let [child] = d.children(f) else {
                return refuse(format!(
                    "a collection of {} item fields (one is read)",
                    d.children(f).len()
                ));
            };
            let src = d.source(f);
            let offsets = slot(d, src, 0).ok_or_else(|| unsupported(f, "no index column"))?;
            let wide = index_width(d, &offsets, f)?;
            let content = Box::new(plan(d, *child, keep)?);
            if d.field(src).type_name.starts_with("std::optional") {
                Ok(Node::Optional {
                    offsets,
                    wide,
                    content,
                })
            } else {
                Ok(Node::List {
                    offsets,
                    wide,
                    content,
                })
            }
        }
        Role::Record => {
            let members: Vec<usize> = d
                .record_members(f)
                .into_iter()
                .filter(|&m| keep(m))
                .collect();
            let contents = members
                .iter()
                .map(|&m| plan(d, m, keep))
                .collect::<Result<Vec<_>, _>>()?;
            let tuple = members.iter().all(|&m| is_numbered(&d.field(m).name));
            let names = (!tuple).then(|| {
                members
                    .iter()
                    .map(|&m| d.display_name(m).to_string())
                    .collect()
            });
            Ok(Node::Record { names, contents })
        }
        Role::Variant => {
            let switch =
                slot(d, d.source(f), 0).ok_or_else(|| unsupported(f, "no switch column"))?;
            if d.schema.columns[switch.candidates[0]].kind != ColumnType::Switch {
                return refuse("a Switch column".into());
            }
            let mut contents = Vec::new();
            for &c in d.children(f) {
                let node = plan(d, c, keep)?;
                contents.push(match node {
                    Node::Optional { .. } | Node::Variant { .. } => node,
                    other => Node::Unmasked(Box::new(other)),
                });
            }
            if contents.len() > 125 {
                return refuse(format!(
                    "at most 125 alternatives, found {}",
                    contents.len()
                ));
            }
            Ok(Node::Variant { switch, contents })
        }
        Role::Streamer => refuse("objects serialized with ROOT's streamer are not read".into()),
        Role::Unknown(code) => refuse(format!("structural role {code} is unknown to this reader")),
    }
}

/// Field `f` read on its own: its whole node under the collections and fixed-size arrays that
/// enclose it (as uproot's `RField.array()` gives it: `jets.pt` is a list of numbers).
pub fn item(d: &Descriptor, f: usize) -> Plan {
    let mut node = plan(d, f, &|_| true)?;
    let mut at = d.parent(f);
    while let Some(p) = at {
        let rec = d.field(p);
        node = match rec.role {
            Role::Collection => {
                let src = d.source(p);
                let offsets = slot(d, src, 0).ok_or_else(|| unsupported(p, "no index column"))?;
                let wide = index_width(d, &offsets, p)?;
                let content = Box::new(node);
                if d.field(src).type_name.starts_with("std::optional") {
                    Node::Optional {
                        offsets,
                        wide,
                        content,
                    }
                } else {
                    Node::List {
                        offsets,
                        wide,
                        content,
                    }
                }
            }
            _ if rec.repetition > 0 => Node::Regular {
                size: usize::try_from(rec.repetition)
                    .map_err(|_| unsupported(p, "an array size that fits memory"))?,
                content: Box::new(node),
            },
            Role::Variant => {
                return Err(unsupported(
                    f,
                    "an alternative of a variant is read with its variant",
                ))
            }
            _ => node,
        };
        at = d.parent(p);
    }
    Ok(node)
}

/// Every slot a node reads, depth first.
pub fn slots(node: &Node) -> Vec<&Slot> {
    let mut out = Vec::new();
    fn walk<'a>(n: &'a Node, out: &mut Vec<&'a Slot>) {
        match n {
            Node::Numpy { slot, .. } | Node::Cardinality { slot, .. } => out.push(slot),
            Node::Strings { offsets, chars, .. } => {
                out.push(offsets);
                out.push(chars);
            }
            Node::Regular { content, .. } | Node::Unmasked(content) => walk(content, out),
            Node::List {
                offsets, content, ..
            }
            | Node::Optional {
                offsets, content, ..
            } => {
                out.push(offsets);
                walk(content, out);
            }
            Node::Record { contents, .. } => contents.iter().for_each(|c| walk(c, out)),
            Node::Variant { switch, contents } => {
                out.push(switch);
                contents.iter().for_each(|c| walk(c, out));
            }
        }
    }
    walk(node, &mut out);
    out
}

/// Numbers or a string from the columns of `src` (shown as field `f`).
fn leaf(d: &Descriptor, f: usize, src: usize) -> Plan {
    let positions = d.column_positions(src);
    match positions.len() {
        1 => {
            let slot = Slot {
                candidates: positions[0].clone(),
            };
            let dtype = number_dtype(d, &slot, f)?;
            Ok(Node::Numpy { slot, dtype })
        }
        2 if d.schema.columns[positions[1][0]].kind == ColumnType::Char => {
            let offsets = Slot {
                candidates: positions[0].clone(),
            };
            let wide = index_width(d, &offsets, f)?;
            Ok(Node::Strings {
                offsets,
                chars: Slot {
                    candidates: positions[1].clone(),
                },
                wide,
            })
        }
        n => Err(unsupported(
            f,
            &format!("a leaf of one column (or a string's two), found {n}"),
        )),
    }
}

fn slot(d: &Descriptor, f: usize, position: usize) -> Option<Slot> {
    d.column_positions(f)
        .into_iter()
        .nth(position)
        .map(|candidates| Slot { candidates })
}

/// The element type of a slot's numbers: all representations must agree, except floats, which
/// widen (as numpy's `result_type` does in uproot).
fn number_dtype(d: &Descriptor, slot: &Slot, f: usize) -> Result<DType, Unsupported> {
    let mut out: Option<DType> = None;
    for &c in &slot.candidates {
        let kind = d.schema.columns[c].kind;
        let Some(Element::Number(dtype)) = kind.element() else {
            return Err(unsupported(
                f,
                &format!("a number column, found {}", kind.name()),
            ));
        };
        out = Some(match out {
            None => dtype,
            Some(prev) if prev == dtype => prev,
            Some(prev) if is_float(prev) && is_float(dtype) => {
                if prev.size() >= dtype.size() {
                    prev
                } else {
                    dtype
                }
            }
            Some(prev) => {
                return Err(unsupported(
                    f,
                    &format!(
                        "representations of one type, found {} and {}",
                        prev.name(),
                        dtype.name()
                    ),
                ))
            }
        });
    }
    out.ok_or_else(|| unsupported(f, "a column"))
}

fn is_float(d: DType) -> bool {
    matches!(d, DType::F16 | DType::F32 | DType::F64)
}

/// Whether a slot of index columns has 64-bit offsets (uproot's form follows representation 0).
fn index_width(d: &Descriptor, slot: &Slot, f: usize) -> Result<bool, Unsupported> {
    for &c in &slot.candidates {
        let kind = d.schema.columns[c].kind;
        if !kind.is_index() {
            return Err(unsupported(
                f,
                &format!("an index column, found {}", kind.name()),
            ));
        }
    }
    Ok(d.schema.columns[slot.candidates[0]].bits == 64)
}

/// Tuple members are named `_0`, `_1`, ...
fn is_numbered(name: &str) -> bool {
    name.strip_prefix('_')
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

fn unsupported(field: usize, reason: &str) -> Unsupported {
    Unsupported {
        field,
        reason: reason.to_string(),
    }
}
