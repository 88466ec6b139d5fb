//! Which fields and columns a type is written as (spec: "Mapping of C++ Types to Fields and
//! Columns"), with ROOT's default column types: split encodings when pages are compressed
//! (zigzag for signed integers, delta for collection indices), the plain ones when they are not;
//! `Bit` for bools; 64-bit indices. Records are untyped (an empty type name), as uproot writes
//! them and ROOT reads them without a dictionary; collections and records that hold a record are
//! untyped too, as the spec allows only under untyped fields.

use super::super::column::{Coding, ColumnType};
use super::super::schema::{ColumnRecord, FieldRecord, Role, Schema};
use crate::format::array::DType;

/// A field's type, as this writer writes it.
#[derive(Clone, Debug, PartialEq)]
pub enum FieldType {
    /// `bool`, `std::int8_t` ... `std::uint64_t`, `float`, `double`.
    Number(DType),
    /// `std::string`.
    String,
    /// `std::vector<T>`: a collection of any number of items per entry.
    Vector(Box<FieldType>),
    /// `std::array<T, N>`: `N` items per entry.
    Array(Box<FieldType>, usize),
    /// A record of named members (an untyped record).
    Record(Vec<(String, FieldType)>),
}

impl FieldType {
    /// The C++ type name ROOT normalizes to; empty for records and what holds one.
    pub fn type_name(&self) -> String {
        if self.holds_record() {
            return String::new();
        }
        match self {
            FieldType::Number(d) => number_type(*d).to_string(),
            FieldType::String => "std::string".into(),
            FieldType::Vector(t) => format!("std::vector<{}>", t.type_name()),
            FieldType::Array(t, n) => format!("std::array<{},{n}>", t.type_name()),
            FieldType::Record(_) => unreachable!("records hold a record"),
        }
    }

    fn holds_record(&self) -> bool {
        match self {
            FieldType::Record(_) => true,
            FieldType::Vector(t) | FieldType::Array(t, _) => t.holds_record(),
            FieldType::Number(_) | FieldType::String => false,
        }
    }

    /// Why this type cannot be written, if it cannot: ROOT has no untyped fixed-size arrays,
    /// so no record may sit in one; half floats and empty records have no field type here.
    pub fn check(&self) -> Result<(), String> {
        match self {
            FieldType::Number(DType::F16) => Err("float16 has no RNTuple field type".into()),
            FieldType::Number(_) | FieldType::String => Ok(()),
            FieldType::Vector(t) => t.check(),
            FieldType::Array(t, n) => {
                if t.holds_record() {
                    return Err(
                        "a fixed-size array of records (RNTuple has no untyped array)".into(),
                    );
                }
                if *n == 0 {
                    return Err("a fixed-size array of 0 items".into());
                }
                t.check()
            }
            FieldType::Record(members) => {
                if members.is_empty() {
                    return Err("a record without members".into());
                }
                members.iter().try_for_each(|(_, t)| t.check())
            }
        }
    }
}

fn number_type(d: DType) -> &'static str {
    match d {
        DType::Bool => "bool",
        DType::I8 => "std::int8_t",
        DType::I16 => "std::int16_t",
        DType::I32 => "std::int32_t",
        DType::I64 => "std::int64_t",
        DType::U8 => "std::uint8_t",
        DType::U16 => "std::uint16_t",
        DType::U32 => "std::uint32_t",
        DType::U64 => "std::uint64_t",
        DType::F16 | DType::F32 => "float",
        DType::F64 => "double",
    }
}

/// The column type ROOT writes numbers of `d` as (`split` when pages are compressed).
fn number_column(d: DType, split: bool) -> ColumnType {
    use ColumnType::*;
    let (split_kind, plain) = match d {
        DType::Bool => (Bit, Bit),
        DType::I8 => (Int8, Int8),
        DType::U8 => (UInt8, UInt8),
        DType::I16 => (SplitInt16, Int16),
        DType::U16 => (SplitUInt16, UInt16),
        DType::I32 => (SplitInt32, Int32),
        DType::U32 => (SplitUInt32, UInt32),
        DType::I64 => (SplitInt64, Int64),
        DType::U64 => (SplitUInt64, UInt64),
        DType::F16 => (SplitReal16, Real16),
        DType::F32 => (SplitReal32, Real32),
        DType::F64 => (SplitReal64, Real64),
    };
    if split {
        split_kind
    } else {
        plain
    }
}

fn index_column(split: bool) -> ColumnType {
    if split {
        ColumnType::SplitIndex64
    } else {
        ColumnType::Index64
    }
}

/// Top-level fields, and the fields and columns they are written as, in the order the spec and
/// ROOT serialize them (depth first, parents before children; columns in the same order), so
/// the columns of each top-level field are consecutive.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    pub fields: Vec<(String, FieldType)>,
    pub schema: Schema,
    /// Per top-level field, its field ID.
    pub roots: Vec<usize>,
    /// Per top-level field, the range of its columns.
    pub columns: Vec<std::ops::Range<usize>>,
}

impl Model {
    /// The model of `fields`; `split` chooses split encodings (when pages are compressed).
    pub fn new(fields: Vec<(String, FieldType)>, split: bool) -> Result<Model, String> {
        let mut schema = Schema::default();
        let mut columns = Vec::with_capacity(fields.len());
        let mut roots = Vec::with_capacity(fields.len());
        for (name, ty) in &fields {
            ty.check().map_err(|e| format!("field '{name}': {e}"))?;
            let first = schema.columns.len();
            let id = schema.fields.len();
            add_field(&mut schema, id, name, ty, split);
            roots.push(id);
            columns.push(first..schema.columns.len());
        }
        Ok(Model {
            fields,
            schema,
            roots,
            columns,
        })
    }

    /// How each column's pages are coded.
    pub fn codings(&self) -> Vec<Coding> {
        self.schema.columns.iter().map(|c| c.coding()).collect()
    }
}

/// Append field `ty` named `name` under `parent` (itself for a top-level field), its columns,
/// then its subfields.
fn add_field(schema: &mut Schema, parent: usize, name: &str, ty: &FieldType, split: bool) {
    let id = schema.fields.len();
    let (role, repetition) = match ty {
        FieldType::Number(_) | FieldType::String => (Role::Leaf, 0),
        FieldType::Vector(_) => (Role::Collection, 0),
        FieldType::Array(_, n) => (Role::Leaf, *n as u64),
        FieldType::Record(_) => (Role::Record, 0),
    };
    schema.fields.push(FieldRecord {
        field_version: 0,
        type_version: 0,
        parent,
        role,
        name: name.to_string(),
        type_name: ty.type_name(),
        type_alias: String::new(),
        description: String::new(),
        repetition,
        source: None,
    });
    let mut column = |kind: ColumnType| {
        schema.columns.push(ColumnRecord {
            kind,
            bits: kind.valid_bits().expect("a known column type").0,
            field: id,
            representation: 0,
            first_element: None,
            range: None,
        })
    };
    match ty {
        FieldType::Number(d) => column(number_column(*d, split)),
        FieldType::String => {
            column(index_column(split));
            column(ColumnType::Char);
        }
        FieldType::Vector(item) | FieldType::Array(item, _) => {
            if matches!(ty, FieldType::Vector(_)) {
                column(index_column(split));
            }
            add_field(schema, id, "_0", item, split);
        }
        FieldType::Record(members) => {
            for (member, t) in members {
                add_field(schema, id, member, t, split);
            }
        }
    }
}
