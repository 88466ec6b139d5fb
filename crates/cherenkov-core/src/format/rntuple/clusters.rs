//! Which pages hold a column's elements in a cluster, as ROOT's reader builds it
//! (`RClusterDescriptorBuilder::CommitSuppressedColumnRanges` and `AddExtendedColumnRanges`):
//! of a field's alternative representations exactly one is active per cluster; a column added
//! late (deferred) reads as zeros before its first element, including in clusters written before
//! it existed, whose page lists do not mention it.

use super::descriptor::Descriptor;
use super::page_list::{ClusterSummary, ColumnPages, PageInfo};
use crate::error::{Error, Result};

/// One cluster: its entries and, per physical column, what its page list says.
#[derive(Clone, Copy, Debug)]
pub struct Cluster<'a> {
    /// Index among all clusters of the RNTuple.
    pub index: usize,
    pub summary: ClusterSummary,
    pub columns: &'a [ColumnPages],
}

/// Where a run of a column's elements comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PageSource {
    Stored(PageInfo),
    /// Elements before a deferred column's first: zeros, with no page on disk.
    Zeros(u64),
}

impl PageSource {
    pub fn elements(&self) -> u64 {
        match self {
            PageSource::Stored(p) => p.elements as u64,
            PageSource::Zeros(n) => *n,
        }
    }
}

/// A column's elements in one cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnRange {
    /// The physical column that is active in the cluster.
    pub column: usize,
    /// Index of the first element within the column.
    pub first_element: u64,
    pub elements: u64,
    pub pages: Vec<PageSource>,
    /// ROOT's compression settings of the stored pages.
    pub compression: u32,
}

/// The active column among `candidates` (one field position in each representation) in
/// `cluster`, and its element range and pages.
pub fn column_range(
    desc: &Descriptor,
    candidates: &[usize],
    cluster: &Cluster,
    origin: &str,
) -> Result<ColumnRange> {
    let bad = |what: String| Error::format(format!("{origin} cluster {}", cluster.index), what);
    let listed = candidates
        .iter()
        .find_map(|&c| match cluster.columns.get(c) {
            Some(ColumnPages::Stored {
                pages,
                first_element,
                compression,
            }) => Some((c, Some((pages, *first_element)), *compression)),
            _ => None,
        });
    // Columns a cluster's page list does not mention were added later: they read as zeros (or
    // nothing), unless they are suppressed.
    let active = listed.or_else(|| {
        candidates
            .iter()
            .find(|&&c| {
                c >= cluster.columns.len()
                    && desc.schema.columns[c].first_element.is_none_or(|f| f >= 0)
            })
            .map(|&c| (c, None, 0))
    });
    let Some((column, stored, compression)) = active else {
        return Err(bad(format!(
            "one active representation among columns {candidates:?}, found all suppressed"
        )));
    };
    let record = &desc.schema.columns[column];
    let stored_elements = |pages: &[PageInfo]| pages.iter().map(|p| p.elements as u64).sum::<u64>();
    let deferred = record.first_element.is_some_and(|f| f != 0);
    if !deferred {
        return Ok(match stored {
            Some((pages, first_element)) => ColumnRange {
                column,
                first_element,
                elements: stored_elements(pages),
                pages: pages.iter().copied().map(PageSource::Stored).collect(),
                compression,
            },
            None => ColumnRange {
                column,
                first_element: 0,
                elements: 0,
                pages: Vec::new(),
                compression,
            },
        });
    }
    // A deferred column has as many elements per entry as its field's fixed-size arrays give.
    let reps = desc
        .repetitions(record.field)
        .ok_or_else(|| bad(format!("sane array sizes above column {column}")))?;
    let entries = cluster.summary.entries;
    let (first, elements) = cluster
        .summary
        .first_entry
        .checked_mul(reps)
        .zip(entries.checked_mul(reps))
        .ok_or_else(|| bad(format!("sane element counts for deferred column {column}")))?;
    let mut pages = Vec::new();
    match stored {
        None => pages.push(PageSource::Zeros(elements)),
        Some((stored, first_stored)) => {
            let zeros = first_stored
                .checked_sub(first)
                .filter(|z| z.checked_add(stored_elements(stored)) == Some(elements));
            let zeros = zeros.ok_or_else(|| {
                bad(format!(
                    "deferred column {column} to hold elements {first}..{} here, found {} from element {first_stored}",
                    first + elements,
                    stored_elements(stored)
                ))
            })?;
            if zeros > 0 {
                pages.push(PageSource::Zeros(zeros));
            }
            pages.extend(stored.iter().copied().map(PageSource::Stored));
        }
    }
    Ok(ColumnRange {
        column,
        first_element: first,
        elements,
        pages,
        compression,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::rntuple::anchor::Anchor;
    use crate::format::rntuple::column::ColumnType;
    use crate::format::rntuple::envelope::Locator;
    use crate::format::rntuple::footer::Footer;
    use crate::format::rntuple::header::Header;
    use crate::format::rntuple::schema::{ColumnRecord, FieldRecord, Role, Schema};

    fn desc(columns: Vec<ColumnRecord>) -> Descriptor {
        let field = FieldRecord {
            field_version: 0,
            type_version: 0,
            parent: 0,
            role: Role::Leaf,
            name: "x".into(),
            type_name: "float".into(),
            type_alias: String::new(),
            description: String::new(),
            repetition: 2,
            source: None,
        };
        let header = Header {
            name: "t".into(),
            description: String::new(),
            writer: String::new(),
            schema: Schema {
                fields: vec![field],
                columns,
                aliases: vec![],
            },
            checksum: 0,
        };
        let footer = Footer {
            extension: Schema::default(),
            groups: vec![],
        };
        Descriptor::new(&Anchor::default(), header, footer, "t").unwrap()
    }

    fn col(representation: u16, first_element: Option<i64>) -> ColumnRecord {
        ColumnRecord {
            kind: ColumnType::Real32,
            bits: 32,
            field: 0,
            representation,
            first_element,
            range: None,
        }
    }

    fn page(elements: u32) -> PageInfo {
        PageInfo {
            elements,
            locator: Locator {
                offset: 100,
                size: 4 * elements as u64,
            },
            checksum: false,
        }
    }

    fn cluster(first_entry: u64, entries: u64, columns: &[ColumnPages]) -> Cluster<'_> {
        Cluster {
            index: 1,
            summary: ClusterSummary {
                first_entry,
                entries,
            },
            columns,
        }
    }

    #[test]
    fn the_unsuppressed_representation_is_read() {
        let d = desc(vec![col(0, None), col(1, None)]);
        let columns = [
            ColumnPages::Suppressed,
            ColumnPages::Stored {
                pages: vec![page(6)],
                first_element: 8,
                compression: 505,
            },
        ];
        let r = column_range(&d, &[0, 1], &cluster(4, 3, &columns), "t").unwrap();
        assert_eq!((r.column, r.first_element, r.elements), (1, 8, 6));
        let both = [ColumnPages::Suppressed, ColumnPages::Suppressed];
        assert!(column_range(&d, &[0, 1], &cluster(4, 3, &both), "t").is_err());
    }

    #[test]
    fn deferred_columns_read_zeros_before_their_first_element() {
        let d = desc(vec![col(0, Some(10))]);
        // A cluster written before the column existed: all zeros, two per entry.
        let r = column_range(&d, &[0], &cluster(0, 4, &[]), "t").unwrap();
        assert_eq!(r.pages, [PageSource::Zeros(8)]);
        // The cluster where it starts: entries 4..8, elements 8..16, stored from element 10.
        let columns = [ColumnPages::Stored {
            pages: vec![page(6)],
            first_element: 10,
            compression: 0,
        }];
        let r = column_range(&d, &[0], &cluster(4, 4, &columns), "t").unwrap();
        assert_eq!(r.pages, [PageSource::Zeros(2), PageSource::Stored(page(6))]);
        // Pages that do not fit the cluster's elements are an error.
        let columns = [ColumnPages::Stored {
            pages: vec![page(7)],
            first_element: 10,
            compression: 0,
        }];
        assert!(column_range(&d, &[0], &cluster(4, 4, &columns), "t").is_err());
    }
}
