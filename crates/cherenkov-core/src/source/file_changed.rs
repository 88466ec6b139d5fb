//! The error a source raises when the file on the server is no longer the one it opened.

use std::sync::Arc;

/// The cause of an error raised because the file is no longer the one opened (another size,
/// ETag or Last-Modified): its bytes must not be mixed with those read before. A replica that
/// changed is dropped for good (see `multi`).
#[derive(Debug, thiserror::Error)]
#[error("the file changed on the server since it was opened")]
pub struct FileChanged;

/// An error saying `file` changed on the server (see [`FileChanged`]).
pub fn file_changed(file: &str, message: impl Into<String>) -> crate::Error {
    crate::Error::Io {
        file: file.to_string(),
        message: message.into(),
        kind: crate::IoKind::Other,
        cause: Some(Arc::new(FileChanged)),
    }
}

/// Whether `error` says the file changed on the server (see [`FileChanged`]).
pub fn is_file_changed(error: &crate::Error) -> bool {
    matches!(error, crate::Error::Io { cause: Some(cause), .. } if cause.is::<FileChanged>())
}
