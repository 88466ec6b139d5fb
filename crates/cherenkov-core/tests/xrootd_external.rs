//! A server asking only for a security protocol cherenkov does not speak (`gsi`, against a real
//! xrootd on 127.0.0.1) is opened through the opener registered with `source::xrootd::external`
//! (XrdCl, in the Python bindings: tests/test_xrootd_gsi.py). Here a test opener serves the file
//! from memory, so the core's side is tested without Python: whether and with what it is called,
//! and what the error says when no opener is registered or the opener fails.

mod support;

use cherenkov_core::source::memory::MemorySource;
use cherenkov_core::source::xrootd::external::{
    set_external_opener, ExternalFailure, ExternalOpener,
};
use cherenkov_core::source::RequestOverrides;
use cherenkov_core::source::{self, ByteRange, SharedSource, SourceOptions};
use cherenkov_core::IoKind;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::pki::Pki;
use support::xrootd::{running_as_root, XrootdServer};
use support::{bounded, TempDir};

/// Calls of the test opener: the URL and the protocols the server offered.
static CALLS: Mutex<Vec<(String, Vec<String>)>> = Mutex::new(Vec::new());

fn opener() -> ExternalOpener {
    Arc::new(|url, _options, offered| {
        CALLS
            .lock()
            .unwrap()
            .push((url.to_string(), offered.to_vec()));
        let url = url.to_string();
        Box::pin(async move {
            if url.contains("refused") {
                return Err(ExternalFailure {
                    kind: IoKind::Forbidden,
                    message: "[FATAL] Auth failed: No protocols left to try".to_string(),
                });
            }
            let name = format!("{url} (through the test opener)");
            Ok(Arc::new(MemorySource::new(&name, vec![7u8; 100])) as SharedSource)
        })
    })
}

#[tokio::test]
async fn servers_asking_only_for_gsi_are_opened_by_the_registered_opener() {
    let Some(pki) = Pki::make() else { return };
    let key = pki.path("host.key");
    if running_as_root() {
        std::os::unix::fs::chown(&key, Some(65534), Some(65534)).unwrap(); // xrootd runs as nobody
    }
    // gsi finds the CA of its own certificate by hashed name (`openssl rehash` style).
    let hash = std::process::Command::new("openssl")
        .args(["x509", "-hash", "-noout", "-in"])
        .arg(pki.path("ca.pem"))
        .output()
        .unwrap();
    let hash = String::from_utf8(hash.stdout).unwrap();
    std::os::unix::fs::symlink("ca.pem", pki.path(&format!("{}.0", hash.trim()))).unwrap();
    let config = format!(
        "xrootd.seclib libXrdSec.so\nsec.protocol gsi -certdir:{dir} -cert:{dir}/host.pem \
         -key:{dir}/host.key -gmapopt:0 -crl:0\nsec.protbind * only gsi\n",
        dir = pki.path("").display()
    );
    let data = TempDir::new("xrootd-external-data");
    data.write("file.bin", &[1u8; 100]);
    let Some(server) = XrootdServer::start(data.path(), &config) else {
        return;
    };
    let options = SourceOptions {
        request: RequestOverrides {
            timeout: Some(Duration::from_secs(10)),
            retries: Some(1),
            ..RequestOverrides::default()
        },
        ..SourceOptions::default()
    };
    bounded(async {
        // The core alone: the error lists what the server offered and what would read it.
        let url = server.url("/file.bin");
        let refusal = source::open(&url, &options).await.unwrap_err();
        assert_eq!(refusal.io_kind(), IoKind::Forbidden, "{refusal}");
        let e = refusal.to_string();
        assert!(
            e.contains("asks for authentication with gsi, none of which cherenkov speaks")
                && e.contains("XrdCl, which is not available here"),
            "{e}"
        );

        set_external_opener(opener());
        // Known now to ask for gsi: the opener is called at once, with what the server offered.
        let opened = source::open(&url, &options).await.unwrap().source;
        assert!(opened.name().ends_with("(through the test opener)"));
        let read = opened.read_ranges(&[ByteRange::new(10, 5)]).await.unwrap();
        assert_eq!(&read[0][..], &[7u8; 5]);
        assert_eq!(
            CALLS.lock().unwrap().as_slice(),
            &[(url.clone(), vec!["gsi".to_string()])]
        );

        // Refused by the opener too: both say why.
        let refused = server.url("/refused.bin?authz=not-to-be-shown");
        let refusal = source::open(&refused, &options).await.unwrap_err();
        let e = refusal.to_string();
        assert!(
            e.contains("asks for authentication with gsi")
                && e.contains("through XrdCl: [FATAL] Auth failed")
                && !e.contains("not-to-be-shown"),
            "{e}"
        );
        assert_eq!(refusal.io_kind(), IoKind::Forbidden, "{e}");
    })
    .await;
}
