//! The header envelope (spec: "Header Envelope"): the RNTuple's name and schema.

use super::envelope::{feature_flags, open_envelope, string, EnvelopeKind};
use super::schema::Schema;
use crate::error::Result;

#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    pub name: String,
    pub description: String,
    /// The library or program that wrote the data ("ROOT v6.40.00").
    pub writer: String,
    pub schema: Schema,
    /// Repeated in the footer and page lists, which must belong to this header.
    pub checksum: u64,
}

impl Header {
    /// Parse the uncompressed header envelope.
    pub fn parse(data: &[u8], origin: &str) -> Result<Header> {
        let (mut c, checksum) = open_envelope(data, EnvelopeKind::Header, origin)?;
        feature_flags(&mut c, "the header's feature flags")?;
        Ok(Header {
            name: string(&mut c, "the RNTuple name")?,
            description: string(&mut c, "the RNTuple description")?,
            writer: string(&mut c, "the writer identifier")?,
            schema: Schema::parse(&mut c)?,
            checksum,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::envelope::tests::envelope;
    use super::super::schema::tests::{column, field, schema, string_bytes};
    use super::*;

    pub fn header_bytes(fields: &[Vec<u8>], columns: &[Vec<u8>]) -> Vec<u8> {
        let mut p = 0u64.to_le_bytes().to_vec();
        for s in ["ntuple", "", "test"] {
            p.extend(string_bytes(s));
        }
        p.extend(schema(fields, columns));
        envelope(EnvelopeKind::Header, &p)
    }

    #[test]
    fn header_parses_name_and_schema() {
        let h = header_bytes(
            &[field(0, 0, "x", "std::int32_t", 0)],
            &[column(0x13, 32, 0)],
        );
        let header = Header::parse(&h, "t").unwrap();
        assert_eq!(header.name, "ntuple");
        assert_eq!(header.writer, "test");
        assert_eq!(header.schema.fields.len(), 1);
        assert_eq!(header.schema.columns[0].field, 0);
    }
}
