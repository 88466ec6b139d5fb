//! XRootD `sss` (shared secret) authentication against a real xrootd on 127.0.0.1 started by the
//! test, with `sec.protbind * only sss` and a keytab made by `xrdsssadmin`: reads equal the file
//! (first connection: kXR_auth after the login's answer; later ones: sent with the login), and a
//! wrong key, an expired key, a loose or missing keytab each give their own clear error, none
//! showing the key.

mod support;

use cherenkov_core::source::xrootd::{XrootdOptions, XrootdSource};
use cherenkov_core::source::RequestPolicy;
use cherenkov_core::source::{self, ByteRange, ByteSource, SourceOptions};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use support::toxiproxy::Toxiproxy;
use support::xrootd::{running_as_root, XrootdServer};
use support::{assert_ranges_equal, bounded, find_binary, Random, TempDir};

const FILE_LEN: u64 = 1 << 20;

/// A new keytab at `path` with one key named `name` (`xrdsssadmin add`), owner-only.
fn make_keytab(path: &Path, name: &str) -> Option<String> {
    let Some(admin) = find_binary(&["xrdsssadmin"]) else {
        eprintln!("SKIPPED: xrdsssadmin is not installed (Debian package xrootd-client)");
        return None;
    };
    let status = Command::new(admin)
        .args(["-k", name, "-u", "anybody", "-g", "usrgroup", "add"])
        .arg(path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run xrdsssadmin");
    assert!(status.success(), "xrdsssadmin failed");
    set_mode(path, 0o600);
    Some(std::fs::read_to_string(path).unwrap())
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The hex key of a keytab's only line, to search for in everything shown.
fn key_hex(keytab_text: &str) -> String {
    keytab_text
        .split_whitespace()
        .find_map(|f| f.strip_prefix("k:"))
        .expect("a key")
        .to_string()
}

struct Setup {
    file: Vec<u8>,
    server: XrootdServer,
    dir: TempDir,
    /// The client's copy of the server's keytab, and its key.
    keytab: PathBuf,
    key: String,
}

fn start(key_name: &str) -> Option<Setup> {
    start_with(key_name, "")
}

/// The server's sss options end with `sss_options` (`-c <keytab>` names the client's keytab).
fn start_with(key_name: &str, sss_options: &str) -> Option<Setup> {
    let dir = TempDir::new("xrootd-sss");
    let server_keytab = dir.path().join("server.keytab");
    let text = make_keytab(&server_keytab, key_name)?;
    if running_as_root() {
        // xrootd runs as nobody (nobody:nogroup on Debian) and wants its keytab its own.
        std::os::unix::fs::chown(&server_keytab, Some(65534), Some(65534)).unwrap();
    }
    let keytab = dir.path().join("client.keytab");
    std::fs::write(&keytab, &text).unwrap();
    set_mode(&keytab, 0o600);
    let data = dir.write("data/file.bin", &Random::new(31).bytes(FILE_LEN as usize));
    let file = std::fs::read(&data).unwrap();
    let config = format!(
        "xrootd.seclib libXrdSec.so\nsec.protocol sss -s {} {}\nsec.protbind * only sss\n",
        server_keytab.display(),
        sss_options.replace("{client}", &keytab.display().to_string())
    );
    let server = XrootdServer::start(&dir.path().join("data"), &config)?;
    Some(Setup {
        file,
        server,
        keytab,
        key: key_hex(&text),
        dir,
    })
}

impl Setup {
    fn url(&self) -> String {
        format!("root://127.0.0.1:{}//file.bin", self.server.port())
    }

    fn options(&self, keytab: &Path) -> XrootdOptions {
        XrootdOptions {
            sss_keytab: Some(keytab.to_path_buf()),
            policy: RequestPolicy::with_timeout(Duration::from_secs(10)).with_retries(1),
            ..XrootdOptions::default()
        }
    }

    async fn open_error(&self, keytab: &Path) -> String {
        let message = XrootdSource::open(&self.url(), self.options(keytab))
            .await
            .map(|s| format!("{s:?}"))
            .expect_err("the open must fail")
            .to_string();
        println!("{message}");
        assert!(!message.contains(&self.key), "{message}");
        message
    }
}

async fn assert_reads_match(source: &dyn ByteSource, file: &[u8]) {
    let mut random = Random::new(9);
    let ranges: Vec<ByteRange> = (0..100)
        .map(|_| ByteRange::new(random.below(FILE_LEN - 5000), 1 + random.below(5000)))
        .collect();
    assert_ranges_equal(source, &ranges, file).await;
}

#[tokio::test]
async fn sss_reads_equal_the_file_and_bad_keys_are_refused_clearly() {
    bounded(async {
        let Some(setup) = start("test") else { return };
        // First the kXR_auth follows the login's answer; then the server is known to want sss
        // and the credential goes with the login.
        for _ in 0..2 {
            let source = XrootdSource::open(&setup.url(), setup.options(&setup.keytab))
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(source.size(), FILE_LEN);
            assert_reads_match(&source, &setup.file).await;
            let shown = format!("{source:?} {}", source.name());
            assert!(!shown.contains(&setup.key), "{shown}");
        }
        // Through source::open, as the Python API opens it.
        let options = SourceOptions {
            sss_keytab: Some(setup.keytab.clone()),
            ..SourceOptions::default()
        };
        let source = source::open(&setup.url(), &options).await.unwrap().source;
        assert_reads_match(source.as_ref(), &setup.file).await;

        let address = format!("127.0.0.1:{}", setup.server.port());
        // Another key with the same name: the server cannot decrypt.
        let other = setup.dir.path().join("other.keytab");
        make_keytab(&other, "test").unwrap();
        let message = setup.open_error(&other).await;
        assert!(message.contains(&address), "{message}");
        assert!(message.contains("refused the sss key 'test'"), "{message}");
        assert!(message.contains(&other.display().to_string()), "{message}");

        // The right key, expired.
        let text = std::fs::read_to_string(&setup.keytab).unwrap();
        let expired = setup.dir.path().join("expired.keytab");
        std::fs::write(&expired, text.replace(" e:0 ", " e:1600000000 ")).unwrap();
        set_mode(&expired, 0o600);
        let message = setup.open_error(&expired).await;
        assert!(message.contains("every key in it has expired"), "{message}");
        assert!(
            message.contains(&expired.display().to_string()),
            "{message}"
        );

        // A keytab others may read is refused before anything is sent.
        let loose = setup.dir.path().join("loose.keytab");
        std::fs::write(&loose, &text).unwrap();
        set_mode(&loose, 0o644);
        let message = setup.open_error(&loose).await;
        assert!(message.contains("chmod 600"), "{message}");

        let message = setup.open_error(&setup.dir.path().join("missing")).await;
        assert!(message.contains("cannot use the sss keytab"), "{message}");

        // A damaged line names the line, not the key.
        let damaged = setup.dir.path().join("damaged.keytab");
        std::fs::write(&damaged, &text[..text.len() - 3]).unwrap();
        set_mode(&damaged, 0o600);
        let message = setup.open_error(&damaged).await;
        assert!(message.contains("line 1"), "{message}");
    })
    .await;
}

#[tokio::test]
async fn through_a_proxy_only_a_key_without_address_check_works() {
    bounded(async {
        // The credential names our address; behind a proxy the server sees the proxy's.
        for (name, works) in [("test", false), ("test+", true)] {
            let Some(setup) = start(name) else { return };
            let Some(toxiproxy) = Toxiproxy::start() else {
                return;
            };
            let port = toxiproxy.proxy("sss", setup.server.port());
            let url = format!("root://127.0.0.1:{port}//file.bin");
            let opened = XrootdSource::open(&url, setup.options(&setup.keytab)).await;
            match opened {
                Ok(source) => {
                    assert!(works, "a key checking the address worked through a proxy");
                    assert_reads_match(&source, &setup.file).await;
                }
                Err(e) => {
                    let message = e.to_string();
                    assert!(!works, "{message}");
                    assert!(message.contains("IP address mismatch"), "{message}");
                    assert!(message.contains("name ends in '+'"), "{message}");
                    assert!(!message.contains(&setup.key), "{message}");
                }
            }
        }
    })
    .await;
}

#[tokio::test]
async fn the_keytab_the_server_names_is_used_after_its_login_answer() {
    bounded(async {
        // No keytab named by the user: the first login learns that the server wants sss (and
        // closes, having refused the open); the second authenticates once the login's answer
        // named the client keytab (`-c`), the open right behind the kXR_auth.
        let named = ["XrdSecSSSKT", "XrdSecsssKT"].map(std::env::var_os);
        let home = std::env::var_os("HOME").map(|h| Path::new(&h).join(".xrd/sss.keytab"));
        if named.iter().any(Option::is_some) || home.is_some_and(|h| h.exists()) {
            eprintln!("SKIPPED: a keytab is named by the environment or in ~/.xrd");
            return;
        }
        let Some(setup) = start_with("test", "-c {client}") else {
            return;
        };
        let options = XrootdOptions {
            policy: RequestPolicy::with_timeout(Duration::from_secs(10)).with_retries(0),
            ..XrootdOptions::default()
        };
        for _ in 0..2 {
            let source = XrootdSource::open(&setup.url(), options.clone())
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            assert_reads_match(&source, &setup.file).await;
        }
    })
    .await;
}
