//! A bounds-checked big-endian reader over a byte slice. Every read names what it expected, so a
//! malformed file gives an error with its offset instead of a panic.

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

    pub fn seek(&mut self, pos: usize) -> Result<()> {
        if pos > self.data.len() {
            return Err(self.error(format!(
                "a position {pos} inside the {} bytes available",
                self.data.len()
            )));
        }
        self.pos = pos;
        Ok(())
    }

    pub fn skip(&mut self, n: usize) -> Result<()> {
        self.seek(
            self.pos
                .checked_add(n)
                .ok_or_else(|| self.error("a sane length"))?,
        )
    }

    pub fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.error(format!(
                "{what} ({n} bytes), but only {} bytes remain",
                self.remaining()
            )));
        }
        let out = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        Ok(self.bytes(N, what)?.try_into().expect("length checked"))
    }

    pub fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }
    pub fn u16(&mut self, what: &str) -> Result<u16> {
        Ok(u16::from_be_bytes(self.array(what)?))
    }
    pub fn i16(&mut self, what: &str) -> Result<i16> {
        Ok(i16::from_be_bytes(self.array(what)?))
    }
    pub fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_be_bytes(self.array(what)?))
    }
    pub fn i32(&mut self, what: &str) -> Result<i32> {
        Ok(i32::from_be_bytes(self.array(what)?))
    }
    pub fn i64(&mut self, what: &str) -> Result<i64> {
        Ok(i64::from_be_bytes(self.array(what)?))
    }
    pub fn f32(&mut self, what: &str) -> Result<f32> {
        Ok(f32::from_be_bytes(self.array(what)?))
    }
    pub fn f64(&mut self, what: &str) -> Result<f64> {
        Ok(f64::from_be_bytes(self.array(what)?))
    }
    pub fn bool(&mut self, what: &str) -> Result<bool> {
        Ok(self.u8(what)? != 0)
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
        let mut n = self.u8(what)? as usize;
        if n == 255 {
            n = self.u32(what)? as usize;
        }
        let raw = self.bytes(n, what)?;
        Ok(String::from_utf8_lossy(raw).into_owned())
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
