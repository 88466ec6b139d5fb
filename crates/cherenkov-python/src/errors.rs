//! cherenkov's Python exceptions, one per kind of core error.

use cherenkov_core::Error;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

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
    SourceError,
    CherenkovError,
    "The bytes could not be read (file, server, network)."
);
create_exception!(
    _core,
    FileChangedError,
    SourceError,
    "The file changed on its server since it was opened, or since its metadata was learned."
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

pub fn to_py(e: Error) -> PyErr {
    // The last gate before Python: no secret of a URL crosses it (see `source::redact`).
    let msg = cherenkov_core::source::redact::redact(&e.to_string());
    match e {
        Error::Format { .. } => FormatError::new_err(msg),
        Error::Io { .. } if cherenkov_core::source::is_file_changed(&e) => {
            FileChangedError::new_err(msg)
        }
        Error::Io { cause, .. } => {
            let err = SourceError::new_err(msg);
            // An operating-system error stays visible as the exception's cause (errno included).
            if let Some(os) = cause
                .as_deref()
                .and_then(|c| c.downcast_ref::<std::io::Error>())
            {
                Python::attach(|py| {
                    let errno = os.raw_os_error().unwrap_or(0);
                    let os_err = pyo3::exceptions::PyOSError::new_err((errno, os.to_string()));
                    err.set_cause(py, Some(os_err));
                });
            }
            err
        }
        Error::UnsupportedBranch { .. } => UnsupportedBranch::new_err(msg),
        Error::NotFound { .. } => NotFoundError::new_err(msg),
        Error::InvalidArgument(_) => pyo3::exceptions::PyValueError::new_err(msg),
        Error::Cancelled(_) => CherenkovError::new_err(msg),
    }
}
