//! Notes: small records kept in the cache under a name the caller chooses (what a dataset's files
//! hold, for `cherenkov.process`), so that a later process finds them without asking a server.
//!
//! A note is `<dir>/notes/<XXH3-64 of its name>.note`: `chknote1`, the name's length (u32, little
//! endian) and bytes, the payload, and the XXH3-64 of all that. It is written under a temporary
//! name and renamed into place, so a reader sees a whole note or none; one that fails its
//! checksum or holds another name (a hash collision) is not read, and a damaged one is removed.
//! Reading a note marks it as used: notes are pruned with the ranges, least recently used first.

use super::store::{self, checksum, Found};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

const MAGIC: &[u8; 8] = b"chknote1";
pub(super) const FOLDER: &str = "notes";
const SUFFIX: &str = ".note";

fn path(dir: &Path, name: &str) -> PathBuf {
    dir.join(FOLDER)
        .join(format!("{:016x}{SUFFIX}", checksum(name.as_bytes())))
}

fn encode(name: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAGIC.len() + 4 + name.len() + payload.len() + 8);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(name.len() as u32).to_le_bytes());
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(payload);
    let sum = checksum(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// The payload of a note named `name`, when `data` is one.
fn decode<'a>(name: &str, data: &'a [u8]) -> Option<&'a [u8]> {
    let fixed = MAGIC.len() + 4;
    if data.len() < fixed + 8 || &data[..MAGIC.len()] != MAGIC {
        return None;
    }
    let (body, sum) = data.split_at(data.len() - 8);
    if checksum(body).to_le_bytes() != sum {
        return None;
    }
    let len = u32::from_le_bytes(body[MAGIC.len()..fixed].try_into().ok()?) as usize;
    let stored = body.get(fixed..fixed.checked_add(len)?)?;
    (stored == name.as_bytes()).then(|| &body[fixed + len..])
}

/// Keep `payload` as the note `name` in the cache at `dir` (replacing one of that name).
pub fn put(dir: &Path, name: &str, payload: &[u8]) -> std::io::Result<()> {
    static SEQUENCE: AtomicU64 = AtomicU64::new(0);
    let target = path(dir, name);
    let folder = target.parent().expect("a note lies in the notes folder");
    fs::create_dir_all(folder)?;
    let temporary = folder.join(format!(
        ".{}.{}.{}.partial",
        target.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id(),
        SEQUENCE.fetch_add(1, Ordering::Relaxed)
    ));
    let written =
        fs::write(&temporary, encode(name, payload)).and_then(|()| fs::rename(&temporary, &target));
    if written.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    written
}

/// The note `name` in the cache at `dir`, if it holds a whole one.
pub fn get(dir: &Path, name: &str) -> Option<Vec<u8>> {
    let target = path(dir, name);
    let data = fs::read(&target).ok()?;
    match decode(name, &data) {
        Some(payload) => {
            if let Ok(f) = fs::File::options().append(true).open(&target) {
                let _ = f.set_modified(SystemTime::now()); // used: pruned last
            }
            Some(payload.to_vec())
        }
        None => {
            // Damaged (or another name's, which is left alone).
            if decode_name(&data).is_none_or(|stored| stored == name.as_bytes()) {
                let _ = store::remove(&target);
            }
            None
        }
    }
}

/// The name a note's bytes claim, whatever its checksum.
fn decode_name(data: &[u8]) -> Option<&[u8]> {
    let fixed = MAGIC.len() + 4;
    let len = u32::from_le_bytes(data.get(MAGIC.len()..fixed)?.try_into().ok()?) as usize;
    data.get(fixed..fixed.checked_add(len)?)
}

/// Forget the note `name` (a file that changed since it was written).
pub fn remove(dir: &Path, name: &str) -> std::io::Result<()> {
    store::remove(&path(dir, name))
}

/// The notes in the cache at `dir`, for the cache's summary and pruning.
pub(super) fn list(dir: &Path) -> Vec<Found> {
    let folder = dir.join(FOLDER);
    store::remove_stale_partials(&folder);
    store::list_named(&folder, |name| name.ends_with(SUFFIX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("cherenkov-notes-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_note_reads_back_by_its_name_only() {
        let dir = temp_dir("names");
        put(&dir, "root://h//a.root Events", b"first").unwrap();
        put(&dir, "root://h//b.root Events", b"second").unwrap();
        assert_eq!(get(&dir, "root://h//a.root Events").unwrap(), b"first");
        assert_eq!(get(&dir, "root://h//b.root Events").unwrap(), b"second");
        assert_eq!(get(&dir, "root://h//c.root Events"), None);
        put(&dir, "root://h//a.root Events", b"replaced").unwrap();
        assert_eq!(get(&dir, "root://h//a.root Events").unwrap(), b"replaced");
        remove(&dir, "root://h//a.root Events").unwrap();
        assert_eq!(get(&dir, "root://h//a.root Events"), None);
        assert_eq!(list(&dir).len(), 1);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_damaged_or_cut_note_is_never_read_and_is_removed() {
        let dir = temp_dir("damaged");
        let name = "http://h/f.root Events";
        put(&dir, name, b"payload of the note").unwrap();
        let file = path(&dir, name);
        let whole = fs::read(&file).unwrap();
        for at in 0..whole.len() {
            let mut damaged = whole.clone();
            damaged[at] ^= 1;
            assert_eq!(decode(name, &damaged), None, "byte {at}");
            assert_eq!(decode(name, &whole[..at]), None, "cut at {at}");
        }
        fs::write(&file, &whole[..whole.len() - 3]).unwrap();
        assert_eq!(get(&dir, name), None);
        assert!(!file.exists());
        fs::remove_dir_all(&dir).unwrap();
    }
}
