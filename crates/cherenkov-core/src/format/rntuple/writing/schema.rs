//! The schema description written (spec: "Field Description", "Column Description", "Alias
//! columns", "Extra type information"): the four list frames of the header, and of the footer's
//! schema extension.

use super::super::schema::{
    ColumnRecord, FieldRecord, Schema, DEFERRED, PROJECTED, REPETITIVE, WITH_RANGE,
};
use super::frames::Out;

/// The four list frames of `schema`. Extra type information (streamer infos of streamer
/// fields, which this writer never makes) is an empty list.
pub fn write_schema(o: &mut Out, schema: &Schema) {
    o.records(&schema.fields, field_record);
    o.records(&schema.columns, column_record);
    o.records(&schema.aliases, |o, a| {
        o.u32(a.physical as u32);
        o.u32(a.field as u32);
    });
    o.list(0, |_| {});
}

pub(in crate::format::rntuple) fn field_record(o: &mut Out, f: &FieldRecord) {
    o.u32(f.field_version);
    o.u32(f.type_version);
    o.u32(f.parent as u32);
    o.u16(f.role.code());
    let mut flags = 0;
    if f.repetition > 0 {
        flags |= REPETITIVE;
    }
    if f.source.is_some() {
        flags |= PROJECTED;
    }
    o.u16(flags);
    for s in [&f.name, &f.type_name, &f.type_alias, &f.description] {
        o.string(s);
    }
    if f.repetition > 0 {
        o.u64(f.repetition);
    }
    if let Some(source) = f.source {
        o.u32(source as u32);
    }
}

pub(in crate::format::rntuple) fn column_record(o: &mut Out, c: &ColumnRecord) {
    o.u16(c.kind.code());
    o.u16(c.bits);
    o.u32(c.field as u32);
    let mut flags = 0;
    if c.first_element.is_some() {
        flags |= DEFERRED;
    }
    if c.range.is_some() {
        flags |= WITH_RANGE;
    }
    o.u16(flags);
    o.u16(c.representation);
    if let Some(first) = c.first_element {
        o.i64(first);
    }
    if let Some((min, max)) = c.range {
        o.f64(min);
        o.f64(max);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::super::column::ColumnType;
    use super::super::super::descriptor::tests::field;
    use super::super::super::schema::{AliasColumn, Role};
    use super::*;
    use crate::format::cursor::Cursor;

    pub fn column(kind: ColumnType, field: usize) -> ColumnRecord {
        ColumnRecord {
            kind,
            bits: kind.valid_bits().unwrap().0,
            field,
            representation: 0,
            first_element: None,
            range: None,
        }
    }

    /// A schema using every optional part of the records.
    pub fn sample() -> Schema {
        let mut fields = vec![
            field(0, Role::Collection, "jets", "std::vector<Jet>", 0),
            field(0, Role::Record, "_0", "Jet", 0),
            field(1, Role::Leaf, "pt", "float", 0),
            field(3, Role::Leaf, "bits", "std::bitset<5>", 5),
            field(
                4,
                Role::Leaf,
                "njets",
                "ROOT::RNTupleCardinality<std::uint32_t>",
                0,
            ),
            field(5, Role::Leaf, "x", "double", 0),
        ];
        fields[2].description = "transverse momentum".into();
        fields[4].source = Some(0);
        fields[5].type_alias = "Double32_t".into();
        fields[5].field_version = 3;
        fields[5].type_version = 7;
        let mut columns = vec![
            column(ColumnType::SplitIndex64, 0),
            column(ColumnType::SplitReal32, 2),
            column(ColumnType::Bit, 3),
            column(ColumnType::Real32Quant, 5),
            column(ColumnType::SplitReal64, 5),
        ];
        columns[3].bits = 12;
        columns[3].range = Some((-1.5, 2.5e10));
        columns[4].representation = 1;
        columns[4].first_element = Some(-40);
        Schema {
            fields,
            columns,
            aliases: vec![AliasColumn {
                physical: 0,
                field: 4,
            }],
        }
    }

    #[test]
    fn every_record_kind_parses_back_equal() {
        let mut o = Out::default();
        write_schema(&mut o, &sample());
        let mut c = Cursor::new(&o.bytes, "t", 0);
        assert_eq!(Schema::parse(&mut c).unwrap(), sample());
        assert_eq!(c.remaining(), 0);
    }
}
