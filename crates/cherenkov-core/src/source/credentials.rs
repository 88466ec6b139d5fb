//! Who we are to a server: WLCG bearer tokens (found as the WLCG Bearer Token Discovery
//! document says, re-read when their file changes) and the certificates a server's TLS
//! certificate is checked against. Protocol-neutral: HTTP and XRootD apply them their own way.

use super::redact::Secret;
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

/// Where a bearer token came from: what errors name (never the token itself).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenOrigin {
    /// The `token=` option.
    Given,
    /// An environment variable holding the token (`BEARER_TOKEN`).
    Variable(&'static str),
    /// A file (`BEARER_TOKEN_FILE`, `$XDG_RUNTIME_DIR/bt_u<uid>`, `/tmp/bt_u<uid>`).
    File(PathBuf),
}

impl std::fmt::Display for TokenOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenOrigin::Given => f.write_str("the token given with token="),
            TokenOrigin::Variable(name) => write!(f, "the token in ${name}"),
            TokenOrigin::File(path) => write!(f, "the token in {}", path.display()),
        }
    }
}

/// A bearer token; one read from a file is read again when the file changes (long jobs outlive
/// tokens, which agents renew in place).
#[derive(Debug)]
pub struct BearerToken {
    origin: TokenOrigin,
    /// The token and, for a file, the modification time it was read at.
    current: Mutex<(Secret, Option<SystemTime>)>,
}

/// Where to look when no token is given, in the documented order.
pub const TOKEN_DISCOVERY: &str =
    "token=, $BEARER_TOKEN, $BEARER_TOKEN_FILE, $XDG_RUNTIME_DIR/bt_u<uid>, /tmp/bt_u<uid>";

impl BearerToken {
    /// The token given, or the first one found where WLCG says to look: `$BEARER_TOKEN`,
    /// the file `$BEARER_TOKEN_FILE`, `$XDG_RUNTIME_DIR/bt_u<uid>`, `/tmp/bt_u<uid>`. `None`
    /// when there is none; an error when a named file cannot be used.
    pub fn discover(given: Option<&Secret>) -> Result<Option<BearerToken>> {
        if let Some(token) = given {
            return Self::fixed(TokenOrigin::Given, token.expose()).map(Some);
        }
        if let Some(value) = std::env::var_os("BEARER_TOKEN").filter(|v| !v.is_empty()) {
            let value = value.to_string_lossy();
            return Self::fixed(TokenOrigin::Variable("BEARER_TOKEN"), &value).map(Some);
        }
        if let Some(path) = std::env::var_os("BEARER_TOKEN_FILE").filter(|v| !v.is_empty()) {
            // Named on purpose: a missing file is an error, not a reason to go anonymous.
            return Self::from_file(PathBuf::from(path)).map(Some);
        }
        let file_name = format!("bt_u{}", user_id());
        let runtime_dir = std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty());
        let candidates = runtime_dir
            .map(|dir| PathBuf::from(dir).join(&file_name))
            .into_iter()
            .chain([Path::new("/tmp").join(&file_name)]);
        for path in candidates {
            if path.exists() {
                return Self::from_file(path).map(Some);
            }
        }
        Ok(None)
    }

    fn fixed(origin: TokenOrigin, value: &str) -> Result<BearerToken> {
        let token = clean_token(value).ok_or_else(|| {
            Error::InvalidArgument(format!("{origin} is empty or not a token (one word)"))
        })?;
        Ok(BearerToken {
            origin,
            current: Mutex::new((token, None)),
        })
    }

    fn from_file(path: PathBuf) -> Result<BearerToken> {
        let (token, modified) = read_token_file(&path)?;
        Ok(BearerToken {
            origin: TokenOrigin::File(path),
            current: Mutex::new((token, Some(modified))),
        })
    }

    pub fn origin(&self) -> &TokenOrigin {
        &self.origin
    }

    /// The token to send now: a token file changed since it was read is read again.
    pub fn current(&self) -> Result<Secret> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if let TokenOrigin::File(path) = &self.origin {
            let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
            if modified.is_none() || modified != current.1 {
                let (token, modified) = read_token_file(path)?;
                *current = (token, Some(modified));
            }
        }
        Ok(current.0.clone())
    }
}

/// Read a token file: it must be readable by its owner only (it is a password), and hold one
/// token (surrounding white space ignored, as the WLCG document allows).
fn read_token_file(path: &Path) -> Result<(Secret, SystemTime)> {
    let name = path.display().to_string();
    let unusable = |why: String| {
        Error::io(
            &name,
            format!("cannot use this token file: {why} (looked for a token in {TOKEN_DISCOVERY})"),
        )
    };
    let metadata = std::fs::metadata(path).map_err(|e| unusable(e.to_string()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = metadata.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(unusable(format!(
                "its permissions {mode:o} let others read or change it; a token is a password: \
                 `chmod 600 {name}`"
            )));
        }
    }
    let modified = metadata.modified().map_err(|e| unusable(e.to_string()))?;
    let text = std::fs::read_to_string(path).map_err(|e| unusable(e.to_string()))?;
    let token = clean_token(&text).ok_or_else(|| unusable("it holds no token".into()))?;
    Ok((token, modified))
}

/// A token as sent: surrounding white space dropped; empty or multi-word text is not a token.
fn clean_token(text: &str) -> Option<Secret> {
    let token = text.trim();
    (!token.is_empty() && !token.contains(char::is_whitespace)).then(|| Secret::new(token))
}

/// This process's user id (for the per-user credential files: `bt_u<uid>`, `x509up_u<uid>`).
pub fn user_id() -> u32 {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        // The owner of this process's own /proc entry is its user: no libc call needed.
        if let Ok(m) = std::fs::metadata("/proc/self") {
            return m.uid();
        }
    }
    0
}

/// What a server's TLS certificate is checked against, and the one way to not check it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// A CA certificate file (PEM, possibly several) or a directory of them (`ca=`): when set,
    /// the only CAs trusted.
    pub ca: Option<PathBuf>,
    /// Do not check the server's certificate at all. For tests against servers with made-up
    /// certificates only: anyone on the path can then read and change the data and the token.
    pub insecure_skip_verify: bool,
}

impl TlsOptions {
    /// The CA certificates (PEM) to trust besides (or, with `ca=`, instead of) the system's:
    /// the `ca=` file or directory, else `$X509_CERT_DIR` (the grid's CA directory) and
    /// `$SSL_CERT_FILE`. The bool says whether the system's store is used too.
    pub fn extra_roots(&self) -> Result<(Vec<Vec<u8>>, bool)> {
        if let Some(ca) = &self.ca {
            let pems = read_pems(ca)?;
            if pems.is_empty() {
                return Err(Error::InvalidArgument(format!(
                    "ca={}: no PEM certificate found there",
                    ca.display()
                )));
            }
            return Ok((pems, false));
        }
        let mut pems = Vec::new();
        for variable in ["X509_CERT_DIR", "SSL_CERT_FILE"] {
            if let Some(path) = std::env::var_os(variable).filter(|v| !v.is_empty()) {
                // Grid hosts set these for every tool; one that points nowhere is not ours to fail on.
                pems.extend(read_pems(Path::new(&path)).unwrap_or_default());
            }
        }
        Ok((pems, true))
    }
}

/// The PEM files at `path`: the file itself, or every file of a directory holding a
/// certificate (grid CA directories mix `*.pem`, hashed `*.0` links, `*.crl_url`, `*.signing_policy`).
fn read_pems(path: &Path) -> Result<Vec<Vec<u8>>> {
    let unreadable = |e: std::io::Error| {
        Error::io_caused(
            &path.display().to_string(),
            "cannot read CA certificates",
            e,
        )
    };
    let is_cert = |bytes: &Vec<u8>| {
        bytes
            .windows(b"-----BEGIN CERTIFICATE-----".len())
            .any(|w| w == b"-----BEGIN CERTIFICATE-----")
    };
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(unreadable)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect();
        entries.sort();
        Ok(entries
            .iter()
            .filter_map(|p| std::fs::read(p).ok())
            .filter(is_cert)
            .collect())
    } else {
        let bytes = std::fs::read(path).map_err(unreadable)?;
        Ok(if is_cert(&bytes) { vec![bytes] } else { vec![] })
    }
}

/// What is made from a `TlsOptions` and the CA variables (`$X509_CERT_DIR`, `$SSL_CERT_FILE`,
/// read by `TlsOptions::extra_roots`), made once per distinct set of them: making it reads and
/// parses the system's CA certificates, milliseconds that every connection or file would pay.
/// A few are kept (settings seldom vary), the oldest dropped past 16.
pub struct MadeForTls<K, V> {
    made: Mutex<Vec<(WithCaVariables<K>, V)>>,
}

/// Settings, and the values of `$X509_CERT_DIR` and `$SSL_CERT_FILE`.
type WithCaVariables<K> = (K, [Option<std::ffi::OsString>; 2]);

impl<K: PartialEq, V: Clone> Default for MadeForTls<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: PartialEq, V: Clone> MadeForTls<K, V> {
    pub const fn new() -> Self {
        Self {
            made: Mutex::new(Vec::new()),
        }
    }

    /// The value made for `settings` (which hold the `TlsOptions`) and the CA variables now,
    /// made by `make` if there is none yet.
    pub fn get<E>(
        &self,
        settings: K,
        make: impl FnOnce(&K) -> std::result::Result<V, E>,
    ) -> std::result::Result<V, E> {
        let key = (
            settings,
            ["X509_CERT_DIR", "SSL_CERT_FILE"].map(std::env::var_os),
        );
        let made = || self.made.lock().unwrap_or_else(|e| e.into_inner());
        let found = |made: &[(WithCaVariables<K>, V)]| {
            made.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone())
        };
        if let Some(value) = found(&made()) {
            return Ok(value);
        }
        // Made without the lock held (it reads files); a thread that made it meanwhile wins.
        let value = make(&key.0)?;
        let mut made = made();
        if let Some(value) = found(&made) {
            return Ok(value);
        }
        if made.len() >= 16 {
            made.remove(0);
        }
        made.push((key, value.clone()));
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn temp_file(name: &str, text: &str, mode: u32) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cherenkov-cred-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn a_token_file_is_read_again_when_it_changes() {
        let path = temp_file("renewed", "first\n", 0o600);
        let token = BearerToken::from_file(path.clone()).unwrap();
        assert_eq!(token.current().unwrap().expose(), "first");
        std::fs::write(&path, "second").unwrap();
        let later = SystemTime::now() + std::time::Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(later)
            .unwrap();
        assert_eq!(token.current().unwrap().expose(), "second");
    }

    #[test]
    fn loose_or_empty_token_files_are_refused_naming_the_file() {
        let loose = temp_file("loose", "tok", 0o644);
        let message = BearerToken::from_file(loose.clone())
            .unwrap_err()
            .to_string();
        assert!(message.contains(&loose.display().to_string()), "{message}");
        assert!(message.contains("chmod 600"), "{message}");
        assert!(!message.contains("tok "), "{message}");
        let empty = temp_file("empty", " \n", 0o600);
        let message = BearerToken::from_file(empty).unwrap_err().to_string();
        assert!(message.contains("holds no token"), "{message}");
    }

    #[test]
    fn a_given_token_comes_first_and_is_never_shown() {
        let token = BearerToken::discover(Some(&Secret::new(" abc "))).unwrap();
        let token = token.expect("given");
        assert_eq!(token.current().unwrap().expose(), "abc");
        assert!(!format!("{token:?}").contains("abc"));
        assert_eq!(token.origin().to_string(), "the token given with token=");
    }

    #[test]
    fn what_is_made_for_tls_options_is_made_once_per_options() {
        static MADE: MadeForTls<(TlsOptions, u32), u32> = MadeForTls::new();
        let mut calls = 0;
        let mut get = |n: u32| {
            MADE.get((TlsOptions::default(), n), |(_, n)| {
                calls += 1;
                Ok::<_, ()>(n * 10)
            })
            .unwrap()
        };
        assert_eq!([get(1), get(1), get(2), get(1)], [10, 10, 20, 10]);
        assert_eq!(calls, 2);
    }
}
