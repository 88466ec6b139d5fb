//! XRootD over TLS (`roots://`): the client says in `kXR_protocol` that it can and wants TLS
//! (`kXR_ableTLS | kXR_wantTLS`); a server that has TLS answers `kXR_gotoTLS` and starts TLS on the
//! same TCP connection right after that answer; login and authentication follow inside TLS.
//!
//! The handshake and `kXR_protocol` go out in the same write as TLS's ClientHello (a `roots://`
//! client needs TLS anyway, so it need not wait to hear the server agree), and the server's plain
//! answers are taken off the stream before TLS reads its own bytes: TLS costs its own round
//! trip and nothing more. Certificates are checked as for HTTPS (`credentials::TlsOptions`).

use super::protocol::{self as proto, ResponseHeader, RESPONSE_HEADER_LEN};
use super::reply::{ConnError, SMALL_BODY_MAX};
use crate::source::credentials::{MadeForTls, TlsOptions};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// The rustls configuration for `options`, built once per set of options and CA variables
/// (reading the system's CA store takes milliseconds; every connection would pay it).
pub fn client_config(options: &TlsOptions) -> Result<Arc<ClientConfig>, String> {
    static BUILT: MadeForTls<TlsOptions, Arc<ClientConfig>> = MadeForTls::new();
    BUILT.get(options.clone(), |options| {
        build_config(options).map(Arc::new)
    })
}

fn build_config(options: &TlsOptions) -> Result<ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup failed: {e}"))?;
    if options.insecure_skip_verify {
        let verifier = Arc::new(AcceptAnything(provider));
        return Ok(builder
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth());
    }
    let (pems, with_system) = options.extra_roots().map_err(|e| e.to_string())?;
    let mut roots = RootCertStore::empty();
    if with_system {
        // Unreadable system certificates are skipped, as the HTTP side (reqwest) does.
        roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    }
    for pem in pems {
        let certificates = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("a CA certificate could not be read: {e}"))?;
        roots.add_parsable_certificates(certificates);
    }
    if roots.is_empty() {
        return Err(
            "no CA certificate to check servers against (system store empty, no ca=)".into(),
        );
    }
    Ok(builder.with_root_certificates(roots).with_no_client_auth())
}

/// The name `host`'s certificate must carry (an IP address is checked against IP entries).
pub fn server_name(host: &str) -> Result<ServerName<'static>, ConnError> {
    ServerName::try_from(host.to_string())
        .map_err(|_| ConnError::Tls(format!("'{host}' is not a host name TLS can check")))
}

/// Why TLS with `address` failed: the plain XRootD answer when that was the problem (no TLS
/// there), else rustls's reason (certificate not trusted, not for this name, ...).
pub fn tls_failure(address: &str, error: std::io::Error, plain: &PlainAnswers) -> ConnError {
    if let Some(Err(e)) = plain.outcome() {
        return e;
    }
    let certificate = error
        .get_ref()
        .and_then(|e| e.downcast_ref::<rustls::Error>())
        .is_some_and(|e| matches!(e, rustls::Error::InvalidCertificate(_)));
    if certificate {
        ConnError::Tls(format!(
            "TLS with {address} failed, its certificate was not accepted: {error} (trusted: \
             ca=, else the system's CAs, $X509_CERT_DIR and $SSL_CERT_FILE)"
        ))
    } else if error.get_ref().is_some_and(|e| e.is::<rustls::Error>()) {
        ConnError::Tls(format!("TLS with {address} failed: {error}"))
    } else {
        ConnError::Lost(format!(
            "connection to {address} failed during TLS: {error}"
        ))
    }
}

/// Accepts any certificate: the `insecure_skip_verify` opt-out, for tests with made-up
/// certificates only. Signatures are still checked (a broken handshake stays broken).
#[derive(Debug)]
struct AcceptAnything(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AcceptAnything {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// What the server answered in plain to the handshake and `kXR_protocol`: its protocol flags,
/// or why TLS cannot start. Shared: the TLS handshake owns the stream while it is read.
#[derive(Clone, Debug, Default)]
pub struct PlainAnswers(Arc<Mutex<Option<Result<u32, ConnError>>>>);

impl PlainAnswers {
    pub fn outcome(&self) -> Option<Result<u32, ConnError>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
    fn set(&self, outcome: Result<u32, ConnError>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(outcome);
    }
}

/// The TCP stream while TLS starts: the first write puts the XRootD handshake and `kXR_protocol`
/// in front of TLS's first message, and reads take the server's plain answers to them (exactly
/// their bytes, never one of TLS's) before passing TLS's bytes through.
pub struct Negotiating {
    tcp: TcpStream,
    address: String,
    /// Plain requests not yet joined to a TLS write.
    prefix: Option<Vec<u8>>,
    /// Bytes accepted from TLS (with the prefix) but not yet on the wire.
    unsent: Vec<u8>,
    /// The plain answers read so far, until complete.
    plain: Vec<u8>,
    answers: PlainAnswers,
}

impl Negotiating {
    pub fn new(tcp: TcpStream, address: &str, prefix: Vec<u8>, answers: PlainAnswers) -> Self {
        Self {
            tcp,
            address: address.to_string(),
            prefix: Some(prefix),
            unsent: Vec::new(),
            plain: Vec::new(),
            answers,
        }
    }

    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        while !self.unsent.is_empty() {
            let n = ready!(Pin::new(&mut self.tcp).poll_write(cx, &self.unsent))?;
            if n == 0 {
                return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
            }
            self.unsent.drain(..n);
        }
        Poll::Ready(Ok(()))
    }

    /// Read the plain answers; `Ready(Ok)` once they are all in and say TLS starts now.
    fn poll_plain(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        loop {
            if let Some(outcome) = self.answers.outcome() {
                return Poll::Ready(
                    outcome
                        .map(|_| ())
                        .map_err(|e| std::io::Error::other(e.to_string())),
                );
            }
            let missing = match plain_bytes_missing(&self.plain, &self.address) {
                Ok(0) => {
                    let outcome = judge_plain_answers(&self.plain, &self.address);
                    self.answers.set(outcome);
                    continue;
                }
                Ok(n) => n,
                Err(e) => {
                    self.answers.set(Err(e));
                    continue;
                }
            };
            let mut chunk = vec![0u8; missing];
            let mut buf = ReadBuf::new(&mut chunk);
            ready!(Pin::new(&mut self.tcp).poll_read(cx, &mut buf))?;
            if buf.filled().is_empty() {
                self.answers.set(Err(ConnError::Lost(format!(
                    "{} closed the connection before starting TLS",
                    self.address
                ))));
                continue;
            }
            let filled = buf.filled().len();
            self.plain.extend_from_slice(&chunk[..filled]);
        }
    }
}

/// Bytes still to read of the handshake answer and the `kXR_protocol` answer (two frames).
fn plain_bytes_missing(plain: &[u8], address: &str) -> Result<usize, ConnError> {
    let mut at = 0;
    for _ in 0..2 {
        if plain.len() < at + RESPONSE_HEADER_LEN {
            return Ok(at + RESPONSE_HEADER_LEN - plain.len());
        }
        let head: &[u8; RESPONSE_HEADER_LEN] = plain[at..at + RESPONSE_HEADER_LEN]
            .try_into()
            .expect("length checked");
        let len = ResponseHeader::decode(head).dlen as usize;
        if len > SMALL_BODY_MAX {
            return Err(ConnError::Protocol(format!(
                "{address} sent an implausible {len}-byte answer to the handshake"
            )));
        }
        at += RESPONSE_HEADER_LEN + len;
        if plain.len() < at {
            return Ok(at - plain.len());
        }
    }
    Ok(0)
}

/// The server's protocol flags when it agreed to start TLS now; else why not.
fn judge_plain_answers(plain: &[u8], address: &str) -> Result<u32, ConnError> {
    let not_xrootd = || {
        ConnError::Protocol(format!(
            "{address} is not an XRootD server (unexpected answer to the handshake)"
        ))
    };
    let frame = |at: usize| {
        let head: &[u8; RESPONSE_HEADER_LEN] = plain[at..at + RESPONSE_HEADER_LEN]
            .try_into()
            .expect("length checked");
        ResponseHeader::decode(head)
    };
    let handshake = frame(0);
    if handshake.stream_id != 0 || handshake.status != proto::KXR_OK || handshake.dlen != 8 {
        return Err(not_xrootd());
    }
    let at = RESPONSE_HEADER_LEN + 8;
    let head = frame(at);
    let body = &plain[at + RESPONSE_HEADER_LEN..];
    match head.status {
        proto::KXR_OK => {}
        proto::KXR_ERROR => {
            let (code, message) = proto::parse_error(body);
            return Err(ConnError::Tls(format!(
                "{address} refused TLS (roots://): {message} ({} {code})",
                proto::error_name(code)
            )));
        }
        _ => return Err(not_xrootd()),
    }
    let (_version, flags) = proto::parse_protocol(body).ok_or_else(|| {
        ConnError::Protocol(format!("{address} sent a malformed kXR_protocol answer"))
    })?;
    if flags & proto::KXR_GOTO_TLS == 0 {
        return Err(ConnError::Tls(format!(
            "{address} does not offer TLS, which roots:// requires (use root:// to read without \
             encryption)"
        )));
    }
    Ok(flags)
}

impl AsyncRead for Negotiating {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_plain(cx))?;
        Pin::new(&mut this.tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for Negotiating {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        if let Some(mut prefix) = this.prefix.take() {
            // One write, one packet: the plain requests and TLS's ClientHello travel together.
            prefix.extend_from_slice(buf);
            this.unsent = prefix;
            if let Poll::Ready(Err(e)) = this.drain(cx) {
                return Poll::Ready(Err(e));
            }
            return Poll::Ready(Ok(buf.len()));
        }
        ready!(this.drain(cx))?;
        Pin::new(&mut this.tcp).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        ready!(this.drain(cx))?;
        Pin::new(&mut this.tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        ready!(this.drain(cx))?;
        Pin::new(&mut this.tcp).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(stream: u16, status: u16, body: &[u8]) -> Vec<u8> {
        let mut f = stream.to_be_bytes().to_vec();
        f.extend(status.to_be_bytes());
        f.extend((body.len() as u32).to_be_bytes());
        f.extend(body);
        f
    }

    #[test]
    fn plain_answers_are_read_to_their_last_byte_only() {
        let mut plain = frame(0, 0, &[0; 8]);
        let mut protocol = 0x520u32.to_be_bytes().to_vec();
        protocol.extend((proto::KXR_GOTO_TLS | 1).to_be_bytes());
        plain.extend(frame(1, 0, &protocol));
        for cut in 0..plain.len() {
            let missing = plain_bytes_missing(&plain[..cut], "h:1").unwrap();
            assert!(missing > 0 && cut + missing <= plain.len(), "cut {cut}");
        }
        assert_eq!(plain_bytes_missing(&plain, "h:1").unwrap(), 0);
        assert!(judge_plain_answers(&plain, "h:1").is_ok());
    }

    #[test]
    fn a_server_without_tls_or_refusing_it_says_so() {
        let mut plain = frame(0, 0, &[0; 8]);
        let mut protocol = 0x520u32.to_be_bytes().to_vec();
        protocol.extend(1u32.to_be_bytes());
        plain.extend(frame(1, 0, &protocol));
        let e = judge_plain_answers(&plain, "h:1").unwrap_err().to_string();
        assert!(e.contains("h:1 does not offer TLS"), "{e}");
        let mut refused = frame(0, 0, &[0; 8]);
        let mut error = 3030u32.to_be_bytes().to_vec();
        error.extend(b"TLS not configured\0");
        refused.extend(frame(1, proto::KXR_ERROR, &error));
        let e = judge_plain_answers(&refused, "h:1")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("refused TLS") && e.contains("TLS not configured"),
            "{e}"
        );
        let huge = frame(0, 0, &[0; 8])
            .into_iter()
            .chain([0, 1, 0, 0, 0x7f, 0, 0, 0])
            .collect::<Vec<_>>();
        assert!(plain_bytes_missing(&huge, "h:1").is_err());
    }
}
