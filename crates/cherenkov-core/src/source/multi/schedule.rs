//! How one request is shared between replicas: contiguous *parts* sized so the replicas finish
//! together, each cut into *pieces* read a few at a time; a replica done early takes the others'
//! unstarted pieces and copies late ones (the first answer wins).

use super::quality::{Quality, FIRST_THROUGHPUT_SAMPLE};
use crate::source::ByteRange;
use bytes::Bytes;
use std::time::{Duration, Instant};

/// Bytes for each replica so that they all finish at the same time `t` (`latency + bytes /
/// throughput = t`), adding up to `total`: the replicas start in order of latency, and one whose
/// latency alone reaches `t` gets nothing (a replica ten times farther away than the others only
/// slows a read it would share).
pub fn finish_together(total: f64, q: &[Quality]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..q.len()).collect();
    order.sort_by(|&a, &b| q[a].latency.total_cmp(&q[b].latency));
    let mut shares = vec![0.0; q.len()];
    for k in 1..=order.len() {
        let used = &order[..k];
        let rate: f64 = used.iter().map(|&i| q[i].throughput).sum();
        let head_start: f64 = used.iter().map(|&i| q[i].latency * q[i].throughput).sum();
        let t = (total + head_start) / rate;
        if order.get(k).is_none_or(|&next| t <= q[next].latency) {
            for &i in used {
                shares[i] = ((t - q[i].latency) * q[i].throughput).max(0.0);
            }
            break;
        }
    }
    shares
}

/// Split ranges (in offset order) into contiguous parts, sized so that the replicas finish
/// together (see [`finish_together`]); `qualities` are the actives' own: a replica too slow to help gets no part.
pub fn split_into_parts(
    ranges: &[ByteRange],
    actives: &[usize],
    mut qualities: Vec<Quality>,
) -> Vec<(usize, Vec<usize>)> {
    let total: u64 = ranges.iter().map(|r| r.len).sum();
    // A replica whose throughput is unmeasured is taken to be as fast as the measured ones:
    // the prior (a fast nearby server) would give it most of the bytes of a large read.
    let measured: Vec<f64> = qualities
        .iter()
        .filter(|q| q.throughput_samples > 0)
        .map(|q| q.throughput)
        .collect();
    if !measured.is_empty() {
        let typical = measured.iter().sum::<f64>() / measured.len() as f64;
        for q in qualities.iter_mut().filter(|q| q.throughput_samples == 0) {
            q.throughput = typical;
        }
    }
    let shares = finish_together(total as f64, &qualities);
    // Smallest share first, the largest last: it takes what rounding to whole ranges leaves.
    let mut by_share: Vec<usize> = (0..actives.len()).filter(|&n| shares[n] > 0.0).collect();
    by_share.sort_by(|&a, &b| shares[a].total_cmp(&shares[b]));
    let mut order: Vec<usize> = (0..ranges.len()).collect();
    order.sort_by_key(|&k| ranges[k].offset);
    let mut parts = Vec::new();
    let mut at = 0;
    for (n, &a) in by_share.iter().enumerate() {
        let last = n + 1 == by_share.len();
        let mut taken = 0.0;
        let mut part = Vec::new();
        // A range goes to this replica if most of it fits in the share.
        while at < order.len() && (last || taken + ranges[order[at]].len as f64 / 2.0 <= shares[a])
        {
            taken += ranges[order[at]].len as f64;
            part.push(order[at]);
            at += 1;
        }
        if !part.is_empty() {
            parts.push((actives[a], part));
        }
    }
    parts
}

/// Pieces of contiguous ranges a replica's part of a request is cut into (when large enough), so
/// that a replica done early takes over the unstarted pieces of a slower one: the estimates a part
/// was sized by may be far off (a replica not measured yet, a server slowing down).
const PIECES_PER_PART: usize = 4;
/// No smaller pieces: fewer requests, and each measures a throughput.
const MIN_PIECE: u64 = FIRST_THROUGHPUT_SAMPLE;
/// Pieces in flight per replica: the next is on its way while the previous one arrives.
pub const IN_FLIGHT: usize = 2;
/// A piece is copied to a replica out of work once it has taken this many times what that replica
/// needs for it: twice, so that a replica about as fast as the copier is not copied at the end of
/// every request (a copy abandoned still takes bandwidth).
const LATE_FACTOR: f64 = 2.0;

/// The pieces of one request, and who reads what.
pub struct Schedule {
    pub pieces: Vec<Piece>,
    /// Per part (one per replica given one): its unstarted pieces, in offset order.
    unstarted: Vec<std::collections::VecDeque<usize>>,
    /// Pieces not done.
    pub left: usize,
    /// Buffers by range index.
    pub out: Vec<Option<Bytes>>,
}

#[derive(Default)]
pub struct Piece {
    pub ranges: Vec<usize>,
    pub bytes: u64,
    /// Replica reading it, since when.
    pub started: Option<(usize, Instant)>,
    pub copied: bool,
    /// The replica whose answer was taken.
    pub answered_by: Option<usize>,
}

pub enum Late {
    Copy(usize),
    /// Nothing to copy yet: look again after this long.
    In(Duration),
    Nothing,
}

impl Schedule {
    pub fn new(ranges: &[ByteRange], parts: &[(usize, Vec<usize>)]) -> Schedule {
        let mut pieces = Vec::new();
        let mut unstarted = Vec::new();
        for (_, indices) in parts {
            let bytes: u64 = indices.iter().map(|&k| ranges[k].len).sum();
            let target = (bytes / PIECES_PER_PART as u64).max(MIN_PIECE);
            let mut part = std::collections::VecDeque::new();
            let mut piece = Piece::default();
            for &k in indices {
                piece.ranges.push(k);
                piece.bytes += ranges[k].len;
                if piece.bytes >= target {
                    part.push_back(pieces.len());
                    pieces.push(std::mem::take(&mut piece));
                }
            }
            if !piece.ranges.is_empty() {
                part.push_back(pieces.len());
                pieces.push(piece);
            }
            unstarted.push(part);
        }
        Schedule {
            left: pieces.len(),
            pieces,
            unstarted,
            out: vec![None; ranges.len()],
        }
    }

    /// The next piece of `part`, else the last unstarted piece of the part with the most bytes
    /// left; started on `replica`.
    pub fn take(&mut self, part: usize, replica: usize) -> Option<usize> {
        let piece = match self.unstarted[part].pop_front() {
            Some(piece) => piece,
            None => {
                let pieces = &self.pieces;
                let bytes_left = |r: &std::collections::VecDeque<usize>| -> u64 {
                    r.iter().map(|&p| pieces[p].bytes).sum()
                };
                let richest = self
                    .unstarted
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| !r.is_empty())
                    .max_by_key(|(_, r)| bytes_left(r))?
                    .0;
                self.unstarted[richest].pop_back()?
            }
        };
        self.pieces[piece].started = Some((replica, Instant::now()));
        Some(piece)
    }

    pub fn ranges_of(&self, ranges: &[ByteRange], piece: usize) -> Vec<ByteRange> {
        self.pieces[piece]
            .ranges
            .iter()
            .map(|&k| ranges[k])
            .collect()
    }

    /// Store a piece's buffers from `replica` unless it was answered already; whether this answer
    /// was the first.
    pub fn finish(&mut self, piece: usize, replica: usize, buffers: Vec<Bytes>) -> bool {
        let p = &mut self.pieces[piece];
        if p.answered_by.is_some() {
            return false;
        }
        p.answered_by = Some(replica);
        self.left -= 1;
        for (&k, b) in p.ranges.iter().zip(buffers) {
            self.out[k] = Some(b);
        }
        true
    }

    /// A piece in flight on another replica that `replica` (of `quality`) should copy now.
    pub fn late(&mut self, replica: usize, quality: &Quality) -> Late {
        let mut wait: Option<Duration> = None;
        for (i, p) in self.pieces.iter_mut().enumerate() {
            let Some((reader, started)) = p.started else {
                continue;
            };
            if p.answered_by.is_some() || p.copied || reader == replica || !quality.knows(p.bytes) {
                continue;
            }
            let due = Duration::from_secs_f64(quality.expected(p.bytes) * LATE_FACTOR);
            match due.checked_sub(started.elapsed()) {
                None | Some(Duration::ZERO) => {
                    p.copied = true;
                    return Late::Copy(i);
                }
                Some(left) => wait = Some(wait.map_or(left, |w| w.min(left))),
            }
        }
        wait.map_or(Late::Nothing, Late::In)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_sized_to_finish_together() {
        let q = |latency, throughput| Quality {
            latency,
            throughput,
            samples: 1,
            throughput_samples: 1,
        };
        // Equal replicas: halves.
        let shares = finish_together(1e6, &[q(0.01, 1e6), q(0.01, 1e6)]);
        assert!((shares[0] - 5e5).abs() < 1.0 && (shares[1] - 5e5).abs() < 1.0);
        // Twice the throughput: twice the bytes (same latency).
        let shares = finish_together(3e6, &[q(0.01, 1e6), q(0.01, 2e6)]);
        assert!((shares[1] / shares[0] - 2.0).abs() < 1e-9, "{shares:?}");
        // Ten times the latency, and the fast one is done before the slow one would start.
        let shares = finish_together(1e6, &[q(0.1, 1e8), q(0.01, 1e8)]);
        assert_eq!(shares, [0.0, 1e6]);
        // A big read is worth sharing even with the far one; both end at the same time.
        let shares = finish_together(1e8, &[q(0.1, 1e8), q(0.01, 1e8)]);
        let ends = [0.1 + shares[0] / 1e8, 0.01 + shares[1] / 1e8];
        assert!(
            shares[0] > 0.0 && (ends[0] - ends[1]).abs() < 1e-9,
            "{shares:?}"
        );
        assert!((shares.iter().sum::<f64>() - 1e8).abs() < 1.0);
    }

    #[test]
    fn pieces_are_stolen_from_the_back_of_the_richest_part_and_copied_when_late() {
        let mib = 1 << 20;
        // Part 0: eight 1 MiB ranges (four pieces of 2 MiB); part 1: one small range.
        let ranges: Vec<ByteRange> = (0..9)
            .map(|k| ByteRange {
                offset: k * mib,
                len: if k < 8 { mib } else { 100 },
            })
            .collect();
        let parts = vec![(0, (0..8).collect()), (1, vec![8])];
        let mut s = Schedule::new(&ranges, &parts);
        assert_eq!(s.pieces.len(), 5);
        assert_eq!(s.pieces[0].ranges, [0, 1]);
        // Replica 1 does its own piece, then takes part 0's last piece, not its next one.
        assert_eq!(s.take(0, 0), Some(0));
        assert_eq!(s.take(1, 1), Some(4));
        assert!(s.finish(4, 1, vec![Bytes::new()]));
        assert_eq!(s.take(1, 1), Some(3));
        // A piece is answered once; the second answer is dropped.
        assert!(s.finish(3, 1, vec![Bytes::new(); 2]));
        assert!(!s.finish(3, 0, vec![Bytes::new(); 2]));
        // Replica 1 (10 ms, 100 MB/s: ~30 ms for a piece) copies replica 0's piece only once it
        // has run twice that long.
        let fast = Quality {
            latency: 0.01,
            throughput: 1e8,
            samples: 2,
            throughput_samples: 1,
        };
        assert!(matches!(s.late(1, &fast), Late::In(_)));
        s.pieces[0].started = Some((0, Instant::now() - Duration::from_millis(100)));
        assert!(matches!(s.late(1, &fast), Late::Copy(0)));
        // Copied once only; a replica does not copy its own piece.
        assert!(matches!(s.late(1, &fast), Late::Nothing));
        s.pieces[0].copied = false;
        assert!(matches!(s.late(0, &fast), Late::Nothing));
    }
}
