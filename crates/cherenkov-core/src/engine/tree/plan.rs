//! Planning a read: which baskets of which branches hold the wanted entries, and how each
//! branch is interpreted.

use super::file::RootFile;
use crate::error::{Error, Result};
use crate::format::interpretation::{interpret, Interpretation};
use crate::format::tree::{BasketLocation, TreeMeta};

/// Where a planned basket's bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BasketSource {
    Disk(BasketLocation),
    /// Index into the branch's embedded baskets.
    Embedded(usize),
}

/// One basket a read needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Planned {
    pub branch: usize,
    pub entry_start: u64,
    pub source: BasketSource,
}

impl Planned {
    /// Bytes to fetch (none for embedded baskets).
    pub fn stored_bytes(&self) -> u64 {
        match self.source {
            BasketSource::Disk(loc) => loc.bytes as u64,
            BasketSource::Embedded(_) => 0,
        }
    }
}

/// How each branch is interpreted; fails on the first one that cannot be.
pub fn interpretations(
    file: &RootFile,
    tree: &TreeMeta,
    branches: &[usize],
) -> Result<Vec<Interpretation>> {
    branches
        .iter()
        .map(|&b| {
            interpret(tree, b, file.streamers_read()).map_err(|u| Error::UnsupportedBranch {
                file: file.name().to_string(),
                branch: tree.branch_path(b),
                typename: u.typename,
                reason: u.reason,
            })
        })
        .collect()
}

pub fn plan_baskets(tree: &TreeMeta, branches: &[usize], start: u64, stop: u64) -> Vec<Planned> {
    let mut plan = Vec::new();
    for &b in branches {
        let meta = &tree.branches[b];
        for loc in &meta.baskets {
            if loc.entry_start < stop && loc.entry_stop > start {
                plan.push(Planned {
                    branch: b,
                    entry_start: loc.entry_start,
                    source: BasketSource::Disk(*loc),
                });
            }
        }
        let mut entry = meta.baskets.last().map_or(0, |l| l.entry_stop);
        for (i, e) in meta.embedded.iter().enumerate() {
            let end = entry + e.entries as u64;
            if entry < stop && end > start {
                plan.push(Planned {
                    branch: b,
                    entry_start: entry,
                    source: BasketSource::Embedded(i),
                });
            }
            entry = end;
        }
    }
    plan
}
