//! A local file written under a temporary name in its directory (`.name.cherenkov-PID-N.part`)
//! and renamed over the final name at `finish`, after its bytes are on disk: a crash, a full
//! disk or an abandoned write leaves no file that looks complete, and never a partial one under
//! the final name. Updating an existing file writes it in place (see `update`).

use super::Sink;
use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

pub struct LocalSink {
    /// The final path, as given.
    name: String,
    file: File,
    /// Where the bytes are until `finish` renames them (none when updating in place).
    temporary: Option<PathBuf>,
}

impl LocalSink {
    /// A new file at `path`, replacing any file there when finished.
    pub fn create(path: &str) -> Result<Self> {
        static SEQUENCE: AtomicU64 = AtomicU64::new(0);
        let final_path = Path::new(path);
        let file_name = final_path
            .file_name()
            .ok_or_else(|| Error::InvalidArgument(format!("{path}: not a file path")))?;
        let temporary = final_path.with_file_name(format!(
            ".{}.cherenkov-{}-{}.part",
            file_name.to_string_lossy(),
            std::process::id(),
            SEQUENCE.fetch_add(1, Ordering::Relaxed)
        ));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temporary)
            .map_err(|e| {
                Error::io_caused(path, format!("cannot create {}", temporary.display()), e)
            })?;
        Ok(Self {
            name: path.to_string(),
            file,
            temporary: Some(temporary),
        })
    }

    /// An existing file at `path`, written in place: the writer appends after the file's end
    /// and rewrites its header last, so the file stays as it was until the update completes.
    pub fn update(path: &str) -> Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| Error::io_caused(path, "cannot open for update", e))?;
        Ok(Self {
            name: path.to_string(),
            file,
            temporary: None,
        })
    }
}

impl Sink for LocalSink {
    fn name(&self) -> &str {
        &self.name
    }

    fn write_at(&mut self, offset: u64, bytes: &[u8]) -> Result<()> {
        self.file.write_all_at(bytes, offset).map_err(|e| {
            Error::io_caused(
                &self.name,
                format!("writing {} bytes at offset {offset}", bytes.len()),
                e,
            )
        })
    }

    fn flush(&mut self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| Error::io_caused(&self.name, "storing the written bytes", e))
    }

    fn finish(mut self: Box<Self>) -> Result<()> {
        self.flush()?;
        if let Some(temporary) = self.temporary.take() {
            std::fs::rename(&temporary, &self.name).map_err(|e| {
                let _ = std::fs::remove_file(&temporary);
                Error::io_caused(
                    &self.name,
                    format!("renaming {} into place", temporary.display()),
                    e,
                )
            })?;
        }
        Ok(())
    }
}

impl Drop for LocalSink {
    fn drop(&mut self) {
        // Not finished: the bytes were never a file.
        if let Some(temporary) = &self.temporary {
            let _ = std::fs::remove_file(temporary);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cherenkov-sink-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_finished_file_appears_whole_under_its_name() {
        let path = scratch("whole.root");
        let mut sink: Box<dyn Sink> = Box::new(LocalSink::create(path.to_str().unwrap()).unwrap());
        sink.write_at(0, b"root....").unwrap();
        sink.write_at(8, b"tail").unwrap();
        assert!(!path.exists(), "visible before finish");
        sink.write_at(4, b"HEAD").unwrap();
        sink.finish().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"rootHEADtail");
        assert_eq!(
            entries(path.parent().unwrap())
                .iter()
                .filter(|n| n.ends_with(".part"))
                .count(),
            0
        );
    }

    #[test]
    fn an_abandoned_file_leaves_nothing() {
        let path = scratch("abandoned.root");
        std::fs::write(&path, b"the old file").unwrap();
        let mut sink = LocalSink::create(path.to_str().unwrap()).unwrap();
        sink.write_at(0, b"half a new file").unwrap();
        drop(sink);
        assert_eq!(std::fs::read(&path).unwrap(), b"the old file");
        assert!(!entries(path.parent().unwrap())
            .iter()
            .any(|n| n.contains("abandoned.root.cherenkov")));
    }

    #[test]
    fn a_directory_that_does_not_exist_is_an_error_naming_the_path() {
        let e = LocalSink::create("/nonexistent-dir/f.root").err().unwrap();
        assert!(e.to_string().contains("/nonexistent-dir/f.root"), "{e}");
    }
}
