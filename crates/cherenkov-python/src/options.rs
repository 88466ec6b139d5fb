//! The options of opening a file, read once from Python keywords: `cherenkov.open`, uproot's
//! handler and the fsspec filesystem all pass the same names to `RootFile.open` / `RawSource.open`.

use cherenkov_core::engine::speculation::Speculation;
use cherenkov_core::source::cache::CacheOptions;
use cherenkov_core::source::credentials::TlsOptions;
use cherenkov_core::source::redact::Secret;
use cherenkov_core::source::SourceOptions;
use pyo3::conversion::FromPyObjectOwned;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;
use std::time::Duration;

/// Every keyword `open` accepts (see `cherenkov.open` for what each means).
pub const OPEN_OPTIONS: &[&str] = &[
    "connections",
    "timeout",
    "retries",
    "retry_window",
    "min_rate",
    "trace",
    "discover",
    "verify_checksums",
    "cache",
    "cache_max_bytes",
    "token",
    "ca",
    "insecure_skip_verify",
    "adaptive_streams",
    "sss_keytab",
    "speculate",
    "speculate_threshold",
    "speculate_budget",
];

/// The options given as keywords, checked; `None` values mean the default. Without `cache`, the
/// directory in `$CHERENKOV_CACHE` (if set) is the cache.
pub fn open_options(given: Option<&Bound<'_, PyDict>>) -> PyResult<SourceOptions> {
    if let Some(d) = given {
        for key in d.keys() {
            let key: String = key.extract()?;
            if !OPEN_OPTIONS.contains(&key.as_str()) {
                return Err(PyTypeError::new_err(format!(
                    "open() got an unexpected option '{key}' (options: {})",
                    OPEN_OPTIONS.join(", ")
                )));
            }
        }
    }
    let connections: Option<usize> = option(given, "connections")?;
    if connections == Some(0) {
        return Err(PyValueError::new_err("connections must be at least 1"));
    }
    let min_rate = match option::<f64>(given, "min_rate")? {
        Some(r) if !(r.is_finite() && r > 0.0) => {
            return Err(PyValueError::new_err(
                "min_rate must be a positive number of bytes per second",
            ))
        }
        r => r.map(|r| r.ceil() as u64),
    };
    let cache_dir = option::<PathBuf>(given, "cache")?.or_else(|| {
        std::env::var_os("CHERENKOV_CACHE")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
    });
    let cache_max_bytes: Option<u64> = option(given, "cache_max_bytes")?;
    Ok(SourceOptions {
        connections,
        timeout: seconds("timeout", option(given, "timeout")?, false)?,
        retries: option(given, "retries")?,
        retry_window: seconds("retry_window", option(given, "retry_window")?, true)?,
        min_rate,
        trace: option(given, "trace")?.unwrap_or(false),
        discover: Some(option(given, "discover")?.unwrap_or(true)),
        verify_checksums: option(given, "verify_checksums")?.unwrap_or(false),
        cache: cache_dir.map(|dir| CacheOptions {
            dir,
            max_bytes: cache_max_bytes.unwrap_or(CacheOptions::DEFAULT_MAX_BYTES),
        }),
        token: option::<String>(given, "token")?.map(Secret::new),
        adaptive_streams: option(given, "adaptive_streams")?,
        sss_keytab: option(given, "sss_keytab")?,
        tls: TlsOptions {
            ca: option(given, "ca")?,
            insecure_skip_verify: option(given, "insecure_skip_verify")?.unwrap_or(false),
        },
        ..SourceOptions::default()
    })
}

/// Whether and how far reads fetch ahead what they have not asked for yet (`speculate`,
/// `speculate_threshold`, `speculate_budget`; see `engine::speculation`).
pub fn speculation_options(given: Option<&Bound<'_, PyDict>>) -> PyResult<Speculation> {
    let defaults = Speculation::default();
    let fraction = |name: &str, default: f64| -> PyResult<f64> {
        match option::<f64>(given, name)? {
            None => Ok(default),
            Some(f) if (0.0..=1.0).contains(&f) => Ok(f),
            Some(f) => Err(PyValueError::new_err(format!(
                "{name} must be a fraction between 0 and 1, got {f}"
            ))),
        }
    };
    Ok(Speculation {
        enabled: option(given, "speculate")?.unwrap_or(defaults.enabled),
        threshold: fraction("speculate_threshold", defaults.threshold)?,
        budget: fraction("speculate_budget", defaults.budget)?,
    })
}

/// One keyword's value, `None` when absent or None.
fn option<'py, T: FromPyObjectOwned<'py>>(
    given: Option<&Bound<'py, PyDict>>,
    name: &str,
) -> PyResult<Option<T>> {
    let Some(value) = given.map(|d| d.get_item(name)).transpose()?.flatten() else {
        return Ok(None);
    };
    if value.is_none() {
        return Ok(None);
    }
    let extracted: PyResult<T> = value.extract::<T>().map_err(Into::into);
    extracted
        .map(Some)
        .map_err(|e| PyTypeError::new_err(format!("option {name}: {e}")))
}

/// A duration given in seconds: positive (or zero when `zero_ok`) and finite.
pub fn seconds(what: &str, value: Option<f64>, zero_ok: bool) -> PyResult<Option<Duration>> {
    let Some(t) = value else { return Ok(None) };
    if t.is_finite() && (t > 0.0 || (zero_ok && t == 0.0)) {
        Ok(Some(Duration::from_secs_f64(t)))
    } else {
        Err(PyValueError::new_err(format!(
            "{what} must be a positive number of seconds"
        )))
    }
}
