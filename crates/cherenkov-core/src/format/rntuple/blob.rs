//! Payloads larger than the anchor's maximum key size (spec: "Anchor schema", `Max Key Size`):
//! ROOT writes them as several keys. The first holds `max_key_size` bytes, the last ones of which
//! are the little-endian offsets of the other chunks; those follow, each at most `max_key_size`.

use crate::error::{Error, Result};

const OFFSET_LEN: u64 = 8;

/// Whether a payload of `nbytes` is split (ROOT never splits when `max_key_size` is 0).
pub fn is_split(nbytes: u64, max_key_size: u64) -> bool {
    max_key_size > 0 && nbytes > max_key_size
}

/// How many chunks a payload of `nbytes` takes (ROOT's `ComputeNumChunks`): the first chunk
/// also holds the offsets of the others.
fn chunks(nbytes: u64, max_key_size: u64) -> u64 {
    let mut n = nbytes.div_ceil(max_key_size);
    let tail = nbytes % max_key_size;
    let spare = if tail > 0 { max_key_size - tail } else { 0 };
    if (n - 1).saturating_mul(OFFSET_LEN) > spare {
        n += 1;
    }
    n
}

/// The other chunks' (offset, length), read from the first chunk (`max_key_size` bytes) of a
/// payload of `nbytes`.
pub fn other_chunks(
    first: &[u8],
    nbytes: u64,
    max_key_size: u64,
    origin: &str,
) -> Result<Vec<(u64, u64)>> {
    let n = chunks(nbytes, max_key_size);
    let offsets_len = (n - 1).saturating_mul(OFFSET_LEN);
    if first.len() as u64 != max_key_size || offsets_len > max_key_size {
        return Err(Error::format(
            origin.to_string(),
            format!(
                "a first chunk of {max_key_size} bytes holding {} chunk offsets, found {} bytes",
                n - 1,
                first.len()
            ),
        ));
    }
    let payload_first = max_key_size - offsets_len;
    let mut left = nbytes - payload_first;
    let offsets = &first[payload_first as usize..];
    Ok(offsets
        .chunks_exact(OFFSET_LEN as usize)
        .map(|o| {
            let len = left.min(max_key_size);
            left -= len;
            (u64::from_le_bytes(o.try_into().unwrap()), len)
        })
        .filter(|&(_, len)| len > 0)
        .collect())
}

/// The payload from its first chunk and the others, in order.
pub fn join(first: &[u8], others: &[&[u8]], nbytes: u64, max_key_size: u64) -> Vec<u8> {
    let offsets_len = (chunks(nbytes, max_key_size) - 1) * OFFSET_LEN;
    let mut out = Vec::with_capacity(nbytes as usize);
    out.extend_from_slice(&first[..(max_key_size - offsets_len) as usize]);
    for o in others {
        out.extend_from_slice(o);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Split `payload` as ROOT's writer does, the chunks placed at the given offsets.
    fn write_split(payload: &[u8], max: u64, at: &[u64]) -> (Vec<u8>, Vec<Vec<u8>>) {
        let n = chunks(payload.len() as u64, max);
        let head = (max - (n - 1) * OFFSET_LEN) as usize;
        let mut first = payload[..head].to_vec();
        for o in &at[..(n - 1) as usize] {
            first.extend_from_slice(&o.to_le_bytes());
        }
        let others = payload[head..]
            .chunks(max as usize)
            .map(<[u8]>::to_vec)
            .collect();
        (first, others)
    }

    #[test]
    fn split_payloads_rejoin() {
        let payload: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
        for max in [100u64, 333, 999] {
            let at: Vec<u64> = (0..20).map(|i| 5000 + i * 1000).collect();
            let (first, others) = write_split(&payload, max, &at);
            let ranges = other_chunks(&first, 1000, max, "t").unwrap();
            assert_eq!(ranges.len(), others.len());
            for ((offset, len), chunk) in ranges.iter().zip(&others) {
                assert_eq!(*len as usize, chunk.len());
                assert!(at.contains(offset));
            }
            let refs: Vec<&[u8]> = others.iter().map(Vec::as_slice).collect();
            assert_eq!(join(&first, &refs, 1000, max), payload);
        }
        assert!(!is_split(1000, 0) && !is_split(1000, 1000) && is_split(1001, 1000));
        assert!(other_chunks(&[0u8; 10], 1000, 100, "t").is_err());
    }
}
