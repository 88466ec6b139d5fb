//! The three envelopes written (spec: "Header Envelope", "Footer Envelope", "Page List
//! Envelope"), each parsed back equal by `header.rs`, `footer.rs` and `page_list.rs`. Footer and
//! page lists carry the header's checksum, which ties them to it.

use super::super::envelope::EnvelopeKind;
use super::super::footer::Footer;
use super::super::page_list::{ColumnPages, PageList};
use super::super::schema::Schema;
use super::frames::{envelope, Out};
use super::schema::write_schema;

/// Written by writers that mark a suppressed column in a page list (the spec's lowest `i64`).
const SUPPRESSED: i64 = i64::MIN;

/// The header envelope and its checksum. `writer` names the program ("cherenkov 0.1.0").
pub fn header(name: &str, description: &str, writer: &str, schema: &Schema) -> (Vec<u8>, u64) {
    envelope(EnvelopeKind::Header, |o| {
        o.feature_flags();
        o.string(name);
        o.string(description);
        o.string(writer);
        write_schema(o, schema);
    })
}

/// The footer envelope: the schema extension (fields and columns added after the header was
/// written; always present, empty or not, as ROOT writes it) and the cluster groups.
pub fn footer(header_checksum: u64, footer: &Footer) -> Vec<u8> {
    envelope(EnvelopeKind::Footer, |o| {
        o.feature_flags();
        o.u64(header_checksum);
        o.record(|o| write_schema(o, &footer.extension));
        o.records(&footer.groups, |o, g| {
            o.u64(g.min_entry);
            o.u64(g.entry_span);
            o.u32(g.clusters as u32);
            o.envelope_link(&g.page_list);
        });
    })
    .0
}

/// The page list envelope of one cluster group.
pub fn page_list(header_checksum: u64, list: &PageList) -> Vec<u8> {
    envelope(EnvelopeKind::PageList, |o| {
        o.u64(header_checksum);
        o.records(&list.clusters, |o, s| {
            o.u64(s.first_entry);
            o.u64(s.entries);
        });
        o.list(list.columns.len(), |o| {
            for cluster in &list.columns {
                o.list(cluster.len(), |o| {
                    for column in cluster {
                        column_pages(o, column);
                    }
                });
            }
        });
    })
    .0
}

/// One column's pages in one cluster: an inner list frame of page descriptions (not record
/// frames), its element offset and compression settings inside the frame.
fn column_pages(o: &mut Out, column: &ColumnPages) {
    match column {
        ColumnPages::Suppressed => o.list(0, |o| o.i64(SUPPRESSED)),
        ColumnPages::Stored {
            pages,
            first_element,
            compression,
        } => o.list(pages.len(), |o| {
            for p in pages {
                let elements = p.elements as i32;
                o.i32(if p.checksum { -elements } else { elements });
                o.locator(&p.locator);
            }
            o.i64(*first_element as i64);
            o.u32(*compression);
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::envelope::{EnvelopeLink, Locator};
    use super::super::super::footer::ClusterGroup;
    use super::super::super::header::Header;
    use super::super::super::page_list::{ClusterSummary, PageInfo};
    use super::super::schema::tests::sample;
    use super::*;

    #[test]
    fn header_parses_back_with_its_checksum() {
        let (bytes, checksum) = header("Events", "a test", "cherenkov", &sample());
        let h = Header::parse(&bytes, "t").unwrap();
        assert_eq!(
            (h.name.as_str(), h.description.as_str(), h.writer.as_str()),
            ("Events", "a test", "cherenkov")
        );
        assert_eq!(h.schema, sample());
        assert_eq!(h.checksum, checksum);
    }

    fn group(first: u64, span: u64, offset: u64, size: u64) -> ClusterGroup {
        ClusterGroup {
            min_entry: first,
            entry_span: span,
            clusters: 3,
            page_list: EnvelopeLink {
                length: 4000,
                locator: Locator { offset, size },
            },
        }
    }

    #[test]
    fn footer_parses_back_with_extension_and_groups() {
        for extension in [Schema::default(), sample()] {
            let f = Footer {
                extension,
                groups: vec![group(0, 100, 5000, 300), group(100, 7, 1 << 40, 1 << 33)],
            };
            let bytes = footer(42, &f);
            assert_eq!(Footer::parse(&bytes, 42, "t").unwrap(), f);
            assert!(Footer::parse(&bytes, 43, "t").is_err());
        }
        let empty = Footer {
            extension: Schema::default(),
            groups: vec![],
        };
        assert_eq!(Footer::parse(&footer(1, &empty), 1, "t").unwrap(), empty);
    }

    #[test]
    fn page_lists_parse_back_with_checksums_and_suppressed_columns() {
        let page = |elements, offset, size, checksum| PageInfo {
            elements,
            locator: Locator { offset, size },
            checksum,
        };
        let list = PageList {
            clusters: vec![
                ClusterSummary {
                    first_entry: 0,
                    entries: 10,
                },
                ClusterSummary {
                    first_entry: 10,
                    entries: 0,
                },
            ],
            columns: vec![
                vec![
                    ColumnPages::Stored {
                        pages: vec![page(6, 100, 40, true), page(4, 148, 1 << 31, false)],
                        first_element: 0,
                        compression: 505,
                    },
                    ColumnPages::Suppressed,
                ],
                vec![
                    ColumnPages::Stored {
                        pages: vec![],
                        first_element: 10,
                        compression: 0,
                    },
                    ColumnPages::Suppressed,
                ],
            ],
        };
        let bytes = page_list(9, &list);
        assert_eq!(PageList::parse(&bytes, 9, "t").unwrap(), list);
        assert!(PageList::parse(&bytes, 8, "t").is_err());
    }
}
