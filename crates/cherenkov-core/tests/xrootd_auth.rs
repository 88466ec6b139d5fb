//! XRootD over TLS (`roots://`), against real xrootd servers on
//! 127.0.0.1 started by the test: a CA and host certificate made with `openssl` (`xrd.tls`),
//! and a server that requires it. Every read equals the file on disk; each way of getting it
//! wrong has its own clear error; a server asking for `unix` (first open: learnt from the login's
//! answer; later ones: sent with the login). (`ztn` tokens need the SciTokens plugin and its key cache in the
//! server's environment: tests/test_xrootd_auth.py.)

mod support;

use cherenkov_core::source::credentials::TlsOptions;
use cherenkov_core::source::redact::Secret;
use cherenkov_core::source::xrootd::{XrootdOptions, XrootdSource};
use cherenkov_core::source::RequestPolicy;
use cherenkov_core::source::{self, ByteRange, ByteSource, SourceOptions};
use std::path::Path;
use std::time::Duration;
use support::pki::Pki;
use support::xrootd::{running_as_root, XrootdServer};
use support::{assert_ranges_equal, bounded, Random, TempDir};

const FILE_LEN: u64 = 3 << 20;

/// The test's data, certificates and a server with TLS (plus `extra` configuration lines).
struct Setup {
    file: Vec<u8>,
    pki: Pki,
    server: XrootdServer,
    _data: TempDir,
}

/// xrootd drops to `nobody` and refuses a private key others may read: the key is handed over.
fn give_key_to_the_server(key: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(key, std::fs::Permissions::from_mode(0o600)).unwrap();
    if running_as_root() {
        // nobody:nogroup on Debian.
        std::os::unix::fs::chown(key, Some(65534), Some(65534)).unwrap();
    }
}

fn start(extra: &str) -> Option<Setup> {
    let pki = Pki::make()?;
    give_key_to_the_server(&pki.path("host.key"));
    let data = TempDir::new("xrootd-auth-data");
    let file = Random::new(23).bytes(FILE_LEN as usize);
    data.write("file.bin", &file);
    let config = format!(
        "xrd.tls {} {}\nxrd.tlsca certfile {}\n{extra}",
        pki.path("host.pem").display(),
        pki.path("host.key").display(),
        pki.path("ca.pem").display(),
    );
    let server = XrootdServer::start(data.path(), &config)?;
    Some(Setup {
        file,
        pki,
        server,
        _data: data,
    })
}

impl Setup {
    fn url(&self, scheme: &str) -> String {
        format!("{scheme}://127.0.0.1:{}//file.bin", self.server.port())
    }

    fn options(&self) -> XrootdOptions {
        XrootdOptions {
            tls: TlsOptions {
                ca: Some(self.pki.path("ca.pem")),
                insecure_skip_verify: false,
            },
            policy: RequestPolicy::with_timeout(Duration::from_secs(10)).with_retries(1),
            ..XrootdOptions::default()
        }
    }
}

async fn assert_reads_match(source: &dyn ByteSource, file: &[u8]) {
    let mut random = Random::new(5);
    let ranges: Vec<ByteRange> = (0..200)
        .map(|_| ByteRange::new(random.below(FILE_LEN - 5000), 1 + random.below(5000)))
        .collect();
    assert_ranges_equal(source, &ranges, file).await;
}

async fn open_error(url: &str, options: XrootdOptions) -> String {
    let message = XrootdSource::open(url, options)
        .await
        .map(|_| ())
        .expect_err("the open must fail")
        .to_string();
    println!("{message}");
    message
}

#[tokio::test]
async fn roots_reads_equal_the_file_and_bad_certificates_are_refused_by_name() {
    bounded(async {
        let Some(setup) = start("") else { return };
        for scheme in ["roots", "xroots"] {
            let source = XrootdSource::open(&setup.url(scheme), setup.options())
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(source.size(), FILE_LEN);
            assert_reads_match(&source, &setup.file).await;
        }
        // A token sent ahead with the login to a server that asks for none is harmless.
        let with_token = XrootdOptions {
            token: Some(Secret::new("eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.c2ln")),
            ..setup.options()
        };
        for _ in 0..2 {
            let source = XrootdSource::open(&setup.url("roots"), with_token.clone())
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            assert_reads_match(&source, &setup.file).await;
        }
        // The same server read without TLS still works (TLS is the client's choice here).
        let plain = XrootdSource::open(&setup.url("root"), setup.options())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_reads_match(&plain, &setup.file).await;

        let address = format!("127.0.0.1:{}", setup.server.port());
        let mut other_ca = setup.options();
        other_ca.tls.ca = Some(setup.pki.path("other-ca.pem"));
        let message = open_error(&setup.url("roots"), other_ca).await;
        assert!(message.contains(&address), "{message}");
        assert!(
            message.contains("certificate was not accepted"),
            "{message}"
        );
        assert!(message.contains("UnknownIssuer"), "{message}");

        // The certificate is for 127.0.0.1, not for localhost.
        let wrong_name = setup.url("roots").replace("127.0.0.1", "localhost");
        let message = open_error(&wrong_name, setup.options()).await;
        assert!(
            message.contains("certificate was not accepted"),
            "{message}"
        );
        assert!(
            message.contains("not valid for name \"localhost\""),
            "{message}"
        );

        let mut skip = setup.options();
        skip.tls = TlsOptions {
            ca: None,
            insecure_skip_verify: true,
        };
        let source = XrootdSource::open(&wrong_name, skip).await.unwrap();
        assert_reads_match(&source, &setup.file).await;

        // Through source::open, as the Python API opens it.
        let options = SourceOptions {
            tls: setup.options().tls,
            ..SourceOptions::default()
        };
        let source = source::open(&setup.url("roots"), &options)
            .await
            .unwrap()
            .source;
        assert_reads_match(source.as_ref(), &setup.file).await;
    })
    .await;
}

#[tokio::test]
async fn roots_to_a_server_without_tls_says_so() {
    bounded(async {
        let data = TempDir::new("xrootd-plain");
        data.write("file.bin", b"0123456789");
        let Some(server) = XrootdServer::start(data.path(), "") else {
            return;
        };
        let url = format!("roots://127.0.0.1:{}//file.bin", server.port());
        let options = XrootdOptions {
            policy: RequestPolicy::with_timeout(Duration::from_secs(10)).with_retries(0),
            ..XrootdOptions::default()
        };
        let message = open_error(&url, options).await;
        assert!(message.contains("does not offer TLS"), "{message}");
    })
    .await;
}

#[tokio::test]
async fn root_to_a_server_requiring_tls_switches_to_tls() {
    bounded(async {
        let Some(setup) = start("xrootd.tls all\n") else {
            return;
        };
        // As XrdCl does: the root:// open connects again with TLS, checking the certificate.
        let source = XrootdSource::open(&setup.url("root"), setup.options())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_reads_match(&source, &setup.file).await;
        let mut other_ca = setup.options();
        other_ca.tls.ca = Some(setup.pki.path("other-ca.pem"));
        let message = open_error(&setup.url("root"), other_ca).await;
        assert!(
            message.contains("certificate was not accepted"),
            "{message}"
        );
    })
    .await;
}

#[tokio::test]
async fn a_server_asking_for_unix_is_answered_first_after_its_login_then_with_it() {
    bounded(async {
        let data = TempDir::new("xrootd-unix");
        let file = Random::new(3).bytes(FILE_LEN as usize);
        data.write("file.bin", &file);
        let config = "xrootd.seclib libXrdSec.so\nsec.protocol unix\nsec.protbind * only unix\n";
        let Some(server) = XrootdServer::start(data.path(), config) else {
            return;
        };
        let url = format!("root://127.0.0.1:{}//file.bin", server.port());
        // No retries: neither the first open (whose login learns what the server wants, the
        // server closing that connection) nor the later ones may lose a connection.
        let options = XrootdOptions {
            policy: RequestPolicy::with_timeout(Duration::from_secs(10)).with_retries(0),
            ..XrootdOptions::default()
        };
        for _ in 0..2 {
            let source = XrootdSource::open(&url, options.clone())
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            assert_reads_match(&source, &file).await;
        }
    })
    .await;
}
