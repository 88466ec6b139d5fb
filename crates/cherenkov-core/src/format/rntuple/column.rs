//! Column types and page decoding (spec: "Column Description"). Pages hold little-endian elements,
//! possibly split (all first bytes, then all second bytes, ...), zigzag-encoded (signed integers)
//! or delta-encoded (index columns), bit-packed (Bit, Real32Trunc, Real32Quant). Every encoding
//! restarts with each page, so pages decode independently (and in parallel).

use std::mem::MaybeUninit;

use crate::format::array::DType;

mod sse2;

/// The column types, each once, with its code from the specification's table ("Column
/// Description"): the enum and `ColumnType::from_code`.
macro_rules! column_types {
    ($($name:ident = $code:literal,)*) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum ColumnType {
            $($name,)*
            /// A type of a later format version: its fields cannot be read.
            Unknown(u16),
        }

        impl ColumnType {
            pub fn from_code(code: u16) -> ColumnType {
                match code {
                    $($code => ColumnType::$name,)*
                    other => ColumnType::Unknown(other),
                }
            }

            pub fn code(self) -> u16 {
                match self {
                    $(ColumnType::$name => $code,)*
                    ColumnType::Unknown(code) => code,
                }
            }
        }
    };
}

column_types! {
    Bit = 0x00,
    Byte = 0x01,
    Char = 0x02,
    Int8 = 0x03,
    UInt8 = 0x04,
    Int16 = 0x05,
    UInt16 = 0x06,
    Int32 = 0x07,
    UInt32 = 0x08,
    Int64 = 0x09,
    UInt64 = 0x0A,
    Real16 = 0x0B,
    Real32 = 0x0C,
    Real64 = 0x0D,
    Index32 = 0x0E,
    Index64 = 0x0F,
    Switch = 0x10,
    SplitInt16 = 0x11,
    SplitUInt16 = 0x12,
    SplitInt32 = 0x13,
    SplitUInt32 = 0x14,
    SplitInt64 = 0x15,
    SplitUInt64 = 0x16,
    SplitReal16 = 0x17,
    SplitReal32 = 0x18,
    SplitReal64 = 0x19,
    SplitIndex32 = 0x1A,
    SplitIndex64 = 0x1B,
    Real32Trunc = 0x1C,
    Real32Quant = 0x1D,
}

/// What a column's elements become in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Element {
    Number(DType),
    /// Collection offsets relative to the cluster, as `i64`.
    Index,
    /// A variant's (index within the cluster, tag): `i64` index, `u32` tag, 4 bytes of padding.
    Switch,
}

impl Element {
    pub fn size(self) -> usize {
        match self {
            Element::Number(d) => d.size(),
            Element::Index => 8,
            Element::Switch => SWITCH_MEMORY_LEN,
        }
    }
}

pub const SWITCH_MEMORY_LEN: usize = 16;

/// How elements are laid out in a page.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Encoding {
    Plain,
    Split,
    SplitZigzag,
    SplitDelta,
    Bits,
    Trunc,
    Quant,
}

impl ColumnType {
    /// The spec's name ("SplitReal32").
    pub fn name(self) -> String {
        match self {
            ColumnType::Unknown(code) => format!("unknown column type {code:#04x}"),
            other => format!("{other:?}"),
        }
    }

    /// Bits on storage the spec allows (most types have exactly one width).
    pub fn valid_bits(self) -> Option<(u16, u16)> {
        use ColumnType::*;
        let fixed = match self {
            Bit => 1,
            Byte | Char | Int8 | UInt8 => 8,
            Int16 | UInt16 | Real16 | SplitInt16 | SplitUInt16 | SplitReal16 => 16,
            Int32 | UInt32 | Real32 | Index32 | SplitInt32 | SplitUInt32 | SplitReal32
            | SplitIndex32 => 32,
            Int64 | UInt64 | Real64 | Index64 | SplitInt64 | SplitUInt64 | SplitReal64
            | SplitIndex64 => 64,
            Switch => 96,
            Real32Trunc => return Some((10, 31)),
            Real32Quant => return Some((1, 32)),
            Unknown(_) => return None,
        };
        Some((fixed, fixed))
    }

    pub fn element(self) -> Option<Element> {
        use ColumnType::*;
        Some(match self {
            Bit => Element::Number(DType::Bool),
            Byte | Char | UInt8 => Element::Number(DType::U8),
            Int8 => Element::Number(DType::I8),
            Int16 | SplitInt16 => Element::Number(DType::I16),
            UInt16 | SplitUInt16 => Element::Number(DType::U16),
            Int32 | SplitInt32 => Element::Number(DType::I32),
            UInt32 | SplitUInt32 => Element::Number(DType::U32),
            Int64 | SplitInt64 => Element::Number(DType::I64),
            UInt64 | SplitUInt64 => Element::Number(DType::U64),
            Real16 | SplitReal16 => Element::Number(DType::F16),
            Real32 | SplitReal32 | Real32Trunc | Real32Quant => Element::Number(DType::F32),
            Real64 | SplitReal64 => Element::Number(DType::F64),
            Index32 | Index64 | SplitIndex32 | SplitIndex64 => Element::Index,
            Switch => Element::Switch,
            Unknown(_) => return None,
        })
    }

    pub fn is_index(self) -> bool {
        self.element() == Some(Element::Index)
    }

    pub(super) fn encoding(self) -> Encoding {
        use ColumnType::*;
        match self {
            SplitUInt16 | SplitUInt32 | SplitUInt64 | SplitReal16 | SplitReal32 | SplitReal64 => {
                Encoding::Split
            }
            SplitInt16 | SplitInt32 | SplitInt64 => Encoding::SplitZigzag,
            SplitIndex32 | SplitIndex64 => Encoding::SplitDelta,
            Bit => Encoding::Bits,
            Real32Trunc => Encoding::Trunc,
            Real32Quant => Encoding::Quant,
            _ => Encoding::Plain,
        }
    }
}

/// A column as its pages need it decoded.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Coding {
    pub kind: ColumnType,
    pub bits: u16,
    /// The value range of Real32Quant columns.
    pub range: Option<(f64, f64)>,
}

impl Coding {
    /// Bytes of `n` elements packed in a page (before compression).
    pub fn packed_len(&self, n: u64) -> u64 {
        (n * self.bits as u64).div_ceil(8)
    }

    /// Decode the `n` elements of one uncompressed page into `out`, which holds exactly `n`
    /// elements of `self.kind.element()` (native-endian). The caller checks `page.len()` against
    /// `packed_len(n)`.
    pub fn decode(&self, page: &[u8], n: usize, out: &mut [u8]) {
        // SAFETY: `MaybeUninit<u8>` has `u8`'s layout, and `decode_into` writes only
        // initialized bytes, so `out` stays initialized.
        let out = unsafe { &mut *(out as *mut [u8] as *mut [MaybeUninit<u8>]) };
        self.decode_into(page, n, out);
    }

    /// `decode` into memory not written yet (a read's output, left unzeroed): every encoding
    /// writes each byte of `out` once, none reads it.
    pub fn decode_into(&self, page: &[u8], n: usize, out: &mut [MaybeUninit<u8>]) {
        let element = self.kind.element().expect("decodable column");
        debug_assert_eq!(page.len() as u64, self.packed_len(n as u64));
        debug_assert_eq!(out.len(), n * element.size());
        let disk = self.bits as usize / 8;
        match (self.kind.encoding(), element) {
            (Encoding::Plain, Element::Switch) => {
                for (src, dst) in page
                    .chunks_exact(12)
                    .zip(out.chunks_exact_mut(SWITCH_MEMORY_LEN))
                {
                    let index = u64::from_le_bytes(src[..8].try_into().unwrap());
                    let tag = u32::from_le_bytes(src[8..].try_into().unwrap());
                    let mut memory = [0u8; SWITCH_MEMORY_LEN];
                    memory[..8].copy_from_slice(&index.to_ne_bytes());
                    memory[8..12].copy_from_slice(&tag.to_ne_bytes());
                    put(dst, memory);
                }
            }
            (Encoding::Plain, Element::Index) => widen_index(page, disk, out),
            (Encoding::Plain, _) => to_native(disk, copy_into(page, out)),
            // Streamed where large: the output is final. Delta pages are read again at once,
            // so they stay in the cache.
            (Encoding::Split, _) => to_native(disk, unsplit(page, disk, n, out, true, false)),
            // Zigzag undone as the elements are interleaved: one pass over the output.
            (Encoding::SplitZigzag, _) => {
                unsplit(page, disk, n, out, true, true);
            }
            // Only index columns are delta-encoded (`ColumnType::encoding`).
            // Un-split into the end of `out`, then summed into place: no scratch buffer.
            (Encoding::SplitDelta, _) => {
                let raw_at = out.len() - page.len();
                unsplit(page, disk, n, &mut out[raw_at..], false, false);
                match disk {
                    4 => sum_deltas_in_place(out, raw_at, 4),
                    8 => sum_deltas_in_place(out, raw_at, 8),
                    _ => sum_deltas_in_place(out, raw_at, disk),
                }
            }
            (Encoding::Bits, _) => {
                // A byte's 8 elements at once; the last byte may hold fewer.
                let (whole, last) = out.split_at_mut(n / 8 * 8);
                let done = sse2::bits(&page[..n / 8], &BIT_BYTES, whole);
                let whole = &mut whole[done * 8..];
                for (dst, &byte) in whole.chunks_exact_mut(8).zip(&page[done..]) {
                    put(dst, BIT_BYTES[byte as usize]);
                }
                if let Some(&byte) = page.get(n / 8).filter(|_| !last.is_empty()) {
                    for (dst, &bit) in last.iter_mut().zip(&BIT_BYTES[byte as usize]) {
                        dst.write(bit);
                    }
                }
            }
            (Encoding::Trunc, _) => {
                let shift = 32 - self.bits as u32;
                for (i, dst) in out.chunks_exact_mut(4).enumerate() {
                    let bits = read_bits(page, i, self.bits as usize) << shift;
                    put(dst, bits.to_ne_bytes());
                }
            }
            (Encoding::Quant, _) => {
                let (min, max) = self.range.unwrap_or((0.0, 0.0));
                let quant_max = ((1u64 << self.bits) - 1) as f64;
                let scale = (max - min) / quant_max;
                for (i, dst) in out.chunks_exact_mut(4).enumerate() {
                    let q = read_bits(page, i, self.bits as usize);
                    let value = (q as f64 * scale + min) as f32;
                    put(dst, value.to_ne_bytes());
                }
            }
        }
    }
}

/// Each byte's 8 bits as 8 bytes of 0 or 1, least significant bit first (Bit columns).
const BIT_BYTES: [[u8; 8]; 256] = {
    let mut table = [[0u8; 8]; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut bit = 0;
        while bit < 8 {
            table[byte][bit] = ((byte >> bit) & 1) as u8;
            bit += 1;
        }
        byte += 1;
    }
    table
};

/// `bytes` written into `dst` (of their length).
#[inline(always)]
fn put<const N: usize>(dst: &mut [MaybeUninit<u8>], bytes: [u8; N]) {
    for (d, b) in dst[..N].iter_mut().zip(bytes) {
        d.write(b);
    }
}

/// `out` as the bytes it now holds.
///
/// # Safety
/// Every byte of `out` was written.
unsafe fn assume_written(out: &mut [MaybeUninit<u8>]) -> &mut [u8] {
    // SAFETY: `MaybeUninit<u8>` has `u8`'s layout; every byte is initialized (the caller's promise).
    unsafe { &mut *(out as *mut [MaybeUninit<u8>] as *mut [u8]) }
}

/// `page` copied into `out` (of its length).
fn copy_into<'a>(page: &[u8], out: &'a mut [MaybeUninit<u8>]) -> &'a mut [u8] {
    assert_eq!(page.len(), out.len());
    // SAFETY: `out` holds `page.len()` bytes (asserted) and does not overlap `page`; then every
    // byte of it is written.
    unsafe {
        std::ptr::copy_nonoverlapping(page.as_ptr(), out.as_mut_ptr().cast(), page.len());
        assume_written(out)
    }
}

/// Element `i` of `nbits` bits from a little-endian bit stream (value bits least significant first).
fn read_bits(page: &[u8], i: usize, nbits: usize) -> u32 {
    let first = i * nbits;
    let mut word = [0u8; 8];
    let start = first / 8;
    let end = (first + nbits).div_ceil(8).min(page.len());
    word[..end - start].copy_from_slice(&page[start..end]);
    let bits = u64::from_le_bytes(word) >> (first % 8);
    (bits & ((1u64 << nbits) - 1)) as u32
}

/// Undo the split encoding: byte `b` of element `i` is at `b * n + i`.
/// The `n` elements of `width` bytes of a split page interleaved into `out` (of the page's
/// length), every byte of it written; with `stream`, large outputs bypass the cache (see
/// `STREAMED_OUTPUT_BYTES`): for outputs not read again soon. With `zigzag`, the elements
/// (of 2, 4 or 8 bytes) come out zigzag-decoded, in native order.
fn unsplit<'a>(
    page: &[u8],
    width: usize,
    n: usize,
    out: &'a mut [MaybeUninit<u8>],
    stream: bool,
    zigzag: bool,
) -> &'a mut [u8] {
    match (width, zigzag) {
        (2, false) => unsplit_fixed::<2, false>(page, n, out, stream),
        (4, false) => unsplit_fixed::<4, false>(page, n, out, stream),
        (8, false) => unsplit_fixed::<8, false>(page, n, out, stream),
        (2, true) => unsplit_fixed::<2, true>(page, n, out, stream),
        (4, true) => unsplit_fixed::<4, true>(page, n, out, stream),
        (8, true) => unsplit_fixed::<8, true>(page, n, out, stream),
        _ => return copy_into(page, out),
    }
    // SAFETY: `unsplit_fixed` wrote `n * W` bytes, all of `out`.
    unsafe { assume_written(out) }
}

fn unsplit_fixed<const W: usize, const ZIGZAG: bool>(
    page: &[u8],
    n: usize,
    out: &mut [MaybeUninit<u8>],
    stream: bool,
) {
    assert_eq!(out.len(), n * W);
    let streams: [&[u8]; W] = std::array::from_fn(|b| &page[b * n..(b + 1) * n]);
    let done = sse2::blocks::<W, ZIGZAG>(&streams, out, stream);
    for i in done..n {
        let mut element: [u8; W] = std::array::from_fn(|b| streams[b][i]);
        if ZIGZAG {
            element = unzigzag(element);
        }
        for (dst, byte) in out[i * W..(i + 1) * W].iter_mut().zip(element) {
            dst.write(byte);
        }
    }
}

/// A zigzag-encoded little-endian integer of `W` (at most 8) bytes decoded, in native order:
/// 2x -> x, 2x + 1 -> -(x + 1).
fn unzigzag<const W: usize>(le: [u8; W]) -> [u8; W] {
    let mut word = [0u8; 8];
    word[..W].copy_from_slice(&le);
    let v = u64::from_le_bytes(word);
    // The low `W` bytes of the 64-bit result are the `W`-byte one's.
    let x = (v >> 1) ^ (v & 1).wrapping_neg();
    if cfg!(target_endian = "big") {
        std::array::from_fn(|b| x.to_be_bytes()[8 - W + b])
    } else {
        std::array::from_fn(|b| x.to_le_bytes()[b])
    }
}

/// Little-endian elements of `width` bytes put in native order, in place.
fn to_native(width: usize, data: &mut [u8]) {
    if cfg!(target_endian = "big") && width > 1 {
        for e in data.chunks_exact_mut(width) {
            e.reverse();
        }
    }
}

/// Index elements of `width` bytes (little-endian) into `i64`.
fn widen_index(page: &[u8], width: usize, out: &mut [MaybeUninit<u8>]) {
    // Inlined with the common widths as constants: a copy of a width known only at run time
    // was a call per index.
    match width {
        4 => widen_index_with(page, 4, out),
        8 => widen_index_with(page, 8, out),
        _ => widen_index_with(page, width, out),
    }
}

#[inline(always)]
fn widen_index_with(page: &[u8], width: usize, out: &mut [MaybeUninit<u8>]) {
    for (src, dst) in page.chunks_exact(width).zip(out.chunks_exact_mut(8)) {
        let mut word = [0u8; 8];
        word[..width].copy_from_slice(src);
        put(dst, (u64::from_le_bytes(word) as i64).to_ne_bytes());
    }
}

/// Delta-encoded index elements of `width` (at most 8) bytes, little-endian, written from
/// `raw_at` to the end of `out`, replaced by their running sums as `i64`s filling `out`.
#[inline(always)]
fn sum_deltas_in_place(out: &mut [MaybeUninit<u8>], raw_at: usize, width: usize) {
    let n = (out.len() - raw_at) / width;
    assert!(width <= 8 && raw_at + n * width == out.len() && n * 8 == out.len());
    let base = out.as_mut_ptr().cast::<u8>();
    let mut sum = 0u64;
    for i in 0..n {
        let mut word = [0u8; 8];
        // SAFETY: element `i` is at `raw_at + width * i`, inside `out` (asserted), written by the
        // caller; the sums written so far cover `out[..8 * i]`, which ends at or before it
        // (`raw_at = (8 - width) * n >= (8 - width) * i`), and sum `i` is written after it is read.
        unsafe {
            std::ptr::copy_nonoverlapping(base.add(raw_at + width * i), word.as_mut_ptr(), width);
            sum = sum.wrapping_add(u64::from_le_bytes(word));
            std::ptr::write_unaligned(
                base.add(8 * i).cast::<[u8; 8]>(),
                (sum as i64).to_ne_bytes(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn coding(kind: ColumnType) -> Coding {
        let bits = kind.valid_bits().unwrap().0;
        Coding {
            kind,
            bits,
            range: None,
        }
    }

    fn decode(c: &Coding, page: &[u8], n: usize) -> Vec<u8> {
        let mut out = vec![0u8; n * c.kind.element().unwrap().size()];
        c.decode(page, n, &mut out);
        out
    }

    fn split<const W: usize>(values: &[[u8; W]]) -> Vec<u8> {
        (0..W)
            .flat_map(|b| values.iter().map(move |v| v[b]))
            .collect()
    }

    #[test]
    fn split_zigzag_and_delta_pages() {
        let ints = [0i32, -1, 1, -300, 70000];
        let zz: Vec<[u8; 4]> = ints
            .iter()
            .map(|&v| ((v << 1) ^ (v >> 31)).to_le_bytes())
            .collect();
        let out = decode(&coding(ColumnType::SplitInt32), &split(&zz), 5);
        let back: Vec<i32> = out
            .chunks(4)
            .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(back, ints);

        let floats = [1.5f64, -2.25, 1e300];
        let page = split(&floats.map(f64::to_le_bytes));
        let out = decode(&coding(ColumnType::SplitReal64), &page, 3);
        assert_eq!(
            out,
            floats
                .iter()
                .flat_map(|f| f.to_ne_bytes())
                .collect::<Vec<_>>()
        );

        // Offsets 3, 3, 7 stored as deltas 3, 0, 4.
        let page = split(&[3u32, 0, 4].map(u32::to_le_bytes));
        let out = decode(&coding(ColumnType::SplitIndex32), &page, 3);
        let back: Vec<i64> = out
            .chunks(8)
            .map(|c| i64::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(back, [3, 3, 7]);
    }

    #[test]
    fn unsplitting_matches_the_definition_at_every_length() {
        for width in [2usize, 4, 8] {
            for n in [0usize, 1, 15, 16, 17, 31, 32, 33, 100, 1000] {
                let page: Vec<u8> = (0..n * width).map(|i| (i * 7 + i / 3) as u8).collect();
                let mut out = vec![MaybeUninit::new(0u8); n * width];
                let out = unsplit(&page, width, n, &mut out, true, false);
                for i in 0..n {
                    for b in 0..width {
                        assert_eq!(out[i * width + b], page[b * n + i], "width {width} n {n}");
                    }
                }
            }
        }
    }

    #[test]
    fn delta_pages_of_both_widths_and_every_length() {
        for n in [0usize, 1, 2, 15, 16, 17, 9_001] {
            let deltas: Vec<u64> = (0..n as u64).map(|i| (i * 7919) % 1000).collect();
            let sums: Vec<i64> = deltas
                .iter()
                .scan(0i64, |s, &d| {
                    *s += d as i64;
                    Some(*s)
                })
                .collect();
            let pages = [
                (
                    ColumnType::SplitIndex32,
                    split(
                        &deltas
                            .iter()
                            .map(|&d| (d as u32).to_le_bytes())
                            .collect::<Vec<_>>(),
                    ),
                ),
                (
                    ColumnType::SplitIndex64,
                    split(&deltas.iter().map(|&d| d.to_le_bytes()).collect::<Vec<_>>()),
                ),
            ];
            for (kind, page) in pages {
                let out = decode(&coding(kind), &page, n);
                let back: Vec<i64> = out
                    .chunks(8)
                    .map(|c| i64::from_ne_bytes(c.try_into().unwrap()))
                    .collect();
                assert_eq!(back, sums, "{kind:?} n {n}");
            }
        }
    }

    #[test]
    fn zigzag_pages_of_every_width_and_length() {
        // Lengths around the 16-element blocks, and large enough to be streamed.
        for n in [0usize, 1, 15, 16, 17, 33, 9_001] {
            let values: Vec<i64> = (0..n as i64)
                .map(|i| (i * 7919 - 4000) * if i % 3 == 0 { -1 } else { 1 })
                .collect();
            macro_rules! check {
                ($t:ty, $u:ty, $kind:expr) => {
                    let vals: Vec<$t> = values.iter().map(|&v| v as $t).collect();
                    let bits = <$t>::BITS - 1;
                    let zz: Vec<[u8; std::mem::size_of::<$t>()]> = vals
                        .iter()
                        .map(|&v| (((v << 1) ^ (v >> bits)) as $u).to_le_bytes())
                        .collect();
                    let out = decode(&coding($kind), &split(&zz), n);
                    let back: Vec<$t> = out
                        .chunks(std::mem::size_of::<$t>())
                        .map(|c| <$t>::from_ne_bytes(c.try_into().unwrap()))
                        .collect();
                    assert_eq!(back, vals, "{} n {n}", stringify!($t));
                };
            }
            check!(i16, u16, ColumnType::SplitInt16);
            check!(i32, u32, ColumnType::SplitInt32);
            check!(i64, u64, ColumnType::SplitInt64);
        }
    }

    #[test]
    fn large_pages_unsplit_alike_at_any_alignment() {
        // Large enough for streamed stores where `out` is 16-byte aligned, cached ones elsewhere.
        for width in [2usize, 4, 8] {
            let n = 9_001;
            let page: Vec<u8> = (0..n * width).map(|i| (i * 13 + i / 5) as u8).collect();
            let mut backing = vec![0u128; (n * width).div_ceil(16) + 1];
            let bytes = backing.len() * 16;
            // SAFETY: the u128s' memory as bytes, written as bytes only.
            let all = unsafe {
                std::slice::from_raw_parts_mut(
                    backing.as_mut_ptr().cast::<MaybeUninit<u8>>(),
                    bytes,
                )
            };
            for (shift, stream) in [(0usize, true), (8, true), (0, false)] {
                let out = unsplit(
                    &page,
                    width,
                    n,
                    &mut all[shift..shift + n * width],
                    stream,
                    false,
                );
                for i in 0..n {
                    for b in 0..width {
                        assert_eq!(
                            out[i * width + b],
                            page[b * n + i],
                            "width {width} shift {shift}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn bits_are_least_significant_first() {
        let out = decode(&coding(ColumnType::Bit), &[0b0000_0101, 0b1], 9);
        assert_eq!(out, [1, 0, 1, 0, 0, 0, 0, 0, 1]);
        // Every length, into memory holding other bytes: each element written, none beyond.
        let page: Vec<u8> = (0..40u32).map(|i| (i * 37 + 11) as u8).collect();
        for n in 0..=page.len() * 8 {
            let mut out = vec![0xAAu8; n + 3];
            coding(ColumnType::Bit).decode(&page[..n.div_ceil(8)], n, &mut out[..n]);
            for (i, &o) in out[..n].iter().enumerate() {
                assert_eq!(o, (page[i / 8] >> (i % 8)) & 1, "n {n} element {i}");
            }
            assert_eq!(out[n..], [0xAA; 3]);
        }
    }

    #[test]
    fn large_bit_pages_expand_alike_at_any_alignment() {
        // Large enough to be streamed where `out` is 16-byte aligned, expanded portably elsewhere.
        let n = 40_003usize;
        let page: Vec<u8> = (0..n.div_ceil(8)).map(|i| (i * 37 + i / 7) as u8).collect();
        let mut backing = vec![0u128; n / 16 + 3];
        // SAFETY: the u128s' memory as bytes, written as bytes only.
        let all = unsafe {
            std::slice::from_raw_parts_mut(backing.as_mut_ptr().cast::<u8>(), backing.len() * 16)
        };
        for shift in [0usize, 1, 16] {
            all.fill(0xAA);
            coding(ColumnType::Bit).decode(&page, n, &mut all[shift..shift + n]);
            for (i, &o) in all[shift..shift + n].iter().enumerate() {
                assert_eq!(o, (page[i / 8] >> (i % 8)) & 1, "shift {shift} element {i}");
            }
            assert_eq!(
                all[shift + n],
                0xAA,
                "shift {shift}: nothing written beyond"
            );
        }
    }

    #[test]
    fn truncated_and_quantized_reals() {
        // 12-bit truncated floats keep the top 12 bits of the float's bit pattern.
        let values = [1.234_567_9f32, -3.0e-5, 12345.0];
        let mut packed = vec![0u8; 5];
        for (i, v) in values.iter().enumerate() {
            let top = (v.to_bits() >> 20) as u64;
            for b in 0..12 {
                if top >> b & 1 == 1 {
                    packed[(i * 12 + b) / 8] |= 1 << ((i * 12 + b) % 8);
                }
            }
        }
        let c = Coding {
            kind: ColumnType::Real32Trunc,
            bits: 12,
            range: None,
        };
        let out = decode(&c, &packed, 3);
        for (v, o) in values.iter().zip(out.chunks(4)) {
            let o = f32::from_ne_bytes(o.try_into().unwrap());
            assert_eq!(o.to_bits(), v.to_bits() & !0xFFFFF);
        }
        // 3-bit quantized values 0, 7, 5 over [-1, 6]: steps of 1.
        let c = Coding {
            kind: ColumnType::Real32Quant,
            bits: 3,
            range: Some((-1.0, 6.0)),
        };
        let packed = [0b0111_1000u8, 0b0000_0001];
        let out = decode(&c, &packed, 3);
        let back: Vec<f32> = out
            .chunks(4)
            .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(back, [-1.0, 6.0, 4.0]);
    }

    #[test]
    fn switch_elements() {
        let mut page = 5u64.to_le_bytes().to_vec();
        page.extend_from_slice(&2u32.to_le_bytes());
        let out = decode(&coding(ColumnType::Switch), &page, 1);
        assert_eq!(i64::from_ne_bytes(out[..8].try_into().unwrap()), 5);
        assert_eq!(u32::from_ne_bytes(out[8..12].try_into().unwrap()), 2);
    }

    #[test]
    fn codes_map_to_types() {
        assert_eq!(ColumnType::from_code(0x1B), ColumnType::SplitIndex64);
        assert_eq!(ColumnType::from_code(0x1D), ColumnType::Real32Quant);
        assert_eq!(ColumnType::from_code(0x30), ColumnType::Unknown(0x30));
        assert_eq!(ColumnType::Unknown(0x30).element(), None);
    }
}
