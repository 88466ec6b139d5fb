//! A real nginx on 127.0.0.1 for tests: its own config, directory and free port; killed on drop.
//!
//! It runs as one process in the foreground (`daemon off; master_process off;`), so killing the
//! child stops everything. All paths nginx writes to are inside its own temporary directory.

#![allow(dead_code)]

use super::{free_port, TempDir};
use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long nginx gets to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(10);

pub struct Nginx {
    child: Child,
    port: u16,
    dir: TempDir,
    scheme: &'static str,
}

/// The nginx binary, or `None` (with a message saying why tests are skipped).
pub fn nginx_binary() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("nginx"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let found = on_path
        .into_iter()
        .chain([PathBuf::from("/usr/sbin/nginx")])
        .find(|p| p.is_file());
    if found.is_none() {
        eprintln!("SKIPPED: nginx is not installed (Debian package nginx-light; scripts/setup.sh installs it)");
    }
    found
}

impl Nginx {
    /// Serve the files under `root`; `server_directives` go inside the `server { }` block (for
    /// example `max_ranges 1;`). `None` if nginx is not installed.
    pub fn start(root: &Path, server_directives: &str) -> Option<Nginx> {
        Self::start_with(root, server_directives, false)
    }

    /// Like [`Nginx::start`], over HTTPS with a fresh self-signed certificate (made with the
    /// `openssl` command; `None` if it is missing).
    pub fn start_tls(root: &Path, server_directives: &str) -> Option<Nginx> {
        Self::start_with(root, server_directives, true)
    }

    /// Over HTTPS with the given host certificate and key (PEM files made by the test).
    pub fn start_https(
        root: &Path,
        server_directives: &str,
        cert: &Path,
        key: &Path,
    ) -> Option<Nginx> {
        let directives = format!(
            "ssl_certificate {}; ssl_certificate_key {};\n    {server_directives}",
            cert.display(),
            key.display()
        );
        Self::start_in(TempDir::new("nginx"), root, &directives, true)
    }

    fn start_with(root: &Path, server_directives: &str, tls: bool) -> Option<Nginx> {
        let dir = TempDir::new("nginx");
        let path = dir.path().to_path_buf();
        let mut server_directives = server_directives.to_string();
        if tls {
            let made = Command::new("openssl")
                .args([
                    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                ])
                .args([
                    "-subj",
                    "/CN=127.0.0.1",
                    "-addext",
                    "subjectAltName=IP:127.0.0.1",
                ])
                .args(["-addext", "basicConstraints=critical,CA:FALSE"])
                .arg("-keyout")
                .arg(path.join("key.pem"))
                .arg("-out")
                .arg(path.join("cert.pem"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            if !made.is_ok_and(|s| s.success()) {
                eprintln!("SKIPPED: the openssl command could not make a test certificate");
                return None;
            }
            server_directives = format!(
                "ssl_certificate {d}/cert.pem; ssl_certificate_key {d}/key.pem;\n    {server_directives}",
                d = path.display()
            );
        }
        Self::start_in(dir, root, &server_directives, tls)
    }

    fn start_in(dir: TempDir, root: &Path, server_directives: &str, tls: bool) -> Option<Nginx> {
        let binary = nginx_binary()?;
        let path = dir.path().to_path_buf();
        // A port taken between choosing it and nginx binding it: try again with another.
        for _ in 0..5 {
            let port = free_port();
            let conf = path.join("nginx.conf");
            let listen = if tls {
                format!("{port} ssl")
            } else {
                port.to_string()
            };
            std::fs::write(&conf, config(&path, root, &listen, server_directives))
                .expect("write nginx.conf");
            let mut child = Command::new(&binary)
                .arg("-e")
                .arg(path.join("error.log"))
                .arg("-p")
                .arg(&path)
                .arg("-c")
                .arg(&conf)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start nginx");
            let scheme = if tls { "https" } else { "http" };
            if listening(&mut child, port) {
                return Some(Nginx {
                    child,
                    port,
                    dir,
                    scheme,
                });
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!(
            "nginx did not start; see {}",
            path.join("error.log").display()
        );
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:PORT`, for a proxy's upstream.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The URL of `path` (relative to the served root).
    pub fn url(&self, path: &str) -> String {
        format!(
            "{}://127.0.0.1:{}/{}",
            self.scheme,
            self.port,
            path.trim_start_matches('/')
        )
    }

    /// nginx's error log so far, for failure messages.
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `listen` is the port, followed by ` ssl` for HTTPS.
/// Whether nginx (`child`) listens on `port` within [`START_TIMEOUT`]; false if it exits first.
fn listening(child: &mut Child, port: u16) -> bool {
    let deadline = Instant::now() + START_TIMEOUT;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn config(dir: &Path, root: &Path, listen: &str, server_directives: &str) -> String {
    let d = dir.display();
    let mut conf = Vec::new();
    // Debian's nginx has compiled-in temp paths under /var/lib/nginx: point them all here.
    writeln!(
        conf,
        "daemon off;
master_process off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 256; }}
http {{
  access_log off;
  sendfile on;
  default_type application/octet-stream;
  client_body_temp_path {d}/body;
  proxy_temp_path {d}/proxy;
  fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi;
  scgi_temp_path {d}/scgi;
  server {{
    listen 127.0.0.1:{listen};
    root {root};
    {server_directives}
  }}
}}",
        root = root.display()
    )
    .expect("format nginx.conf");
    String::from_utf8(conf).expect("nginx.conf is text")
}
