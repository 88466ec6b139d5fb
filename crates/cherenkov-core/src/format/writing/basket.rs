//! A basket on disk, as ROOT flushes one: a key (always with 64-bit seeks, as TBasket's
//! constructor makes it) whose header ends with the TBasket fields, then the entries and, when
//! entries vary in size, the table of where each starts. `format::basket::decode_basket` reads
//! it back.

use crate::format::directory::Key;

/// TBasket's class version, and the bytes its fields add to the key header (version,
/// fBufferSize, fNevBufSize, fNevBuf, fLast, flag).
const TBASKET_VERSION: i16 = 3;
pub const BASKET_FIELDS_LEN: usize = 19;

/// fKeylen of a basket of branch `branch` in tree `tree`.
pub fn basket_key_len(branch: &str, tree: &str) -> usize {
    Key::header_len("TBasket", branch, tree, true) + BASKET_FIELDS_LEN
}

/// The TBasket fields after a basket's key header.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BasketFields {
    /// The branch's buffer size when the basket was closed.
    pub buffer_size: i32,
    /// Bytes of an entry when entries are fixed-size; the offset table's capacity otherwise.
    pub nev_buf_size: i32,
    /// Entries in the basket.
    pub entries: i32,
    /// fLast: the key length plus the entry data's length (the offset table follows).
    pub last: i32,
}

/// The key header and TBasket fields (`key.keylen` bytes): the flag is 0, a basket written as its
/// own record.
pub fn write_basket_header(key: &Key, fields: &BasketFields) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.keylen as usize);
    key.write(&mut out);
    out.extend_from_slice(&TBASKET_VERSION.to_be_bytes());
    out.extend_from_slice(&fields.buffer_size.to_be_bytes());
    out.extend_from_slice(&fields.nev_buf_size.to_be_bytes());
    out.extend_from_slice(&fields.entries.to_be_bytes());
    out.extend_from_slice(&fields.last.to_be_bytes());
    out.push(0);
    out
}

/// The entry offset table appended to `out` after the entry data: a count of `entries + 1`, each
/// entry's start counted from the key's start (`starts` are from the data's), and a last 0.
pub fn write_entry_offsets(out: &mut Vec<u8>, starts: &[u32], keylen: u32) {
    out.reserve(4 * (starts.len() + 2));
    out.extend_from_slice(&(starts.len() as i32 + 1).to_be_bytes());
    for &s in starts {
        out.extend_from_slice(&((s + keylen) as i32).to_be_bytes());
    }
    out.extend_from_slice(&0i32.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::basket::decode_basket;
    use crate::format::writing::compression::Compression;
    use crate::format::writing::directory::BIG_KEY_VERSION;

    /// A basket of `data` (entries starting at `starts`, if they vary), stored with `setting`.
    fn basket(data: &[u8], starts: Option<&[u32]>, entries: i32, setting: i32) -> Vec<u8> {
        let keylen = basket_key_len("Muon_pt", "Events") as u32;
        let mut object = data.to_vec();
        if let Some(starts) = starts {
            write_entry_offsets(&mut object, starts, keylen);
        }
        let compressed = Compression::from_setting(setting)
            .unwrap()
            .compress(&object);
        let stored = compressed.as_deref().unwrap_or(&object);
        let key = Key {
            nbytes: keylen + stored.len() as u32,
            version: BIG_KEY_VERSION,
            objlen: object.len() as u32,
            datime: 0,
            keylen: keylen as u16,
            cycle: 0,
            seek_key: 12_345,
            seek_pdir: 100,
            class_name: "TBasket".into(),
            name: "Muon_pt".into(),
            title: "Events".into(),
        };
        let fields = BasketFields {
            buffer_size: object.len() as i32,
            nev_buf_size: if starts.is_some() { 1000 } else { 4 },
            entries,
            last: (keylen as usize + data.len()) as i32,
        };
        let mut raw = write_basket_header(&key, &fields);
        assert_eq!(raw.len(), keylen as usize);
        raw.extend_from_slice(stored);
        raw
    }

    #[test]
    fn fixed_and_varying_entries_round_trip_through_the_reader() {
        let data: Vec<u8> = (0..400u32).flat_map(|i| (i % 7).to_be_bytes()).collect();
        for setting in [0, 505, 101] {
            let b = decode_basket(&basket(&data, None, 400, setting), "t").unwrap();
            assert_eq!(
                (b.entries, b.content.as_slice(), b.offsets),
                (400, data.as_slice(), None)
            );
            let starts = [0, 0, 400, 1000];
            let b = decode_basket(&basket(&data, Some(&starts), 4, setting), "t").unwrap();
            assert_eq!(b.content, data);
            assert_eq!(b.offsets, Some(vec![0, 0, 400, 1000, 1600]));
        }
    }

    #[test]
    fn an_empty_basket_round_trips() {
        let b = decode_basket(&basket(&[], Some(&[]), 0, 505), "t").unwrap();
        assert_eq!((b.entries, b.content.len()), (0, 0));
    }
}
