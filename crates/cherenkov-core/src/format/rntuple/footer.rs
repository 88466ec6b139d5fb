//! The footer envelope (spec: "Footer Envelope"): the schema extension (fields and columns added
//! while writing) and the cluster groups, each with a link to its page list.

use super::envelope::{
    check_header_checksum, envelope_link, feature_flags, list_frame, open_envelope, record_frame,
    EnvelopeKind, EnvelopeLink,
};
use super::schema::Schema;
use crate::error::Result;

/// A group of consecutive clusters sharing one page list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClusterGroup {
    pub min_entry: u64,
    pub entry_span: u64,
    pub clusters: u64,
    pub page_list: EnvelopeLink,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Footer {
    /// Fields and columns added while writing (IDs continue the header's).
    pub extension: Schema,
    pub groups: Vec<ClusterGroup>,
}

impl Footer {
    /// Parse the uncompressed footer envelope of the RNTuple whose header has `header_checksum`.
    pub fn parse(data: &[u8], header_checksum: u64, origin: &str) -> Result<Footer> {
        let (mut c, _) = open_envelope(data, EnvelopeKind::Footer, origin)?;
        feature_flags(&mut c, "the footer's feature flags")?;
        check_header_checksum(&mut c, header_checksum)?;
        let mut frame = record_frame(&mut c, "the schema extension")?;
        let extension = if frame.remaining() > 0 {
            Schema::parse(&mut frame)?
        } else {
            Schema::default()
        };
        // A cluster group frame holds 20 bytes and a link of at least 20.
        let (n, mut items) = list_frame(&mut c, "the list of cluster groups", 48)?;
        let mut groups = Vec::with_capacity(n);
        for _ in 0..n {
            let mut g = record_frame(&mut items, "a cluster group")?;
            groups.push(ClusterGroup {
                min_entry: g.u64_le("the group's first entry")?,
                entry_span: g.u64_le("the group's entry span")?,
                clusters: g.u32_le("the group's number of clusters")? as u64,
                page_list: envelope_link(&mut g, "the group's page list link")?,
            });
        }
        // Format 1.0.1 appends linked attribute sets; frames end where they say, so they are skipped.
        Ok(Footer { extension, groups })
    }
}
