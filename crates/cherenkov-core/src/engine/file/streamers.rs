//! The file's streamer infos, read when first needed: only members of split objects need them,
//! and ROOT often writes them far from the end, where the opening's tail read misses them.

use super::RootFile;
use crate::error::Result;
use crate::format::cursor::Cursor;
use crate::format::directory::Key;
use crate::format::streamers::{parse_streamer_infos, StreamerInfo};
use crate::source::ByteRange;

impl RootFile {
    /// The streamer infos, read on first call (an empty list if the file has none or they cannot
    /// be read; see `streamer_error`).
    pub async fn streamers(&self) -> &[StreamerInfo] {
        self.streamers
            .get_or_init(|| async {
                match self.read_streamers().await {
                    Ok(infos) => infos,
                    Err(e) => {
                        let _ = self.streamer_error.set(e.in_file(self.name()));
                        Vec::new()
                    }
                }
            })
            .await
    }

    /// The streamer infos if they were read already (see `streamers`), else none.
    pub fn streamers_read(&self) -> &[StreamerInfo] {
        self.streamers.get().map_or(&[], Vec::as_slice)
    }

    async fn read_streamers(&self) -> Result<Vec<StreamerInfo>> {
        if self.header.seek_info == 0 {
            return Ok(Vec::new());
        }
        let range = ByteRange::new(self.header.seek_info, self.header.info_bytes as u64);
        let raw = self.read_metadata(&[range]).await?.remove(0);
        let key = Key::parse(&mut Cursor::new(&raw, "file", range.offset))?;
        let data = key.object_data(&raw)?;
        parse_streamer_infos(&data, key.keylen as usize, &key.describe())
    }
}
