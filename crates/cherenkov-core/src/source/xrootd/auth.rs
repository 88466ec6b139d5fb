//! Who we are to an XRootD server: TLS for `roots://`, and the security protocol answering what
//! the server's `kXR_login` asks for (`&P=ztn,...&P=unix`): `ztn` (a WLCG bearer token, over
//! TLS only), `sss` (a shared key from a keytab, see `sss`) or `unix`. A server asking only for
//! protocols cherenkov does not speak gets an error listing what it offered.

use super::keytab::{self, Keytab, KEYTAB_DISCOVERY};
use super::options::XrootdOptions;
use super::reply::ConnError;
use super::tls;
use super::url::Endpoint;
use crate::source::credentials::{BearerToken, TOKEN_DISCOVERY};
use crate::source::redact::Secret;
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// The security protocols spoken natively.
pub const SPOKEN: &str = "unix, sss (a keytab), ztn (a WLCG token, over roots://)";

/// How a connection protects the link and proves who we are.
#[derive(Clone, Debug, Default)]
pub struct Security {
    /// TLS (`roots://`): the configuration and the name the certificate must carry.
    pub tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
    /// A bearer token for `ztn` (sent over TLS only).
    pub token: Option<Arc<BearerToken>>,
    /// The `sss` keytab given (`sss_keytab=`); else it is looked for when a server asks.
    pub sss_keytab: Option<PathBuf>,
}

impl Security {
    /// What connections to `endpoint` use: TLS when it is `roots://`, with the certificates
    /// `options.tls` trusts, and the bearer token given or discovered (WLCG order).
    pub fn for_endpoint(
        endpoint: &Endpoint,
        options: &XrootdOptions,
    ) -> Result<Security, ConnError> {
        if !endpoint.tls {
            return Ok(Security {
                sss_keytab: options.sss_keytab.clone(),
                ..Security::default()
            });
        }
        let config = tls::client_config(&options.tls).map_err(ConnError::Tls)?;
        let name = tls::server_name(&endpoint.host)?;
        let token = BearerToken::discover(options.token.as_ref())
            .map_err(|e| ConnError::Refused(e.to_string()))?;
        Ok(Security {
            tls: Some((config, name)),
            token: token.map(Arc::new),
            sss_keytab: options.sss_keytab.clone(),
        })
    }

    /// The keytab for `sss`: the one given, else the first found where XrdCl looks
    /// (`server_hint` is the client keytab the server's login answer names).
    pub fn sss_keytab(&self, server_hint: Option<&str>) -> Result<Option<Keytab>, String> {
        keytab::discover(self.sss_keytab.as_deref(), server_hint)
    }

    /// The keytab for an `sss` `kXR_auth` sent with the login: to a server known to want `sss`,
    /// and to a server not seen yet when the user named the keytab (`sss_keytab=`,
    /// `$XrdSecSSSKT`): a server wanting no authentication answers it harmlessly. A keytab that
    /// cannot be used is left for the error after the login's answer.
    pub fn sss_keytab_ahead(&self, known: Option<&[String]>) -> Option<Keytab> {
        match known {
            Some(offered) if offered.iter().any(|p| p == "sss") => {
                self.sss_keytab(None).ok().flatten()
            }
            Some(_) => None,
            None => keytab::named(self.sss_keytab.as_deref()).and_then(Result::ok),
        }
    }

    /// The refusal of our `sss` credential, said once with what most likely went wrong.
    pub fn sss_refused(address: &str, keytab: &Keytab, message: &str) -> ConnError {
        let message = message.trim_end_matches('.');
        let hint = if message.contains("mismatch") {
            "; the server sees this connection come from another address (a proxy or NAT in \
             between): such links need a key whose name ends in '+' (no address check)"
        } else if message.contains("expired") {
            "; the credential was older than the server accepts: do the clocks of both hosts agree?"
        } else if message.contains("not found") || message.contains("decrypt") {
            "; the server's keytab must hold this key (same number and value), unexpired"
        } else {
            ""
        };
        ConnError::Refused(format!(
            "{address} refused the sss key '{}' (number {}) of {} (sss): {message}{hint}",
            keytab.key.name,
            keytab.key.id,
            keytab.path.display()
        ))
    }

    /// A server asking for `sss` while no keytab was found.
    pub fn no_sss_keytab(address: &str, offered: &[String]) -> ConnError {
        ConnError::Refused(format!(
            "{address} asks for authentication with {} and no sss keytab was found (looked in \
             {KEYTAB_DISCOVERY})",
            offered.join(", ")
        ))
    }

    /// The token to send in the same write as the login: over TLS, to a server not known to
    /// want something else (one that wants nothing answers the unasked `kXR_auth` harmlessly).
    pub fn ztn_token_ahead(&self, known: Option<&[String]>) -> Result<Option<Secret>, ConnError> {
        let (Some(_), Some(token)) = (&self.tls, &self.token) else {
            return Ok(None);
        };
        if known.is_some_and(|offered| !offered.iter().any(|p| p == "ztn")) {
            return Ok(None);
        }
        token
            .current()
            .map(Some)
            .map_err(|e| ConnError::Refused(e.to_string()))
    }

    /// The refusal of our token, said once and clearly (no retry: it would be refused again).
    pub fn token_refused(&self, address: &str, message: &str) -> ConnError {
        let origin = self
            .token
            .as_ref()
            .map_or("the token".to_string(), |t| t.origin().to_string());
        ConnError::Refused(format!(
            "{address} refused {origin} (ztn): {message}; expired, revoked, or not valid for this \
             server"
        ))
    }

    /// Why none of the protocols `offered` can be used: what the server offered and what is
    /// missing here.
    pub fn cannot_authenticate(&self, address: &str, offered: &[String]) -> ConnError {
        let list = offered.join(", ");
        if offered.iter().any(|p| p == "ztn") {
            if self.tls.is_none() {
                return ConnError::Refused(format!(
                    "{address} asks for authentication with {list}; a token (ztn) is sent over \
                     TLS only: use roots://"
                ));
            }
            return ConnError::Refused(format!(
                "{address} asks for a token (ztn; it offered {list}) and none was found \
                 (looked in {TOKEN_DISCOVERY})"
            ));
        }
        ConnError::Refused(format!(
            "{address} asks for authentication with {list}, none of which cherenkov speaks \
             (it speaks {SPOKEN})"
        ))
    }
}

/// Servers (`host:port`) and the security protocols their last login asked for.
static KNOWN: Mutex<Vec<(String, Vec<String>)>> = Mutex::new(Vec::new());

/// What `address` asked for at its last login, if it was seen.
pub fn known_protocols(address: &str) -> Option<Vec<String>> {
    let known = KNOWN.lock().unwrap_or_else(|e| e.into_inner());
    known
        .iter()
        .find(|(a, _)| a == address)
        .map(|(_, p)| p.clone())
}

pub fn remember_protocols(address: &str, offered: &[String]) {
    let mut known = KNOWN.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(entry) = known.iter_mut().find(|(a, _)| a == address) {
        entry.1 = offered.to_vec();
    } else if known.len() < 1024 {
        known.push((address.to_string(), offered.to_vec()));
    }
}

/// Servers (`host:port`) that wanted TLS from a `root://` connection: the next go with TLS at once.
static WANT_TLS: Mutex<Vec<String>> = Mutex::new(Vec::new());

pub fn wants_tls(address: &str) -> bool {
    let known = WANT_TLS.lock().unwrap_or_else(|e| e.into_inner());
    known.iter().any(|a| a == address)
}

pub fn remember_wants_tls(address: &str) {
    let mut known = WANT_TLS.lock().unwrap_or_else(|e| e.into_inner());
    if known.len() < 1024 && !known.iter().any(|a| a == address) {
        known.push(address.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_list_what_the_server_offered() {
        let offered = vec!["gsi".to_string(), "krb5".to_string()];
        let e = Security::default()
            .cannot_authenticate("h:1", &offered)
            .to_string();
        assert!(e.contains("gsi, krb5") && e.contains("unix, sss"), "{e}");
        let ztn = vec!["ztn".to_string()];
        let e = Security::default()
            .cannot_authenticate("h:1", &ztn)
            .to_string();
        assert!(e.contains("roots://"), "{e}");
    }

    #[test]
    fn no_token_goes_ahead_without_tls_or_to_a_server_wanting_another_protocol() {
        let plain = Security {
            tls: None,
            token: BearerToken::discover(Some(&Secret::new("t")))
                .unwrap()
                .map(Arc::new),
            sss_keytab: None,
        };
        assert_eq!(plain.ztn_token_ahead(None).unwrap(), None);
        remember_protocols("h:2", &["gsi".to_string()]);
        assert_eq!(known_protocols("h:2"), Some(vec!["gsi".to_string()]));
    }

    #[test]
    fn a_named_keytab_goes_ahead_to_new_servers_and_to_those_wanting_sss_only() {
        use std::os::unix::fs::PermissionsExt;
        let path =
            std::env::temp_dir().join(format!("cherenkov-ahead-{}.keytab", std::process::id()));
        std::fs::write(&path, "0 n:k N:9 k:00112233445566778899aabbccddeeff\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let security = Security {
            sss_keytab: Some(path.clone()),
            ..Security::default()
        };
        let ahead = |known: Option<&[&str]>| {
            let known: Option<Vec<String>> =
                known.map(|k| k.iter().map(|p| p.to_string()).collect());
            security
                .sss_keytab_ahead(known.as_deref())
                .map(|k| k.key.id)
        };
        assert_eq!(ahead(None), Some(9));
        assert_eq!(ahead(Some(&["unix", "sss"])), Some(9));
        assert_eq!(ahead(Some(&[])), None);
        assert_eq!(ahead(Some(&["gsi"])), None);
        std::fs::remove_file(path).unwrap();
    }
}
