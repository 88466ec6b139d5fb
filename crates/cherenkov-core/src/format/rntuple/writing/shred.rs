//! Values to columns: entries of an array (the awkward-like `Array` readers hand out) become the
//! elements of a field's columns, in memory form (native-endian numbers, 64-bit indices),
//! appended to the buffers of the cluster being filled. Collection indices count from the start
//! of the cluster, as the spec wants them, so each cluster begins with fresh buffers.

use super::model::FieldType;
use crate::format::array::{Array, DType, Layout};

/// A column's elements in the cluster being filled.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ColumnData {
    /// Elements in memory form (`Coding::decode`'s output form).
    pub bytes: Vec<u8>,
    pub elements: u64,
    /// For an index column: the collection's items so far in the cluster (its last element).
    pub items: u64,
}

impl ColumnData {
    fn push(&mut self, bytes: &[u8], elements: usize) {
        self.bytes.extend_from_slice(bytes);
        self.elements += elements as u64;
    }

    /// Index elements for entries of the given sizes.
    fn push_sizes(&mut self, offsets: &[i64]) {
        self.bytes.reserve(offsets.len().saturating_sub(1) * 8);
        for w in offsets.windows(2) {
            self.items += (w[1] - w[0]) as u64;
            self.bytes.extend_from_slice(&self.items.to_ne_bytes());
        }
        self.elements += offsets.len().saturating_sub(1) as u64;
    }
}

/// How many columns a field of type `ty` has with its subfields (`Model` lays them out
/// consecutively, depth first).
pub fn column_count(ty: &FieldType) -> usize {
    match ty {
        FieldType::Number(_) => 1,
        FieldType::String => 2,
        FieldType::Vector(t) => 1 + column_count(t),
        FieldType::Array(t, _) => column_count(t),
        FieldType::Record(members) => members.iter().map(|(_, t)| column_count(t)).sum(),
    }
}

/// Append entries `[start, stop)` of `array` (values of a field of type `ty`) to the field's
/// `columns`. The error says what in the array does not fit the type.
pub fn shred(
    ty: &FieldType,
    array: &Array,
    start: usize,
    stop: usize,
    columns: &mut [ColumnData],
) -> Result<(), String> {
    if !array.is_valid() {
        return Err("an array whose offsets stay inside their contents".into());
    }
    if start > stop || stop > array.len() {
        return Err(format!(
            "entries {start}..{stop} of an array of {}",
            array.len()
        ));
    }
    into(ty, array, start, stop, columns)
}

fn into(
    ty: &FieldType,
    array: &Array,
    start: usize,
    stop: usize,
    columns: &mut [ColumnData],
) -> Result<(), String> {
    match (ty, &array.layout) {
        (_, Layout::Unmasked { content }) => into(ty, content, start, stop, columns),
        (
            _,
            Layout::Numpy {
                dtype,
                inner_shape,
                data,
            },
        ) => numbers(
            ty,
            *dtype,
            inner_shape,
            data.as_bytes(),
            start,
            stop,
            columns,
        ),
        (FieldType::Array(item, n), Layout::Regular { size, content, .. }) if size == n => {
            into(item, content, start * n, stop * n, columns)
        }
        (
            FieldType::String,
            Layout::ListOffset {
                offsets, content, ..
            },
        ) => {
            let Layout::Numpy {
                dtype: DType::U8 | DType::I8,
                inner_shape,
                data,
            } = &content.layout
            else {
                return Err(format!(
                    "strings of bytes, found lists of {}",
                    describe(content)
                ));
            };
            if !inner_shape.is_empty() {
                return Err("strings of bytes, found lists of arrays".into());
            }
            let (lo, hi) = (offsets[start] as usize, offsets[stop] as usize);
            columns[0].push_sizes(&offsets[start..=stop]);
            columns[1].push(&data.as_bytes()[lo..hi], hi - lo);
            Ok(())
        }
        (
            FieldType::Vector(item),
            Layout::ListOffset {
                offsets, content, ..
            },
        ) => {
            columns[0].push_sizes(&offsets[start..=stop]);
            let (lo, hi) = (offsets[start] as usize, offsets[stop] as usize);
            into(item, content, lo, hi, &mut columns[1..])
        }
        (
            FieldType::Record(members),
            Layout::Record {
                names: Some(names),
                contents,
                ..
            },
        ) => {
            let mut at = 0;
            for (name, t) in members {
                let n = column_count(t);
                let i = names
                    .iter()
                    .position(|m| m == name)
                    .ok_or_else(|| format!("a record with a member '{name}', found {names:?}"))?;
                into(t, &contents[i], start, stop, &mut columns[at..at + n])
                    .map_err(|e| format!("member '{name}': {e}"))?;
                at += n;
            }
            Ok(())
        }
        _ => Err(format!("{}, found {}", expected(ty), describe(array))),
    }
}

/// Numbers, or fixed-size arrays of them (a numpy array with an inner shape).
fn numbers(
    ty: &FieldType,
    dtype: DType,
    shape: &[usize],
    data: &[u8],
    start: usize,
    stop: usize,
    columns: &mut [ColumnData],
) -> Result<(), String> {
    match (ty, shape) {
        (FieldType::Number(want), []) => {
            if *want != dtype {
                return Err(format!("{} values, found {}", want.name(), dtype.name()));
            }
            let size = dtype.size();
            columns[0].push(&data[start * size..stop * size], stop - start);
            Ok(())
        }
        (FieldType::Array(item, n), [first, rest @ ..]) if first == n => {
            numbers(item, dtype, rest, data, start * n, stop * n, columns)
        }
        _ => Err(format!(
            "{}, found {} numbers of shape {shape:?}",
            expected(ty),
            dtype.name()
        )),
    }
}

fn expected(ty: &FieldType) -> String {
    match ty {
        FieldType::Number(d) => format!("{} values", d.name()),
        FieldType::String => "strings".into(),
        FieldType::Vector(_) => "variable-length lists".into(),
        FieldType::Array(_, n) => format!("fixed-size arrays of {n} items"),
        FieldType::Record(_) => "records".into(),
    }
}

fn describe(array: &Array) -> String {
    match &array.layout {
        Layout::Empty => "an empty array of no type".into(),
        Layout::Numpy { dtype, .. } => format!("{} numbers", dtype.name()),
        Layout::ListOffset { .. } if array.parameter("__array__") == Some("string") => {
            "strings".into()
        }
        Layout::ListOffset { .. } => "variable-length lists".into(),
        Layout::Regular { size, .. } => format!("fixed-size arrays of {size} items"),
        Layout::Record { names: None, .. } => "tuples".into(),
        Layout::Record { .. } => "records".into(),
        Layout::IndexedOption { .. } => "optional values (None is not written)".into(),
        Layout::Unmasked { .. } => "unmasked values".into(),
        Layout::Union { .. } => "values of several types (unions are not written)".into(),
    }
}
