//! A real toxiproxy (Shopify) on 127.0.0.1: TCP proxies that add latency or faults, driven through
//! its HTTP API by a tiny blocking HTTP/1.1 client. Killed when dropped.

use super::{find_binary, free_port, wait_for_port};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct Toxiproxy {
    child: Child,
    api_port: u16,
}

/// The toxiproxy server binary, or `None` with a message saying why tests are skipped.
pub fn toxiproxy_binary() -> Option<PathBuf> {
    let found = find_binary(&["toxiproxy-server"]);
    if found.is_none() {
        eprintln!("SKIPPED: toxiproxy-server is not installed (scripts/setup.sh builds it into .tools/bin)");
    }
    found
}

impl Toxiproxy {
    /// Start a toxiproxy server; `None` if it is not installed.
    pub fn start() -> Option<Toxiproxy> {
        let binary = toxiproxy_binary()?;
        for _ in 0..5 {
            let api_port = free_port();
            let child = Command::new(&binary)
                .args(["-host", "127.0.0.1", "-port", &api_port.to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start toxiproxy-server");
            let mut proxy = Toxiproxy { child, api_port };
            if wait_for_port(api_port, Duration::from_secs(10)) {
                return Some(proxy);
            }
            let _ = proxy.child.kill();
        }
        panic!("toxiproxy-server did not start");
    }

    /// Create a proxy `name` to `127.0.0.1:upstream_port`; returns the port it listens on.
    pub fn proxy(&self, name: &str, upstream_port: u16) -> u16 {
        for _ in 0..5 {
            let listen = free_port();
            let body = format!(
                r#"{{"name":"{name}","listen":"127.0.0.1:{listen}","upstream":"127.0.0.1:{upstream_port}","enabled":true}}"#
            );
            if self.try_api("POST", "/proxies", &body).is_ok() {
                return listen;
            }
        }
        panic!("toxiproxy could not create proxy {name}");
    }

    /// Create a proxy `name` listening on `listen` to `upstream` (both `host:port`, IPv6 hosts in
    /// brackets); the error is toxiproxy's answer when it refuses (the address is taken, say).
    pub fn try_proxy_at(&self, name: &str, listen: &str, upstream: &str) -> Result<(), String> {
        let body = format!(
            r#"{{"name":"{name}","listen":"{listen}","upstream":"{upstream}","enabled":true}}"#
        );
        self.try_api("POST", "/proxies", &body).map(drop)
    }

    /// Add a toxic, e.g. `("lag", "latency", "downstream", r#"{"latency":50}"#)`.
    pub fn add_toxic(&self, proxy: &str, name: &str, kind: &str, stream: &str, attributes: &str) {
        let body = format!(
            r#"{{"name":"{name}","type":"{kind}","stream":"{stream}","toxicity":1.0,"attributes":{attributes}}}"#
        );
        self.api("POST", &format!("/proxies/{proxy}/toxics"), &body);
    }

    pub fn remove_toxic(&self, proxy: &str, name: &str) {
        self.api("DELETE", &format!("/proxies/{proxy}/toxics/{name}"), "");
    }

    /// Cut (or restore) the link: a disabled proxy closes its connections and refuses new ones.
    pub fn set_enabled(&self, proxy: &str, enabled: bool) {
        self.api(
            "POST",
            &format!("/proxies/{proxy}"),
            &format!(r#"{{"enabled":{enabled}}}"#),
        );
    }

    fn api(&self, method: &str, path: &str, body: &str) -> String {
        self.try_api(method, path, body)
            .unwrap_or_else(|e| panic!("toxiproxy {method} {path} failed: {e}"))
    }

    fn try_api(&self, method: &str, path: &str, body: &str) -> Result<String, String> {
        let mut stream =
            TcpStream::connect(("127.0.0.1", self.api_port)).map_err(|e| e.to_string())?;
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .map_err(|e| e.to_string())?;
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        stream
            .write_all(request.as_bytes())
            .map_err(|e| e.to_string())?;
        let mut answer = String::new();
        stream
            .read_to_string(&mut answer)
            .map_err(|e| e.to_string())?;
        let status = answer.split_whitespace().nth(1).unwrap_or("");
        if status.starts_with('2') {
            Ok(answer)
        } else {
            Err(answer.lines().next().unwrap_or("no answer").to_string()
                + " "
                + answer.split("\r\n\r\n").nth(1).unwrap_or(""))
        }
    }
}

impl Drop for Toxiproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
