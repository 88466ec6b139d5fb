//! Page encoding, the inverse of `Coding::decode` (spec: "Column Description"): elements in
//! memory (native-endian, as decoding gives them) become a page's packed little-endian bytes,
//! split, zigzag- and delta-encoded, or bit-packed. Encodings restart with each page.

use super::super::column::{Coding, Element, Encoding, SWITCH_MEMORY_LEN};

/// Append the packed bytes (`coding.packed_len(n)` of them) of `n` elements to `out`.
/// `elements` holds exactly `n` elements of `coding.kind.element()`.
pub fn pack(coding: &Coding, elements: &[u8], n: usize, out: &mut Vec<u8>) {
    let element = coding
        .kind
        .element()
        .expect("a column type this writer chose");
    debug_assert_eq!(elements.len(), n * element.size());
    let disk = coding.bits as usize / 8;
    let start = out.len();
    out.resize(start + coding.packed_len(n as u64) as usize, 0);
    let page = &mut out[start..];
    match (coding.kind.encoding(), element) {
        (Encoding::Plain, Element::Switch) => {
            for (src, dst) in elements
                .chunks_exact(SWITCH_MEMORY_LEN)
                .zip(page.chunks_exact_mut(12))
            {
                let index = u64::from_ne_bytes(src[..8].try_into().unwrap());
                let tag = u32::from_ne_bytes(src[8..12].try_into().unwrap());
                dst[..8].copy_from_slice(&index.to_le_bytes());
                dst[8..].copy_from_slice(&tag.to_le_bytes());
            }
        }
        (Encoding::Plain, Element::Index) => {
            for (src, dst) in elements.chunks_exact(8).zip(page.chunks_exact_mut(disk)) {
                dst.copy_from_slice(&index(src).to_le_bytes()[..disk]);
            }
        }
        (Encoding::Plain, _) => {
            page.copy_from_slice(elements);
            to_le(disk, page);
        }
        (Encoding::Split, _) => match disk {
            2 => split::<2>(page, n, |i| ne::<2>(elements, i)),
            4 => split::<4>(page, n, |i| ne::<4>(elements, i)),
            8 => split::<8>(page, n, |i| ne::<8>(elements, i)),
            _ => page.copy_from_slice(elements),
        },
        (Encoding::SplitZigzag, _) => match disk {
            2 => split::<2>(page, n, |i| {
                let v = i16::from_ne_bytes(ne::<2>(elements, i));
                ((v << 1) ^ (v >> 15)).to_le_bytes()
            }),
            4 => split::<4>(page, n, |i| {
                let v = i32::from_ne_bytes(ne::<4>(elements, i));
                ((v << 1) ^ (v >> 31)).to_le_bytes()
            }),
            _ => split::<8>(page, n, |i| {
                let v = i64::from_ne_bytes(ne::<8>(elements, i));
                ((v << 1) ^ (v >> 63)).to_le_bytes()
            }),
        },
        (Encoding::SplitDelta, _) => {
            // The first element of the page as it is, the others as the step from the one before.
            let value = |i: usize| index(&elements[i * 8..i * 8 + 8]);
            let delta = |i: usize| match i {
                0 => value(0),
                _ => value(i).wrapping_sub(value(i - 1)),
            };
            match disk {
                4 => split::<4>(page, n, |i| (delta(i) as u32).to_le_bytes()),
                _ => split::<8>(page, n, |i| delta(i).to_le_bytes()),
            }
        }
        (Encoding::Bits, _) => {
            for (i, &b) in elements.iter().enumerate() {
                page[i / 8] |= ((b != 0) as u8) << (i % 8);
            }
        }
        (Encoding::Trunc, _) => {
            let shift = 32 - coding.bits as u32;
            for i in 0..n {
                let bits = u32::from_ne_bytes(ne::<4>(elements, i)) >> shift;
                write_bits(page, i, coding.bits as usize, bits);
            }
        }
        (Encoding::Quant, _) => {
            let (min, max) = coding.range.unwrap_or((0.0, 0.0));
            let quant_max = ((1u64 << coding.bits) - 1) as f64;
            for i in 0..n {
                let v = f32::from_ne_bytes(ne::<4>(elements, i)) as f64;
                let q = ((v - min) / (max - min) * quant_max)
                    .round()
                    .clamp(0.0, quant_max);
                write_bits(page, i, coding.bits as usize, q as u32);
            }
        }
    }
}

/// Element `i` of `W` native-endian bytes.
fn ne<const W: usize>(elements: &[u8], i: usize) -> [u8; W] {
    elements[i * W..(i + 1) * W].try_into().unwrap()
}

fn index(src: &[u8]) -> u64 {
    u64::from_ne_bytes(src.try_into().unwrap())
}

/// The split encoding: byte `b` of element `i` (little-endian, as `value(i)` gives it) goes to
/// `b * n + i`.
fn split<const W: usize>(page: &mut [u8], n: usize, value: impl Fn(usize) -> [u8; W]) {
    let (streams, _) = page.split_at_mut(W * n);
    let mut streams: Vec<&mut [u8]> = streams.chunks_exact_mut(n.max(1)).collect();
    for i in 0..n {
        let v = value(i);
        for (b, stream) in streams.iter_mut().enumerate() {
            stream[i] = v[b];
        }
    }
}

/// Native-endian elements of `width` bytes to little-endian, in place.
fn to_le(width: usize, data: &mut [u8]) {
    if cfg!(target_endian = "big") && width > 1 {
        for e in data.chunks_exact_mut(width) {
            e.reverse();
        }
    }
}

/// Element `i` of `nbits` bits into a little-endian bit stream (value bits least significant first).
fn write_bits(page: &mut [u8], i: usize, nbits: usize, value: u32) {
    let first = i * nbits;
    let start = first / 8;
    let end = (first + nbits).div_ceil(8);
    let mut word = [0u8; 8];
    word[..end - start].copy_from_slice(&page[start..end]);
    let merged = u64::from_le_bytes(word) | ((value as u64) & ((1 << nbits) - 1)) << (first % 8);
    page[start..end].copy_from_slice(&merged.to_le_bytes()[..end - start]);
}

#[cfg(test)]
mod tests {
    use super::super::super::column::ColumnType;
    use super::*;

    /// Pack then decode: the elements come back as they were.
    fn round_trip(coding: Coding, elements: &[u8], n: usize) -> Vec<u8> {
        let mut page = vec![0xAA];
        pack(&coding, elements, n, &mut page);
        assert_eq!(page.len() as u64 - 1, coding.packed_len(n as u64));
        let mut out = vec![0u8; elements.len()];
        coding.decode(&page[1..], n, &mut out);
        out
    }

    fn coding(kind: ColumnType) -> Coding {
        Coding {
            kind,
            bits: kind.valid_bits().unwrap().1,
            range: None,
        }
    }

    /// Bytes of values chosen to hit every byte lane, sign and extreme of a `width`-byte type.
    fn extremes(width: usize, n: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for i in 0..n as u64 {
            let v = match i % 6 {
                0 => 0,
                1 => u64::MAX,
                2 => 1 << (width * 8 - 1),
                3 => (1 << (width * 8 - 1)) - 1,
                _ => i.wrapping_mul(0x9E37_79B9_7F4A_7C15),
            };
            out.extend_from_slice(&v.to_ne_bytes()[..width]);
        }
        out
    }

    #[test]
    fn every_number_column_round_trips() {
        use ColumnType::*;
        for kind in [
            Byte,
            Char,
            Int8,
            UInt8,
            Int16,
            UInt16,
            Int32,
            UInt32,
            Int64,
            UInt64,
            Real16,
            Real32,
            Real64,
            SplitInt16,
            SplitUInt16,
            SplitInt32,
            SplitUInt32,
            SplitInt64,
            SplitUInt64,
            SplitReal16,
            SplitReal32,
            SplitReal64,
        ] {
            let width = kind.element().unwrap().size();
            for n in [0, 1, 7, 1000] {
                let data = extremes(width, n);
                assert_eq!(round_trip(coding(kind), &data, n), data, "{kind:?} {n}");
            }
        }
        // NaN payloads and signed zeros are bits like any other.
        let floats: Vec<u8> = [f64::NAN, -0.0, f64::INFINITY, f64::MIN_POSITIVE, -f64::MAX]
            .iter()
            .flat_map(|f| f.to_ne_bytes())
            .collect();
        assert_eq!(round_trip(coding(SplitReal64), &floats, 5), floats);
    }

    #[test]
    fn zigzag_and_split_lay_bytes_out_as_the_spec_says() {
        let v: Vec<u8> = [-1i16, 1].iter().flat_map(|v| v.to_ne_bytes()).collect();
        let mut page = Vec::new();
        pack(&coding(ColumnType::SplitInt16), &v, 2, &mut page);
        // zigzag: -1 -> 1, 1 -> 2; split: low bytes, then high bytes.
        assert_eq!(page, [1, 2, 0, 0]);
    }

    #[test]
    fn index_columns_round_trip_plain_and_delta() {
        use ColumnType::*;
        let offsets: Vec<u8> = [3i64, 3, 7, 1 << 31, (1 << 31) + 5]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        for kind in [Index32, Index64, SplitIndex32, SplitIndex64] {
            assert_eq!(round_trip(coding(kind), &offsets, 5), offsets, "{kind:?}");
        }
        let mut page = Vec::new();
        pack(&coding(SplitIndex32), &offsets[..24], 3, &mut page);
        assert_eq!(page[..3], [3, 0, 4], "deltas 3, 0, 4 in the low bytes");
    }

    #[test]
    fn bits_switches_and_reduced_precision_floats() {
        let bools = [1u8, 0, 1, 1, 0, 0, 0, 0, 1, 0, 1];
        assert_eq!(round_trip(coding(ColumnType::Bit), &bools, 11), bools);
        let mut switches = Vec::new();
        for (index, tag) in [(0u64, 1u32), (5, 2), (u64::MAX >> 1, 0)] {
            switches.extend_from_slice(&index.to_ne_bytes());
            switches.extend_from_slice(&tag.to_ne_bytes());
            switches.extend_from_slice(&[0; 4]);
        }
        assert_eq!(
            round_trip(coding(ColumnType::Switch), &switches, 3),
            switches
        );

        let values = [1.234_567_9f32, -3.0e-5, 12345.0, f32::MAX];
        let floats: Vec<u8> = values.iter().flat_map(|f| f.to_ne_bytes()).collect();
        for bits in [10, 17, 31] {
            let c = Coding {
                kind: ColumnType::Real32Trunc,
                bits,
                range: None,
            };
            let out = round_trip(c, &floats, 4);
            for (v, o) in values.iter().zip(out.chunks(4)) {
                let mask = !((1u32 << (32 - bits)) - 1);
                assert_eq!(
                    u32::from_ne_bytes(o.try_into().unwrap()),
                    v.to_bits() & mask
                );
            }
        }
        let c = Coding {
            kind: ColumnType::Real32Quant,
            bits: 3,
            range: Some((-1.0, 6.0)),
        };
        let values = [-1.0f32, 6.0, 4.2, 100.0];
        let floats: Vec<u8> = values.iter().flat_map(|f| f.to_ne_bytes()).collect();
        let out = round_trip(c, &floats, 4);
        let back: Vec<f32> = out
            .chunks(4)
            .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(back, [-1.0, 6.0, 4.0, 6.0]);
    }
}
