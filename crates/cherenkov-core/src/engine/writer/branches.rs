//! A TTree's branches from a table's columns, and the filling of their baskets: records split
//! into prefixed branches (`Muon_pt`, as uproot names them), lists of numbers with a counter as
//! NanoAOD's counted leaves (`Muon_pt[nMuon]`, the counter branch made when no column gives it),
//! other lists, strings and lists of strings as `std::vector`/`std::string` branch elements;
//! then the entries of each branch serialized big-endian into its basket buffer.

use super::{Column, ColumnType};
use crate::error::{Error, Result};
use crate::format::array::{Array, DType, Layout};

/// How a branch stores its entries.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Storage {
    /// `product(dims)` numbers per entry (a TLeaf of fixed size).
    Numbers {
        dtype: DType,
        dims: Vec<usize>,
    },
    /// Items of `product(dims)` numbers, as many per entry as the counter branch says.
    Counted {
        dtype: DType,
        dims: Vec<usize>,
    },
    /// `std::vector<T>`, `std::vector<std::vector<T>>`, `std::string`, `std::vector<std::string>`.
    Vector(DType),
    VectorVector(DType),
    String,
    VectorString,
}

/// Where a branch's entries come from in the flattened arrays `extend` takes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Source {
    Array(usize),
    /// The lengths of the lists of an array (a counter the writer makes).
    Lengths(usize),
}

#[derive(Clone, Debug, PartialEq)]
pub(super) struct Branch {
    pub name: String,
    pub title: String,
    pub storage: Storage,
    pub source: Source,
    /// The branch holding this branch's list lengths (a counted leaf's counter).
    pub counter: Option<usize>,
    /// Whether counted leaves refer to this branch's leaf (then its largest value is kept).
    pub is_counter: bool,
}

impl Branch {
    /// Whether entries vary in size (the baskets then carry entry offsets).
    pub fn varies(&self) -> bool {
        !matches!(self.storage, Storage::Numbers { .. })
    }
}

/// The flattened columns (records split, lists of records split into lists sharing their
/// lengths): name, title and type of each, in column order.
pub(super) fn flat_columns(columns: &[Column]) -> Vec<(String, String, ColumnType)> {
    let mut out = Vec::new();
    for c in columns {
        flatten_type(&c.name, &c.title, &c.kind, &mut out);
    }
    out
}

fn flatten_type(
    name: &str,
    title: &str,
    kind: &ColumnType,
    out: &mut Vec<(String, String, ColumnType)>,
) {
    match kind {
        ColumnType::Record(fields) => {
            for (field, t) in fields {
                flatten_type(&format!("{name}_{field}"), "", t, out);
            }
        }
        ColumnType::List { items, counter } if matches!(**items, ColumnType::Record(_)) => {
            let ColumnType::Record(fields) = &**items else {
                unreachable!()
            };
            for (field, t) in fields {
                let list = ColumnType::List {
                    items: Box::new(t.clone()),
                    counter: counter.clone(),
                };
                flatten_type(&format!("{name}_{field}"), "", &list, out);
            }
        }
        _ => out.push((name.to_string(), title.to_string(), kind.clone())),
    }
}

/// The arrays of `flat_columns`, moved out of the columns' arrays (list offsets are copied for
/// each field of a list of records).
pub(super) fn flat_arrays(columns: &[Column], arrays: Vec<Array>) -> Vec<Array> {
    let mut out = Vec::new();
    for (c, a) in columns.iter().zip(arrays) {
        flatten_array(&c.kind, a, &mut out);
    }
    out
}

fn flatten_array(kind: &ColumnType, array: Array, out: &mut Vec<Array>) {
    match (kind, array.layout) {
        (
            ColumnType::Record(fields),
            Layout::Record {
                contents, length, ..
            },
        ) => {
            for ((_, t), c) in fields.iter().zip(contents) {
                flatten_array(t, c.slice(0, length), out);
            }
        }
        (
            ColumnType::List { items, .. },
            Layout::ListOffset {
                offsets, content, ..
            },
        ) if matches!(**items, ColumnType::Record(_)) => {
            let ColumnType::Record(fields) = &**items else {
                unreachable!()
            };
            let Layout::Record { contents, .. } = content.layout else {
                unreachable!("checked by check_arrays")
            };
            for ((_, t), c) in fields.iter().zip(contents) {
                let list = ColumnType::List {
                    items: Box::new(t.clone()),
                    counter: None,
                };
                flatten_array(&list, Array::list_shared(offsets.clone(), c), out);
            }
        }
        (_, layout) => out.push(Array {
            layout,
            parameters: array.parameters,
        }),
    }
}

/// The branches of a tree with these columns, each counter before the leaves it counts.
pub(super) fn plan(tree: &str, columns: &[Column]) -> Result<Vec<Branch>> {
    let flat = flat_columns(columns);
    let refuse = |name: &str, kind: &ColumnType, reason: &str| Error::UnsupportedBranch {
        file: String::new(),
        branch: format!("{tree}/{name}"),
        typename: kind.to_string(),
        reason: reason.to_string(),
    };
    for (i, (name, _, kind)) in flat.iter().enumerate() {
        if let Some((_, _, other)) = flat[..i].iter().find(|(n, _, _)| n == name) {
            return Err(refuse(
                name,
                kind,
                &format!("two columns make a branch of this name (the other of type {other})"),
            ));
        }
    }
    let mut branches: Vec<Branch> = Vec::new();
    let mut placed: Vec<Option<usize>> = vec![None; flat.len()];
    for (i, (name, title, kind)) in flat.iter().enumerate() {
        if placed[i].is_some() {
            continue;
        }
        let (storage, counter) = storage(kind).map_err(|why| refuse(name, kind, &why))?;
        let counter = match counter {
            None => None,
            Some(counter_name) => Some(
                counter_branch(&flat, &mut branches, &mut placed, counter_name, i)
                    .map_err(|why| refuse(name, kind, &why))?,
            ),
        };
        let storage = match (storage, counter) {
            (Storage::Numbers { dtype, dims }, Some(_)) => Storage::Counted { dtype, dims },
            (s, _) => s,
        };
        let title = if title.is_empty() {
            default_title(name, &storage, counter.map(|c| branches[c].name.as_str()))
        } else {
            title.clone()
        };
        placed[i] = Some(branches.len());
        branches.push(Branch {
            name: name.clone(),
            title,
            storage,
            source: Source::Array(i),
            counter,
            is_counter: false,
        });
    }
    Ok(branches)
}

/// The branch counting the lists of flat column `list` under `name`: the column of that name
/// (an integer), placed now if it was not yet, or one the writer makes from the lengths.
fn counter_branch(
    flat: &[(String, String, ColumnType)],
    branches: &mut Vec<Branch>,
    placed: &mut [Option<usize>],
    name: &str,
    list: usize,
) -> std::result::Result<usize, String> {
    if let Some(at) = branches.iter().position(|b| b.name == name) {
        if !branches[at].is_counter
            && !matches!(branches[at].storage, Storage::Numbers { ref dims, dtype } if dims.is_empty() && is_integer(dtype))
        {
            return Err(format!("its counter '{name}' is not a column of integers"));
        }
        branches[at].is_counter = true;
        return Ok(at);
    }
    let at = branches.len();
    match flat.iter().position(|(n, _, _)| n == name) {
        Some(i) => {
            let ColumnType::Number(dtype) = flat[i].2 else {
                return Err(format!(
                    "its counter '{name}' is a column of {}, not of integers",
                    flat[i].2
                ));
            };
            if !is_integer(dtype) {
                return Err(format!(
                    "its counter '{name}' is a column of {}, not of integers",
                    dtype.name()
                ));
            }
            placed[i] = Some(at);
            let storage = Storage::Numbers {
                dtype,
                dims: vec![],
            };
            let title = if flat[i].1.is_empty() {
                default_title(name, &storage, None)
            } else {
                flat[i].1.clone()
            };
            branches.push(Branch {
                name: name.to_string(),
                title,
                storage,
                source: Source::Array(i),
                counter: None,
                is_counter: true,
            });
        }
        None => {
            let storage = Storage::Numbers {
                dtype: DType::I32,
                dims: vec![],
            };
            branches.push(Branch {
                name: name.to_string(),
                title: default_title(name, &storage, None),
                storage,
                source: Source::Lengths(list),
                counter: None,
                is_counter: true,
            });
        }
    }
    Ok(at)
}

fn is_integer(dtype: DType) -> bool {
    !matches!(dtype, DType::Bool | DType::F16 | DType::F32 | DType::F64)
}

/// How a flat column is stored, and the name of the counter it needs; `Err` says why a TTree
/// cannot hold it.
fn storage(kind: &ColumnType) -> std::result::Result<(Storage, Option<&str>), String> {
    let number = |d: &DType| -> std::result::Result<DType, String> {
        match crate::format::writing::tree::leaf_type(*d) {
            Some(_) => Ok(*d),
            None => Err(format!("a TTree has no leaf type for {}", d.name())),
        }
    };
    match kind {
        ColumnType::Number(d) => Ok((
            Storage::Numbers {
                dtype: number(d)?,
                dims: vec![],
            },
            None,
        )),
        ColumnType::Fixed { .. } => {
            let (dtype, dims) = fixed(kind)?;
            Ok((
                Storage::Numbers {
                    dtype: number(&dtype)?,
                    dims,
                },
                None,
            ))
        }
        ColumnType::String => Ok((Storage::String, None)),
        ColumnType::List { items, counter } => {
            let counter = counter.as_deref();
            match &**items {
                ColumnType::Number(d) if counter.is_none() => Ok((Storage::Vector(number(d)?), None)),
                ColumnType::Number(_) | ColumnType::Fixed { .. } => match counter {
                    Some(c) => {
                        let (dtype, dims) = fixed(items)?;
                        Ok((Storage::Numbers { dtype: number(&dtype)?, dims }, Some(c)))
                    }
                    None => Err("a list of fixed-size arrays is written as a counted leaf: give it a counter".into()),
                },
                ColumnType::String => Ok((Storage::VectorString, counter)),
                ColumnType::List { items: inner, .. } => match &**inner {
                    ColumnType::Number(d) => Ok((Storage::VectorVector(number(d)?), counter)),
                    _ => Err("a TTree holds at most lists of lists of numbers (std::vector<std::vector<T>>); format=\"rntuple\" holds deeper ones".into()),
                },
                ColumnType::Record(_) => unreachable!("split by flat_columns"),
            }
        }
        ColumnType::Record(_) => unreachable!("split by flat_columns"),
    }
}

/// The number type and dimensions of nested fixed-size arrays of numbers.
fn fixed(kind: &ColumnType) -> std::result::Result<(DType, Vec<usize>), String> {
    match kind {
        ColumnType::Number(d) => Ok((*d, vec![])),
        ColumnType::Fixed { items, size } => {
            let (d, mut dims) = fixed(items)?;
            dims.insert(0, *size);
            Ok((d, dims))
        }
        other => Err(format!("fixed-size arrays of {other} have no TTree leaf")),
    }
}

/// ROOT's leaf list as the branch title (`x/F`, `x[3]/F`, `x[nX][3]/F`), or the name of a
/// branch element.
fn default_title(name: &str, storage: &Storage, counter: Option<&str>) -> String {
    match storage {
        Storage::Numbers { dtype, dims } | Storage::Counted { dtype, dims } => {
            format!("{}/{}", leaf_title(name, counter, dims), letter(*dtype))
        }
        _ => name.to_string(),
    }
}

/// The leaf's title: its name and dimensions (`x[nX][3]`).
pub(super) fn leaf_title(name: &str, counter: Option<&str>, dims: &[usize]) -> String {
    let mut out = name.to_string();
    if let Some(c) = counter {
        out.push_str(&format!("[{c}]"));
    }
    for d in dims {
        out.push_str(&format!("[{d}]"));
    }
    out
}

fn letter(dtype: DType) -> char {
    crate::format::writing::tree::leaf_type(dtype)
        .expect("checked by storage")
        .1
}

#[cfg(test)]
#[path = "branches_tests.rs"]
mod tests;
