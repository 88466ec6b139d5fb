//! The entry ends of a jagged basket read in one pass (`one_pass.rs`): its table of entry starts
//! turned into the offsets of the branch's array. The jagged branches of one counter (`nJet`
//! for every `Jet_*`) have the same offsets: the first of them read writes them, the others
//! check their own ends against those and share the array (one array per counter, not per
//! branch: at a few items per entry, offsets are as many bytes as the data).

use std::mem::MaybeUninit;

/// Where one entry's end goes: `put` takes it (in items from the read's first entry) and
/// answers 0 when it is kept, non-zero when it differs from the end already known there.
pub trait EndSlot {
    fn put(self, items: i64) -> i64;
}

/// Written into the branch's own offsets.
impl EndSlot for &mut MaybeUninit<i64> {
    #[inline(always)]
    fn put(self, items: i64) -> i64 {
        self.write(items);
        0
    }
}

/// Checked against the offsets another branch of the counter wrote.
impl EndSlot for &i64 {
    #[inline(always)]
    fn put(self, items: i64) -> i64 {
        items ^ *self
    }
}

/// Consecutive entries' slots: a slice of the offsets to write, or of those to check against
/// (slices, so that the loops over them stay simple enough to vectorize).
pub trait Slots: Sized {
    type Slot: EndSlot;
    type Iter: ExactSizeIterator<Item = Self::Slot>;
    fn count(&self) -> usize;
    fn split(self, k: usize) -> (Self, Self);
    fn slots(self) -> Self::Iter;
}

impl<'a> Slots for &'a mut [MaybeUninit<i64>] {
    type Slot = &'a mut MaybeUninit<i64>;
    type Iter = std::slice::IterMut<'a, MaybeUninit<i64>>;
    fn count(&self) -> usize {
        self.len()
    }
    fn split(self, k: usize) -> (Self, Self) {
        self.split_at_mut(k)
    }
    fn slots(self) -> Self::Iter {
        self.iter_mut()
    }
}

impl<'a> Slots for &'a [i64] {
    type Slot = &'a i64;
    type Iter = std::slice::Iter<'a, i64>;
    fn count(&self) -> usize {
        self.len()
    }
    fn split(self, k: usize) -> (Self, Self) {
        self.split_at(k)
    }
    fn slots(self) -> Self::Iter {
        self.iter()
    }
}

/// The entries of a basket read: `wanted` (first, last) of `basket` (its entries, and the
/// bytes of its data), the first starting at `begin`, with `items_before` items before it in
/// the read, of `item_bytes` bytes each.
#[derive(Clone, Copy)]
pub struct Span {
    pub wanted: (usize, usize),
    pub basket: (usize, usize),
    pub begin: i64,
    pub items_before: i64,
    pub item_bytes: usize,
}

/// Where each entry of a jagged basket starts in its content.
pub enum Starts<'a> {
    /// The basket's own table: big-endian `i32`s counted from the key's start.
    Stored { table: &'a [u8], keylen: i64 },
    /// Relative to the content, the content's end last (a decoded `Basket`'s).
    Relative(&'a [u32]),
}

impl Starts<'_> {
    /// Where entry `e` of a basket of `entries` starts (`entries`: where the content ends).
    pub fn get(&self, e: usize, entries: usize, border: usize) -> Option<i64> {
        match self {
            Starts::Stored { .. } if e == entries => Some(border as i64),
            Starts::Stored { table, keylen } => {
                let at = table.get(e * 4..e * 4 + 4)?;
                Some(i32::from_be_bytes(at.try_into().unwrap()) as i64 - keylen)
            }
            Starts::Relative(offsets) => offsets.get(e).map(|&o| o as i64),
        }
    }

    /// Put the ends of `span`'s entries into `slots` (see `fill_ends`); the last end, or `None`
    /// when they are out of order, past the data, not at whole items, or differ from the ends
    /// already there.
    pub fn fill(&self, slots: impl Slots, span: Span) -> Option<i64> {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            return unsafe { self.fill_avx2(slots, span) };
        }
        self.fill_any(slots, span)
    }

    /// `fill_any` compiled for AVX2 (four big-endian starts turned into offsets at a time).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn fill_avx2(&self, slots: impl Slots, span: Span) -> Option<i64> {
        self.fill_any(slots, span)
    }

    #[inline(always)]
    fn fill_any(&self, slots: impl Slots, span: Span) -> Option<i64> {
        let Span {
            wanted: (first, last),
            basket: (entries, border),
            begin,
            items_before,
            item_bytes,
        } = span;
        let (from, to) = (first + 1, last + 1);
        let border_at = border as i64;
        match self {
            Starts::Stored { table, keylen } if item_bytes.is_power_of_two() => {
                // The entries' starts in the table, then the data's end for the last entry.
                let stored = to.min(entries).max(from);
                let table = table.get(from * 4..stored * 4).unwrap_or_default();
                let n = (table.len() / 4).min(slots.count());
                let (in_table, rest) = slots.split(n);
                let mut ok = in_table.count() * 4 == table.len()
                    && fill_from_table(
                        in_table,
                        table,
                        *keylen,
                        begin,
                        border_at,
                        items_before,
                        item_bytes,
                    );
                let mut prev = match table.len() {
                    0 => begin,
                    n => i32::from_be_bytes(table[n - 4..].try_into().unwrap()) as i64 - keylen,
                };
                match rest.count() {
                    0 => {}
                    1 => {
                        ok &= to > entries
                            && fill_ends(
                                rest.slots(),
                                std::iter::once(border_at),
                                begin,
                                border_at,
                                items_before,
                                item_bytes,
                            )
                            .is_some();
                        prev = border_at;
                    }
                    _ => ok = false,
                }
                ok.then_some(prev)
            }
            Starts::Stored { table, keylen } => {
                let stored = to.min(entries).max(from);
                let table = table.get(from * 4..stored * 4).unwrap_or_default();
                let last = (to > entries).then_some(border as i64);
                let ends = table
                    .chunks_exact(4)
                    .map(|c| i32::from_be_bytes(c.try_into().unwrap()) as i64 - keylen)
                    .chain(last);
                fill_ends(
                    slots.slots(),
                    ends,
                    begin,
                    border_at,
                    items_before,
                    item_bytes,
                )
            }
            Starts::Relative(offsets) => {
                let ends = offsets.get(from..to).unwrap_or_default().iter();
                let ends = ends.map(|&o| o as i64);
                fill_ends(
                    slots.slots(),
                    ends,
                    begin,
                    border_at,
                    items_before,
                    item_bytes,
                )
            }
        }
    }
}

/// `fill_ends` from a basket's table of entry starts (big-endian `i32`s from the key's start,
/// one per slot) when items are a power of two bytes: written and checked without branches or a
/// running value, so that the compiler vectorizes it (it runs over every entry read).
#[inline(always)]
fn fill_from_table(
    slots: impl Slots,
    table: &[u8],
    keylen: i64,
    begin: i64,
    border: i64,
    items_before: i64,
    item_bytes: usize,
) -> bool {
    let (shift, mask) = (item_bytes.trailing_zeros(), item_bytes as i64 - 1);
    let at = |c: &[u8]| i32::from_be_bytes(c.try_into().unwrap()) as i64 - keylen;
    if slots.count() != table.len() / 4 || !table.len().is_multiple_of(4) {
        return false;
    }
    let mut slots = slots.slots();
    let (Some(first), Some(slot)) = (table.get(..4), slots.next()) else {
        return true; // no entries
    };
    // Sign bits gather "before the previous end" and "past the data"; low bits, "not at a
    // whole item"; the rest, "not the end known there".
    let check =
        |end: i64, prev: i64| ((end - prev) | (border - end)) & i64::MIN | ((end - begin) & mask);
    let mut bad = check(at(first), begin);
    bad |= slot.put(items_before + ((at(first) - begin) >> shift));
    for ((slot, end), prev) in slots
        .zip(table[4..].chunks_exact(4))
        .zip(table.chunks_exact(4))
    {
        let (end, prev) = (at(end), at(prev));
        bad |= check(end, prev);
        bad |= slot.put(items_before + ((end - begin) >> shift));
    }
    bad == 0
}

/// Put the offsets of each entry's end (`items_before` plus the items from `begin` to it) into
/// `slots`; the last end, or `None` when the ends are out of order, past `border`, not at whole
/// items, fewer than the slots, or differ from the ends there.
#[inline(always)]
fn fill_ends<S: EndSlot>(
    slots: impl ExactSizeIterator<Item = S>,
    ends: impl Iterator<Item = i64>,
    begin: i64,
    border: i64,
    items_before: i64,
    item_bytes: usize,
) -> Option<i64> {
    let (mut ok, mut prev, mut written, wanted) = (true, begin, 0, slots.len());
    // Checks are gathered, not branched on: the loop runs over millions of entries.
    if item_bytes.is_power_of_two() {
        let (shift, mask) = (item_bytes.trailing_zeros(), item_bytes as i64 - 1);
        for (slot, end) in slots.zip(ends) {
            let bytes = end - begin;
            ok &= (end >= prev) & (end <= border) & (bytes & mask == 0);
            ok &= slot.put(items_before + (bytes >> shift)) == 0;
            prev = end;
            written += 1;
        }
    } else {
        let size = item_bytes as i64;
        for (slot, end) in slots.zip(ends) {
            let bytes = end - begin;
            ok &= (end >= prev) & (end <= border) & (bytes % size == 0);
            ok &= slot.put(items_before + bytes / size) == 0;
            prev = end;
            written += 1;
        }
    }
    (ok && written == wanted).then_some(prev)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A basket's table: the entries' starts as big-endian `i32`s from the key's start.
    fn table(starts: &[i64], keylen: i64) -> Vec<u8> {
        starts
            .iter()
            .flat_map(|s| ((s + keylen) as i32).to_be_bytes())
            .collect()
    }

    fn span(
        wanted: (usize, usize),
        basket: (usize, usize),
        begin: i64,
        items_before: i64,
        item_bytes: usize,
    ) -> Span {
        Span {
            wanted,
            basket,
            begin,
            items_before,
            item_bytes,
        }
    }

    fn written(slots: &[MaybeUninit<i64>]) -> Vec<i64> {
        // SAFETY: every slot was made with `MaybeUninit::new`.
        slots.iter().map(|s| unsafe { s.assume_init() }).collect()
    }

    #[test]
    fn ends_are_written_then_checked_against() {
        // Entries of 2, 0 and 3 items, 5 items before them in the read.
        for item_bytes in [4usize, 12] {
            let size = item_bytes as i64;
            let bytes = table(&[0, 2 * size, 2 * size], 100);
            let relative = [0u32, 2 * size as u32, 2 * size as u32, 5 * size as u32];
            let border = 5 * item_bytes;
            for starts in [
                Starts::Stored {
                    table: &bytes,
                    keylen: 100,
                },
                Starts::Relative(&relative),
            ] {
                let mut own = [MaybeUninit::new(-1i64); 3];
                let got = starts.fill(&mut own[..], span((0, 3), (3, border), 0, 5, item_bytes));
                assert_eq!(got, Some(border as i64));
                let own = written(&own);
                assert_eq!(own, [7, 7, 10]);
                let got = starts.fill(&own[..], span((0, 3), (3, border), 0, 5, item_bytes));
                assert_eq!(got, Some(border as i64));
                for other in [[7, 8, 10], [6, 7, 10], [7, 7, 11]] {
                    let got = starts.fill(&other[..], span((0, 3), (3, border), 0, 5, item_bytes));
                    assert_eq!(got, None, "{other:?} of {item_bytes}-byte items");
                }
                // Part of the basket: entries 1..3 (7 items before them, ends 7 and 10).
                let got = starts.fill(
                    &own[1..],
                    span((1, 3), (3, border), 2 * size, 7, item_bytes),
                );
                assert_eq!(got, Some(border as i64));
            }
        }
    }

    #[test]
    fn disordered_ends_fail_both_ways() {
        // The second entry starts before the first.
        let bytes = table(&[0, 8, 4], 10);
        let starts = Starts::Stored {
            table: &bytes,
            keylen: 10,
        };
        let mut own = [MaybeUninit::new(0i64); 3];
        assert_eq!(
            starts.fill(&mut own[..], span((0, 3), (3, 12), 0, 0, 4)),
            None
        );
        let known = [2i64, 1, 3];
        assert_eq!(
            starts.fill(&known[..], span((0, 3), (3, 12), 0, 0, 4)),
            None
        );
    }
}
