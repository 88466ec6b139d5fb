//! Planning a read: which baskets of which branches hold the wanted entries, and how each
//! branch is interpreted.

use crate::engine::file::RootFile;
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
            interpret(tree, b, file.streamers_read(), file.member_dims).map_err(|u| {
                Error::UnsupportedBranch {
                    file: file.name().to_string(),
                    branch: tree.branch_path(b),
                    typename: u.typename,
                    reason: u.reason,
                }
            })
        })
        .collect()
}

/// The baskets holding `branches` over entries `[start, stop)`; and, for a branch whose baskets
/// leave their entry offsets out, its count branch's baskets over the same baskets' entries, so
/// that assembling rebuilds the offsets from the counts without reading anything more (they travel
/// in the same request).
pub fn plan_baskets(
    file: &RootFile,
    tree: &TreeMeta,
    branches: &[usize],
    start: u64,
    stop: u64,
) -> Result<Vec<Planned>> {
    let interps = interpretations(file, tree, branches)?;
    let mut plan: Vec<(Planned, u64)> = Vec::new();
    for &b in branches {
        plan.extend(baskets_of(tree, b, start, stop));
    }
    let mut counts: Vec<(usize, u64, u64)> = Vec::new();
    for (&b, interp) in branches.iter().zip(&interps) {
        let Some(count) = offsets_count_branch(file, tree, b, interp) else {
            continue;
        };
        let mine = plan.iter().filter(|(p, _)| p.branch == b);
        let lo = mine
            .clone()
            .map(|(p, _)| p.entry_start)
            .min()
            .unwrap_or(start);
        let hi = mine.map(|(_, stop)| *stop).max().unwrap_or(stop);
        match counts.iter_mut().find(|(c, _, _)| *c == count) {
            Some((_, l, h)) => (*l, *h) = ((*l).min(lo), (*h).max(hi)),
            None => counts.push((count, lo, hi)),
        }
    }
    for (count, lo, hi) in counts {
        // Over the count's own range, which covers the entries read too when it is read itself.
        plan.retain(|(p, _)| p.branch != count);
        plan.extend(baskets_of(tree, count, lo.min(start), hi.max(stop)));
    }
    Ok(plan.into_iter().map(|(p, _)| p).collect())
}

/// The count branch whose values rebuild `branch`'s entry offsets, when its baskets leave them
/// out (ROOT's kGenerateOffsetMap, or no offset table at all) and the count is one number per
/// entry (any other count is refused when assembling).
pub fn offsets_count_branch(
    file: &RootFile,
    tree: &TreeMeta,
    branch: usize,
    interp: &Interpretation,
) -> Option<usize> {
    let Interpretation::Jagged {
        count_branch: Some(count),
        ..
    } = interp
    else {
        return None;
    };
    let meta = &tree.branches[branch];
    let leaves_offsets_out = meta.offsets_from_counts || meta.entry_offset_len == 0;
    let counts_are_numbers = matches!(
        interpret(tree, *count, file.streamers_read(), file.member_dims),
        Ok(Interpretation::Fixed { .. })
    );
    (leaves_offsets_out && counts_are_numbers).then_some(*count)
}

/// The baskets of `branch` holding entries of `[start, stop)`, in entry order, each with the
/// entry it stops at.
fn baskets_of(tree: &TreeMeta, branch: usize, start: u64, stop: u64) -> Vec<(Planned, u64)> {
    let meta = &tree.branches[branch];
    let mut out = Vec::new();
    for loc in &meta.baskets {
        if loc.entry_start < stop && loc.entry_stop > start {
            let planned = Planned {
                branch,
                entry_start: loc.entry_start,
                source: BasketSource::Disk(*loc),
            };
            out.push((planned, loc.entry_stop));
        }
    }
    let mut entry = meta.baskets.last().map_or(0, |l| l.entry_stop);
    for (i, e) in meta.embedded.iter().enumerate() {
        let end = entry + e.entries as u64;
        if entry < stop && end > start {
            let planned = Planned {
                branch,
                entry_start: entry,
                source: BasketSource::Embedded(i),
            };
            out.push((planned, end));
        }
        entry = end;
    }
    out
}
