//! Certificates made by a test with `openssl`: a CA, a host certificate for 127.0.0.1 signed by
//! it, and an unrelated CA.

use super::TempDir;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// A CA, a host certificate for 127.0.0.1 signed by it, and an unrelated CA; `None` without openssl.
pub struct Pki {
    dir: TempDir,
}

impl Pki {
    pub fn make() -> Option<Pki> {
        let dir = TempDir::new("pki");
        let run = |args: &[&str]| {
            Command::new("openssl")
                .args(args)
                .current_dir(dir.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        let ca = |name: &str| {
            run(&[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "1",
                "-subj",
                &format!("/CN={name}"),
                "-keyout",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.pem"),
            ])
        };
        std::fs::write(
            dir.path().join("host.ext"),
            "subjectAltName=IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\n",
        )
        .ok()?;
        let made = ca("ca")
            && ca("other-ca")
            && run(&[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                "/CN=127.0.0.1",
                "-keyout",
                "host.key",
                "-out",
                "host.csr",
            ])
            && run(&[
                "x509",
                "-req",
                "-in",
                "host.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "1",
                "-extfile",
                "host.ext",
                "-out",
                "host.pem",
            ]);
        if !made {
            eprintln!("SKIPPED: the openssl command could not make test certificates");
            return None;
        }
        Some(Pki { dir })
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}
