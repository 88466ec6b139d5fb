//! Secrets stay secret: one function, [`redact`], removes what must never be printed from any
//! text that may hold a URL (error messages, names, statistics, traces, logs), and [`Secret`]
//! holds a credential so that `Debug` cannot show it.
//!
//! What counts as secret: the password of `user:password@host` (and a user part without a
//! password, which is how tokens are often passed: `https://TOKEN@host`), the values of query
//! parameters that carry credentials (`authz=`, `access_token=`, `bearer_token=`, signatures),
//! the word after `Bearer`, and anything shaped like a JSON web token (`eyJ...x.y.z`), which is
//! what WLCG tokens are.

use crate::error::Error;

/// What replaces a secret.
pub const REDACTED: &str = "***";

/// Query parameters whose values are credentials (compared without case). `authz` is XRootD's
/// (and EOS's) token parameter; the others are OAuth's, WebDAV's and the object stores'.
const SECRET_PARAMETERS: &[&str] = &[
    "authz",
    "access_token",
    "bearer_token",
    "token",
    "password",
    "passwd",
    "secret",
    "signature",
    "sig",
    "x-amz-signature",
    "x-amz-credential",
    "x-amz-security-token",
    "xrd.sss",
];

/// `text` with every secret replaced by `***`; text without secrets comes back unchanged.
pub fn redact(text: &str) -> String {
    let text = redact_userinfo(text);
    let text = redact_parameters(&text);
    let text = redact_after_bearer(&text);
    redact_jwts(&text)
}

/// An error whose file name and message went through [`redact`].
pub fn redact_error(error: Error) -> Error {
    match error {
        Error::Format {
            file,
            location,
            expected,
        } => Error::Format {
            file: redact(&file),
            location,
            expected: redact(&expected),
        },
        Error::Io {
            file,
            message,
            kind,
            cause,
        } => Error::Io {
            file: redact(&file),
            message: redact(&message),
            kind,
            cause,
        },
        Error::UnsupportedBranch {
            file,
            branch,
            typename,
            reason,
        } => Error::UnsupportedBranch {
            file: redact(&file),
            branch,
            typename,
            reason,
        },
        Error::NotFound { file, what } => Error::NotFound {
            file: redact(&file),
            what: redact(&what),
        },
        Error::InvalidArgument(m) => Error::InvalidArgument(redact(&m)),
        Error::Cancelled(m) => Error::Cancelled(redact(&m)),
    }
}

/// A credential (token, password): compared and cloned like a string, never shown by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }
    /// The secret itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(REDACTED)
    }
}

/// Characters that end a URL inside running text.
fn ends_url(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`' | ')' | ']' | ',')
}

/// `scheme://user:password@host` becomes `scheme://user:***@host`, `scheme://token@host` becomes
/// `scheme://***@host`.
fn redact_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        let authority_len = after
            .find(|c: char| ends_url(c) || matches!(c, '/' | '?' | '#'))
            .unwrap_or(after.len());
        let authority = &after[..authority_len];
        match authority.rfind('@') {
            Some(at) => {
                let userinfo = &authority[..at];
                match userinfo.split_once(':') {
                    Some((user, _password)) => {
                        out.push_str(user);
                        out.push(':');
                        out.push_str(REDACTED);
                    }
                    None => out.push_str(REDACTED),
                }
                out.push_str(&authority[at..]);
            }
            None => out.push_str(authority),
        }
        rest = &after[authority_len..];
    }
    out.push_str(rest);
    out
}

/// `?authz=VALUE&x=1` becomes `?authz=***&x=1` (after `?` or `&` only, any case).
fn redact_parameters(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(['?', '&']) {
        let (before, after) = rest.split_at(i + 1);
        out.push_str(before);
        let name_len = after.find('=').filter(|&n| {
            !after[..n].contains(|c: char| ends_url(c) || matches!(c, '&' | '?' | '/'))
        });
        match name_len {
            Some(n)
                if SECRET_PARAMETERS
                    .iter()
                    .any(|p| p.eq_ignore_ascii_case(&after[..n])) =>
            {
                out.push_str(&after[..=n]);
                let value_len = after[n + 1..]
                    .find(|c: char| ends_url(c) || matches!(c, '&' | '#'))
                    .unwrap_or(after.len() - n - 1);
                if value_len > 0 {
                    out.push_str(REDACTED);
                }
                rest = &after[n + 1 + value_len..];
            }
            _ => rest = after,
        }
    }
    out.push_str(rest);
    out
}

/// `Bearer VALUE` becomes `Bearer ***` (an `Authorization` header quoted in a message), in any
/// case: cherenkov's own messages say "token", never "bearer" before a word that must stay.
fn redact_after_bearer(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = find_ignore_case(rest, "bearer ") {
        let (before, after) = rest.split_at(i + "bearer ".len());
        out.push_str(before);
        let value_len = after.find(ends_url).unwrap_or(after.len());
        if value_len > 0 {
            out.push_str(REDACTED);
        }
        rest = &after[value_len..];
    }
    out.push_str(rest);
    out
}

/// Three base64url pieces joined by dots, the first starting with `eyJ` (`{"` encoded): a JSON
/// web token, wherever it appears.
fn redact_jwts(text: &str) -> String {
    let is_b64 = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("eyJ") {
        let (before, candidate) = rest.split_at(i);
        let starts_word = !before.ends_with(is_b64);
        let len = candidate
            .find(|c: char| !(is_b64(c) || c == '.'))
            .unwrap_or(candidate.len());
        let token = &candidate[..len];
        out.push_str(before);
        if starts_word && token.split('.').count() >= 3 {
            out.push_str(REDACTED);
            rest = &candidate[len..];
        } else {
            out.push_str("eyJ");
            rest = &candidate[3..];
        }
    }
    out.push_str(rest);
    out
}

fn find_ignore_case(haystack: &str, needle: &str) -> Option<usize> {
    haystack
        .as_bytes()
        .windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const JWT: &str = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl";

    #[test]
    fn passwords_in_urls_are_hidden_but_the_rest_stays() {
        assert_eq!(
            redact("https://alice:hunter2@host:8443/data/f.root: not found"),
            "https://alice:***@host:8443/data/f.root: not found"
        );
        assert_eq!(
            redact("root://SECRET@eos.cern.ch//f.root"),
            "root://***@eos.cern.ch//f.root"
        );
        assert_eq!(redact("a@b in text, no URL"), "a@b in text, no URL");
        let plain = "root://host:1094//data/f.root?xrd.wantprot=unix: file size 3 bytes";
        assert_eq!(redact(plain), plain);
    }

    #[test]
    fn credential_parameters_are_hidden_in_any_case_and_position() {
        assert_eq!(
            redact("root://h//f.root?authz=abc%20def&xrd.wantprot=ztn"),
            "root://h//f.root?authz=***&xrd.wantprot=ztn"
        );
        assert_eq!(
            redact("https://h/f?x=1&Access_Token=zzz#frag and more"),
            "https://h/f?x=1&Access_Token=***#frag and more"
        );
        assert_eq!(
            redact("'https://h/f?bearer_token=zzz'"),
            "'https://h/f?bearer_token=***'"
        );
        assert_eq!(redact("https://h/f?tokens=1"), "https://h/f?tokens=1");
    }

    #[test]
    fn bearer_values_and_jwts_are_hidden_anywhere() {
        assert_eq!(
            redact("sent Authorization: Bearer abc.def"),
            "sent Authorization: Bearer ***"
        );
        assert_eq!(
            redact(&format!("token {JWT} was refused")),
            "token *** was refused"
        );
        assert_eq!(redact("eyJ alone, xeyJa.b.c"), "eyJ alone, xeyJa.b.c");
    }

    #[test]
    fn every_error_kind_is_redacted() {
        let e = redact_error(Error::io(
            "https://u:pw@h/f",
            format!("redirected to https://h2/f?authz={JWT}"),
        ));
        let text = e.to_string();
        assert!(!text.contains("pw@") && !text.contains(JWT), "{text}");
        assert_eq!(format!("{:?}", Secret::new("pw")), "***");
    }
}
