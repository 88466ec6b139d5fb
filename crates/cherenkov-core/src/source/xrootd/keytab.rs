//! `sss` keytabs (XrdSecsssKT's text format) and where XrdCl looks for them.
//!
//! A keytab holds one key a line: `0 u:<user> g:<group> n:<keyname> N:<keynum> c:<created>
//! e:<expires> f:<flags> k:<hex key>` (`xrdsssadmin` writes them). The server keeps the same lines;
//! it finds the key by its number (and name) and decrypts what the client encrypted with it.

use crate::source::redact::Secret;
use std::path::{Path, PathBuf};

/// Longest keytab read: a few keys take a few hundred bytes.
const MAX_KEYTAB_BYTES: u64 = 1 << 20;
/// Field limits of XrdSecsssKT (`maxKLen`, `NameSZ`, `UserSZ`, `GrupSZ`).
const MAX_KEY_BYTES: usize = 128;
const MAX_NAME: usize = 191;
const MAX_USER: usize = 128;
const MAX_GROUP: usize = 64;

/// Where to look when no keytab is given, in XrdCl's order (the server's hint comes after the
/// variables, before the home directory).
pub const KEYTAB_DISCOVERY: &str = "sss_keytab=, $XrdSecSSSKT, $XrdSecsssKT, the path the server \
                                    names, ~/.xrd/sss.keytab, /etc/xrootd/sss.keytab";

/// One key of a keytab. The key itself is a [`Secret`] (hex): it never shows in `Debug`.
#[derive(Clone, Debug)]
pub struct SssKey {
    /// The key number (`N:`), which the server finds the key by.
    pub id: i64,
    /// The key name (`n:`), sent to the server with the key number.
    pub name: String,
    pub user: String,
    pub group: String,
    /// Seconds since the epoch; 0 means never.
    pub expires: i64,
    hex: Secret,
}

impl SssKey {
    /// The key's bytes, for the one place that encrypts with them.
    pub fn bytes(&self) -> Vec<u8> {
        decode_hex(self.hex.expose()).unwrap_or_default()
    }
}

/// A keytab that was read, and the key a client uses from it.
#[derive(Clone, Debug)]
pub struct Keytab {
    pub path: PathBuf,
    pub key: SssKey,
}

/// The keytab to use: `given` (the `sss_keytab=` option), `$XrdSecSSSKT`, `$XrdSecsssKT`, the
/// path the server names in its login answer (`server_hint`), `~/.xrd/sss.keytab`,
/// `/etc/xrootd/sss.keytab`. `None` when there is none; an error when a named one cannot be used.
pub fn discover(given: Option<&Path>, server_hint: Option<&str>) -> Result<Option<Keytab>, String> {
    if let Some(named) = named(given) {
        return named.map(Some);
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".xrd/sss.keytab"));
    let candidates = server_hint
        .filter(|p| p.starts_with('/'))
        .map(PathBuf::from)
        .into_iter()
        .chain(home)
        .chain([PathBuf::from("/etc/xrootd/sss.keytab")]);
    for path in candidates {
        if path.exists() {
            return read(&path).map(Some);
        }
    }
    Ok(None)
}

/// The keytab the user named: `given`, else `$XrdSecSSSKT`, else `$XrdSecsssKT` (a missing file
/// is then an error, not a reason to look elsewhere).
pub fn named(given: Option<&Path>) -> Option<Result<Keytab, String>> {
    if let Some(path) = given {
        return Some(read(path));
    }
    ["XrdSecSSSKT", "XrdSecsssKT"].iter().find_map(|variable| {
        let path = std::env::var_os(variable).filter(|v| !v.is_empty())?;
        Some(read(Path::new(&path)))
    })
}

/// Read the keytab at `path` (owner-only, as XrdSecsssKT requires: `*.grp` files may be
/// group-readable) and pick the key a client uses.
pub fn read(path: &Path) -> Result<Keytab, String> {
    let name = path.display();
    let unusable = |why: String| format!("cannot use the sss keytab {name}: {why}");
    let metadata = std::fs::metadata(path).map_err(|e| unusable(e.to_string()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = metadata.permissions().mode() & 0o777;
        let allowed = if path.extension().is_some_and(|e| e == "grp") {
            0o740
        } else {
            0o700
        };
        if mode & !allowed & 0o077 != 0 {
            return Err(unusable(format!(
                "its permissions {mode:o} let others read or change it; a keytab holds a secret \
                 key: `chmod 600 {name}`"
            )));
        }
    }
    if metadata.len() > MAX_KEYTAB_BYTES {
        return Err(unusable(format!(
            "it has {} bytes, more than a keytab ({MAX_KEYTAB_BYTES} at most)",
            metadata.len()
        )));
    }
    let text = std::fs::read(path).map_err(|e| unusable(e.to_string()))?;
    let text = String::from_utf8(text).map_err(|_| unusable("it is not text".into()))?;
    let keys = parse(&text).map_err(&unusable)?;
    let key = choose(keys, now()).map_err(&unusable)?;
    Ok(Keytab {
        path: path.to_path_buf(),
        key,
    })
}

/// Every key of a keytab's text. Errors name the line and the field, never the key.
pub fn parse(text: &str) -> Result<Vec<SssKey>, String> {
    let mut keys = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let mut fields = line.split_ascii_whitespace();
        let Some(format) = fields.next() else {
            continue;
        };
        let bad = |what: &str| {
            format!(
                "line {}: {what} (expected `0 u:<user> g:<group> n:<keyname> N:<keynum> \
                 c:<created> e:<expires> f:<flags> k:<hex key>`, as xrdsssadmin writes)",
                number + 1
            )
        };
        if format != "0" && format != "1" {
            return Err(bad(
                "the keytab format (first field, 0) is missing or unsupported",
            ));
        }
        let (mut id, mut hex) = (None, None);
        let mut key = SssKey {
            id: 0,
            name: "nowhere".into(),
            user: "nobody".into(),
            group: "nogroup".into(),
            expires: 0,
            hex: Secret::new(""),
        };
        for field in fields {
            // XrdSecsssKT skips fields that are not `<tag>:`; so do we.
            let Some((tag, value)) = field.split_once(':').filter(|(t, _)| t.len() == 1) else {
                continue;
            };
            let text_field = |max: usize, what: &str| {
                if value.len() > max {
                    Err(bad(&format!("the {what} is longer than {max} characters")))
                } else {
                    Ok(value.to_string())
                }
            };
            let number_field = |what: &str| {
                value
                    .parse::<i64>()
                    .map_err(|_| bad(&format!("the {what} is not a number")))
            };
            match tag {
                "u" => key.user = text_field(MAX_USER, "user")?,
                "g" => key.group = text_field(MAX_GROUP, "group")?,
                "n" => key.name = text_field(MAX_NAME, "key name")?,
                "N" => id = Some(number_field("key number (N:)")?),
                "e" => key.expires = number_field("expiry time (e:)")?,
                "c" | "f" => {
                    number_field("creation time or flags")?;
                }
                "k" => {
                    let fits = decode_hex(value)
                        .is_some_and(|b| !b.is_empty() && b.len() <= MAX_KEY_BYTES);
                    if !fits {
                        return Err(bad(&format!(
                            "the key (k:) is not 1 to {MAX_KEY_BYTES} bytes in hexadecimal"
                        )));
                    }
                    hex = Some(Secret::new(value));
                }
                _ => {}
            }
        }
        key.id = id.ok_or_else(|| bad("the key number (N:) is missing"))?;
        key.hex = hex.ok_or_else(|| bad("the key (k:) is missing"))?;
        keys.push(key);
    }
    Ok(keys)
}

/// The key a client encrypts with, as XrdSecsssKT picks it: expired keys are left out; of the
/// keys with one name, user and group, the one expiring last; of those sets, the last listed.
pub fn choose(keys: Vec<SssKey>, now: i64) -> Result<SssKey, String> {
    if keys.is_empty() {
        return Err("it holds no key".into());
    }
    let last_expiry = keys.iter().map(|k| k.expires).max().unwrap_or(0);
    let mut usable: Vec<SssKey> = Vec::new();
    for key in keys
        .into_iter()
        .filter(|k| k.expires == 0 || k.expires > now)
    {
        let same =
            |k: &&mut SssKey| k.name == key.name && k.user == key.user && k.group == key.group;
        match usable.iter_mut().find(same) {
            Some(kept) => {
                let later = kept.expires != 0 && (key.expires == 0 || key.expires > kept.expires);
                if later {
                    *kept = key;
                }
            }
            None => usable.push(key),
        }
    }
    usable.pop().ok_or_else(|| {
        let ago = now - last_expiry;
        let ago = if ago >= 2 * 86_400 {
            format!("{} days ago", ago / 86_400)
        } else {
            format!("{ago} s ago")
        };
        format!(
            "every key in it has expired (the last {ago}); make a new one with \
             `xrdsssadmin ... add` and give it to the server too"
        )
    })
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = "0 u:anybody g:usrgroup n:test N:7711408931502817281 c:1795452305 e:0 f:0 \
                        k:622e0ae0eb795bdd59c7c857111e681562f6dd2850b5985c20ed2eb55bc42980";

    #[test]
    fn keys_are_read_as_xrdsssadmin_writes_them() {
        let keys = parse(&format!("{LINE}\n\n")).unwrap();
        assert_eq!(keys.len(), 1);
        let key = &keys[0];
        assert_eq!(
            (
                key.id,
                key.name.as_str(),
                key.user.as_str(),
                key.group.as_str()
            ),
            (7711408931502817281, "test", "anybody", "usrgroup")
        );
        assert_eq!(key.bytes().len(), 32);
        assert_eq!(key.bytes()[..3], [0x62, 0x2e, 0x0a]);
        assert!(!format!("{key:?}").contains("622e0ae0"), "{key:?}");
        // Defaults of XrdSecsssKT for what a line leaves out.
        let bare = &parse("0 N:5 k:00112233").unwrap()[0];
        assert_eq!(
            (bare.name.as_str(), bare.user.as_str()),
            ("nowhere", "nobody")
        );
    }

    #[test]
    fn hostile_or_truncated_lines_are_clear_errors_without_the_key() {
        let secret = "622e0ae0eb795bdd59c7c857111e6815";
        let cases = [
            ("x u:a N:1 k:00112233", "format"),
            ("0 u:a N:1", "(k:) is missing"),
            ("0 u:a k:00112233", "(N:) is missing"),
            ("0 N:1x k:00112233", "not a number"),
            (&*format!("0 N:1 k:{secret}0"), "hexadecimal"),
            (&*format!("0 N:1 k:{secret}zz"), "hexadecimal"),
            (&*format!("0 N:1 k:{}", "00".repeat(129)), "hexadecimal"),
            (
                &*format!("0 N:1 n:{} k:00", "n".repeat(192)),
                "longer than 191",
            ),
            (&LINE[..LINE.len() - 1], "hexadecimal"),
        ];
        for (text, expected) in cases {
            let e = parse(&format!("{LINE}\n{text}\n")).unwrap_err();
            assert!(e.contains("line 2") && e.contains(expected), "{text}: {e}");
            assert!(!e.contains(secret) && !e.contains("622e0ae0"), "{e}");
        }
    }

    #[test]
    fn the_client_key_is_the_last_unexpired_one() {
        let key = |name: &str, id: i64, expires: i64| {
            parse(&format!("0 n:{name} N:{id} e:{expires} k:00112233")).unwrap()[0].clone()
        };
        let chosen = choose(vec![key("a", 1, 0), key("b", 2, 50), key("b", 3, 200)], 100).unwrap();
        assert_eq!(chosen.id, 3);
        let chosen = choose(vec![key("b", 3, 200), key("b", 4, 0), key("a", 1, 0)], 100).unwrap();
        assert_eq!(chosen.id, 1);
        let e = choose(vec![key("a", 1, 50), key("b", 2, 90)], 100).unwrap_err();
        assert!(e.contains("expired (the last 10 s ago)"), "{e}");
        assert!(choose(vec![], 100).unwrap_err().contains("no key"));
    }
}
