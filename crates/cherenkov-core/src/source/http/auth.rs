//! Credentials and trust over HTTP: the `Authorization` header sent with every request of a
//! file (a bearer token, or the `user:password@` of its URL), the CAs a server's certificate
//! is checked against, and one clear error when a server refuses the credentials.

use super::failure::Failure;
use crate::error::{Error, Result};
use crate::source::credentials::{BearerToken, TlsOptions, TOKEN_DISCOVERY};
use crate::source::redact::Secret;
use reqwest::{RequestBuilder, StatusCode, Url};

/// What every request of one file carries.
#[derive(Debug, Default)]
pub struct HttpAuth {
    /// `user:password@` taken out of the URL: reqwest sends it with the first request only and
    /// forgets it in the URL it reports, so it is kept here and sent each time.
    basic: Option<(String, Secret)>,
    bearer: Option<BearerToken>,
}

impl HttpAuth {
    /// Take the user and password out of `url` and find the bearer token. A token that was
    /// only discovered (not given with `token=`) goes to `https://` servers only: sending it in
    /// clear text to any `http://` URL would give it away.
    pub fn for_url(url: &mut Url, token: Option<&Secret>) -> Result<HttpAuth> {
        let basic = (!url.username().is_empty() || url.password().is_some()).then(|| {
            let user = percent_decoded(url.username());
            let password = Secret::new(percent_decoded(url.password().unwrap_or_default()));
            (user, password)
        });
        let _ = url.set_username("");
        let _ = url.set_password(None);
        let bearer = if token.is_some() || url.scheme() == "https" {
            BearerToken::discover(token)?
        } else {
            None
        };
        Ok(HttpAuth { basic, bearer })
    }

    /// `request` with this file's `Authorization` header (the token file re-read if it changed).
    pub fn apply(&self, request: RequestBuilder) -> Result<RequestBuilder, Failure> {
        if let Some(token) = &self.bearer {
            let current = token.current().map_err(|e| Failure::Fatal(e.to_string()))?;
            return Ok(request.bearer_auth(current.expose()));
        }
        Ok(match &self.basic {
            Some((user, password)) => request.basic_auth(user, Some(password.expose())),
            None => request,
        })
    }

    /// The one error for a 401 or 403 answer: which credentials were refused (never retried,
    /// never read again without them).
    pub fn refused(&self, status: StatusCode) -> Failure {
        let what = match (&self.bearer, &self.basic) {
            (Some(token), _) => format!(
                "the server refused {} ({status}): expired, revoked, or not valid for this file",
                token.origin()
            ),
            (None, Some((user, _))) => {
                format!("the server refused the user and password of '{user}' ({status})")
            }
            (None, None) => format!(
                "the server asks for credentials ({status}) and none were found \
                 (looked in {TOKEN_DISCOVERY})"
            ),
        };
        Failure::Refused(what)
    }
}

/// Whether an answer means the credentials were refused (or are missing).
pub fn is_refusal(status: StatusCode) -> bool {
    matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
}

/// A client builder trusting what `tls` says (the system's CAs plus `$X509_CERT_DIR` and
/// `$SSL_CERT_FILE`, or only `ca=`), or checking nothing when the test opt-out is set.
pub fn trusting(
    mut builder: reqwest::ClientBuilder,
    tls: &TlsOptions,
) -> Result<reqwest::ClientBuilder> {
    if tls.insecure_skip_verify {
        return Ok(builder.danger_accept_invalid_certs(true));
    }
    let (pems, with_system) = tls.extra_roots()?;
    for pem in pems {
        let name = tls
            .ca
            .as_ref()
            .map_or("a CA certificate".to_string(), |p| p.display().to_string());
        for certificate in reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|e| Error::io_caused(&name, "not a PEM certificate", e))?
        {
            builder = builder.add_root_certificate(certificate);
        }
    }
    Ok(builder.tls_built_in_root_certs(with_system))
}

/// `davs://` is WebDAV over HTTPS (as `dav://` over HTTP): the same requests, read as such.
pub fn web_url(url: &str) -> std::borrow::Cow<'_, str> {
    match url.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("davs") => {
            format!("https://{rest}").into()
        }
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("dav") => {
            format!("http://{rest}").into()
        }
        _ => url.into(),
    }
}

fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_credentials_leave_the_url_and_are_kept() {
        let mut url = Url::parse("http://al%40ice:p%3Ass@h:8080/f.root").unwrap();
        let auth = HttpAuth::for_url(&mut url, None).unwrap();
        assert_eq!(url.as_str(), "http://h:8080/f.root");
        let (user, password) = auth.basic.as_ref().unwrap();
        assert_eq!((user.as_str(), password.expose()), ("al@ice", "p:ss"));
        assert!(!format!("{auth:?}").contains("p:ss"));
    }

    #[test]
    fn dav_schemes_read_as_http() {
        assert_eq!(web_url("davs://h/f"), "https://h/f");
        assert_eq!(web_url("DAV://h/f"), "http://h/f");
        assert_eq!(web_url("https://h/f"), "https://h/f");
    }
}
