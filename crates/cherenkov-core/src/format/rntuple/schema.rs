//! The schema description: field, column and alias column records (spec: "Field Description",
//! "Column Description", "Alias columns"), found in the header and again, for fields and columns
//! added while writing, in the footer's schema extension.

use super::column::{Coding, ColumnType};
use super::envelope::{list_frame, record_frame, string};
use crate::error::Result;
use crate::format::cursor::Cursor;

/// Field flags.
pub(super) const REPETITIVE: u16 = 0x01;
pub(super) const PROJECTED: u16 = 0x02;
const TYPE_CHECKSUM: u16 = 0x04;
/// Column flags.
pub(super) const DEFERRED: u16 = 0x01;
pub(super) const WITH_RANGE: u16 = 0x02;
/// The smallest record frame: its size.
const MIN_RECORD: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Leaf,
    Collection,
    Record,
    Variant,
    /// Objects serialized with ROOT's streamer into a byte column.
    Streamer,
    Unknown(u16),
}

impl Role {
    fn from_code(code: u16) -> Role {
        match code {
            0 => Role::Leaf,
            1 => Role::Collection,
            2 => Role::Record,
            3 => Role::Variant,
            4 => Role::Streamer,
            other => Role::Unknown(other),
        }
    }

    pub fn code(self) -> u16 {
        match self {
            Role::Leaf => 0,
            Role::Collection => 1,
            Role::Record => 2,
            Role::Variant => 3,
            Role::Streamer => 4,
            Role::Unknown(code) => code,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct FieldRecord {
    pub field_version: u32,
    pub type_version: u32,
    /// The parent's field ID; a top-level field is its own parent.
    pub parent: usize,
    pub role: Role,
    pub name: String,
    pub type_name: String,
    pub type_alias: String,
    pub description: String,
    /// Items per entry of a fixed-size array field (`std::array`, `std::bitset`), else 0.
    pub repetition: u64,
    /// The field a projected field shows under another name or type.
    pub source: Option<usize>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ColumnRecord {
    pub kind: ColumnType,
    pub bits: u16,
    pub field: usize,
    pub representation: u16,
    /// Index of the column's first element when the column was added late (deferred); negative
    /// when it is also suppressed.
    pub first_element: Option<i64>,
    /// Value range (Real32Quant).
    pub range: Option<(f64, f64)>,
}

impl ColumnRecord {
    /// How the column's pages are coded.
    pub fn coding(&self) -> Coding {
        Coding {
            kind: self.kind,
            bits: self.bits,
            range: self.range,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AliasColumn {
    pub physical: usize,
    pub field: usize,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Schema {
    pub fields: Vec<FieldRecord>,
    pub columns: Vec<ColumnRecord>,
    pub aliases: Vec<AliasColumn>,
}

impl Schema {
    /// The four list frames of a schema description; field and column IDs are absolute, the
    /// extension's continuing from the header's.
    pub fn parse(c: &mut Cursor) -> Result<Schema> {
        let (n, mut items) = list_frame(c, "the list of field records", MIN_RECORD)?;
        let mut fields = Vec::with_capacity(n);
        for _ in 0..n {
            fields.push(field_record(&mut record_frame(
                &mut items,
                "a field record",
            )?)?);
        }
        let (n, mut items) = list_frame(c, "the list of column records", MIN_RECORD)?;
        let mut columns = Vec::with_capacity(n);
        for _ in 0..n {
            columns.push(column_record(&mut record_frame(
                &mut items,
                "a column record",
            )?)?);
        }
        let (n, mut items) = list_frame(c, "the list of alias columns", MIN_RECORD)?;
        let mut aliases = Vec::with_capacity(n);
        for _ in 0..n {
            let mut r = record_frame(&mut items, "an alias column")?;
            aliases.push(AliasColumn {
                physical: r.u32_le("the alias's physical column ID")? as usize,
                field: r.u32_le("the alias's field ID")? as usize,
            });
        }
        // Extra type information (streamer infos of streamer fields) is not needed to read.
        list_frame(c, "the list of extra type information", MIN_RECORD)?;
        Ok(Schema {
            fields,
            columns,
            aliases,
        })
    }

    /// The header's schema with the footer's extension appended.
    pub fn extend(&mut self, extension: Schema) {
        self.fields.extend(extension.fields);
        self.columns.extend(extension.columns);
        self.aliases.extend(extension.aliases);
    }
}

fn field_record(c: &mut Cursor) -> Result<FieldRecord> {
    let field_version = c.u32_le("the field version")?;
    let type_version = c.u32_le("the type version")?;
    let parent = c.u32_le("the parent field ID")? as usize;
    let role = Role::from_code(c.u16_le("the structural role")?);
    let flags = c.u16_le("the field flags")?;
    let name = string(c, "the field name")?;
    let type_name = string(c, "the type name")?;
    let type_alias = string(c, "the type alias")?;
    let description = string(c, "the field description")?;
    let repetition = if flags & REPETITIVE != 0 {
        c.u64_le("the array size")?
    } else {
        0
    };
    let source = if flags & PROJECTED != 0 {
        Some(c.u32_le("the source field ID")? as usize)
    } else {
        None
    };
    if flags & TYPE_CHECKSUM != 0 {
        c.u32_le("the ROOT type checksum")?;
    }
    Ok(FieldRecord {
        field_version,
        type_version,
        parent,
        role,
        name,
        type_name,
        type_alias,
        description,
        repetition,
        source,
    })
}

fn column_record(c: &mut Cursor) -> Result<ColumnRecord> {
    let kind = ColumnType::from_code(c.u16_le("the column type")?);
    let at = c.pos();
    let bits = c.u16_le("the bits on storage")?;
    let field = c.u32_le("the column's field ID")? as usize;
    let flags = c.u16_le("the column flags")?;
    let representation = c.u16_le("the representation index")?;
    let first_element = if flags & DEFERRED != 0 {
        Some(c.i64_le("the first element index")?)
    } else {
        None
    };
    let range = if flags & WITH_RANGE != 0 {
        Some((
            c.f64_le("the minimum value")?,
            c.f64_le("the maximum value")?,
        ))
    } else {
        None
    };
    if let Some((lo, hi)) = kind.valid_bits() {
        if bits < lo || bits > hi {
            return Err(c.error_at(
                at,
                format!(
                    "{lo} to {hi} bits for a {} column, found {bits}",
                    kind.name()
                ),
            ));
        }
    }
    if kind == ColumnType::Real32Quant && !range.is_some_and(|(lo, hi)| lo < hi) {
        return Err(c.error_at(at, "a Real32Quant column with a value range min < max"));
    }
    Ok(ColumnRecord {
        kind,
        bits,
        field,
        representation,
        first_element,
        range,
    })
}

#[cfg(test)]
mod tests {
    use super::super::descriptor::tests::field;
    use super::super::writing::frames::Out;
    use super::super::writing::schema::tests::column;
    use super::super::writing::schema::{column_record, field_record, write_schema};
    use super::*;

    #[test]
    fn records_with_unknown_trailing_fields_parse() {
        let mut o = Out::default();
        // A later minor version appends a field: the frame grows, this reader skips it.
        o.list(1, |o| {
            o.record(|o| {
                field_record(o, &field(0, Role::Leaf, "pt", "float", 0));
                o.bytes.extend_from_slice(&[1, 2, 3, 4]);
            })
        });
        o.records(&[column(ColumnType::SplitReal32, 0)], column_record);
        o.list(0, |_| {});
        o.list(0, |_| {});
        let s = Schema::parse(&mut Cursor::new(&o.bytes, "t", 0)).unwrap();
        assert_eq!(s.fields[0].name, "pt");
        assert_eq!(s.fields[0].type_name, "float");
        assert_eq!(s.columns[0].kind, ColumnType::SplitReal32);
    }

    #[test]
    fn column_widths_outside_the_spec_are_errors() {
        for (kind, bits) in [(ColumnType::SplitReal32, 16), (ColumnType::Real32Trunc, 9)] {
            let mut c = column(kind, 0);
            c.bits = bits;
            let schema = Schema {
                fields: vec![field(0, Role::Leaf, "x", "float", 0)],
                columns: vec![c],
                aliases: vec![],
            };
            let mut o = Out::default();
            write_schema(&mut o, &schema);
            assert!(Schema::parse(&mut Cursor::new(&o.bytes, "t", 0)).is_err());
        }
    }
}
