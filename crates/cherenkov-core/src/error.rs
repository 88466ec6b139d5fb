//! Errors are values with context: which file, where in it, and what was expected.

use std::fmt;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The bytes do not hold what the ROOT format says they must.
    Format {
        file: String,
        /// Where: "file offset 1234" or "byte 56 of object 'Events' (TTree, key at 1234)".
        location: String,
        expected: String,
    },
    /// The bytes could not be had (missing file, server error, short read, timeout).
    Io { file: String, message: String },
    /// The branch exists but its type is not one cherenkov interprets.
    UnsupportedBranch {
        file: String,
        branch: String,
        typename: String,
        reason: String,
    },
    /// A name that is not in the file (key, tree, branch).
    NotFound { file: String, what: String },
    /// The caller asked for something impossible (bad entry range, bad option).
    InvalidArgument(String),
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
        Error::Io {
            file: file.to_string(),
            message: message.into(),
        }
    }
    pub fn not_found(file: &str, what: impl Into<String>) -> Self {
        Error::NotFound {
            file: file.to_string(),
            what: what.into(),
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

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Format {
                file,
                location,
                expected,
            } => {
                write!(
                    f,
                    "{file}: not a valid ROOT file at {location}: expected {expected}"
                )
            }
            Error::Io { file, message } => write!(f, "{file}: {message}"),
            Error::UnsupportedBranch {
                file,
                branch,
                typename,
                reason,
            } => write!(
                f,
                "{file}: branch '{branch}' of type '{typename}' is not supported: {reason}"
            ),
            Error::NotFound { file, what } => write!(f, "{file}: {what}"),
            Error::InvalidArgument(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for Error {}
