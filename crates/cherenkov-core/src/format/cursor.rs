//! A bounds-checked reader over a byte slice: big-endian for ROOT's classic objects, little-endian
//! (`*_le`) for RNTuple's envelopes. Every read names what it expected, so a malformed file gives
//! an error with its offset instead of a panic.

use crate::error::{Error, Result};

#[derive(Clone)]
pub struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
    /// What `data` is, for error messages: "file" or "object 'Events' (TTree, key at 1234)".
    origin: &'a str,
    /// Offset of `data[0]` within `origin`.
    base: u64,
}

impl<'a> Cursor<'a> {
    pub fn new(data: &'a [u8], origin: &'a str, base: u64) -> Self {
        Self {
            data,
            pos: 0,
            origin,
            base,
        }
    }

    pub fn pos(&self) -> usize {
        self.pos
    }
    pub fn len(&self) -> usize {
        self.data.len()
    }
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }
    pub fn data(&self) -> &'a [u8] {
        self.data
    }
    pub fn origin(&self) -> &'a str {
        self.origin
    }

    /// An error at the current position.
    pub fn error(&self, expected: impl Into<String>) -> Error {
        self.error_at(self.pos, expected)
    }

    pub fn error_at(&self, pos: usize, expected: impl Into<String>) -> Error {
        Error::format(
            format!("{} byte {}", self.origin, self.base + pos as u64),
            expected,
        )
    }

    #[inline]
    pub fn seek(&mut self, pos: usize) -> Result<()> {
        if pos > self.data.len() {
            return Err(self.outside(pos));
        }
        self.pos = pos;
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn outside(&self, pos: usize) -> Error {
        self.error(format!(
            "a position {pos} inside the {} bytes available",
            self.data.len()
        ))
    }

    pub fn skip(&mut self, n: usize) -> Result<()> {
        self.seek(
            self.pos
                .checked_add(n)
                .ok_or_else(|| self.error("a sane length"))?,
        )
    }

    // Inlined, with the error made apart: metadata parsing reads millions of numbers (a
    // thousand NanoAOD trees of 947 branches each in a merge).
    #[inline]
    pub fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.short(n, what));
        }
        let out = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    #[cold]
    #[inline(never)]
    fn short(&self, n: usize, what: &str) -> Error {
        self.error(format!(
            "{what} ({n} bytes), but only {} bytes remain",
            self.remaining()
        ))
    }

    #[inline]
    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        Ok(self.bytes(N, what)?.try_into().expect("length checked"))
    }

    #[inline]
    pub fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }
    #[inline]
    pub fn u16(&mut self, what: &str) -> Result<u16> {
        Ok(u16::from_be_bytes(self.array(what)?))
    }
    #[inline]
    pub fn i16(&mut self, what: &str) -> Result<i16> {
        Ok(i16::from_be_bytes(self.array(what)?))
    }
    #[inline]
    pub fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_be_bytes(self.array(what)?))
    }
    #[inline]
    pub fn i32(&mut self, what: &str) -> Result<i32> {
        Ok(i32::from_be_bytes(self.array(what)?))
    }
    #[inline]
    pub fn i64(&mut self, what: &str) -> Result<i64> {
        Ok(i64::from_be_bytes(self.array(what)?))
    }
    #[inline]
    pub fn f32(&mut self, what: &str) -> Result<f32> {
        Ok(f32::from_be_bytes(self.array(what)?))
    }
    #[inline]
    pub fn f64(&mut self, what: &str) -> Result<f64> {
        Ok(f64::from_be_bytes(self.array(what)?))
    }
    pub fn bool(&mut self, what: &str) -> Result<bool> {
        Ok(self.u8(what)? != 0)
    }
    #[inline]
    pub fn u16_le(&mut self, what: &str) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }
    #[inline]
    pub fn u32_le(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }
    #[inline]
    pub fn i32_le(&mut self, what: &str) -> Result<i32> {
        Ok(i32::from_le_bytes(self.array(what)?))
    }
    #[inline]
    pub fn u64_le(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }
    #[inline]
    pub fn i64_le(&mut self, what: &str) -> Result<i64> {
        Ok(i64::from_le_bytes(self.array(what)?))
    }
    #[inline]
    pub fn f64_le(&mut self, what: &str) -> Result<f64> {
        Ok(f64::from_le_bytes(self.array(what)?))
    }

    /// The next `n` bytes as a cursor of their own (offsets in errors stay those of the whole),
    /// moving past them.
    pub fn take(&mut self, n: usize, what: &str) -> Result<Cursor<'a>> {
        let at = self.pos;
        let data = self.bytes(n, what)?;
        Ok(Cursor {
            data,
            pos: 0,
            origin: self.origin,
            base: self.base + at as u64,
        })
    }

    /// A non-negative count, checked against the bytes left so a corrupt count cannot make the
    /// caller allocate more than the object could hold.
    pub fn count(&mut self, what: &str, min_item_bytes: usize) -> Result<usize> {
        let pos = self.pos;
        let n = self.i32(what)?;
        self.check_count(pos, n as i64, what, min_item_bytes)
    }

    /// A count that must not be negative (and is not bounded by the bytes left).
    pub fn non_negative(&self, pos: usize, n: i64, what: &str) -> Result<usize> {
        usize::try_from(n)
            .map_err(|_| self.error_at(pos, format!("a non-negative {what}, found {n}")))
    }

    pub fn check_count(
        &self,
        pos: usize,
        n: i64,
        what: &str,
        min_item_bytes: usize,
    ) -> Result<usize> {
        if n < 0 || (n as u128) * (min_item_bytes.max(1) as u128) > self.remaining() as u128 {
            return Err(self.error_at(
                pos,
                format!(
                    "{what} to fit in the {} remaining bytes, found {n}",
                    self.remaining()
                ),
            ));
        }
        Ok(n as usize)
    }

    /// A ROOT string: one length byte, or 255 and a 4-byte length, then the characters.
    pub fn string(&mut self, what: &str) -> Result<String> {
        let raw = self.string_bytes(what)?;
        // Names are valid UTF-8 nearly always: checked at once, not chunk by chunk.
        Ok(match std::str::from_utf8(raw) {
            Ok(text) => text.to_owned(),
            Err(_) => String::from_utf8_lossy(raw).into_owned(),
        })
    }

    /// Move past a ROOT string (see `string`).
    pub fn skip_string(&mut self, what: &str) -> Result<()> {
        self.string_bytes(what).map(|_| ())
    }

    fn string_bytes(&mut self, what: &str) -> Result<&'a [u8]> {
        let mut n = self.u8(what)? as usize;
        if n == 255 {
            n = self.u32(what)? as usize;
        }
        self.bytes(n, what)
    }

    /// A NUL-terminated C string (class names after a new-class tag).
    pub fn cstring(&mut self, what: &str) -> Result<String> {
        let rest = &self.data[self.pos..];
        let end = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| self.error(format!("{what} ending in a NUL byte")))?;
        self.pos += end + 1;
        Ok(String::from_utf8_lossy(&rest[..end]).into_owned())
    }

    /// Arrays of big-endian numbers, count given.
    pub fn i32_array(&mut self, n: usize, what: &str) -> Result<Vec<i32>> {
        let raw = self.bytes(n.checked_mul(4).ok_or_else(|| self.error(what))?, what)?;
        Ok(raw
            .chunks_exact(4)
            .map(|c| i32::from_be_bytes(c.try_into().unwrap()))
            .collect())
    }
    pub fn i64_array(&mut self, n: usize, what: &str) -> Result<Vec<i64>> {
        let raw = self.bytes(n.checked_mul(8).ok_or_else(|| self.error(what))?, what)?;
        Ok(raw
            .chunks_exact(8)
            .map(|c| i64::from_be_bytes(c.try_into().unwrap()))
            .collect())
    }
}
