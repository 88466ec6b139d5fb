//! What a request sent on a connection comes back with: its final answer ([`Reply`]) or why it
//! got none ([`ConnError`]), and what that means for trying again ([`Failure`]). A leaf module: the connection, its streams, TLS and authentication
//! all speak these types, none of them owns them.

use super::protocol::{self as proto, Redirect};

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
            | ConnError::TlsRequired(m) => f.write_str(m),
        }
    }
}

/// Why an attempt failed, which decides whether to try again.
#[derive(Debug)]
pub enum Failure {
    /// The connection was lost or went silent: try again on a new one.
    Transport(String),
    /// The server answered `kXR_error`.
    Server { code: u32, message: String },
    /// Anything trying again will not fix: a broken answer, a refused login, too many redirects.
    Fatal(String),
}

impl From<ConnError> for Failure {
    fn from(e: ConnError) -> Self {
        match e {
            ConnError::Lost(m) | ConnError::Timeout(m) => Failure::Transport(m),
            ConnError::Protocol(m) | ConnError::Refused(m) | ConnError::TlsRequired(m) => {
                Failure::Fatal(m)
            }
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Transport(m) | Failure::Fatal(m) => f.write_str(m),
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
