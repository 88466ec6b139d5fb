//! HTTPS with credentials against a real nginx on 127.0.0.1: a CA and host certificate made by
//! the test with `openssl`, a server that answers 401 unless it gets the right bearer token (or
//! user and password). Every read equals the file on disk; each way of getting it wrong (CA,
//! host name, token missing, wrong, changed, in a loose or missing file) has its own clear
//! error, and no message shows a secret.

mod support;

use cherenkov_core::source::credentials::TlsOptions;
use cherenkov_core::source::http::{HttpOptions, HttpSource};
use cherenkov_core::source::redact::Secret;
use cherenkov_core::source::RequestPolicy;
use cherenkov_core::source::{self, ByteRange, ByteSource, SourceOptions};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, SystemTime};
use support::nginx::Nginx;
use support::pki::Pki;
use support::{assert_ranges_equal, bounded, Random, TempDir};

const TOKEN: &str = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ0ZXN0In0.dGVzdC1zaWduYXR1cmU";
const SECOND_TOKEN: &str = "renewed-token-0123456789";
/// `alice:s3cret-pw` as HTTP Basic sends it.
const BASIC: &str = "YWxpY2U6czNjcmV0LXB3";
const SECRETS: [&str; 3] = [TOKEN, SECOND_TOKEN, "s3cret-pw"];

/// A data file, the certificates, and nginx answering 401 unless it gets one of the tokens or
/// alice's password.
struct Server {
    file: Vec<u8>,
    pki: Pki,
    nginx: Nginx,
    _data: TempDir,
}

fn start() -> Option<Server> {
    let pki = Pki::make()?;
    let data = TempDir::new("auth-data");
    let file = Random::new(19).bytes(3 << 20);
    data.write("file.bin", &file);
    let check = format!(
        "set $allowed no;
    if ($http_authorization = \"Bearer {TOKEN}\") {{ set $allowed yes; }}
    if ($http_authorization = \"Bearer {SECOND_TOKEN}\") {{ set $allowed yes; }}
    if ($http_authorization = \"Basic {BASIC}\") {{ set $allowed yes; }}
    if ($allowed = no) {{ return 401; }}"
    );
    let nginx = Nginx::start_https(
        data.path(),
        &check,
        &pki.path("host.pem"),
        &pki.path("host.key"),
    )?;
    Some(Server {
        file,
        pki,
        nginx,
        _data: data,
    })
}

impl Server {
    fn options(&self, token: Option<&str>) -> HttpOptions {
        HttpOptions {
            token: token.map(Secret::new),
            tls: TlsOptions {
                ca: Some(self.pki.path("ca.pem")),
                insecure_skip_verify: false,
            },
            policy: RequestPolicy::with_timeout(Duration::from_secs(10)).with_retries(1),
            ..HttpOptions::default()
        }
    }
}

/// Ranges all over the file, so that reads need requests after the opening one.
fn ranges() -> Vec<ByteRange> {
    let mut random = Random::new(7);
    (0..64)
        .map(|_| ByteRange::new(random.below((3 << 20) - 4000), 4000))
        .collect()
}

async fn assert_reads_match(source: &dyn ByteSource, file: &[u8]) {
    let before = source.report().counters.requests;
    let ranges = ranges();
    assert_ranges_equal(source, &ranges, file).await;
    assert!(
        source.report().counters.requests > before,
        "the data came from requests after opening"
    );
}

fn assert_no_secret(text: &str) {
    for secret in SECRETS {
        assert!(!text.contains(secret), "a secret is shown: {text}");
    }
}

async fn open_error(url: &str, options: HttpOptions) -> String {
    let message = HttpSource::open(url, options)
        .await
        .map(|_| ())
        .expect_err("the open must fail")
        .to_string();
    println!("{message}");
    assert_no_secret(&message);
    message
}

#[tokio::test]
async fn a_token_over_https_reads_every_range_like_the_file() {
    let Some(server) = start() else { return };
    bounded(async {
        let url = server.nginx.url("file.bin");
        let source = HttpSource::open(&url, server.options(Some(TOKEN)))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_reads_match(&source, &server.file).await;
        assert_no_secret(&format!("{source:?}"));

        // davs:// is the same server, read the same way.
        let davs = url.replacen("https://", "davs://", 1);
        let options = SourceOptions {
            token: Some(Secret::new(TOKEN)),
            tls: server.options(None).tls,
            ..SourceOptions::default()
        };
        let source = source::open(&davs, &options)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .source;
        assert_eq!(source.name(), davs);
        assert_reads_match(source.as_ref(), &server.file).await;
    })
    .await;
}

#[tokio::test]
async fn a_password_in_the_url_goes_with_every_request_and_is_never_shown() {
    let Some(server) = start() else { return };
    bounded(async {
        let url = server
            .nginx
            .url("file.bin")
            .replacen("https://", "https://alice:s3cret-pw@", 1);
        let source = HttpSource::open(&url, server.options(None))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_reads_match(&source, &server.file).await;
        assert_no_secret(source.name());
        assert_no_secret(&format!("{source:?}"));
        let past_end = source
            .read_ranges(&[ByteRange::new(3 << 20, 10)])
            .await
            .unwrap_err();
        assert_no_secret(&past_end.to_string());

        let wrong = url.replacen("s3cret-pw", "wrong-pw", 1);
        let message = open_error(&wrong, server.options(None)).await;
        assert!(
            message.contains("refused the user and password of 'alice'"),
            "{message}"
        );
        assert!(!message.contains("wrong-pw"), "{message}");
    })
    .await;
}

#[tokio::test]
async fn each_wrong_certificate_or_token_has_its_own_error() {
    let Some(server) = start() else { return };
    bounded(async {
        let url = server.nginx.url("file.bin");
        let host = format!("127.0.0.1:{}", server.nginx.port());

        let mut other_ca = server.options(Some(TOKEN));
        other_ca.tls.ca = Some(server.pki.path("other-ca.pem"));
        let message = open_error(&url, other_ca).await;
        assert!(
            message.contains(&format!("TLS with {host} failed")),
            "{message}"
        );
        assert!(message.contains("UnknownIssuer"), "{message}");

        // The system's CAs do not know the test's CA either.
        let mut system_only = server.options(Some(TOKEN));
        system_only.tls.ca = None;
        let message = open_error(&url, system_only).await;
        assert!(message.contains("UnknownIssuer"), "{message}");

        let by_name = url.replacen("127.0.0.1", "localhost", 1);
        let message = open_error(&by_name, server.options(Some(TOKEN))).await;
        assert!(message.contains("TLS with localhost"), "{message}");
        assert!(message.contains("not valid for name"), "{message}");

        let message = open_error(&url, server.options(Some("not-the-token"))).await;
        assert!(
            message.contains("refused the token given with token= (401 Unauthorized)"),
            "{message}"
        );

        // The loudly named opt-out: no CA needed, the token still checked.
        let mut insecure = server.options(Some(TOKEN));
        insecure.tls = TlsOptions {
            ca: None,
            insecure_skip_verify: true,
        };
        let source = HttpSource::open(&url, insecure)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_reads_match(&source, &server.file).await;
    })
    .await;
}

fn write_token(path: &Path, token: &str, mode: u32, modified: SystemTime) {
    std::fs::write(path, token).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(modified)
        .unwrap();
}

/// Discovery reads the environment, which all tests of this binary share: every case that
/// depends on it is here, one after the other.
#[tokio::test]
async fn tokens_are_found_as_wlcg_says_and_read_again_when_renewed() {
    let Some(server) = start() else { return };
    let tokens = TempDir::new("tokens");
    bounded(async {
        let url = server.nginx.url("file.bin");
        for variable in ["BEARER_TOKEN", "BEARER_TOKEN_FILE", "XDG_RUNTIME_DIR"] {
            std::env::remove_var(variable);
        }
        let default_file = format!("/tmp/bt_u{}", user_id());
        if Path::new(&default_file).exists() {
            eprintln!("SKIPPED: {default_file} exists; discovery would find it");
            return;
        }

        let message = open_error(&url, server.options(None)).await;
        assert!(
            message.contains("asks for credentials (401 Unauthorized) and none were found"),
            "{message}"
        );

        std::env::set_var("BEARER_TOKEN", TOKEN);
        let source = HttpSource::open(&url, server.options(None)).await.unwrap();
        assert_reads_match(&source, &server.file).await;
        std::env::remove_var("BEARER_TOKEN");

        // $XDG_RUNTIME_DIR/bt_u<uid>, renewed in place while the file is open.
        std::env::set_var("XDG_RUNTIME_DIR", tokens.path());
        let file = tokens.path().join(format!("bt_u{}", user_id()));
        let start = SystemTime::now();
        write_token(&file, TOKEN, 0o600, start);
        let source = HttpSource::open(&url, server.options(None)).await.unwrap();
        assert_reads_match(&source, &server.file).await;
        write_token(&file, SECOND_TOKEN, 0o600, start + Duration::from_secs(10));
        assert_reads_match(&source, &server.file).await;
        write_token(
            &file,
            "expired-token",
            0o600,
            start + Duration::from_secs(20),
        );
        let refused = source.read_ranges(&ranges()).await.unwrap_err().to_string();
        println!("{refused}");
        assert!(
            refused.contains(&format!("refused the token in {}", file.display())),
            "{refused}"
        );
        assert_no_secret(&refused);
        std::env::remove_var("XDG_RUNTIME_DIR");

        // $BEARER_TOKEN_FILE: loose permissions and a missing file are refused, naming the file.
        let named = tokens.path().join("token");
        write_token(&named, TOKEN, 0o644, start);
        std::env::set_var("BEARER_TOKEN_FILE", &named);
        let message = open_error(&url, server.options(None)).await;
        assert!(
            message.contains(&named.display().to_string()) && message.contains("chmod 600"),
            "{message}"
        );
        std::fs::remove_file(&named).unwrap();
        let message = open_error(&url, server.options(None)).await;
        assert!(
            message.contains(&named.display().to_string()) && message.contains("No such file"),
            "{message}"
        );
        std::env::remove_var("BEARER_TOKEN_FILE");
    })
    .await;
}

/// This process's user id (as `credentials` finds it: the owner of /proc/self).
fn user_id() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(0)
}
