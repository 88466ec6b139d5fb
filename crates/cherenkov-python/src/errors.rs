//! cherenkov's Python exceptions, one per kind of core error. `SourceError` (the bytes could not
//! be had) is also an `OSError`, as I/O errors are in Python (uproot's sources raise them), and
//! the failures callers handle apart (a missing file, refused credentials, a timeout) are also
//! the builtin exception Python code catches for them: `except FileNotFoundError` works.

use cherenkov_core::{Error, IoKind};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

create_exception!(
    _core,
    CherenkovError,
    PyException,
    "Base of all cherenkov errors."
);
create_exception!(
    _core,
    FormatError,
    CherenkovError,
    "The file is not valid ROOT where it was read."
);
create_exception!(
    _core,
    UnsupportedBranch,
    CherenkovError,
    "The branch's type cannot be interpreted."
);
create_exception!(
    _core,
    NotFoundError,
    CherenkovError,
    "No such object, tree or branch."
);

/// The classes made at import, each with two bases (`create_exception!` takes one): its name,
/// the name of its second base (a builtin, or `SourceError` itself), its docstring.
/// Source errors, each also the builtin error Python code catches (the first is their base);
/// the last, a changed file, has no kind of its own.
const CLASSES: [(&str, &str, &str); 5] = [
    (
        "SourceError",
        "OSError",
        "The bytes could not be read (file, server, network).",
    ),
    (
        "SourceNotFoundError",
        "FileNotFoundError",
        "No such file on the server or disk (HTTP 404, kXR_NotFound, ENOENT).",
    ),
    (
        "SourcePermissionError",
        "PermissionError",
        "The credentials were refused, or none were found where some are needed (HTTP 401 or \
         403, kXR_NotAuthorized, a refused login).",
    ),
    (
        "SourceTimeoutError",
        "TimeoutError",
        "The server was silent, or slower than the slowest transfer accepted (min_rate), for \
         the request timeout, and retrying did not help.",
    ),
    (
        "FileChangedError",
        "OSError",
        "The file changed on its server since it was opened, or since its metadata was learned.",
    ),
];

/// The kind of I/O failure each of `CLASSES` is raised for (`Other`: plain `SourceError`).
const KINDS: [IoKind; 4] = [
    IoKind::Other,
    IoKind::NotFound,
    IoKind::Forbidden,
    IoKind::TimedOut,
];

static SOURCE_ERRORS: PyOnceLock<Vec<Py<PyType>>> = PyOnceLock::new();

/// The classes of `CLASSES`, made once: `class SourceError(CherenkovError, OSError)`, then
/// `class SourceNotFoundError(SourceError, FileNotFoundError)`, ...
fn source_errors(py: Python<'_>) -> PyResult<&Vec<Py<PyType>>> {
    SOURCE_ERRORS.get_or_try_init(py, || {
        let builtins = py.import("builtins")?;
        let make_type = builtins.getattr("type")?;
        let mut made: Vec<Py<PyType>> = Vec::new();
        for (name, builtin, doc) in CLASSES {
            let first = match made.first() {
                None => py.get_type::<CherenkovError>().into_any(),
                Some(source_error) => source_error.bind(py).clone().into_any(),
            };
            let bases = PyTuple::new(py, [first, builtins.getattr(builtin)?])?;
            let namespace = PyDict::new(py);
            namespace.set_item("__doc__", doc)?;
            namespace.set_item("__module__", "cherenkov")?;
            let class = make_type.call1((name, bases, namespace))?;
            made.push(class.cast_into::<PyType>()?.unbind());
        }
        Ok(made)
    })
}

/// Add `SourceError` and its typed subclasses to the module.
pub fn add_source_errors(m: &Bound<'_, PyModule>) -> PyResult<()> {
    for (class, (name, _, _)) in source_errors(m.py())?.iter().zip(CLASSES) {
        m.add(name, class.bind(m.py()))?;
    }
    Ok(())
}

/// The exception of an I/O error of `kind`, saying `message`.
/// The error of class `at` in `CLASSES`.
fn source_error(py: Python<'_>, at: usize, message: String) -> PyErr {
    match source_errors(py) {
        Ok(classes) => PyErr::from_type(classes[at].bind(py).clone(), message),
        Err(e) => e,
    }
}

pub fn to_py(e: Error) -> PyErr {
    // The last gate before Python: no secret of a URL crosses it (see `source::redact`).
    let msg = cherenkov_core::source::redact::redact(&e.to_string());
    match e {
        Error::Format { .. } => FormatError::new_err(msg),
        Error::Io {
            ref cause, kind, ..
        } => Python::attach(|py| {
            let at = match cherenkov_core::source::is_file_changed(&e) {
                true => CLASSES.len() - 1,
                false => KINDS.iter().position(|k| *k == kind).unwrap_or(0),
            };
            let err = source_error(py, at, msg);
            // An operating-system error stays visible as the exception's cause (errno included).
            if let Some(os) = cause
                .as_deref()
                .and_then(|c| c.downcast_ref::<std::io::Error>())
            {
                let errno = os.raw_os_error().unwrap_or(0);
                let os_err = pyo3::exceptions::PyOSError::new_err((errno, os.to_string()));
                err.set_cause(py, Some(os_err));
            }
            err
        }),
        Error::UnsupportedBranch { .. } => UnsupportedBranch::new_err(msg),
        Error::NotFound { .. } => NotFoundError::new_err(msg),
        Error::InvalidArgument(_) => pyo3::exceptions::PyValueError::new_err(msg),
        Error::Cancelled(_) => CherenkovError::new_err(msg),
    }
}
