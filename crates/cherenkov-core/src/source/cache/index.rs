//! The ranges cached for one file, in memory: read from the entry files' headers once when the
//! file is opened, and again (only the entries not known yet) when another process has added
//! entries since, which the directory's modification time tells without reading it.

use super::super::ByteRange;
use super::store::{self, Stored};
use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// A directory changed this shortly before it was listed may change again within the same tick
/// of its coarse timestamp, unseen: it is listed again on the next miss.
const TIMESTAMP_TICK: Duration = Duration::from_millis(100);

/// Where one cached range is.
#[derive(Clone, Debug)]
pub struct Located {
    pub entry: Arc<str>,
    pub stored: Stored,
}

#[derive(Debug, Default)]
pub struct Index {
    by_offset: BTreeMap<u64, Vec<Located>>,
    known: HashSet<Arc<str>>,
    /// The longest range held, to bound the search for one holding a given range.
    longest: u64,
    /// The directory's modification time when it was last listed, and when that was.
    listed: Option<(SystemTime, SystemTime)>,
}

impl Index {
    pub fn add(&mut self, entry: &str, stored: Vec<Stored>) {
        let entry: Arc<str> = entry.into();
        if !self.known.insert(entry.clone()) {
            return;
        }
        for s in stored {
            self.longest = self.longest.max(s.range.len);
            self.by_offset
                .entry(s.range.offset)
                .or_default()
                .push(Located {
                    entry: entry.clone(),
                    stored: s,
                });
        }
    }

    /// An entry range holding `r`.
    pub fn find(&self, r: ByteRange) -> Option<Located> {
        self.by_offset
            .range(r.offset.saturating_sub(self.longest)..=r.offset)
            .rev()
            .flat_map(|(_, held)| held)
            .find(|l| l.stored.range.contains(&r))
            .cloned()
    }

    /// Forget an entry file (damaged or removed); a later listing does not bring it back unless
    /// it is written again.
    pub fn forget(&mut self, entry: &str) {
        for held in self.by_offset.values_mut() {
            held.retain(|l| &*l.entry != entry);
        }
        self.by_offset.retain(|_, held| !held.is_empty());
        self.known.remove(entry);
    }

    /// Add the entries other processes wrote into `dir` since it was last listed.
    pub fn refresh(&mut self, dir: &Path) {
        let Ok(modified) = fs::metadata(dir).and_then(|m| m.modified()) else {
            return;
        };
        if let Some((seen, at)) = self.listed {
            let settled = at.duration_since(seen).is_ok_and(|d| d > TIMESTAMP_TICK);
            if seen == modified && settled {
                return;
            }
        }
        self.listed = Some((modified, SystemTime::now()));
        for item in fs::read_dir(dir).into_iter().flatten().flatten() {
            let name = item.file_name();
            let Some(name) = name.to_str().filter(|n| store::is_entry(n)) else {
                continue;
            };
            if self.known.contains(name) {
                continue;
            }
            if let Some(stored) = store::read_header(&item.path()) {
                self.add(name, stored);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(offset: u64, len: u64) -> Stored {
        Stored {
            range: ByteRange::new(offset, len),
            at: 0,
            checksum: 0,
        }
    }

    #[test]
    fn a_range_is_found_in_any_entry_holding_it() {
        let mut index = Index::default();
        index.add("a.entry", vec![stored(0, 100), stored(1000, 10)]);
        index.add("b.entry", vec![stored(500, 400)]);
        assert_eq!(
            &*index.find(ByteRange::new(600, 10)).unwrap().entry,
            "b.entry"
        );
        assert_eq!(
            index
                .find(ByteRange::new(1000, 10))
                .unwrap()
                .stored
                .range
                .len,
            10
        );
        assert!(index.find(ByteRange::new(950, 100)).is_none());
        index.forget("b.entry");
        assert!(index.find(ByteRange::new(600, 10)).is_none());
        assert!(index.find(ByteRange::new(50, 50)).is_some());
    }
}
