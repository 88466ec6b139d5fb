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
