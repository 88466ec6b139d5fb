//! The keys of a file that was never closed. ROOT writes the top directory's keys list when the
//! file is closed (or saved): before that its record says fSeekKeys 0, and the objects written
//! so far are found as ROOT's `TFile::Recover` finds them, by walking the records one after the
//! other from fBEGIN, each starting with its length (a negative length is a free gap).

use super::RootFile;
use crate::error::Result;
use crate::format::cursor::Cursor;
use crate::format::directory::{Key, KEY_HEADER_MAX};
use crate::source::ByteRange;
use bytes::Bytes;

/// Bytes read at a time while walking: many small records (keys, baskets) per request.
const WINDOW: u64 = 1 << 20;

/// What walking the records found: the keys of the top directory and, when the streamer
/// infos were written, where they are.
pub(super) struct Recovered {
    pub keys: Vec<Key>,
    pub streamer_infos: Option<(u64, u32)>,
}

impl RootFile {
    /// Walk the records from fBEGIN to the end of the file and keep the keys whose parent is the
    /// top directory (at fBEGIN), as ROOT does: not the file's own key, the keys list or the
    /// free segments (class TFile), nor baskets. The walk stops where no record can be read.
    pub(super) async fn recover_keys(&self) -> Result<Recovered> {
        let top = self.header.begin;
        let mut found = Recovered {
            keys: Vec::new(),
            streamer_infos: None,
        };
        let mut window = (top, Bytes::new());
        let mut pos = top;
        while pos + 4 <= self.size {
            let header_end = (pos + KEY_HEADER_MAX as u64).min(self.size);
            if pos < window.0 || header_end > window.0 + window.1.len() as u64 {
                let len = WINDOW.max(KEY_HEADER_MAX as u64).min(self.size - pos);
                window = (
                    pos,
                    self.source
                        .read_ranges(&[ByteRange::new(pos, len)])
                        .await?
                        .remove(0),
                );
            }
            let at = (pos - window.0) as usize;
            let mut cur = Cursor::new(&window.1[at..], "file", pos);
            let Ok(nbytes) = cur.i32("record length") else {
                break;
            };
            if nbytes < 0 {
                pos += nbytes.unsigned_abs() as u64;
                continue;
            }
            cur.seek(0)?;
            let Ok(key) = Key::parse(&mut cur) else {
                break;
            };
            if nbytes == 0 || key.seek_key != pos {
                break;
            }
            if key.seek_pdir == top && !matches!(key.class_name.as_str(), "TFile" | "TBasket") {
                if key.name == "StreamerInfo" {
                    found.streamer_infos = Some((pos, key.nbytes));
                } else {
                    // As ROOT appends keys: a later cycle goes before the earlier ones.
                    let at = found.keys.iter().position(|k| k.name == key.name);
                    found.keys.insert(at.unwrap_or(found.keys.len()), key);
                }
            }
            pos += nbytes as u64;
        }
        Ok(found)
    }
}
