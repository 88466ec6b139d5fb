//! Range arithmetic every backend and the engine share: coalescing close ranges
//! ([`coalesce_ranges`], as arrow-rs `object_store`), splitting a request by a source's limits,
//! joining the pieces back, serving ranges out of larger fetched ones, and naming ranges in errors.

use super::{ByteRange, SourceLimits};
use bytes::Bytes;

/// Default gap below which two ranges are merged into one read: a gap costs bandwidth, an extra
/// range costs a request element (or, over HTTP, header bytes and a multipart boundary).
pub const DEFAULT_COALESCE_GAP: u64 = 4096;

/// Merge sorted-or-unsorted ranges whose gap is at most `max_gap` into fewer, larger ranges.
/// Returns the merged ranges in offset order.
pub fn coalesce_ranges(ranges: &[ByteRange], max_gap: u64) -> Vec<ByteRange> {
    let mut sorted: Vec<ByteRange> = ranges.iter().copied().filter(|r| r.len > 0).collect();
    sorted.sort_unstable();
    let mut out: Vec<ByteRange> = Vec::with_capacity(sorted.len());
    for r in sorted {
        match out.last_mut() {
            Some(last) if r.offset <= last.end().saturating_add(max_gap) => {
                let end = last.end().max(r.end());
                last.len = end - last.offset;
            }
            _ => out.push(r),
        }
    }
    out
}

/// One buffer from consecutive pieces, copying only when there is more than one.
pub fn join(mut pieces: Vec<Bytes>) -> Bytes {
    match pieces.len() {
        0 => Bytes::new(),
        1 => pieces.pop().unwrap_or_default(),
        _ => {
            let mut all = Vec::with_capacity(pieces.iter().map(|p| p.len()).sum());
            for p in &pieces {
                all.extend_from_slice(p);
            }
            Bytes::from(all)
        }
    }
}

/// The buffer of each of `ranges` from the pieces [`split_for_limits`] cut them into, in its order
/// (range by range); `None` when there are fewer pieces than the ranges need.
pub fn join_split_pieces(
    ranges: &[ByteRange],
    pieces: impl IntoIterator<Item = Bytes>,
) -> Option<Vec<Bytes>> {
    let mut pieces = pieces.into_iter();
    ranges
        .iter()
        .map(|r| {
            let mut parts = Vec::new();
            let mut have = 0u64;
            while have < r.len {
                let part = pieces.next()?;
                have += part.len() as u64;
                parts.push(part);
            }
            Some(join(parts))
        })
        .collect()
}

/// Split ranges so that each request respects `limits`: ranges longer than `max_range_len` are cut,
/// and the list is grouped into requests of at most `max_ranges_per_request` ranges and
/// `max_request_bytes` bytes.
pub fn split_for_limits(ranges: &[ByteRange], limits: &SourceLimits) -> Vec<Vec<ByteRange>> {
    let mut requests = Vec::new();
    let mut current: Vec<ByteRange> = Vec::new();
    let mut current_bytes = 0u64;
    let max_len = limits.max_range_len.max(1);
    for r in ranges {
        let mut offset = r.offset;
        let end = r.end();
        while offset < end {
            let piece = ByteRange::new(offset, (end - offset).min(max_len));
            offset = piece.end();
            if !current.is_empty()
                && (current.len() >= limits.max_ranges_per_request
                    || current_bytes + piece.len > limits.max_request_bytes)
            {
                requests.push(std::mem::take(&mut current));
                current_bytes = 0;
            }
            current_bytes += piece.len;
            current.push(piece);
        }
    }
    if !current.is_empty() {
        requests.push(current);
    }
    requests
}

/// "range 10..20" or "3 ranges in 10..900 (first 10..20)": how errors name the ranges of a request.
pub fn describe_ranges(ranges: &[ByteRange]) -> String {
    match ranges {
        [] => "no range".to_string(),
        [r] => format!("range {}..{}", r.offset, r.end()),
        [first, ..] => {
            let lo = ranges.iter().map(|r| r.offset).min().unwrap_or(0);
            let hi = ranges.iter().map(|r| r.end()).max().unwrap_or(0);
            format!(
                "{} ranges in {lo}..{hi} (first {}..{})",
                ranges.len(),
                first.offset,
                first.end()
            )
        }
    }
}

/// Serve `wanted` ranges out of `fetched` ranges (each wanted range lies inside one fetched range;
/// an empty one needs none: `coalesce_ranges` leaves them out).
pub fn slice_from_fetched(
    wanted: &[ByteRange],
    fetched: &[ByteRange],
    buffers: &[Bytes],
) -> Option<Vec<Bytes>> {
    wanted
        .iter()
        .map(|w| {
            if w.len == 0 {
                return Some(Bytes::new());
            }
            let i = fetched.partition_point(|f| f.end() < w.end());
            let i = (i..fetched.len()).find(|&i| fetched[i].contains(w))?;
            let start = (w.offset - fetched[i].offset) as usize;
            Some(buffers[i].slice(start..start + w.len as usize))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalesce_merges_close_ranges_only() {
        let r = [
            ByteRange::new(100, 10),
            ByteRange::new(0, 10),
            ByteRange::new(15, 5),
        ];
        assert_eq!(
            coalesce_ranges(&r, 5),
            vec![ByteRange::new(0, 20), ByteRange::new(100, 10)]
        );
        assert_eq!(coalesce_ranges(&r, 0).len(), 3);
    }

    #[test]
    fn split_respects_every_limit() {
        let limits = SourceLimits {
            max_ranges_per_request: 2,
            max_range_len: 10,
            max_request_bytes: 15,
        };
        let reqs = split_for_limits(&[ByteRange::new(0, 25), ByteRange::new(100, 3)], &limits);
        for req in &reqs {
            assert!(req.len() <= 2);
            assert!(req.iter().map(|r| r.len).sum::<u64>() <= 15);
            assert!(req.iter().all(|r| r.len <= 10));
        }
        let total: u64 = reqs.iter().flatten().map(|r| r.len).sum();
        assert_eq!(total, 28);
    }

    #[test]
    fn messages_name_the_ranges() {
        assert_eq!(describe_ranges(&[ByteRange::new(10, 5)]), "range 10..15");
        assert_eq!(
            describe_ranges(&[ByteRange::new(10, 5), ByteRange::new(0, 2)]),
            "2 ranges in 0..15 (first 10..15)"
        );
    }

    #[test]
    fn slices_come_from_the_covering_range() {
        let fetched = [ByteRange::new(0, 20), ByteRange::new(100, 10)];
        let bufs = [
            Bytes::from((0u8..20).collect::<Vec<_>>()),
            Bytes::from(vec![7u8; 10]),
        ];
        let out = slice_from_fetched(
            &[ByteRange::new(5, 3), ByteRange::new(102, 2)],
            &fetched,
            &bufs,
        )
        .unwrap();
        assert_eq!(&out[0][..], &[5, 6, 7]);
        assert_eq!(&out[1][..], &[7, 7]);
        assert!(slice_from_fetched(&[ByteRange::new(18, 5)], &fetched, &bufs).is_none());
    }
}
