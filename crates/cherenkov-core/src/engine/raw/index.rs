//! What a byte range is, for a reader that names none: uproot asks for a basket by its key's offset
//! and length (TBranch's fBasketSeek and fBasketBytes) without saying whose it is. The engine parses
//! the same trees, so each basket is known here as (tree, branch, cluster); and each branch's
//! collection (the branches an analysis reading it is likely to read next) and each tree's layout
//! (what makes two files' trees alike, so that they share what was learned) come from the same
//! parse.

use crate::format::tree::TreeMeta;
use crate::source::ByteRange;
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::ops::RangeInclusive;
use std::sync::Arc;

/// One basket of an indexed tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BasketAt {
    /// Index of the tree among those indexed in the file.
    pub tree: usize,
    pub branch: usize,
    /// The cluster holding the basket's first entry.
    pub cluster: usize,
}

/// A TTree's baskets by branch and cluster, and which branches go together.
pub struct TreeIndex {
    pub meta: Arc<TreeMeta>,
    /// Per branch, its baskets on disk in entry order, each with its cluster.
    baskets: Vec<Vec<(usize, ByteRange)>>,
    /// Per branch, its collection: the index of the collection's first branch.
    collection: Vec<usize>,
    /// Entry boundaries of the clusters.
    pub bounds: Vec<u64>,
    /// What files whose trees are alike share (see `layout_of`).
    pub layout: u64,
    by_path: HashMap<String, usize>,
}

impl TreeIndex {
    pub fn new(path: &str, meta: Arc<TreeMeta>) -> Self {
        let bounds = meta.cluster_boundaries();
        let cluster_of = |entry: u64| bounds.partition_point(|&b| b <= entry).saturating_sub(1);
        let baskets = (meta.branches.iter())
            .map(|b| {
                (b.baskets.iter())
                    .filter(|l| l.bytes > 0)
                    .map(|l| {
                        let range = ByteRange::new(l.seek, l.bytes as u64);
                        (cluster_of(l.entry_start), range)
                    })
                    .collect()
            })
            .collect();
        let by_path = (0..meta.branches.len())
            .map(|b| (meta.branch_path(b), b))
            .collect();
        Self {
            by_path,
            collection: collections(&meta),
            layout: layout_of(path, &meta),
            baskets,
            bounds,
            meta,
        }
    }

    pub fn clusters(&self) -> usize {
        self.bounds.len().saturating_sub(1)
    }

    /// Every basket of the tree, with its branch and cluster.
    pub fn all_baskets(&self) -> impl Iterator<Item = (usize, usize, ByteRange)> + '_ {
        (self.baskets.iter().enumerate())
            .flat_map(|(b, list)| list.iter().map(move |&(c, r)| (b, c, r)))
    }

    /// The baskets of `branch` in `clusters`.
    pub fn ranges(
        &self,
        branch: usize,
        clusters: RangeInclusive<usize>,
    ) -> impl Iterator<Item = (usize, ByteRange)> + '_ {
        let list = &self.baskets[branch];
        let from = list.partition_point(|(c, _)| c < clusters.start());
        list[from..]
            .iter()
            .take_while(move |(c, _)| c <= clusters.end())
            .copied()
    }

    /// The branches of these paths that the tree has.
    pub fn branches_named<'a>(&self, paths: impl IntoIterator<Item = &'a String>) -> Vec<usize> {
        (paths.into_iter())
            .filter_map(|p| self.by_path.get(p).copied())
            .collect()
    }

    /// The other branches of `branch`'s collection.
    pub fn collection_of(&self, branch: usize) -> impl Iterator<Item = usize> + '_ {
        let id = self.collection[branch];
        (0..self.collection.len()).filter(move |&b| b != branch && self.collection[b] == id)
    }

    /// The clusters holding entries `[start, stop)` of a tree read as a fraction of its entries
    /// (a window learned in another file of the layout).
    pub fn clusters_of_fraction(&self, start: f64, span: f64) -> Option<RangeInclusive<usize>> {
        let entries = *self.bounds.last()? as f64;
        let n = self.clusters();
        if n == 0 || span <= 0.0 {
            return None;
        }
        let first = (start * entries) as u64;
        let last = (((start + span) * entries).ceil() as u64).max(first + 1) - 1;
        let cluster_of = |entry: u64| {
            (self
                .bounds
                .partition_point(|&b| b <= entry)
                .saturating_sub(1))
            .min(n - 1)
        };
        Some(cluster_of(first)..=cluster_of(last))
    }

    /// The fraction of the tree's entries that `clusters` start at and span.
    pub fn fraction_of(&self, clusters: &RangeInclusive<usize>) -> (f64, f64) {
        let entries = self.bounds.last().copied().unwrap_or(0).max(1) as f64;
        let start = self.bounds[*clusters.start()] as f64;
        let stop = self.bounds[(clusters.end() + 1).min(self.bounds.len() - 1)] as f64;
        (start / entries, (stop - start) / entries)
    }
}

/// Collections, as analyses read branches together: the members of a split object (one
/// top-level branch and the branches under it), the branches of one counted collection (those
/// whose leaves one counter leaf counts, and the counter's branch: `nMuon`, `Muon_pt[nMuon]`,
/// `Muon_eta[nMuon]`, ...), and top-level branches that are neither, by the name before their
/// first underscore (`MET_pt`, `MET_phi`: how NanoAOD's flat records are named, and how coffea's
/// NanoAOD schema groups them). Each is named by the index of a branch in it.
fn collections(meta: &TreeMeta) -> Vec<usize> {
    let top = |mut b: usize| {
        while let Some(p) = meta.branches[b].parent {
            b = p;
        }
        b
    };
    let counter_of = |b: usize| {
        (meta.branches[b].leaves.iter())
            .find_map(|&l| meta.leaves.get(l)?.count)
            .and_then(|count| meta.leaves.get(count)?.branch)
            .map(top)
    };
    let mut counters = vec![false; meta.branches.len()];
    for b in 0..meta.branches.len() {
        if let Some(c) = counter_of(b) {
            counters[c] = true;
        }
    }
    let mut by_prefix: HashMap<&str, usize> = HashMap::new();
    (0..meta.branches.len())
        .map(|b| {
            let branch = &meta.branches[b];
            if branch.parent.is_some() {
                return top(b);
            }
            if let Some(c) = counter_of(b) {
                return c;
            }
            match branch.name.split_once('_') {
                Some((prefix, _)) if !counters[b] && branch.children.is_empty() => {
                    *by_prefix.entry(prefix).or_insert(b)
                }
                _ => b,
            }
        })
        .collect()
}

/// A tree's layout: its path in the file and every branch's path, class and leaves (type names,
/// lengths, counters). Files whose trees have the same layout (a dataset's files, written by one
/// job) are read alike.
fn layout_of(path: &str, meta: &TreeMeta) -> u64 {
    let mut h = DefaultHasher::new();
    path.hash(&mut h);
    meta.branches.len().hash(&mut h);
    for (i, b) in meta.branches.iter().enumerate() {
        meta.branch_path(i).hash(&mut h);
        b.class.hash(&mut h);
        for &l in &b.leaves {
            if let Some(leaf) = meta.leaves.get(l) {
                (&leaf.class, &leaf.title, leaf.len, leaf.count).hash(&mut h);
            }
        }
    }
    h.finish()
}
