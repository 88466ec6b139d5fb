//! What a request sent on a connection comes back with: its final answer ([`Reply`]) or why it
//! got none ([`ConnError`]), and what that means for trying again ([`Failure`]). A leaf module: the connection, its streams, TLS and authentication
//! all speak these types, none of them owns them.

use super::protocol::{self as proto, Redirect};
use crate::error::{Error, IoKind};

/// Largest body accepted for answers that carry no file data (errors, redirects, logins, ...).
pub const SMALL_BODY_MAX: usize = 64 * 1024;
/// The final answer to a request.
#[derive(Debug, PartialEq, Eq)]
pub enum Reply {
    /// `kXR_ok`, with every `kXR_oksofar` body before it joined in front.
    Ok(Vec<u8>),
    /// `kXR_error`.
    Error { code: u32, message: String },
    /// `kXR_redirect`: send the request to another server.
    Redirect(Redirect),
    /// `kXR_wait`: send the request again after this many seconds.
    Wait { seconds: u32, message: String },
}

/// Why a request got no answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConnError {
    /// The connection failed or closed; the request may be sent again on a new connection.
    Lost(String),
    /// No answer in time; the connection was closed.
    Timeout(String),
    /// The server's answer broke the protocol.
    Protocol(String),
    /// The server would not let us in (authentication we do not support, login refused).
    Refused(String),
    /// TLS could not be set up (the server's certificate not accepted, no CA to check it).
    Tls(String),
    /// The server wants TLS for the login, which a `root://` connection did not start.
    TlsRequired(String),
}

impl std::fmt::Display for ConnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnError::Lost(m)
            | ConnError::Timeout(m)
            | ConnError::Protocol(m)
            | ConnError::Refused(m)
            | ConnError::Tls(m)
            | ConnError::TlsRequired(m) => f.write_str(m),
        }
    }
}

/// Why an attempt failed, which decides whether to try again.
#[derive(Debug)]
pub enum Failure {
    /// The connection was lost: try again on a new one.
    Transport(String),
    /// The connection went silent, or slower than the slowest transfer accepted (see
    /// `source::min_rate`): try again on a new one.
    TimedOut(String),
    /// The server answered `kXR_error`.
    Server { code: u32, message: String },
    /// The server would not let us in: the credentials were refused, or none it takes were found.
    Refused(String),
    /// Anything trying again will not fix: a broken answer, a TLS failure, too many redirects.
    Fatal(String),
}

impl Failure {
    /// Whether trying again, on a new connection, may help.
    pub fn is_transient(&self) -> bool {
        matches!(self, Failure::Transport(_) | Failure::TimedOut(_))
    }

    /// What callers may handle apart (see `IoKind`): from the server's error code, never its text.
    pub fn kind(&self) -> IoKind {
        match self {
            Failure::TimedOut(_) => IoKind::TimedOut,
            Failure::Refused(_) => IoKind::Forbidden,
            Failure::Server { code, .. } => proto::error_kind(*code),
            Failure::Transport(_) | Failure::Fatal(_) => IoKind::Other,
        }
    }

    /// The error of `file` this failure ends a request with, of its kind.
    pub fn error(&self, file: &str, message: String) -> Error {
        Error::io_of(self.kind(), file, message)
    }
}

impl From<ConnError> for Failure {
    fn from(e: ConnError) -> Self {
        match e {
            ConnError::Lost(m) => Failure::Transport(m),
            ConnError::Timeout(m) => Failure::TimedOut(m),
            ConnError::Refused(m) => Failure::Refused(m),
            ConnError::Protocol(m) | ConnError::Tls(m) | ConnError::TlsRequired(m) => {
                Failure::Fatal(m)
            }
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Transport(m)
            | Failure::TimedOut(m)
            | Failure::Refused(m)
            | Failure::Fatal(m) => f.write_str(m),
            Failure::Server { code, message } => {
                write!(
                    f,
                    "server error: {message} ({} {code})",
                    proto::error_name(*code)
                )
            }
        }
    }
}
