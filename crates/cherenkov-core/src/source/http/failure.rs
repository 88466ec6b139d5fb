//! Why an HTTP request did not give usable bytes, and what to do about it: retry (on the
//! schedule of `source::retry`), ask differently, or give up.

use crate::error::IoKind;
use crate::source::min_rate::TooSlow;
use crate::source::retry::{Retries, RetryPolicy};
use reqwest::StatusCode;
use std::future::Future;

/// Why one request did not give usable bytes; decides between retrying, asking differently and
/// giving up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// No answer: connection refused or reset. Retried, then fatal.
    Unreachable(String),
    /// Silent, or slower than the slowest transfer accepted (see `source::min_rate`), for the
    /// request timeout. Retried on a new connection, then fatal.
    TimedOut(String),
    /// A 5xx answer. Retried; for a multi-range request, then asked range by range.
    ServerError(String),
    /// The body ended early. Retried for a single range; a multi-range request is asked range by
    /// range at once (some servers break long multipart answers every time).
    CutShort(String),
    /// The server does not do multi-range answers (whole file too large to use).
    NoMultiRange(String),
    /// The server refused the request line or headers as too large.
    HeaderTooLarge(String),
    /// The answer does not fit the ranges asked (malformed multipart, wrong Content-Range, 416).
    Unusable(String),
    /// No such file (404, 410). Fatal.
    Missing(String),
    /// The credentials were refused, or none were found (401, 403). Fatal, never retried
    /// without them.
    Refused(String),
    /// Asking again will not help (too many redirects, an encoded answer, a TLS refusal).
    Fatal(String),
    /// The file is not the one opened any more (size, ETag or Last-Modified changed).
    Changed(String),
}

impl Failure {
    pub fn message(&self) -> &str {
        match self {
            Failure::Unreachable(m)
            | Failure::TimedOut(m)
            | Failure::Missing(m)
            | Failure::Refused(m)
            | Failure::ServerError(m)
            | Failure::CutShort(m)
            | Failure::NoMultiRange(m)
            | Failure::HeaderTooLarge(m)
            | Failure::Unusable(m)
            | Failure::Fatal(m)
            | Failure::Changed(m) => m,
        }
    }

    /// What callers may handle apart (see `IoKind`).
    pub fn kind(&self) -> IoKind {
        match self {
            Failure::Missing(_) => IoKind::NotFound,
            Failure::Refused(_) => IoKind::Forbidden,
            Failure::TimedOut(_) => IoKind::TimedOut,
            _ => IoKind::Other,
        }
    }
}

pub fn status_failure(status: StatusCode, ranges_asked: usize) -> Failure {
    let message = format!("server answered {status}");
    match status.as_u16() {
        // 494 is nginx's "Request Header Or Cookie Too Large".
        400 | 413 | 414 | 431 | 494 if ranges_asked > 1 => Failure::HeaderTooLarge(message),
        // 429 Too Many Requests: the server pushes back; asked again later, as a 5xx.
        429 | 500..=599 => Failure::ServerError(message),
        404 | 410 => Failure::Missing(message),
        _ => Failure::Fatal(message),
    }
}

/// Run `attempt` until it succeeds, fails in a way `worth_retrying` rejects, or `policy` allows no
/// more attempts (see `source::retry`). `on_retry` runs before each retry.
pub async fn retrying<T, F, Fut>(
    policy: RetryPolicy,
    worth_retrying: impl Fn(&Failure) -> bool,
    on_retry: impl Fn(),
    mut attempt: F,
) -> Result<T, Failure>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Failure>>,
{
    let mut retries = Retries::new(policy);
    loop {
        match attempt().await {
            Err(failure) if retryable(&failure) && worth_retrying(&failure) => {
                let Some(wait) = retries.after_failure() else {
                    return Err(with_attempts(failure, &retries));
                };
                tokio::time::sleep(wait).await;
                on_retry();
            }
            other => return other,
        }
    }
}

fn retryable(failure: &Failure) -> bool {
    matches!(
        failure,
        Failure::Unreachable(_)
            | Failure::TimedOut(_)
            | Failure::ServerError(_)
            | Failure::CutShort(_)
    )
}

fn with_attempts(failure: Failure, retries: &Retries) -> Failure {
    let note = |m: String| format!("{m} (gave up after {})", retries.describe());
    match failure {
        Failure::Unreachable(m) => Failure::Unreachable(note(m)),
        Failure::TimedOut(m) => Failure::TimedOut(note(m)),
        Failure::ServerError(m) => Failure::ServerError(note(m)),
        Failure::CutShort(m) => Failure::CutShort(note(m)),
        other => other,
    }
}

/// A refused certificate or TLS handshake: the TLS layer reports it as an I/O error of kind
/// `InvalidData` (possibly wrapped in another I/O error); connecting again will not change it.
pub fn is_tls_failure(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = error.source();
    while let Some(cause) = next {
        next = match cause.downcast_ref::<std::io::Error>() {
            Some(io) if io.kind() == std::io::ErrorKind::InvalidData => return true,
            // `io::Error::source` skips the wrapped error itself: look at it directly.
            Some(io) => io
                .get_ref()
                .map(|inner| inner as &(dyn std::error::Error + 'static)),
            None => cause.source(),
        };
    }
    false
}

/// An error with its causes ("error sending request: connection refused").
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}

/// The failure of a request abandoned for its rate (see `source::min_rate`).
pub fn too_slow(slow: TooSlow) -> Failure {
    Failure::TimedOut(slow.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn retries_stop_at_the_limit_and_say_so() {
        let mut calls = 0;
        let policy = RetryPolicy {
            retries: 2,
            window: std::time::Duration::from_secs(5),
        };
        let result: Result<(), Failure> = retrying(
            policy,
            |_| true,
            || {},
            || {
                calls += 1;
                async { Err(Failure::ServerError("server answered 503".into())) }
            },
        )
        .await;
        assert_eq!(calls, 3);
        let Err(Failure::ServerError(message)) = result else {
            panic!("{result:?}")
        };
        assert!(
            message.starts_with("server answered 503 (gave up after 3 attempts over "),
            "{message}"
        );

        let mut calls = 0;
        let result: Result<(), Failure> = retrying(
            RetryPolicy::default(),
            |_| true,
            || {},
            || {
                calls += 1;
                async { Err(Failure::Missing("404".into())) }
            },
        )
        .await;
        assert_eq!((calls, result), (1, Err(Failure::Missing("404".into()))));
    }

    #[test]
    fn oversized_headers_are_told_apart_from_other_client_errors() {
        assert!(matches!(
            status_failure(StatusCode::BAD_REQUEST, 5),
            Failure::HeaderTooLarge(_)
        ));
        assert!(matches!(
            status_failure(StatusCode::BAD_REQUEST, 1),
            Failure::Fatal(_)
        ));
        assert!(matches!(
            status_failure(StatusCode::NOT_FOUND, 5),
            Failure::Missing(_)
        ));
        assert_eq!(status_failure(StatusCode::GONE, 1).kind(), IoKind::NotFound);
        assert!(matches!(
            status_failure(StatusCode::BAD_GATEWAY, 5),
            Failure::ServerError(_)
        ));
    }
}
