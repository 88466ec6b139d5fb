//! Directories and their keys: listing, walking and finding objects by path.

use super::RootFile;
use crate::error::{Error, Result};
use crate::format::cursor::Cursor;
use crate::format::directory::{check_inside, parse_keys_list, DirectoryRecord, Key};
use crate::source::ByteRange;

impl RootFile {
    /// Keys of a directory given by its key (None: the top directory).
    pub async fn directory_keys(&self, dir: Option<&Key>) -> Result<Vec<Key>> {
        let Some(dir) = dir else {
            return Ok(self.keys.clone());
        };
        let data = self.read_object(dir).await?;
        let origin = dir.describe();
        let record = DirectoryRecord::parse(&mut Cursor::new(&data, &origin, 0))
            .map_err(|e| e.in_file(self.name()))?;
        if !record.has_keys_list() {
            return Ok(Vec::new());
        }
        check_inside(
            record.seek_keys,
            record.keys_bytes as u64,
            self.size,
            &format!("the keys list of {origin}"),
        )
        .map_err(|e| e.in_file(self.name()))?;
        let raw = self
            .read_metadata(&[ByteRange::new(record.seek_keys, record.keys_bytes as u64)])
            .await?
            .remove(0);
        parse_keys_list(&raw, record.seek_keys).map_err(|e| e.in_file(self.name()))
    }

    /// All keys, with their paths ("dir/sub/name"), depth first; highest cycle first per name.
    pub async fn all_keys(&self) -> Result<Vec<(String, Key)>> {
        let mut out = Vec::new();
        let mut stack: Vec<(String, Vec<Key>)> = vec![(String::new(), self.keys.clone())];
        let mut seen_dirs = std::collections::HashSet::new();
        while let Some((prefix, keys)) = stack.pop() {
            for key in keys {
                let path = format!("{prefix}{}", key.name);
                if key.is_directory() && seen_dirs.insert(key.seek_key) && seen_dirs.len() < 10_000
                {
                    stack.push((format!("{path}/"), self.directory_keys(Some(&key)).await?));
                }
                out.push((path, key));
            }
        }
        Ok(out)
    }

    /// Find "dir/name" or "dir/name;cycle" (the highest cycle when none is given).
    pub async fn find_key(&self, path: &str) -> Result<Key> {
        let (path, cycle) = match path.rsplit_once(';') {
            Some((p, c)) => (
                p,
                Some(
                    c.parse::<i16>()
                        .map_err(|_| Error::InvalidArgument(format!("bad cycle in '{path}'")))?,
                ),
            ),
            None => (path, None),
        };
        let parts: Vec<&str> = path
            .trim_matches('/')
            .split('/')
            .filter(|p| !p.is_empty())
            .collect();
        let mut keys = self.keys.clone();
        for (i, part) in parts.iter().enumerate() {
            let last = i + 1 == parts.len();
            let found = keys
                .iter()
                .filter(|k| k.name == *part && (!last || cycle.is_none_or(|c| k.cycle == c)))
                .max_by_key(|k| k.cycle)
                .cloned()
                .ok_or_else(|| {
                    Error::not_found(
                        self.name(),
                        format!("no object named '{path}' (missing '{part}')"),
                    )
                })?;
            if last {
                return Ok(found);
            }
            if !found.is_directory() {
                return Err(Error::not_found(
                    self.name(),
                    format!(
                        "'{part}' in '{path}' is a {}, not a directory",
                        found.class_name
                    ),
                ));
            }
            keys = self.directory_keys(Some(&found)).await?;
        }
        Err(Error::not_found(self.name(), "an empty object path"))
    }
}
