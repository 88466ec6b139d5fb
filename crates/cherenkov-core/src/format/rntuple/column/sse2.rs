//! Page decodings bound by their output, 16 bytes at a time with SSE2 (every x86-64 has it),
//! streamed past the cache where large: split pages interleaved (a few shuffles per 16 bytes
//! instead of a load and a store per byte, zigzag undone in the registers), bits expanded to
//! bytes. Each returns what it did; elsewhere, and for the rest, the portable way does it all.

#[cfg(not(target_arch = "x86_64"))]
pub use portable::{bits, blocks};
#[cfg(target_arch = "x86_64")]
pub use x86::{bits, blocks};

#[cfg(target_arch = "x86_64")]
mod x86 {
    use crate::format::array::STREAMED_OUTPUT_BYTES;
    use std::arch::x86_64::*;
    use std::mem::MaybeUninit;

    /// Interleave the first whole blocks of 16 elements of `W` streams (each as long as the
    /// others, `out` holding `W` bytes for each of their elements); returns the elements done.
    /// With `stream`, outputs of `STREAMED_OUTPUT_BYTES` and more bypass the cache.
    pub fn blocks<const W: usize, const ZIGZAG: bool>(
        streams: &[&[u8]; W],
        out: &mut [MaybeUninit<u8>],
        stream: bool,
    ) -> usize {
        let n = streams[0].len();
        assert!(streams.iter().all(|s| s.len() == n) && out.len() >= n * W);
        if !stream || n * W < STREAMED_OUTPUT_BYTES || !(out.as_ptr() as usize).is_multiple_of(16) {
            // SAFETY: the lengths are asserted above.
            return unsafe { blocks_with::<W, false, ZIGZAG>(streams, out) };
        }
        // SAFETY: the lengths are asserted above, `out` is 16-byte aligned (checked).
        let done = unsafe { blocks_with::<W, true, ZIGZAG>(streams, out) };
        // SAFETY: SSE2. The streamed stores are ordered before whatever hands `out` on.
        unsafe { _mm_sfence() };
        done
    }

    /// Whole pairs of `page`'s bytes expanded through `table` (a byte's 8 bytes) into `out`
    /// (8 bytes per byte of `page`), streamed, when `out` is large and 16-byte aligned; returns
    /// the bytes of `page` done.
    pub fn bits(page: &[u8], table: &[[u8; 8]; 256], out: &mut [MaybeUninit<u8>]) -> usize {
        if out.len() < STREAMED_OUTPUT_BYTES || !(out.as_ptr() as usize).is_multiple_of(16) {
            return 0;
        }
        let pairs = (out.len() / 16).min(page.len() / 2);
        for (k, pair) in page[..pairs * 2].chunks_exact(2).enumerate() {
            let low = i64::from_ne_bytes(table[pair[0] as usize]);
            let high = i64::from_ne_bytes(table[pair[1] as usize]);
            // SAFETY: SSE2; the 16 bytes at `16 * k` are inside `out` (`k < out.len() / 16`),
            // which is 16-byte aligned (checked).
            unsafe {
                _mm_stream_si128(
                    out.as_mut_ptr().add(16 * k).cast(),
                    _mm_set_epi64x(high, low),
                )
            };
        }
        // SAFETY: SSE2. The streamed stores are ordered before whatever hands `out` on.
        unsafe { _mm_sfence() };
        pairs * 2
    }

    /// A 16-byte store of elements of `W` bytes, zigzag-decoded with `ZIGZAG`: streamed (`out`
    /// 16-byte aligned) or through the cache.
    #[inline(always)]
    unsafe fn store<const W: usize, const STREAM: bool, const ZIGZAG: bool>(
        dst: *mut __m128i,
        value: __m128i,
    ) {
        // SAFETY: SSE2 register operations; the caller's `dst` holds 16 bytes, aligned when
        // streamed.
        unsafe {
            let value = if ZIGZAG { unzigzag::<W>(value) } else { value };
            if STREAM {
                _mm_stream_si128(dst, value)
            } else {
                _mm_storeu_si128(dst, value)
            }
        }
    }

    /// Zigzag decoding of each element of `W` bytes: (v >> 1) ^ -(v & 1).
    #[inline(always)]
    unsafe fn unzigzag<const W: usize>(v: __m128i) -> __m128i {
        // SAFETY: SSE2 register operations only.
        unsafe {
            let zero = _mm_setzero_si128();
            match W {
                2 => _mm_xor_si128(
                    _mm_srli_epi16(v, 1),
                    _mm_sub_epi16(zero, _mm_and_si128(v, _mm_set1_epi16(1))),
                ),
                4 => _mm_xor_si128(
                    _mm_srli_epi32(v, 1),
                    _mm_sub_epi32(zero, _mm_and_si128(v, _mm_set1_epi32(1))),
                ),
                _ => _mm_xor_si128(
                    _mm_srli_epi64(v, 1),
                    _mm_sub_epi64(zero, _mm_and_si128(v, _mm_set1_epi64x(1))),
                ),
            }
        }
    }

    /// `blocks`, with `STREAM` stores, zigzag-decoded with `ZIGZAG`.
    ///
    /// # Safety
    /// Each stream holds `n` bytes and `out` at least `n * W`; streamed, `out` is 16-byte aligned.
    #[inline(always)]
    unsafe fn blocks_with<const W: usize, const STREAM: bool, const ZIGZAG: bool>(
        streams: &[&[u8]; W],
        out: &mut [MaybeUninit<u8>],
    ) -> usize {
        let blocks = streams[0].len() / 16;
        // SAFETY: SSE2 is part of x86-64; every load reads 16 bytes at `k * 16` of a stream of
        // at least `blocks * 16` bytes, every store writes 16 bytes inside the block's `16 * W`
        // bytes of `out` (the caller's promise), at a multiple of 16 from its start.
        unsafe {
            for k in 0..blocks {
                let load = |b: usize| _mm_loadu_si128(streams[b].as_ptr().add(k * 16).cast());
                let dst = out.as_mut_ptr().add(k * 16 * W).cast::<__m128i>();
                match W {
                    2 => {
                        let (a, b) = (load(0), load(1));
                        store::<W, STREAM, ZIGZAG>(dst, _mm_unpacklo_epi8(a, b));
                        store::<W, STREAM, ZIGZAG>(dst.add(1), _mm_unpackhi_epi8(a, b));
                    }
                    4 => {
                        let quads = four(load(0), load(1), load(2), load(3));
                        for (i, q) in quads.into_iter().enumerate() {
                            store::<W, STREAM, ZIGZAG>(dst.add(i), q);
                        }
                    }
                    8 => {
                        let low = four(load(0), load(1), load(2), load(3));
                        let high = four(load(4), load(5), load(6), load(7));
                        for i in 0..4 {
                            store::<W, STREAM, ZIGZAG>(
                                dst.add(2 * i),
                                _mm_unpacklo_epi32(low[i], high[i]),
                            );
                            store::<W, STREAM, ZIGZAG>(
                                dst.add(2 * i + 1),
                                _mm_unpackhi_epi32(low[i], high[i]),
                            );
                        }
                    }
                    _ => return 0,
                }
            }
        }
        blocks * 16
    }

    /// Four streams' 16 elements as four registers of 4 elements of 4 bytes, in order.
    unsafe fn four(a: __m128i, b: __m128i, c: __m128i, d: __m128i) -> [__m128i; 4] {
        // SAFETY: SSE2 register operations only.
        unsafe {
            let (ab_lo, ab_hi) = (_mm_unpacklo_epi8(a, b), _mm_unpackhi_epi8(a, b));
            let (cd_lo, cd_hi) = (_mm_unpacklo_epi8(c, d), _mm_unpackhi_epi8(c, d));
            [
                _mm_unpacklo_epi16(ab_lo, cd_lo),
                _mm_unpackhi_epi16(ab_lo, cd_lo),
                _mm_unpacklo_epi16(ab_hi, cd_hi),
                _mm_unpackhi_epi16(ab_hi, cd_hi),
            ]
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod portable {
    pub fn bits(_: &[u8], _: &[[u8; 8]; 256], _: &mut [std::mem::MaybeUninit<u8>]) -> usize {
        0
    }

    pub fn blocks<const W: usize, const ZIGZAG: bool>(
        _: &[&[u8]; W],
        _: &mut [std::mem::MaybeUninit<u8>],
        _: bool,
    ) -> usize {
        0
    }
}
