//! TBasket on disk: a key header followed by the (usually compressed) entry data and, for
//! variable-size entries, the table of where each entry starts; and the baskets a TTree keeps in
//! its own metadata (the writer's last basket, never flushed).

use super::compression::{check_declared, decompress, decompress_into};
use super::cursor::Cursor;
use super::directory::Key;
use crate::error::Result;

/// A decompressed basket.
#[derive(Clone, Debug, PartialEq)]
pub struct Basket {
    pub entries: u32,
    /// Entry data, without the key header and the offset table.
    pub content: Vec<u8>,
    /// `entries + 1` boundaries within `content` when entries vary in size. `None` when entries
    /// are fixed-size, or when the writer left the table out to be rebuilt from a count branch.
    pub offsets: Option<Vec<u32>>,
}

/// A basket stored inside the TTree metadata (the writer's last, unflushed basket).
#[derive(Clone, Debug, PartialEq)]
pub struct EmbeddedBasket {
    pub entries: u32,
    /// The entry data, without key header.
    pub content: Vec<u8>,
    /// Entry boundaries within `content` (entries + 1 values), when entries vary in size.
    pub offsets: Option<Vec<u32>>,
}

/// The TBasket fields after its key, which a basket on disk and one streamed inside its branch
/// both begin with.
pub struct BasketHeader {
    pub version: i16,
    /// Entries in the basket (fNevBuf), not yet checked: see `nev_pos`.
    pub nev_buf: i32,
    /// Where fNevBuf is, for errors about it.
    pub nev_pos: usize,
    /// End of the entry data, counted from the key's start (fLast).
    pub last: i32,
}

impl BasketHeader {
    pub fn parse(cur: &mut Cursor) -> Result<BasketHeader> {
        let version = cur.i16("TBasket version")?;
        cur.i32("TBasket fBufferSize")?;
        // A negative fNevBufSize announces a byte of IO bits (ROOT 6.12 and later).
        if cur.i32("TBasket fNevBufSize")? < 0 {
            cur.u8("TBasket fIOBits")?;
        }
        let nev_pos = cur.pos();
        let nev_buf = cur.i32("TBasket fNevBuf")?;
        let last = cur.i32("TBasket fLast")?;
        Ok(BasketHeader {
            version,
            nev_buf,
            nev_pos,
            last,
        })
    }
}

/// Where a stored basket's parts are, from its key and TBasket headers (nothing decompressed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BasketLayout {
    /// Bytes of the key header: the payload starts here.
    pub keylen: usize,
    /// Bytes of the payload once decompressed: entry data, then the entry offset table.
    pub objlen: usize,
    /// Where the entry data ends in the decompressed payload (fLast - fKeylen); an offset
    /// table follows when it is short of `objlen`.
    pub border: usize,
    pub entries: usize,
    pub compressed: bool,
}

impl BasketLayout {
    /// Parse and check the headers of a stored basket (`raw` = the whole key).
    pub fn parse(raw: &[u8], origin: &str) -> Result<BasketLayout> {
        let mut cur = Cursor::new(raw, origin, 0);
        let key = Key::parse_sizes(&mut cur)?;
        let BasketHeader {
            nev_buf,
            nev_pos,
            last,
            ..
        } = BasketHeader::parse(&mut cur)?;
        let keylen = key.keylen as usize;
        if key.nbytes as usize != raw.len() || keylen > raw.len() || keylen < cur.pos() {
            return Err(cur.error_at(
                0,
                format!(
                    "a basket key of {} bytes with its header inside (fNbytes {}, fKeylen {})",
                    raw.len(),
                    key.nbytes,
                    key.keylen
                ),
            ));
        }
        let objlen = key.objlen as usize;
        let border = (last as i64) - keylen as i64;
        if border < 0 || border as usize > objlen {
            return Err(cur.error_at(
                nev_pos + 4,
                format!(
                    "fLast ({last}) between fKeylen ({keylen}) and fKeylen + fObjlen ({})",
                    keylen + objlen
                ),
            ));
        }
        let compressed = key.is_compressed();
        if compressed {
            // Buffers are sized from `objlen`: only once the blocks present declare as much.
            check_declared(&raw[keylen..], objlen, origin)?;
        }
        Ok(BasketLayout {
            keylen,
            objlen,
            border: border as usize,
            entries: cur.non_negative(nev_pos, nev_buf as i64, "TBasket fNevBuf")?,
            compressed,
        })
    }

    /// Whether the payload ends with a table of entry offsets.
    pub fn has_offsets(&self) -> bool {
        self.border < self.objlen
    }

    /// The payload, decompressed into `dest` (which must hold `objlen` bytes), or as stored.
    pub fn payload<'a>(&self, raw: &'a [u8], dest: &'a mut [u8], origin: &str) -> Result<&'a [u8]> {
        let stored = &raw[self.keylen..];
        if self.compressed {
            decompress_into(stored, dest, origin)?;
            return Ok(dest);
        }
        stored.get(..self.objlen).ok_or_else(|| {
            Cursor::new(raw, origin, 0)
                .error_at(self.keylen, format!("{} uncompressed bytes", self.objlen))
        })
    }

    /// The stored entry offsets of a decompressed payload: `entries` big-endian `i32`s, each
    /// counted from the key's start (see `relative_offsets`); `None` without a table.
    pub fn offset_table<'a>(&self, payload: &'a [u8], origin: &str) -> Result<Option<&'a [u8]>> {
        if !self.has_offsets() {
            return Ok(None);
        }
        let mut table = Cursor::new(&payload[self.border..], origin, self.border as u64);
        let n = table.count("the entry offset count", 4)?;
        if n < self.entries {
            return Err(table.error_at(0, format!("{} entry offsets, found {n}", self.entries)));
        }
        table.bytes(self.entries * 4, "entry offsets")?;
        let at = self.border + 4;
        Ok(Some(&payload[at..at + self.entries * 4]))
    }

    /// The error for stored entry offsets out of order or outside the entry data.
    pub fn bad_offsets(&self, origin: &str) -> crate::error::Error {
        Cursor::new(&[], origin, self.border as u64 + 4).error_at(
            0,
            format!(
                "entry offsets in order and inside the {} data bytes",
                self.border
            ),
        )
    }
}

/// Decode a basket from its stored bytes (`raw` = the whole key: header and payload).
/// `origin` names it for errors, e.g. "basket 3 of branch 'Muon_pt' (file offset 1234)".
pub fn decode_basket(raw: &[u8], origin: &str) -> Result<Basket> {
    let layout = BasketLayout::parse(raw, origin)?;
    let mut data = if layout.compressed {
        decompress(&raw[layout.keylen..], layout.objlen, origin)?
    } else {
        layout.payload(raw, &mut [], origin)?.to_vec()
    };
    let offsets = match layout.offset_table(&data, origin)? {
        Some(table) => {
            // Read in place: a merge decodes a basket per branch of every small input.
            let raw_offsets = table
                .chunks_exact(4)
                .map(|c| i32::from_be_bytes(c.try_into().unwrap()));
            Some(
                relative_offsets(raw_offsets, layout.keylen, layout.border)
                    .ok_or_else(|| layout.bad_offsets(origin))?,
            )
        }
        None => None,
    };
    data.truncate(layout.border);
    Ok(Basket {
        entries: layout.entries as u32,
        content: data,
        offsets,
    })
}

/// A TBasket streamed inside its branch (in the TTree metadata): key header, basket header, then
/// (flag permitting) the entry offsets and the buffer. `None` when only the header is there (the
/// data is on disk, listed in the branch's fBasketSeek).
pub fn parse_embedded_basket(cur: &mut Cursor) -> Result<Option<EmbeddedBasket>> {
    let start = cur.pos();
    let key = Key::parse(cur)?;
    let (nbytes, keylen) = (key.nbytes as i64, key.keylen as i64);
    let BasketHeader {
        version,
        nev_buf,
        nev_pos,
        last,
    } = BasketHeader::parse(cur)?;
    let mut flag = cur.u8("TBasket flag")?;
    let generate_offsets = flag >= 80;
    if generate_offsets {
        flag -= 80;
    }
    if nbytes > keylen {
        // Only a header: the data is on disk, listed in fBasketSeek.
        return Ok(None);
    }
    let nev = cur.non_negative(nev_pos, nev_buf as i64, "TBasket fNevBuf")?;
    let keylen = keylen as usize;
    let mut offsets = None;
    if !generate_offsets && flag != 0 && flag % 10 != 2 {
        // As TBasket::Streamer: the offsets only when the basket holds entries (g4tools
        // writes empty ones), the displacements whenever flagged.
        let raw = if nev_buf > 0 {
            let n = cur.count("TBasket entry offset count", 4)?;
            cur.i32_array(n, "TBasket entry offsets")?
        } else {
            Vec::new()
        };
        if flag > 40 {
            let n = cur.count("TBasket displacement count", 4)?;
            cur.skip(n * 4)?;
        }
        offsets = Some(raw);
    }
    if !(flag == 1 || flag > 10) {
        return Err(cur.error_at(start, "an embedded TBasket carrying its buffer"));
    }
    let last = cur.check_count(cur.pos(), last as i64, "TBasket fLast", 1)?;
    let buffer = if version > 1 {
        cur.bytes(last, "embedded TBasket buffer")?
    } else {
        let n = cur.count("embedded TBasket buffer length", 1)?;
        cur.bytes(n, "embedded TBasket buffer")?
    };
    let content = buffer.get(keylen..).unwrap_or_default().to_vec();
    let offsets = match offsets {
        Some(raw) if raw.len() >= nev => Some(
            relative_offsets(raw[..nev].iter().copied(), keylen, content.len()).ok_or_else(
                || {
                    cur.error_at(
                        start,
                        "embedded TBasket entry offsets inside its buffer, in order",
                    )
                },
            )?,
        ),
        Some(_) => {
            return Err(cur.error_at(
                start,
                format!("{nev} entry offsets in the embedded TBasket"),
            ))
        }
        None => None,
    };
    Ok(Some(EmbeddedBasket {
        entries: nev as u32,
        content,
        offsets,
    }))
}

/// Entry offsets as stored (relative to the key start) turned into `n + 1` offsets relative to the
/// content, the last being the content length; `None` unless they are ordered and inside.
pub fn relative_offsets(
    raw: impl ExactSizeIterator<Item = i32>,
    keylen: usize,
    content_len: usize,
) -> Option<Vec<u32>> {
    let mut out = Vec::with_capacity(raw.len() + 1);
    let mut prev = 0i64;
    for o in raw {
        let rel = o as i64 - keylen as i64;
        if rel < prev || rel > content_len as i64 {
            return None;
        }
        out.push(rel as u32);
        prev = rel;
    }
    out.push(content_len as u32);
    Some(out)
}
