//! `root://` URLs: `root://[user@]host[:port]//absolute/path[?cgi]`; a single slash after the host
//! (`root://host:port/path`) also means an absolute path. `roots://` (and `xroots://`) is the same
//! over TLS.

/// The port of an XRootD server when the URL names none.
pub const DEFAULT_PORT: u16 = 1094;

/// Where a file is: the server and the path (with any `?cgi`) to open there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// Host name or address, without brackets for IPv6.
    pub host: String,
    pub port: u16,
    /// Absolute path, with its `?cgi` if any.
    pub path: String,
    /// `roots://`: the connection switches to TLS before logging in.
    pub tls: bool,
}

impl Endpoint {
    /// `host:port` for connecting and for messages.
    pub fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The same file on the server `address` (`host:port`), as a URL of this endpoint's scheme.
    pub fn url_on(&self, address: &str) -> String {
        let scheme = if self.tls { "roots" } else { "root" };
        format!("{scheme}://{address}/{}", self.path)
    }

    /// The same file on another server (a redirect): `opaque` CGI from the server is added. An
    /// IPv6 host may come in brackets (`[::1]`, as cmsd writes it); they are dropped here.
    pub fn redirected(&self, host: &str, port: u16, opaque: Option<&str>) -> Endpoint {
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        let mut path = self.path.clone();
        if let Some(cgi) = opaque {
            path.push(if path.contains('?') { '&' } else { '?' });
            path.push_str(cgi);
        }
        Endpoint {
            host: host.to_string(),
            port,
            path,
            tls: self.tls,
        }
    }
}

/// Parse a `root://`, `xroot://`, `roots://` or `xroots://` URL of a file.
pub fn parse_url(url: &str) -> Result<Endpoint, String> {
    let endpoint = parse_directory_url(url)?;
    if endpoint.path.len() < 2 || endpoint.path.starts_with("/?") {
        return Err("the URL has no file path".to_string());
    }
    Ok(endpoint)
}

/// Parse an XRootD URL of a directory: the server's top (`root://host//`) is one too.
pub fn parse_directory_url(url: &str) -> Result<Endpoint, String> {
    let (scheme, rest) = url
        .split_once("://")
        .filter(|(s, _)| {
            matches!(
                s.to_ascii_lowercase().as_str(),
                "root" | "xroot" | "roots" | "xroots"
            )
        })
        .ok_or("not an XRootD URL: expected root://host[:port]//path (roots:// over TLS)")?;
    let tls = scheme.ends_with(['s', 'S']);
    let slash = rest.find('/').ok_or("the URL has no path")?;
    let (authority, path) = rest.split_at(slash);
    let authority = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let (host, port) = split_host_port(authority)?;
    // `//path` is the canonical absolute form; `/path` is accepted as the same.
    let path = if path.starts_with("//") {
        &path[1..]
    } else {
        path
    };
    if path.is_empty() {
        return Err("the URL has no path".to_string());
    }
    Ok(Endpoint {
        host,
        port,
        path: path.to_string(),
        tls,
    })
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`.
pub fn split_host_port(authority: &str) -> Result<(String, u16), String> {
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']').ok_or("unclosed '[' in the host")?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err("the URL has no host".to_string());
    }
    let port = match port {
        Some(p) => p.parse().map_err(|_| format!("bad port '{p}'"))?,
        None => DEFAULT_PORT,
    };
    Ok((host.to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(host: &str, port: u16, path: &str) -> Endpoint {
        Endpoint {
            host: host.into(),
            port,
            path: path.into(),
            tls: false,
        }
    }

    #[test]
    fn both_path_forms_parse() {
        assert_eq!(
            parse_url("root://eos.cern.ch//eos/a.root"),
            Ok(ep("eos.cern.ch", 1094, "/eos/a.root"))
        );
        assert_eq!(
            parse_url("root://127.0.0.1:2094/data/a.root"),
            Ok(ep("127.0.0.1", 2094, "/data/a.root"))
        );
        assert_eq!(parse_url("xroot://u@h:1//a?x=1"), Ok(ep("h", 1, "/a?x=1")));
        assert_eq!(parse_url("root://[::1]:5//a"), Ok(ep("::1", 5, "/a")));
        let tls = parse_url("roots://h//a").unwrap();
        assert_eq!(tls.redirected("b", 2, None).url_on("c:3"), "roots://c:3//a");
        assert_eq!(ep("::1", 5, "/a").address(), "[::1]:5");
    }

    #[test]
    fn bad_urls_say_why() {
        assert!(parse_url("http://h/a")
            .unwrap_err()
            .contains("not an XRootD URL"));
        assert!(parse_url("roots://h//a").is_ok_and(|e| e.tls));
        assert!(parse_url("xroots://h//a").is_ok_and(|e| e.tls));
        assert!(parse_url("ftp://h//a")
            .unwrap_err()
            .contains("not an XRootD URL"));
        assert!(parse_url("root://h").unwrap_err().contains("no path"));
        assert_eq!(parse_directory_url("root://h//").unwrap().path, "/");
        assert_eq!(
            parse_directory_url("root://h//d/?a=1").unwrap().path,
            "/d/?a=1"
        );
        assert!(parse_url("root://h//")
            .unwrap_err()
            .contains("no file path"));
        assert!(parse_url("root://h:x//a").unwrap_err().contains("bad port"));
        assert!(parse_url("root://:1//a").unwrap_err().contains("no host"));
    }

    #[test]
    fn redirects_keep_the_path_and_add_cgi() {
        let e = ep("a", 1, "/f?x=1");
        assert_eq!(e.redirected("b", 2, Some("y=2")), ep("b", 2, "/f?x=1&y=2"));
        assert_eq!(
            ep("a", 1, "/f").redirected("b", 2, Some("y=2")).path,
            "/f?y=2"
        );
        assert_eq!(ep("a", 1, "/f").redirected("b", 2, None).path, "/f");
        let v6 = ep("a", 1, "/f").redirected("[::1]", 3, None);
        assert_eq!(
            (v6.host.as_str(), v6.address()),
            ("::1", "[::1]:3".to_string())
        );
    }
}
