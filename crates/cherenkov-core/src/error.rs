//! Errors are values with context: which file, where in it, and what was expected. An error
//! caused by another (an operating-system error, a failed task) keeps it as its `source()`.

use std::sync::Arc;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The cause of an error, shared so that an error can be cloned (one failed read may fail
/// several waiting steps).
pub type Cause = Arc<dyn std::error::Error + Send + Sync>;

#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The bytes do not hold what the ROOT format says they must.
    #[error("{file}: not a valid ROOT file at {location}: expected {expected}")]
    Format {
        file: String,
        /// Where: "file offset 1234" or "byte 56 of object 'Events' (TTree, key at 1234)".
        location: String,
        expected: String,
    },
    /// The bytes could not be had (missing file, server error, short read, timeout).
    #[error("{file}: {message}")]
    Io {
        file: String,
        message: String,
        /// What callers may handle apart (a missing file skipped, a refusal, a timeout).
        kind: IoKind,
        #[source]
        cause: Option<Cause>,
    },
    /// The branch exists but its type is not one cherenkov interprets.
    #[error("{file}: branch '{branch}' of type '{typename}' is not supported: {reason}")]
    UnsupportedBranch {
        file: String,
        branch: String,
        typename: String,
        reason: String,
    },
    /// A name that is not in the file (key, tree, branch).
    #[error("{file}: {what}")]
    NotFound { file: String, what: String },
    /// The caller asked for something impossible (bad entry range, bad option).
    #[error("{0}")]
    InvalidArgument(String),
    /// Work the engine stopped itself (a read step cancelled, a prefetch abandoned): neither
    /// the caller's fault nor the file's.
    #[error("{0}")]
    Cancelled(String),
}

/// The kinds of I/O failure a caller may want to handle apart from the others, as Python's
/// `FileNotFoundError`, `PermissionError` and `TimeoutError` tell them apart. Set where the
/// failure is known (a 404, `kXR_NotFound`, an `ENOENT`; a 401/403, `kXR_NotAuthorized`, a
/// refused login; a request that outlived its time), never guessed from a message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum IoKind {
    #[default]
    Other,
    /// No such file on the server or disk.
    NotFound,
    /// The credentials were refused, or none were given where some are needed.
    Forbidden,
    /// The server stayed silent, or too slow, for longer than the options allow.
    TimedOut,
}

impl IoKind {
    /// The kind an operating-system error is.
    pub fn of_os(error: &std::io::Error) -> IoKind {
        match error.kind() {
            std::io::ErrorKind::NotFound => IoKind::NotFound,
            std::io::ErrorKind::PermissionDenied => IoKind::Forbidden,
            std::io::ErrorKind::TimedOut => IoKind::TimedOut,
            _ => IoKind::Other,
        }
    }

    /// The kind shared by all of `kinds` (the failures of every replica of a file), else
    /// `Other`: a file missing on one server and refused on another is neither.
    pub fn common(kinds: impl IntoIterator<Item = IoKind>) -> IoKind {
        let mut kinds = kinds.into_iter();
        let Some(first) = kinds.next() else {
            return IoKind::Other;
        };
        match kinds.all(|k| k == first) {
            true => first,
            false => IoKind::Other,
        }
    }
}

impl Error {
    pub fn format(location: impl Into<String>, expected: impl Into<String>) -> Self {
        Error::Format {
            file: String::new(),
            location: location.into(),
            expected: expected.into(),
        }
    }
    pub fn io(file: &str, message: impl Into<String>) -> Self {
        Error::io_of(IoKind::Other, file, message)
    }
    /// An I/O error of a kind callers may handle apart (see [`IoKind`]).
    pub fn io_of(kind: IoKind, file: &str, message: impl Into<String>) -> Self {
        Error::Io {
            file: file.to_string(),
            message: message.into(),
            kind,
            cause: None,
        }
    }
    /// An I/O error caused by `cause`, whose text ends the message; an operating-system error's
    /// kind (`ENOENT`, `EACCES`, `ETIMEDOUT`) is the error's.
    pub fn io_caused(
        file: &str,
        message: impl Into<String>,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        let cause: Cause = Arc::new(cause);
        let kind = cause
            .downcast_ref::<std::io::Error>()
            .map_or(IoKind::Other, IoKind::of_os);
        Error::Io {
            file: file.to_string(),
            message: format!("{}: {cause}", message.into()),
            kind,
            cause: Some(cause),
        }
    }
    /// This error, an I/O error of `kind` if it is an I/O error.
    pub fn of_kind(mut self, new: IoKind) -> Self {
        if let Error::Io { kind, .. } = &mut self {
            *kind = new;
        }
        self
    }
    /// The kind of an I/O error (`Other` for every other error).
    pub fn io_kind(&self) -> IoKind {
        match self {
            Error::Io { kind, .. } => *kind,
            _ => IoKind::Other,
        }
    }
    pub fn not_found(file: &str, what: impl Into<String>) -> Self {
        Error::NotFound {
            file: file.to_string(),
            what: what.into(),
        }
    }
    /// The same error with its message rewritten by `f` when it is an I/O error (its file and
    /// cause kept); other errors as they are.
    pub fn map_io_message(self, f: impl FnOnce(&str) -> String) -> Self {
        match self {
            Error::Io {
                file,
                message,
                kind,
                cause,
            } => Error::Io {
                message: f(&message),
                file,
                kind,
                cause,
            },
            other => other,
        }
    }

    /// Fill in the file name of an error raised where only bytes were known.
    pub fn in_file(mut self, name: &str) -> Self {
        match &mut self {
            Error::Format { file, .. }
            | Error::Io { file, .. }
            | Error::UnsupportedBranch { file, .. }
            | Error::NotFound { file, .. }
                if file.is_empty() =>
            {
                *file = name.to_string()
            }
            _ => {}
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn an_io_error_keeps_its_cause() {
        let os = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e = Error::io_caused("f.root", "cannot open", os);
        assert_eq!(e.to_string(), "f.root: cannot open: no such file");
        assert_eq!(e.source().expect("a cause").to_string(), "no such file");
        let Error::Io {
            cause: Some(cause), ..
        } = &e
        else {
            panic!("{e:?}")
        };
        assert!(cause.downcast_ref::<std::io::Error>().is_some());
        assert_eq!(e.io_kind(), IoKind::NotFound);
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert_eq!(
            Error::io_caused("f", "cannot open", denied).io_kind(),
            IoKind::Forbidden
        );
        assert_eq!(Error::io("f", "a 404, said").io_kind(), IoKind::Other);
    }

    #[test]
    fn replicas_failing_alike_fail_as_one_kind() {
        use IoKind::*;
        assert_eq!(IoKind::common([NotFound, NotFound]), NotFound);
        assert_eq!(IoKind::common([NotFound, Forbidden]), Other);
        assert_eq!(IoKind::common([]), Other);
    }
}
