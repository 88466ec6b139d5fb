//! The options of opening a file, defined once: their names, kinds, defaults and what each means
//! ([`OPEN_OPTIONS`]), and how a value given by name is checked and set ([`OpenOptions::set`]).
//! The bindings parse `cherenkov.open`'s keywords by this table, the Python API documents itself
//! from it, uproot's handler, fsspec and Dask pass exactly these names through, and a test holds
//! the README's list to it. Everything is set before the file opens; nothing changes after.

use super::speculation::Speculation;
use crate::error::{Error, Result};
use crate::format::interpretation::MemberDims;
use crate::source::cache::CacheOptions;
use crate::source::redact::Secret;
use crate::source::SourceOptions;
use std::path::PathBuf;
use std::time::Duration;

/// What kind of value an option takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptionKind {
    Bool,
    /// A whole number.
    Count,
    /// A number of seconds.
    Seconds,
    /// A number between 0 and 1.
    Fraction,
    /// A number of bytes or bytes per second.
    Bytes,
    /// Text (a token).
    Text,
    /// A file or directory.
    Path,
}

/// One option of opening a file.
#[derive(Clone, Copy, Debug)]
pub struct OpenOption {
    pub name: &'static str,
    pub kind: OptionKind,
    /// The default as users read it.
    pub default: &'static str,
    /// What the option does, in a sentence or two.
    pub doc: &'static str,
}

/// A value given for an option.
#[derive(Clone, Debug, PartialEq)]
pub enum OptionValue {
    Bool(bool),
    Number(f64),
    Text(String),
}

/// Every option of opening a file, in the order the documentation lists them.
pub const OPEN_OPTIONS: &[OpenOption] = &[
    OpenOption {
        name: "connections",
        kind: OptionKind::Count,
        default: "2 (XRootD), 8 (HTTP)",
        doc: "Parallel connections per file (XRootD) or requests in flight (HTTP), where reading \
              starts: with adaptive_streams the count then follows the link.",
    },
    OpenOption {
        name: "adaptive_streams",
        kind: OptionKind::Bool,
        default: "True",
        doc: "Follow the link: the stream count doubles while doubling brings 1.3x the throughput \
              or more, goes back when it does not, and halves when the server pushes back \
              (kXR_wait, HTTP 503/429, a refused connection), within 1 to 16 (32 HTTP requests). \
              False keeps `connections` fixed.",
    },
    OpenOption {
        name: "timeout",
        kind: OptionKind::Seconds,
        default: "60 (XRootD), 30 (HTTP)",
        doc: "Seconds a request may wait for the server before it is retried or fails, and the \
              window over which a transfer must keep min_rate.",
    },
    OpenOption {
        name: "retries",
        kind: OptionKind::Count,
        default: "8",
        doc: "Retries of a failed read before it is reported; waits grow from 0.2 s to at most \
              2 s, each drawn between half and all of its step.",
    },
    OpenOption {
        name: "retry_window",
        kind: OptionKind::Seconds,
        default: "5",
        doc: "No retry starts later than this after a request's first failure: a blip shorter \
              than the window costs a delay, not the read.",
    },
    OpenOption {
        name: "min_rate",
        kind: OptionKind::Bytes,
        default: "32768",
        doc: "Slowest transfer accepted, in bytes per second: a transfer that receives fewer \
              than min_rate x timeout bytes over any timeout seconds is abandoned at once (and \
              retried, or read from another replica), whatever its size.",
    },
    OpenOption {
        name: "trace",
        kind: OptionKind::Bool,
        default: "False",
        doc: "Record every request (offset, length, send and answer times) for File.trace() and \
              cherenkov.plots.",
    },
    OpenOption {
        name: "discover",
        kind: OptionKind::Bool,
        default: "True",
        doc: "root:// only: read from every data server a redirector names for the file \
              (kXR_locate), as replicas; False reads from the one it redirects to.",
    },
    OpenOption {
        name: "verify_checksums",
        kind: OptionKind::Bool,
        default: "False",
        doc: "Replicas must also have the same checksum on their servers (XRootD kXR_query), \
              else the open fails naming each one's; a server that cannot tell fails it too.",
    },
    OpenOption {
        name: "cache",
        kind: OptionKind::Path,
        default: "$CHERENKOV_CACHE, else none",
        doc: "A directory keeping the byte ranges read, so that later passes read the disk; a \
              file changed on its server is read anew, never from old entries.",
    },
    OpenOption {
        name: "direct_io",
        kind: OptionKind::Bool,
        default: "False",
        doc: "Read local files and the cache's entries around the page cache (O_DIRECT), which \
              they then neither fill nor evict; a filesystem that refuses it is read as usual, \
              with a warning. Worth it for a cold file read once that is large against free \
              memory; repeated reads and many readers of one file are faster through the page \
              cache.",
    },
    OpenOption {
        name: "cache_max_bytes",
        kind: OptionKind::Bytes,
        default: "20 GiB",
        doc: "Bytes the cache keeps at most; the least recently used entries go first.",
    },
    OpenOption {
        name: "token",
        kind: OptionKind::Text,
        default: "found where WLCG says",
        doc: "A bearer token sent with every request (HTTP Authorization: Bearer, XRootD ztn); \
              by default $BEARER_TOKEN, the file $BEARER_TOKEN_FILE, $XDG_RUNTIME_DIR/bt_u<uid> \
              or /tmp/bt_u<uid>, sent to https:// and roots:// only.",
    },
    OpenOption {
        name: "ca",
        kind: OptionKind::Path,
        default: "the system's, $X509_CERT_DIR, $SSL_CERT_FILE",
        doc: "A CA certificate file or directory: the only CAs a server's certificate is checked \
              against.",
    },
    OpenOption {
        name: "insecure_skip_verify",
        kind: OptionKind::Bool,
        default: "False",
        doc: "Check no certificate at all: for tests with made-up certificates only.",
    },
    OpenOption {
        name: "sss_keytab",
        kind: OptionKind::Path,
        default: "found as XrdCl finds it",
        doc: "The keytab of an XRootD server asking for sss ($XrdSecSSSKT, $XrdSecsssKT, the path \
              the server names, ~/.xrd/sss.keytab, /etc/xrootd/sss.keytab); it must be private.",
    },
    OpenOption {
        name: "speculate",
        kind: OptionKind::Bool,
        default: "True",
        doc: "Lazy chunks fetch a set of branches outside the learned set (a trigger's extras) \
              with it, ahead of use, when recent chunks used it often enough.",
    },
    OpenOption {
        name: "speculate_threshold",
        kind: OptionKind::Fraction,
        default: "0.3",
        doc: "A set used in more than this fraction of recent chunks is fetched ahead.",
    },
    OpenOption {
        name: "speculate_budget",
        kind: OptionKind::Fraction,
        default: "0.2",
        doc: "Bytes fetched ahead and never used stay within this fraction of the bytes read, or \
              the worst set stops being speculated.",
    },
    OpenOption {
        name: "declared_dims",
        kind: OptionKind::Bool,
        default: "False",
        doc: "A fixed-size array member of the objects of a split TClonesArray or \
              std::vector<Class> (Float_t x[6][3]) keeps the dimensions its class declares \
              (var * 6 * 3 * float32) instead of uproot's flattened ones (var * 18 * float32); \
              so do Double32_t/Float16_t leaf lists whose leaf title has no dimensions.",
    },
];

/// Everything opening a file is told: where its bytes come from and how reads of it behave.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpenOptions {
    pub source: SourceOptions,
    pub speculation: Speculation,
    /// The shape of fixed-size array members of split collections.
    pub member_dims: MemberDims,
    /// The cache's cap, kept apart until `finish` (it may come before the directory).
    cache_max_bytes: Option<u64>,
}

impl OpenOptions {
    /// Set option `name` to `value`, checked against its kind.
    pub fn set(&mut self, name: &str, value: OptionValue) -> Result<()> {
        let option = OPEN_OPTIONS
            .iter()
            .find(|o| o.name == name)
            .ok_or_else(|| {
                let names: Vec<&str> = OPEN_OPTIONS.iter().map(|o| o.name).collect();
                Error::InvalidArgument(format!(
                    "unknown option '{name}' (options: {})",
                    names.join(", ")
                ))
            })?;
        let value = Checked::new(option, value)?;
        let source = &mut self.source;
        let speculation = &mut self.speculation;
        match name {
            "connections" => source.connections = Some(value.count()?),
            "adaptive_streams" => source.adaptive_streams = Some(value.flag()),
            "timeout" => source.request.timeout = Some(value.seconds(false)?),
            "retries" => source.request.retries = Some(value.count()?),
            "retry_window" => source.request.retry_window = Some(value.seconds(true)?),
            "min_rate" => source.request.min_rate = Some(value.positive()?.ceil() as u64),
            "trace" => source.trace = value.flag(),
            "discover" => source.discover = Some(value.flag()),
            "verify_checksums" => source.verify_checksums = value.flag(),
            "cache" => {
                source.cache = Some(CacheOptions {
                    dir: value.path(),
                    max_bytes: CacheOptions::DEFAULT_MAX_BYTES,
                    direct_io: false,
                })
            }
            "cache_max_bytes" => self.cache_max_bytes = Some(value.count()?),
            "direct_io" => source.direct_io = value.flag(),
            "token" => source.token = Some(Secret::new(value.text())),
            "ca" => source.tls.ca = Some(value.path()),
            "insecure_skip_verify" => source.tls.insecure_skip_verify = value.flag(),
            "sss_keytab" => source.sss_keytab = Some(value.path()),
            "speculate" => speculation.enabled = value.flag(),
            "speculate_threshold" => speculation.threshold = value.fraction()?,
            "speculate_budget" => speculation.budget = value.fraction()?,
            "declared_dims" => {
                self.member_dims = match value.flag() {
                    true => MemberDims::Declared,
                    false => MemberDims::Uproot,
                }
            }
            _ => unreachable!("every option of the table is set above"),
        }
        Ok(())
    }

    /// The options as set, with the defaults that come from the environment: the disk cache in
    /// `$CHERENKOV_CACHE` when none is given.
    pub fn finish(mut self) -> OpenOptions {
        if self.source.cache.is_none() {
            self.source.cache = std::env::var_os("CHERENKOV_CACHE")
                .filter(|d| !d.is_empty())
                .map(|dir| CacheOptions {
                    dir: PathBuf::from(dir),
                    max_bytes: CacheOptions::DEFAULT_MAX_BYTES,
                    direct_io: false,
                });
        }
        if let Some(cache) = &mut self.source.cache {
            cache.direct_io = self.source.direct_io;
        }
        if let (Some(cache), Some(max)) = (&mut self.source.cache, self.cache_max_bytes) {
            cache.max_bytes = max;
        }
        self
    }
}

/// A value of the kind its option takes, and the option's name for errors.
struct Checked {
    name: &'static str,
    value: OptionValue,
}

impl Checked {
    fn new(option: &OpenOption, value: OptionValue) -> Result<Checked> {
        let fits = matches!(
            (option.kind, &value),
            (OptionKind::Bool, OptionValue::Bool(_))
                | (
                    OptionKind::Count
                        | OptionKind::Seconds
                        | OptionKind::Fraction
                        | OptionKind::Bytes,
                    OptionValue::Number(_)
                )
                | (OptionKind::Text | OptionKind::Path, OptionValue::Text(_))
        );
        if !fits {
            return Err(Error::InvalidArgument(format!(
                "option {} takes {}, got {value:?}",
                option.name,
                match option.kind {
                    OptionKind::Bool => "True or False",
                    OptionKind::Text => "text",
                    OptionKind::Path => "a path",
                    _ => "a number",
                }
            )));
        }
        Ok(Checked {
            name: option.name,
            value,
        })
    }

    fn invalid(&self, what: &str) -> Error {
        Error::InvalidArgument(format!("{} must be {what}", self.name))
    }

    fn number(&self) -> f64 {
        match self.value {
            OptionValue::Number(n) => n,
            _ => f64::NAN,
        }
    }

    fn flag(&self) -> bool {
        matches!(self.value, OptionValue::Bool(true))
    }

    fn text(&self) -> String {
        match &self.value {
            OptionValue::Text(t) => t.clone(),
            _ => String::new(),
        }
    }

    fn path(&self) -> PathBuf {
        PathBuf::from(self.text())
    }

    fn count<T: TryFrom<u64>>(&self) -> Result<T> {
        let n = self.number();
        let whole = n.is_finite() && n >= 0.0 && n.fract() == 0.0;
        let minimum = if self.name == "connections" { 1.0 } else { 0.0 };
        whole
            .then_some(n as u64)
            .filter(|&n| n as f64 >= minimum)
            .and_then(|n| T::try_from(n).ok())
            .ok_or_else(|| self.invalid(&format!("a whole number of at least {minimum}, got {n}")))
    }

    fn positive(&self) -> Result<f64> {
        let n = self.number();
        (n.is_finite() && n > 0.0)
            .then_some(n)
            .ok_or_else(|| self.invalid(&format!("a positive number, got {n}")))
    }

    fn seconds(&self, zero_ok: bool) -> Result<Duration> {
        let t = self.number();
        if t.is_finite() && (t > 0.0 || (zero_ok && t == 0.0)) {
            Ok(Duration::from_secs_f64(t))
        } else {
            Err(self.invalid("a positive number of seconds"))
        }
    }

    fn fraction(&self) -> Result<f64> {
        let f = self.number();
        (0.0..=1.0)
            .contains(&f)
            .then_some(f)
            .ok_or_else(|| self.invalid(&format!("a fraction between 0 and 1, got {f}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_option_of_the_table_can_be_set() {
        for option in OPEN_OPTIONS {
            let value = match option.kind {
                OptionKind::Bool => OptionValue::Bool(true),
                OptionKind::Fraction => OptionValue::Number(0.5),
                OptionKind::Text | OptionKind::Path => OptionValue::Text("x".into()),
                _ => OptionValue::Number(3.0),
            };
            OpenOptions::default().set(option.name, value).unwrap();
        }
    }

    #[test]
    fn values_are_checked_by_kind_and_range() {
        let mut options = OpenOptions::default();
        let bad = [
            ("connections", OptionValue::Number(0.0)),
            ("connections", OptionValue::Number(1.5)),
            ("timeout", OptionValue::Number(-1.0)),
            ("min_rate", OptionValue::Number(0.0)),
            ("speculate_budget", OptionValue::Number(1.5)),
            ("trace", OptionValue::Number(1.0)),
            ("nonsense", OptionValue::Bool(true)),
        ];
        for (name, value) in bad {
            let e = options.set(name, value).unwrap_err().to_string();
            assert!(e.contains(name), "{e}");
        }
        options
            .set("retry_window", OptionValue::Number(0.0))
            .unwrap();
        assert_eq!(options.source.request.retry_window, Some(Duration::ZERO));
    }

    #[test]
    fn the_table_states_the_defaults_in_use() {
        let default_of = |name: &str| {
            OPEN_OPTIONS
                .iter()
                .find(|o| o.name == name)
                .unwrap()
                .default
        };
        let speculation = Speculation::default();
        assert_eq!(
            default_of("speculate"),
            if speculation.enabled { "True" } else { "False" }
        );
        assert_eq!(
            default_of("speculate_threshold"),
            speculation.threshold.to_string()
        );
        assert_eq!(
            default_of("speculate_budget"),
            speculation.budget.to_string()
        );
        let retry = crate::source::retry::RetryPolicy::default();
        assert_eq!(default_of("retries"), retry.retries.to_string());
        assert_eq!(
            default_of("retry_window"),
            retry.window.as_secs().to_string()
        );
        let min_rate = crate::source::DEFAULT_MIN_RATE.to_string();
        assert_eq!(default_of("min_rate"), min_rate);
        let (xrootd, http) = (
            crate::source::xrootd::XrootdOptions::default(),
            crate::source::http::HttpOptions::default(),
        );
        let both = |x: String, h: String| format!("{x} (XRootD), {h} (HTTP)");
        let timeouts = both(
            xrootd.policy.timeout.as_secs().to_string(),
            http.policy.timeout.as_secs().to_string(),
        );
        assert_eq!(default_of("timeout"), timeouts);
        let connections = both(xrootd.connections.to_string(), http.connections.to_string());
        assert_eq!(default_of("connections"), connections);
        let cap = format!("{} GiB", CacheOptions::DEFAULT_MAX_BYTES >> 30);
        assert_eq!(default_of("cache_max_bytes"), cap);
    }

    #[test]
    fn the_cache_cap_applies_whichever_comes_first() {
        let mut options = OpenOptions::default();
        options
            .set("cache_max_bytes", OptionValue::Number(1000.0))
            .unwrap();
        options
            .set("cache", OptionValue::Text("/tmp/c".into()))
            .unwrap();
        let cache = options.finish().source.cache.unwrap();
        assert_eq!(
            (cache.dir, cache.max_bytes),
            (PathBuf::from("/tmp/c"), 1000)
        );
    }
}
